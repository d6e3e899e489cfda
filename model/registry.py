"""The one place a protocol picks its model class: each system's module registers nothing itself, and
the base module (`model.actions`) imports none of them."""

from __future__ import annotations

from hwm.model.actions import Model
from hwm.model.state import Config
from hwm.properties.protocol import Protocol

import hwm.model.variant  # noqa: F401,E402 - registers the loader of variants' specs with `resolve`


def build_model(protocol: Protocol, config: Config) -> Model:
    """The model of `protocol` under `config`: the one place a protocol picks its model class. A
    variant's protocol (`model.variant`) gets its base's model class, under the variant's rules and
    properties."""
    if getattr(type(protocol), "variant", None) is not None:
        from hwm.model.variant import variant_model_class
        from hwm.model.variant_model import is_model_level, model_class
        model = _build(protocol, config)
        cls = variant_model_class(type(model))
        if is_model_level(type(protocol).variant):  # its own fields and actions (model.variant_model)
            cls = model_class(cls)
        return cls(protocol, config)
    return _build(protocol, config)


def _build(protocol: Protocol, config: Config) -> Model:
    if config.max_partitions and protocol.system == "bookkeeper":
        # ValueError: the model cannot run this config (the tour skips it, the CLI says why).
        raise ValueError(f"partitions (max_partitions={config.max_partitions}) are modelled for the raft, zab "
                         f"and kafka systems (model/partition.py, zab_partition.py, kafka_partition.py); the "
                         f"bookkeeper model has none yet")
    if protocol.system == "zab":
        if config.max_partitions or protocol.check_quorum:
            from hwm.model.zab_partition import PartitionedZabModel
            return PartitionedZabModel(protocol, config)
        from hwm.model.zab import ZabModel
        return ZabModel(protocol, config)
    if protocol.system == "bookkeeper":
        from hwm.model.bookkeeper import BookKeeperModel
        return BookKeeperModel(protocol, config)
    if protocol.system == "kafka":
        if config.max_partitions:
            from hwm.model.kafka_partition import PartitionedKafkaModel
            return PartitionedKafkaModel(protocol, config)
        from hwm.model.kafka import KafkaModel
        return KafkaModel(protocol, config)
    if config.max_partitions or protocol.check_quorum or protocol.lease_reads:
        from hwm.model.partition import PartitionedRaftModel
        return PartitionedRaftModel(protocol, config)
    from hwm.model.raft import RaftModel
    return RaftModel(protocol, config)
