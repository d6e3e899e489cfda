"""The property catalogue (docs/design.md, "Properties"), evaluated on snapshots.

Every property has a name (the interface), a kind (`always` or `sometimes`) and
a one-line meaning. A property looks either at one snapshot (`on="state"`) or at
one step, the snapshots before and after an action (`on="step"`): truncation and
election are events, and the step form states them without extra ghost state.

A check returns None when there is nothing to report, or a sentence: for an
`always` property the sentence describes the violation, for a `sometimes`
property it describes the witness.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Optional

from hwm.properties.quorum import majority
from hwm.properties.snapshot import LEADER, ClusterView, ServerView, named, out_of, server_name

Finding = Optional[str]


@dataclass(frozen=True)
class Property:
    name: str
    kind: str  # "always" | "sometimes"
    on: str  # "state" | "step"
    meaning: str
    check: Callable[..., Finding]


def _removed(before: ServerView, after: ServerView) -> Iterator[tuple[int, int]]:
    """Entries (index, generation) that `before`'s log held and `after`'s does not."""
    old, new = before.log, after.log
    if old is new or (len(new) >= len(old) and new[: len(old)] == old):
        return
    for position, generation in enumerate(old):
        if position >= len(new) or new[position] != generation:
            yield position + 1, generation


def holders(view: ClusterView, entry: tuple[int, int]) -> int:
    """How many servers' logs hold `entry` (index, generation), down or not: logs are on disk."""
    index, generation = entry
    return sum(1 for s in view.servers if len(s.log) >= index and s.log[index - 1] == generation)


def read_never_truncated(before: ClusterView, after: ClusterView, needed: int | None = None) -> Finding:
    # A removal counts when it leaves the read entry on fewer than a quorum of servers: then
    # the entry can be lost from the committed history. A lagging server that drops a copy
    # a majority still holds (Raft does this with 5 servers) loses nothing.
    if not before.reads:
        return None
    needed = needed or majority(len(after.servers))
    for k, (b, a) in enumerate(zip(before.servers, after.servers)):
        for entry in _removed(b, a):
            if entry in before.reads:
                left = holders(after, entry)
                if left < needed:
                    return (f"{named(after, k)} removed entry {entry[0]}@g{entry[1]}, which a client has read; "
                            f"only {left} of {out_of(after)} still store it")
    return None


def hwm_never_truncated(before: ClusterView, after: ClusterView) -> Finding:
    for k, (b, a) in enumerate(zip(before.servers, after.servers)):
        for entry in _removed(b, a):
            if entry[0] <= b.hwm:
                return (f"{server_name(k)} removed entry {entry[0]}@g{entry[1]}, at or below its own "
                        f"high-water mark {b.hwm}")
    return None


def read_never_lost(before: ClusterView, after: ClusterView) -> Finding:
    if not before.reads:
        return None
    for k, (b, a) in enumerate(zip(before.servers, after.servers)):
        newly_elected = a.role == LEADER and a.alive and (
            b.role != LEADER or b.generation != a.generation or not b.alive
        )
        if not newly_elected:
            continue
        for index, generation in sorted(before.reads):
            if len(a.log) < index or a.log[index - 1] != generation:
                return (
                    f"{named(after, k)} became leader of generation {a.generation} without "
                    f"entry {index}@g{generation}, which a client has read"
                )
    return None


def reads_agree(view: ClusterView) -> Finding:
    seen: dict[int, int] = {}
    for index, generation in sorted(view.reads):
        if index in seen and seen[index] != generation:
            return f"clients read two entries at index {index}: g{seen[index]} and g{generation}"
        seen[index] = generation
    return None


def hwm_within_log(view: ClusterView) -> Finding:
    for k, s in enumerate(view.servers):
        if s.hwm > len(s.log):
            return f"{server_name(k)} has high-water mark {s.hwm} but only {len(s.log)} entries"
    return None


def committed_on_quorum(view: ClusterView, needed: int | None = None) -> Finding:
    servers = view.servers
    needed = needed or majority(len(servers))
    checked: set[tuple[int, int]] = set()
    for k, s in enumerate(servers):
        for index in range(1, min(s.hwm, len(s.log)) + 1):
            entry = (index, s.log[index - 1])
            if entry in checked:
                continue
            checked.add(entry)
            held = holders(view, entry)
            if held < needed:
                return (
                    f"{named(view, k)} counts entry {index}@g{entry[1]} as committed (hwm={s.hwm}) "
                    f"but only {held} of {out_of(view)} store it"
                )
    return None


def one_leader_per_generation(view: ClusterView) -> Finding:
    leaders: dict[int, int] = {}
    for k, s in enumerate(view.servers):
        if s.alive and s.role == LEADER:
            if s.generation in leaders:
                return (
                    f"{server_name(leaders[s.generation])} and {server_name(k)} both lead "
                    f"generation {s.generation}"
                )
            leaders[s.generation] = k
    return None


def log_matching(view: ClusterView) -> Finding:
    servers = view.servers
    for a in range(len(servers)):
        for b in range(a + 1, len(servers)):
            la, lb = servers[a].log, servers[b].log
            common = min(len(la), len(lb))
            # The highest index where both hold the same entry; everything before must agree.
            for position in range(common - 1, -1, -1):
                if la[position] == lb[position]:
                    if la[:position] != lb[:position]:
                        return (
                            f"{server_name(a)} and {server_name(b)} share entry "
                            f"{position + 1}@g{la[position]} but their logs differ before it"
                        )
                    break
    return None


def entry_read(view: ClusterView) -> Finding:
    if view.reads:
        index, generation = max(view.reads)
        return f"a client read entry {index}@g{generation}"
    return None


def uncommitted_truncated(before: ClusterView, after: ClusterView) -> Finding:
    for k, (b, a) in enumerate(zip(before.servers, after.servers)):
        for entry in _removed(b, a):
            if entry[0] > b.hwm and entry not in before.reads:
                return f"{server_name(k)} truncated uncommitted entry {entry[0]}@g{entry[1]}"
    return None


def leader_change_with_uncommitted(before: ClusterView, after: ClusterView) -> Finding:
    old_leaders = [
        (k, s) for k, s in enumerate(before.servers) if s.role == LEADER and len(s.log) > s.hwm
    ]
    if not old_leaders:
        return None
    for k, (b, a) in enumerate(zip(before.servers, after.servers)):
        if a.role == LEADER and a.alive and (b.role != LEADER or b.generation != a.generation):
            for j, old in old_leaders:
                if j != k and a.generation > old.generation:
                    return (
                        f"{named(after, k)} became leader of generation {a.generation} while "
                        f"{named(before, j)} held uncommitted entries {old.hwm + 1}..{len(old.log)}"
                    )
    return None


def crash_and_rejoin(before: ClusterView, after: ClusterView) -> Finding:
    for k, (b, a) in enumerate(zip(before.servers, after.servers)):
        if not b.alive and a.alive:
            return f"{server_name(k)} crashed and rejoined"
    return None


CATALOGUE: tuple[Property, ...] = (
    Property("ReadNeverTruncated", "always", "step",
             "no removal ever leaves an entry a client has read on fewer than a quorum of servers",
             read_never_truncated),
    Property("HwmNeverTruncated", "always", "step",
             "no server removes an entry at or below its own high-water mark", hwm_never_truncated),
    Property("ReadNeverLost", "always", "step",
             "every leader elected after a read holds the read entry", read_never_lost),
    Property("ReadsAgree", "always", "state",
             "two reads of one index return the same entry", reads_agree),
    Property("HwmWithinLog", "always", "state",
             "no server's high-water mark points past the end of its log", hwm_within_log),
    Property("CommittedOnQuorum", "always", "state",
             "every entry at or below a server's high-water mark is stored on a majority",
             committed_on_quorum),
    Property("OneLeaderPerGeneration", "always", "state",
             "no two live servers lead the same generation", one_leader_per_generation),
    Property("LogMatching", "always", "state",
             "two logs holding the same (index, generation) agree on every entry before it",
             log_matching),
    Property("EntryRead", "sometimes", "state", "a client reads an entry", entry_read),
    Property("UncommittedTruncated", "sometimes", "step",
             "a server truncates an entry above its high-water mark", uncommitted_truncated),
    Property("LeaderChangeWithUncommitted", "sometimes", "step",
             "a new leader is elected while an older leader holds uncommitted entries",
             leader_change_with_uncommitted),
    Property("CrashAndRejoin", "sometimes", "step",
             "a server crashes and rejoins the cluster", crash_and_rejoin),
)

BY_NAME: dict[str, Property] = {p.name: p for p in CATALOGUE}


def at_quorum(properties: tuple[Property, ...], needed: int) -> tuple[Property, ...]:
    """`properties` with the two that count a quorum (ReadNeverTruncated, CommittedOnQuorum) counting
    `needed` servers instead of a majority: a variant's replication quorum (docs/variants.md)."""
    from dataclasses import replace
    from functools import partial
    counted = {"ReadNeverTruncated": read_never_truncated, "CommittedOnQuorum": committed_on_quorum}
    return tuple(replace(p, check=partial(counted[p.name], needed=needed)) if p.name in counted else p
                 for p in properties)
ALWAYS: tuple[Property, ...] = tuple(p for p in CATALOGUE if p.kind == "always")
SOMETIMES: tuple[Property, ...] = tuple(p for p in CATALOGUE if p.kind == "sometimes")


def check_state(view: ClusterView, properties=CATALOGUE) -> dict[str, str]:
    """Findings of every state property on one snapshot."""
    found = {}
    for p in properties:
        if p.on == "state":
            finding = p.check(view)
            if finding:
                found[p.name] = finding
    return found


def check_step(before: ClusterView, after: ClusterView, properties=CATALOGUE) -> dict[str, str]:
    """Findings of every step property on one step."""
    found = {}
    for p in properties:
        if p.on == "step":
            finding = p.check(before, after)
            if finding:
                found[p.name] = finding
    return found


def violations(before: ClusterView | None, after: ClusterView, always=ALWAYS) -> dict[str, str]:
    """Every `always` property (the catalogue's, or those given) `after`, and the step into it if any, violates."""
    found = check_state(after, always)
    if before is not None:
        found.update(check_step(before, after, always))
    return found
