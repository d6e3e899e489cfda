"""Rebuild the catalogue: the checker's shortest counterexample per broken preset, explained.

    python -m counterexamples.build        # rewrites counterexamples/*.json

The traces come from breadth-first search, so they are the shortest at their
bounds; the titles and explanations are written here, in the protocol's words.
`tests/properties/test_catalogue.py` checks that every file still equals what the checker finds.
"""

from __future__ import annotations

from pathlib import Path

from hwm.checker.run import CheckRequest, run
from hwm.checker.traces import trace_for
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.protocol import PRESETS

HERE = Path(__file__).parent

# preset -> (property, config overrides, title, explanation)
CATALOGUE = {
    "seed": (
        "ReadNeverTruncated", {},
        "The seed's rejoin rule truncates a committed entry to the new leader's lagging HWM",
        "S1 wins generation 1, writes entry 1, replicates it to S2 and, with 2 of 3 servers holding it, raises "
        "its high-water mark to 1. S2 then wins generation 2 with S1's vote. S2's own HWM is still 0: a "
        "follower learns the HWM only from the next append, and S2 was elected before one came. A client reads "
        "entry 1 from S1, now a follower whose HWM is 1. S1 crashes and, following the seed, 'finds the new "
        "leader. It then explicitly asks for the current high-water mark, truncates its log to high-water "
        "mark' - 0 - and removes the entry a client has read. The entry now lives on S2 alone, one server of "
        "three: one more failure and it is gone. Raft truncates only an entry that "
        "conflicts with one the leader sends (Figure 2, AppendEntries rule 3); Kafka replaced HWM truncation "
        "with leader-epoch truncation (KIP-101).",
    ),
    "kip101": (
        "ReadNeverTruncated", {},
        "Kafka before KIP-101: a follower truncates to its own checkpointed HWM, which lags the leader's",
        "S1 wins generation 1, writes entry 1, replicates it to S2 and commits it (HWM 1); a client reads it "
        "from S1. S2 has stored the entry "
        "but its checkpointed high-water mark is still 0, because followers learn the HWM on the next fetch. "
        "S2 crashes and, as Kafka did before KIP-101, truncates its log to its own high-water mark on restart: "
        "the committed, read entry is gone from S2. If S1 fails now, S2 and S3 can elect a leader that never "
        "had it (KIP-101 scenario 1, 'high watermark truncation followed by immediate leader election'). "
        "KIP-101's fix: truncate by the leader epoch, asking the leader where the follower's epoch ends.",
    ),
    "raft-seed-quorum": (
        "CommittedOnQuorum", {"servers": 2, "max_generation": 1, "max_crashes": 0},
        "computeHighwaterMark's [N/2] counts a minority as a quorum when N is even",
        "With two servers, S1 wins generation 1 with both votes and S1 writes entry 1. The seed computes the high-water mark as "
        "'serverLogIndexes.sort(Long::compareTo); return serverLogIndexes.get(noOfServers / 2)': the indexes "
        "[0, 1] sorted give position 2/2 = 1, the value 1, so S1 counts entry 1 as committed although only S1 "
        "of 2 servers stores it. For odd N the [N/2]-th smallest index is held by (N+1)/2 servers, a majority; "
        "for even N it is held by N/2, one short (hwm prove shows this for every N up to 15). etcd's "
        "CommittedIndex takes position n - (n/2 + 1) of the ascending sort instead.",
    ),
    "raft-any-generation-commit": (
        "ReadNeverTruncated", {},
        "Raft's Figure 8: an entry of an older generation counted as committed, read, then overwritten",
        "S1 wins generation 1 and S2 wins generation 2 with S3's vote; S1 writes 1@g1 and S2 writes 1@g2, and "
        "neither reaches anyone: S1 replicates to S2, meets the higher generation and steps down. S1 then wins "
        "generation 3 with S3's vote and replicates its old entry 1@g1 to S3: now 2 of 3 servers hold it, and "
        "under the seed's rule 'if (logIndexAtQuorum > currentHighWaterMark)' S1 raises its HWM to 1; a client "
        "reads 1@g1 from S1. S2, still leading generation 2, replicates to S1, learns of generation 3 and steps "
        "down. Its last entry has generation 2, so its log is more up to date than S1's: S2 wins generation 4 "
        "with S1's vote and replicates 1@g2 to S1, which truncates the read entry 1@g1. Only S3 still holds "
        "it, one server of three. Raft "
        "5.4.2: 'Raft never commits log entries from previous terms by counting replicas'; only an entry of "
        "the leader's own generation is committed that way, and older ones with it.",
    ),
    "raft-any-election": (
        "ReadNeverTruncated", {},
        "A server with a stale log wins an election and overwrites a committed entry",
        "S1 wins generation 1, writes entry 1 and commits it with S2. S3, whose log is empty, asks S1 for a "
        "vote and S3 wins generation 2: without Raft's election restriction nothing stops a voter from "
        "electing a candidate that lacks committed entries. A client reads entry 1 from S1, now a follower "
        "whose HWM is 1. S3 writes its own entry 1@g2 and S3 replicates it to S1, which truncates the read "
        "entry 1@g1 as a conflict: only S2 still holds it, one server of three. Raft 5.4.1: 'the voter denies its vote if its own log is "
        "more up-to-date than that of the candidate'; two majorities intersect, so every winner then holds "
        "every committed entry.",
    ),
    "raft-generation-mismatch": (
        "ReadNeverTruncated", {},
        "The seed's follower acknowledges entries it never compared with the leader's",
        "S1 wins generation 1 and S2 wins generation 2 with S3's vote; S1, still leading generation 1, writes "
        "1@g1. S2, whose log is empty, replicates to S1. The seed's follower appends what is missing "
        "('filter(e -> !wal.exists(e))'), has nothing to compare, and answers with 'wal.getLastLogIndex()' = 1, "
        "so S2 records that S1 matches it up to index 1 - but S1's entry 1 is 1@g1, not S2's. S1 then wins "
        "generation 3 with S3's vote; nobody tells S2, which writes 1@g2: counting itself and S1, the quorum "
        "index is 1 and the entry has S2's own generation, so S2 commits it and a client reads 1@g2 from S2. "
        "S1 replicates its 1@g1 to S2, which truncates the read entry: no server holds 1@g2 any more. Raft's "
        "follower "
        "first checks the entry before the batch (prevLogIndex/prevLogTerm) and answers prevLogIndex + "
        "len(entries): a match index then only ever covers entries the follower shares with the leader.",
    ),
    "raft-truncate-to-leader-hwm": (
        "ReadNeverTruncated", {},
        "Rejoining by truncating to the leader's HWM, as the seed says, removes a committed entry",
        "The protocol is Raft except for the seed's rejoin rule. S1 wins generation 1, writes entry 1 and "
        "commits it with S2 (HWM 1), and S2 wins generation 2 before any append has told it the HWM moved. A "
        "client reads entry 1 from S1. S1 "
        "crashes; on restart it 'explicitly asks for the current high-water mark, truncates its log to "
        "high-water mark': the leader S2 answers 0 and S1 drops the entry a client has read. The leader's HWM "
        "is a lower bound of what is committed, never an upper one; only entries that conflict with the "
        "leader's log may be removed.",
    ),
    "raft-truncate-to-own-hwm": (
        "ReadNeverTruncated", {},
        "Truncating to a volatile HWM on restart removes what the server itself committed",
        "S1 wins generation 1, writes entry 1 and commits it with S2 (HWM 1); a client reads it from S1. S1 "
        "crashes. Its high-water mark was "
        "not on disk (Raft's commitIndex is volatile state), so it restarts with HWM 0 and, truncating to its "
        "own HWM, removes the entry it had itself committed. The log on disk is the durable truth; the HWM is "
        "only what the server has learned of it. Kafka before KIP-101 did the same with a checkpointed HWM "
        "(see kip101.json): durability narrows the window but does not close it.",
    ),
    "zab-ack-before-persist": (
        "AckedWriteNeverLost", {},
        "ZOOKEEPER-3911: a server acknowledges NEWLEADER before logging what the leader sent it",
        "S1 wins epoch 1 and S2 acknowledges its NEWLEADER: S1 is established and writes entry 1@g1, which "
        "no follower has yet. S3 joins and synchronises with S1: the DIFF brings 1@g1 into S3's memory "
        "(Learner.syncWithLeader keeps such proposals in packetsNotCommitted) and S3 acknowledges NEWLEADER "
        "before logging them - the defect. S3, now in epoch 1 with 1@g1 in its history, wins epoch 2 with S1's "
        "vote (fast leader election compares the last zxid, and S3's is as recent as S1's). As leader it "
        "synchronises S1, S1 acknowledges NEWLEADER, and with a quorum of 2 the whole history of epoch 2 is "
        "committed: the client that wrote 1@g1 is told it is committed. S3 crashes before its log is flushed "
        "and comes back without 1@g1: the acknowledged entry is on S1 alone, and S2 and S3 can now elect a "
        "leader that never had it. The fix (apache/zookeeper pull request 1445) logs the proposals before the "
        "ACK of NEWLEADER; ZOOKEEPER-4646 showed that logging asynchronously there still loses data, and the "
        "rule this model checks as safe is the one the zab preset uses: persisted, then acknowledged.",
    ),
    "bookkeeper-recovery-without-fencing": (
        "AckedWriteNeverLost", {},
        "BookKeeper issue 2614: recovery reads that do not fence let an acknowledged entry fall outside the closed ledger",
        "Three bookies, write quorum 3, ack quorum 2. The writer (S4) adds entry 1 and S1 stores it. A second "
        "client (S5) suspects the writer and recovers the ledger: its fencing LAC reads reach S1 and S2 (the "
        "one to S3 is lost), which is E - AQ + 1 = 2 answers, so recovery reads start. S2 and S3 both answer "
        "that they have no entry 1: WQ - AQ + 1 = 2 negative answers, so entry 1 cannot have reached an ack "
        "quorum and recovery closes the ledger empty. But the recovery read did not fence S3, so S3 still "
        "accepts the writer's add of entry 1: with S1's earlier answer that is an ack quorum, and the writer "
        "acknowledges entry 1 to its client. The closed ledger ends before it: the acknowledged entry is lost "
        "(BookKeeper's promise, from its Fencing page: if an entry is added and the client receives a "
        "confirmation, the last entry of the closed ledger is at least that entry). Found with a TLA+ "
        "specification (apache/bookkeeper issue 2614); the fix (pull request 2616) sets the fencing flag on "
        "recovery reads, so every bookie that answers 'no such entry' is fenced and refuses the late add.",
    ),
    "bookkeeper-unblocked-adds": (
        "AckedWriteNeverLost", {},
        "BookKeeper issue 1591: a writer acknowledges an entry on its new ensemble, which the ledger metadata never names",
        "Three bookies, an ensemble of two (S1, S2; S3 is a spare), write quorum 2, ack quorum 2. The writer (S4) "
        "adds entry 1 and S1 stores it. A second client (S5) starts recovering the ledger: it marks the ledger "
        "metadata in recovery, which changes the metadata's version, and its fencing LAC read fences S1 (E - AQ + 1 "
        "= 1 answer is enough: no ack quorum of unfenced bookies is left). S2 crashes, so the writer's add of entry 1 "
        "to S2 fails, and the writer changes its ensemble: S3 replaces S2 from entry 1, its first unconfirmed entry. "
        "The writer's update of the ledger metadata is conditional on the version it last wrote, which recovery has "
        "changed, so it fails; but this writer does not hold back its add completions while the update is in flight "
        "(apache/bookkeeper issue 1591, 'Deferred failure handling can cause data loss'). It sends entry 1 to S3, "
        "which is not fenced (recovery fences the ensemble the metadata names), and with S1's and S3's answers "
        "entry 1 has its ack quorum: the writer acknowledges it to its client. The ledger metadata still names "
        "S1 and S2 for entry 1, and only S1 stores it, one bookie short of the ack quorum. When S2 comes back it "
        "tells recovery it has no entry 1, which is WQ - AQ + 1 = 1 answer: recovery closes the ledger empty, and "
        "the acknowledged entry is gone ('TOAB violation', in the issue's words). The fix blocks add completions "
        "until the ensemble change is in the metadata (LedgerHandle's blockAddCompletions); its failure tells the "
        "writer the ledger is in recovery, and it stops, as the TLA+ specification's ChangeEnsemble requires "
        "('c.meta_version = meta_version'). Under the safe preset bookkeeper-ensemble-change the writer stops at "
        "the ensemble change and its send to S3 is refused.",
    ),
    "raft-lease-reads-without-check-quorum": (
        "LeaseReadNeverStale", {"max_generation": 2, "max_log": 2, "max_crashes": 0, "max_partitions": 1},
        "Without check-quorum a leader partitioned away keeps serving reads from its lease: a stale read",
        "S1 wins generation 1, writes entry 1 and replicates it to S2: entry 1, of S1's own generation, is "
        "committed (HWM 1), so S1 may now serve reads from its lease, answering from its own HWM without a "
        "round of heartbeats (Raft thesis section 6.4.1). The network then cuts S1 off from S2 and S3. S2 and "
        "S3 no longer hear from any leader, their election timers fire, and S2 wins generation 2 with S3's "
        "vote. S2 writes entry 2 and replicates it to S3: committed on 2 of 3 servers, and a client reads it "
        "from S2. S1 never learnt of generation 2: no append reaches it, and without check-quorum nothing "
        "makes it step down, so it still leads generation 1 and still serves lease reads up to its HWM 1. A "
        "client that asks S1 now does not see entry 2, which another client has already read: the read is "
        "stale, and the history is not linearizable. With check-quorum (the safe preset `raft-lease-reads`) "
        "S1 steps down in the step that cuts it off, as a leader does once an election timeout passes "
        "without heartbeat replies from a majority (thesis section 6.2), before S2 and S3 can time out; the "
        "same steps then hold. etcd refuses the unsafe combination outright: 'CheckQuorum must be enabled "
        "when ReadOnlyOption is ReadOnlyLeaseBased'.",
    ),
}

# Where each entry's bug was published.
SOURCES = {
    "raft-lease-reads-without-check-quorum": "Diego Ongaro, Consensus: Bridging Theory and Practice (Stanford "
                                             "PhD thesis, 2014), sections 6.2 and 6.4.1; etcd-io/raft raft.go, "
                                             "Config.validate (ReadOnlyLeaseBased requires CheckQuorum)",
    "zab-ack-before-persist": "https://issues.apache.org/jira/browse/ZOOKEEPER-3911 (fix: "
                              "https://github.com/apache/zookeeper/pull/1445; same root cause: ZOOKEEPER-4646)",
    "bookkeeper-recovery-without-fencing": "https://github.com/apache/bookkeeper/issues/2614 (fix: "
                                           "https://github.com/apache/bookkeeper/pull/2616)",
    "bookkeeper-unblocked-adds": "https://github.com/apache/bookkeeper/issues/1591; Jack Vanlightly, "
                                 "https://github.com/Vanlightly/bookkeeper-tlaplus BookKeeperProtocol.tla "
                                 "(ChangeEnsemble: the writer's metadata update requires its version to be current)",
}


# Kafka's bugs: entry -> (preset, property, config overrides, title, explanation, source).
# An entry is named after its preset, or after its preset and the bug when the preset
# has two (KIP-101's two scenarios both come from truncating to the own HW).
KAFKA = {
    "kafka-truncate-to-hwm": (
        "kafka-truncate-to-hwm", "ReadNeverLost", {"servers": 2, "max_generation": 2},
        "Kafka before KIP-101: a restarted follower truncates to its own lagging high watermark, then is elected",
        "KIP-101 scenario 1, 'high watermark truncation followed by immediate leader election'. S1 becomes leader "
        "of epoch 1 with S2 in its ISR, writes entry 1, and S2 fetches it; S1's high watermark, the minimum log "
        "end offset over the ISR {S1,S2}, becomes 1, and a client reads entry 1 from S1. S2's own high watermark "
        "is still 0: a follower learns the leader's high watermark on its next fetch. S2 crashes and restarts "
        "and, as Kafka did before KIP-101, truncates its log to its own high watermark, 0: entry 1 is gone from "
        "S2, which stays in the ISR. The controller then elects S2 leader of epoch 2 (the request does not reach "
        "S1; in the KIP, S1 has failed). S2 leads without entry 1, which a client has read: a committed message "
        "is lost. KIP-101's fix: a new follower truncates only where the leader says its last leader epoch ends "
        "(OffsetsForLeaderEpoch), never to its own high watermark. Under the safe preset `kafka` the restart "
        "keeps entry 1 and S2 is elected holding it: the trace holds.",
        "KIP-101: Alter Replication Protocol to use Leader Epoch rather than High Watermark for Truncation, "
        "Scenario 1 (KAFKA-1211)"),
    "kafka-truncate-to-hwm-divergence": (
        "kafka-truncate-to-hwm", "LogMatching", {"servers": 2, "max_generation": 2, "max_log": 3},
        "Kafka before KIP-101: truncating to the high watermark leaves two replicas with diverged logs",
        "KIP-101 scenario 2, 'replica divergence'. S1 becomes leader of epoch 1 with S2 in its ISR, writes entry 1 "
        "and S2 fetches it; S1's high watermark becomes 1, S2's is still 0. S2 crashes and restarts and, "
        "truncating to its own high watermark, drops entry 1. The controller elects S2, still in the ISR, leader "
        "of epoch 2 with an empty log; S1 becomes its follower and truncates to its own high watermark, 1, so it "
        "keeps 1@g1. S2 writes entries 1 and 2 in epoch 2. S1 fetches from its log end offset, index 2, and "
        "appends 2@g2 after its 1@g1, because a fetch checks nothing before the fetch offset: S1 holds 1@g1, 2@g2 "
        "and S2 1@g2, 2@g2, the same entry at index 2 over different entries at index 1, for ever. KIP-101's fix: S1 "
        "asks where epoch 1 ends on S2 (index 1, before S2's epoch 2 starts) and truncates there. Under the safe "
        "preset `kafka` the restart keeps entry 1, S1 truncates nothing it shares with S2, and the trace holds.",
        "KIP-101, Scenario 2: Replica Divergence"),
    "kafka-kip101": (
        "kafka-kip101", "LogMatching", {"servers": 2, "max_generation": 3, "max_log": 2, "max_crashes": 0},
        "KIP-101's OffsetsForLeaderEpoch answer lies past the divergence after two fast leader changes",
        "KIP-279's divergence after fast leader fail-over. S1 becomes leader of epoch 1 (the request does not "
        "reach S2) and writes entry 1 in epoch 1; nobody fetches it. The controller elects S2 leader of epoch 2, "
        "with S1 as its follower; S2 writes its own entry 1, in epoch 2. Before any fetch the controller elects "
        "S1 again, in epoch 3, with S2 as its follower, and S1 writes entry 2 in epoch 3: S1 holds 1@g1, 2@g3 and "
        "S2 1@g2. S2 fetches from S1 and first asks, with KIP-101's OffsetsForLeaderEpoch, where its last epoch, 2, "
        "ends. S1 never had epoch 2 and answers with the start of its next epoch, 3: index 1, past where the logs "
        "differ. S2 truncates nothing, fetches entry 2, and now holds 1@g2, 2@g3 against S1's 1@g1, 2@g3: the "
        "logs diverged. KIP-279's fix: the leader also names the epoch it answered for (the largest it has at or "
        "below 2: epoch 1) and the follower truncates to the smaller of the two end offsets for that epoch, its "
        "own being 0. Under the safe preset `kafka` S2 truncates to 0, fetches both entries, and the trace holds.",
        "KIP-279: Fix log divergence between leader and follower after fast leader fail over (KAFKA-6361)"),
    "kafka-kip279": (
        "kafka-kip279", "ReadsAgree", {"max_generation": 3, "max_crashes": 0},
        "A replica that missed two leader epochs fetches from its old leader unfenced and rejoins the ISR diverged",
        "S1 becomes leader of epoch 1 with S2 as its follower, writes entry 1, and S2 fetches it. The controller "
        "elects S3, in the ISR with an empty log, leader of epoch 2; S1 becomes its follower but S2 misses the "
        "request and still believes S1 leads epoch 1. S3 writes its own entry 1 and removes S2, which does not "
        "fetch from it, from the ISR. S1 fetches from S3: S3 has no epoch 1, so S1 truncates to its high "
        "watermark, 0, and takes 1@g2; S3's high watermark over the ISR {S1,S3} becomes 1. The controller elects "
        "S1 leader of epoch 3 (S2 misses this request too) and a client reads 1@g2 from S3. S1 becomes S3's "
        "leader and S3 fetches from it. Then S2, still a follower of S1 in epoch 1, fetches from S1: the fetch "
        "carries no epoch, S2's log end equals S1's, so nothing is truncated or sent, S2 learns high watermark 1 "
        "and even rejoins the ISR. A client reads 1@g1 from S2: two reads of index 1 disagree. The two fixes of "
        "Kafka 2.1 each close it: KIP-320 puts the current leader epoch into fetches, so S1 answers "
        "FENCED_LEADER_EPOCH to S2's epoch-1 fetch (KIP-320's motivation: a replica with stale metadata that "
        "'was still able to make progress and even rejoin the ISR'); KAFKA-7164 makes a follower truncate after "
        "every epoch change it learns of, where makeFollower used to return early when the leader was unchanged. "
        "Under the safe preset `kafka` S2's fetch is fenced: the trace is blocked at that step.",
        "KIP-320: Allow fetchers to detect and handle log truncation ('Inadequate Replica Fencing', KAFKA-6880); "
        "KAFKA-7164: Follower should truncate after every leader epoch change"),
    "kafka-unclean-election": (
        "kafka-unclean-election", "ReadNeverLost", {"max_generation": 3},
        "Unclean leader election elects a replica outside the ISR and loses a committed message",
        "S1 becomes leader of epoch 1 with S2 as its follower, writes entry 1, removes S3, which lags, from the "
        "ISR, and S2 fetches entry 1: the ISR {S1,S2} holds it and S1's high watermark becomes 1. The controller "
        "elects S2 leader of epoch 2 (S1 misses the request and still serves as a leader of epoch 1); a client "
        "reads entry 1 from S1. S2 removes S1, which does not fetch from it, from the ISR, and crashes: no "
        "replica of the ISR {S2} is alive. With unclean.leader.election.enable the controller elects S3, "
        "outside the ISR and with an empty log, leader of epoch 3: entry 1, committed and read, is lost, and "
        "every replica that rejoins truncates to S3's log. Kafka documents the trade: availability over "
        "durability. Under the safe preset `kafka` the partition stays offline instead: the election of S3 is "
        "blocked (unclean leader election is disabled).",
        "Kafka documentation, Replication: 'Unclean leader election: What if they all die?'; KIP-101 appendix; "
        "KIP-320 (consumers detect the truncation)"),
    "kafka-min-insync-1": (
        "kafka-min-insync-1", "AckedWriteNeverLost", {"max_generation": 1, "max_crashes": 0},
        "With min.insync.replicas=1 the leader acknowledges an acks=all write that only it stores",
        "S1 becomes leader of epoch 1 and writes entry 1. S2 and S3 have not fetched it, so S1 removes both, "
        "which lag its log end offset, from the ISR: the ISR is {S1} alone. With min.insync.replicas=1 an ISR "
        "of one is enough, so S1's high watermark, the minimum log end offset over the ISR, becomes 1 and the "
        "acks=all producer of entry 1 is acknowledged: the write is on 1 of 3 replicas, not on a quorum. Kafka "
        "keeps it while S1's disk lives; one more fault loses it: S1's disk, an unclean leader election after "
        "S1 fails (`hwm check --protocol kafka-min-insync-1,unclean_election=true --max-generation 3` finds the "
        "acknowledged write missing from a new leader, AcknowledgedWriteKept, in 6 steps), or, at the tour's "
        "bounds, a deposed leader's follower truncating the only other copy of a read entry (ReadNeverTruncated, "
        "9 steps). Under the safe preset `kafka` (min.insync.replicas a "
        "majority) the trace holds: S1's HW waits while its ISR is smaller than 2 and nothing is acknowledged; "
        "with `kafka,min_insync_replicas=2` the same, and a leader whose ISR is already {S1} refuses the "
        "write (NOT_ENOUGH_REPLICAS).",
        "Kafka documentation, topic configuration min.insync.replicas: 'When a producer sets acks to \"all\" "
        "(or \"-1\"), min.insync.replicas specifies the minimum number of replicas that must acknowledge a "
        "write for the write to be considered successful ... A typical scenario would be to create a topic "
        "with a replication factor of 3, set min.insync.replicas to 2, and produce with acks of \"all\"'; "
        "KIP-966: Eligible Leader Replicas (an ISR of one, the 'last replica standing')"),
    "kafka-unflushed": (
        "kafka-unflushed", "AckedWriteNeverLost", {"max_generation": 1},
        "With Kafka's default flush settings one power failure leaves an acknowledged write on one replica",
        "S1 becomes leader of epoch 1; the LeaderAndIsr request reaches S2, not S3. S1 writes entry 1. S3 has "
        "not fetched it, so S1 removes it from the ISR, which is now {S1,S2}: two of three replicas, as many as "
        "min.insync.replicas asks for. S2 fetches entry 1, S1's high watermark, the minimum log end offset over "
        "the ISR, becomes 1 and the acks=all producer is acknowledged. With Kafka's default flush settings "
        "(log.flush.interval.messages and log.flush.interval.ms unset) neither S1 nor S2 has written the entry "
        "to disk: it is in their page caches. S1 loses power and comes back with the flushed prefix of its log, "
        "which is empty; its checkpointed high watermark, 1, is bounded by that log. The acknowledged write is "
        "now on S2 alone, 1 of 3 replicas, and only in memory: one more power failure loses it, and the "
        "controller may then elect a leader without it. Kafka relies on replication instead of fsync, which "
        "holds while a minority loses power at once; KIP-966 lists the unclean shutdowns that break it. Under "
        "the safe preset `kafka` (log_flush=always: every append is on disk first) the crash keeps S1's log and "
        "the trace holds.",
        "Kafka documentation, broker configuration log.flush.interval.messages and log.flush.interval.ms, and "
        "Design, Persistence ('All data is immediately written to a persistent log on the filesystem without "
        "necessarily flushing to disk. In effect this just means that it is transferred into the kernel's "
        "pagecache'); KIP-966: Eligible Leader Replicas ('A partition replica can experience "
        "local data loss in unclean shutdown scenarios where unflushed data in the OS page cache is lost')"),
    "kafka-unflushed-last-replica-standing": (
        "kafka-unflushed", "AcknowledgedWriteKept", {"servers": 2, "max_generation": 3},
        "KIP-966's last replica standing: the only ISR replica loses power, loses an acknowledged write and is re-elected",
        "S1 becomes leader of epoch 1 with S2 in its ISR and writes entry 1; S2 fetches it, S1's high watermark "
        "over the ISR {S1,S2} becomes 1 and the acks=all producer is acknowledged. The controller elects S2 "
        "leader of epoch 2 (the request does not reach S1), and S2 removes S1, which has not fetched from it, "
        "from the ISR: S2 is the last replica standing. S2 loses power before its page cache reached the disk "
        "and comes back with an empty log. The controller keeps it in the ISR, which never becomes empty, and "
        "elects it again, in epoch 3: the new leader lacks the acknowledged entry 1, and S1, following it, "
        "would truncate the last copy. KIP-966: 'When the last replica in the ISR experiences an unclean "
        "shutdown and loses committed data, it will be reelected leader after starting up again, causing "
        "rejoining followers to truncate their logs'; its fix (Eligible Leader Replicas and unclean recovery) "
        "is not modelled. A replica that loses power while others remain in the ISR is removed from it, so "
        "only the last one comes back as leader. Under the safe preset `kafka` S2 keeps entry 1 across the "
        "crash and the trace holds.",
        "KIP-966: Eligible Leader Replicas, Motivation (the 'last replica standing' state combined with a data "
        "loss unclean shutdown)"),
    "kafka-unflushed-divergence": (
        "kafka-unflushed", "LogMatching", {"servers": 2, "max_generation": 2, "max_log": 2},
        "After a power failure the re-elected leader rewrites offsets that its follower keeps: the logs diverge",
        "KIP-101's scenario 2, a divergence after a power failure, under the leader-epoch rules. S1 becomes leader "
        "of epoch 1 with S2 as its follower, writes entry 1, and S2 fetches it; S1 writes entry 2, which S2 has "
        "not fetched, so S1 removes S2 from the ISR. S1 loses power with both entries in its page cache and "
        "comes back with an empty log; the last ISR replica, it stays in the ISR and the controller elects it "
        "again, in epoch 2. S2's leader is unchanged and it missed no epoch, so Partition.makeFollower returns "
        "early (the condition KAFKA-7164 left: same leader, epoch the same or the next) and S2 does not truncate. "
        "S1 writes entries 1 and 2 in epoch 2. S2 fetches from its log end offset, index 2, and appends 2@g2 "
        "after its own 1@g1, because a fetch checks nothing before the fetch offset: S1 holds 1@g2, 2@g2 and S2 "
        "1@g1, 2@g2, the same entry at index 2 over different entries at index 1. From Kafka 2.7 a fetch carries "
        "the epoch of the follower's last entry and the leader answers with the diverging epoch (KAFKA-10554), "
        "which would truncate S2 here; the model's `fenced` rule has no such check. Under the safe preset "
        "`kafka` S1 keeps both entries across the crash and nothing is rewritten: the implementation replays "
        "the trace and it holds, and on the model S1's next write stops at the trace's max_log.",
        "KIP-101, Scenario 2: Replica Divergence on Restart after Multiple Hard Failures; KAFKA-7164 (Partition."
        "makeFollower's early return); KAFKA-10554: Perform follower truncation based on diverging epochs in "
        "Fetch response (apache/kafka pull request 9382)"),
    "kafka-kip320-first-try": (
        "kafka-kip320-first-try", "AckedWriteNeverLost", {"max_generation": 3, "max_crashes": 0},
        "After fast leader changes the leader counts a follower of an older epoch; a late LeaderAndIsr request makes it truncate the acknowledged entry",
        "S1 becomes leader of epoch 1 with S2 as its follower; S3 misses the request. The controller elects S3 leader of epoch 2 with S1 as its follower; S2 misses this request and still follows S1 in epoch 1. The controller elects S1 leader of epoch 3 (a fast leader change: S2 and S3 both miss it, and S3 still presumes it leads epoch 2). S1 writes entry 1 in epoch 3 and removes S3, which does not fetch from it, from the ISR. S2, a follower of S1 in epoch 1, fetches from S1: in KIP-320's first attempt a fetch carries the epoch of the follower's last entry, not its current leader epoch, and S2's log is empty, so nothing fences it; S2 takes 1@g3, S1's high watermark over the ISR {S1,S2} becomes 1 and the producer of entry 1 is acknowledged (acks=all). Then the LeaderAndIsr request of epoch 2 reaches S2 late: epoch 2 is newer than its own, so S2 acts on it and becomes a follower of S3, truncating nothing. S2 fetches from S3 with the epoch of its last entry, 3; S3's log is empty, so S3 answers LOG_TRUNCATION and S2 truncates to 0. The acknowledged entry that S1 counts as committed is now on S1 alone, 1 of 3 replicas; should S1 fail, S2, still in the ISR, may be elected without it. This is the failure the specification's module Kip320FirstTry records: the design 'fails to guarantee the StrongIsr property because the leader cannot guarantee that followers are on the same epoch when bumping the high watermark', and a follower of an older epoch, catching up one epoch at a time, 'may truncate the committed data'. The released KIP-320 puts the current leader epoch into every fetch: under the safe preset `kafka` S1 answers FENCED_LEADER_EPOCH to S2's epoch-1 fetch and the trace is blocked at that step, with late LeaderAndIsr requests too (`kafka,late_leader_and_isr=true`).",
        "Jason Gustafson, kafka-specification (TLA+ specification of Kafka's replication), module Kip320FirstTry, July 2018: 'fails to guarantee the StrongIsr property'; KIP-320: Allow fetchers to detect and handle log truncation; KAFKA-7395 (apache/kafka pull request 5661)"),
    "kafka-without-controller-fencing": (
        "kafka-without-controller-fencing", "AcknowledgedWriteKept",
        {"max_generation": 2, "max_log": 1, "max_crashes": 0, "max_partitions": 1},
        "A leader cut off from the controller shrinks its ISR on its own and acknowledges a write the next leader lacks",
        "S1 becomes leader of epoch 1; the LeaderAndIsr request reaches S2, not S3. The ISR is {S1,S2,S3}. S1 writes "
        "entry 1 and S2 fetches it; S3 has not, so S1's high watermark, the minimum log end offset over the ISR, "
        "stays 0. The network then cuts S1 off from the other brokers and from the controller. Without the "
        "controller's fencing S1 removes S3, which lags, from the ISR it counts: the update never reaches the "
        "controller, but S1 acts on it, and its high watermark over {S1,S2} becomes 1, so the acks=all producer "
        "of entry 1 is acknowledged, as in Jepsen's 2013 analysis, where a leader partitioned away shrank the ISR "
        "to itself and kept acknowledging writes. The controller, whose ISR still holds all three replicas, "
        "elects S3 leader of epoch 2: S3 leads without entry 1, which a producer was told is written, and S2, "
        "following it, will truncate the entry away. Kafka prevents both halves. The leader changes the ISR "
        "only through the controller, by a conditional write (ZooKeeper's zkVersion; since KIP-497, AlterPartition, "
        "with the leader counting the maximal ISR until the controller accepts), which a leader cut off from the "
        "controller cannot make; and the controller fences a broker whose session expired, removing it from the "
        "ISR and moving leadership away (KIP-841: a fenced replica is neither in the ISR nor leader). Under the "
        "safe preset `kafka` the partition takes S1 out of the ISR and S1's shrink is refused: the trace is "
        "blocked at that step, and S1's high watermark waits for S3, which can no longer fetch from it.",
        "Kyle Kingsbury, Jepsen: Kafka (https://aphyr.com/posts/293-jepsen-kafka, 2013); KIP-497: Add inter-broker "
        "API to alter ISR; KIP-841: Fenced replicas should not be allowed to join the ISR in KRaft"),
}


def preset_of_entry(name: str) -> str:
    """The preset a catalogue entry runs under."""
    return KAFKA[name][0] if name in KAFKA else name


def build(name: str) -> Path:
    if name in KAFKA:
        preset, prop, overrides, title, explanation, source = KAFKA[name]
    else:
        (prop, overrides, title, explanation), preset, source = CATALOGUE[name], name, None
    config = Config(**overrides)
    report = run(CheckRequest(preset), model=build_model(PRESETS[preset].protocol, config))
    trace = trace_for(report, preset, prop)
    trace.title = title
    trace.explanation = explanation
    source = source or SOURCES.get(name)
    if source:
        trace.extra["source"] = source
    return trace.save(HERE / f"{name}.json")


def main() -> None:
    for name in [*CATALOGUE, *KAFKA]:
        print(build(name))


if __name__ == "__main__":
    main()
