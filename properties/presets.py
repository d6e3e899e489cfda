"""The named presets: the pattern as written (`seed`), the safe protocols of each system, and one
preset per known bug, each with its summary, its source and what the checker finds against it
(`hwm protocols` prints them)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from hwm.properties.flags import Protocol


@dataclass(frozen=True)
class Preset:
    name: str
    protocol: Protocol
    summary: str
    reference: str
    # True when the catalogue expects the checker to find a violation of some
    # `always` property for this preset (at the bounds given in `caught_at`).
    broken: bool
    # The smallest bounds (CLI names) at which the checker catches it; {} for safe presets.
    caught_at: Mapping[str, Any]
    # The `always` properties it violates at the default bounds (the tour checks this),
    # lowered by its system's TOUR_BOUNDS.
    breaks: frozenset = frozenset()


_DEFAULT_CATCH = {"servers": 3}


def _broken(name: str, protocol: Protocol, summary: str, reference: str, breaks,
            caught_at: Mapping[str, Any] = _DEFAULT_CATCH) -> Preset:
    """A preset the checker catches (from `caught_at` on), violating `breaks` in the tour."""
    return Preset(name, protocol, summary, reference, True, caught_at, frozenset(breaks))


def _safe(name: str, protocol: Protocol, summary: str, reference: str) -> Preset:
    """A preset the checker finds nothing against."""
    return Preset(name, protocol, summary, reference, False, {})


# What a preset that loses a read breaks in the tour: the read is truncated and lost, two reads
# disagree, the HWM falls back, and an entry counted as committed sits on less than a quorum.
_READ_LOST = frozenset({"ReadNeverTruncated", "HwmNeverTruncated", "ReadNeverLost", "ReadsAgree", "CommittedOnQuorum"})


RAFT = Protocol()

SEED = Protocol(
    quorum="seed-index",
    commit="any-generation",
    election="any",
    append_check="generation-mismatch",
    restart="truncate-to-leader-hwm",
    hwm_durable=False,
    noop_on_election=False,
)

ZAB = Protocol(system="zab")
BOOKKEEPER = Protocol(system="bookkeeper")

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        _broken(
            "seed",
            SEED,
            "the pattern exactly as the seeds write it",
            "Fowler, High-Water Mark: computeHighwaterMark takes serverLogIndexes.get(noOfServers / 2); "
            "'if (logIndexAtQuorum > currentHighWaterMark)'; maybeTruncate removes entries whose "
            "generation differs; a rejoining server 'asks for the current high-water mark, truncates "
            "its log to high-water mark'",
            _READ_LOST | {"HwmWithinLog"},
        ),
        _safe(
            "raft",
            RAFT,
            "Raft: majority quorum, commit only current-generation entries, up-to-date voting, "
            "previous-entry check, durable log",
            "Ongaro & Ousterhout, In Search of an Understandable Consensus Algorithm, sections 5.3-5.4",
        ),
        _broken(
            "kip101",
            replace(RAFT, restart="truncate-to-own-hwm", hwm_durable=True),
            "raft's log with Kafka's rule from before KIP-101: a restarting follower truncates its log to "
            "its own checkpointed high-water mark, which lags the leader's (the name is the KIP that fixed "
            "it; the behaviour is the bug; kafka-truncate-to-hwm models it on Kafka's own replication)",
            "KIP-101: Alter Replication Protocol to use Leader Epoch rather than High Watermark for "
            "Truncation (scenario 1, 'high watermark truncation followed by immediate leader election')",
            _READ_LOST,
        ),
        _broken(
            "raft-seed-quorum",
            replace(RAFT, quorum="seed-index"),
            "raft with the seed's computeHighwaterMark: the [N/2]-th smallest match index, "
            "one server short of a majority when N is even",
            "Fowler, High-Water Mark: 'return serverLogIndexes.get(noOfServers / 2)'",
            (),
            caught_at={"servers": 4},
        ),
        _broken(
            "raft-any-generation-commit",
            replace(RAFT, commit="any-generation"),
            "raft that advances the HWM over an entry of an older generation (Raft Figure 8)",
            "Raft paper section 5.4.2 and Figure 8: 'Raft never commits log entries from previous "
            "terms by counting replicas'",
            _READ_LOST,
        ),
        _broken(
            "raft-any-election",
            replace(RAFT, election="any"),
            "raft where a server with a stale log can win an election",
            "Raft paper section 5.4.1, election restriction: 'the voter denies its vote if its own "
            "log is more up-to-date than that of the candidate'",
            _READ_LOST,
        ),
        _broken(
            "raft-generation-mismatch",
            replace(RAFT, append_check="generation-mismatch"),
            "raft with the seed's follower: no check of the previous entry, and the reply carries "
            "the follower's last log index",
            "Fowler, High-Water Mark: appendEntries returns wal.getLastLogIndex(); Raft paper Figure 2, "
            "AppendEntries receiver rule 2 (prevLogIndex/prevLogTerm)",
            _READ_LOST,
        ),
        _broken(
            "raft-truncate-to-leader-hwm",
            replace(RAFT, restart="truncate-to-leader-hwm"),
            "raft where a restarting server truncates its log to the leader's HWM, as the seed says",
            "Fowler, High-Water Mark: 'It then explicitly asks for the current high-water mark, "
            "truncates its log to high-water mark'",
            {"ReadNeverTruncated", "ReadNeverLost", "ReadsAgree"},
        ),
        _broken(
            "raft-truncate-to-own-hwm",
            replace(RAFT, restart="truncate-to-own-hwm"),
            "raft where a restarting server truncates its log to its own (volatile, so zero) HWM",
            "KIP-101 (Kafka): truncation to the high watermark on restart loses committed data",
            _READ_LOST,
        ),
        _safe(
            "raft-durable-hwm",
            replace(RAFT, hwm_durable=True),
            "raft with a checkpointed HWM; safe: the HWM only ever covers committed entries",
            "Kafka's replication-offset-checkpoint; Raft keeps commitIndex volatile (Figure 2)",
        ),
        _safe(
            "raft-noop",
            replace(RAFT, noop_on_election=True),
            "raft whose new leader appends an entry of its own generation; safe, and commits sooner",
            "Raft paper section 8 ('a blank no-op entry at the start of its term'); ZAB's "
            "synchronisation phase",
        ),
        _safe(
            "zab",
            ZAB,
            "ZAB: the server with the most up-to-date history wins; as prospective leader it "
            "synchronises its whole history to a quorum, which persists it before acknowledging "
            "NEWLEADER, and only then commits that history, accepts writes and broadcasts",
            "Junqueira, Reed, Serafini, Zab: High-performance broadcast for primary-backup systems "
            "(DSN 2011), phases 1-3 (discovery, synchronization, broadcast); ZooKeeper "
            "Learner.syncWithLeader after ZOOKEEPER-3911",
        ),
        _broken(
            "zab-ack-before-persist",
            replace(ZAB, zab_ack_before_persist=True),
            "ZAB whose follower acknowledges NEWLEADER while the synchronised entries are only in "
            "memory: a crash loses entries the new leader already committed",
            "ZOOKEEPER-3911, 'Data inconsistency caused by DIFF sync uncommitted log' (apache/zookeeper "
            "pull request 1445: log the uncommitted proposals before the NEWLEADER ACK); the same "
            "root cause reappears as ZOOKEEPER-4646",
            {"ReadNeverTruncated", "ReadNeverLost", "ReadsAgree", "HwmWithinLog", "CommittedOnQuorum",
             "AckedWriteNeverLost", "HwmNeverTruncated"},
        ),
        _safe(
            "bookkeeper",
            BOOKKEEPER,
            "BookKeeper: one writer adds entries to every bookie of the ensemble (write quorum = "
            "ensemble), acknowledges an entry once an ack quorum stored it and everything before it "
            "(the last-add-confirmed, piggybacked on the next add); ledger recovery fences the "
            "bookies with its LAC reads and its entry reads, then closes the ledger",
            "Apache BookKeeper replication protocol (bookkeeper.apache.org, 'BookKeeper protocol'); "
            "Fencing (BookKeeper wiki); apache/bookkeeper pull request 2616, 'Add fencing to "
            "recovery reads to avoid data loss issue'",
        ),
        _broken(
            "bookkeeper-recovery-without-fencing",
            replace(BOOKKEEPER, bookkeeper_recovery_reads_fence=False),
            "BookKeeper whose recovery reads do not fence: a bookie that answered 'no such entry' "
            "still accepts the writer's add, which completes an ack quorum after recovery has "
            "closed the ledger before that entry",
            "apache/bookkeeper issue 2614, 'Existing fencing not enough to prevent data loss' "
            "(found with a TLA+ specification), fixed by pull request 2616 in 4.13/4.14",
            {"ReadNeverTruncated", "ReadNeverLost", "CommittedOnQuorum", "AckedWriteNeverLost", "HwmNeverTruncated"},
        ),
    ]
}

KAFKA = Protocol(system="kafka")

# Kafka's replication, one preset per historical step of follower truncation (each is the
# step's bug), the safe one, and unclean election. `hwm protocols` cites the sources.
PRESETS.update({
    p.name: p
    for p in [
        _broken(
            "kafka-truncate-to-hwm",
            replace(KAFKA, follower_truncation="own-hwm"),
            "Kafka before KIP-101 (0.10 and older): a replica that becomes a follower, or restarts, "
            "truncates its log to its own high watermark, which lags the leader's by a fetch",
            "KIP-101: Alter Replication Protocol to use Leader Epoch rather than High Watermark for "
            "Truncation, scenario 1 (data loss) and scenario 2 (replica divergence); KAFKA-1211",
            {"ReadNeverTruncated", "ReadNeverLost", "ReadsAgree", "CommittedOnQuorum",
             "AcknowledgedWriteKept", "AckedWriteNeverLost", "HwmNeverTruncated"},
        ),
        _broken(
            "kafka-kip101",
            replace(KAFKA, follower_truncation="leader-epoch"),
            "Kafka 0.11-1.1 (KIP-101): a new follower asks the leader for the end offset of its last "
            "leader epoch (OffsetsForLeaderEpoch) and truncates there; the leader answers with the start "
            "of its next epoch, which after fast leader changes lies past where the logs diverge",
            "KIP-101 (OffsetsForLeaderEpoch); KIP-279: Fix log divergence between leader and follower "
            "after fast leader fail over (KAFKA-6361)",
            {"ReadNeverTruncated", "ReadsAgree", "CommittedOnQuorum", "AckedWriteNeverLost", "HwmNeverTruncated"},
        ),
        _broken(
            "kafka-kip279",
            replace(KAFKA, follower_truncation="leader-epoch-kip279"),
            "Kafka 2.0 (KIP-279): the leader's answer names the largest epoch it has at or below the "
            "follower's, and the follower truncates to the smaller of the two end offsets for it; but a "
            "replica whose leader is unchanged skips truncation even when it missed leader epochs",
            "KIP-279 (KAFKA-6361); KAFKA-7164: Follower should truncate after every leader epoch change "
            "(Partition.makeFollower returned early when the leader id was unchanged)",
            {"ReadsAgree", "CommittedOnQuorum", "AckedWriteNeverLost"},
        ),
        _safe(
            "kafka",
            KAFKA,
            "Kafka 2.1 and later (KIP-320): fetch and OffsetsForLeaderEpoch carry the current leader "
            "epoch and a replica of another epoch is fenced; a follower truncates after every leader "
            "epoch change (KAFKA-7164); clean election from the ISR only",
            "KIP-320: Allow fetchers to detect and handle log truncation; KAFKA-7164; KAFKA-7415; "
            "LeaderEpochFileCache.endOffsetFor, Partition.maybeShrinkIsr/maybeExpandIsr",
        ),
        _broken(
            "kafka-unclean-election",
            replace(KAFKA, unclean_election=True),
            "Kafka with unclean.leader.election.enable: when no ISR replica is alive, the controller "
            "elects any live replica, and what only the ISR held is lost",
            "Kafka documentation, 'Unclean leader election: What if they all die?'; KIP-101 appendix "
            "(divergence under unclean election); KIP-320 (consumers detect the truncation)",
            {"ReadNeverTruncated", "ReadNeverLost", "ReadsAgree", "CommittedOnQuorum",
             "AcknowledgedWriteKept", "AckedWriteNeverLost", "HwmNeverTruncated"},
        ),
        _broken(
            "kafka-kip320-first-try",
            replace(KAFKA, follower_truncation="last-fetched-epoch", late_leader_and_isr=True),
            "KIP-320's first attempt (never released): no truncation on becoming a follower; a fetch "
            "carries the epoch of the follower's last entry, not the current leader epoch, and a "
            "mismatch answers LOG_TRUNCATION; with LeaderAndIsr requests that arrive late, the leader "
            "counts a follower of an older epoch, which later truncates the committed entry",
            "Jason Gustafson, kafka-specification (TLA+), module Kip320FirstTry ('fails to guarantee the "
            "StrongIsr property'), July 2018; KIP-320; KAFKA-7395 (apache/kafka pull request 5661)",
            {"ReadNeverTruncated", "HwmNeverTruncated", "ReadsAgree", "CommittedOnQuorum", "AckedWriteNeverLost"},
        ),
        _broken(
            "kafka-min-insync-1",
            replace(KAFKA, min_insync_replicas=1),
            "Kafka with min.insync.replicas=1: the leader may shrink the ISR to itself and acknowledge "
            "acks=all writes that only it stores; one fault (its disk, an unclean election, a deposed leader's "
            "follower truncating) from loss",
            "Kafka documentation, topic configuration min.insync.replicas ('When used together, "
            "min.insync.replicas and acks allow you to enforce greater durability guarantees ... "
            "replication factor of 3, set min.insync.replicas to 2'); KIP-966: Eligible Leader Replicas "
            "(the 'last replica standing' problem of an ISR of one)",
            {"ReadNeverTruncated", "CommittedOnQuorum", "AckedWriteNeverLost"},
        ),
        _broken(
            "kafka-unflushed",
            replace(KAFKA, log_flush="never"),
            "Kafka with its default flush settings: a log reaches the disk only when the OS writes it back, "
            "so a power failure takes the unflushed suffix, committed entries included; the checkpointed high "
            "watermark survives and the controller keeps the last ISR replica in the ISR, which is re-elected "
            "without what it lost ('last replica standing')",
            "Kafka documentation, broker configuration log.flush.interval.messages and log.flush.interval.ms "
            "(unset by default; the documentation recommends replication for durability); KIP-966: Eligible Leader Replicas ('A "
            "partition replica can experience local data loss in unclean shutdown scenarios where unflushed data "
            "in the OS page cache is lost'); KIP-101, Scenario 2 (divergence after a power failure)",
            {"ReadNeverTruncated", "HwmNeverTruncated", "CommittedOnQuorum", "AckedWriteNeverLost"},
        ),
    ]
})

# Leader leases on a partitioned network (model/partition.py). Their bugs need a partition and a
# second entry: the tour checks them at PRESET_TOUR_BOUNDS.
PRESETS.update({
    p.name: p
    for p in [
        _safe(
            "raft-lease-reads",
            replace(RAFT, lease_reads=True, check_quorum=True),
            "raft whose leader serves reads from its lease, with check-quorum: a leader cut off from "
            "a majority steps down before the other side can elect, and a server that hears from a "
            "leader refuses to vote, so no lease outlives its leadership",
            "Ongaro, Consensus: Bridging Theory and Practice (PhD thesis, 2014), sections 6.2 ('a leader "
            "steps down if an election timeout elapses without a successful round of heartbeats to a "
            "majority'), 4.2.3 and 6.4.1 (leases); etcd-io/raft: 'CheckQuorum must be enabled when "
            "ReadOnlyOption is ReadOnlyLeaseBased'",
        ),
        _broken(
            "raft-lease-reads-without-check-quorum",
            replace(RAFT, lease_reads=True),
            "raft whose leader serves reads from its lease without check-quorum: a leader partitioned "
            "away keeps leading, the majority elects another that commits a newer entry, and the old "
            "leader's lease read misses it (a stale read)",
            "Ongaro, PhD thesis (2014), section 6.4.1: leases 'rely on timing for safety'; section 6.2 "
            "(check-quorum); etcd-io/raft raft.go, Config.validate: 'CheckQuorum must be enabled when "
            "ReadOnlyOption is ReadOnlyLeaseBased'",
            {"LeaseReadNeverStale"},
            caught_at={"servers": 3, "max_log": 2, "max_partitions": 1},
        ),
    ]
})

# Partitions in Kafka and ZAB (model/kafka_partition.py, model/zab_partition.py): the step-down rule each
# system has, and what goes wrong without it. The tour checks them at PRESET_TOUR_BOUNDS.
PRESETS.update({
    p.name: p
    for p in [
        _broken(
            "kafka-without-controller-fencing",
            replace(KAFKA, controller_fencing=False),
            "Kafka whose leader, cut off from the other brokers and the controller, shrinks its ISR on its "
            "own and keeps acknowledging acks=all writes; the controller, which never saw the shrink nor "
            "expired the leader's session, elects a follower of its ISR that lacks them",
            "Kyle Kingsbury, Jepsen: Kafka (aphyr.com/posts/293-jepsen-kafka, 2013): a partitioned leader "
            "shrinks the ISR to itself and acknowledges writes the new leader never has; KIP-497 (AlterIsr: "
            "the leader counts the maximal ISR until the controller accepts a change); the ZooKeeper-era "
            "conditional ISR update (Partition.updateIsr, zkVersion); KIP-841 (fenced brokers leave the ISR)",
            {"ReadNeverTruncated", "HwmNeverTruncated", "ReadNeverLost", "ReadsAgree", "CommittedOnQuorum",
             "AcknowledgedWriteKept", "AckedWriteNeverLost"},
            caught_at={"servers": 3, "max_partitions": 1},
        ),
        _safe(
            "zab-step-down",
            replace(ZAB, check_quorum=True),
            "ZAB whose leader steps down when it has not heard from a quorum within syncLimit (ZooKeeper's "
            "Leader.lead shuts down and goes back to LOOKING); a leader cut off from its quorum commits "
            "nothing either way, so the rule buys availability, and no property of the catalogue fails "
            "without it",
            "Apache ZooKeeper, Leader.lead ('Not sufficient followers synced'), the syncLimit and initLimit "
            "settings of the ZooKeeper Administrator's Guide; Junqueira, Reed, Serafini, Zab: "
            "High-performance broadcast for primary-backup systems (DSN 2011)",
        ),
    ]
})

# BookKeeper's ledger parameters and ensemble changes (model/bookkeeper.py; properties/ledger.py
# counts an entry's copies on AQ bookies of its write set).
_BK_CHANGES = replace(BOOKKEEPER, ensemble_size=2)
PRESETS.update({
    p.name: p
    for p in [
        _safe(
            "bookkeeper-striped",
            replace(BOOKKEEPER, ensemble_size=3, write_quorum=2, ack_quorum=2),
            "BookKeeper with a write quorum smaller than the ensemble (E=3, WQ=2, AQ=2): entries are "
            "striped round-robin, the LAC counts AQ bookies of each entry's write set, fencing needs "
            "E - AQ + 1 bookies and an entry is missing once WQ - AQ + 1 bookies of its write set say so",
            "Apache BookKeeper replication protocol (bookkeeper.apache.org, 'BookKeeper protocol': "
            "ensemble, write quorum, ack quorum, striping); Vanlightly, bookkeeper-tlaplus, "
            "BookKeeperProtocol.tla (quorum coverage: fencing over the ensemble, recovery reads over the "
            "entry's write set)",
        ),
        _safe(
            "bookkeeper-ensemble-change",
            _BK_CHANGES,
            "BookKeeper with spare bookies (an ensemble of 2, WQ=2, AQ=2): a writer whose add to a "
            "crashed bookie fails replaces it in a new fragment from its first unconfirmed entry, with a "
            "conditional update of the ledger metadata, and holds back its acknowledgements until the "
            "update succeeds; after recovery began the update fails and the writer stops",
            "Vanlightly, bookkeeper-tlaplus, BookKeeperProtocol.tla (ChangeEnsemble: the writer's "
            "metadata update requires its version to be current); apache/bookkeeper LedgerHandle "
            "(blockAddCompletions during an ensemble change); apache/bookkeeper issue 1591",
        ),
        _broken(
            "bookkeeper-unblocked-adds",
            replace(_BK_CHANGES, bookkeeper_block_add_completions=False),
            "BookKeeper whose writer acknowledges entries on its new ensemble before the ensemble change is "
            "in the ledger metadata: recovery has begun, the metadata update fails, and recovery and "
            "every reader look for the acknowledged entry on the old ensemble, which lacks it",
            "apache/bookkeeper issue 1591, 'Deferred failure handling can cause data loss' (the ensemble "
            "change stays local while the client acknowledges writes on the new ensemble; 'if the other "
            "client recovers the ledger, the data is lost'); Vanlightly, bookkeeper-tlaplus "
            "(ChangeEnsemble's version check)",
            {"ReadNeverTruncated", "HwmNeverTruncated", "ReadNeverLost", "CommittedOnQuorum", "AckedWriteNeverLost"},
        ),
    ]
})

# The single-flag mutants of raft, for teaching and for the suite's bug catalogue.
MUTANTS: tuple[str, ...] = tuple(
    name for name, p in PRESETS.items()
    if p.protocol.system == "raft" and len(p.protocol.differences(RAFT)) == 1
)


def presets_of(system: str) -> tuple[str, ...]:
    """The names of the presets of one system, in PRESETS order."""
    return tuple(name for name, p in PRESETS.items() if p.protocol.system == system)


def preset_of(protocol: Protocol) -> str | None:
    """The preset whose flags are exactly `protocol`'s, if any."""
    for name, preset in PRESETS.items():
        if preset.protocol == protocol:
            return name
    return None
