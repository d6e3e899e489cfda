"""Trace validation of a live ZAB cluster: `checker/observed.py`'s relaxations in ZAB's model.

ZAB's model (model/zab.py) makes each exchange one step: `sync(L, F)` is a whole DIFF/TRUNC/SNAP
followed by NEWLEADER and the follower's ACK, counted by the leader (and establishing it once a
quorum acknowledged); `replicate(L, F)` a proposal and its ACK. A correct node shows these in
finer steps, and this validator accepts exactly the ones the raft validator accepts:

- **The leader counts an ACK later, or never.** The follower's side of `sync` or `replicate` is
  one change; its ACK waits as a reply, and `ack(F→L)` applies it as the model's exchange would
  have: an ACK of NEWLEADER makes F synchronised with L, counts F's history (all of it before L is
  established, what F logged after) and may establish L; an ACK of a proposal advances F's match
  index and L's HWM, even where F has crashed or moved on since it sent it (a real leader hears of
  that later). A reply may be applied out of order or be lost; a reply to an earlier epoch is
  ignored.
- **A NEWLEADER carries the leader's history and HWM of when it was sent**: a follower may show a
  shorter prefix of the leader's history, or an older HWM, than the leader holds when it arrives;
  never shorter than the history the leader was elected with, nor than what links in order
  already brought the follower of it.
- **A NEWLEADER arrives after its leader crashed or stepped down** (`sync-late`): the follower's
  side of `sync` from that leader as it was when it stopped leading (or of an older NEWLEADER of
  it, as above); its ACK finds no leader of that epoch, and a follower in a later epoch refuses it.
- **A follower takes a later epoch without voting for it** (`learn_generation`, the raft
  validator's): it refused a candidate whose history is behind its own, a proposal, or a pre-vote
  answer refusing its own candidacy, and took the sender's generation; its history and
  currentEpoch stay.
- **A candidate's currentEpoch is not shown**: a follower that already held its leader's history
  shows no change when it acknowledges NEWLEADER, so an election is taken with the candidate's
  currentEpoch anywhere up to its generation.
- **NEWLEADER exchanges no node showed**: a prospective leader shows nothing until a quorum has
  ACKed, and a follower that already held its history shows nothing when it ACKs; `synchronise(L)`
  takes all of them as one step (each is the model's own), so that the search's depth suffices.
- **A leader steps down without a new leader** (it lost its quorum, or heard of a later epoch):
  a follower of its own epoch, keeping its history, with no follower synchronised to it; having
  logged writes first, perhaps, unseen (`write-step_down`, the raft validator's, after the
  synchronisation a prospective leader needs).
- **A node back from a kill shows the epoch of a vote it persisted** (`restart-voted`, as the raft
  validator's: the vote, or its own candidacy, that the model's atomic election did not count); its
  currentEpoch stays the model's.
- **A candidate wins its election after later epochs were led** (`elect-late`, the raft
  validator's, in `checker/observed.py`): the model's epochs from the freed one up are renumbered
  one higher, and the candidate leads the freed one, prospective, its currentEpoch that epoch, with
  no follower synchronised.

Everything else is ZAB's model: a prospective leader neither writes nor commits, proposals go to
synchronised followers only, elections follow fast leader election's order, a crash keeps what is
durable.
"""

from __future__ import annotations

import itertools

from hwm.checker.observed import ObservedValidator
from hwm.checker.validate import Validator
from hwm.model.state import FOLLOWER, LEADER, REPLY

# The reply to a NEWLEADER (its ACK), beside the raft validator's replies to appends (success True).
NEWLEADER_ACK = "newleader"


class ObservedZabValidator(ObservedValidator):
    """`ObservedValidator` for ZAB's model: see the module's docstring."""

    def __init__(self, protocol, header, **options):
        super().__init__(protocol, header, **options)
        if protocol.system != "zab":
            raise ValueError(f"ObservedZabValidator steps ZAB's model, not {protocol.system}'s")
        self.refines = header.network == "rpc"

    def _successors(self, state, k, seen, event_reads=False):
        if not self.refines:
            yield from Validator._successors(self, state, k, seen, event_reads)
            return
        steps = Validator._successors(self, state, k, seen, event_reads)
        for action, after in itertools.chain(steps, self._elections_of_a_synchronised_candidate(state)):
            kind = action[0]
            if kind == "crash":
                after = self._keep_replies_from(state, action[1], after)
            after = self._remember_leaders(state, after)
            if kind in ("sync", "replicate") and action[2] == k:
                # The follower's change is observed before its ACK reaches the leader.
                deferred = self._deferred(state, action, after)
                if deferred is not None:
                    yield (f"{kind}-unacknowledged", action[1], action[2]), deferred
                    continue
            if (self.followers_first and kind in ("sync", "replicate") and action[1] == k
                    and not self._same(after.servers[action[2]], state.servers[action[2]])):
                continue  # the follower's change is observed before its ACK reaches the leader
            yield action, after
        yield from self._restarts_with_vote(state, k)  # restart-voted, as for raft
        yield from self._older_syncs(state, k, seen)
        yield from self._late_syncs(state, k, seen)
        yield from self._late_appends(state, k, seen)
        yield from self._later_generations(state, k)  # learn_generation, as for raft
        server = state.servers[k]
        if server.alive and server.role == LEADER:
            for f in range(self.n):
                if f != k:
                    yield from self._acks(state, f, k)
            yield from self._unseen_synchronisation(state, k)
            if seen.role == FOLLOWER and seen.alive:
                yield ("step_down", k), self._remember_leaders(state, self._stepped_down(state, k))
                if len(seen.log) > len(server.log):
                    yield from self._writes_then_step_down(state, k, len(seen.log) - len(server.log))

    def _stepped_down(self, state, l):
        """A leader that steps down keeps no follower synchronised to it."""
        after = super()._stepped_down(state, l)
        return after._replace(synced=after.synced[:l] + (0,) + after.synced[l + 1:])

    def _ready_to_write(self, state, l):
        """A prospective leader writes once established: the synchronisation no node showed."""
        return self._synchronised(state, l)[0]

    def _allowed(self, action, k, event) -> bool:
        if action[0] in ("sync-unacknowledged", "sync-older", "sync-late", "synchronise"):
            return True
        return super()._allowed(action, k, event)

    # ------------------------------------------------------------------ replies
    def _deferred(self, state, action, after):
        """`after` with the leader's side undone: the follower's ACK waits as a reply."""
        kind, l, f = action
        leader, replied = state.servers[l], after.servers[l]
        if replied.role != LEADER or replied.generation != leader.generation or not after.servers[f].alive:
            return None  # the follower's later epoch deposed the leader: nothing is deferred
        if kind == "sync":
            # What an ACK of NEWLEADER tells: the follower's history, and how much of it is logged.
            reply = (REPLY, leader.generation, NEWLEADER_ACK, (len(after.servers[f].log), after.durable[f]))
        else:
            reply = (REPLY, leader.generation, True, replied.match[f])
        channels = self._channels(after)
        if reply not in channels[f * self.n + l]:
            channels[f * self.n + l] = channels[f * self.n + l] + (reply,)
        servers = after.servers[:l] + (leader,) + after.servers[l + 1:]
        synced = after.synced[:l] + (state.synced[l],) + after.synced[l + 1:]
        return after._replace(servers=servers, synced=synced, channels=tuple(channels), acked=state.acked)

    def _acks(self, state, f: int, l: int, newleader_only: bool = False):
        """Each reply from f to leader l applied: the model's leader side of `sync` or `replicate`
        (of `sync` alone with `newleader_only`)."""
        if not state.channels:
            return
        model = self.model
        queue = state.channels[f * self.n + l]
        leader = state.servers[l]
        for reply in queue:
            _, generation, kind, index = reply
            if generation != leader.generation or (newleader_only and kind != NEWLEADER_ACK):
                continue  # an ACK of an earlier epoch: a real leader ignores it
            channels = list(state.channels)
            channels[f * self.n + l] = tuple(r for r in queue if r != reply and r[1] == leader.generation)
            established = model.established(state, l)
            synced = list(state.synced)
            match = list(leader.match)
            if kind == NEWLEADER_ACK:
                history, logged = index
                synced[l] |= 1 << f
                match[f] = logged if established else history
            else:
                # Only `replicate` leaves a proposal's ACK: F sent it synchronised with L, having logged
                # the proposal. L counts it even where F has crashed (and restarted) or moved on since,
                # which the model's steps tell L at once and a real leader learns later (syncLimit).
                if not established:
                    continue
                match[f] = max(match[f], index)
            now = leader._replace(match=tuple(match))
            if established:
                now = model._advance_hwm(now, l)
            after = state._replace(servers=state.servers[:l] + (now,) + state.servers[l + 1:],
                                   synced=tuple(synced), channels=tuple(channels))
            after = model._establish(after, l)
            yield ("ack", f, l), model._with(after, after)

    def _elections_of_a_synchronised_candidate(self, state):
        """Elections the model refuses only for the candidate's currentEpoch, which no node shows:
        a follower whose history already was its leader's shows no change when it acknowledges that
        leader's NEWLEADER (and its currentEpoch becomes the leader's epoch), so the candidate may
        have any currentEpoch up to its generation. The voters' stay the model's (a real voter may
        refuse more, never less)."""
        model = self.model
        if self.protocol.election != "longest-log":
            return
        servers = state.servers
        fresh = [model.freshness(state, k) for k in range(self.n)]
        for c, candidate in enumerate(servers):
            if not candidate.alive or candidate.role == LEADER or fresh[c][0] >= candidate.generation:
                continue
            synchronised = (candidate.generation,) + fresh[c][1:]
            for voters in model.voter_sets[c]:
                if not all(servers[v].alive for v in voters):
                    continue
                if all(fresh[c] >= fresh[v] for v in voters):
                    continue  # the model's own election, already taken
                if all(synchronised >= fresh[v] for v in voters):
                    after = self._taken(state, ("elect", c, voters))
                    if after is not None:
                        yield ("elect", c, voters), after

    def _unseen_synchronisation(self, state, l):
        """Leader l's NEWLEADER exchanges that no node showed, as one step: every ACK of NEWLEADER
        waiting for it, then every `sync` that changes nothing its follower shows. A prospective
        leader shows nothing until a quorum has ACKed, so with five servers its first visible
        change may follow several of them (each is the model's step: the search's depth, not the
        model, is what this saves)."""
        after, taken = self._synchronised(state, l)
        if taken > 1:
            yield ("synchronise", l), self._remember_leaders(state, after)

    def _synchronised(self, state, l):
        """The state after leader l's NEWLEADER exchanges that no node showed, and how many were taken."""
        if not state.channels and not any(self.model.guard_sync(state, l, f) is None for f in range(self.n)):
            return state, 0
        after, taken = state, 0
        for f in range(self.n):
            if f == l:
                continue
            for _, acked in self._acks(after, f, l, newleader_only=True):
                after, taken = acked, taken + 1
                break
        for f in range(self.n):
            if f != l and after.servers[f].alive and self.model.guard_sync(after, l, f) is None:
                synced = self._taken(after, ("sync", l, f))
                if synced is not None and synced.servers[l].role == LEADER and self._same(synced.servers[f],
                                                                                           after.servers[f]):
                    after, taken = synced, taken + 1
        return after, taken

    # ------------------------------------------------------- an older NEWLEADER
    def _older_newleader(self, leader, follower, seen):
        """(length, HWM) of a NEWLEADER that `leader` sent earlier, when its history or HWM were
        shorter, as the follower shows it; None where no NEWLEADER of it gives what the follower
        shows (or where it gives the leader's whole history and HWM: the model's own sync)."""
        if seen.log is None:
            return None
        length = len(seen.log)
        hwm = leader.hwm if seen.hwm is None else min(seen.hwm, leader.hwm, length)
        if length > len(leader.log) or (length, hwm) == (len(leader.log), leader.hwm):
            return None
        # Every NEWLEADER carries the history the leader was elected with: since then it has logged
        # only proposals of its own epoch.
        if length < sum(1 for generation in leader.log if generation < leader.generation):
            return None
        # Links are FIFO (TCP, and hwm test's zab nodes order their links): what the follower holds
        # of the leader's history came with its election (every NEWLEADER carries it) or in a later
        # message of this leader, so an older NEWLEADER never truncates the follower's common prefix.
        common = 0
        while common < min(len(follower.log), len(leader.log)) and follower.log[common] == leader.log[common]:
            common += 1
        return None if length < common else (length, hwm)

    def _older_syncs(self, state, k, seen):
        """A NEWLEADER sent to follower k when its leader's history or HWM were shorter: the model's
        `sync` from the leader as it was then, follower's side only (its ACK deferred)."""
        follower = state.servers[k]
        if seen.log is None or not follower.alive or not seen.alive:
            return
        for l, leader in enumerate(state.servers):
            if l == k or not (leader.alive and leader.role == LEADER) or self.model.guard_sync(state, l, k):
                continue
            older = self._older_newleader(leader, follower, seen)
            if older is None:
                continue
            length, hwm = older
            then = state._replace(servers=state.servers[:l] + (leader._replace(log=leader.log[:length], hwm=hwm),)
                                  + state.servers[l + 1:])
            action = ("sync", l, k)
            after = self._taken(then, action)
            deferred = None if after is None else self._deferred(then, action, after)
            if deferred is not None:
                # The leader as it is now, not as it was when it sent the NEWLEADER.
                servers = deferred.servers[:l] + (leader,) + deferred.servers[l + 1:]
                yield ("sync-older", l, k), deferred._replace(servers=servers)

    # ------------------------------------------------- a former leader's NEWLEADER
    def _late_syncs(self, state, k, seen):
        """A NEWLEADER a former leader sent before it crashed or stepped down, reaching follower k now:
        the model's `sync` from that leader as it was (remembered in channel l->l), or as it was when
        it sent an older one (`_older_newleader`), of which only the follower's side happens: its ACK
        finds no leader of that epoch."""
        follower = state.servers[k]
        if not state.channels or not follower.alive or not seen.alive:
            return
        for l in range(self.n):
            was = state.channels[l * self.n + l]
            if l == k or not was:
                continue
            leader = was[0]
            sent = [(len(leader.log), leader.hwm), self._older_newleader(leader, follower, seen)]
            for length, hwm in filter(None, sent):
                then = state._replace(servers=state.servers[:l] + (leader._replace(log=leader.log[:length], hwm=hwm),)
                                      + state.servers[l + 1:])
                after = self._taken(then, ("sync", l, k))
                if after is None:
                    continue
                if after.servers[l].role != LEADER:
                    break  # k is in a later epoch: it refuses the NEWLEADER (the model's sync deposes l)
                # The follower's side only: it follows no leader now (its old one loses it), and the
                # leader's count, its HWM and what clients were told stay as they are.
                synced = tuple(0 if j == k else mask & ~(1 << k) for j, mask in enumerate(state.synced))
                now = state._replace(
                    servers=state.servers[:k] + (after.servers[k],) + state.servers[k + 1:], synced=synced,
                    durable=state.durable[:k] + (after.durable[k],) + state.durable[k + 1:],
                    epochs=state.epochs[:k] + (after.epochs[k],) + state.epochs[k + 1:])
                if now != state:
                    yield ("sync-late", l, k), self._remember_leaders(state, now)

    def _action_text(self, action) -> str:
        names = self.header.servers
        if action[0] == "ack":
            return f"ack({names[action[1]]}→{names[action[2]]})"
        return super()._action_text(action)


__all__ = ["ObservedZabValidator", "NEWLEADER_ACK"]
