"""Fetching from the closest replica (KIP-392) as a model on Kafka: a per-server field and an action on
top of the Kafka system's model (docs/variants.md, "A model: fields and actions").

`fetch_epoch`: the leader epoch of the replica's last fetch, the epoch of the leader that answered it
(0 before any). A consumer reads from the leader (the model's `read`), or from a follower
(`follower_fetch`), which serves it only while it is in step with the epoch it knows: its last fetch
was answered by that epoch's leader (else FENCED_LEADER_EPOCH, and the consumer goes back to the leader).
What a follower serves:

- `FollowerFetching`: up to its high watermark, the one the leader sent with its last fetch (KIP-392);
- `FollowerFetchingPastHighWatermark`: up to its log end offset, everything it fetched: an entry the
  ISR does not all hold yet is read, and a new leader elected from the ISR without it truncates it.
"""

from hwm.model.variant import Variant


def follower_serves(view):
    """a consumer reads from a follower"""
    for k, s in enumerate(view.servers):
        if s.alive and s.role == "follower" and s.fetch_epoch and s.fetch_epoch == s.generation and s.hwm:
            return f"S{k + 1} serves consumers up to offset {s.hwm} as a follower of leader epoch {s.generation}"
    return None


class FollowerFetching(Variant):
    """A follower in step with its leader serves consumers up to its high watermark."""

    base = "kafka"
    fields = {"fetch_epoch": 0}
    actions = ("follower_fetch",)
    witnesses = {"FollowerServesConsumers": follower_serves}

    def served(self, replica):
        """How many entries of its log a follower serves a consumer."""
        return min(replica.hwm, len(replica.log))

    def refuses(self, state, action):
        if action[0] == "read" and state.servers[action[1]].role != "leader":
            return f"S{action[1] + 1} is a follower: a consumer fetches from it with follower_fetch"
        return None

    def after(self, state, action, next_state):
        if action[0] == "replicate":  # the fetch was answered by the leader of its epoch
            _, leader, follower = action
            return self.with_server(next_state, follower, fetch_epoch=next_state.servers[leader].generation)
        return next_state

    def guard_follower_fetch(self, state, server):
        s = state.servers[server]
        if not s.alive or s.role != "follower":
            return f"S{server + 1} is not a live follower"
        if s.fetch_epoch != s.generation:
            return (f"S{server + 1} answers FENCED_LEADER_EPOCH: it knows epoch {s.generation} but last fetched "
                    f"in epoch {s.fetch_epoch}")
        served = self.served(s)
        if served == 0:
            return f"S{server + 1} has nothing to serve below its high watermark"
        if all((i + 1, s.log[i]) in state.reads for i in range(served)):
            return f"consumers have already read everything S{server + 1} serves"
        return None

    def effect_follower_fetch(self, state, server):
        s = state.servers[server]
        return state._replace(reads=state.reads | {(i + 1, s.log[i]) for i in range(self.served(s))})


class FollowerFetchingPastHighWatermark(FollowerFetching):
    """A follower serves consumers everything it fetched, up to its log end offset."""

    def served(self, replica):
        return len(replica.log)
