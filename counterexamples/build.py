"""Rebuild the catalogue: the checker's shortest counterexample per broken preset, explained.

    python -m counterexamples.build        # rewrites counterexamples/*.json

The traces come from breadth-first search, so they are the shortest at their
bounds; the titles and explanations are written here, in the protocol's words.
`tests/test_catalogue.py` checks that every file still equals what the checker finds.
"""

from __future__ import annotations

from pathlib import Path

from hwm.check import trace_for
from model.actions import build_model
from model.checker import bfs
from model.state import Config
from properties.protocol import PRESETS

HERE = Path(__file__).parent

# preset -> (property, config overrides, title, explanation)
CATALOGUE = {
    "seed": (
        "ReadNeverTruncated", {},
        "The seed's rejoin rule truncates a committed entry to the new leader's lagging HWM",
        "S1 leads generation 1, replicates entry 1 to S2 and, with 2 of 3 servers holding it, raises its "
        "high-water mark to 1; a client reads entry 1 from S1. S2 then wins generation 2. S2's own HWM is still "
        "0: a follower learns the HWM only from the next append, and S2 was elected before one came. S1 "
        "crashes and, following the seed, 'finds the new leader. It then explicitly asks for the current "
        "high-water mark, truncates its log to high-water mark' - 0 - and removes the entry a client has read. "
        "The entry now lives on S2 alone: one more failure and it is gone. Raft truncates only an entry that "
        "conflicts with one the leader sends (Figure 2, AppendEntries rule 3); Kafka replaced HWM truncation "
        "with leader-epoch truncation (KIP-101).",
    ),
    "kip101": (
        "ReadNeverTruncated", {},
        "Kafka before KIP-101: a follower truncates to its own checkpointed HWM, which lags the leader's",
        "S1 leads, replicates entry 1 to S2 and commits it (HWM 1); a client reads it. S2 has stored the entry "
        "but its checkpointed high-water mark is still 0, because followers learn the HWM on the next fetch. "
        "S2 crashes and, as Kafka did before KIP-101, truncates its log to its own high-water mark on restart: "
        "the committed, read entry is gone from S2. If S1 fails now, S2 and S3 can elect a leader that never "
        "had it (KIP-101 scenario 1, 'high watermark truncation followed by immediate leader election'). "
        "KIP-101's fix: truncate by the leader epoch, asking the leader where the follower's epoch ends.",
    ),
    "raft-seed-quorum": (
        "CommittedOnQuorum", {"servers": 2, "max_generation": 1, "max_crashes": 0},
        "computeHighwaterMark's [N/2] counts a minority as a quorum when N is even",
        "With two servers, S1 is elected by both and writes entry 1. The seed computes the high-water mark as "
        "'serverLogIndexes.sort(Long::compareTo); return serverLogIndexes.get(noOfServers / 2)': the indexes "
        "[0, 1] sorted give position 2/2 = 1, the value 1, so S1 counts entry 1 as committed although only S1 "
        "of 2 servers stores it. For odd N the [N/2]-th smallest index is held by (N+1)/2 servers, a majority; "
        "for even N it is held by N/2, one short (hwm prove shows this for every N up to 15). etcd's "
        "CommittedIndex takes position n - (n/2 + 1) of the ascending sort instead.",
    ),
    "raft-any-generation-commit": (
        "ReadNeverTruncated", {},
        "Raft's Figure 8: an entry of an older generation counted as committed, read, then overwritten",
        "S1 (generation 1) and S2 (generation 2) each write an entry 1 that reaches no one. S1 wins generation "
        "3 with S3's vote and replicates its old entry 1@g1 to S3: now 2 of 3 servers hold it, and under the "
        "seed's rule 'if (logIndexAtQuorum > currentHighWaterMark)' S1 raises its HWM to 1; a client reads "
        "1@g1. But S2, whose last entry has generation 2, can still win generation 4 with S1's vote (S2's log "
        "is more up to date) and overwrites entry 1 everywhere with 1@g2: the read entry is truncated. Raft "
        "5.4.2: 'Raft never commits log entries from previous terms by counting replicas'; only an entry of "
        "the leader's own generation is committed that way, and older ones with it.",
    ),
    "raft-any-election": (
        "ReadNeverTruncated", {},
        "A server with a stale log wins an election and overwrites a committed entry",
        "S1 commits entry 1 with S2 and a client reads it. S3, whose log is empty, asks S1 for a vote in "
        "generation 2 and gets it: without Raft's election restriction nothing stops a voter from electing a "
        "candidate that lacks committed entries. S3 writes its own entry 1@g2 and replicates it to S1, which "
        "truncates the read entry 1@g1 as a conflict. Raft 5.4.1: 'the voter denies its vote if its own log is "
        "more up-to-date than that of the candidate'; two majorities intersect, so every winner then holds "
        "every committed entry.",
    ),
    "raft-generation-mismatch": (
        "ReadNeverTruncated", {},
        "The seed's follower acknowledges entries it never compared with the leader's",
        "S1 writes entry 1@g1 in generation 1 and keeps it; S2 leads generation 2 with an empty log and "
        "replicates to S1. The seed's follower appends what is missing ('filter(e -> !wal.exists(e))'), has "
        "nothing to compare, and answers with 'wal.getLastLogIndex()' = 1, so S2 records that S1 matches it up "
        "to index 1 - but S1's entry 1 is 1@g1, not S2's. S2 then writes 1@g2: counting itself and S1, the "
        "quorum index is 1 and the entry has S2's own generation, so S2 commits it and a client reads it. S1, "
        "elected for generation 3 by S3, replicates its 1@g1 to S2 and truncates the read entry. Raft's follower "
        "first checks the entry before the batch (prevLogIndex/prevLogTerm) and answers prevLogIndex + "
        "len(entries): a match index then only ever covers entries the follower shares with the leader.",
    ),
    "raft-truncate-to-leader-hwm": (
        "ReadNeverTruncated", {},
        "Rejoining by truncating to the leader's HWM, as the seed says, removes a committed entry",
        "The protocol is Raft except for the seed's rejoin rule. S1 commits entry 1 with S2 (HWM 1) and S2 "
        "wins generation 2 before any append has told it the HWM moved. A client reads entry 1 from S1. S1 "
        "crashes; on restart it 'explicitly asks for the current high-water mark, truncates its log to "
        "high-water mark': the leader S2 answers 0 and S1 drops the entry a client has read. The leader's HWM "
        "is a lower bound of what is committed, never an upper one; only entries that conflict with the "
        "leader's log may be removed.",
    ),
    "raft-truncate-to-own-hwm": (
        "ReadNeverTruncated", {},
        "Truncating to a volatile HWM on restart removes what the server itself committed",
        "S1 leads, commits entry 1 with S2 (HWM 1) and a client reads it. S1 crashes. Its high-water mark was "
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
}

# Where each entry's bug was published.
SOURCES = {
    "zab-ack-before-persist": "https://issues.apache.org/jira/browse/ZOOKEEPER-3911 (fix: "
                              "https://github.com/apache/zookeeper/pull/1445; same root cause: ZOOKEEPER-4646)",
    "bookkeeper-recovery-without-fencing": "https://github.com/apache/bookkeeper/issues/2614 (fix: "
                                           "https://github.com/apache/bookkeeper/pull/2616)",
}


def build(name: str) -> Path:
    prop, overrides, title, explanation = CATALOGUE[name]
    config = Config(**overrides)
    report = bfs(build_model(PRESETS[name].protocol, config), name)
    trace = trace_for(report, name, prop)
    trace.title = title
    trace.explanation = explanation
    if name in SOURCES:
        trace.extra["source"] = SOURCES[name]
    return trace.save(HERE / f"{name}.json")


def main() -> None:
    for name in CATALOGUE:
        print(build(name))


if __name__ == "__main__":
    main()
