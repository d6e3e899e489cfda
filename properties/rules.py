"""The replication rules, as one small object the model and the implementation both ask: which
servers count toward a quorum, how many of them make an election quorum (Q1) and a replication quorum
(Q2), which index the leader may take as its high-water mark, when it may commit it, and when a voter
grants its vote.

`Rules(protocol, servers)` is what the built-in flags (`quorum`, `commit`, `election`) mean; a variant
(`model.variant.Variant`, docs/variants.md) is a subclass that overrides some of these methods, and its
protocol carries it (`rules_of`). The model (`model.raft`, `model.zab`, `model.kafka`) and hwm's own
replica (`impl.core.Replica` and its ZAB and Kafka subclasses) ask the same object, so a variant's rules
are the model's and the implementation's alike; `SYSTEM_HOOKS` says which rules each system asks. With no
variant the model asks `Rules`, and explores exactly the states it explored when it read the flags
itself (the pinned counts of tests/pinned.py)."""

from __future__ import annotations

from hwm.properties.flags import Protocol
from hwm.properties.quorum import index_held_by, majority

# The rules a variant may override, in the order docs/variants.md lists them.
HOOKS = ("counts", "election_quorum", "replication_quorum", "quorum_index", "may_commit", "grants_vote",
         "accepts_append", "restart_keeps", "readable")
# Those asked of a state's logs or match indexes; the others depend on the cluster alone (which servers
# count, Q1, Q2), so an engine may ask them once (the compiled kernels take them as data).
PER_STATE_HOOKS = ("quorum_index", "may_commit", "grants_vote", "accepts_append", "restart_keeps", "readable")

# The rules each system's model and replica ask, and why a system asks none of the others: a variant
# of that system's preset may override only these (docs/variants.md, "Other systems").
SYSTEM_HOOKS = {
    "raft": HOOKS,
    "zab": ("counts", "election_quorum", "replication_quorum", "quorum_index", "may_commit"),
    "kafka": ("counts", "replication_quorum"),
    "bookkeeper": (),
}
NOT_ASKED = {
    ("zab", "grants_vote"): "ZAB's vote is fast leader election's order (currentEpoch, then the last zxid), "
                            "which the model and the replica apply themselves",
    ("kafka", "election_quorum"): "Kafka's controller elects a live ISR replica: nobody votes",
    ("kafka", "quorum_index"): "Kafka's high watermark is the minimum log end offset over the ISR (counts "
                               "chooses which ISR replicas it takes, replication_quorum how many it needs)",
    ("kafka", "may_commit"): "Kafka's leader takes every offset its high watermark covers, of any epoch",
    ("kafka", "grants_vote"): "Kafka's controller elects a live ISR replica: nobody votes",
    ("zab", "accepts_append"): "a ZAB follower takes the proposals of the leader it synchronised with "
                               "(NEWLEADER), which the model and the replica (impl/zab.py) apply themselves",
    ("zab", "restart_keeps"): "a restarting ZAB server keeps what it logged, and the synchronisation with its "
                              "next leader (DIFF, TRUNC, SNAP) decides what it drops",
    ("zab", "readable"): "ZAB's reads are not a rule in this version: a server serves up to its committed index",
    ("kafka", "accepts_append"): "a Kafka follower fetches from its leader and truncates as its "
                                 "follower_truncation flag says: it is sent no append to accept",
    ("kafka", "restart_keeps"): "what a Kafka replica keeps across a crash is its log_flush flag, and what it "
                                "truncates as a follower its follower_truncation flag",
    ("kafka", "readable"): "a Kafka replica serves up to its high watermark, which the model and the replica "
                           "apply themselves",
    ("bookkeeper", None): "BookKeeper's quorums are the ledger's ensemble_size, write_quorum and ack_quorum, "
                          "flags of its base that the model, the bookies' clients and the compiled kernels "
                          "already take (base = {\"preset\": \"bookkeeper\", \"flags\": {\"ack_quorum\": 1}})",
}


def not_asked(system: str, hook: str) -> str | None:
    """Why `system` asks no rule `hook` (None when it asks it)."""
    if hook in SYSTEM_HOOKS.get(system, ()):
        return None
    return NOT_ASKED.get((system, hook)) or NOT_ASKED.get((system, None)) or f"the {system} system asks no {hook}"


class HookError(RuntimeError):
    """A variant's rule (or property) that raised or answered the wrong type where hwm asked it: a
    search, a replay or a running replica stops with this one line, naming the variant, the rule and
    what it raised (`model.variant` raises it; the engines and `hwm node` catch it)."""


def up_to_date(candidate_log: tuple[int, ...], voter_log: tuple[int, ...]) -> bool:
    """Raft 5.4.1: compare the last entries' generations, then the lengths."""
    return ((candidate_log[-1] if candidate_log else 0, len(candidate_log))
            >= (voter_log[-1] if voter_log else 0, len(voter_log)))


class Rules:
    """The rules the built-in flags of `protocol` give a cluster of `servers` servers (S1..Sn are
    positions 0..servers-1)."""

    def __init__(self, protocol: Protocol, servers: int):
        self.protocol = protocol
        self.servers = servers

    def counts(self, server: int) -> bool:
        """Whether `server` counts toward a quorum: it votes, may stand for election, and its match
        index counts toward the high-water mark. Every server does (a learner would not). Under ZAB the
        same (a ZooKeeper observer does not); under Kafka, whether its log end offset counts toward the
        high watermark while it is in the ISR (the controller may still elect it)."""
        return True

    def counting(self) -> tuple[int, ...]:
        """The servers that count toward a quorum, in order."""
        if type(self).counts is Rules.counts:  # every server (asked on every step: spare the calls)
            return tuple(range(self.servers))
        return tuple(k for k in range(self.servers) if self.counts(k))

    def election_quorum(self) -> int:
        """Q1: how many counting servers, the candidate among them, elect a leader: a majority of them."""
        return majority(len(self.counting()))

    def replication_quorum(self) -> int:
        """Q2: on how many counting servers an index must be for the leader to take it as its HWM:
        a majority (`quorum=majority`), or the seed's `sorted(match)[N/2]`, which is held by
        ceil(N/2) servers: a majority for odd N, one server short for even N (`quorum=seed-index`).
        Kafka's: min.insync.replicas, how many counting ISR replicas (the leader included) the high
        watermark needs (`min_insync_replicas`: a majority, or the count it names)."""
        counting = len(self.counting())
        if self.protocol.system == "kafka":  # min.insync.replicas, as the high watermark needs it
            wanted = self.protocol.min_insync_replicas
            return majority(counting) if wanted == "majority" else wanted
        if self.protocol.quorum == "seed-index":
            return counting - counting // 2
        return majority(counting)

    def quorum_index(self, match: tuple[int, ...]) -> int:
        """The largest index the leader may take as its HWM, from every server's match index (the
        leader's own slot holds its last index): the largest index held by `replication_quorum()`
        counting servers (etcd's quorum/majority.go CommittedIndex)."""
        counting = self.counting()
        held = match if len(counting) == len(match) else [match[k] for k in counting]
        return index_held_by(held, self.replication_quorum())

    def may_commit(self, index: int, log: tuple[int, ...], generation: int) -> bool:
        """Whether a leader of `generation` whose log is `log` may advance its HWM to `index`, its
        quorum index, above its HWM: always (`commit=any-generation`, the seed), or only when the entry
        there has the leader's own generation (`commit=current-generation`, Raft section 5.4.2)."""
        if self.protocol.commit == "current-generation":
            return index <= len(log) and log[index - 1] == generation
        return True

    def grants_vote(self, candidate_log: tuple[int, ...], voter_log: tuple[int, ...]) -> bool:
        """Whether a voter whose log is `voter_log` votes for a candidate whose log is `candidate_log`:
        any candidate (`election=any`), or one whose log is at least as up to date, last generation then
        length (`election=longest-log`, Raft section 5.4.1)."""
        return self.protocol.election != "longest-log" or up_to_date(candidate_log, voter_log)

    def accepts_append(self, log: tuple[int, ...], prev_index: int, prev_generation: int) -> bool:
        """Whether a follower whose log is `log` accepts an append whose entries follow index
        `prev_index` (at least 1: index 0 always matches), the leader's entry there having generation
        `prev_generation`: only when its own entry there has that generation (`append_check=
        previous-entry`, Raft's AppendEntries receiver rule 2), or always (`append_check=
        generation-mismatch`, the seed's follower, which checks nothing before the entries). A follower
        that refuses answers so, and the leader backs off to an earlier index; one that accepts applies
        the entries as its `append_check` says."""
        if self.protocol.append_check == "previous-entry":
            return len(log) >= prev_index and log[prev_index - 1] == prev_generation
        return True

    def restart_keeps(self, log: tuple[int, ...], hwm: int, leader_hwm: int | None) -> int:
        """How many entries of its log (`log`, between 0 and `len(log)`) a restarting server keeps,
        with `hwm` its high-water mark as it restarts (0 unless `hwm_durable`). `leader_hwm` is the
        high-water mark of the leader the server asks as it restarts (`restart=truncate-to-leader-hwm`
        alone asks one: the live leader of the highest generation, when that is not below the
        server's own), else None. The whole durable log (`restart=keep`, Raft); the first `hwm`
        entries (`truncate-to-own-hwm`, Kafka before KIP-101); the first `leader_hwm` entries when a
        leader answered (`truncate-to-leader-hwm`, the seed's text). The HWM falls to what is kept
        when the log is cut below it, or a leader answered."""
        rule = self.protocol.restart
        if rule == "truncate-to-own-hwm":
            return min(hwm, len(log))
        if rule == "truncate-to-leader-hwm" and leader_hwm is not None:
            return min(leader_hwm, len(log))
        return len(log)

    def readable(self, server: int, leading: bool, log: tuple[int, ...], hwm: int) -> int:
        """Up to which index a client's read at live `server` is served (0: none; at most `len(log)`),
        with `leading` whether it leads and `hwm` its high-water mark: any server, up to its HWM (the
        seed's readEntry: "if (index > replicationState.getHighWaterMark()) throw")."""
        return min(hwm, len(log))


def overridden(rules: Rules | type[Rules]) -> tuple[str, ...]:
    """The hooks `rules` (an instance or a class) changes from the built-in ones, in HOOKS order."""
    cls = rules if isinstance(rules, type) else type(rules)
    return tuple(h for h in HOOKS if getattr(cls, h) is not getattr(Rules, h))


def rules_of(protocol: Protocol, servers: int) -> Rules:
    """The rules a model or a replica of `protocol` asks: a variant's protocol carries its own (`rules`,
    a factory that `model.variant` gives it), any other protocol the flags'."""
    make = getattr(protocol, "rules", None)
    return make(protocol, servers) if make is not None else Rules(protocol, servers)
