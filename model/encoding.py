"""Canonical byte encoding, symmetry reduction and stable 64-bit fingerprints.

The encoding is a flat sequence of small integers, one byte each (every bounded
quantity of the model is below 256), so two processes on two machines encode a
state identically; the fingerprint is BLAKE2b-64 of those bytes, never Python's
salted `hash`. Symmetry reduction over server identities takes the smallest
encoding over the permutations of servers: servers are first sorted by the part
of their state that names no other server, and only ties are permuted.
"""

from __future__ import annotations

from hashlib import blake2b
from itertools import permutations, product

from hwm.model.state import APPEND, FOLLOWER, LEADER, Server, State

_ROLE_CODE = {FOLLOWER: 0, LEADER: 1}
_ROLES = (FOLLOWER, LEADER)


def _local(server: Server) -> list[int]:
    """The part of a server's state that names no other server."""
    return [server.generation, _ROLE_CODE[server.role], server.alive, server.hwm, len(server.log), *server.log]


# Servers and read sets recur across millions of states: their bytes are memoised.
_local_bytes: dict[Server, bytes] = {}
_reads_bytes: dict[frozenset, bytes] = {}


def _server_bytes(server: Server) -> bytes:
    try:
        return _local_bytes[server]
    except KeyError:
        data = _local_bytes[server] = bytes(_local(server))
        return data


def _reads(reads: frozenset) -> bytes:
    try:
        return _reads_bytes[reads]
    except KeyError:
        flat = [len(reads)]
        for index, generation in sorted(reads):
            flat += (index, generation)
        data = _reads_bytes[reads] = bytes(flat)
        return data


def _message(message: tuple) -> list[int]:
    if message[0] == APPEND:
        _, generation, prev, prev_generation, entries, hwm = message
        return [APPEND, generation, prev, prev_generation, hwm, len(entries), *entries]
    _, generation, success, index = message
    return [message[0], generation, success, index]


def encode(state: State, order: tuple[int, ...] | None = None, keys: list[bytes] | None = None,
           extra=None) -> bytes:
    """The state's bytes with servers renamed so that new position j is old server order[j].

    A model whose states carry more than `State` passes `keys` (each server's local bytes,
    its own extras included) and `extra(order)`, the bytes of whatever names servers.
    """
    servers = state.servers
    n = len(servers)
    if order is None:
        order = range(n)
    if keys is None:
        keys = [_server_bytes(s) for s in servers]
    parts = [bytes((n, 1 if state.channels else 0, state.crashes))]
    for old in order:
        parts.append(keys[old])
        match = servers[old].match
        if match:
            parts.append(bytes([match[k] for k in order]))
    parts.append(_reads(state.reads))
    if state.channels:
        flat = []
        for a in order:
            for b in order:
                channel = state.channels[a * n + b]
                flat.append(len(channel))
                for message in channel:
                    flat += _message(message)
        parts.append(bytes(flat))
    if extra is not None:
        parts.append(extra(order))
    return b"".join(parts)


def canonical(state: State, keys: list[bytes] | None = None, extra=None, encode=encode,
              server_bytes=_server_bytes) -> bytes:
    """The smallest encoding over server permutations (equal for symmetric states).

    `encode` and `server_bytes` (the part of a server that names no other) default to
    this module's; a model with another state type passes its own (and `extra`, bytes
    of its own that `encode` appends).
    """
    servers = state.servers
    if keys is None:
        keys = [server_bytes(s) for s in servers]
    order = sorted(range(len(servers)), key=keys.__getitem__)
    groups: list[list[int]] = []
    for k in order:
        if groups and keys[groups[-1][0]] == keys[k]:
            groups[-1].append(k)
        else:
            groups.append([k])
    more = () if extra is None else (extra,)
    if len(groups) == len(servers):
        return encode(state, order, keys, *more)
    best = None
    for choice in product(*(permutations(g) for g in groups)):
        candidate = encode(state, [k for group in choice for k in group], keys, *more)
        if best is None or candidate < best:
            best = candidate
    return best


def fingerprint_bytes(data: bytes) -> int:
    return int.from_bytes(blake2b(data, digest_size=8).digest(), "little")


def fingerprint(state: State, symmetry: bool = True) -> int:
    """Stable 64-bit fingerprint of the state (of its symmetry class when `symmetry`)."""
    return fingerprint_bytes(canonical(state) if symmetry else encode(state))


def decode(data: bytes) -> State:
    """The state that `encode` wrote (servers in the encoded order)."""
    it = iter(data)
    n, has_channels, crashes = next(it), next(it), next(it)
    servers = []
    for _ in range(n):
        generation, role, alive, hwm, length = (next(it) for _ in range(5))
        log = tuple(next(it) for _ in range(length))
        match = tuple(next(it) for _ in range(n)) if role == 1 else ()
        servers.append(Server(generation, _ROLES[role], log, hwm, bool(alive), match))
    reads = frozenset((next(it), next(it)) for _ in range(next(it)))
    channels: tuple = ()
    if has_channels:
        chans = []
        for _ in range(n * n):
            messages = []
            for _ in range(next(it)):
                kind = next(it)
                if kind == APPEND:
                    generation, prev, prev_generation, hwm, length = (next(it) for _ in range(5))
                    entries = tuple(next(it) for _ in range(length))
                    messages.append((APPEND, generation, prev, prev_generation, entries, hwm))
                else:
                    generation, success, index = next(it), next(it), next(it)
                    messages.append((kind, generation, bool(success), index))
            chans.append(tuple(messages))
        channels = tuple(chans)
    return State(tuple(servers), reads, crashes, channels)
