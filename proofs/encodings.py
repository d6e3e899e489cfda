"""Which z3 encoding stands for a protocol's model: the one place a protocol picks it, as
`model.registry.build_model` picks the model. Raft's is `proofs/symbolic.py`'s `Encoding`; ZAB's, Kafka's
and BookKeeper's (`proofs/zab.py`, `proofs/kafka.py`, `proofs/bookkeeper.py`) each extend it, so the
table lives above all four."""

from __future__ import annotations

from hwm.model.systems import PARTITIONED as MODELS_PARTITIONED
from hwm.proofs.bookkeeper import BookKeeperEncoding
from hwm.proofs.kafka import KafkaEncoding, PartitionedKafkaEncoding
from hwm.proofs.partition import PartitionedEncoding
from hwm.proofs.symbolic import Encoding
from hwm.proofs.zab import PartitionedZabEncoding, ZabEncoding
from hwm.properties.flags import Protocol

# Each system's encoding; a system not here (none today) has no z3 encoding.
ENCODINGS: dict[str, type[Encoding]] = {
    "raft": Encoding,
    "zab": ZabEncoding,
    "kafka": KafkaEncoding,
    "bookkeeper": BookKeeperEncoding,
}


# Each system's encoding on a network that partitions (proofs/partition.py): used where the bounds have
# partitions or a flag calls for the partitioned model, as `model.systems.PARTITIONED` says.
PARTITIONED: dict[str, type[Encoding]] = {"raft": PartitionedEncoding, "zab": PartitionedZabEncoding,
                                           "kafka": PartitionedKafkaEncoding}


def partitioned(protocol: Protocol, max_partitions: int | None = 0) -> type[Encoding] | None:
    """The partitioned encoding that stands for `protocol`'s model (partitions in the bounds, None for
    unbounded, or a flag that picks the partitioned model), or None when its model has no partitions."""
    cls = PARTITIONED.get(protocol.system)
    model = MODELS_PARTITIONED.get(protocol.system)
    if cls is None or model is None:
        return None
    return cls if max_partitions != 0 or any(getattr(protocol, flag) for flag in model[1]) else None


def encoding_for(protocol: Protocol, servers: int, max_log: int, *, max_partitions: int | None = 0,
                 **bounds) -> Encoding:
    """The encoding of `protocol`'s model (its system's, `ENCODINGS`, or its partitioned one) at these
    bounds."""
    encoding = ENCODINGS.get(protocol.system)
    if encoding is None:
        raise ValueError(f"no z3 encoding of the {protocol.system} model")
    cut = partitioned(protocol, max_partitions)
    if cut is not None:
        return cut(protocol, servers, max_log, max_partitions=max_partitions, **bounds)
    if max_partitions:
        raise ValueError(f"the z3 encoding of the {protocol.system} model has no partitions")
    return encoding(protocol, servers, max_log, **bounds)
