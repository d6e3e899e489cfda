"""The one place a protocol picks its model class: each system's module registers nothing itself, and
the base module (`model.actions`) imports none of them."""

from __future__ import annotations

from hwm.model.actions import Model
from hwm.model.state import Config
from hwm.properties.protocol import Protocol


def build_model(protocol: Protocol, config: Config) -> Model:
    """The model of `protocol` under `config`: the one place a protocol picks its model class."""
    if config.max_partitions and protocol.system != "raft":
        # ValueError: the model cannot run this config (the tour skips it, the CLI says why).
        raise ValueError(f"partitions (max_partitions={config.max_partitions}) are modelled for the raft "
                         f"system only (model/partition.py); the {protocol.system} model has none yet")
    if protocol.system == "zab":
        from hwm.model.zab import ZabModel
        return ZabModel(protocol, config)
    if protocol.system == "bookkeeper":
        from hwm.model.bookkeeper import BookKeeperModel
        return BookKeeperModel(protocol, config)
    if protocol.system == "kafka":
        from hwm.model.kafka import KafkaModel
        return KafkaModel(protocol, config)
    if config.max_partitions or protocol.check_quorum or protocol.lease_reads:
        from hwm.model.partition import PartitionedRaftModel
        return PartitionedRaftModel(protocol, config)
    from hwm.model.raft import RaftModel
    return RaftModel(protocol, config)
