"""ZooKeeper's read-only mode (`readonlymode.enabled`) as a model on ZAB: a per-server field and two
actions on top of the ZAB system's model (docs/variants.md, "A model: fields and actions").

`read_only`: the server has lost its quorum and serves clients as a read-only server
(ReadOnlyZooKeeperServer) until it joins a leader again. The model has no partitions under a variant,
so any live follower may find itself cut off (`go_read_only`); it leaves the mode when a leader
synchronises it, or a new epoch's election reaches it, and a crash ends it. A client's read at a
read-only server (`read_only_read`) is served from what it holds:

- `ReadOnlyMode`: its committed history, up to its high-water mark, as ZooKeeper's data tree holds it;
- `ReadOnlyFromLog`: its whole log, as a server would serve that loaded every proposal it logged into
  its data tree, committed or not: a proposal of a deposed leader that a quorum never acknowledged is
  read, and the next leader's synchronisation truncates it.
"""

from hwm.model.variant import Variant


def read_only_server(view):
    """a client reads from a server in read-only mode"""
    for k, s in enumerate(view.servers):
        if s.alive and s.read_only and s.log:
            return f"S{k + 1} serves clients in read-only mode, holding entries 1..{len(s.log)}"
    return None


class ReadOnlyMode(Variant):
    """A read-only server serves its committed history (up to its high-water mark)."""

    base = "zab"
    fields = {"read_only": False}
    actions = ("go_read_only", "read_only_read")
    witnesses = {"ReadOnlyServerServes": read_only_server}

    def served(self, server):
        """How many entries of its log a read-only server serves."""
        return min(server.hwm, len(server.log))

    def after(self, state, action, next_state):
        name = action[0]
        if name == "sync":  # the leader's NEWLEADER reached it: it follows a quorum again
            return self.with_server(next_state, action[2], read_only=False)
        if name == "elect":  # each voter joined the new epoch
            for v in action[2]:
                next_state = self.with_server(next_state, v, read_only=False)
        elif name == "crash":
            next_state = self.with_server(next_state, action[1], read_only=False)
        return next_state

    def guard_go_read_only(self, state, server):
        s = state.servers[server]
        if not s.alive:
            return f"S{server + 1} is down"
        if s.role == "leader":
            return f"S{server + 1} leads epoch {s.generation}"
        if s.read_only:
            return f"S{server + 1} is already in read-only mode"
        return None

    def effect_go_read_only(self, state, server):
        return self.with_server(state, server, read_only=True)

    def guard_read_only_read(self, state, server):
        s = state.servers[server]
        if not (s.alive and s.read_only):
            return f"S{server + 1} is not a live server in read-only mode"
        served = self.served(s)
        if all((i + 1, s.log[i]) in state.reads for i in range(served)):
            return f"clients have already read everything S{server + 1} serves ({served} entries)"
        return None

    def effect_read_only_read(self, state, server):
        s = state.servers[server]
        return state._replace(reads=state.reads | {(i + 1, s.log[i]) for i in range(self.served(s))})


class ReadOnlyFromLog(ReadOnlyMode):
    """A read-only server serves its whole log, committed or not."""

    def served(self, server):
        return len(server.log)
