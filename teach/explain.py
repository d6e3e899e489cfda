"""Why a step changed what it changed: the one place that explains steps.

Explanations are computed from the model's state before and after a step and
the protocol's flags, never stored: the match indexes and the quorum index
behind a new high-water mark (the protocol's rules, `properties.rules`, a variant's
included, as the model's `_advance_hwm` asks them), the entry an append check compares, the entries a
follower or a restarting server truncates, the vote refused and why
(`model.why_not`). An action this module does not know (a model of another
system) gets a generic before/after difference, so new models degrade gracefully.

A `Frame` is one row of a replay: the step, the state after it, the sentences
that explain it, what it removed, and the property findings it triggers. The
terminal replay, the HTML page, the SVG files and the explorer all draw frames.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from hwm.model.actions import Model, from_step, last_generation, up_to_date
from hwm.model.partition import PartitionedRaftModel
from hwm.model.raft import RaftModel
from hwm.model.state import APPEND, LEADER
from hwm.properties.catalogue import ALWAYS, SOMETIMES, check_state, check_step
from hwm.model.rules import overridden, rules_of
from hwm.properties.quorum import holders, majority
from hwm.properties.snapshot import server_name

Values = dict  # (index, generation) -> the value a client wrote, where the trace gives one


@dataclass
class Frame:
    number: int  # 0 is the initial state
    label: str  # the step as text, "(initial)" for frame 0
    state: Any  # a cluster view (a model State, or an implementation snapshot)
    lines: list[str] = field(default_factory=list)  # why the step changed what it changed
    removed: list[tuple[int, int, int]] = field(default_factory=list)  # (server, index, generation)
    violations: dict[str, str] = field(default_factory=dict)  # always properties broken at this step
    witnesses: dict[str, str] = field(default_factory=dict)  # sometimes properties seen at this step
    blocked: str | None = None  # the step was not enabled: why (the state is unchanged)
    step: dict | None = None  # the step as in a trace file
    in_flight: list[str] = field(default_factory=list)  # messages on the async network after the step
    values: Values = field(default_factory=dict, repr=False)  # values written so far, by entry
    # A lasso (a liveness counterexample): `loop` is the first step of the cycle that repeats
    # for ever (the state after the last step is the one before step `loop`); `cycle` marks
    # the frames of the cycle's steps.
    loop: int | None = None
    loop_end: int | None = None  # the cycle's last step
    cycle: bool = False
    # What the pictures add (`hwm.teach.motion.annotate`): the messages the step sends, the
    # quorum behind a leader's new high-water mark, where two protocols on one path part.
    messages: list[dict] = field(default_factory=list)
    quorum: dict | None = None
    departs: str | None = None


# ------------------------------------------------------------------ entries
def entry(index: int, generation: int, values: Values | None = None) -> str:
    """`2@g1` or `2@g1 "b"`: an entry and, when known, the value written there."""
    text = f"{index}@g{generation}"
    if values and (index, generation) in values:
        text += f' "{values[(index, generation)]}"'
    return text


def entries(items: Iterable[tuple[int, int]], values: Values | None = None) -> str:
    return ", ".join(entry(i, g, values) for i, g in items) or "none"


def removed_entries(before_log: Sequence[int], after_log: Sequence[int]) -> list[tuple[int, int]]:
    """Entries (index, generation) in `before_log` that `after_log` no longer holds at their index."""
    return [(k + 1, g) for k, g in enumerate(before_log) if k >= len(after_log) or after_log[k] != g]


def added_entries(before_log: Sequence[int], after_log: Sequence[int]) -> list[tuple[int, int]]:
    return [(k + 1, g) for k, g in enumerate(after_log) if k >= len(before_log) or before_log[k] != g]


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


# ------------------------------------------------------------ the quorum
def quorum_reasoning(model: Model, old, new, position: int) -> list[str]:
    """The arithmetic behind a leader's HWM: its match indexes, the quorum index, the commit rule."""
    if new.role != LEADER or not new.match:
        return []
    indexes = list(new.match)
    indexes[position] = len(new.log)  # the leader's own slot: its last index
    n = len(indexes)
    rule = model.protocol.quorum
    rules = getattr(model, "rules", None) or rules_of(model.protocol, n)  # a variant's, where the model has one
    changed = overridden(rules)
    q = rules.quorum_index(tuple(indexes))
    shown = ", ".join(f"{server_name(k)}={m}" for k, m in enumerate(indexes))
    if "quorum_index" in changed:
        how = f"{type(rules).__name__}.quorum_index"
    elif rule == "majority" or changed:
        counting = len(rules.counting())
        servers = "servers" if counting == n else "counting servers"  # a variant's `counts` leaves some out
        how = f"the largest index held by {rules.replication_quorum()} of {counting} {servers}"
    else:
        how = f"sorted {sorted(indexes)}, the seed's computeHighwaterMark takes position {n}/2 = {n // 2}"
    lines = [f"{server_name(position)}'s match indexes {shown} give quorum index {q} ({how})"]
    if q and holders(indexes, q) < majority(n):
        lines.append(f"only {holders(indexes, q)} of {n} servers hold index {q}: that is not a majority "
                     f"({majority(n)} needed)")
    name = server_name(position)
    if new.hwm > old.hwm:
        lines.append(f"{name}'s high-water mark rises {old.hwm} -> {new.hwm}")
    elif q <= old.hwm:
        lines.append(f"{name}'s high-water mark stays {new.hwm}: the quorum index is not above it")
    elif "may_commit" in changed:
        lines.append(f"{name}'s high-water mark stays {new.hwm}: {type(rules).__name__}.may_commit refuses index {q}")
    elif model.protocol.commit == "current-generation":
        g = new.log[q - 1] if q <= len(new.log) else None
        lines.append(f"{name}'s high-water mark stays {new.hwm}: entry {q} has generation {g}, not the "
                     f"leader's {new.generation}, and only an entry of the current generation is committed "
                     f"by counting (Raft 5.4.2)")
    return lines


def _follower_lines(model: Model, name: str, old, new, values: Values, acknowledged: int | None) -> list[str]:
    lines = []
    gone = removed_entries(old.log, new.log)
    if gone:
        first = gone[0][0]
        why = (f": it conflicts with the leader's {entry(first, new.log[first - 1], values)}, and a conflicting "
               f"entry goes with all that follow it" if len(new.log) >= first else "")
        lines.append(f"{name} truncates {entries(gone, values)}{why}")
    added = added_entries(old.log, new.log)
    if added:
        lines.append(f"{name} appends {entries(added, values)}")
    elif not gone:
        lines.append(f"{name}'s log already holds the sent entries")
    if acknowledged is not None:
        lines.append(f"{name} replies with index {acknowledged}")
    if new.hwm != old.hwm:
        lines.append(f"{name}'s high-water mark {old.hwm} -> {new.hwm} (the leader's, capped at what it acknowledged)")
    return lines


def _append_check(model: Model, follower_log: Sequence[int], prev: int, prev_generation: int,
                  sent: Sequence[int], name: str) -> str:
    """The comparison the follower makes before it applies an append."""
    if model.protocol.append_check == "previous-entry":
        if not prev:
            return f"{name} checks the entry before the batch: there is none (index 0), so it matches"
        has = f"g{follower_log[prev - 1]}" if len(follower_log) >= prev else "no entry"
        verdict = "match" if has == f"g{prev_generation}" else "mismatch"
        return (f"{name} checks the entry before the batch, index {prev}: leader has g{prev_generation}, "
                f"{name} has {has}: {verdict}")
    for offset, g in enumerate(sent):
        position = prev + offset
        if position < len(follower_log) and follower_log[position] != g:
            return (f"{name} compares the sent entries with its own (the seed's maybeTruncate): index "
                    f"{position + 1} differs (g{follower_log[position]} here, g{g} sent), so it truncates "
                    f"from there; the entry before the batch is not checked")
    return (f"{name} compares the sent entries with its own (the seed's maybeTruncate): none differs; "
            f"the entry before the batch is not checked")


# ------------------------------------------------------------ each action
def _speaks_for(model: Any, name: str) -> bool:
    """Whether this module's words fit: the action's effect (and the HWM rule) are `RaftModel`'s own.

    A model of another system may reuse an action name with other semantics (a Kafka
    leader's HWM is the minimum log end over the ISR): it gets the generic difference.
    """
    if not isinstance(model, RaftModel) or name not in _EXPLAINERS:
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
    from hwm.teach import systems  # each system's own words (that module builds on this one)

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
        return _EXPLAINERS[action[0]](model, before, action, after, values)
    except (IndexError, AttributeError, TypeError):  # a state of another shape: say what changed
        return generic_difference(before, after)


def _elect(model, before, action, after, values):
    _, c, voters = action
    name = server_name(c)
    old, new = before.servers[c], after.servers[c]
    lines = [f"{name} wins generation {new.generation} with the votes of {', '.join(map(server_name, voters))} "
             f"({len(voters)} of {model.n}, a quorum is {model.quorum}); the new generation is 1 + the "
             f"highest generation among the voters"]
    if model.protocol.election == "longest-log":
        lines.append(f"every voter's log is no more up to date than {name}'s (last generation "
                     f"{last_generation(old.log)}, length {len(old.log)})")
    else:
        stale = [v for v in voters if not up_to_date(old.log, before.servers[v].log)]
        if stale:
            lines.append(f"{', '.join(map(server_name, stale))} vote(s) for {name} although their logs are more "
                         f"up to date (election=any)")
    deposed = [k for k, s in enumerate(before.servers) if s.role == LEADER and s.alive and k != c
               and k in voters]
    for k in deposed:
        lines.append(f"{server_name(k)} learns generation {new.generation} and stops leading")
    for k, s in enumerate(before.servers):
        if s.role == LEADER and s.alive and k != c and k not in voters:
            lines.append(f"{server_name(k)} did not vote and still believes it leads generation {s.generation}: "
                         f"it learns of generation {new.generation} only when a server answers it")
    if len(new.log) > len(old.log):
        lines.append(f"{name} appends a no-op entry {entry(len(new.log), new.log[-1])} of its generation")
    lines.append(f"{name} starts with every match index 0")
    if new.hwm != old.hwm:
        lines += quorum_reasoning(model, old, new, c)
    return lines


def _write(model, before, action, after, values):
    l = action[1]
    new = after.servers[l]
    lines = [f"{server_name(l)} appends {entry(len(new.log), new.log[-1], values)} to its log"]
    if new.hwm != before.servers[l].hwm:
        return lines + quorum_reasoning(model, before.servers[l], new, l)
    return [lines[0] + " (on no quorum yet, so no client may read it)"]


def _replicate(model, before, action, after, values):
    _, l, f = action
    leader, follower = before.servers[l], before.servers[f]
    ln, fn = server_name(l), server_name(f)
    if follower.generation > leader.generation:
        return [f"{fn} is at generation {follower.generation}, above {ln}'s {leader.generation}: it refuses "
                f"the append and {ln} steps down to follower"]
    prev, prev_generation, sent = model._append_request(leader, f)
    lines = [f"{ln} sends {fn} the entries after its match index {leader.match[f]}: "
             f"{entries([(prev + k + 1, g) for k, g in enumerate(sent)], values)}, with its high-water mark "
             f"{leader.hwm}"]
    if model.protocol.append_check == "previous-entry":
        # One round trip includes Raft's back-off: the check fails until index 0 or a match.
        while prev and (len(follower.log) < prev or follower.log[prev - 1] != leader.log[prev - 1]):
            lines.append(_append_check(model, follower.log, prev, leader.log[prev - 1], (), fn)
                         + f"; {ln} backs off to index {prev - 1}")
            prev -= 1
        lines.append(_append_check(model, follower.log, prev, leader.log[prev - 1] if prev else 0, (), fn))
        acknowledged = len(leader.log)
    else:
        lines.append(_append_check(model, follower.log, prev, prev_generation, leader.log[prev:], fn))
        acknowledged = len(after.servers[f].log)
    lines += _follower_lines(model, fn, follower, after.servers[f], values, acknowledged)
    lines += quorum_reasoning(model, leader, after.servers[l], l)
    return lines


def _message(message: tuple, values: Values | None = None) -> str:
    if message[0] == APPEND:
        _, generation, prev, prev_generation, sent, hwm = message
        return (f"append g{generation} after {prev}@g{prev_generation} "
                f"[{entries([(prev + k + 1, g) for k, g in enumerate(sent)], values)}] hwm {hwm}")
    _, generation, success, index = message
    return f"reply g{generation} {'ok' if success else 'refused'} index {index}"


def messages_in_flight(model: Any, state: Any, values: Values | None = None) -> list[str]:
    """`S1->S2: append g1 after 0@g0 [1@g1] hwm 0`, oldest first per channel (async network)."""
    channels = getattr(state, "channels", ())
    n = len(state.servers)
    out = []
    for k, channel in enumerate(channels):
        for message in channel:
            try:
                shown = _message(message, values)
            except (ValueError, TypeError, IndexError):  # another model's message: show it as it is
                shown = repr(message)
            out.append(f"{server_name(k // n)}->{server_name(k % n)}: {shown}")
    return out


def _send(model, before, action, after, values):
    _, a, b = action
    k = a * model.n + b
    if len(after.channels[k]) == len(before.channels[k]):
        return [f"channel {server_name(a)}->{server_name(b)} is full: the message is lost"]
    return [f"{server_name(a)} sends {server_name(b)} {_message(after.channels[k][-1], values)} "
            f"(the entries after its match index {before.servers[a].match[b]})"]


def _deliver(model, before, action, after, values):
    _, a, b = action
    an, bn = server_name(a), server_name(b)
    message = before.channels[a * model.n + b][0]
    old, new = before.servers[b], after.servers[b]
    lines = [f"{bn} receives {_message(message, values)} from {an}"]
    if message[0] == APPEND:
        _, generation, prev, prev_generation, sent, _hwm = message
        if generation < old.generation:
            return lines + [f"the append's generation {generation} is below {bn}'s {old.generation}: "
                            f"{bn} refuses it"]
        lines.append(_append_check(model, old.log, prev, prev_generation, sent, bn))
        reply = after.channels[b * model.n + a]
        if (model.protocol.append_check == "previous-entry" and prev
                and (len(old.log) < prev or old.log[prev - 1] != prev_generation)):
            return lines + [f"{bn} refuses the append (Raft's receiver rule 2)"]
        acknowledged = reply[-1][3] if reply and reply[-1][0] != APPEND else None
        return lines + _follower_lines(model, bn, old, new, values, acknowledged)
    _, generation, success, index = message
    if generation > old.generation:
        return lines + [f"the reply's generation {generation} is above {bn}'s {old.generation}: {bn} steps down"]
    if old.role != LEADER or generation != old.generation:
        return lines + [f"a stale reply from an earlier generation: {bn} ignores it"]
    if success:
        lines.append(f"{bn} sets {an}'s match index to {new.match[a]}")
    else:
        lines.append(f"{an} lacks the entry there: {bn} backs {an}'s match index off to {new.match[a]}")
    return lines + quorum_reasoning(model, old, new, b)


def _drop(model, before, action, after, values):
    _, a, b = action
    message = before.channels[a * model.n + b][0]
    return [f"the network loses {_message(message, values)} on {server_name(a)}->{server_name(b)}"]


def _read(model, before, action, after, values):
    r = action[1]
    server = before.servers[r]
    readable = min(server.hwm, len(server.log))
    given = [(i + 1, server.log[i]) for i in range(readable)]
    return [f"a client reads from {server_name(r)} every entry at or below its high-water mark {server.hwm}: "
            f"{entries(given, values)}"]


def _crash(model, before, action, after, values):
    c = action[1]
    old = before.servers[c]
    kept = "keeps its checkpointed" if model.protocol.hwm_durable else "loses its"
    lines = [f"{server_name(c)} crashes: its log and generation are on disk; it {kept} high-water mark "
             f"({old.hwm} -> {after.servers[c].hwm})" + (" and its match indexes" if old.role == LEADER else "")]
    if getattr(before, "channels", ()):
        lost = [m for m in messages_in_flight(model, before, values)
                if m.startswith(server_name(c) + "->") or f"->{server_name(c)}:" in m]
        if lost:
            lines.append("messages to and from it are lost: " + "; ".join(lost))
    return lines


def _restart(model, before, action, after, values):
    r = action[1]
    name = server_name(r)
    old, new = before.servers[r], after.servers[r]
    rule = model.protocol.restart
    gone = removed_entries(old.log, new.log)
    if rule == "keep":
        return [f"{name} restarts and keeps its log (restart=keep)"]
    if rule == "truncate-to-own-hwm":
        return [f"{name} restarts and truncates its log to its own high-water mark {old.hwm} "
                f"(restart=truncate-to-own-hwm): removes {entries(gone, values)}"]
    k = model.restart_leader(before, r)
    if k is None or before.servers[k].generation < old.generation:
        return [f"{name} restarts, finds no current leader, and keeps its log"]
    return [f"{name} restarts and asks the leader {server_name(k)} for its high-water mark, "
            f"{before.servers[k].hwm}, and truncates its log to it (restart=truncate-to-leader-hwm): "
            f"removes {entries(gone, values)}"]


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

_EXPLAINERS = {"elect": _elect, "write": _write, "replicate": _replicate, "send": _send, "deliver": _deliver,
               "drop": _drop, "read": _read, "crash": _crash, "restart": _restart}


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
    from hwm.teach.motion import annotate  # that module builds on this one

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
    """The frames of a replay outcome (`hwm.replay.Outcome`): its rows and the trace's steps.

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
