"""The base `Model` as a variant's base (docs/variants.md, "A model from scratch"): raft's state, each
server's generation, role, log, HWM and liveness, and the steps every system shares (a leader's write,
a client's read below a live server's HWM, a crash and a restart), with no election and no replication.
A variant with `base = Model` brings those as actions of its own; the catalogue's properties read the
state as they read raft's."""

from __future__ import annotations

from typing import Iterator

from hwm.model.actions import Action
from hwm.model.raft import RaftModel
from hwm.model.state import LEADER

# The actions the base `Model` has: the rest of raft's are the variant's to write.
BARE_ACTIONS = ("write", "read", "crash", "restart")
# The rules it asks: which servers count (toward Q2, in the catalogue's quorum properties), Q2 itself,
# who may serve a read, and what a restart keeps. Elections, votes, appends and commits are the
# variant's own actions, which call its rules themselves where they want them.
BARE_HOOKS = ("counts", "replication_quorum", "restart_keeps", "readable")
BARE_NOT_ASKED = ("the base Model has no elections, votes, appends or commits of its own: the variant's "
                  "actions decide them (call a method of your own from them)")


class BareModel(RaftModel):
    """Raft's state and its shared steps alone (module docstring)."""

    bare = True
    FAIR = ("restart",)  # a crashed server comes back; the variant's `fair` adds its own actions

    def __init__(self, protocol, config):
        if config.network != "rpc" or config.max_partitions:
            # ValueError: the model cannot run this config (the CLI says why).
            raise ValueError("the base Model has no network of its own (network=async or max_partitions): a "
                             "variant of it models its messages with fields and actions")
        super().__init__(protocol, config)
        self._effects = {name: getattr(self, "effect_" + name) for name in BARE_ACTIONS}

    # Raft's encoding writes a leader's match indexes and reads them back by role; a variant's leader
    # need keep none (or a deposed one may keep them), so the bytes take each role's shape.
    def _shaped(self, state):
        zeros = (0,) * self.n
        if all(len(s.match) == (self.n if s.role == LEADER else 0) for s in state.servers):
            return state
        return state._replace(servers=tuple(
            s._replace(match=(s.match if len(s.match) == self.n else zeros) if s.role == LEADER else ())
            for s in state.servers))

    def server_keys(self, state) -> list[bytes]:
        return super().server_keys(self._shaped(state))

    def encode_in_order(self, state, order) -> bytes:
        return super().encode_in_order(self._shaped(state), order)

    def action_table(self) -> list[Action]:
        return [(name, k) for name in BARE_ACTIONS for k in range(self.n)]

    def why_not(self, s, action: Action) -> str | None:
        if action[0] not in BARE_ACTIONS:
            return f"{action[0]} is not an action of the base Model"
        return super().why_not(s, action)

    def effect_write(self, s, l: int):
        # The entry alone: its commit is the variant's (raft's write counts the leader's match indexes,
        # which a leader of the variant's own election need not keep).
        leader = s.servers[l]
        return s._replace(servers=s.servers[:l] + (leader._replace(log=leader.log + (leader.generation,)),)
                          + s.servers[l + 1:])

    def actions(self, s, bounds_hit: set | None = None) -> Iterator[Action]:
        hit = bounds_hit if bounds_hit is not None else set()
        alive = [server.alive for server in s.servers]
        leading = [server.alive and server.role == LEADER for server in s.servers]
        yield from self.server_actions(s, alive, leading, hit)
