"""Why a step changed what it changed: the one place that explains steps.

Explanations are computed from the model's state before and after a step and
the protocol's flags, never stored. Which words speak for a step is decided here: the raft
family's (`hwm.teach.raft_words`), each other system's (`hwm.teach.systems`), the partitioned
raft model's, or, for an action none of them knows (a model of another system), a generic
before/after difference, so new models degrade gracefully.

A `Frame` (`hwm.teach.frame`) is one row of a replay; `frames_of` builds them with the words,
the property findings each step triggers and what the pictures add (`hwm.teach.motion`). The
terminal replay, the HTML page, the SVG files and the explorer all draw frames.
"""

from __future__ import annotations

from typing import Any, Sequence

from hwm.model.actions import from_step
from hwm.model.partition import PartitionedRaftModel
from hwm.model.raft import RaftModel
from hwm.model.state import LEADER
from hwm.properties.catalogue import ALWAYS, SOMETIMES, check_state, check_step
from hwm.properties.snapshot import server_name
from hwm.teach import systems
from hwm.teach.frame import Frame, Values, entries, removed_entries
from hwm.teach.motion import annotate
from hwm.teach.raft_words import RAFT_WORDS, messages_in_flight


def written_values(steps: Sequence, states: Sequence) -> Values:
    """Values of write steps: `states[k]` is the state after `steps[k - 1]` (states[0] initial).

    The model's entries carry no value; the trace's write steps do. The entry a
    write creates is the leader's new last entry, so its (index, generation) keys the value.
    """
    values: Values = {}
    for number, step in enumerate(steps, start=1):
        if number >= len(states):
            break
        args = step.args if hasattr(step, "args") else step
        if _action_name(step) == "write" and args.get("value") is not None:
            leader = states[number].servers[int(args["server"][1:]) - 1]
            if leader.log:
                values[(len(leader.log), leader.log[-1])] = args["value"]
    return values


def _action_name(step) -> str:
    return step.action if hasattr(step, "action") else step["action"]


# ------------------------------------------------------------ each action
def _speaks_for(model: Any, name: str) -> bool:
    """Whether this module's words fit: the action's effect (and the HWM rule) are `RaftModel`'s own.

    A model of another system may reuse an action name with other semantics (a Kafka
    leader's HWM is the minimum log end over the ISR): it gets the generic difference.
    """
    if not isinstance(model, RaftModel) or name not in RAFT_WORDS:
        return False
    cls = type(model)
    return (getattr(cls, "effect_" + name, None) is getattr(RaftModel, "effect_" + name)
            and cls._advance_hwm is RaftModel._advance_hwm and cls._follower_apply is RaftModel._follower_apply)


def explain(model: Any, before: Any, action: tuple, after: Any, values: Values | None = None) -> list[str]:
    """Sentences saying why `action` took `before` to `after`, then how a variant's fields changed."""
    lines = _explain(model, before, action, after, values)
    changed = field_changes(before, after)
    return changed if changed and lines == [NOTHING] else lines + changed


def field_changes(before: Any, after: Any) -> list[str]:
    """`S2 heard False -> True` for each field a variant's model adds (`extra`) that the step changed."""
    return [f"{server_name(k)} {name} {getattr(b, name)!r} -> {getattr(a, name)!r}"
            for k, (b, a) in enumerate(zip(before.servers, after.servers))
            for name in getattr(a, "extra", ()) if getattr(b, name, None) != getattr(a, name)]


def _explain(model: Any, before: Any, action: tuple, after: Any, values: Values | None = None) -> list[str]:

    values = values or {}
    own = systems.explainer(model, action[0])
    if own is not None:  # Kafka, ZAB, BookKeeper: in their own words
        try:
            return own(model, before, action, after, values)
        except (IndexError, AttributeError, TypeError):  # a state of another shape: say what changed
            return generic_difference(before, after)
    if isinstance(model, PartitionedRaftModel):
        return _partitioned(model, before, action, after, values)
    if not _speaks_for(model, action[0]):
        return generic_difference(before, after)
    try:
        return RAFT_WORDS[action[0]](model, before, action, after, values)
    except (IndexError, AttributeError, TypeError):  # a state of another shape: say what changed
        return generic_difference(before, after)


def _partitioned(model, before, action, after, values):
    """The raft model's words on a network that partitions (model/partition.py), and the cut's own."""
    name = action[0]
    n = len(after.servers)
    if name == "partition":
        lines = [f"the network cuts {server_name(action[1])} off from every other server: no append and no vote "
                 f"crosses the cut ({after.partitions} of max_partitions {model.config.max_partitions})"]
    elif name == "heal":
        lines = ["the partition heals: every server reaches every other again"]
    else:
        raft = model.__dict__.setdefault("_explained_as", RaftModel(model.protocol, model.config))
        lines = explain(raft, model._base(before), action, model._base(after), values)
        if lines == ["nothing visible changed"]:
            lines = []
    for k, (b, a) in enumerate(zip(before.servers, after.servers)):
        if name in ("partition", "crash") and b.alive and a.alive and b.role == LEADER and a.role != LEADER:
            reached = sum(1 for j, other in enumerate(after.servers) if other.alive and after.cut[j] == after.cut[k])
            lines.append(f"{server_name(k)} steps down (check_quorum): it reaches {reached} of {n} servers, fewer "
                         f"than a majority, so its lease ends before the other side can elect")
    return lines or ["nothing visible changed"]


NOTHING = "nothing visible changed"


def generic_difference(before: Any, after: Any) -> list[str]:
    """What changed, field by field, for an action this module has no words for."""
    lines = []
    for k, (b, a) in enumerate(zip(before.servers, after.servers)):
        for name in ("alive", "role", "generation", "log", "hwm"):
            old, new = getattr(b, name, None), getattr(a, name, None)
            if old != new:
                lines.append(f"{server_name(k)} {name} {_show(old)} -> {_show(new)}")
    new_reads = sorted(set(after.reads) - set(before.reads))
    if new_reads:
        lines.append("clients read " + entries(new_reads))
    return lines or [NOTHING]


def _show(value) -> str:
    return "[" + ",".join(map(str, value)) + "]" if isinstance(value, tuple) else str(value)


# ------------------------------------------------------------------ frames
def removals(before: Any, after: Any) -> list[tuple[int, int, int]]:
    return [(k, i, g) for k, (b, a) in enumerate(zip(before.servers, after.servers))
            for i, g in removed_entries(b.log, a.log)]


def frames_of(model: Any, steps: Sequence, states: Sequence, values: Values | None = None,
              blocked: str | None = None, loop: int | None = None) -> list[Frame]:
    """Frames for `states` (initial first, then the state after each step) and the steps between them.

    `model` None (an implementation's snapshots) explains by the generic difference.
    `blocked` is the reason the step after the last state is not enabled: it adds a last frame.
    `loop` (a lasso's first cycle step) marks the cycle: steps `loop`..last repeat for ever.
    """
    values = written_values(steps, states) if values is None else values
    always, sometimes = _properties(model)
    frames = [Frame(0, "(initial)", states[0], witnesses=_findings(None, states[0], sometimes), values=values)]
    for number in range(1, len(states)):
        step, before, after = steps[number - 1], states[number - 1], states[number]
        action = _action(model, step)
        lines = (explain(model, before, action, after, values) if action is not None
                 else generic_difference(before, after))
        frames.append(Frame(number, str(step), after, lines, removals(before, after),
                            _findings(before, after, always), _findings(before, after, sometimes),
                            step=step.to_json(), in_flight=messages_in_flight(model, after, values),
                            values=values))
    if blocked is not None and len(states) <= len(steps):
        step = steps[len(states) - 1]
        frames.append(Frame(len(states), str(step), states[-1], [f"not enabled: {blocked}"],
                            blocked=blocked, step=step.to_json(), in_flight=frames[-1].in_flight,
                            values=values))
    elif loop is not None and 1 <= loop < len(frames) == len(steps) + 1:
        mark_cycle(frames, loop)
    annotate(frames)
    return frames


def mark_cycle(frames: list[Frame], loop: int) -> None:
    """Mark a lasso's cycle (steps `loop`..last) and say where it starts and where it closes."""
    last = len(frames) - 1
    for frame in frames:
        frame.loop, frame.loop_end = loop, last
        frame.cycle = frame.number >= loop
    frames[loop].lines.insert(0, f"the cycle starts: steps {loop}..{last} repeat for ever from here")
    if frames[last].state == frames[loop - 1].state:
        frames[last].lines.append(f"the cluster is back in the state it was in before step {loop}: "
                                  f"the cycle repeats from step {loop}")
    else:
        frames[last].lines.append(f"the cycle should close here, but the cluster is not in the state it was in "
                                  f"before step {loop}")


def _properties(model: Any) -> tuple[tuple, tuple]:
    """The `always` and `sometimes` properties of `model` (its own set, e.g. acknowledged writes),
    the catalogue's for a model without one."""
    own = getattr(model, "properties", None)
    if not own:
        return ALWAYS, SOMETIMES
    return (tuple(p for p in own if p.kind == "always"), tuple(p for p in own if p.kind == "sometimes"))


def _action(model: Any, step) -> tuple | None:
    """The model action of a trace step, or None where this module cannot read it."""
    if model is None:
        return None
    try:
        return from_step(step)
    except (KeyError, ValueError, TypeError):  # an action of another model, with other fields
        return None


def _findings(before, after, properties) -> dict[str, str]:
    found = check_state(after, properties)
    if before is not None:
        found.update(check_step(before, after, properties))
    return found


def frames_of_outcome(trace, outcome, protocol=None) -> list[Frame]:
    """The frames of a replay outcome (`hwm.checker.replay.Outcome`): its rows and the trace's steps.

    `protocol` is the one the replay ran under (None: the trace's own).
    """
    from hwm.model.registry import build_model
    from hwm.model.state import Config
    from hwm.properties.protocol import resolve

    states = [state for _, state in outcome.rows]
    model = None
    if outcome.on == "model":
        _, resolved = resolve(protocol if protocol is not None else trace.protocol)
        model = build_model(resolved, Config.from_mapping(trace.config, where=trace.source))
    blocked = outcome.reason.split(": ", 1)[-1] if outcome.kind == "blocked" else None
    frames = frames_of(model, trace.steps, states, blocked=blocked, loop=outcome.loop)
    if outcome.kind == "violation" and outcome.step is not None and outcome.step < len(frames):
        # A liveness finding is about the whole lasso: the frame that closes the cycle carries it.
        frames[outcome.step].violations.setdefault(outcome.property, outcome.finding)
    return frames


def wrap(text: str, width: int = 100, indent: str = "   ") -> str:
    """A trace's explanation as an indented paragraph for the terminal."""
    import textwrap
    return textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent)


def narrate(frames: Sequence[Frame]) -> str:
    """The step-by-step text of a replay: each step, then why it changed what it changed."""
    out = []
    for frame in frames[1:]:
        if frame.loop == frame.number:
            out.append(f"-- the cycle: steps {frame.loop}..{len(frames) - 1} repeat for ever --")
        mark = "  (cycle)" if frame.cycle else ""
        out.append(f"{frame.number}. {frame.label}" + ("   (not enabled)" if frame.blocked else "") + mark)
        out += [f"     {line}" for line in frame.lines]
        for name, finding in frame.violations.items():
            out.append(f"     !! {name} violated: {finding}")
        if frame.in_flight:
            out.append("     in flight: " + "; ".join(frame.in_flight))
    if frames and frames[-1].loop is not None:
        out.append(f"-- then step {frames[-1].loop} again, and so on for ever --")
    return "\n".join(out)
