"""Replaying a saved trace on the model or on the implementation (a simulated cluster of real replicas).

An outcome is `violation` (which property, which entry, which step), `holds`, or
`blocked` (which step is not enabled under the protocol, and why: the model's guard, or the
implementation's own refusal).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from bridge.simcluster import SimCluster
from model.actions import build_model, from_step
from model.state import Config
from properties.catalogue import ALWAYS, BY_NAME
from properties.protocol import resolve
from properties.trace import Trace, TraceError


@dataclass
class Outcome:
    kind: str  # violation | holds | blocked
    on: str  # model | impl
    protocol: str
    property: str | None = None
    finding: str | None = None
    step: int | None = None  # 1-based step of the violation or of the blocked action
    reason: str | None = None
    rows: list = field(default_factory=list)  # (label, cluster view) per step, initial state first

    def summary(self) -> str:
        if self.kind == "violation":
            return f"violation of {self.property} at step {self.step}: {self.finding}"
        if self.kind == "blocked":
            return f"blocked at step {self.step}: {self.reason}"
        return "holds"


def watched_properties(trace: Trace):
    return [BY_NAME[trace.property]] if trace.property and BY_NAME[trace.property].kind == "always" else list(ALWAYS)


def replay_on_model(trace: Trace, protocol: str | dict | None = None) -> Outcome:
    """Run the trace's steps on the model; stop at the first violation of a watched property.

    A step that is not enabled ends the replay as `blocked`. Whether that is an
    acceptable outcome is the caller's decision (see `judge`).
    """
    name, proto = resolve(protocol if protocol is not None else trace.protocol)
    config = Config.from_mapping(trace.config, where=trace.source)
    model = build_model(proto, config)
    state = model.initial_state()
    outcome = Outcome("holds", "model", name, rows=[("(initial)", state)])
    props = watched_properties(trace)
    for number, step in enumerate(trace.steps, start=1):
        action = from_step(step)
        reason = model.why_not(state, action)
        if reason is not None:
            outcome.kind, outcome.step, outcome.reason = "blocked", number, f"{step}: {reason}"
            return outcome
        after = model.apply(state, action)
        outcome.rows.append((str(step), after))
        for p in props:
            finding = p.check(state, after) if p.on == "step" else p.check(after)
            if finding:
                outcome.kind, outcome.property, outcome.finding, outcome.step = "violation", p.name, finding, number
                return outcome
        state = after
    return outcome


def replay_on_impl(trace: Trace, protocol: str | dict | None = None) -> Outcome:
    """Run the trace's steps on real replicas (`bridge.simcluster.SimCluster`); stop at the first
    violation of a watched property, evaluated on the implementation's snapshots (step properties
    on the snapshots before and after each step). ReadsAgree also compares the values the real
    reads returned. A step the implementation refuses ends the replay as `blocked`, with its reason.
    """
    name, proto = resolve(protocol if protocol is not None else trace.protocol)
    config = Config.from_mapping(trace.config, where=trace.source)
    cluster = SimCluster(proto, config)
    before = cluster.snapshot()
    outcome = Outcome("holds", "impl", name, rows=[("(initial)", before)])
    props = watched_properties(trace)
    for number, step in enumerate(trace.steps, start=1):
        reason = cluster.apply_step(step)
        if reason is not None:
            outcome.kind, outcome.step, outcome.reason = "blocked", number, f"{step}: {reason}"
            return outcome
        after = cluster.snapshot()
        outcome.rows.append((str(step), after))
        for p in props:
            finding = p.check(before, after) if p.on == "step" else p.check(after)
            if not finding and p.name == "ReadsAgree":
                finding = cluster.value_disagreement()
            if finding:
                outcome.kind, outcome.property, outcome.finding, outcome.step = "violation", p.name, finding, number
                return outcome
        before = after
    return outcome


def judge(trace: Trace, outcome: Outcome, overridden: bool) -> tuple[int, str]:
    """Exit status for one file (0 as expected, 1 differs) and a verdict line.

    A trace that expects a violation or `holds` must have every step enabled under
    its own protocol: a blocked step there is invalid input (TraceError).
    """
    if overridden:
        return (1 if outcome.kind == "violation" else 0), outcome.summary()
    if outcome.kind == "blocked" and trace.expect != "blocked":
        raise TraceError(f"{outcome.reason} (a trace that expects {trace.expect} must have every step enabled)",
                         file=trace.source, step=outcome.step, field="action")
    matches = outcome.kind == trace.expect and (
        outcome.kind != "violation" or trace.property in (None, outcome.property))
    verdict = outcome.summary() + (" (as expected)" if matches else f" (expected {trace.expect})")
    return (0 if matches else 1), verdict


Replayer = Callable[[Trace, object], Outcome]
REPLAYERS: dict[str, Replayer] = {"model": replay_on_model, "impl": replay_on_impl}
