"""Drivers: one model action of the `rpc` network over in-memory replicas (deliver a message,
persist, deliver the answer ...), for the simulated cluster (`bridge.simcluster`) and the tests."""

from __future__ import annotations

from typing import Callable, Mapping

from hwm.impl.core import LEADER, Ready, Replica
from hwm.impl.messages import AppendReply, AppendRequest, HwmReply, PeerMessage, VoteReply

__all__ = ["Persist", "elect", "rejoin", "replicate"]

# ---------------------------------------------------------------------------
# Drivers: one model action of the rpc network over in-memory replicas.
#
# `persist(replica, ready)` must make a Ready durable (for example `persist(ready,
# storages[replica.server_id])`). Messages a driver does not deliver (heartbeats a new leader sends,
# the broadcast of a write, ...) are dropped: on the rpc network nothing is in flight between actions.
Persist = Callable[[Replica, Ready], None]


def _drain(replica: Replica, persist_ready: Persist) -> tuple[tuple[str, PeerMessage], ...]:
    ready = replica.ready()
    persist_ready(replica, ready)
    return ready.messages


def replicate(leader: Replica, follower: Replica, persist_ready: Persist) -> None:
    """The model's `replicate(leader, follower)`: one whole append round trip, back-off included.

    The leader sends everything after the follower's match index; under `previous-entry` a
    refused append makes the leader back off one index and try again, until the follower
    accepts (or the leader learns it is stale and steps down).
    """
    _drain(leader, persist_ready)
    _drain(follower, persist_ready)
    leader.send_append(follower.server_id)
    for _ in range(leader.last_index + 2):
        requests = [msg for to, msg in _drain(leader, persist_ready)
                    if to == follower.server_id and isinstance(msg, AppendRequest)]
        if not requests:
            return
        follower.step(requests[-1])
        replies = [msg for to, msg in _drain(follower, persist_ready)
                   if to == leader.server_id and isinstance(msg, AppendReply)]
        for reply in replies:
            leader.step(reply)
        if not replies or all(reply.success for reply in replies):
            _drain(leader, persist_ready)
            return
    raise RuntimeError(f"replicate {leader.server_id}->{follower.server_id} did not converge")


def elect(candidate: Replica, voters: Mapping[str, Replica], persist_ready: Persist,
          max_rounds: int = 4) -> bool:
    """The model's `elect(candidate, voters)`: campaign until the candidate leads; True if it does.

    Vote requests go to `voters` only (the candidate may be among them), and every voter hears
    the request before any reply is counted. A voter of a higher generation refuses and the
    candidate adopts that generation; the next round campaigns for it + 1, which is where the
    model's atomic election lands: 1 + the highest generation among candidate and voters. (A
    round cannot be won while a voter is ahead: a generation exists only because a quorum adopted
    it. Refusals are still delivered first, so even a hand-built cluster cannot make the
    candidate lead a stale generation for a moment, and append a no-op there.)
    """
    others = [v for name, v in voters.items() if name != candidate.server_id]
    _drain(candidate, persist_ready)
    for _ in range(max_rounds):
        if candidate.role == LEADER:
            break
        candidate.campaign()
        requests = _drain(candidate, persist_ready)
        replies: list[VoteReply] = []
        for voter in others:
            for to, msg in requests:
                if to == voter.server_id:
                    voter.step(msg)
            replies += [msg for to, msg in _drain(voter, persist_ready)
                        if to == candidate.server_id and isinstance(msg, VoteReply)]
        for reply in sorted(replies, key=lambda r: r.granted):
            candidate.step(reply)
        _drain(candidate, persist_ready)
    return candidate.role == LEADER


def rejoin(server: Replica, alive_peers: Mapping[str, Replica], persist_ready: Persist) -> None:
    """Finish a restart: under `truncate-to-leader-hwm` the new replica asks every live peer for
    its HWM, hears the answers, and truncates (`finish_rejoin`); under the other rules this only
    persists what the constructor did (a truncation to its own HWM)."""
    queries = _drain(server, persist_ready)
    for to, msg in queries:
        peer = alive_peers.get(to)
        if peer is None or peer is server:
            continue
        peer.step(msg)
        for back, answer in _drain(peer, persist_ready):
            if back == server.server_id and isinstance(answer, HwmReply):
                server.step(answer)
    server.finish_rejoin()
    _drain(server, persist_ready)
