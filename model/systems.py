"""Each system's model class, and the model it runs on where the network partitions or a flag only that
model has is set (docs/systems.md): the tables `model.registry` picks a protocol's model from and a
variant (`model.variant`) checks its declaration against. The base module (`model.actions`) imports
none of them, and nothing here imports the variants."""

from __future__ import annotations

from hwm.model.actions import Model
from hwm.model.bookkeeper import BookKeeperModel
from hwm.model.kafka import KafkaModel
from hwm.model.kafka_partition import PartitionedKafkaModel
from hwm.model.partition import PartitionedRaftModel
from hwm.model.raft import RaftModel
from hwm.model.zab import ZabModel
from hwm.model.zab_partition import PartitionedZabModel

MODELS: dict[str, type[Model]] = {"raft": RaftModel, "zab": ZabModel, "kafka": KafkaModel,
                                  "bookkeeper": BookKeeperModel}
# BookKeeper's model has no partitions yet.
PARTITIONED: dict[str, tuple[type[Model], tuple[str, ...]]] = {
    "raft": (PartitionedRaftModel, ("check_quorum", "lease_reads")),
    "zab": (PartitionedZabModel, ("check_quorum",)),
    "kafka": (PartitionedKafkaModel, ()),
}

__all__ = ["MODELS", "PARTITIONED"]
