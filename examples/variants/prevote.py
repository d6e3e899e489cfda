"""PreVote with check-quorum (Ongaro's thesis, sections 9.6 and 6.2; etcd's PreVote and CheckQuorum)
as a model of its own: a per-server field and two actions on top of the raft system's model.

`heard`: the server heard from a leader of its generation (an append, or the vote it granted to its
election) since its election timer last fired. A server's timer may fire at any time (`timeout`); a
server stands for election, and grants its pre-vote, only once it has (pre-vote). A leader steps down
when fewer than a quorum of servers, itself included, hear from it (check-quorum, `step_down`).
Written for the rpc network, where an append is one `replicate` round trip.
docs/tutorial-your-variant.md walks through both variants.
"""

from hwm.model.variant import Variant


def quorum_heard(view, leader):
    """How many servers hear from `leader`: itself, and its live followers whose timer it reset."""
    own = view.servers[leader]
    return 1 + sum(1 for k, s in enumerate(view.servers)
                   if k != leader and s.alive and s.heard and s.role == "follower" and s.generation == own.generation)


def leaders_without_quorum(view):
    """a leader that fewer than a quorum of servers hear from eventually stops leading"""
    quorum = len(view.servers) // 2 + 1
    open_ = {}
    for k, s in enumerate(view.servers):
        if s.alive and s.role == "leader" and quorum_heard(view, k) < quorum:
            open_[(k, s.generation)] = (f"S{k + 1} leads generation {s.generation}, but only "
                                        f"{quorum_heard(view, k)} of {len(view.servers)} servers hear from it")
    return open_


def follower_times_out(view):
    """a follower's election timer fires while the leader of its generation lives"""
    for k, s in enumerate(view.servers):
        if s.alive and s.role == "follower" and not s.heard:
            for j, leader in enumerate(view.servers):
                if leader.alive and leader.role == "leader" and leader.generation == s.generation:
                    return f"S{k + 1}'s timer fired while S{j + 1} leads generation {s.generation}"
    return None


class PreVote(Variant):
    """Pre-vote, and check-quorum's step down, which the liveness check takes as weakly fair."""

    base = "raft"
    fields = {"heard": False}
    actions = ("timeout", "step_down")
    fair = ("step_down",)
    witnesses = {"FollowerTimesOut": follower_times_out}
    liveness = {"UnheardLeaderStepsDown": leaders_without_quorum}

    # Pre-vote: no server that heard from a leader lately stands or votes; nor does a live leader.
    def refuses(self, state, action):
        if action[0] != "elect":
            return None
        _, candidate, voters = action
        for v in voters:
            server = state.servers[v]
            if server.heard:
                return f"S{v + 1} heard from a leader since its election timer last fired (pre-vote)"
            if v != candidate and server.role == "leader":
                return f"S{v + 1} leads generation {server.generation} and refuses the pre-vote"
        return None

    def after(self, state, action, next_state):
        name = action[0]
        if name == "elect":  # granting its vote resets a voter's timer
            _, candidate, voters = action
            for v in voters:
                if v != candidate:
                    next_state = self.with_server(next_state, v, heard=True)
        elif name == "replicate" and next_state.servers[action[1]].role == "leader":  # the append reached it
            next_state = self.with_server(next_state, action[2], heard=True)
        elif name == "crash":  # the timer is volatile
            next_state = self.with_server(next_state, action[1], heard=False)
        return next_state

    def guard_timeout(self, state, server):
        s = state.servers[server]
        if not s.alive:
            return f"S{server + 1} is down"
        if s.role == "leader":
            return f"S{server + 1} leads: it runs no election timer"
        if not s.heard:
            return f"S{server + 1}'s election timer has already fired"
        return None

    def effect_timeout(self, state, server):
        return self.with_server(state, server, heard=False)

    def guard_step_down(self, state, server):
        s = state.servers[server]
        if not (s.alive and s.role == "leader"):
            return f"S{server + 1} is not a live leader"
        heard = quorum_heard(state, server)
        if heard >= self.election_quorum():
            return f"{heard} servers hear from S{server + 1}, a quorum"
        return None

    def effect_step_down(self, state, server):
        return self.with_server(state, server, role="follower", match=())


class PreVoteWithoutCheckQuorum(PreVote):
    """Pre-vote alone: a leader never steps down by itself."""

    actions = ("timeout",)
    fair = ()
