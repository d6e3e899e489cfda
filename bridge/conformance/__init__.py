"""The conformance machine: Hypothesis drives the implementation against the model, step by step.

A `ConformanceMachine` holds a model state and a `SimCluster` of real replicas. Each rule is one
model action, drawn from the actions the model enables in the current state, applied to both.
After every rule:

1. the implementation must take the step (a refusal is a divergence);
2. its snapshot must equal the model's (`snapshot_of(model_state)`), and on the async network its
   channels the model's channels: otherwise `Divergence`;
3. every `always` property must hold on the implementation's history (state properties on the new
   snapshot, step properties on the last two; ReadsAgree also on the values the real reads
   returned): otherwise `PropertyViolation`.

A failure is also written as an hwm-trace/1 file (the steps so far, with the failing property and
`expect: violation`, or `expect: holds` for a divergence, where the model sees nothing wrong) that
`hwm replay FILE --on both` takes as is; the exception's message names the file. Hypothesis runs
the minimal failing example last, so the file left behind is the shrunk one.

`machine_for(...)` makes a machine class for one protocol and configuration. A Kafka protocol gets
Kafka's model and replicas (`bridge.simcluster.kafka`), the ISR shrink among the rules, and Kafka's own
`always` properties (the acks=all promises) checked with the catalogue's. A BookKeeper protocol gets
the ledger's model and its bookies, writer and recovery client (`bridge.simcluster.bookkeeper`), with
the ledger's actions as the rules.

The parts: `machine.py` (the machines, `machine_for`, the failures and the default bounds `RPC` and
`ASYNC`), `hunting.py` (`hunt`, `conformance_settings`), `kill_matrix.py` (the broken presets'
hunts).
"""

from hwm.bridge.conformance.hunting import Hunt, conformance_settings, hunt
from hwm.bridge.conformance.machine import (
    ASYNC,
    RPC,
    ConformanceFailure,
    ConformanceMachine,
    Divergence,
    PropertyViolation,
    machine_for,
    protocol_spec,
)

__all__ = ["ASYNC", "RPC", "ConformanceFailure", "ConformanceMachine", "Divergence", "Hunt", "PropertyViolation",
           "conformance_settings", "hunt", "machine_for", "protocol_spec"]
