"""Which validator judges a recorded run (`hwm validate`, locally or on Spark): the observed-state
validators of `checker.observed` and `checker.observed_kafka`, or the model's own steps."""

from __future__ import annotations

from hwm.checker.observed_kafka import ObservedKafkaValidator
from hwm.checker.validate import Validator

__all__ = ["recorded_run_validator"]


def recorded_run_validator(protocol, header, **options) -> Validator:
    """The validator `hwm validate` (and its coverage table, on either engine) judges a recorded run
    with. The Kafka system's presets on the rpc network: `ObservedKafkaValidator`, a correct broker's
    finer steps (a recorded broker shows a fetch's halves, a restart before the controller's answer,
    as `hwm test` observes them). The raft system's: the model's own steps with the round trip's
    acknowledgement deferred (`Validator(deferred_acknowledgements=True)`: a recorded leader may
    append its next entry before its follower's acknowledgement arrives). Every other system: the
    model's own steps, where a recorded ZAB server's round trip fits the model's. All refuse a
    consequence logged before its cause."""
    if protocol.system == "kafka" and header.network == "rpc":
        return ObservedKafkaValidator(protocol, header, **options)
    if protocol.system == "raft":
        return Validator(protocol, header, deferred_acknowledgements=True, **options)
    return Validator(protocol, header, **options)
