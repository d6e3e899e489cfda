"""Kafka's replication of one partition, sans-IO: the replica and the controller.

`KafkaReplica` is a `impl.core.Replica` (its log, storage outputs, `Ready` batches, client reads)
with Kafka's rules in place of Raft's:

- The controller (`Controller`, ZooKeeper's partition state: leader epoch, leader, ISR) elects: a
  replica becomes leader or follower only on its `LeaderAndIsr` request. The leader is chosen from
  the live ISR; with `unclean_election`, any live replica when no ISR replica is alive.
- The leader's high watermark is the minimum log end offset over the ISR (its own included),
  advanced only while the ISR holds at least a majority of the replicas (min.insync.replicas).
  While an ISR update is in flight the HW waits for the controller's answer: neither the old ISR
  (the update may add a replica that lags) nor the new one (the update may be refused: with fewer
  replicas the majority rule may not hold) is safe to count yet. Kafka since KIP-497 counts the
  "maximal ISR", the union of the two, and goes on advancing; waiting never passes it either.
- The leader shrinks the ISR by a follower that is down (the controller's live brokers) or
  behind its log end offset, and expands it when a follower's fetch reaches the high
  watermark, with `AlterIsr` to the controller, which refuses a leader of an older epoch.
- Followers fetch (`FetchRequest` at their log end offset, which tells the leader how far they
  got); a fetch past the leader's log end is out of range and the follower truncates to it.
- Each replica keeps a leader-epoch cache (`LeaderEpochCache`: epoch -> start offset).
- `follower_truncation` decides what a replica truncates when it becomes a follower: `own-hwm`
  truncates to its own high watermark at once (before KIP-101); the others ask the leader with
  `OffsetsForLeaderEpoch` before the first fetch: KIP-101's answer (the start of the next epoch),
  KIP-279's (the epoch and its end offset; the follower takes the smaller of the two ends), and
  KIP-320's `fenced`, whose requests carry the current leader epoch (a replica of another epoch is
  answered FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH), with KAFKA-7164 (a replica that missed
  an epoch truncates even when its leader is unchanged) and KAFKA-7415 (an epoch older than the
  leader's first is answered with the first epoch's start).
- The high watermark is checkpointed with the log (replication-offset-checkpoint) and survives a
  crash; a restarted broker learns the current epoch and leader from the controller.
- acks=all: a produce request is answered when the high watermark covers its entry
  (DelayedProduce); `acknowledged()` hands out the entries so answered.

Every ISR change is published to every live broker (`UpdateMetadata`, as the ZooKeeper-era
controller does after an ISR change notification), but that updates only a broker's metadata
cache (the live brokers): a leader counts its own copy of the ISR (Partition.inSyncReplicaIds),
the one its `LeaderAndIsr` request sent or its last accepted `AlterIsr` wrote; a deposed leader
that missed the next `LeaderAndIsr` and still leads keeps counting its old copy.
Offsets are Kafka's (0-based): a log end offset is the number of entries; index = offset + 1.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterable, Sequence

from hwm.impl.core import LEADER, FOLLOWER, DurableLike, NotLeader, Ready, Replica, ReplicaError
from hwm.impl.messages import (
    FENCED_LEADER_EPOCH,
    KAFKA_ERRORS,
    KAFKA_NONE,
    KAFKA_SENDER_FIELD,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    UNKNOWN_LEADER_EPOCH,
    AlterIsr,
    AlterIsrReply,
    FetchReply,
    FetchRequest,
    KafkaMessage,
    LeaderAndIsr,
    OffsetsForLeaderEpoch,
    OffsetsForLeaderEpochReply,
    UpdateMetadata,
)
from hwm.impl.storage import Durable
from hwm.properties.protocol import Protocol
from hwm.properties.snapshot import ServerSnapshot

__all__ = ["CONTROLLER", "Controller", "KafkaReplica", "LeaderEpochCache", "down_snapshot"]

# Where a replica sends what is for the controller (`Ready.messages` destinations are server ids).
CONTROLLER = "controller"


class LeaderEpochCache:
    """LeaderEpochFileCache: (epoch, start offset) of each leader epoch in the log, in order,
    kept as the log grows and shrinks."""

    def __init__(self, epochs_of_log: Iterable[int] = ()):
        self.entries: list[tuple[int, int]] = []
        for offset, epoch in enumerate(epochs_of_log):
            self.assign(epoch, offset)

    def assign(self, epoch: int, start_offset: int) -> None:
        """An entry of `epoch` was appended at `start_offset`."""
        if self.entries and self.entries[-1][0] == epoch:
            return
        if self.entries and start_offset <= self.entries[-1][1]:
            raise ReplicaError(f"leader-epoch cache: epoch {epoch} at offset {start_offset} is not after "
                               f"epoch {self.entries[-1][0]}'s start {self.entries[-1][1]}")
        # A fetch appends without checking the entry before it, so a diverged log may hold a lower
        # epoch after a higher one: the cache keeps every run of the log as it is.
        self.entries.append((epoch, start_offset))

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to `end_offset` entries: forget the epochs that start at or after it."""
        while self.entries and self.entries[-1][1] >= end_offset:
            self.entries.pop()

    @property
    def latest_epoch(self) -> int | None:
        return self.entries[-1][0] if self.entries else None

    def next_epoch_start(self, requested: int, log_end: int) -> int | None:
        """KIP-101's answer: the log end offset if `requested` is the latest epoch, else the start
        offset of the first epoch after it; None (UNDEFINED_EPOCH_OFFSET) if there is none."""
        if self.entries and self.entries[-1][0] == requested:
            return log_end
        return next((start for epoch, start in self.entries if epoch > requested), None)

    def end_offset_for(self, requested: int, log_end: int) -> tuple[int | None, int]:
        """LeaderEpochFileCache.endOffsetFor since KIP-279: the largest epoch at or below `requested`
        and its end offset (the next epoch's start, or the log end offset); with none, (None, the
        first epoch's start or 0) as KAFKA-7415 answers."""
        for k in range(len(self.entries) - 1, -1, -1):
            epoch, _ = self.entries[k]
            if epoch <= requested:
                return epoch, self.entries[k + 1][1] if k + 1 < len(self.entries) else log_end
        return None, self.entries[0][1] if self.entries else 0


class KafkaReplica(Replica):
    """One broker's replica of the partition. Inputs: the controller's requests and the peers'
    fetches (`step`), a produce (`propose`), the leader's `shrink_isr`, and `start_fetch`, the
    follower's fetcher loop taking its next turn. Outputs: `ready()` as for any replica, with
    messages to `CONTROLLER` among them, and `acknowledged()`."""

    systems = ("kafka",)

    def __init__(self, server_id: str, peers: Iterable[str], protocol: Protocol, durable: DurableLike, *,
                 replica_lag_ticks: int | None = None, **options):
        generation = durable.generation
        newest = max((epoch for epoch, _ in durable.log), default=0)
        if newest > generation:
            # Before KIP-320 a follower of an older epoch fetches entries of newer ones as they come.
            durable = Durable(newest, durable.vote, durable.hwm, tuple(durable.log))
        super().__init__(server_id, peers, protocol, durable, **options)
        self.generation = generation
        self.rule = protocol.follower_truncation
        # The replication-offset-checkpoint: the high watermark survives a crash.
        self.high_water_mark = min(durable.hwm, len(self._log))
        self.epochs = LeaderEpochCache(self.log_generations())
        self.isr: tuple[str, ...] = ()  # its own copy: from its last LeaderAndIsr or accepted AlterIsr
        self.live: tuple[str, ...] | None = None  # the controller's live brokers (None: not heard yet)
        self.truncating = False  # must find its truncation point before the next fetch
        self._partition_epoch: int | None = None  # the epoch of the last LeaderAndIsr this process took
        self._pending_isr: tuple[str, ...] | None = None  # an AlterIsr in flight
        self.isr_refusal: str | None = None  # why the controller refused the last AlterIsr
        self.fetch_error: str | None = None  # why the leader refused the last request of the fetcher
        self.fetches = 0  # fetch responses appended (the fetcher loop's turns)
        self._waiting_acks: list[int] = []  # produce requests (indexes) not yet covered by the HW
        self._acknowledged: list[tuple[int, int]] = []  # answered, not yet handed out
        # The timers of the TCP runtime (None: the simulation drives fetches and shrinks itself).
        if replica_lag_ticks is not None and (type(replica_lag_ticks) is not int or replica_lag_ticks < 1):
            raise ValueError(f"replica_lag_ticks must be an int >= 1, got {replica_lag_ticks!r}")
        self.replica_lag_ticks = replica_lag_ticks
        self._ticks = 0
        self._caught_up: dict[str, int] = {}  # follower -> tick it was last caught up (lastCaughtUpTime)
        self._last_fetch: dict[str, tuple[int, int]] = {}  # follower -> (log end offset, tick) at its last fetch
        self._request_sent: int | None = None  # tick the fetcher's unanswered request was sent
        self._isr_sent = 0  # tick the AlterIsr in flight was sent
        self._parked: dict[str, tuple[int, int, int]] = {}  # held fetches: follower -> (offset, HW read, tick)

    @property
    def partition_epoch(self) -> int | None:
        """The epoch of the last LeaderAndIsr this process took (None: none since it started)."""
        return self._partition_epoch

    # -------------------------------------------------------------- inputs the raft core has
    def tick(self) -> None:
        """Without `replica_lag_ticks` (the simulation) time does nothing: the controller elects, and
        `shrink_isr` and `start_fetch` are driven from outside. With it (the TCP runtime) time drives
        them: a leader holds a fetch at its log end until there is something new for it (DelayedFetch:
        entries, or a new HW) or for half of `replica_lag_ticks` (fetch.max.wait.ms); a follower
        fetches again when its request went unanswered for `replica_lag_ticks` (lost with a
        connection); a leader shrinks the ISR by a follower that is down or behind and has not been
        caught up for `replica_lag_ticks` (replica.lag.time.max.ms), and resends an AlterIsr
        unanswered as long."""
        lag = self.replica_lag_ticks
        if lag is None:
            return
        self._ticks += 1
        if self.role == LEADER:
            self._answer_parked()
            if self._pending_isr is not None:
                if self._ticks - self._isr_sent >= lag:
                    self._alter_isr(self._pending_isr)
                return
            lagging = [f for f in self.isr if f != self.server_id and self._lagging(f, lag)]
            if lagging:
                self.shrink_isr(lagging[0])  # one AlterIsr in flight at a time
        elif self.leader_id is not None and (self._request_sent is None or self._ticks - self._request_sent >= lag):
            self.start_fetch()

    def _lagging(self, follower: str, lag: int) -> bool:
        """Partition.getOutOfSyncReplicas: down or behind the log end, and not caught up for `lag` ticks."""
        down = self.live is not None and follower not in self.live
        behind = self.match.get(follower, 0) < len(self._log)
        return (down or behind) and self._ticks - self._caught_up.get(follower, 0) > lag

    def _answer_parked(self) -> None:
        """DelayedFetch: answer each held fetch that has something new, or waited long enough."""
        end_of_log = len(self._log)
        hwm = min(self.high_water_mark, end_of_log)
        for follower, (offset, hwm_read, since) in list(self._parked.items()):
            if end_of_log > offset or hwm != hwm_read or 2 * (self._ticks - since) >= self.replica_lag_ticks:
                del self._parked[follower]
                self._send(follower, FetchReply(self.server_id, KAFKA_NONE, hwm, end_of_log, tuple(self._log[offset:])))

    def _send(self, to: str, message) -> None:
        if isinstance(message, (FetchRequest, OffsetsForLeaderEpoch)):
            self._request_sent = self._ticks
        super()._send(to, message)

    def campaign(self) -> None:
        raise ReplicaError(f"{self.server_id}: Kafka replicas do not campaign; the controller elects")

    pre_campaign = campaign

    def send_append(self, peer: str) -> None:
        raise ReplicaError(f"{self.server_id}: a Kafka leader sends no appends; followers fetch")

    def finish_rejoin(self) -> None:
        """Nothing to finish: a restarted broker waits for the controller's LeaderAndIsr."""

    def propose(self, value: bytes) -> int:
        """A produce with acks=all: append to the leader's log; answered once the HW covers it."""
        if type(value) is not bytes:
            raise TypeError(f"propose: value must be bytes, got {type(value).__name__}")
        if self.role != LEADER:
            raise NotLeader(self.server_id, self.leader_id)
        self._append((self.generation, value))
        self._waiting_acks.append(len(self._log))
        self._advance_high_water_mark()
        return len(self._log)

    def acknowledged(self) -> tuple[tuple[int, int], ...]:
        """The produce requests answered since the last call, as (index, epoch); and forget them."""
        done, self._acknowledged = tuple(self._acknowledged), []
        return done

    # -------------------------------------------------------------- the leader's ISR
    def shrink_isr(self, follower: str) -> None:
        """maybeShrinkIsr for one follower: down (not among the controller's live brokers) or behind
        the leader's log end offset. Sends AlterIsr; the controller's answer decides."""
        self._must_lead()
        if follower not in self.peers:
            raise ReplicaError(f"{follower} is not a replica of this partition")
        if follower not in self.isr:
            raise ReplicaError(f"{follower} is not in the ISR {{{','.join(self.isr)}}}")
        alive = self.live is None or follower in self.live
        if alive and self.match[follower] >= len(self._log):
            raise ReplicaError(f"{follower} is in sync: it has fetched up to {self.server_id}'s log end offset "
                               f"{len(self._log)}")
        self._alter_isr(tuple(k for k in self._isr_with_me() if k != follower))

    def _isr_with_me(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.isr) | {self.server_id}))

    def _alter_isr(self, isr: tuple[str, ...]) -> None:
        self._pending_isr = isr
        self._isr_sent = self._ticks
        self.isr_refusal = None
        self._send(CONTROLLER, AlterIsr(self.server_id, self.generation, isr))

    def _on_alter_isr_reply(self, reply: AlterIsrReply) -> None:
        pending = self._pending_isr
        if pending is None:
            return
        # Only the answer to the request in flight ends the wait. A request unanswered for
        # replica_lag_ticks is sent again, so the first one's answer may come too, after the leader
        # has moved on to its next request: taken for that one, it would leave the leader counting
        # an ISR the controller no longer holds (its request then made at the controller, or refused
        # and never resent), and a replica the controller keeps in the ISR could lack what the HW
        # covers. The links are FIFO and one request is in flight at a time, so an accepted answer
        # naming another ISR is an earlier request's; a refusal is this one's only when the controller
        # has moved past the leader's epoch (within it, the controller refuses only a leader it holds
        # failed, which it re-elects or replaces with a new epoch: the request is sent again).
        if reply.accepted and set(reply.isr) != set(pending):
            return
        if not reply.accepted and reply.leader_epoch <= self.generation:
            return
        self._pending_isr = None
        if reply.accepted:
            self.isr = reply.isr
        else:
            # The controller's conditional update failed: another leader was elected since.
            self.isr_refusal = (f"{self.server_id} leads epoch {self.generation} but the controller is at epoch "
                                f"{reply.leader_epoch}: its ISR update is rejected")
        if self.role == LEADER:
            self._advance_high_water_mark()

    def _advance_high_water_mark(self) -> None:
        """maybeIncrementLeaderHW: HW = min LEO over the ISR, while the ISR is large enough."""
        if self.role != LEADER:
            return
        # The ISR replicas that count toward the HW (`self.rules`, as the model's: every one by default).
        isr = (set(self.isr) | {self.server_id}) & self.counting
        if len(isr) < self.rules.replication_quorum():
            return  # min.insync.replicas, on the ISR the controller holds: acks=all waits, the HW stays
        # While an AlterIsr is in flight the HW is over the maximal ISR, the current one with the proposed
        # (a shrink is not in effect yet, an expansion already counts: Partition's maximalIsr, KIP-497),
        # so a controller that does not answer stops no commit the current ISR makes.
        isr |= set(self._pending_isr or ()) & self.counting
        hwm = min(len(self._log) if k == self.server_id else self.match[k] for k in isr)
        if hwm <= self.high_water_mark:
            return
        self._set_high_water_mark(hwm)
        # DelayedProduce: the produce requests the HW now covers are answered.
        covered = [i for i in self._waiting_acks if i <= hwm]
        self._waiting_acks = [i for i in self._waiting_acks if i > hwm]
        self._acknowledged += [(i, self._log[i - 1][0]) for i in covered]

    # -------------------------------------------------------------- the controller's requests
    def _on_leader_and_isr(self, request: LeaderAndIsr) -> None:
        epoch, leader = request.leader_epoch, request.leader
        if self._partition_epoch is not None and epoch <= self._partition_epoch:
            return  # a stale request (becomeLeaderOrFollower ignores an epoch that is not newer)
        self._partition_epoch = epoch
        self.isr = request.isr
        if leader == self.server_id:
            self._become_kafka_leader(epoch)
            return
        if (self.role == FOLLOWER and leader is not None and self.leader_id == leader
                and (self.rule != "fenced" or epoch <= self.generation + 1)):
            # Partition.makeFollower returns early when the leader is unchanged; since KAFKA-7164
            # (fenced) only when no epoch was missed.
            self._adopt_epoch(epoch)
            return
        self._adopt_epoch(epoch)
        self.role = FOLLOWER
        self.leader_id = leader
        self._request_sent = None  # a request to the previous leader is not waited for
        self._step_down()
        if self.rule == "own-hwm":
            # Before KIP-101: "truncate the log to the high watermark" on becoming a follower.
            self._truncate_log(self.high_water_mark)
        else:
            self.truncating = True  # the fetcher starts in its truncating state

    def _become_kafka_leader(self, epoch: int) -> None:
        self._adopt_epoch(epoch)
        self.role = LEADER
        self.leader_id = self.server_id
        self._step_down()
        self.match = {peer: 0 for peer in self.peers}  # learnt from the followers' fetches
        self._caught_up = {peer: self._ticks for peer in self.peers}  # a new leader gives each a full lag
        self._last_fetch = {}
        self.truncating = False
        self._advance_high_water_mark()

    def _step_down(self) -> None:
        """Forget what a leader keeps: its followers' offsets, a pending ISR update, waiting produces
        (answered NOT_LEADER_OR_FOLLOWER)."""
        self.match = {}
        self._parked = {}
        self._pending_isr = None
        self._waiting_acks = []

    def _adopt_epoch(self, epoch: int) -> None:
        if epoch != self.generation:
            self.generation = epoch
            self._metadata_dirty = True

    def _on_update_metadata(self, update: UpdateMetadata) -> None:
        # The metadata cache only: the partition's ISR (`isr`) is not the metadata cache's.
        self.live = update.live

    # -------------------------------------------------------------- the follower's fetcher
    def start_fetch(self) -> None:
        """The fetcher's next request to the leader: OffsetsForLeaderEpoch while truncating, else a
        fetch from the log end offset."""
        if self.role == LEADER:
            raise ReplicaError(f"{self.server_id} leads epoch {self.generation} and does not fetch")
        if self.leader_id is None:
            raise ReplicaError(f"{self.server_id} knows no leader of epoch {self.generation}")
        self.fetch_error = None
        if self.truncating and self._log:
            self._send(self.leader_id, OffsetsForLeaderEpoch(self.server_id, self._log[-1][0], self._current_epoch()))
        else:
            self.truncating = False  # an empty log has nothing to truncate
            self._fetch()

    def _current_epoch(self) -> int | None:
        # KIP-320: fetches and epoch queries carry the current leader epoch.
        return self.generation if self.rule == "fenced" else None

    def _fetch(self) -> None:
        self._send(self.leader_id, FetchRequest(self.server_id, len(self._log), self._current_epoch()))

    def _from_my_leader(self, sender: str) -> bool:
        return self.role == FOLLOWER and sender == self.leader_id

    def _refused(self, error: int, what: str) -> None:
        self.fetch_error = (f"{self.leader_id} answers {KAFKA_ERRORS[error]}: {self.server_id}'s {what} carries "
                            f"epoch {self.generation}" if error in (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH)
                            else f"{self.leader_id} answers {KAFKA_ERRORS[error]} to {self.server_id}'s {what}")

    def _on_offsets_reply(self, reply: OffsetsForLeaderEpochReply) -> None:
        if not self._from_my_leader(reply.leader) or not self.truncating:
            return
        self._request_sent = None
        if reply.error != KAFKA_NONE:
            self._refused(reply.error, "OffsetsForLeaderEpoch")
            return
        requested = self._log[-1][0]
        if reply.end_offset is None:
            # UNDEFINED_EPOCH_OFFSET: fall back to the high watermark.
            point = self.high_water_mark
        elif reply.leader_epoch is not None and reply.leader_epoch != requested:
            # KIP-279: the leader lacks our epoch; truncate to the smaller of the two end offsets
            # for the epoch it named.
            own_epoch, own_end = self.epochs.end_offset_for(reply.leader_epoch, len(self._log))
            if own_epoch is not None and own_epoch != reply.leader_epoch and own_end > 0:
                # We lack that epoch too: truncate to the end of our largest epoch below it and ask
                # again (AbstractFetcherThread: truncationCompleted = false).
                self._truncate_log(min(own_end, len(self._log)))
                self._send(self.leader_id, OffsetsForLeaderEpoch(self.server_id, self._log[-1][0],
                                                                 self._current_epoch()))
                return
            point = min(reply.end_offset, own_end)
        else:
            point = reply.end_offset
        self._truncate_log(min(point, len(self._log)))
        self.truncating = False
        self._fetch()

    def _on_fetch_reply(self, reply: FetchReply) -> None:
        if not self._from_my_leader(reply.leader):
            return
        if reply.error == KAFKA_NONE and reply.log_end_offset - len(reply.entries) != len(self._log):
            # The answer to an earlier fetch, from another offset (a fetch resent after replica_lag_ticks
            # while the first answer was delayed): AbstractFetcherThread drops a response whose fetch
            # offset is not the partition's current one. Appending it would write its entries twice.
            return
        self._request_sent = None
        if reply.error == OFFSET_OUT_OF_RANGE:
            # ReplicaFetcherThread.handleOffsetOutOfRange: our log end is past the leader's.
            self._truncate_log(min(reply.log_end_offset, len(self._log)))
            self._fetch()
            return
        if reply.error != KAFKA_NONE:
            self._refused(reply.error, "fetch")
            return
        for entry in reply.entries:  # appended as they are: a fetch checks nothing before them
            self._append(entry)
        length = len(self._log)
        self._set_high_water_mark(max(min(self.high_water_mark, length), min(reply.high_watermark, length)))
        self.fetches += 1
        self._fetch()  # the fetcher loop's next turn tells the leader our new log end offset

    # -------------------------------------------------------------- the leader's answers
    def _epoch_error(self, current: int | None) -> int:
        if current is None:
            return KAFKA_NONE
        if current < self.generation:
            return FENCED_LEADER_EPOCH
        if current > self.generation:
            return UNKNOWN_LEADER_EPOCH
        return KAFKA_NONE

    def _on_offsets_for_leader_epoch(self, request: OffsetsForLeaderEpoch) -> None:
        error = NOT_LEADER_OR_FOLLOWER if self.role != LEADER else self._epoch_error(request.current_leader_epoch)
        if error:
            self._send(request.replica, OffsetsForLeaderEpochReply(self.server_id, error, None, None))
            return
        end_of_log = len(self._log)
        if self.rule == "leader-epoch":
            answer = (None, self.epochs.next_epoch_start(request.leader_epoch, end_of_log))
        else:
            answer = self.epochs.end_offset_for(request.leader_epoch, end_of_log)
            if answer[0] is None and self.rule == "leader-epoch-kip279":
                answer = (None, None)  # 2.0 still answered UNDEFINED_EPOCH_OFFSET here (KAFKA-7415)
        self._send(request.replica, OffsetsForLeaderEpochReply(self.server_id, KAFKA_NONE, *answer))

    def _on_fetch(self, request: FetchRequest) -> None:
        follower, offset = request.replica, request.fetch_offset
        error = NOT_LEADER_OR_FOLLOWER if self.role != LEADER else self._epoch_error(request.current_leader_epoch)
        end_of_log = len(self._log)
        hwm = min(self.high_water_mark, end_of_log)
        if error:
            self._send(follower, FetchReply(self.server_id, error, 0, 0, ()))
            return
        if offset > end_of_log:
            self._send(follower, FetchReply(self.server_id, OFFSET_OUT_OF_RANGE, hwm, end_of_log, ()))
            return
        # ReplicaManager.fetchMessages reads the records and the HW first, then updates the
        # follower's state (which may move the HW the next fetch carries).
        reply = FetchReply(self.server_id, KAFKA_NONE, hwm, end_of_log, tuple(self._log[offset:]))
        self.match[follower] = offset
        # Replica.updateFetchState: caught up now if at the log end, or as of its previous fetch if
        # it has reached the log end of then (under steady writes a follower is never at the end).
        previous_end, previous_tick = self._last_fetch.get(follower, (None, 0))
        if offset >= end_of_log:
            self._caught_up[follower] = self._ticks
        elif previous_end is not None and offset >= previous_end:
            self._caught_up[follower] = max(self._caught_up.get(follower, 0), previous_tick)
        self._last_fetch[follower] = (end_of_log, self._ticks)
        if (follower not in self.isr and self._pending_isr is None and offset >= self.high_water_mark):
            self._alter_isr(tuple(sorted(set(self._isr_with_me()) | {follower})))  # maybeExpandIsr
        self._advance_high_water_mark()
        if self.replica_lag_ticks is not None and not reply.entries:
            self._parked[follower] = (offset, hwm, self._ticks)  # answered by ready() or tick()
            return
        self._send(follower, reply)

    # -------------------------------------------------------------- log and storage
    def _append(self, entry: tuple[int, bytes]) -> None:
        self._log.append(entry)
        self._mark_dirty(len(self._log))
        self.epochs.assign(entry[0], len(self._log) - 1)

    def _truncate_log(self, end_offset: int) -> None:
        """Keep the first `end_offset` entries (Log.truncateTo), the epoch cache and the HW with them."""
        self._truncate_from(end_offset + 1)
        self.epochs.truncate_from_end(end_offset)
        self._set_high_water_mark(min(self.high_water_mark, len(self._log)))

    def _set_high_water_mark(self, hwm: int) -> None:
        if hwm != self.high_water_mark:
            self.high_water_mark = hwm
            self._metadata_dirty = True  # checkpointed, whatever hwm_durable (a raft flag) says

    def ready(self) -> Ready:
        if self._parked:
            self._answer_parked()
        ready = super().ready()
        if ready.metadata is not None and ready.metadata.hwm != self.high_water_mark:
            ready = replace(ready, metadata=ready.metadata._replace(hwm=self.high_water_mark))
        return ready

    def _must_lead(self) -> None:
        if self.role != LEADER:
            raise ReplicaError(f"{self.server_id} is not a leader")

    # -------------------------------------------------------------- input
    def step(self, message: KafkaMessage) -> None:
        """Handle one message from the controller or a peer (ReplicaError for anything else)."""
        handler = self._KAFKA_HANDLERS.get(type(message))
        if handler is None:
            raise ReplicaError(f"{self.server_id} cannot step a {type(message).__name__}: not a Kafka replica's message")
        field = KAFKA_SENDER_FIELD[type(message)]
        if field is not None and getattr(message, field) not in self.peers:
            raise ReplicaError(f"{self.server_id} got a {type(message).__name__} from {getattr(message, field)!r}, "
                               f"which is not one of its peers {list(self.peers)}")
        handler(self, message)

    _KAFKA_HANDLERS: dict[type, Callable[["KafkaReplica", KafkaMessage], None]] = {
        LeaderAndIsr: _on_leader_and_isr,
        UpdateMetadata: _on_update_metadata,
        AlterIsrReply: _on_alter_isr_reply,
        OffsetsForLeaderEpoch: _on_offsets_for_leader_epoch,
        OffsetsForLeaderEpochReply: _on_offsets_reply,
        FetchRequest: _on_fetch,
        FetchReply: _on_fetch_reply,
    }

    def describe(self) -> dict:
        """What decides what this broker does next (for `kill -USR1` on a stalled node)."""
        state = {"server": self.server_id, "role": self.role, "leader_epoch": self.generation,
                 "leader": self.leader_id, "log_end_offset": len(self._log), "high_watermark": self.high_water_mark,
                 "isr": list(self.isr), "pending_isr": self._pending_isr, "isr_refusal": self.isr_refusal,
                 "live": self.live, "truncating": self.truncating, "fetch_error": self.fetch_error,
                 "ticks": self._ticks, "request_sent": self._request_sent, "held_fetches": sorted(self._parked)}
        if self.role == LEADER:
            state["followers"] = {peer: {"fetch_offset": self.match.get(peer, 0),
                                         "caught_up": self._caught_up.get(peer)} for peer in self.peers}
        return state

    def __repr__(self) -> str:
        log = ",".join(str(g) for g in self.log_generations())
        return (f"KafkaReplica({self.server_id} {self.role} e{self.generation} log=[{log}] hwm={self.high_water_mark} "
                f"isr={{{','.join(self.isr)}}}{' truncating' if self.truncating else ''})")


def down_snapshot(durable: DurableLike) -> ServerSnapshot:
    """A crashed broker as its storage holds it: the log, the last epoch and the checkpointed HW."""
    return ServerSnapshot(durable.generation, FOLLOWER, tuple(g for g, _ in durable.log), durable.hwm, False)


class Controller:
    """The controller's state of the partition (ZooKeeper's partition state and broker registry):
    the leader epoch, its leader, the ISR, and the live brokers. Sans-IO: `ready()` hands out the
    requests to send, as (broker, message)."""

    def __init__(self, replicas: Sequence[str], protocol: Protocol,
                 state: tuple[int, str | None, tuple[str, ...]] | None = None, live: Iterable[str] | None = None):
        """`state`: (leader epoch, leader, ISR) as a restarted controller reads it back (default: epoch 0,
        no leader, every replica in sync: all logs are empty). `live`: the live brokers (default: all)."""
        self.replicas = tuple(replicas)
        self.protocol = protocol
        self.leader_epoch, self.leader, self.isr = state if state is not None else (0, None, self.replicas)
        self.live: set[str] = set(self.replicas if live is None else live)
        self._outbox: list[tuple[str, KafkaMessage]] = []

    def _names(self, servers: Iterable[str]) -> str:
        return "{" + ",".join(s for s in self.replicas if s in set(servers)) + "}"

    def elect(self, candidate: str, recipients: Sequence[str]) -> str | None:
        """Elect `candidate` for a new epoch, telling `recipients` (LeaderAndIsr); every live broker
        gets the new metadata. Returns why not, or None."""
        if candidate not in recipients:
            return f"the controller's LeaderAndIsr request must reach the new leader {candidate}"
        for server in [candidate] + [r for r in recipients if r != candidate]:
            if server not in self.live:
                return f"{server} is down and cannot receive the LeaderAndIsr request"
        clean = candidate in self.isr
        if not clean:
            live_isr = [s for s in self.isr if s in self.live]
            if live_isr:
                return (f"{candidate} is not in the ISR {self._names(self.isr)}: the controller elects a live "
                        f"ISR replica ({', '.join(live_isr)})")
            if not self.protocol.unclean_election:
                return (f"no replica of the ISR {self._names(self.isr)} is alive and unclean leader election is "
                        f"disabled: the partition stays offline")
        self.leader_epoch += 1
        self.leader = candidate
        # Clean: the live ISR; unclean: the new leader alone.
        self.isr = tuple(s for s in self.replicas if s == candidate or (clean and s in self.isr and s in self.live))
        for server in recipients:
            self._outbox.append((server, LeaderAndIsr(self.leader_epoch, candidate, self.isr)))
        self._publish()
        return None

    def broker_failed(self, server: str) -> None:
        """The broker's session expired: it is no longer live (and no longer leads)."""
        self.live.discard(server)
        if self.leader == server:
            self.leader = None
        self._publish()

    def broker_started(self, server: str) -> None:
        """A (re)started broker registers: it learns the current epoch, leader and ISR."""
        self.live.add(server)
        self._outbox.append((server, LeaderAndIsr(self.leader_epoch, self.leader, self.isr)))
        self._publish()

    def step(self, request: AlterIsr) -> None:
        """An ISR update: made only for the leader of the current epoch (ZooKeeper's conditional update)."""
        if type(request) is not AlterIsr:
            raise ReplicaError(f"the controller cannot step a {type(request).__name__}")
        accepted = request.leader == self.leader and request.leader_epoch == self.leader_epoch
        if accepted:
            self.isr = tuple(s for s in self.replicas if s in set(request.isr))
        self._outbox.append((request.leader, AlterIsrReply(self.leader_epoch, accepted, self.isr)))
        if accepted:
            self._publish()

    def _publish(self) -> None:
        live = tuple(s for s in self.replicas if s in self.live)
        for server in live:
            self._outbox.append((server, UpdateMetadata(self.leader_epoch, self.leader, self.isr, live)))

    def ready(self) -> tuple[tuple[str, KafkaMessage], ...]:
        out, self._outbox = tuple(self._outbox), []
        return out
