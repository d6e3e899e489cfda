"""Which z3 encoding stands for a protocol's model: the one place a protocol picks it, as
`model.registry.build_model` picks the model. Raft's is `proofs/symbolic.py`'s `Encoding`; ZAB's, Kafka's
and BookKeeper's (`proofs/zab.py`, `proofs/kafka.py`, `proofs/bookkeeper.py`) each extend it, so the
table lives above all four."""

from __future__ import annotations

from hwm.proofs.bookkeeper import BookKeeperEncoding
from hwm.proofs.kafka import KafkaEncoding
from hwm.proofs.symbolic import Encoding
from hwm.proofs.zab import ZabEncoding
from hwm.properties.flags import Protocol

# Each system's encoding; a system not here (none today) has no z3 encoding.
ENCODINGS: dict[str, type[Encoding]] = {
    "raft": Encoding,
    "zab": ZabEncoding,
    "kafka": KafkaEncoding,
    "bookkeeper": BookKeeperEncoding,
}


def encoding_for(protocol: Protocol, servers: int, max_log: int, **bounds) -> Encoding:
    """The encoding of `protocol`'s model (its system's, `ENCODINGS`) at these bounds."""
    encoding = ENCODINGS.get(protocol.system)
    if encoding is None:
        raise ValueError(f"no z3 encoding of the {protocol.system} model")
    return encoding(protocol, servers, max_log, **bounds)
