"""The snapshot: what the properties see of a cluster, from the model or the implementation.

A log is a tuple of entry generations: position k holds the entry at index k+1,
so `(index, generation)` identifies an entry. Reads are the set of entries that
clients have been given, as `(index, generation)` pairs.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol, Sequence

LEADER = "leader"
FOLLOWER = "follower"


def server_name(position: int) -> str:
    """Servers are S1..Sn in traces, reports and on the command line."""
    return f"S{position + 1}"


def server_position(name: str, servers: int) -> int:
    """The position of `name` (S1..Sn); ValueError naming the valid range otherwise."""
    if not (isinstance(name, str) and name.startswith("S") and name[1:].isdigit()):
        raise ValueError(f"{name!r} is not a server name; servers are S1..S{servers}")
    position = int(name[1:]) - 1
    if not 0 <= position < servers:
        raise ValueError(f"no server {name}; this cluster has S1..S{servers}")
    return position


class ServerView(Protocol):
    """What a property may read of one server (model states satisfy this too)."""

    generation: int
    role: str
    log: tuple[int, ...]
    hwm: int
    alive: bool


class ClusterView(Protocol):
    servers: Sequence[ServerView]
    reads: frozenset[tuple[int, int]]


class ServerSnapshot(NamedTuple):
    generation: int
    role: str
    log: tuple[int, ...]
    hwm: int
    alive: bool


class Snapshot(NamedTuple):
    servers: tuple[ServerSnapshot, ...]
    reads: frozenset[tuple[int, int]]


def snapshot_of(view: ClusterView) -> Snapshot:
    """Freeze any cluster view into a plain Snapshot (for comparing model and implementation)."""
    return Snapshot(
        tuple(
            ServerSnapshot(s.generation, s.role, tuple(s.log), s.hwm, s.alive) for s in view.servers
        ),
        frozenset(view.reads),
    )


def describe_server(s: ServerView) -> str:
    """A compact one-server line: `leader g3 log=[1,1,3] hwm=2` (or `down`)."""
    state = s.role if s.alive else "down"
    log = ",".join(str(g) for g in s.log)
    return f"{state:<8} g{s.generation} log=[{log}] hwm={s.hwm}"
