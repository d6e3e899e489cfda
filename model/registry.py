"""The one place a protocol picks its model class, from a table of the systems' models: each system's
module registers nothing itself, and the base module (`model.actions`) imports none of them."""

from __future__ import annotations

from hwm.model.actions import Model
from hwm.model.state import Config
from hwm.model.systems import MODELS, PARTITIONED
from hwm.model.variant import variant_model  # importing it registers the loader of variants' specs with `resolve`
from hwm.properties.protocol import Protocol


def build_model(protocol: Protocol, config: Config) -> Model:
    """The model of `protocol` under `config`: the one place a protocol picks its model class. A
    variant's protocol (`model.variant`) gets its base's model class, under the variant's rules and
    properties."""
    cls = _model_class(protocol, config)
    if getattr(type(protocol), "variant", None) is not None:
        return variant_model(cls, protocol, config)
    return cls(protocol, config)


def _model_class(protocol: Protocol, config: Config) -> type[Model]:
    partitioned = PARTITIONED.get(protocol.system)
    if partitioned is None:
        if config.max_partitions:
            # ValueError: the model cannot run this config (the tour skips it, the CLI says why).
            raise ValueError(f"partitions (max_partitions={config.max_partitions}) are modelled for the raft, zab "
                             f"and kafka systems (model/partition.py, zab_partition.py, kafka_partition.py); the "
                             f"{protocol.system} model has none yet")
        return MODELS[protocol.system]
    cls, flags = partitioned
    if config.max_partitions or any(getattr(protocol, flag) for flag in flags):
        return cls
    return MODELS[protocol.system]
