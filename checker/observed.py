"""Trace validation of a live cluster's observed states: the rules of `checker/validate.py`, plus the
ways a correct node's single atomic changes are finer than the model's steps.

`hwm test --protocol P -- CMD` asks every node for its state after each input it handles, so each
observation is one node's change caused by one message. The raft family's model on the `rpc`
network makes a whole append round trip one step, and elections atomic. A correct node differs
from it in these ways, and this validator accepts exactly these, for the raft system's models:

- **The leader learns an acknowledgement later, or never.** A replication to follower F may
  change F alone; F's acknowledgement (the index it now holds, in the leader's generation) waits
  as a reply from F to the leader, and a later step `ack(F→L)` applies it to the leader as the
  model's round trip would have (match index, then the HWM under the commit rule), if L still
  leads that generation. A reply may be applied out of order or be lost; a leader never counts an
  index its follower did not acknowledge, and a follower's crash does not take back a reply it
  already sent (a leader's crash loses the replies sent to it).
- **A follower's log grows by a prefix of what a replication would give.** `checker/validate.py`
  already lets a replication carry an older log and HWM of the leader (the append was sent when
  the leader's log was shorter); with the deferred acknowledgement it is the same message.
- **An append within the matched prefix leaves a conflicting suffix in place.** Raft's receiver
  deletes only from an entry that conflicts with one sent, so an append ending within the prefix a
  follower shares with the leader keeps the follower's later (conflicting) entries for now and
  raises its HWM to at most the end of that prefix (`_matched_appends`).
- **A node comes back from a crash with the generation of a vote it granted.** A real voter (or
  candidate) persists the generation of an election before it answers; the model's elections are
  atomic and count only the voters they name, so a node killed after its vote, in an election the
  model won with other voters (or that failed), is down at its older generation in the model.
  `restart-voted(k)` restarts k with a higher generation, one an election of the model reached,
  only where the caller says the restart may carry one (`feed(..., persisted_generation=True)`:
  bridge/maelstrom/validation.py, for a raft node's restart with at least the generation it showed
  before its kill and at most one some node had shown by then, or the next).
- **A candidate wins its election after later generations were led** (`elect-late`). A candidate
  paused (or slow) with its voters' grants unread reads them when it resumes and leads the
  generation it stood for, below generations other leaders have led since (a correct node: it has
  heard of no later generation yet, and steps down at its first contact with one; a generation
  still has one leader). The model's atomic election numbers a generation above every voter's, so
  the validator makes room: the model's generations from the one after the highest the run named
  below the candidate's are renumbered one higher (only their order is compared) and the candidate
  leads the freed one, its voters left as they are (they have moved on since). Only where the
  caller says the event may be one (`feed(..., late_election=True)`: bridge/maelstrom/validation.py,
  for a node that showed this candidacy last, whose generation a quorum had shown and no node had
  led), and only for a candidate with no change of the model's waiting to be shown (it did nothing
  since it stood) whose generation in the model is below the freed one (a generation is never taken
  back). The voters' logs when they granted are not checked (their states then are not kept).
- **A follower takes a later generation without voting for it** (`learn_generation`). A real node
  takes the generation of any message that carries a later one: a vote request it refuses (its log
  is fresher), a refusal of its own pre-vote (Raft thesis 9.6, as etcd's raft: the refuser's
  generation), whoever sent it and whether or not anyone still leads that generation. Its log, HWM
  (and ZAB's currentEpoch) stay. Only to a generation above its own and at most the highest another
  server holds (the sender held it when it sent it, and generations never fall).
- **A leader steps down without a new leader.** A real leader steps down when it hears of a
  higher generation, a candidate's whose election may yet fail; the model's elections are atomic
  and have no failed candidacy. `step_down(L)` makes a leader a follower of its own generation,
  keeping its log and HWM: a state the model already reaches by a crash and a restart (bar a
  volatile HWM), and one from which the leader writes nothing more. A leader that shows its next
  change only once it has stepped down (paused with clients' writes waiting, then resumed) may have
  logged those writes first: `write-step_down(L)` takes the model's writes, and what they need that no
  node shows (ZAB's synchronisation), with the step-down as one step, L remembered with its writes
  for the appends it sent.

Everything else is the model's own step: entries must be the leader's (its generation, at the
index the model gives), a follower's HWM never passes what its leader sent, a leader's HWM never
passes what the commit rule allows over the acknowledgements it has received, elections need a
quorum of voters, restarts keep what the preset keeps. Other systems' models are validated by the
rules of `checker/validate.py` alone.
"""

from __future__ import annotations

from hwm.checker.validate import Candidate, Validator
from hwm.model.state import FOLLOWER, LEADER, REPLY


class ObservedValidator(Validator):
    """`Validator` with the deferred acknowledgement, late and refused appends and the step-down
    (see the module's docstring).

    Replies not yet applied live in the model state's `channels`, laid out as the async network's
    (channel a*n+b holds a's messages to b), unused by the rpc network's steps otherwise."""

    def __init__(self, protocol, header, *, followers_first: bool = True, **options):
        super().__init__(protocol, header, **options)
        # Whether a follower's change is always logged before its reply can reach the leader, as in
        # hwm test's observations (each node's state is read right after each input): then a leader's
        # change is never explained by a round trip whose follower side no event has shown yet.
        self.followers_first = followers_first
        # An acknowledgement at or below what its leader already counts for that follower changes
        # nothing when it arrives, unless the count falls first. Within a generation it falls where
        # a follower loses entries it acknowledged (a restart rule that drops them, or a variant's
        # own: there every reply is kept) and where stepping takes an older append's round trip;
        # after that, the highest such reply gives the count back, and the lower ones only counts
        # in between that a real leader, which keeps its highest, never has. So between events all
        # but the highest are dropped, and explanations that differed only in them are one (on five
        # servers they were hundreds).
        self._drops_stale_acks = (protocol.system == "raft" and protocol.restart == "keep"
                                  and header.network == "rpc" and getattr(type(protocol), "variant", None) is None)
        # The deferred acknowledgement needs the raft model's own match bookkeeping.
        # The base Model (model.bare) has none of raft's steps to refine: its variant's actions are the steps.
        self.refines = (protocol.system == "raft" and header.network == "rpc" and hasattr(self.model, "_with_match")
                        and not getattr(self.model, "bare", False))
        self.n = len(header.servers)
        self._persisted_generation = False  # set by `feed` for the one event it is fed with
        self._late_election = False  # likewise

    def _successors(self, state, k, seen, event_reads=False):
        if not self.refines:
            yield from super()._successors(state, k, seen, event_reads)
            return
        for action, after in super()._successors(state, k, seen, event_reads):
            if action[0] == "crash":
                after = self._keep_replies_from(state, action[1], after)
            after = self._remember_leaders(state, after)
            if action[0] == "replicate" and action[2] == k:
                # The follower's change is observed before its reply reaches the leader: the
                # round trip's second half is always a later step (or lost), never this one.
                deferred = self._deferred(state, action, after)
                if deferred is not None:
                    yield ("replicate-unacknowledged", action[1], action[2]), deferred
                    continue
            if self.followers_first and action[0] == "replicate" and not self._same(after.servers[action[2]],
                                                                                    state.servers[action[2]]):
                if action[1] == k:
                    continue  # the follower's change is observed before its reply reaches the leader
                # A round trip on the way to another server's event: the follower's change waits to be
                # logged and its reply waits too, so the leader never shows the consequence first.
                deferred = self._deferred(state, action, after)
                if deferred is not None:
                    yield ("replicate-unacknowledged", action[1], action[2]), deferred
                    continue
            yield action, after
        yield from self._restarts_with_vote(state, k)
        yield from self._late_appends(state, k, seen)
        yield from self._refused_appends(state, k)
        yield from self._matched_appends(state, k, seen)
        yield from self._later_generations(state, k)
        server = state.servers[k]
        if server.alive and server.role == LEADER:
            for f in range(self.n):
                if f != k:
                    yield from self._acks(state, f, k)
            if seen.role == FOLLOWER and seen.alive:
                yield ("step_down", k), self._remember_leaders(state, self._stepped_down(state, k))
                if len(seen.log) > len(server.log):
                    yield from self._writes_then_step_down(state, k, len(seen.log) - len(server.log))

    def _canonical(self, cand):
        state = cand.state
        if not self._drops_stale_acks or not state.channels or cand.waits:
            return cand
        n, channels, changed = self.n, list(state.channels), False
        for l, leader in enumerate(state.servers):
            if not (leader.alive and leader.role == LEADER and leader.match):
                continue
            for f in range(n):
                queue = channels[f * n + l]
                if f == l or not queue:
                    continue
                stale = [r for r in queue if r[2] is True and r[1] == leader.generation and r[3] <= leader.match[f]]
                highest = max(stale, key=lambda r: r[3]) if stale else None
                kept = tuple(r for r in queue if r not in stale or r is highest)
                if len(kept) != len(queue):
                    channels[f * n + l], changed = kept, True
        return cand._replace(state=state._replace(channels=tuple(channels))) if changed else cand

    def _stepped_down(self, state, l):
        """`state` with leader l a follower of its own generation, its log and HWM kept."""
        stepped = state.servers[l]._replace(role=FOLLOWER, match=())
        return state._replace(servers=state.servers[:l] + (stepped,) + state.servers[l + 1:])

    def _ready_to_write(self, state, l):
        """`state` with whatever leader l needs before it takes a write and no node shows (nothing here)."""
        return state

    def _writes_then_step_down(self, state, l, wrote: int):
        """Leader l logs `wrote` clients' writes and steps down, all between two of its changes (paused,
        it read its clients' requests and then found it no longer leads): what it needs first that no
        node shows, the writes and the step-down, as one step (each is the model's own: the search's
        depth, not the model, is what this saves). It is remembered with its writes: the appends it
        sent before it stepped down may still arrive."""
        after = self._ready_to_write(state, l)
        for _ in range(wrote):
            if self.model.guard_write(after, l) is not None:
                return
            after = self._taken(after, ("write", l))
            if after is None:
                return
        yield ("write-step_down", l, wrote), self._remember_leaders(after, self._stepped_down(after, l))

    def feed(self, event, *, persisted_generation: bool = False, late_election: bool = False):
        """`Validator.feed`; `persisted_generation`: the event is a restart whose generation the node may
        have persisted before it crashed, from a vote it granted or a candidacy of its own that no model
        step counts (`_restarts_with_vote`). The caller (bridge/maelstrom/validation.py) says so only
        for a generation at or above the one the node showed before its crash and one that some node
        had shown by then (or the next one: its own candidacy, unseen). `late_election`: the event is a
        leader of a generation below one already led, which it may have won with grants it read late
        (`_late_elections`); the caller says so only for the generation of the candidacy the node
        showed last, which a quorum had shown and no node had led."""
        self._persisted_generation = persisted_generation
        self._late_election = late_election
        try:
            return super().feed(event)
        finally:
            self._persisted_generation = False
            self._late_election = False

    def _allowed(self, action, k, event) -> bool:
        if action[0] == "restart-voted":
            return action[1] == k and event.restart
        if action[0] == "learn_generation":
            # A node's first answer after its restart shows what it recovered, before any message.
            return not event.restart
        if action[0] in ("ack", "step_down", "replicate-unacknowledged", "replicate-late", "replicate-refused",
                         "replicate-late-refused", "replicate-matched", "replicate-late-matched"):
            return True
        return super()._allowed(action, k, event)

    # ------------------------------------------------------- a late election
    def _explain(self, cand, k, seen, event):
        # A late election is one step, as few as any explanation of a leader's first change; the
        # search's other steps cannot give a leader a generation between two the run named already.
        late = self._late_elections(cand, k, seen, event) if self._late_election and self.refines else []
        return late or super()._explain(cand, k, seen, event)

    def _late_elections(self, cand, k, seen, event):
        """Candidate k leads the run's generation `seen.generation`, below one the run named already:
        the model's generations from the one after the highest named below it are renumbered one
        higher, and k leads the freed generation (the model's `elect` with k's generation just below
        it, its voters' grants read late: the voters have moved on since, and are left as they are)."""
        state, run = cand.state, seen.generation
        server = state.servers[k]
        if (seen.role != LEADER or run is None or cand.pending[k] or not server.alive
                or server.role == LEADER or any(r == run for r, _ in cand.generations)):
            return []
        if not any(r > run for r, _ in cand.generations):
            return []  # above every named generation: the model's own election
        freed = max(m for r, m in cand.generations if r < run) + 1
        if server.generation >= freed:
            return []  # the model has k in a later generation already: never lowered
        shift = _Renumbering(freed)
        state = shift.state(state)
        then = state._replace(servers=state.servers[:k] + (state.servers[k]._replace(generation=freed - 1),)
                              + state.servers[k + 1:])
        # Not `_taken`: the voters whose grants came late are not known, and the election is named
        # with k alone, which a variant's vote rule (a quorum of its own) would refuse for that.
        after = self.model.apply(then, ("elect", k, (k,)))
        moved = Candidate(state, tuple(sorted((r, shift(m)) for r, m in cand.generations)),
                          tuple(tuple(shift.server(s) for s in changes) for changes in cand.pending), cand.waits)
        nxt = self._step(moved, ("elect-late", k), after)
        done = None if nxt is None else self._confirm(nxt, k, seen, event)
        return [] if done is None else [done]

    # ------------------------------------------------------------ persisted votes
    def _restarts_with_vote(self, state, k):
        """Server k's restart with a generation above the model's for it: one it persisted before it
        crashed by granting a vote (Raft's currentTerm, on disk before the vote is sent) or standing
        as a candidate, in an election the model's atomic `elect` did not count it in (a failed one,
        or one the model won with other voters while k was down). Only where the caller says the
        event may be one (`feed(..., persisted_generation=True)`), and only up to the highest
        generation the model holds: a generation some election reached. The restart is the model's
        from there (the restart rule sees the raised generation, as the node does)."""
        if not self._persisted_generation or state.servers[k].alive:
            return
        server = state.servers[k]
        top = max(s.generation for s in state.servers)
        for generation in range(server.generation + 1, top + 1):
            voted = state._replace(servers=state.servers[:k] + (server._replace(generation=generation),)
                                   + state.servers[k + 1:])
            after = self._taken(voted, ("restart", k))
            if after is not None:
                yield ("restart-voted", k, generation), self._remember_leaders(state, after)

    # ------------------------------------------------------------ a later generation
    def _later_generations(self, state, k):
        """Follower k takes a later generation from a message that carries it (a vote request it
        refuses, a refusal of its pre-vote), without voting: its log and HWM stay, and in ZAB's model
        its currentEpoch too. Each model generation above k's, up to the highest another server holds
        (whoever sent the message held it then; a server's generation never falls): the sender need
        not lead it, nor anyone any longer."""
        follower = state.servers[k]
        if not follower.alive or follower.role != FOLLOWER:
            return
        top = max((s.generation for j, s in enumerate(state.servers) if j != k), default=0)
        for generation in range(follower.generation + 1, top + 1):
            now = follower._replace(generation=generation)
            yield ("learn_generation", k, generation), state._replace(
                servers=state.servers[:k] + (now,) + state.servers[k + 1:])

    # ------------------------------------------------------------------ replies
    def _channels(self, state) -> list:
        return list(state.channels) if state.channels else [()] * (self.n * self.n)

    def _deferred(self, state, action, after):
        """`after` with the leader as it was: the follower's acknowledgement waits as a reply."""
        l, f = action[1], action[2]
        leader, replied = state.servers[l], after.servers[l]
        if replied.role != LEADER or replied.generation != leader.generation or not after.servers[f].alive:
            return None  # a deposed leader: that reply is not deferred (the step is the same)
        acknowledged = replied.match[f]
        channels = self._channels(after)
        reply = (REPLY, leader.generation, True, acknowledged)
        if reply not in channels[f * self.n + l]:
            channels[f * self.n + l] = channels[f * self.n + l] + (reply,)
        servers = after.servers[:l] + (leader,) + after.servers[l + 1:]
        return after._replace(servers=servers, channels=tuple(channels))

    def _acks(self, state, f: int, l: int):
        """Each reply from f to leader l applied: the model's end of the round trip."""
        if not state.channels:
            return
        queue = state.channels[f * self.n + l]
        leader = state.servers[l]
        for _, generation, _, index in queue:
            if generation != leader.generation:
                continue  # a reply to an earlier generation: a real leader ignores it
            index = max(leader.match[f], index)
            # The replies it makes no-ops go with it (their index is no higher), stale ones too.
            channels = list(state.channels)
            channels[f * self.n + l] = tuple(r for r in queue if r[1] == leader.generation and r[3] > index)
            now = self.model._with_match(leader, l, f, index)
            servers = state.servers[:l] + (now,) + state.servers[l + 1:]
            yield ("ack", f, l), state._replace(servers=servers, channels=tuple(channels))

    def _keep_replies_from(self, state, crashed: int, after):
        """The model's crash empties the crashed server's channels; a reply it sent before it
        crashed is on the network still (the leader may yet receive it), and so are the appends it
        sent when it led (channel crashed->crashed)."""
        if not state.channels:
            return after
        n = self.n
        channels = tuple(state.channels[i] if i // n == crashed else ch
                         for i, ch in enumerate(after.channels))
        return after._replace(channels=channels)

    # ------------------------------------------------- appends of a former leader
    def _remember_leaders(self, state, after):
        """`after`, remembering each leader that stopped leading in this step as it was: the appends
        it sent while it led are still on the network (channel l->l, unused otherwise, holds it)."""
        changed = None
        for j, (old, new) in enumerate(zip(state.servers, after.servers)):
            if old.alive and old.role == LEADER and not (new.alive and new.role == LEADER
                                                         and new.generation == old.generation):
                changed = changed or self._channels(after)
                changed[j * self.n + j] = (old,)
        return after if changed is None else after._replace(channels=tuple(changed))

    def _late_appends(self, state, k, seen):
        """An append a former leader sent before it crashed or stepped down, reaching follower k now:
        the model's replication from that leader as it was (with an older log and HWM where the
        follower shows one), of which only the follower's side happens (the reply finds no leader)."""
        if not state.channels or not state.servers[k].alive:
            return
        for l in range(self.n):
            was = state.channels[l * self.n + l]
            if l == k or not was:
                continue
            then = state._replace(servers=state.servers[:l] + (was[0],) + state.servers[l + 1:])
            action = ("replicate", l, k)
            after = self._taken(then, action)
            if after is None:
                continue
            for sent in (after, self._older_replication(then, action, seen, after)):
                if sent is not None and sent.servers[k] != state.servers[k]:
                    yield ("replicate-late", l, k), state._replace(
                        servers=state.servers[:k] + (sent.servers[k],) + state.servers[k + 1:])

    def _refused_appends(self, state, k):
        """An append whose previous entry follower k lacks: it takes the leader's generation and
        refuses the entries (Raft's receiver rule 2, the async network's step); the leader retries.
        The append may be a late one, sent by a leader that has since crashed or stepped down (as it
        was then, remembered in channel l->l): the refusal is the same, and no leader retries."""
        if self.protocol.append_check != "previous-entry" or not state.servers[k].alive:
            return
        follower = state.servers[k]
        for l, sender, late in self._append_senders(state, k):
            common = min(len(follower.log), len(sender.log))
            if follower.log[:common] == sender.log[:common] and len(follower.log) >= len(sender.log):
                continue  # it holds every previous entry the leader could name: no refusal
            refused = follower._replace(generation=sender.generation, role=FOLLOWER, match=())
            if refused != follower:
                name = "replicate-late-refused" if late else "replicate-refused"
                yield (name, l, k), state._replace(servers=state.servers[:k] + (refused,) + state.servers[k + 1:])

    def _append_senders(self, state, k):
        """(l, sender, late) for each server l whose append may reach follower k now: l as it is, if
        it leads, and l as it was when it last led (channel l->l), whose appends may arrive late;
        never one of a generation below k's (such an append is refused without a change)."""
        for l, leader in enumerate(state.servers):
            if l == k:
                continue
            senders = [(leader, False)] if leader.alive and leader.role == LEADER else []
            if state.channels and state.channels[l * self.n + l]:
                senders.append((state.channels[l * self.n + l][0], True))
            for sender, late in senders:
                if sender.generation >= state.servers[k].generation:
                    yield l, sender, late

    def _matched_appends(self, state, k, seen):
        """An append whose entries all match follower k's, while k holds a conflicting suffix past
        them: Raft's receiver deletes only from an entry that conflicts with one sent (Figure 2, rule
        3), so k keeps its own later entries for now and learns the HWM the append carries, up to the
        end of the matched prefix (rule 5: min(leaderCommit, index of the last new entry)). The
        model's round trip gives k the leader's whole log instead. Accepted: k's log unchanged, its
        HWM raised to at most min(the sender's HWM, c), where entries 1..c are the sender's (the
        append with previous index p and k entries, p + k <= c, ends there; entries p+1..p+k the
        follower already holds). The reply acknowledges c, as an append ending at c does; the sender
        may be a leader that has since crashed or stepped down (its reply then finds no leader)."""
        if self.protocol.append_check != "previous-entry" or not state.servers[k].alive:
            return
        follower = state.servers[k]
        for l, sender, late in self._append_senders(state, k):
            common = 0
            for mine, theirs in zip(follower.log, sender.log):
                if mine != theirs:
                    break
                common += 1
            if len(follower.log) <= common:
                continue  # no suffix of its own past the match: the model's (older) replication
            hwm = sender.hwm if seen.hwm is None else min(seen.hwm, sender.hwm)
            matched, acknowledged = self.model._follower_apply(follower, common, (), hwm, sender.generation)
            if matched == follower:
                continue
            after = state._replace(servers=state.servers[:k] + (matched,) + state.servers[k + 1:])
            if late:
                yield ("replicate-late-matched", l, k), after
                continue
            channels = self._channels(after)
            reply = (REPLY, sender.generation, True, acknowledged)
            if reply not in channels[k * self.n + l]:
                channels[k * self.n + l] = channels[k * self.n + l] + (reply,)
            yield ("replicate-matched", l, k), after._replace(channels=tuple(channels))

    def _why(self, k, seen, event) -> str:
        if event.ack:
            return (f"no model state within {self.depth} steps has " + ", ".join(f"{i}@g{g}" for i, g in event.ack)
                    + f" at or below {event.server}'s high-water mark, where an acknowledged write must be")
        return super()._why(k, seen, event)

    def _action_text(self, action) -> str:
        names = self.header.servers
        if action[0] == "ack":
            return f"ack({names[action[1]]}→{names[action[2]]})"
        if action[0] == "restart-voted":
            return f"restart({names[action[1]]}) with the generation of a vote it persisted"
        if action[0] == "learn_generation":
            return f"learn_generation({names[action[1]]}, {action[2]}), a later generation it heard of"
        if action[0] == "elect-late":
            return f"elect({names[action[1]]}) with grants it read after later generations were led"
        if action[0] == "write-step_down":
            return f"write({names[action[1]]}) {action[2]} time(s), then step_down({names[action[1]]})"
        return super()._action_text(action)


class _Renumbering:
    """Every model generation from `freed` up made one higher, wherever a state holds one: a server's
    generation and log, a remembered leader's (channel l->l), a reply's generation, the ghost sets
    of reads and acknowledged entries and, in ZAB's model, the currentEpochs. Only the generations'
    order is compared, and it is kept."""

    def __init__(self, freed: int):
        self.freed = freed

    def __call__(self, generation: int) -> int:
        return generation + 1 if generation >= self.freed else generation

    def server(self, server):
        return server._replace(generation=self(server.generation), log=tuple(self(g) for g in server.log))

    def state(self, state):
        channels = tuple(tuple(self.server(item) if hasattr(item, "role") else (item[0], self(item[1])) + item[2:]
                               for item in channel) for channel in state.channels)
        fields = dict(servers=tuple(self.server(s) for s in state.servers), channels=channels,
                      reads=frozenset((i, self(g)) for i, g in state.reads))
        if "acked" in state._fields:
            fields["acked"] = frozenset((i, self(g)) for i, g in state.acked)
        if "epochs" in state._fields:
            fields["epochs"] = tuple(self(e) for e in state.epochs)
        return state._replace(**fields)


__all__ = ["ObservedValidator"]
