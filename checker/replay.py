"""Replaying a saved trace on the model (`bridge.replay` replays it on the implementation).

An outcome is `violation` (which property, which entry, which step), `holds`, or
`blocked` (which step is not enabled under the protocol, and why: the model's guard, or the
implementation's own refusal).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hwm.model.actions import from_step
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.acked import ALL_BY_NAME as BY_NAME
from hwm.properties.catalogue import ALWAYS
from hwm.properties.protocol import resolve
from hwm.properties.trace import Trace, TraceError


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
    loop: int | None = None  # a lasso's first cycle step (eventually properties)

    def summary(self) -> str:
        if self.kind == "violation" and self.loop is not None:
            return (f"violation of {self.property}: a lasso of {self.loop - 1} + {self.step - self.loop + 1} steps "
                    f"(the cycle is steps {self.loop}..{self.step}): {self.finding}")
        if self.kind == "holds" and self.reason:
            return f"holds: {self.reason}"
        if self.kind == "violation":
            return f"violation of {self.property} at step {self.step}: {self.finding}"
        if self.kind == "blocked":
            return f"blocked at step {self.step}: {self.reason}"
        return "holds"


def watched_properties(trace: Trace, model=None):
    # The model's own statement where it has one (BookKeeper's ledger counts copies per write set, a
    # variant's own invariants).
    own = {p.name: p for p in model.properties} if model is not None else {}
    prop = own.get(trace.property) or BY_NAME.get(trace.property)
    if prop is not None and prop.kind == "always":
        return [prop]
    return [p for p in model.properties if p.kind == "always"] if model is not None else list(ALWAYS)


def resolve_for(trace: Trace, protocol: str | dict | None) -> tuple[str, object]:
    """The protocol to replay `trace` under; TraceError when an override is of another system
    (a Kafka trace's steps mean nothing to raft's model, and the other way round)."""
    name, proto = resolve(protocol if protocol is not None else trace.protocol)
    if protocol is not None:
        _, own = resolve(trace.protocol)
        if own.system != proto.system:
            raise TraceError(f"--protocol {name} is a {proto.system} protocol; this trace is of {own.system}: "
                             f"replay it under a {own.system} protocol", file=trace.source, field="protocol")
    return name, proto


def replay_on_model(trace: Trace, protocol: str | dict | None = None) -> Outcome:
    """Run the trace's steps on the model; stop at the first violation of a watched property.

    A step that is not enabled ends the replay as `blocked`. Whether that is an
    acceptable outcome is the caller's decision (see `judge`).
    """
    name, proto = resolve_for(trace, protocol)
    config = Config.from_mapping(trace.config, where=trace.source)
    model = build_model(proto, config)
    if trace.loop is not None:  # an eventually property's lasso (properties.trace.parse_loop)
        return replay_lasso_on_model(trace, name, model)
    initial = model.initial_state()
    outcome = Outcome("holds", "model", name, rows=[("(initial)", initial)])
    props = watched_properties(trace, model)
    for number, step, _, state, after in steps_on_model(trace, model, initial, outcome):
        outcome.rows.append((str(step), after))
        for p in props:
            finding = p.check(state, after) if p.on == "step" else p.check(after)
            if finding:
                outcome.kind, outcome.property, outcome.finding, outcome.step = "violation", p.name, finding, number
                return outcome
    return outcome


def steps_on_model(trace: Trace, model, state, outcome: Outcome):
    """Each step of `trace` the model takes from `state`, in order, as (number, step, action, state
    before, state after); at the first step that is not enabled, `outcome` becomes `blocked`, with
    the model's reason, and the walk stops."""
    for number, step in enumerate(trace.steps, start=1):
        action = from_step(step)
        reason = model.why_not(state, action)
        if reason is not None:
            outcome.kind, outcome.step, outcome.reason = "blocked", number, f"{step}: {reason}"
            return
        after = model.apply(state, action)
        yield number, step, action, state, after
        state = after


def lasso_label(trace: Trace, number: int, step) -> str:
    """A step's row label, marking where the cycle starts and where it closes."""
    label = str(step)
    if number == trace.loop:
        label += "   <- the cycle starts"
    if number == len(trace.steps):
        label += f"   -> back to the state before step {trace.loop}"
    return label


def replay_lasso_on_model(trace: Trace, name: str, model) -> Outcome:
    """Run a lasso's steps (every one must be enabled), then check that its cycle closes, that one
    obligation of the eventually property stays open along it, and that it is fair."""
    from hwm.checker.liveness import lasso_verdict, liveness_of, refusal

    reason = refusal(model)
    if reason:
        raise TraceError(reason, file=trace.source, field="config.max_partitions")
    initial = model.initial_state()
    states, actions = [initial], []
    outcome = Outcome("holds", "model", name, rows=[("(initial)", initial)], loop=trace.loop)
    last = len(trace.steps)
    for number, step, action, _, after in steps_on_model(trace, model, initial, outcome):
        states.append(after)
        actions.append(action)
        outcome.rows.append((lasso_label(trace, number, step), after))
    if outcome.kind == "blocked":
        return outcome
    properties, fair = liveness_of(model)
    prop = next(p for p in properties if p.name == trace.property)
    finding, why = lasso_verdict(model, states, actions, trace.loop, prop, fair)
    if finding:
        outcome.kind, outcome.property, outcome.finding, outcome.step = "violation", trace.property, finding, last
    else:
        outcome.reason = why
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
