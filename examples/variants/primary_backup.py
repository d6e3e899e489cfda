"""Primary-backup replication written from scratch on hwm's base `Model` (docs/variants.md, "A model
from scratch"): the base gives each server a generation, a role, a log and a high-water mark, a
primary's write, a client's read below a server's HWM, crashes and restarts; the three actions below
are the whole protocol.

- `take_over(S)`: a configuration service (not a server of the model) makes S the primary of a new
  generation, when a majority of the servers is alive and no live server is more up to date than S;
  every other primary is fenced (a follower from then on).
- `copy(P, B)`: primary P sends backup B its whole log; B adopts it, with P's generation and HWM.
- `commit(P)`: P's HWM covers its whole log once a majority of servers holds that log in P's
  generation (P itself and the backups that copied it since the take-over).

"Up to date" compares (generation, length): a backup's generation is that of the last primary it
copied, so a server that copied the latest primary wins. `LastEntryFreshness` compares the last
entry's generation instead, as Raft's vote does, without Raft's rule that a leader commits only
entries of its own generation: a backup that copied an older entry from a newer primary looks stale,
and a committed entry is overwritten (the bug of Figure 8 of the Raft paper). `MinorityTakeOver`
lets the service make a primary when fewer than a majority are alive.
"""

from hwm.model.actions import BoundHit, Model
from hwm.model.variant import Variant


def primary_carries_older_entry(view):
    """a primary holds an entry of an earlier primary"""
    for k, s in enumerate(view.servers):
        if s.alive and s.role == "leader" and any(g < s.generation for g in s.log):
            return f"S{k + 1}, primary of generation {s.generation}, holds entries of generations {sorted(set(s.log))}"
    return None


class PrimaryBackup(Variant):
    """A primary takes over at a live majority, copies whole logs, and commits on a majority."""

    base = Model
    actions = ("take_over", "copy", "commit")
    witnesses = {"PrimaryCarriesOlderEntry": primary_carries_older_entry}

    def freshness(self, server):
        return (server.generation, len(server.log))

    def majority(self):
        return self.servers // 2 + 1

    def guard_take_over(self, state, server):
        s = state.servers[server]
        if not s.alive:
            return f"S{server + 1} is down"
        if s.role == "leader":
            return f"S{server + 1} is already the primary"
        alive = [k for k, other in enumerate(state.servers) if other.alive]
        if len(alive) < self.majority():
            return f"only {len(alive)} of {self.servers} servers are alive"
        for k in alive:
            if self.freshness(state.servers[k]) > self.freshness(s):
                return f"S{k + 1} is more up to date than S{server + 1}"
        generation = 1 + max(other.generation for other in state.servers)
        if generation > self.bounds.max_generation:
            return BoundHit("max_generation", f"generation {generation} is above max_generation")
        return None

    def effect_take_over(self, state, server):
        generation = 1 + max(other.generation for other in state.servers)
        for k, other in enumerate(state.servers):
            if other.role == "leader":  # fenced by the configuration service
                state = self.with_server(state, k, role="follower", match=())
        return self.with_server(state, server, role="leader", generation=generation)

    def guard_copy(self, state, primary, backup):
        p, b = state.servers[primary], state.servers[backup]
        if not (p.alive and p.role == "leader"):
            return f"S{primary + 1} is not a live primary"
        if not b.alive:
            return f"S{backup + 1} is down"
        if (b.generation, b.log, b.hwm) == (p.generation, p.log, p.hwm):
            return f"S{backup + 1} already holds what S{primary + 1} would send"
        return None

    def effect_copy(self, state, primary, backup):
        p = state.servers[primary]
        return self.with_server(state, backup, generation=p.generation, log=p.log, hwm=p.hwm)

    def guard_commit(self, state, primary):
        p = state.servers[primary]
        if not (p.alive and p.role == "leader"):
            return f"S{primary + 1} is not a live primary"
        if p.hwm == len(p.log):
            return f"S{primary + 1}'s HWM already covers its log"
        holders = sum(1 for s in state.servers if s.generation == p.generation and s.log[:len(p.log)] == p.log)
        if holders < self.majority():
            return f"{holders} of {self.servers} servers hold S{primary + 1}'s log"
        return None

    def effect_commit(self, state, primary):
        return self.with_server(state, primary, hwm=len(state.servers[primary].log))


class LastEntryFreshness(PrimaryBackup):
    """Up to date by the last entry's generation, as Raft's vote, without Raft's commit rule."""

    def freshness(self, server):
        return (server.log[-1] if server.log else 0, len(server.log))


class MinorityTakeOver(PrimaryBackup):
    """The service makes a primary whatever the number of live servers."""

    def majority(self):
        return 1
