"""The one place a protocol picks its model class: each system's module registers nothing itself, and
the base module (`model.actions`) imports none of them."""

from __future__ import annotations

from hwm.model.actions import Model
from hwm.model.state import Config
from hwm.properties.protocol import Protocol


def build_model(protocol: Protocol, config: Config) -> Model:
    """The model of `protocol` under `config`: the one place a protocol picks its model class."""
    if protocol.system == "zab":
        from hwm.model.zab import ZabModel
        return ZabModel(protocol, config)
    if protocol.system == "bookkeeper":
        from hwm.model.bookkeeper import BookKeeperModel
        return BookKeeperModel(protocol, config)
    if protocol.system == "kafka":
        from hwm.model.kafka import KafkaModel
        return KafkaModel(protocol, config)
    from hwm.model.raft import RaftModel
    return RaftModel(protocol, config)
