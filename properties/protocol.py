"""Protocol variants: the flags (docs/design.md) and the named presets.

This is the one place the flags are defined. The model and the implementation
both read a `Protocol` and must give each flag the same meaning.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Mapping

# Each flag and the values it may take, in the order `hwm protocols` prints them.
FLAG_VALUES: dict[str, tuple[Any, ...]] = {
    # computeHighwaterMark: seed sorts ascending and takes [N/2]; majority takes the
    # largest index held by floor(N/2)+1 servers.
    "quorum": ("seed-index", "majority"),
    # Advance the HWM whenever the quorum index grows (seed) or only when the entry
    # there carries the leader's own generation (Raft section 5.4.2).
    "commit": ("any-generation", "current-generation"),
    # Any live server with a quorum of voters, or only one whose log is at least as
    # up to date (last generation, then length) as every voter's.
    "election": ("any", "longest-log"),
    # Seed follower: truncate from the first entry whose generation differs, append
    # what is missing, answer with the last log index. Raft: check the entry before
    # the batch, answer with prev + len(entries).
    "append_check": ("generation-mismatch", "previous-entry"),
    # On restart: keep the log; truncate to the leader's HWM (seed text); truncate to
    # the server's own checkpointed HWM (Kafka before KIP-101).
    "restart": ("keep", "truncate-to-leader-hwm", "truncate-to-own-hwm"),
    # Whether a server's HWM survives a crash.
    "hwm_durable": (False, True),
    # A new leader appends an entry of its own generation (Raft/ZAB practice).
    "noop_on_election": (False, True),
    # Which system's replication rules the model follows (docs/systems.md).
    "system": ("raft", "kafka", "zab", "bookkeeper"),
    # ZAB: a follower acknowledges NEWLEADER before the entries the new leader synchronised
    # to it are on disk (ZOOKEEPER-3911; the fix logs them before the ACK).
    "zab_ack_before_persist": (False, True),
    # BookKeeper: recovery reads carry the fencing flag (apache/bookkeeper#2616, the fix of
    # issue #2614); false is the defect, where only the LAC reads fence.
    "bookkeeper_recovery_reads_fence": (False, True),
    # BookKeeper: the ledger's ensemble size E (ensembleSize: how many bookies a fragment uses),
    # write quorum WQ (writeQuorumSize: entry e goes to the WQ bookies from position e mod E of
    # the ensemble) and ack quorum AQ (ackQuorumSize: the writer confirms an entry once AQ of its
    # write set stored it). Defaults: every bookie of the configuration, the whole ensemble, a
    # majority of the write quorum. More bookies than E are spares an ensemble change may use.
    "ensemble_size": ("all", 1, 2, 3, 4, 5, 6, 7),
    "write_quorum": ("ensemble", 1, 2, 3, 4, 5, 6, 7),
    "ack_quorum": ("majority", 1, 2, 3, 4, 5, 6, 7),
    # BookKeeper: while an ensemble change's metadata update is in flight, the writer holds back
    # the add completions (LedgerHandle's blockAddCompletions), and a failed update (the ledger is
    # in recovery) stops it; false is apache/bookkeeper issue 1591, where the writer acknowledges
    # entries written to its new ensemble whatever the metadata store ends up holding.
    "bookkeeper_block_add_completions": (False, True),
    # Kafka: what a replica truncates when it becomes a follower, in Kafka's historical
    # steps: to its own high watermark (before KIP-101); to the end offset the leader
    # gives for the replica's last leader epoch (KIP-101); the same with the epoch in the
    # answer and the follower's own end offset for it (KIP-279); and KIP-320's fenced
    # requests, which carry the current leader epoch, with KAFKA-7164's truncation after
    # every leader epoch change. Last, KIP-320's first attempt, a design that never shipped
    # (its preset, kafka-kip320-first-try, adds late LeaderAndIsr requests): no truncation on becoming a follower; each
    # fetch carries the epoch of the follower's last entry, not the current leader epoch,
    # and the leader answers LOG_TRUNCATION when its own entry there differs.
    "follower_truncation": ("own-hwm", "leader-epoch", "leader-epoch-kip279", "fenced", "last-fetched-epoch"),
    # Kafka: unclean.leader.election.enable: with no live replica in the ISR, the
    # controller may elect any live replica.
    "unclean_election": (False, True),
    # Kafka: whether a LeaderAndIsr request a live replica missed may reach it later, one epoch
    # at a time, while that epoch's leader still leads it (a replica acts on any request newer
    # than its own epoch); false: a request arrives with the election or never.
    "late_leader_and_isr": (False, True),
    # Kafka: min.insync.replicas, with acks=all producers: a majority of the replicas (the
    # default), or a count from 1 up to the replica count (the model refuses a larger one). A
    # write is acknowledged once the ISR has at least that many members and all of them hold it;
    # a leader whose ISR is smaller refuses writes (NotEnoughReplicas).
    "min_insync_replicas": ("majority", 1, 2, 3, 4, 5, 6, 7),
    # Raft: check-quorum (Raft thesis section 6.2; etcd's CheckQuorum): a leader that cannot reach
    # a majority steps down, and a server that hears from a live leader refuses to vote (thesis
    # section 4.2.3). ZAB: the leader's loop (Leader.lead) shuts down when it has not heard from a
    # quorum within syncLimit, and the server goes back to LOOKING (no vote refusal: ZAB's election
    # has no leases). Matters only with partitions (max_partitions) or a majority crashed.
    "check_quorum": (False, True),
    # Raft: a leader that has committed an entry of its own generation serves reads from its lease,
    # without a round of heartbeats (thesis section 6.4.1; etcd's ReadOnlyLeaseBased). A lease
    # assumes bounded delays and clock drift: a server starts an election only when cut off from
    # every live leader. The catalogue adds LeaseReadNeverStale.
    "lease_reads": (False, True),
    # Kafka: when a replica's log reaches its disk. always: every append is fsynced before
    # anything else happens (log.flush.interval.messages=1), so a crash keeps the whole log.
    # never: Kafka's defaults (log.flush.interval.messages and log.flush.interval.ms unset): the
    # log stays in the page cache until a `flush` (the OS writing it back, a segment roll); a
    # crash is a power failure that keeps only the flushed prefix (the recovery point) and the
    # checkpointed high watermark, bounded by that prefix.
    "log_flush": ("always", "never"),
    # Kafka on a partitioned network (max_partitions): the controller fences a broker whose session
    # expired (it leaves the ISR unless it is the last member, and leadership moves away: on healing it
    # learns the new epoch's leader), and a leader changes the ISR only through the controller (a
    # conditional write, ZooKeeper's zkVersion or KRaft's AlterPartition), so a leader cut off from
    # it cannot shrink its ISR. false: a cut-off leader shrinks its own ISR and keeps acknowledging.
    "controller_fencing": (False, True),
}

FLAG_MEANINGS: dict[str, str] = {
    "quorum": "how the leader turns match indexes into the quorum index",
    "commit": "when the leader may advance its high-water mark",
    "election": "which servers may win an election",
    "append_check": "how a follower checks and applies an append",
    "restart": "what a server does to its log when it restarts",
    "hwm_durable": "whether the high-water mark survives a crash",
    "noop_on_election": "whether a new leader appends an entry of its own generation",
    "system": "which system's replication rules the model follows",
    "zab_ack_before_persist": "ZAB: a follower acknowledges NEWLEADER before persisting the synchronised entries",
    "bookkeeper_recovery_reads_fence": "BookKeeper: ledger recovery's entry reads fence the bookies they reach",
    "ensemble_size": "BookKeeper: how many bookies a ledger fragment's ensemble holds (E)",
    "write_quorum": "BookKeeper: how many bookies of the ensemble store each entry, striped round-robin (WQ)",
    "ack_quorum": "BookKeeper: how many bookies of an entry's write set confirm it before the writer does (AQ)",
    "bookkeeper_block_add_completions": "BookKeeper: the writer acknowledges nothing while its ensemble change is "
                                        "not in the ledger metadata",
    "follower_truncation": "what a Kafka replica truncates when it becomes a follower",
    "unclean_election": "whether Kafka may elect a replica outside the ISR when no ISR replica is alive",
    "late_leader_and_isr": "whether a Kafka replica may receive a missed epoch's LeaderAndIsr request late",
    "min_insync_replicas": "Kafka's min.insync.replicas: the smallest ISR that acknowledges acks=all writes",
    "check_quorum": "Raft and ZAB: a leader that cannot reach a majority steps down (check-quorum, syncLimit)",
    "lease_reads": "Raft: a leader serves reads from its lease, without a round of heartbeats",
    "log_flush": "whether a Kafka replica's log is on disk before it acts on it, or only after a flush",
    "controller_fencing": "Kafka: the controller fences a broker whose session expired, and ISR changes go through it",
}

# The systems a flag applies to. A flag not listed here is one of the raft family's rules,
# which raft and ZAB honour (ZAB's model extends the raft model); Kafka's and BookKeeper's
# models have rules of their own. A flag that does not apply to a system keeps its default.
RAFT_RULES = ("raft", "zab")
FLAG_SYSTEMS: dict[str, tuple[str, ...]] = {
    "system": ("raft", "kafka", "zab", "bookkeeper"),
    "zab_ack_before_persist": ("zab",),
    "bookkeeper_recovery_reads_fence": ("bookkeeper",),
    "ensemble_size": ("bookkeeper",),
    "write_quorum": ("bookkeeper",),
    "ack_quorum": ("bookkeeper",),
    "bookkeeper_block_add_completions": ("bookkeeper",),
    "follower_truncation": ("kafka",),
    "unclean_election": ("kafka",),
    "late_leader_and_isr": ("kafka",),
    "min_insync_replicas": ("kafka",),
    "check_quorum": ("raft", "zab"),
    "lease_reads": ("raft",),
    "log_flush": ("kafka",),
    "controller_fencing": ("kafka",),
}


def flags_of(system: str) -> tuple[str, ...]:
    """The flags that mean something for `system` (`system` itself excluded), in FLAG_VALUES order."""
    return tuple(flag for flag in FLAG_VALUES
                 if flag != "system" and system in FLAG_SYSTEMS.get(flag, RAFT_RULES))


class ProtocolError(ValueError):
    """A protocol name or flag that is not part of the vocabulary."""


@dataclass(frozen=True)
class Protocol:
    """One point in the space of protocol variants. Defaults are the safe `raft`."""

    quorum: str = "majority"
    commit: str = "current-generation"
    election: str = "longest-log"
    append_check: str = "previous-entry"
    restart: str = "keep"
    hwm_durable: bool = False
    noop_on_election: bool = False
    system: str = "raft"
    zab_ack_before_persist: bool = False
    bookkeeper_recovery_reads_fence: bool = True
    ensemble_size: str | int = "all"
    write_quorum: str | int = "ensemble"
    ack_quorum: str | int = "majority"
    bookkeeper_block_add_completions: bool = True
    follower_truncation: str = "fenced"
    unclean_election: bool = False
    late_leader_and_isr: bool = False
    min_insync_replicas: str | int = "majority"
    check_quorum: bool = False
    lease_reads: bool = False
    log_flush: str = "always"
    controller_fencing: bool = True

    def __post_init__(self) -> None:
        for flag in fields(self):
            value = getattr(self, flag.name)
            allowed = FLAG_VALUES[flag.name]
            # The type too: True == 1, but true is no replica count.
            if not any(value == a and type(value) is type(a) for a in allowed):
                raise ProtocolError(
                    f"flag {flag.name!r} cannot be {value!r}; expected one of "
                    + ", ".join(_show(v) for v in allowed)
                )
        applies = flags_of(self.system)
        for flag in fields(self):
            if flag.name not in applies and flag.name != "system" and getattr(self, flag.name) != flag.default:
                raise ProtocolError(
                    f"flag {flag.name!r} does not apply to system {self.system!r} (it belongs to "
                    f"{' and '.join(FLAG_SYSTEMS.get(flag.name, RAFT_RULES))}); "
                    f"flags of {self.system}: {', '.join(applies)}"
                )

    def flags(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def differences(self, other: "Protocol") -> dict[str, Any]:
        """The flags where `self` differs from `other`, with self's values."""
        return {k: v for k, v in self.flags().items() if other.flags()[k] != v}


def _show(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


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

# Bounds the tour (`hwm check` with no protocol, at the default bounds) lowers for a
# system's presets. Kafka's model has more per-replica state than raft's (ISR
# membership, the followed leader, the truncating state) and an election needs no
# quorum of voters, so at max_generation 4 it takes several times raft's time; every
# Kafka bug of the catalogue shows at max_generation 3.
TOUR_BOUNDS: dict[str, dict[str, Any]] = {"kafka": {"max_generation": 3}}

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

# Bounds the tour sets for one preset, over its system's TOUR_BOUNDS (at the default bounds only;
# other bounds are the user's).
# - The lease presets: a partition and a second entry, which at generation <= 2 and no crash cost
#   about a thousand states each.
# - kafka-without-controller-fencing and zab-step-down: a partition (below).
# - kafka-unflushed: its flushed lengths make its space at max_generation 3 four times kafka's
#   (118,753 states against 30,240); every property its `breaks` names shows with one leader epoch
#   already (880 states), and its saved traces show the rest (a re-elected last ISR replica, a
#   divergence) on two replicas.
PRESET_TOUR_BOUNDS: dict[str, dict[str, Any]] = {
    **{name: {"max_generation": 2, "max_log": 2, "max_crashes": 0, "max_partitions": 1}
       for name in ("raft-lease-reads", "raft-lease-reads-without-check-quorum")},
    "kafka-unflushed": {"max_generation": 1},
    # A partition, a second epoch and one entry show every property the fencing-less preset breaks
    # (4,917 states); the step-down preset at the same bounds shows its witness (1,075 states).
    **{name: {"max_generation": 2, "max_log": 1, "max_crashes": 0, "max_partitions": 1}
       for name in ("kafka-without-controller-fencing", "zab-step-down")},
}

# The single-flag mutants of raft, for teaching and for the suite's bug catalogue.
MUTANTS: tuple[str, ...] = tuple(
    name for name, p in PRESETS.items()
    if p.protocol.system == "raft" and len(p.protocol.differences(RAFT)) == 1
)


def presets_of(system: str) -> tuple[str, ...]:
    """The names of the presets of one system, in PRESETS order."""
    return tuple(name for name, p in PRESETS.items() if p.protocol.system == system)


def parse_flag_value(flag: str, text: Any) -> Any:
    """Turn a flag value from JSON or the command line into its Python value."""
    if flag not in FLAG_VALUES:
        raise ProtocolError(f"unknown flag {flag!r}; flags are " + ", ".join(FLAG_VALUES))
    allowed = FLAG_VALUES[flag]
    if isinstance(allowed[0], bool):
        if isinstance(text, bool):
            return text
        lowered = str(text).lower()
        if lowered in ("true", "yes", "1", "on"):
            return True
        if lowered in ("false", "no", "0", "off"):
            return False
        raise ProtocolError(f"flag {flag!r} takes true or false, not {text!r}")
    if isinstance(text, str) and text.isdigit() and int(text) in allowed:
        return int(text)  # a count from the command line (min_insync_replicas=1)
    if isinstance(text, bool) or not any(text == a and type(text) is type(a) for a in allowed):
        raise ProtocolError(
            f"flag {flag!r} cannot be {text!r}; expected one of " + ", ".join(map(_show, allowed))
        )
    return text


# Loads a variant named where a preset is (`file.py:Name`, `package.module:Name`, an installed entry
# point): `model.variant` registers it, since this module imports nothing of the project.
_LOADERS: list = []


def register_loader(load) -> None:
    """`load(spec) -> (name, protocol)` resolves the specs that are not presets (`model.variant.load`)."""
    if load not in _LOADERS:
        _LOADERS.append(load)


def resolve(spec: Any) -> tuple[str, Protocol]:
    """A protocol from a preset name or `{"preset": NAME, "flags": {...}}`, or a variant's spec
    (`file.py:Name`, `package.module:Name`, an installed variant's name: docs/variants.md).

    Returns a display name and the protocol. The display name is the preset's
    name, or `NAME+flag=value,...` for a modified preset.
    """
    if isinstance(spec, str) and spec not in PRESETS and _LOADERS:
        if ":" in spec:
            return _LOADERS[0](spec)
        try:
            return _LOADERS[0](spec)  # an installed variant's name
        except ProtocolError as e:
            if "no preset or installed variant" not in str(e):
                raise
    if isinstance(spec, str):
        if spec not in PRESETS:
            import difflib  # a typo is the common case: name the preset it most likely meant
            close = difflib.get_close_matches(spec, list(PRESETS), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ProtocolError(f"unknown protocol {spec!r}{hint} presets are " + ", ".join(PRESETS))
        return spec, PRESETS[spec].protocol
    if isinstance(spec, Mapping):
        unknown = set(spec) - {"preset", "flags"}
        if unknown:
            raise ProtocolError(f"protocol object has unknown keys {sorted(unknown)}")
        base_name = spec.get("preset", "raft")
        _, base = resolve(base_name)
        flags = spec.get("flags", {})
        if not isinstance(flags, Mapping):
            raise ProtocolError("protocol 'flags' must be an object of flag: value")
        changes = {k: parse_flag_value(k, v) for k, v in flags.items()}
        protocol = replace(base, **changes)
        if not changes:
            return base_name, protocol
        shown = ",".join(f"{k}={_show(v)}" for k, v in sorted(changes.items()))
        return f"{base_name}+{shown}", protocol
    raise ProtocolError(f"a protocol is a preset name or an object, not {type(spec).__name__}")


def preset_of(protocol: Protocol) -> str | None:
    """The preset whose flags are exactly `protocol`'s, if any."""
    for name, preset in PRESETS.items():
        if preset.protocol == protocol:
            return name
    return None


# Systems the real replicated log (impl/) does not implement: their presets run on the model only.
MODEL_ONLY_SYSTEMS: tuple[str, ...] = ()
# Systems the implementation runs in the simulated cluster only (hwm replay --on impl, the
# conformance machine), not on the TCP runtime (hwm node, hwm cluster): none today.
SIMULATION_ONLY_SYSTEMS: tuple[str, ...] = ()


def model_only(protocol: Protocol, hint: str = "use the model (--on model)") -> str | None:
    """Why `protocol` cannot run on the implementation, or None when it can; `hint` ends the reason
    (replay's --on model by default; a command without --on says what to run instead)."""
    if protocol.system in MODEL_ONLY_SYSTEMS:
        implemented = " and ".join(s for s in FLAG_VALUES["system"] if s not in MODEL_ONLY_SYSTEMS)
        return (f"the {protocol.system} presets are model-only: the implementation (impl/) runs {implemented} "
                f"and has no {protocol.system} replica; {hint}")
    if protocol.system == "kafka":
        reasons = []
        if protocol.follower_truncation == "last-fetched-epoch":
            reasons.append("follower_truncation=last-fetched-epoch (KIP-320's first attempt) is model-only: the "
                           "implementation's fetch carries no last fetched epoch")
        if protocol.min_insync_replicas != "majority":
            reasons.append(f"min_insync_replicas={protocol.min_insync_replicas} is model-only: the implementation's "
                           "leader counts a majority and has no NotEnoughReplicas refusal of a produce")
        if protocol.log_flush != "always":
            reasons.append(f"log_flush={protocol.log_flush} is model-only: the implementation's write-ahead log "
                           "fsyncs every append before it answers")
        if protocol.late_leader_and_isr:
            reasons.append("late_leader_and_isr=true is model-only: the implementation's controller delivers a "
                           "LeaderAndIsr request with its election or never")
        if not protocol.controller_fencing:
            reasons.append("controller_fencing=false is model-only: the implementation's controller fences and "
                           "the simulated cluster takes no partition step")
        if reasons:
            return "; ".join(reasons) + f"; {hint}"
    variant = getattr(type(protocol), "variant", None)  # a variant's protocol (model.variant) carries its rules
    if variant is not None:
        from hwm.properties.rules import overridden  # not at load: properties.rules imports this module

        if "grants_vote" in overridden(variant):
            return (f"{variant.__name__}.grants_vote is model-only: the implementation's vote request carries the "
                    f"candidate's last index and generation, not its log; {hint}")
    leases = [flag for flag in ("check_quorum", "lease_reads") if getattr(protocol, flag)]
    if leases:
        return (f"{' and '.join(f'{flag}=true' for flag in leases)} is model-only: the implementation's leader "
                f"neither counts the followers it hears from nor serves reads from a lease; {hint}")
    return None


def without_runtime(protocol: Protocol) -> str | None:
    """Why `protocol` cannot run on the TCP runtime (hwm node, hwm cluster), or None when it can."""
    # hwm node and hwm cluster have no --on: the model is what `hwm check` explores.
    reason = model_only(protocol, hint="check it on the model (hwm check --protocol ...)")
    if reason is None and protocol.system in SIMULATION_ONLY_SYSTEMS:
        reason = (f"the {protocol.system} presets are model-only on the TCP runtime: its {protocol.system} replica "
                  f"runs in the simulated cluster (hwm replay --on impl, the conformance tests), and hwm node "
                  f"and hwm cluster run the raft family's replicas")
    return reason
