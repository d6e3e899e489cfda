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
}


def build(name: str) -> Path:
    prop, overrides, title, explanation = CATALOGUE[name]
    config = Config(**overrides)
    report = bfs(build_model(PRESETS[name].protocol, config), name)
    trace = trace_for(report, name, prop)
    trace.title = title
    trace.explanation = explanation
    return trace.save(HERE / f"{name}.json")


def main() -> None:
    for name in CATALOGUE:
        print(build(name))


if __name__ == "__main__":
    main()
