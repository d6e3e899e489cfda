"""The actions of the model and what every protocol flag does to them.

An action is a tuple: ("elect", candidate, voters), ("write", leader),
("replicate", leader, follower), ("send"|"deliver"|"drop", from, to),
("read", server), ("crash", server), ("restart", server), with servers as
positions 0..n-1. Each action has a guard, which returns None when the action is
enabled or the reason it is not, and an effect, which returns the next state.
A reason that is a `BoundHit` means only a bound of the configuration stopped
the action: the explorer reports those so a bounded check is not taken for a proof.
"""

from __future__ import annotations

from itertools import combinations
from typing import Iterator

from model.encoding import canonical, decode, encode, fingerprint
from model.state import APPEND, FOLLOWER, LEADER, REPLY, Config, Server, State, initial_state
from properties.catalogue import CATALOGUE
from properties.protocol import Protocol
from properties.quorum import majority, quorum_index
from properties.snapshot import server_name
from properties.trace import Step

Action = tuple


class BoundHit(str):
    """A guard's reason when the action is cut by a bound, not forbidden by the protocol."""

    def __new__(cls, bound: str, text: str):
        self = super().__new__(cls, text)
        self.bound = bound
        return self


def last_generation(log: tuple[int, ...]) -> int:
    return log[-1] if log else 0


def up_to_date(candidate: tuple[int, ...], voter: tuple[int, ...]) -> bool:
    """Raft 5.4.1: compare the last entries' generations, then the lengths."""
    return (last_generation(candidate), len(candidate)) >= (last_generation(voter), len(voter))


def leader_refusal(servers, l: int) -> str | None:
    """Why server `l` cannot act as a leader at all, or None."""
    leader = servers[l]
    if not leader.alive:
        return f"{server_name(l)} is down"
    if leader.role != LEADER:
        return f"{server_name(l)} is not a leader"
    return None


def pair_refusal(servers, l: int, f: int, itself: str) -> str | None:
    """Why leader `l` cannot reach follower `f` at all (`itself` when they are the same server),
    or None: the liveness checks every leader-to-follower action starts with."""
    if l == f:
        return itself
    refusal = leader_refusal(servers, l)
    if refusal is None and not servers[f].alive:
        return f"{server_name(f)} is down"
    return refusal


class ServerActions:
    """What a server and its clients do the same way in every model: a client reads below the
    high-water mark, a server crashes and restarts; and the dispatch from an action to its
    guard and effect. A model's state is a NamedTuple with `servers` (each with alive, role,
    log, hwm), `reads` and `crashes`; `_effects` maps an action's name to its effect."""

    # How a server with nothing readable says so, in its system's words.
    NOTHING_TO_READ = "has nothing at or below its high-water mark"

    def successors(self, s, bounds_hit: set | None = None) -> Iterator[tuple[Action, object]]:
        """Every enabled action and its next state, in the order of `actions`."""
        apply = self.apply
        for action in self.actions(s, bounds_hit):
            yield action, apply(s, action)

    def why_not(self, s, action: Action) -> str | None:
        """None when `action` is enabled in `s`, else the reason."""
        guard = getattr(self, "guard_" + action[0], None)
        if guard is None:
            return f"{action[0]} is not an action of the {self.protocol.system} model"
        return guard(s, *action[1:])

    def apply(self, s, action: Action):
        return self._effects[action[0]](s, *action[1:])

    def server_actions(self, s, alive: list, leading: list, hit: set) -> Iterator[Action]:
        """Each server's restart, or its write (a leader), read and crash, in server order."""
        config, reads = self.config, s.reads
        for k, server in enumerate(s.servers):
            if not alive[k]:
                yield ("restart", k)
                continue
            log = server.log
            if leading[k]:
                if len(log) < config.max_log:
                    yield ("write", k)
                else:
                    hit.add("max_log")
            readable = min(server.hwm, len(log))
            if readable and not all((i + 1, log[i]) in reads for i in range(readable)):
                yield ("read", k)
            if s.crashes < config.max_crashes:
                yield ("crash", k)
            else:
                hit.add("max_crashes")

    def guard_read(self, s, r: int) -> str | None:
        server = s.servers[r]
        if not server.alive:
            return f"{server_name(r)} is down"
        readable = min(server.hwm, len(server.log))
        if readable == 0:
            return f"{server_name(r)} {self.NOTHING_TO_READ}"
        if all((i + 1, server.log[i]) in s.reads for i in range(readable)):
            return f"clients have already read everything {server_name(r)} can serve"
        return None

    def effect_read(self, s, r: int):
        # "Any client can read the log entries only till the high-water mark."
        server = s.servers[r]
        readable = min(server.hwm, len(server.log))
        return s._replace(reads=s.reads | {(i + 1, server.log[i]) for i in range(readable)})

    def guard_write(self, s, l: int) -> str | None:
        refusal = leader_refusal(s.servers, l)
        if refusal is None and len(s.servers[l].log) >= self.config.max_log:
            return BoundHit("max_log", f"{server_name(l)}'s log is at max_log {self.config.max_log}")
        return refusal

    def guard_crash(self, s, c: int) -> str | None:
        if not s.servers[c].alive:
            return f"{server_name(c)} is already down"
        if s.crashes >= self.config.max_crashes:
            return BoundHit("max_crashes", f"max_crashes {self.config.max_crashes} reached")
        return None

    def guard_restart(self, s, r: int) -> str | None:
        if s.servers[r].alive:
            return f"{server_name(r)} is not down"
        return None


class Model(ServerActions):
    """The explicit-state model of one protocol variant under one configuration."""

    # The properties the engines check on this model's states.
    properties = CATALOGUE

    def __init__(self, protocol: Protocol, config: Config):
        self.protocol = protocol
        self.config = config
        self.n = config.servers
        self.quorum = majority(self.n)
        others = range(self.n)
        # Voter sets per candidate: every quorum of servers that includes the candidate.
        self.voter_sets = [
            [v for size in range(self.quorum, self.n + 1) for v in combinations(others, size) if c in v]
            for c in others
        ]
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
        q = quorum_index(self.protocol.quorum, indexes)
        if q <= leader.hwm:
            return leader
        if self.protocol.commit == "current-generation":
            # Raft 5.4.2: only an entry of the leader's own generation is committed by counting.
            if q > len(leader.log) or leader.log[q - 1] != leader.generation:
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
        if len(voters) < self.quorum:
            return f"{len(voters)} voters are not a quorum of {self.n} (need {self.quorum})"
        for v in voters:
            if not servers[v].alive:
                return f"{server_name(v)} is down and cannot vote"
        if self.protocol.election == "longest-log":
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
        if self.protocol.append_check == "previous-entry":
            # One whole round trip, Raft's back-off included: step prev back until the
            # follower holds the leader's entry there (index 0 always matches).
            log = follower.log
            while prev and (len(log) < prev or log[prev - 1] != leader.log[prev - 1]):
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
        rule = self.protocol.restart
        if rule == "truncate-to-own-hwm":
            server = server._replace(log=server.log[: server.hwm])
        elif rule == "truncate-to-leader-hwm":
            # "It then explicitly asks for the current high-water mark, truncates its log to
            # high-water mark." A server that finds no leader (or only a stale one) keeps its log.
            k = self.restart_leader(s, r)
            if k is not None and s.servers[k].generation >= server.generation:
                log = server.log[: s.servers[k].hwm]
                server = server._replace(log=log, hwm=min(server.hwm, len(log)))
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
            elif (self.protocol.append_check == "previous-entry" and prev
                  and (len(receiver.log) < prev or receiver.log[prev - 1] != prev_generation)):
                # Raft receiver rule 2: reply false if the log has no entry at prevLogIndex
                # whose generation matches prevLogTerm.
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
        longest_log = self.protocol.election == "longest-log"
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



def build_model(protocol: Protocol, config: Config) -> Model:
    """The model of `protocol` under `config`: the one place a protocol picks its model class."""
    if protocol.system == "zab":
        from model.zab import ZabModel
        return ZabModel(protocol, config)
    if protocol.system == "bookkeeper":
        from model.bookkeeper import BookKeeperModel
        return BookKeeperModel(protocol, config)
    if protocol.system == "kafka":
        from model.kafka import KafkaModel
        return KafkaModel(protocol, config)
    return Model(protocol, config)


# ------------------------------------------------------- actions <-> trace steps
def to_step(action: Action, value: str | None = None) -> Step:
    """A model action as a trace step with servers named S1..Sn."""
    name = action[0]
    if name == "elect":
        return Step(name, {"server": server_name(action[1]), "voters": tuple(server_name(v) for v in action[2])})
    if name == "write":
        return Step(name, {"server": server_name(action[1]), "value": value or f"v{action[1] + 1}"})
    if name in ("replicate", "shrink_isr"):
        return Step(name, {"leader": server_name(action[1]), "follower": server_name(action[2])})
    if name in ("send", "deliver", "drop"):
        return Step(name, {"from": server_name(action[1]), "to": server_name(action[2])})
    if name == "sync":
        return Step(name, {"leader": server_name(action[1]), "follower": server_name(action[2])})
    if name == "leader_and_isr":
        return Step(name, {"leader": server_name(action[1]), "replica": server_name(action[2])})
    if name == "add":
        return Step(name, {"value": value} if value else {})
    if name in ("send_add", "fence", "recovery_read"):
        return Step(name, {"bookie": server_name(action[1])})
    return Step(name, {"server": server_name(action[1])})


def from_step(step: Step) -> Action:
    """A trace step (already validated against the configuration) as a model action."""
    def pos(name: str) -> int:
        return int(name[1:]) - 1

    a = step.args
    if step.action == "elect":
        return ("elect", pos(a["server"]), tuple(sorted(pos(v) for v in a["voters"])))
    if step.action in ("replicate", "sync", "shrink_isr"):
        return (step.action, pos(a["leader"]), pos(a["follower"]))
    if step.action == "leader_and_isr":
        return ("leader_and_isr", pos(a["leader"]), pos(a["replica"]))
    if step.action == "add":
        return ("add",)
    if step.action in ("send_add", "fence", "recovery_read"):
        return (step.action, pos(a["bookie"]))
    if step.action in ("send", "deliver", "drop"):
        return (step.action, pos(a["from"]), pos(a["to"]))
    return (step.action, pos(a["server"]))
