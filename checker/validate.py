"""Trace validation: is a recorded run (`hwm-events/1`) a behaviour of a protocol's model?

The validator keeps the set of model states consistent with the events so far and
advances it event by event with the model's own successor function (as in Cirstea et
al., "Validating Traces of Distributed Programs Against TLA+ Specifications", 2024):

- An event is one server's atomic change. It is explained from a candidate by the fewest
  model steps (at most `depth`) after which that server looks as the events say. The other
  servers a step changes may be logged later: their changes wait, in order, in the
  candidate's `pending` list, and a later event of theirs may confirm any of them (the
  values before it were not logged: partial logging of intermediate states).
- A variable the header does not log is not compared (it takes whatever the model gives).
- Generations are compared by order, not by number: a real system skips generations (a
  failed election spends one), the model numbers them 1, 2, 3; each candidate carries the
  order-preserving renaming of the run's generations to the model's.
- Reads, crashes and restarts happen in the model only where the run logs them.
- With `deferred_acknowledgements` (a recorded raft run: `checker/recorded.py`
  `recorded_run_validator`), `replicate` is the two steps a real server makes of it: the follower's
  append, its acknowledgement waiting; then, at an event of the leader's (perhaps after it appended
  more), the leader applying it as the model's round trip would (match index, commit rule), at no
  cost in steps. An acknowledgement is applied only after the follower logged the change it
  acknowledges, only by the leadership it was sent to, and counts only the index acknowledged.

The model's bounds are lifted (the run decides how long logs grow); states are deduplicated
by value within the run. `feed(event)` takes one event at a time (a harness feeds node
observations as they come), `validate(events)` a whole run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, NamedTuple

from hwm.model.registry import build_model
from hwm.model.state import REPLY, Config
from hwm.properties.catalogue import violations
from hwm.properties.events import UNNAMED, Event, Header
from hwm.properties.protocol import Protocol
from hwm.properties.snapshot import FOLLOWER, LEADER, ServerSnapshot, Snapshot

# Lifted bounds: a recorded run, not the model's configuration, decides how far it goes.
UNBOUNDED = 1 << 30
# Actions the model takes only where the run logs them.
LOGGED_ACTIONS = ("read", "crash", "restart")


class Observed(NamedTuple):
    """What the events say of one server so far (None: a variable the header does not log)."""

    generation: int | None
    role: str | None
    log: tuple[int, ...] | None  # generations of entries 1..n, in the run's own numbering
    hwm: int | None
    alive: bool


class Candidate(NamedTuple):
    """One model state consistent with the run, with the run's generations renamed into the model's
    (sorted (run, model) pairs), per server the model's changes not yet logged, and which of those
    wait for another's: (j, at, f, at_f), server j's pending change at position `at` is a
    consequence of server f's at `at_f` (a leader's, of its follower's in one round trip); with j
    = -1 - l, leader l's waiting acknowledgement of index `at` is one of f's change at `at_f`."""

    state: object
    generations: tuple[tuple[int, int], ...]
    pending: tuple[tuple[object, ...], ...]
    waits: tuple[tuple[int, int, int, int], ...] = ()


# The model's round trips whose leader-side change (action[1]) is caused by the follower's (action[2]):
# a recorder logs a change before the message that announces it, so the leader's is never logged first.
ROUND_TRIPS = ("replicate", "sync")
# With `deferred_acknowledgements`: the follower's half of `replicate` (its acknowledgement waits), and the
# leader applying one waiting acknowledgement (see Validator._defer).
UNACKNOWLEDGED, ACK = "replicate-unacknowledged", "ack"


@dataclass
class Discrepancy:
    """The first event that no model step explains."""

    number: int  # 1-based event number in the run
    event: Event | None  # None: the run ended with changes no event logged
    before: list[str]  # the model states possible just before it (described)
    candidates: int  # how many there were
    nearest: str  # the nearest step the model could take instead, and what it gives
    properties: dict[str, str]  # catalogue properties the run breaks at this event
    reason: str

    def describe(self, source: str | None = None) -> str:
        if self.event is None:
            lines = [f"{source + ': ' if source else ''}end of run, after event {self.number - 1}: {self.reason}"]
        else:
            where = f"line {self.event.line}" if self.event.line is not None else f"event {self.number}"
            if self.event.line is not None and self.event.source is not None and self.event.source != source:
                where += f" of {self.event.source}"  # a run merged from parts: the part's file
            lines = [f"{source + ': ' if source else ''}{where}: no model step explains event {self.number}: "
                     f"{self.event}", f"  why: {self.reason}"]
        # Candidates that differ only where the run logs nothing (match indexes, replies) read alike.
        distinct = list(dict.fromkeys(self.before))
        shown = f"{self.candidates}" if len(distinct) == self.candidates else \
            f"{self.candidates}, {len(distinct)} distinct in what the run logs"
        lines.append(f"  model states possible just before it ({shown}"
                     + (", first 3 shown" if len(distinct) > 3 else "") + "):")
        for text in distinct[:3]:
            lines += ["    " + row for row in text.splitlines()]
            lines.append("    --")
        if lines[-1].strip() == "--":
            lines.pop()
        if self.event is None:
            return "\n".join(lines)
        lines.append(f"  nearest model step: {self.nearest}")
        if self.properties:
            for name, finding in self.properties.items():
                lines.append(f"  the run breaks {name}: {finding}")
        else:
            lines.append("  the run breaks no catalogue property at this event")
        return "\n".join(lines)


@dataclass
class Verdict:
    valid: bool
    events: int  # events validated (up to and including a discrepancy)
    discrepancy: Discrepancy | None = None
    candidates: int = 0  # model states consistent with the whole run (valid runs)
    steps: int = 0  # model steps explored
    capped: int = 0  # events after which explanations beyond max_candidates were dropped (a bound)


def _position_map(header: Header) -> dict[str, int]:
    return {name: k for k, name in enumerate(header.servers)}


def bind(generations: tuple[tuple[int, int], ...], run: int, model: int):
    """`generations` extended with run -> model if that keeps the renaming one-to-one and
    order-preserving; None if it cannot."""
    for r, m in generations:
        if r == run:
            return generations if m == model else None
        if (r < run) != (m < model) or m == model:
            return None
    return tuple(sorted(generations + ((run, model),)))


class Validator:
    """Advances the candidate model states with each event of one run."""

    def __init__(self, protocol: Protocol, header: Header, *, depth: int = 2, max_candidates: int = 2000,
                 max_pending: int = 8, coverage=None, deferred_acknowledgements: bool = False):
        self.protocol = protocol
        self.header = header
        self.depth = depth
        self.max_candidates = max_candidates
        self.max_pending = max_pending
        n = len(header.servers)
        self.config = Config(servers=n, max_generation=UNBOUNDED, max_log=UNBOUNDED, max_crashes=UNBOUNDED,
                             network=header.network)
        self.model = build_model(protocol, self.config)
        self.n = n
        # A recorded raft server's round trip in two steps: the follower's append, and later, perhaps
        # after the leader appended more, the leader learning the acknowledgement (the raft model's own
        # match bookkeeping, on the rpc network whose channels are otherwise unused: `_defer`).
        self.defers = bool(deferred_acknowledgements) and header.network == "rpc" and hasattr(self.model, "_with_match")
        self.positions = _position_map(header)
        self.logged = header.logged
        self.compare = tuple(v for v in ("generation", "role", "log", "hwm") if v in self.logged)
        initial = self.model.initial_state()
        self.observed = [self._observed_initial() for _ in range(n)]
        self.reads: set[tuple[int, int]] = set()  # in the run's numbering
        self.candidates: list[Candidate] = [Candidate(initial, ((0, 0),), ((),) * n)]
        self.number = 0
        self.steps = 0
        self.capped = 0  # events after which candidates beyond max_candidates were dropped
        self.discrepancy: Discrepancy | None = None
        # What the run's explanations pass through (checker/coverage.py RunCoverage), or None.
        self.coverage = coverage
        if coverage is not None:
            coverage.state(initial)
        self._mapped_cache: dict = {}
        self._last_mapped: dict = {}  # renaming -> (the last log mapped under it, its mapping)
        self._blocked: int | None = None  # a server whose unlogged change refused the last explanation
        self._successor_memo: dict = {}  # state -> its allowed successors, for the event being fed

    def _observed_initial(self) -> Observed:
        logged = self.logged
        return Observed(0 if "generation" in logged else None, FOLLOWER if "role" in logged else None,
                        () if "log" in logged else None, 0 if "hwm" in logged else None, True)

    # ------------------------------------------------------------ observation
    def _observe(self, event: Event, k: int) -> Observed:
        """Server k as the run says it is after `event` (raises ValueError for an impossible log edit)."""
        o = self.observed[k]
        log = o.log
        if event.log is not None:
            log = tuple(g for _, g in event.log)
        if event.truncate_from is not None and log is not None:
            log = log[: event.truncate_from - 1]
        if event.append is not None and log is not None:
            first = event.append[0][0]
            if first > len(log) + 1:
                raise ValueError(f"append at index {first} leaves a gap: the log holds {len(log)} entries")
            written = tuple(g for _, g in event.append)
            rest = log[first - 1 + len(written):]
            kept = rest if log[first - 1: first - 1 + len(written)] == written else ()
            log = log[: first - 1] + written + kept
        alive, role, hwm = o.alive, o.role, o.hwm
        if event.crash:
            # A crash loses the role and, in most systems, the HWM: unknown until logged again.
            alive, hwm = False, None
            role = FOLLOWER if role is not None else None
        if event.restart:
            alive = True
        generation = o.generation if event.generation is None else event.generation
        if generation == UNNAMED:
            generation = None
        return Observed(generation,
                        role if event.role is None else event.role, log,
                        hwm if event.hwm is None else event.hwm, alive)

    def _match(self, server, seen: Observed, generations):
        """The renaming under which model `server` looks as `seen`, or None."""
        if server.alive != seen.alive:
            return None
        if not seen.alive:
            # A down server logs nothing: its role and (unless durable) HWM are gone; the next
            # event after its restart says what it recovered.
            return generations
        if seen.role is not None and server.alive and server.role != seen.role:
            return None
        if seen.hwm is not None and server.hwm != seen.hwm:
            return None
        if seen.generation is not None:
            generations = bind(generations, seen.generation, server.generation)
            if generations is None:
                return None
        if seen.log is not None:
            log = server.log
            if len(log) != len(seen.log):
                return None
            mapped = self._mapped(seen.log, generations)
            if mapped is not None:  # every generation of the log already renamed: compare at C speed
                return generations if mapped == log else None
            for run, model in zip(seen.log, log):
                generations = bind(generations, run, model)
                if generations is None:
                    return None
        return generations

    def _mapped(self, log: tuple, generations) -> tuple | None:
        """The run's `log` in the model's generations, if the renaming names all of them (cached: long
        logs are compared against many candidates)."""
        key = (id(log), generations)
        cached = self._mapped_cache.get(key)
        if cached is not None and cached[0] is log:
            return cached[1]
        to_model = dict(generations)
        # A log mostly grows: extend the last mapping made under the same renaming.
        start, head = 0, ()
        last = self._last_mapped.get(generations)
        if last is not None and last[1] is not None and len(last[0]) <= len(log) \
                and log[:len(last[0])] == last[0]:
            start, head = len(last[0]), last[1]
        try:
            mapped = head + tuple(to_model[g] for g in log[start:])
        except KeyError:
            mapped = None
        if len(self._mapped_cache) > 64:
            self._mapped_cache.clear()
            self._last_mapped.clear()
        self._mapped_cache[key] = (log, mapped)
        self._last_mapped[generations] = (log, mapped)
        return mapped

    def _satisfies(self, state, k: int, event: Event, generations) -> tuple | None:
        """Reads and acknowledged writes: what the event asks of the state beyond server k's variables."""
        server = state.servers[k]
        # A read is served up to the model's read rule (a variant's `readable`, else the HWM); an
        # acknowledged write is always at or below the HWM.
        served = self.model.readable(k, server) if event.read else 0
        acked = min(server.hwm, len(server.log))
        # A model-level variant may also serve reads its own way (its own read actions).
        own = (self._own_reads(state, k) if event.read and any(i > served for i, _ in event.read)
               else frozenset())
        for index, run, limit, also in ([(i, r, served, own) for i, r in event.read or ()]
                                        + [(i, r, acked, ()) for i, r in event.ack or ()]):
            if index > limit and not (index <= len(server.log) and (index, server.log[index - 1]) in also):
                return None
            generations = bind(generations, run, server.log[index - 1])
            if generations is None:
                return None
        if event.read:
            model_of = dict(generations)
            if "reads" in self.logged and not all((i, model_of[g]) in state.reads or (i, model_of[g]) in own
                                                  for i, g in event.read):
                return None
        return generations

    def _own_reads(self, state, k: int) -> frozenset:
        """The entries of server k's log that a model-level variant's own read actions of k serve in
        `state` (ZooKeeper's read-only mode reads in its own way): what each adds to the model's reads,
        asked with the reads emptied, as `_successors` asks every read."""
        names = getattr(getattr(self.model, "variant", None), "actions", ())
        if not names:
            return frozenset()
        empty = state._replace(reads=frozenset())
        served: set = set()
        for action in self.model.actions(empty):
            if action[0] in names and action[1:2] == (k,):
                served |= self.model.apply(empty, action).reads
        return frozenset(served)

    def _same(self, a, b) -> bool:
        """Whether two model servers look alike in the run's logged variables (logs last: they are long)."""
        logged = self.logged
        return (a.alive == b.alive and ("generation" not in logged or a.generation == b.generation)
                and ("role" not in logged or a.role == b.role) and ("hwm" not in logged or a.hwm == b.hwm)
                and ("log" not in logged or a.log is b.log or a.log == b.log))

    # ---------------------------------------------------------------- search
    def _also_matches(self, server, k: int) -> bool:
        """What a subclass compares beyond the observed variables (Kafka: a leader's ISR); nothing here."""
        return True

    def _confirm(self, cand: Candidate, k: int, seen: Observed, event: Event):
        """Candidate with server k's change confirmed by `seen`, or None: the earliest pending
        change of k that matches (the ones before it were not logged), else its current state."""
        options = cand.pending[k] or (cand.state.servers[k],)
        for at, server in enumerate(options):
            if not self._also_matches(server, k):
                continue
            generations = self._match(server, seen, cand.generations)
            if generations is None:
                continue
            generations = self._satisfies(cand.state, k, event, generations)
            if generations is None:
                continue
            if any(j == k and mine <= at for j, mine, _, _ in cand.waits):
                # Its change is a consequence of another server's that no event has logged yet.
                self._blocked = next(f for j, mine, f, _ in cand.waits if j == k and mine <= at)
                return None
            pending = cand.pending[:k] + (cand.pending[k][at + 1:],) + cand.pending[k + 1:]
            waits = cand.waits
            if cand.pending[k] and waits:
                shift = at + 1
                waits = tuple((j, mine - shift if j == k else mine, f, theirs - shift if f == k else theirs)
                              for j, mine, f, theirs in waits if not (f == k and theirs < shift))
            return Candidate(cand.state, generations, pending, waits)
        return None

    def _allowed(self, action, k: int, event: Event) -> bool:
        name = action[0]
        if name not in LOGGED_ACTIONS:
            return True
        if action[1] != k:
            return False
        return (name == "read" and bool(event.read)) or (name == "crash" and event.crash) or (
            name == "restart" and event.restart)

    def _step(self, cand: Candidate, action, after) -> Candidate | None:
        if hasattr(self.model, "keep_fields"):  # a variant's fields: the validators' own steps build base servers
            after = self.model.keep_fields(cand.state, after)
        before = cand.state.servers
        pending = list(cand.pending)
        for j, server in enumerate(after.servers):
            old = before[j]
            if server is old or self._same(server, old):
                continue
            if len(pending[j]) >= self.max_pending:
                return None
            pending[j] = pending[j] + (server,)
        waits = cand.waits
        if action[0] in ROUND_TRIPS:
            l, f = action[1], action[2]
            if len(pending[l]) > len(cand.pending[l]) and len(pending[f]) > len(cand.pending[f]):
                waits = waits + ((l, len(pending[l]) - 1, f, len(pending[f]) - 1),)
        elif self.defers and action[0] == UNACKNOWLEDGED:
            # The follower acknowledges once it has logged every change up to this one: until then the
            # acknowledgement waits, as (-1 - leader, index, follower, position of its last change).
            l, f, index = action[1:]
            if pending[f]:
                waits = waits + ((-1 - l, index, f, len(pending[f]) - 1),)
        elif self.defers and action[0] == ACK:
            f, l, index = action[1:]
            if any(j == -1 - l and mine == index and theirs == f for j, mine, theirs, _ in waits):
                return None  # the follower has not logged the change it acknowledges: not sent yet
        return Candidate(after, cand.generations, tuple(pending), waits)

    def _explain(self, cand: Candidate, k: int, seen: Observed, event: Event) -> list[Candidate]:
        return self._fewest(cand, k, seen, event)

    def _taken(self, state, action):
        """The model's `action` from `state`, as one of the validator's own finer steps takes it (without
        the base's guard, which the finer step stands in for); None where a model-level variant's
        further guard (`refuses`) rules the action out, as it rules out the model's own step."""
        refused = getattr(self.model, "refused", None)
        if refused is not None and refused(state, action) is not None:
            return None
        return self.model.apply(state, action)

    def _successors(self, state, k: int, seen: Observed, event_reads: bool = False):
        """The model's steps from `state`; and a replication to server k as the run shows it, sent
        when the leader's log and HWM were shorter. A real leader sends an append as soon as it has
        entries, to every follower at once, with the log and HWM of that moment; the model
        replicates to one follower after the other with the leader's log and HWM of the moment (as
        a message that waited on the async network would)."""
        model = self.model
        # Read steps are taken only where the run logs a read, and need no exact enabling here:
        # with the ghost read set emptied, the model does not scan every entry read so far.
        defers = self.defers
        for action in model.actions(state._replace(reads=frozenset())):
            if action[0] == "read" and not event_reads:
                continue
            after = model.apply(state, action)
            if action[0] != "replicate":
                yield action, self._settle(state, action, after) if defers and state.channels else after
                continue
            older = None
            if action[2] == k:
                if hasattr(model, "_with_match"):
                    older = self._older_replication(state, action, seen, after)
                else:  # another system's model: only the HWM the follower learns may be older
                    older = self._older_hwm(state, action, seen, after)
            for sent in (after, older):
                if sent is None:
                    continue
                if defers:
                    name, sent = self._defer(state, action, sent)
                    yield name, self._settled(sent)
                else:
                    yield action, sent
        if defers and state.channels:
            yield from self._acknowledgements(state, k)

    # ------------------------------------------------ deferred acknowledgements
    def _defer(self, state, action, after):
        """The replication `action` as a recorded raft server makes it: the follower's change alone, its
        acknowledgement waiting (channel f*n+l) until an event of the leader's applies it
        (`_acknowledgements`), perhaps after the leader appended more, and never before the follower
        has logged the change it acknowledges (`_step`). The model's whole round trip where the
        acknowledgement cannot change what the leader logs (a deposed leader; an index no later
        commit can count, `_counted`)."""
        l, f = action[1], action[2]
        leader, replied = state.servers[l], after.servers[l]
        if replied.role != LEADER or replied.generation != leader.generation:
            return action, after
        index = replied.match[f]
        if not self._counted(leader, f, index):
            return action, after
        n = self.n
        channels = list(after.channels) if after.channels else [()] * (n * n)
        reply = (REPLY, leader.generation, True, index)
        if reply not in channels[f * n + l]:
            channels[f * n + l] += (reply,)
        servers = after.servers[:l] + (leader,) + after.servers[l + 1:]
        return (UNACKNOWLEDGED, l, f, index), after._replace(servers=servers, channels=tuple(channels))

    def _counted(self, leader, f: int, index: int) -> bool:
        """Whether follower f's acknowledgement of `index` may yet raise the leader's HWM. Not when the
        leader counts it already, nor at or below its HWM (a commit above the HWM needs matches above
        it), nor, where only the leader's own generation commits, an index whose entry is of an older
        generation (every entry up to it is, too)."""
        if index <= leader.match[f] or index <= leader.hwm:
            return False
        return not (self.protocol.commit == "current-generation" and index <= len(leader.log)
                    and leader.log[index - 1] != leader.generation)

    def _acknowledgements(self, state, l: int):
        """Leader l applies one waiting acknowledgement (of its generation: `_settle` drops the others):
        the model's end of the round trip, match index then commit rule; the ones it makes no-ops go."""
        leader = state.servers[l]
        if not (leader.alive and leader.role == LEADER):
            return
        n = self.n
        for f in range(n):
            queue = state.channels[f * n + l]
            for reply in queue:
                index = reply[3]
                channels = list(state.channels)
                channels[f * n + l] = tuple(r for r in queue if r[3] > index)
                now = self.model._with_match(leader, l, f, index)
                servers = state.servers[:l] + (now,) + state.servers[l + 1:]
                yield (ACK, f, l, index), self._settled(state._replace(servers=servers, channels=tuple(channels)))

    def _settle(self, before, action, after):
        """`after` (a model step from `before`, which holds acknowledgements) with them kept where they
        still are: a follower's acknowledgement sent before it crashed is on the network still (the
        model's crash empties the crashed server's channels)."""
        if action[0] == "crash" and after.channels:
            c, n = action[1], self.n
            after = after._replace(channels=tuple(before.channels[i] if i // n == c else ch
                                                  for i, ch in enumerate(after.channels)))
        return self._settled(after)

    def _settled(self, state):
        """`state` with each waiting acknowledgement that can no longer change what its leader logs
        applied at once (the model's round trip), and those to a server that no longer leads their
        generation dropped (a real leader ignores them); no channels when none waits."""
        channels = state.channels
        if not channels:
            return state
        n = self.n
        channels, servers = list(channels), list(state.servers)
        for l in range(n):
            leader = servers[l]
            leads = leader.alive and leader.role == LEADER
            for f in range(n):
                queue = channels[f * n + l]
                if not queue:
                    continue
                if not leads:
                    channels[f * n + l] = ()
                    continue
                kept = []
                for reply in queue:
                    if reply[1] != leader.generation:
                        continue  # sent to an earlier leadership of this server's
                    if self._counted(leader, f, reply[3]):
                        kept.append(reply)
                    elif reply[3] > leader.match[f]:
                        leader = self.model._with_match(leader, l, f, reply[3])
                channels[f * n + l] = tuple(kept)
            servers[l] = leader
        if not any(channels):
            channels = ()
        return state._replace(servers=tuple(servers), channels=tuple(channels))

    def _older_hwm(self, state, action, seen: Observed, after):
        f = action[2]
        if seen.hwm is None or not state.servers[f].hwm <= seen.hwm < after.servers[f].hwm:
            return None
        servers = after.servers
        return after._replace(servers=servers[:f] + (servers[f]._replace(hwm=seen.hwm),) + servers[f + 1:])

    def _older_replication(self, state, action, seen: Observed, after):
        l, f = action[1], action[2]
        leader = state.servers[l]
        length = len(leader.log) if seen.log is None else len(seen.log)
        hwm = leader.hwm if seen.hwm is None else min(seen.hwm, leader.hwm, length)
        if not 0 <= length <= len(leader.log) or (length, hwm) == (len(leader.log), leader.hwm):
            return None
        servers = state.servers
        sent = servers[:l] + (leader._replace(log=leader.log[:length], hwm=hwm),) + servers[l + 1:]
        then = self._taken(state._replace(servers=sent), action)
        if then is None:
            return None
        replied = then.servers[l]
        if replied.role != LEADER:
            return None  # the follower's generation deposed the leader: the same as the full step
        now = self.model._with_match(leader, l, f, replied.match[f])
        servers = after.servers
        servers = tuple(now if j == l else then.servers[f] if j == f else servers[j] for j in range(len(servers)))
        return after._replace(servers=servers)

    def _fewest(self, cand: Candidate, k: int, seen: Observed, event: Event) -> list[Candidate]:
        """Every candidate that the fewest model steps (<= depth) from `cand` give with the event confirmed."""
        done = self._confirm(cand, k, seen, event)
        if done is not None:
            return [done]
        if self.defers and cand.state.channels:
            # The leader's half of a round trip already taken costs no step, as the model's atomic
            # round trip's confirmation does not: one waiting acknowledgement applied.
            found = []
            for action, after in self._acknowledgements(cand.state, k):
                nxt = self._step(cand, action, after)
                ok = None if nxt is None else self._confirm(nxt, k, seen, event)
                if ok is not None:
                    found.append(ok)
                    if self.coverage is not None:
                        self.coverage.state(ok.state)
            if found:
                return found
        frontier = [cand]
        parents: dict = {}  # candidate -> (the one before it, the action between them)
        reads = bool(event.read)
        for level in range(self.depth):
            found: list[Candidate] = []
            following: list[tuple] = []
            last = level + 1 == self.depth
            for c in frontier:
                mine, read = c.state.servers[k], c.state.reads
                for action, after in self._successors_once(c.state, k, seen, reads, event):
                    if last and after.servers[k] is mine and after.reads is read:
                        # Server k and the reads as they were: confirmed no better than `c`, which was not.
                        continue
                    self.steps += 1
                    nxt = self._step(c, action, after)
                    if nxt is None:
                        continue
                    following.append((c, action, nxt))
                    ok = self._confirm(nxt, k, seen, event)
                    if ok is not None:
                        found.append(ok)
                        if self.coverage is not None:
                            parents.setdefault(nxt, (c, action))
                            self._cover(nxt, parents)
            if found or level + 1 == self.depth:
                return found
            # Deeper only when nothing explains the event at this depth: deduplicated (hashing long
            # logs is what costs on a long run, so it is done only here).
            frontier = []
            for c, action, nxt in following:
                if nxt not in parents and nxt != cand:
                    parents[nxt] = (c, action)
                    frontier.append(nxt)
            if not frontier:
                break
        return []

    def _successors_once(self, state, k: int, seen: Observed, reads: bool, event: Event) -> tuple:
        """The allowed `_successors` of `state` for this event, computed once per event: many explanations
        share a model state and differ only in what no event has logged yet (on five servers, thousands)."""
        found = self._successor_memo.get(state)
        if found is None:
            found = self._successor_memo[state] = tuple((action, after) for action, after in
                                                        self._successors(state, k, seen, reads)
                                                        if self._allowed(action, k, event))
        return found

    def _canonical(self, cand: Candidate) -> Candidate:
        """`cand` as kept between events (subclasses drop what can no longer make a difference)."""
        return cand

    def _cover(self, cand: Candidate, parents: dict) -> None:
        while cand in parents:
            before, action = parents[cand]
            if self.defers and action[0] == UNACKNOWLEDGED:  # the run passed through the model's round trip's first half
                whole = ("replicate",) + action[1:3]
                self.coverage.transition(before.state, whole, self.model.apply(before.state, whole))
            elif self.defers and action[0] == ACK:  # no model step: the state it reaches may be the model's
                self.coverage.state(cand.state)
            else:
                self.coverage.transition(before.state, action, cand.state)
            cand = before

    # ------------------------------------------------------------- interface
    def feed(self, event: Event) -> Discrepancy | None:
        """Advance by one event; the discrepancy when no model step explains it (and on every later call)."""
        if self.discrepancy is not None:
            return self.discrepancy
        self.number += 1
        k = self.positions[event.server]
        self._blocked = None
        try:
            seen = self._observe(event, k)
        except ValueError as e:
            return self._fail(event, k, self.observed[k], str(e))
        nxt: dict[Candidate, None] = {}
        self._successor_memo = {}  # this event's; `_why` reads it too
        for cand in self.candidates:
            for c in self._explain(cand, k, seen, event):
                nxt[self._canonical(c)] = None
        if not nxt:
            return self._fail(event, k, seen, self._why(k, seen, event))
        self._successor_memo = {}
        self.observed[k] = seen
        self.reads |= set(event.read or ())
        candidates = list(nxt)
        if len(candidates) > self.max_candidates:
            # A bound, said out loud in the verdict: the explanations with the fewest model changes no
            # event has shown yet are kept (the run's end needs one with none), first found first.
            candidates.sort(key=lambda c: sum(map(len, c.pending)))
            candidates = candidates[: self.max_candidates]
            self.capped += 1
        self.candidates = candidates
        return None

    def finish(self) -> Discrepancy | None:
        """The end of the run: some explanation must have every model change logged by now (a change
        the model needs but no server ever logged, like a follower's append behind a leader's HWM,
        is a discrepancy)."""
        if self.discrepancy is not None:
            return self.discrepancy
        complete = [c for c in self.candidates if not any(c.pending)]
        if complete:
            self.candidates = complete
            return None
        unlogged = []
        for cand in self.candidates[:1]:
            for name, changes in zip(self.header.servers, cand.pending):
                if changes:
                    row = self.describe_state(Candidate(cand.state, cand.generations, cand.pending))
                    unlogged.append(dict(line.split(" ", 1) for line in row.splitlines())[name])
                    unlogged[-1] = f"{name} {unlogged[-1]}"
        self.discrepancy = Discrepancy(self.number + 1, None, [self.describe_state(c) for c in self.candidates[:3]],
                                       len(self.candidates), "none",
                                       {}, "the run ends, but every explanation needs a change no event logged: "
                                       + "; ".join(unlogged))
        return self.discrepancy

    def validate(self, events: Iterable[Event], *, complete: bool = True) -> Verdict:
        """The verdict on a whole run; `complete` False for a run cut off, whose last changes may be unlogged."""
        for event in events:
            if self.feed(event) is not None:
                break
        else:
            if complete:
                self.finish()
        return self.verdict()

    def verdict(self) -> Verdict:
        return Verdict(self.discrepancy is None, self.number, self.discrepancy,
                       0 if self.discrepancy else len(self.candidates), self.steps, self.capped)

    # -------------------------------------------------------------- findings
    def _why(self, k: int, seen: Observed, event: Event) -> str:
        name = event.server
        if event.crash:
            return f"{name} cannot crash here"
        if event.restart:
            return (f"{name} restarts, but no model state within {self.depth} steps has it as the run says: "
                    + self._describe_observed(seen))
        if event.read:
            return f"no model state within {self.depth} steps lets a client read " + ", ".join(
                f"{i}@g{g}" for i, g in event.read) + f" from {name}"
        why = (f"no model state within {self.depth} steps has {name} as the run says: "
               + self._describe_observed(seen))
        return why + self._cause_missing(k, seen)

    def _cause_missing(self, k: int, seen: Observed) -> str:
        """Where server k's HWM covers an entry fewer than a majority of servers have logged: who has."""
        if seen.hwm is None or seen.log is None or not 0 < seen.hwm <= len(seen.log):
            return ""
        before = self.observed[k].hwm
        if before is not None and seen.hwm <= before:
            return ""
        entry = (seen.hwm, seen.log[seen.hwm - 1])
        holders = [name for j, (name, o) in enumerate(zip(self.header.servers, self.observed))
                   if (seen if j == k else o).log is not None and len((seen if j == k else o).log) >= entry[0]
                   and (seen if j == k else o).log[entry[0] - 1] == entry[1]]
        if len(holders) * 2 > len(self.header.servers):
            return ""
        return (f"; its HWM {seen.hwm} covers entry {entry[0]}@g{entry[1]}, which only {', '.join(holders)} "
                f"{'has' if len(holders) == 1 else 'have'} logged so far (a change is logged before the messages "
                f"that announce it, so an HWM never precedes the entry on the servers it counts)")

    def _describe_observed(self, o: Observed) -> str:
        parts = ["down" if not o.alive else (o.role or "?")]
        if o.generation is not None:
            parts.append(f"g{o.generation}")
        if o.log is not None:
            parts.append("log=[" + ",".join(map(str, o.log)) + "]")
        if o.hwm is not None:
            parts.append(f"hwm={o.hwm}")
        return " ".join(parts)

    def describe_state(self, cand: Candidate) -> str:
        """A candidate in the run's server names and the run's generations where the renaming knows them."""
        to_run = {m: r for r, m in cand.generations}

        def gen(m: int) -> str:
            return str(to_run[m]) if m in to_run else f"{m}'"  # ' : a model generation the run has not named

        lines = []
        for name, s in zip(self.header.servers, cand.state.servers):
            state = s.role if s.alive else "down"
            lines.append(f"{name} {state:<8} g{gen(s.generation)} log=[{','.join(gen(g) for g in s.log)}] "
                         f"hwm={s.hwm}")
        return "\n".join(lines)

    def _action_text(self, action) -> str:
        names = self.header.servers

        def one(x):
            return "{" + ",".join(names[v] for v in x) + "}" if isinstance(x, tuple) else names[x]
        if self.defers and action[0] == ACK:
            return f"ack({names[action[1]]}→{names[action[2]]}) of index {action[3]}"
        if self.defers and action[0] == UNACKNOWLEDGED:
            return f"replicate({names[action[1]]}, {names[action[2]]}), its acknowledgement of {action[3]} waiting"
        return f"{action[0]}(" + ", ".join(one(x) for x in action[1:]) + ")"

    def _distance(self, server, seen: Observed, generations) -> int:
        to_model = dict(generations)
        d = 0
        if server.alive != seen.alive:
            d += 4
        if seen.role is not None and server.role != seen.role:
            d += 1
        if seen.hwm is not None and server.hwm != seen.hwm:
            d += 1
        if seen.generation is not None and to_model.get(seen.generation, server.generation) != server.generation:
            d += 1
        if seen.log is not None:
            mapped = tuple(to_model.get(g, -1) for g in seen.log)
            common = 0
            for a, b in zip(mapped, server.log):
                if a != b and b is not None and a != -1:
                    break
                common += 1
            d += (len(seen.log) - common) + (len(server.log) - common)
        return d

    def _nearest(self, k: int, seen: Observed, event: Event) -> str:
        """The step the validator could take (its own steps, not only the model's) that comes nearest to
        the run's server k, what it gives, and the fields where the two differ (never two states that
        read alike: where no logged variable differs, why the step is refused)."""
        best = None
        reads = bool(event.read)
        for cand in self.candidates[:50]:
            options = [(None, cand.state), *self._successors_once(cand.state, k, seen, reads, event)]
            for action, state in options:
                server = state.servers[k]
                d = self._distance(server, seen, cand.generations) + len(self._other_differences(server, k))
                if best is None or d < best[0]:
                    best = (d, action, state, cand)
        if best is None:
            return "none"
        _, action, state, cand = best
        server = state.servers[k]
        row = self.describe_state(Candidate(state, cand.generations, cand.pending)).splitlines()[k]
        model_side = " ".join(row.split()[1:]) + self._model_extra(server, k)
        what = "no step (the state as it is)" if action is None else self._action_text(action)
        text = f"{what}, giving {model_side} where the run has {self._describe_observed(seen)}{self._run_extra(k)}"
        differences = self._differences(server, seen, cand.generations) + self._other_differences(server, k)
        if differences:
            return text + "; they differ in " + ", ".join(differences)
        return text + "; " + self._refusal(cand, action, state, k, seen, event)

    def _differences(self, server, seen: Observed, generations) -> list[str]:
        """The logged variables where model server `server` and the run's `seen` differ."""
        out = []
        if server.alive != seen.alive:
            return ["alive: model " + ("up" if server.alive else "down") + ", run " + ("up" if seen.alive else "down")]
        if not seen.alive:
            return out
        to_run = {m: r for r, m in generations}

        def gen(m: int) -> str:
            return str(to_run[m]) if m in to_run else f"{m}'"
        if seen.role is not None and server.role != seen.role:
            out.append(f"role: model {server.role}, run {seen.role}")
        if seen.generation is not None and bind(generations, seen.generation, server.generation) is None:
            out.append(f"generation: model g{gen(server.generation)}, run g{seen.generation}")
        if seen.log is not None and (len(server.log) != len(seen.log) or self._match(
                server._replace(hwm=seen.hwm if seen.hwm is not None else server.hwm, role=seen.role or server.role),
                seen._replace(generation=None), generations) is None):
            out.append("log: model [" + ",".join(gen(g) for g in server.log) + "], run ["
                       + ",".join(map(str, seen.log)) + "]")
        if seen.hwm is not None and server.hwm != seen.hwm:
            out.append(f"hwm: model {server.hwm}, run {seen.hwm}")
        return out

    def _other_differences(self, server, k: int) -> list[str]:
        """What a subclass compares beyond the logged variables and differs (Kafka: a leader's ISR)."""
        return []

    def _model_extra(self, server, k: int) -> str:
        return ""

    def _run_extra(self, k: int) -> str:
        return ""

    def _variant_refusal(self, state, action, after) -> str | None:
        """Why a model-level variant's `refuses` rules out `action`, one of the validator's own steps
        from `state` to `after`, where it is asked only when the step is taken (Kafka's halves of its
        model's actions); the other finer steps ask it as they are made (`_taken`)."""
        return None

    def _refusal(self, cand: Candidate, action, state, k: int, seen: Observed, event: Event) -> str:
        """Why a step whose server k looks as the run logs it explains nothing."""
        if action is not None:
            refused = self._variant_refusal(cand.state, action, state)
            if refused is not None:
                return f"the model refuses that step: {refused}"
            nxt = self._step(cand, action, state)
            if nxt is None:
                return ("the validator refuses that step: it needs a change of another server that no event "
                        "has logged yet (a change is logged before the messages that announce it)")
            self._blocked = None
            if self._confirm(nxt, k, seen, event) is None and self._blocked is not None:
                return (f"the validator refuses that step: it is a consequence of {self.header.servers[self._blocked]}'s "
                        f"change in the same step, which no event has logged yet (a change is logged before the "
                        f"messages that announce it)")
        if event.read and self.model.read_hook is not None:
            return ("the entries the event reads or acknowledges are not within what the variant's read rule "
                    "serves, or not at or below that state's high-water mark")
        if event.read or event.ack:
            return "the entries the event reads or acknowledges are not at or below that state's high-water mark"
        return "the run's generations cannot be renamed into the model's in order"

    def _snapshot(self, observed: list[Observed], reads) -> Snapshot | None:
        """The run's cluster as the properties see it; None under partial logging (a property
        would read variables the run does not record)."""
        if self.compare != ("generation", "role", "log", "hwm"):
            return None
        # A server's HWM is unknown from its crash to its next logged HWM: it holds none. An unnamed
        # generation (a candidate's) is below every leader's the run names.
        return Snapshot(tuple(ServerSnapshot(-1 if o.generation is None else o.generation,
                                             o.role if o.alive else FOLLOWER, o.log,
                                             0 if o.hwm is None else o.hwm, o.alive)
                              for o in observed), frozenset(reads))

    def _fail(self, event: Event, k: int, seen: Observed, reason: str) -> Discrepancy:
        before = self._snapshot(self.observed, self.reads)
        after_servers = list(self.observed)
        after_servers[k] = seen
        after = self._snapshot(after_servers, self.reads | set(event.read or ()))
        broken = violations(before, after) if before is not None and after is not None else {}
        names = self.header.servers
        # The catalogue names servers S1..Sn by position; the run has its own names.
        broken = {name: re.sub(r"\bS([1-9])\b", lambda m: names[int(m.group(1)) - 1]
                               if int(m.group(1)) <= len(names) else m.group(0), text)
                  for name, text in broken.items()}
        self.discrepancy = Discrepancy(self.number, event, [self.describe_state(c) for c in self.candidates],
                                       len(self.candidates), self._nearest(k, seen, event), broken, reason)
        return self.discrepancy


def validate(protocol: Protocol, header: Header, events: Iterable[Event], **options) -> Verdict:
    """Validate one whole run: the verdict, with the first discrepancy if there is one."""
    return Validator(protocol, header, **options).validate(events)


__all__ = ["Validator", "Verdict", "Discrepancy", "Candidate", "Observed", "validate", "bind"]
