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


def named(view, position: int) -> str:
    """Server `position` as a finding names it: S1..Sn, and its part where the view's model gives
    some servers another one than a replica's (`part(k)`: BookKeeper's writer and recovery client)."""
    part = getattr(view, "part", None)
    role = part(position) if part is not None else None
    return f"{server_name(position)} ({role})" if role else server_name(position)


def out_of(view) -> str:
    """What a count of servers is out of: `5 servers`, or the view's own words where not every server
    is a replica (`members()`: `5 servers (3 bookies, the writer and the recovery client)`)."""
    members = getattr(view, "members", None)
    return members() if members is not None else f"{len(view.servers)} servers"


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


def fields_text(server) -> str:
    """` heard=True` for each field a variant's model adds to a server (`extra` names them; nothing for
    any other server)."""
    return "".join(f" {name}={getattr(server, name)!r}" for name in getattr(server, "extra", ()))


def describe_server(s: ServerView) -> str:
    """A compact one-server line: `leader g3 log=[1,1,3] hwm=2` (or `down`), then a variant's fields."""
    state = s.role if s.alive else "down"
    log = ",".join(str(g) for g in s.log)
    return f"{state:<8} g{s.generation} log=[{log}] hwm={s.hwm}{fields_text(s)}"
