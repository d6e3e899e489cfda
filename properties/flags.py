"""The protocol flags (docs/design.md): each flag's values, meaning and systems, and `Protocol`, one
point in their space. Defaults are the safe `raft`.

This is the one place the flags are defined. The model and the implementation
both read a `Protocol` and must give each flag the same meaning.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

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
