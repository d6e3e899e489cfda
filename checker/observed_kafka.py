"""Trace validation of a live Kafka cluster: the finer steps of a correct Kafka broker, in Kafka's model.

Kafka's model (model/kafka.py) makes a fetch one step: `replicate(L, F)` truncates F where it must,
appends what L holds from F's log end, moves F's high watermark, and at once counts F's new log
end offset on L (its HW, an ISR expansion). Elections are the controller's, atomic, with each
LeaderAndIsr request arriving with its election or never, and a restart learns the current epoch
and leader in the same step. A correct broker (hwm's own node, `impl/kafka.py`) shows these in
finer steps, and this validator accepts exactly these:

- **A LeaderAndIsr request arrives late.** A replica of an older epoch (or one restarted that
  knows no leader yet) receives the current epoch's request later than its election:
  `leader_and_isr(L, R)` is the model's step of that name (taken whatever `late_leader_and_isr`
  says: the flag is about a request the controller sent long ago, this is one on its way), or
  the request of an epoch whose leader the controller holds failed (no leader: R becomes a
  follower of that epoch that fetches from no one).
- **A restart shows what the disk holds before the controller answers.** A restarted broker is a
  follower of the epoch it checkpointed, of no leader, with its log and HW; the controller's
  LeaderAndIsr (above) then makes it a follower as the model's restart does in one step.
- **The HW moves on the next fetch, not on the follower's append.** F's side of a fetch is one
  change (a truncation exchange, OffsetsForLeaderEpoch, may be a change of its own before it);
  what L learns comes with F's next fetch, whose offset is F's log end offset then: `fetch(F→L)`
  sets L's view of F and advances L's HW by the model's rule, later, in order with F's other
  fetches or never (a fetch from F's current log end offset may also reach L at any time: F sends
  one after each change). A fetch to an earlier epoch of L is ignored.
- **A fetch response carries the leader's log and HW of when it was answered**: F may append a
  shorter prefix of what L holds, or learn an older HW; never an entry L lacks.
- **A late fetch response from an old leader epoch**: a leader that crashed, was deposed or was
  elected again for a later epoch answered F's fetch before; F, still its follower in that epoch,
  appends the answer now.
- **ISR changes are the controller's answers.** An expansion (F's fetch reached the HW) is made
  when the AlterIsr answer comes back: `fetch(F→L)` with the expansion, in one step. A shrink the
  leader asked for when F was behind (or its session lapsed) may be accepted after F caught up:
  a shrink of any ISR replica by the current epoch's leader (it never raises the HW above an
  in-sync replica's log end). The controller elects with the ISR as its broker sessions show it:
  ISR replicas that received no LeaderAndIsr may be in the new ISR or not (a dead broker whose
  session has not expired stays; a live one cut off from the controller leaves).
- **Followers may show an epoch before its leader does.** The controller elects on its own timer and
  sends LeaderAndIsr to every live broker at once; hwm reads the new leader only at its next input,
  by when a follower may have shown the epoch and fetched in it (and the leader expanded its ISR).
  The harness names such followers first, told with that leader's election (`feed`'s `leader` and
  `told`), and the leader's first shown state may count their fetches.
- **A shrink counts the fetches the leader took at inputs that showed nothing.** A fetch that moves
  neither the HW (a replica still in the ISR holds it back) nor the ISR changes only the leader's
  view of its follower; under the wall clock the lag timer may then shrink the ISR, the HW move
  over that fetch's offset and a held fetch be answered with it, before the leader's next input:
  `fetch_then_shrink_isr` takes such fetches and the shrink as one step, only where the fetches
  alone leave the HW as it is (several replicas leave one AlterIsr at a time, each counting until
  it leaves).
- **A leader's kill may follow a shrink it never showed.** Its lag timer shrank the ISR, the controller
  answered before its next input, the HW moved and was checkpointed, and hwm killed it before reading
  it: a down broker shows no HW, so the crash alone explains the kill, and the restart shows the HW
  the shrink gave. At a leader's kill each shrink above that moves its HW, then the crash, is kept too.
- **The ISR is compared where the node shows it**: a leader's own copy of the ISR (the model's
  `isr` of a leader, itself included) must be the one the node reports (`feed(event, isr=...)`).

Everything else is Kafka's model: entries are the leader's (its epoch, from a follower's log end),
a follower truncates where the preset's rule says, a HW is the minimum log end offset over the
leader's copy of the ISR and only while that ISR has min.insync.replicas replicas, a deposed
leader's ISR update is refused, elections are from the ISR (or unclean where the preset allows).
"""

from __future__ import annotations

from itertools import combinations

from hwm.checker.observed import ObservedValidator
from hwm.checker.validate import Candidate, Validator
from hwm.model.kafka import NO_LEADER, diverged_at, truncation_offset
from hwm.model.state import FOLLOWER, LEADER


class ObservedKafkaValidator(ObservedValidator):
    """`Validator` over Kafka's model with a correct broker's finer steps (see the module's docstring).

    Fetches a leader has not yet applied live in the state's `channels`, laid out as the raft
    validator's (channel f*n+l holds f's fetches to l as (L's epoch, offset)); channel l*n+l holds
    leader l as it was when it stopped leading (its answers may still arrive)."""

    def __init__(self, protocol, header, **options):
        super().__init__(protocol, header, **options)
        if protocol.system != "kafka":
            raise ValueError(f"ObservedKafkaValidator steps Kafka's model, not {protocol.system}'s")
        self.refines = header.network == "rpc"
        self._isr_seen: frozenset[int] | None = None  # the ISR the event's node shows, as positions
        # Whether the run shows a leader's ISR (hwm test's hwm_state answers do, recordings do not): then a
        # step that changes a leader's ISR alone is a change an event must confirm, like a log or HW change.
        self.shows_isr = False
        self._elections_wanted = True
        # The leader of the epoch a follower's event names, and the followers that showed that epoch before
        # that leader showed it (`feed`).
        self._epoch_leader: int | None = None
        self._told: tuple[int, ...] = ()

    # ------------------------------------------------------------------ interface
    def feed(self, event, isr=None, leader=None, told=()):
        """`Validator.feed`; `isr` (names) is the ISR the node reports with this event, compared on a leader.
        `leader` and `told` (names): the run showed the followers `told` (the event's server among them)
        in an epoch before its leader `leader` showed itself leading it; the election searched for may
        then also be that leader's whose LeaderAndIsr reaches `told` with it (`_elections`)."""
        self._isr_seen = None if isr is None else frozenset(self.positions[name] for name in isr
                                                            if name in self.positions)
        self._epoch_leader = None if leader is None else self.positions[leader]
        self._told = tuple(sorted(self.positions[name] for name in told))
        self.shows_isr = self.shows_isr or isr is not None
        # An election is searched for only where the event shows a new epoch or role: no other change
        # of a node needs one (a replica of a new epoch shows it), and each state offers one per ISR
        # replica, each with the ISRs the controller may choose (the search's cost, on five nodes).
        before = self.observed[self.positions[event.server]] if event.server in self.positions else None
        self._elections_wanted = before is None or event.restart or (
            event.generation is not None and event.generation != before.generation) or (
            event.role is not None and event.role != before.role)
        try:
            return super().feed(event)
        finally:
            self._isr_seen = None
            self._elections_wanted = True
            self._epoch_leader, self._told = None, ()

    def _also_matches(self, server, k: int) -> bool:
        if self._isr_seen is None or not server.alive or server.role != LEADER:
            return True  # a follower's copy is the one its last LeaderAndIsr sent: the model keeps none
        return self._isr_seen == self._model_isr(server, k)

    def _model_isr(self, server, k: int) -> frozenset[int]:
        return frozenset(j for j, held in enumerate(server.isr) if held or j == k)

    def _isr_text(self, isr) -> str:
        return ",".join(self.header.servers[j] for j in sorted(isr))

    def _other_differences(self, server, k: int) -> list[str]:
        if self._isr_seen is None or not server.alive or server.role != LEADER \
                or self._isr_seen == self._model_isr(server, k):
            return []
        return [f"isr: model {self._isr_text(self._model_isr(server, k))}, run {self._isr_text(self._isr_seen)}"]

    def _model_extra(self, server, k: int) -> str:
        shown = self._isr_seen is not None and server.alive and server.role == LEADER
        return f" isr={self._isr_text(self._model_isr(server, k))}" if shown else ""

    def _run_extra(self, k: int) -> str:
        return "" if self._isr_seen is None else f" isr={self._isr_text(self._isr_seen)}"

    def _same(self, a, b) -> bool:
        # Where the run shows a leader's ISR, an ISR-only change is a change: two AlterIsr answers between
        # two answers of a node (an expansion, then a shrink or another expansion: under the wall clock
        # the node's own timers shrink, and the controller in hwm's first node answers at once) are two
        # steps whose second changes nothing else, and the node shows the ISR after the second.
        return super()._same(a, b) and (not self.shows_isr or a.role != LEADER or a.isr == b.isr)

    # ------------------------------------------------------------------ steps
    def _explain(self, cand, k, seen, event):
        found = super()._explain(cand, k, seen, event)
        if event.crash and self.refines:
            found = found + self._shrunk_before_crash(cand, k, seen, event)
        return found

    def _shrunk_before_crash(self, cand, k, seen, event) -> list:
        """Leader k's kill after its lag timer shrank the ISR and moved the HW, unshown: the controller
        answered the AlterIsr before k's next input (in hwm's node the controller in the first node
        answers at once), the HW was checkpointed, and k was killed before hwm read it. A down broker
        shows no HW, so the crash alone explains the kill (the fewest steps), and its restart would show
        a HW the model's crash never kept. Each shrink `_shrinks` gives (the fetches it counts among
        them) that moves k's HW, then the crash, as two steps; the restart then shows that HW."""
        state = cand.state
        leader = state.servers[k]
        if not (leader.alive and leader.role == LEADER):
            return []
        found = []
        for action, shrunk in self._shrinks(state, k):
            if shrunk.servers[k].hwm == leader.hwm:
                continue  # the crash hides the ISR: only a HW the restart shows needs the shrink
            nxt = self._step(cand, action, self._remember_leaders(state, shrunk))
            if nxt is None:
                continue
            crashed = self._taken(shrunk, ("crash", k))
            if crashed is None:
                continue
            crashed = self._crashed(shrunk, k, crashed._replace(channels=shrunk.channels))
            nxt = self._step(nxt, ("crash", k), self._remember_leaders(shrunk, crashed))
            done = None if nxt is None else self._confirm(nxt, k, seen, event)
            if done is not None:
                found.append(done)
        return found

    def _stands_for(self, action, state, after) -> list:
        """The model's actions one of the finer steps below is made of (its halves of `replicate`, its
        shrinks, a late LeaderAndIsr), each of which a model-level variant's `refuses` may rule out."""
        name = action[0]
        if name in ("truncate", "fetch_response", "fetch_response_late"):  # the follower's half
            return [("replicate", *action[1:])]
        if name == "leader_and_isr":  # (r, r): the controller's request naming no leader, no model action
            return [action] if action[1] != action[2] else []
        taken = []
        if name in ("fetch", "fetch_then_shrink_isr"):  # the leader's half: the fetches it took
            l = action[2]
            # Of fetches taken together, those that changed something: the leader's view of the
            # follower, or its ISR (one that changed nothing is the same state, refused or not).
            was, now = state.servers[l], after.servers[l]
            fetched = [action[1]] if action[1] != "all" else [
                f for f in range(self.n) if f != l and ((was.match or ())[f:f + 1] != (now.match or ())[f:f + 1]
                                                        or (was.isr or ())[f:f + 1] != (now.isr or ())[f:f + 1])]
            taken += [("replicate", l, f) for f in fetched]
        if name in ("shrink_isr", "fetch_then_shrink_isr"):
            l, removed = action[-2], action[-1]
            taken += [("shrink_isr", l, r) for r in (removed if isinstance(removed, tuple) else (removed,))]
        return taken

    def _variant_refusal(self, state, action, after) -> str | None:
        refused = getattr(self.model, "refused", None)
        if refused is not None:
            for taken in self._stands_for(action, state, after):
                reason = refused(state, taken)
                if reason is not None:
                    return reason
        return None

    def _step(self, cand: Candidate, action, after):
        if self._variant_refusal(cand.state, action, after) is not None:
            return None
        if self.followers_first and action[0] in ("fetch", "fetch_then_shrink_isr"):
            # A follower's change is observed before the fetch it sends next can reach the leader: no
            # fetch is taken from a follower whose last change no event has shown yet. A fetch among
            # several taken together is known by the leader's view of it, or by the ISR expansion it
            # made (a fetch from the offset the leader's view already holds moves only that).
            l = action[2]
            before, now = cand.state.servers[l].match, after.servers[l].match
            had, has = cand.state.servers[l].isr, after.servers[l].isr
            if any(cand.pending[f] for f in range(self.n) if f != l and (
                    not before or before[f] != now[f] or action[1] == f or (has and has[f] and not (had and had[f])))):
                return None
        return super()._step(cand, action, after)

    def _apply(self, state, action):
        """The model's step, keeping the validator's channels (Kafka's model runs on no network)."""
        return self.model.apply(state, action)._replace(channels=state.channels)

    def _successors(self, state, k, seen, event_reads=False):
        if not self.refines:
            yield from Validator._successors(self, state, k, seen, event_reads)
            return
        model = self.model
        for action in model.actions(state._replace(reads=frozenset())):
            name = action[0]
            if name == "read" and not event_reads:
                continue
            if name in ("replicate", "shrink_isr", "leader_and_isr"):
                continue  # split into the finer steps below (shrink_isr: relaxed below)
            if name == "elect":
                if not self._elections_wanted:
                    continue
                for after in self._elections(state, action):
                    yield action, self._remember_leaders(state, after)
                continue
            after = self._apply(state, action)
            if name == "crash":
                after = self._crashed(state, action[1], after)
            yield action, self._remember_leaders(state, after)
            if name == "restart":
                yield action, self._restarted_unled(state, action[1])
        for f in range(self.n):
            # Another follower's change is not observed yet: it waits as the model's pending change.
            yield from self._follower_steps(state, f, seen if f == k else None)
        for l, leader in enumerate(state.servers):
            if leader.alive and leader.role == LEADER:
                yield from self._fetches(state, l)
                yield from self._fetches_together(state, l, seen.hwm if l == k else None)
                yield from self._shrinks(state, l)
        yield from self._late_leader_and_isr(state)

    # ---- elections and the controller's requests
    def _elections(self, state, action):
        """The model's election, and the same with the ISR as the controller's broker sessions show it:
        each ISR replica the request did not reach may stay in the new ISR or leave it. Only the
        election whose request reaches the new leader alone: every other replica's request is a late
        one (`_late_leader_and_isr`, the same change), so the other recipient sets add nothing but
        candidates (2^(n-1) of them, for each ISR). And one more: where followers showed the epoch
        before its leader did (`feed`'s `told`: the controller elected on its own timer, and hwm reads
        the leader only at its next input), that leader's election whose request reaches them too, as
        the controller sends it to every live broker at once. The harness names them before the
        leader's first shown state, which may count their fetches in the new epoch; with the late
        requests that is two steps for the first of them, and the ISR of each replica the request left
        out open (on five replicas sixteen explanations, each searched again at the leader's state)."""
        _, c, voters = action
        if voters != (c,) and (c != self._epoch_leader or voters != tuple(sorted({c, *self._told}))):
            return
        after = self._apply(state, action)
        yield after
        if not state.servers[c].in_isr:
            return  # unclean: the new ISR is the new leader alone
        model = self.model
        others = [k for k, sv in enumerate(state.servers) if sv.in_isr and k not in voters]
        chosen_by_model = frozenset(k for k, sv in enumerate(after.servers) if sv.in_isr)
        for size in range(len(others) + 1):
            for kept in combinations(others, size):
                isr = frozenset(voters) & frozenset(k for k, sv in enumerate(state.servers) if sv.in_isr or k == c)
                isr = isr | frozenset(kept) | {c}
                if isr == chosen_by_model:
                    continue
                servers = [sv._replace(in_isr=j in isr) for j, sv in enumerate(after.servers)]
                servers[c] = servers[c]._replace(isr=tuple(j in isr for j in range(self.n)),
                                                 hwm=state.servers[c].hwm)
                acked = model._advance_hwm(servers, c, state.acked)
                yield after._replace(servers=tuple(servers), acked=acked)

    def _late_leader_and_isr(self, state):
        """The current epoch's LeaderAndIsr reaching a replica of an older epoch, or a restarted one
        that knows no leader: from the epoch's live leader (the model's step), or naming no leader
        (the controller holds that leader failed)."""
        model = self.model
        epoch = model.epoch(state)
        leader = next((l for l, sv in enumerate(state.servers)
                       if sv.alive and sv.role == LEADER and sv.generation == epoch), None)
        for r, replica in enumerate(state.servers):
            if not replica.alive or r == leader or not (replica.generation < epoch or replica.leader == NO_LEADER):
                continue
            if replica.role == LEADER and replica.generation == epoch:
                continue
            if leader is not None:
                after = model.effect_leader_and_isr(state, leader, r)._replace(channels=state.channels)
                yield ("leader_and_isr", leader, r), self._remember_leaders(state, after)
            unled = model._become_follower(replica, epoch, NO_LEADER)
            after = state._replace(servers=state.servers[:r] + (unled,) + state.servers[r + 1:])
            yield ("leader_and_isr", r, r), self._remember_leaders(state, after)

    def _restarted_unled(self, state, r: int):
        """A restart before the controller's answer: the checkpointed epoch, no leader, the log and HW
        the model's restart keeps (its LeaderAndIsr comes as a later step)."""
        # The crash already left what the disk holds (under log_flush=never, the flushed prefix).
        server = state.servers[r]._replace(alive=True, role=FOLLOWER, match=(), isr=(), leader=NO_LEADER,
                                           truncating=False)
        return state._replace(servers=state.servers[:r] + (server,) + state.servers[r + 1:])

    def _crashed(self, state, c: int, after):
        """A crash: fetches sent to c are lost with its connections (a restarted broker is a new
        incarnation); the ones it sent stay on the network."""
        if not state.channels:
            return after
        n = self.n
        channels = tuple(() if i % n == c and i // n != c else ch for i, ch in enumerate(after.channels))
        return after._replace(channels=channels)

    # ---- the follower's side of a fetch
    def _follower_steps(self, state, k, seen):
        """Follower k's truncation exchange, and a fetch response appended (with the leader's log and HW
        of when it was answered), from its leader or from a leader that has since stopped leading."""
        follower = state.servers[k]
        if not follower.alive or follower.role != FOLLOWER or follower.leader == NO_LEADER:
            return
        l = follower.leader - 1
        for leader, late in self._answerers(state, l, follower):
            yield from self._fetch_answered(state, k, seen, follower, l, leader, late)

    def _answerers(self, state, l, follower):
        """Who answered follower's fetch to l: l as it is while it leads, and l as it was when it last
        stopped leading in the follower's epoch (crashed, deposed, or leading again in a later epoch:
        an answer it gave in the follower's epoch may arrive after its next election)."""
        leader = state.servers[l]
        leading = leader.alive and leader.role == LEADER
        if leading and (leader.generation == follower.generation or self.protocol.follower_truncation != "fenced"):
            yield leader, False  # of another epoch only where fetches are not fenced (before KIP-320)
        was = state.channels[l * self.n + l] if state.channels else ()
        if was and was[0].generation == follower.generation and (not leading or leader.generation != follower.generation):
            yield was[0], True

    def _fetch_answered(self, state, k, seen, follower, l, leader, late):
        log = self._truncated(follower, leader)
        if log != follower.log or follower.truncating:
            now = follower._replace(log=log, hwm=min(follower.hwm, len(log)), truncating=False,
                                    flushed=min(follower.flushed, len(log)))
            yield ("truncate", l, k), self._with_follower(state, k, now, l, leader, None)
        if late and log != follower.log:
            return  # a late answer is a fetch's, never an OffsetsForLeaderEpoch's
        # The fetch response, from the log end after the truncation (the fetch is sent from there).
        lengths = {len(leader.log)}
        if seen is not None and seen.log is not None and len(log) <= len(seen.log) <= len(leader.log):
            lengths.add(len(seen.log))
        hwms = {leader.hwm}
        if seen is not None and seen.hwm is not None and seen.hwm < leader.hwm:
            hwms.add(seen.hwm)
        for length in lengths:
            fetched = log + leader.log[len(log):length]
            for hwm in hwms:
                high = max(min(follower.hwm, len(fetched)), min(hwm, len(fetched)))
                now = follower._replace(log=fetched, hwm=high, truncating=False,
                                        flushed=min(follower.flushed, len(log)))
                if now == follower:
                    continue
                step = "fetch_response_late" if late else "fetch_response"
                yield (step, l, k), self._with_follower(state, k, now, l, leader, (len(log), len(fetched)))

    def _truncated(self, follower, leader) -> tuple:
        """Where the model's `replicate` truncates the follower's log before fetching."""
        log = follower.log
        rule = self.protocol.follower_truncation
        if follower.truncating:
            log = log[:truncation_offset(rule, log, follower.hwm, leader.log)]
        elif rule == "last-fetched-epoch":
            truncate_to = diverged_at(log, leader.log)
            if truncate_to is not None:
                log = log[:truncate_to]
        if len(log) > len(leader.log):
            log = log[:len(leader.log)]  # OFFSET_OUT_OF_RANGE
        return log

    def _with_follower(self, state, k, now, l, leader, offsets):
        """`state` with follower k as `now` and, for a fetch response, the fetch it answered and the
        next one (from the new log end offset) on their way to leader l: the leader took the first
        before it answered, but nothing it showed may have needed it yet (an ISR expansion it caused
        waits for the controller's answer, and the HW it gives then is counted with it)."""
        servers = state.servers[:k] + (now,) + state.servers[k + 1:]
        if offsets is None:
            return state._replace(servers=servers)
        channels = self._channels(state)
        queue = channels[k * self.n + l]
        for offset in dict.fromkeys(offsets):
            fetch = (leader.generation, offset)
            if not queue or queue[-1] != fetch:
                queue = queue + (fetch,)
        channels[k * self.n + l] = queue
        return state._replace(servers=servers, channels=tuple(channels))

    # ---- the leader's side
    def _fetches(self, state, l):
        """Each fetch leader l may take now: one waiting from a follower, or one from a follower's
        current log end offset; with the ISR expansion it may lead to (the controller's answer)."""
        n = self.n
        for f in range(n):
            if f == l:
                continue
            queue = state.channels[f * n + l] if state.channels else ()
            seen_offsets = set()
            for at, offset in self._offers(state, l, f) + self._repeated(state, l, f):
                if offset in seen_offsets:
                    continue
                seen_offsets.add(offset)
                channels = list(self._channels(state))
                if at is not None:
                    channels[f * n + l] = queue[at + 1:]  # FIFO: the ones before it were taken before it
                for expand in (False, True):
                    after = self._take_fetch(state, l, f, offset, expand)
                    if after is not None:
                        yield ("fetch", f, l), after._replace(channels=tuple(channels))

    def _offers(self, state, l, f) -> list[tuple[int, int]]:
        """The fetches from f that leader l may take now, in order: (position in the queue, offset)."""
        leader, follower = state.servers[l], state.servers[f]
        queue = state.channels[f * self.n + l] if state.channels else ()
        offers = [(at, offset) for at, (generation, offset) in enumerate(queue) if generation == leader.generation]
        # Its fetch from its log end offset now: sent after its last change, or, for a replica that must
        # first find its truncation point, after an OffsetsForLeaderEpoch answer that truncates nothing.
        if (follower.alive and follower.role == FOLLOWER and follower.leader == l + 1
                and (follower.generation == leader.generation or self.protocol.follower_truncation != "fenced")
                and (not follower.truncating or self._truncated(follower, leader) == follower.log)):
            offers.append((len(queue), len(follower.log)))
        return [(at, offset) for at, offset in offers if offset <= len(leader.log)]

    def _repeated(self, state, l, f) -> list[tuple[None, int]]:
        """Fetches f sent before, arriving again: a follower resends a fetch from the same offset while it
        goes unanswered (a partition holds them all), the network may duplicate one, and one sent before
f crashed may arrive after. Each is from an
        offset f held then and holds now (it holds l's entries up to it), in l's epoch; only those at or
        above l's HW change what a node shows (an ISR expansion, and a HW up to that offset), and none
        counts an entry f lacks. Taking one leaves the waiting fetches as they are."""
        leader, follower = state.servers[l], state.servers[f]
        # A follower that has crashed since: the fetches it sent stay on the network, and its log on disk.
        if not (follower.role == FOLLOWER and follower.leader == l + 1 and follower.generation == leader.generation
                and (not follower.truncating or self._truncated(follower, leader) == follower.log)):
            return []
        end = min(len(follower.log), len(leader.log))
        return [(None, offset) for offset in range(leader.hwm, end + 1)
                if follower.log[:offset] == leader.log[:offset]]

    def _fetches_together(self, state, l, hwm):
        """Several followers' fetches taken as one step (each the step above): with five replicas the HW
        moves only when the last of four fetches arrives, and the three before it change nothing a
        node shows. Each follower's latest fetch, or (for the leader's own change to HW `hwm`) its
        first from at least `hwm`; without an expansion, or with that of one or all of the fetching
        replicas out of the ISR that reached the HW (their fetches taken first, the HW as it was: under
        the wall clock a replica rejoins while the leader's timer shrinks two others, and the node
        shows the three changes and the HW together). The search's depth, not the model, is what this
        saves."""
        n = self.n
        choices = {f: self._offers(state, l, f) for f in range(n) if f != l}
        picks = [{f: offers[-1] for f, offers in choices.items() if offers}]
        if hwm is not None:
            picks.append({f: next((o for o in offers if o[1] >= hwm), offers[-1])
                          for f, offers in choices.items() if offers})
        leader = state.servers[l]
        for pick in picks:
            if len(pick) < 2:
                continue  # one fetch: the step above
            channels = list(self._channels(state))
            match = list(leader.match)
            for f, (at, offset) in pick.items():
                channels[f * n + l] = channels[f * n + l][at + 1:]
                match[f] = offset
            rejoining = [f for f, (at, offset) in pick.items() if self._may_expand(state, l, f, offset)]
            # None, each one, or all of them: every subset would multiply the search at depth 2 after a
            # partition leaves four replicas out.
            expansions = [()] + [(f,) for f in rejoining] + ([tuple(rejoining)] if len(rejoining) > 1 else [])
            for expanded in expansions:
                servers = list(state.servers)
                servers[l] = leader._replace(match=tuple(match))
                for f in expanded:
                    self._expand(servers, l, f)
                acked = self.model._advance_hwm(servers, l, state.acked)
                yield ("fetch", "all", l), state._replace(servers=tuple(servers), acked=acked, channels=tuple(channels))

    def _take_fetch(self, state, l, f, offset, expand):
        """Leader l takes f's fetch from `offset`: its view of f, the ISR expansion if `expand` (f reached
        the HW and l leads the controller's epoch), then the HW (maybeIncrementLeaderHW)."""
        servers = list(state.servers)
        if expand:
            if not self._may_expand(state, l, f, offset):
                return None
            self._expand(servers, l, f)
        leader = servers[l]
        servers[l] = leader._replace(match=leader.match[:f] + (offset,) + leader.match[f + 1:])
        acked = self.model._advance_hwm(servers, l, state.acked)
        after = state._replace(servers=tuple(servers), acked=acked)
        return None if after == state and not expand else after

    def _may_expand(self, state, l, f, offset) -> bool:
        """Whether f's fetch from `offset` makes leader l's AlterIsr that the controller accepts: f is out
        of the ISR, reached l's HW, and l leads the controller's epoch (Partition.maybeExpandIsr)."""
        leader = state.servers[l]
        return not state.servers[f].in_isr and offset >= leader.hwm and leader.generation == self.model.epoch(state)

    @staticmethod
    def _expand(servers: list, l: int, f: int) -> None:
        """f back in the ISR, in its own flag and in leader l's copy (`servers` changed in place)."""
        servers[f] = servers[f]._replace(in_isr=True)
        leader = servers[l]
        servers[l] = leader._replace(isr=leader.isr[:f] + (True,) + leader.isr[f + 1:])

    def _shrinks(self, state, l):
        """The controller accepts leader l's AlterIsr without f: l leads the controller's epoch, f is in
        the ISR (whether f is still behind now or caught up since l asked)."""
        model = self.model
        leader = state.servers[l]
        if leader.generation != model.epoch(state):
            return
        members = [f for f, follower in enumerate(state.servers) if f != l and follower.in_isr]
        # Partition.maybeShrinkIsr removes every out-of-sync replica with one AlterIsr; hwm's broker
        # removes one per tick, and under the wall clock several ticks pass between two answers. Each
        # AlterIsr moves the HW, so the order counts: the index's, and the lowest offset first (the
        # replica holding the HW back is the first to lag).
        removals = [removed for size in range(1, len(members) + 1) for removed in combinations(members, size)]
        for removed in removals:
            for order in self._orders(removed, leader.match):
                yield ("shrink_isr", l, order[0] if len(order) == 1 else order), self._shrunk(state, l, order)
        yield from self._shrinks_after_fetches(state, l, removals)

    @staticmethod
    def _orders(removed: tuple, match) -> tuple:
        """The orders in which the replicas `removed` leave the ISR: the index's, and the lowest offset first."""
        return tuple(dict.fromkeys((removed, tuple(sorted(removed, key=lambda f: (match[f], f))))))

    def _shrunk(self, state, l, removed):
        """`state` after the controller accepts leader l's AlterIsr without the replicas `removed`, in order."""
        after = state
        for f in removed:
            after = self.model.effect_shrink_isr(after, l, f)
        return after._replace(channels=state.channels)

    def _hwm_after(self, leader, l, match, removed) -> int:
        """Leader l's HW after its view of the followers becomes `match` and `removed` leave its ISR one at a
        time, each AlterIsr moving the HW (the model's `_advance_hwm`, on numbers: no states built)."""
        model, hwm = self.model, leader.hwm
        isr = {k for k in range(self.n) if (leader.isr[k] or k == l) and k in model.counting}
        for f in (None,) + tuple(removed):
            isr.discard(f)
            if len(isr) >= model.min_isr:
                hwm = max(hwm, min(len(leader.log) if k == l else match[k] for k in isr))
        return hwm

    def _shrinks_after_fetches(self, state, l, removals):
        """A shrink counting fetches leader l took before it that changed nothing it shows: each fetch
        was an input of l's, and hwm read l's state right after it (the HW held back by a replica
        still in the ISR); then l's lag timer shrank the ISR, the controller answered before l's next
        input (in hwm's node the controller lives in the first node and answers at once), the HW moved
        over the fetches' offsets and a fetch l held was answered with it. The follower that shows
        that answer is three steps (the fetch, the shrink, the answer) from l's last shown state,
        where the search goes two deep.
        The fetches: one that l may take now from one follower of its ISR, or the latest of each (only
        an ISR replica's offset counts toward the HW, and its fetch makes no AlterIsr), at least one
        from an offset above l's view of it; only where taking them alone leaves the HW as it is (else
        l showed the HW they gave, at that input), and only where the shrink then gives a higher HW
        than without them (otherwise this is the shrink, and a later fetch). Several replicas leave
        one AlterIsr at a time, each moving the HW: a replica shrunk after another counts until it
        leaves (its own fetch too), in the orders of `_orders` (the offsets the fetches give)."""
        n, leader = self.n, state.servers[l]
        picks, latest = [], {}
        for f in range(n):
            if f == l or not (leader.isr[f] and state.servers[f].in_isr):
                continue
            offsets = set()
            for at, offset in self._offers(state, l, f):
                if offset not in offsets:  # a later fetch from the same offset: the same step
                    offsets.add(offset)
                    picks.append({f: (at, offset)})
                latest[f] = (at, offset)
        if len(latest) > 1:
            picks.append(latest)
        shrunk_hwm = {}  # the HW of each shrink alone (removal order -> HW)
        for pick in picks:
            match = list(leader.match)
            for f, (at, offset) in pick.items():
                match[f] = offset
            if all(offset <= leader.match[f] for f, (_, offset) in pick.items()) \
                    or self._hwm_after(leader, l, match, ()) != leader.hwm:
                continue  # nothing a shrink could count more, or the fetches moved the HW: l showed that
            fetched = None
            for removed in removals:
                for order in self._orders(removed, match):
                    if order not in shrunk_hwm:
                        shrunk_hwm[order] = self._hwm_after(leader, l, leader.match, order)
                    if self._hwm_after(leader, l, match, order) <= shrunk_hwm[order]:
                        continue
                    if fetched is None:
                        channels = list(self._channels(state))
                        for f, (at, offset) in pick.items():
                            channels[f * n + l] = channels[f * n + l][at + 1:]
                        servers = state.servers[:l] + (leader._replace(match=tuple(match)),) + state.servers[l + 1:]
                        fetched = state._replace(servers=servers, channels=tuple(channels))
                    who = next(iter(pick)) if len(pick) == 1 else "all"
                    yield ("fetch_then_shrink_isr", who, l, order), self._shrunk(fetched, l, order)

    def _action_text(self, action) -> str:
        names = self.header.servers
        if action[0] == "fetch":
            who = "followers" if action[1] == "all" else names[action[1]]
            return f"fetch({who}→{names[action[2]]})"
        if action[0] == "fetch_then_shrink_isr":
            who = "followers" if action[1] == "all" else names[action[1]]
            return (f"fetch({who}→{names[action[2]]}), then shrink_isr({names[action[2]]}, "
                    + ",".join(names[f] for f in action[3]) + ")")
        if action[0] == "leader_and_isr" and action[1] == action[2]:
            return f"leader_and_isr({names[action[1]]}, no leader)"
        return Validator._action_text(self, action)


__all__ = ["ObservedKafkaValidator"]
