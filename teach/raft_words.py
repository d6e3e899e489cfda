"""Why a step of the raft family changed what it changed: the words of `RaftModel`'s own actions.

The match indexes and the quorum index behind a new high-water mark (the protocol's rules,
`properties.rules`, a variant's included, as the model's `_advance_hwm` asks them), the entry an
append check compares, the entries a follower or a restarting server truncates. `hwm.teach.systems`
reuses these words where a step of another system means what it means here (ZAB's broadcast);
`hwm.teach.explain` decides which words speak for a model.
"""

from __future__ import annotations

from typing import Any, Sequence

from hwm.model.actions import Model, last_generation, up_to_date
from hwm.model.rules import overridden, rules_of
from hwm.model.state import APPEND, LEADER
from hwm.properties.quorum import holders, majority
from hwm.properties.snapshot import server_name
from hwm.teach.frame import Values, added_entries, entries, entry, removed_entries


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


RAFT_WORDS = {"elect": _elect, "write": _write, "replicate": _replicate, "send": _send, "deliver": _deliver,
              "drop": _drop, "read": _read, "crash": _crash, "restart": _restart}
