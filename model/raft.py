"""Raft's model, and the pattern's: the base of ZAB's and BookKeeper's models, which change only
the steps where their systems differ. Every protocol flag of `properties.protocol` is read here."""

from __future__ import annotations

from itertools import combinations
from typing import Iterator

from hwm.model.actions import Action, BoundHit, Model, last_generation, leader_refusal, pair_refusal, up_to_date
from hwm.model.encoding import _server_bytes, canonical, decode, encode, fingerprint
from hwm.model.rules import Rules, rules_of
from hwm.model.state import APPEND, FOLLOWER, LEADER, REPLY, Config, Server, State, initial_state
from hwm.properties.catalogue import CATALOGUE
from hwm.properties.protocol import Protocol
from hwm.properties.snapshot import server_name


class RaftModel(Model):
    """The explicit-state model of one protocol variant under one configuration."""

    # The properties the engines check on this model's states.
    properties = CATALOGUE
    # Its states' types: a variant's fields build on the server's (model.variant_model).
    SERVER, STATE = Server, State

    def __init__(self, protocol: Protocol, config: Config):
        self.protocol = protocol
        self.config = config
        self.n = config.servers
        # The quorum, commit and vote rules: the flags' (model.rules), or a variant's overriding some.
        self.rules = rules_of(protocol, self.n)
        self.quorum = self.rules.election_quorum()
        others = range(self.n)
        counting = self.rules.counting()
        # Voter sets per candidate: every election quorum of counting servers that includes the candidate.
        self.voter_sets = [
            [v for size in range(self.quorum, len(counting) + 1) for v in combinations(counting, size) if c in v]
            for c in others
        ]
        # A variant's vote rule is asked of every voter; the flags' is the longest-log check, inlined in `actions`.
        self.vote_hook = None if type(self.rules).grants_vote is Rules.grants_vote else self.rules.grants_vote
        # Likewise the read rule: a variant's is asked of every live server (`Model.readable`).
        self.read_hook = None if type(self.rules).readable is Rules.readable else self.rules.readable
        self.pairs = [(a, b) for a in others for b in others if a != b]
        self.async_network = config.network == "async"
        self._effects = {name: getattr(self, "effect_" + name) for name in
                         ("elect", "write", "replicate", "send", "deliver", "drop", "read", "crash", "restart")}

    # --------------------------------------------------------- the interface
    # What every engine asks of a model (Stateright's Model): its initial state,
    # its actions and their effects, and a stable fingerprint of a state.
    def initial_state(self) -> State:
        return initial_state(self.config)

    def fingerprint(self, state: State, symmetry: bool = True) -> int:
        return fingerprint(state, symmetry)

    def encode(self, state: State, symmetry: bool = True) -> bytes:
        """The bytes the fingerprint hashes (an engine that moves states as bytes sends these)."""
        return canonical(state) if symmetry else encode(state)

    def decode(self, data: bytes) -> State:
        """A state of the class `data` encodes (the inverse of `encode`)."""
        return decode(data)

    # The two halves of `encode`, which a variant's fields build on (model.variant_model).
    def server_keys(self, state: State) -> list[bytes]:
        """Each server's bytes that name no other server: what symmetry reduction sorts servers by."""
        return [_server_bytes(server) for server in state.servers]

    def encode_in_order(self, state: State, order) -> bytes:
        """The state's bytes with its servers renamed: new position j is old server order[j]."""
        return encode(state, order)

    def action_table(self) -> list[Action]:
        """Every action this configuration can name, in a fixed order: the engines' action ids."""
        n = self.n
        table: list[Action] = []
        for candidate in range(n):
            table += [("elect", candidate, voters) for voters in self.voter_sets[candidate]]
        for name in ("write", "read", "crash", "restart"):
            table += [(name, k) for k in range(n)]
        for name in ("replicate", "send", "deliver", "drop"):
            table += [(name, a, b) for a, b in self.pairs]
        return table

    # ---------------------------------------------------------------- helpers
    def _advance_hwm(self, leader: Server, position: int) -> Server:
        """Recompute the leader's HWM from its match indexes, under the commit rule."""
        indexes = list(leader.match)
        indexes[position] = len(leader.log)  # the leader's own slot: its last index
        q = self.rules.quorum_index(tuple(indexes))
        if q <= leader.hwm:
            return leader
        # Raft 5.4.2 (commit=current-generation): only an entry of the leader's own generation is committed
        # by counting.
        if not self.rules.may_commit(q, leader.log, leader.generation):
            return leader
        # Seed: "if (logIndexAtQuorum > currentHighWaterMark) ... setHighWaterMark(logIndexAtQuorum)"
        return Server(leader.generation, leader.role, leader.log, q, leader.alive, leader.match)

    def _with_match(self, leader: Server, position: int, follower: int, index: int) -> Server:
        match = list(leader.match)
        match[follower] = index
        return self._advance_hwm(Server(leader.generation, leader.role, leader.log, leader.hwm, leader.alive,
                                        tuple(match)), position)

    def _follower_apply(self, follower: Server, prev: int, entries: tuple[int, ...], leader_hwm: int,
                        generation: int) -> tuple[Server, int]:
        """The follower's side of an accepted append: new follower state and the index it replies."""
        log = follower.log
        if self.protocol.append_check == "previous-entry":
            # Raft Figure 2: delete an existing entry that conflicts and all that follow it,
            # append any new entries not already in the log; reply prev + len(entries).
            for offset, g in enumerate(entries):
                position = prev + offset
                if position < len(log):
                    if log[position] != g:
                        log = log[:position] + (g,)
                else:
                    log = log + (g,)
            acknowledged = prev + len(entries)
        else:
            # Seed maybeTruncate: truncate at an entry whose generation differs; then
            # appendEntries writes the entries that do not exist yet (contiguously: a WAL
            # cannot write past its end) and replies wal.getLastLogIndex().
            for offset, g in enumerate(entries):
                position = prev + offset
                if position < len(log) and log[position] != g:
                    log = log[:position]
                    break
            for offset, g in enumerate(entries):
                if prev + offset == len(log):
                    log = log + (g,)
            acknowledged = len(log)
        hwm = max(follower.hwm, min(leader_hwm, acknowledged))
        return Server(generation, FOLLOWER, log, hwm, True, ()), acknowledged

    def _append_request(self, leader: Server, follower: int) -> tuple[int, int, tuple[int, ...]]:
        """(prev_index, prev_generation, entries) the leader sends: everything after the match index."""
        prev = min(leader.match[follower], len(leader.log))
        prev_generation = leader.log[prev - 1] if prev else 0
        return prev, prev_generation, leader.log[prev:]

    # ------------------------------------------------------------ the actions
    def guard_elect(self, s: State, c: int, voters: tuple[int, ...]) -> str | None:
        servers = s.servers
        cand = servers[c]
        if c not in voters:
            return f"{server_name(c)} must vote for itself"
        if not cand.alive:
            return f"{server_name(c)} is down"
        if cand.role == LEADER:
            return f"{server_name(c)} already leads generation {cand.generation}"
        for v in voters:
            if not self.rules.counts(v):
                return f"{server_name(v)} does not count toward a quorum and cannot vote"
        if len(voters) < self.quorum:
            return f"{len(voters)} voters are not a quorum of {self.n} (need {self.quorum})"
        for v in voters:
            if not servers[v].alive:
                return f"{server_name(v)} is down and cannot vote"
        if self.vote_hook is not None:
            for v in voters:
                if v != c and not self.vote_hook(cand.log, servers[v].log):
                    return f"{server_name(v)} refuses the vote (the variant's vote rule)"
        elif self.protocol.election == "longest-log":
            for v in voters:
                if not up_to_date(cand.log, servers[v].log):
                    return (f"{server_name(v)} refuses the vote: its log is more up to date "
                            f"(last generation {last_generation(servers[v].log)}, length "
                            f"{len(servers[v].log)}) than {server_name(c)}'s (last generation "
                            f"{last_generation(cand.log)}, length {len(cand.log)})")
        generation = 1 + max(servers[v].generation for v in voters)
        if generation > self.config.max_generation:
            return BoundHit("max_generation", f"generation {generation} exceeds max_generation "
                            f"{self.config.max_generation}")
        if self.protocol.noop_on_election and len(cand.log) >= self.config.max_log:
            return BoundHit("max_log", f"the new leader's no-op entry exceeds max_log {self.config.max_log}")
        return None

    def effect_elect(self, s: State, c: int, voters: tuple[int, ...]) -> State:
        servers = list(s.servers)
        generation = 1 + max(servers[v].generation for v in voters)
        for v in voters:
            voter = servers[v]
            servers[v] = Server(generation, FOLLOWER, voter.log, voter.hwm, True, ())
        cand = servers[c]
        log = cand.log + (generation,) if self.protocol.noop_on_election else cand.log
        leader = Server(generation, LEADER, log, cand.hwm, True, (0,) * self.n)
        servers[c] = self._advance_hwm(leader, c)
        return State(tuple(servers), s.reads, s.crashes, s.channels)

    def effect_write(self, s: State, l: int) -> State:
        # "For each log entry, the leader appends it to its local write ahead log."
        leader = s.servers[l]
        leader = self._advance_hwm(Server(leader.generation, LEADER, leader.log + (leader.generation,),
                                          leader.hwm, True, leader.match), l)
        return State(s.servers[:l] + (leader,) + s.servers[l + 1:], s.reads, s.crashes, s.channels)

    def guard_replicate(self, s: State, l: int, f: int) -> str | None:
        if self.async_network:
            return "replicate belongs to the rpc network; this model uses async"
        return pair_refusal(s.servers, l, f, "a leader does not replicate to itself")

    def effect_replicate(self, s: State, l: int, f: int) -> State:
        servers = list(s.servers)
        leader, follower = servers[l], servers[f]
        if follower.generation > leader.generation:
            # The reply carries a higher generation: the leader learns it is stale.
            servers[l] = leader._replace(generation=follower.generation, role=FOLLOWER, match=())
            return State(tuple(servers), s.reads, s.crashes, s.channels)
        prev, _, _ = self._append_request(leader, f)
        # One whole round trip, Raft's back-off included: step prev back until the follower accepts
        # the append (the append check, `Rules.accepts_append`; index 0 always matches).
        accepts, log = self.rules.accepts_append, follower.log
        while prev and not accepts(log, prev, leader.log[prev - 1]):
            prev -= 1
        servers[f], acknowledged = self._follower_apply(follower, prev, leader.log[prev:], leader.hwm,
                                                       leader.generation)
        servers[l] = self._with_match(leader, l, f, acknowledged)
        return State(tuple(servers), s.reads, s.crashes, s.channels)

    def effect_crash(self, s: State, c: int) -> State:
        # The log and generation are on disk; the role, the match indexes and (unless
        # durable) the HWM are lost.
        server = s.servers[c]
        hwm = server.hwm if self.protocol.hwm_durable else 0
        servers = s.servers[:c] + (server._replace(alive=False, role=FOLLOWER, match=(), hwm=hwm),) + s.servers[c + 1:]
        channels = s.channels
        if channels:
            n = self.n
            channels = tuple(() if (k // n == c or k % n == c) else ch for k, ch in enumerate(channels))
        return s._replace(servers=servers, crashes=s.crashes + 1, channels=channels)

    def restart_leader(self, s: State, r: int) -> int | None:
        """The leader a restarting server finds: the live leader of the highest generation."""
        best = None
        for k, other in enumerate(s.servers):
            if k != r and other.alive and other.role == LEADER:
                if best is None or other.generation > s.servers[best].generation:
                    best = k
        return best

    def effect_restart(self, s: State, r: int) -> State:
        server = s.servers[r]._replace(alive=True)
        leader_hwm = None
        if self.protocol.restart == "truncate-to-leader-hwm":
            # "It then explicitly asks for the current high-water mark, truncates its log to
            # high-water mark." A server that finds no leader (or only a stale one) hears none.
            k = self.restart_leader(s, r)
            if k is not None and s.servers[k].generation >= server.generation:
                leader_hwm = s.servers[k].hwm
        # What the restart keeps (`Rules.restart_keeps`): the HWM falls to it when the log is cut
        # below it, or a leader answered.
        kept = self.rules.restart_keeps(server.log, server.hwm, leader_hwm)
        if kept < len(server.log) or leader_hwm is not None:
            server = server._replace(log=server.log[:kept], hwm=min(server.hwm, kept))
        return State(s.servers[:r] + (server,) + s.servers[r + 1:], s.reads, s.crashes, s.channels)

    # ---------------------------------------------------------- async network
    def _channel(self, a: int, b: int) -> int:
        return a * self.n + b

    def _push(self, channels: list, a: int, b: int, message: tuple) -> None:
        """Enqueue on a->b if there is room; a full channel loses the message."""
        k = self._channel(a, b)
        if len(channels[k]) < self.config.channel_capacity:
            channels[k] = channels[k] + (message,)

    def guard_send(self, s: State, a: int, b: int) -> str | None:
        if not self.async_network:
            return "send belongs to the async network; this model uses rpc"
        if a == b:
            return "a server does not send to itself"
        refusal = leader_refusal(s.servers, a)
        if refusal:
            return refusal
        if len(s.channels[self._channel(a, b)]) >= self.config.channel_capacity:
            return BoundHit("channel_capacity", f"channel {server_name(a)}->{server_name(b)} is full")
        return None

    def effect_send(self, s: State, a: int, b: int) -> State:
        leader = s.servers[a]
        prev, prev_generation, entries = self._append_request(leader, b)
        channels = list(s.channels)
        self._push(channels, a, b, (APPEND, leader.generation, prev, prev_generation, entries, leader.hwm))
        return State(s.servers, s.reads, s.crashes, tuple(channels))

    def guard_deliver(self, s: State, a: int, b: int) -> str | None:
        if not self.async_network:
            return "deliver belongs to the async network; this model uses rpc"
        if a == b:
            return "there is no channel from a server to itself"
        if not s.channels[self._channel(a, b)]:
            return f"channel {server_name(a)}->{server_name(b)} is empty"
        if not s.servers[b].alive:
            return f"{server_name(b)} is down"
        return None

    def effect_deliver(self, s: State, a: int, b: int) -> State:
        k = self._channel(a, b)
        message = s.channels[k][0]
        channels = list(s.channels)
        channels[k] = channels[k][1:]
        servers = list(s.servers)
        receiver = servers[b]
        if message[0] == APPEND:
            _, generation, prev, prev_generation, entries, leader_hwm = message
            if generation < receiver.generation:
                self._push(channels, b, a, (REPLY, receiver.generation, False, prev))
            elif prev and not self.rules.accepts_append(receiver.log, prev, prev_generation):
                # The append check (`Rules.accepts_append`; Raft's receiver rule 2: reply false if
                # the log has no entry at prevLogIndex whose generation matches prevLogTerm).
                servers[b] = receiver._replace(generation=generation, role=FOLLOWER, match=())
                self._push(channels, b, a, (REPLY, generation, False, prev))
            else:
                servers[b], acknowledged = self._follower_apply(receiver, prev, entries, leader_hwm, generation)
                self._push(channels, b, a, (REPLY, generation, True, acknowledged))
        else:
            _, generation, success, index = message
            if generation > receiver.generation:
                servers[b] = receiver._replace(generation=generation, role=FOLLOWER, match=())
            elif receiver.role == LEADER and generation == receiver.generation:
                if success:
                    servers[b] = self._with_match(receiver, b, a, index)
                else:
                    # The follower lacks the entry at `index`: back off below it.
                    servers[b] = self._with_match(receiver, b, a, min(receiver.match[a], max(index - 1, 0)))
            # Otherwise a stale reply to an earlier generation: ignored.
        return State(tuple(servers), s.reads, s.crashes, tuple(channels))

    def guard_drop(self, s: State, a: int, b: int) -> str | None:
        if not self.async_network:
            return "drop belongs to the async network; this model uses rpc"
        if a == b or not s.channels[self._channel(a, b)]:
            return f"channel {server_name(a)}->{server_name(b)} is empty"
        return None

    def effect_drop(self, s: State, a: int, b: int) -> State:
        k = self._channel(a, b)
        channels = list(s.channels)
        channels[k] = channels[k][1:]
        return State(s.servers, s.reads, s.crashes, tuple(channels))

    # ------------------------------------------------------------ enumeration
    def actions(self, s: State, bounds_hit: set | None = None) -> Iterator[Action]:
        """Every enabled action, in a fixed order (traces depend on it).

        This is the guards' logic without their explanations, for speed: `why_not`
        gives the reasons. Tests check that the two agree on random reachable states.
        """
        hit = bounds_hit if bounds_hit is not None else set()
        config = self.config
        servers = s.servers
        n = self.n
        alive = [sv.alive for sv in servers]
        leading = [sv.alive and sv.role == LEADER for sv in servers]
        generations = [sv.generation for sv in servers]
        vote = self.vote_hook
        longest_log = vote is None and self.protocol.election == "longest-log"
        if longest_log:
            freshness = [(sv.log[-1] if sv.log else 0, len(sv.log)) for sv in servers]
        noop = self.protocol.noop_on_election
        for candidate in range(n):
            if not alive[candidate] or leading[candidate]:
                continue
            for voters in self.voter_sets[candidate]:
                if not all(alive[v] for v in voters):
                    continue
                if longest_log and not all(freshness[candidate] >= freshness[v] for v in voters):
                    continue
                if vote is not None and not all(v == candidate or vote(servers[candidate].log, servers[v].log)
                                                for v in voters):
                    continue
                if 1 + max(generations[v] for v in voters) > config.max_generation:
                    hit.add("max_generation")
                elif noop and len(servers[candidate].log) >= config.max_log:
                    hit.add("max_log")
                else:
                    yield ("elect", candidate, voters)
        yield from self.server_actions(s, alive, leading, hit)
        if self.async_network:
            channels, capacity = s.channels, config.channel_capacity
            for a, b in self.pairs:
                if leading[a]:
                    if len(channels[a * n + b]) < capacity:
                        yield ("send", a, b)
                    else:
                        hit.add("channel_capacity")
                if channels[a * n + b]:
                    if alive[b]:
                        yield ("deliver", a, b)
                    yield ("drop", a, b)
        else:
            for a, b in self.pairs:
                if leading[a] and alive[b]:
                    yield ("replicate", a, b)
