"""Packed states: one fixed-width row of bytes per `model.state.State`.

    [crashes]
    per server k: [generation, role (0 follower, 1 leader), alive, hwm, log length,
                   log[max_log] (zero past the end), match[servers] (zero unless a leader),
                   ZAB only: durable, synced (bit 7: established), epoch;
                   BookKeeper only: fenced, responded, negatives (zero for the two clients);
                   Kafka only: in_isr, leader (position + 1, 0 for none), truncating | flushed << 1,
                               a leader's own ISR (bit k: replica k; zero unless a leader)]
    reads: one byte per (index 1..max_log, generation 0..max_generation), 1 when read
    ZAB, BookKeeper and Kafka, acked: the same, 1 when acknowledged to a client
    BookKeeper only, its ensemble changes: [count, stored, then max_crashes slots of
                  (first entry, ensemble_size bookies)] (BookKeeperState.ensembles and .stored;
                  each change replaces a bookie that is down, which only a crash makes, so
                  there are at most max_crashes of them; zero when the ensemble has no spares)
    partitioned models only: each server's cut bit after its extras (1: the isolated server), and
                  after everything else one byte, the partitions made
A BookKeeper row's servers are its state's: the bookies, the writer, the recovery client.
    async network only, per channel a->b (a * servers + b):
                  [message count, channel_capacity messages of 6 + max_log bytes each]
                  an append is [0, generation, prev, prev_generation, hwm, len, entries...],
                  a reply [1, generation, success, index, 0...]; unused bytes are zero

Every bounded quantity is below 256, so a byte each. Equal states have equal rows
(unused bytes are always zero), which keeps rows comparable and compact: 41 bytes
for 3 servers at max_log 2 and generation 4 on the rpc network.
"""

from __future__ import annotations

from itertools import permutations
from math import factorial

import numpy as np

from hwm.model.actions import Model
from hwm.checker.fast import fields as K, rule_tables
from hwm.model.state import APPEND, FOLLOWER, LEADER, Server, State
from hwm.model.bookkeeper import BookKeeperModel, BookKeeperState
from hwm.model.kafka import KafkaModel, KafkaServer, KafkaState
from hwm.model.kafka_partition import KafkaPartitionState, PartitionedKafkaModel
from hwm.model.partition import PartitionedRaftModel, PartitionState
from hwm.model.zab import ZabModel, ZabState
from hwm.model.zab_partition import PartitionedZabModel, ZabPartitionState
from hwm.properties.protocol import FLAG_VALUES

# The partitioned models whose rows carry the cut (kernels.py transcribes their rules).
PARTITIONED_MODELS = (PartitionedRaftModel, PartitionedZabModel, PartitionedKafkaModel)

# Permutation tables (for the canonical form under symmetry) above this many servers would be large.
MAX_SERVERS = 7


class Layout:
    """Where each field of a state lives in a row, for one model's configuration and flags."""

    def __init__(self, model: Model, symmetry: bool):
        config, protocol = model.config, model.protocol
        self.zab = isinstance(model, ZabModel)
        self.bookkeeper = isinstance(model, BookKeeperModel)
        self.kafka = isinstance(model, KafkaModel)
        self.system = K.ZAB if self.zab else K.BOOKKEEPER if self.bookkeeper else K.KAFKA if self.kafka else K.RAFT
        extras = self.system != K.RAFT  # three bytes per server and the acked set
        n, max_log, max_generation = config.servers + (2 if self.bookkeeper else 0), config.max_log, \
            config.max_generation
        self.n, self.max_log, self.max_generation = n, max_log, max_generation
        self.async_network = config.network == "async"
        capacity = config.channel_capacity if self.async_network else 0
        # A partitioned model's rows (model/partition.py) carry each server's cut bit after its extras,
        # and the partitions made in a byte of their own.
        self.partitioned = isinstance(model, PARTITIONED_MODELS)
        self.cut_at = 5 + max_log + n + (3 if extras else 0) + (1 if self.kafka else 0)
        self.server_width = self.cut_at + self.partitioned
        self.reads_base = 1 + n * self.server_width
        entries = max_log * (max_generation + 1)  # one byte per (index, generation)
        self.acked_base = self.reads_base + entries
        self.ensembles_base = self.acked_base + (entries if extras else 0)
        # BookKeeper's ensemble changes: one slot per crash where the ensemble has spare bookies.
        self.ensemble_size = model.ledger.ensemble_size if self.bookkeeper else 0
        self.max_changes = config.max_crashes if self.bookkeeper and self.ensemble_size < config.servers else 0
        ensembles = 2 + self.max_changes * (1 + self.ensemble_size) if self.bookkeeper else 0
        self.channels_base = self.ensembles_base + ensembles
        self.message_width = 6 + max_log
        self.channel_width = 1 + capacity * self.message_width
        self.partitions_at = self.channels_base + (n * n * self.channel_width if self.async_network else 0)
        self.width = self.partitions_at + self.partitioned
        # The longest encoding (model.encoding.encode) a state can have.
        self.encoding_size = (3 + n * (5 + max_log + n) + 1 + 2 * max_log * (max_generation + 1)
                              + (n * n * (1 + capacity * self.message_width) if self.async_network else 0)
                              + (4 * n + n + 1 + 2 * entries if extras else 0) + (n * n if self.kafka else 0)
                              + (n + 1 if self.partitioned else 0) + ensembles)
        quorum_k = n // 2 + 1 if protocol.quorum == "majority" else n - n // 2
        P = np.zeros(K.PARAMS, dtype=np.int64)
        P[K.COUNTING] = (1 << n) - 1
        P[K.NEEDED] = n // 2 + 1
        if self.system in (K.RAFT, K.ZAB, K.KAFKA):
            # The raft, ZAB and Kafka models' rules (model.rules): a variant's constant hooks, asked once, are
            # data here: which servers count (the election tables hold only their quorums, model.voter_sets;
            # Kafka's HW counts only their ISR copies), Q2 (Kafka's: min.insync.replicas, P[MIN_ISR]), and
            # Q1 (ELECTION_QUORUM: a ZAB leader's NEWLEADER quorum; check_quorum's reach).
            rules = model.rules
            P[K.COUNTING] = sum(1 << k for k in range(n) if rules.counts(k))
            quorum_k = rules.replication_quorum()
            if getattr(model, "variant", None) is not None:  # model.variant.variant_properties count Q2
                P[K.NEEDED] = quorum_k
        P[[K.N, K.L, K.G, K.SW, K.RB, K.CB, K.CAP, K.MW, K.CW, K.W]] = (
            n, max_log, max_generation, self.server_width, self.reads_base, self.channels_base, capacity,
            self.message_width, self.channel_width, self.width)
        P[K.MAX_CRASHES] = config.max_crashes
        P[K.ELECTION_QUORUM] = getattr(model, "quorum", 0)  # Q1 (raft and ZAB; Kafka's controller has none)
        P[K.QUORUM_K] = quorum_k
        P[K.MAJORITY] = n // 2 + 1
        P[K.COMMIT_CURRENT] = protocol.commit == "current-generation"
        P[K.LONGEST_LOG] = protocol.election == "longest-log"
        P[K.APPEND_PREVIOUS] = protocol.append_check == "previous-entry"
        P[K.RESTART] = FLAG_VALUES["restart"].index(protocol.restart)
        P[K.HWM_DURABLE] = protocol.hwm_durable
        P[K.NOOP] = protocol.noop_on_election
        P[K.ASYNC] = self.async_network
        P[K.SYMMETRY] = symmetry
        P[K.NPERM] = factorial(n) if symmetry else 0
        P[K.SYSTEM] = self.system
        P[K.AB] = self.acked_base
        P[K.ZAB_ELECTION] = self.zab and protocol.election == "longest-log"
        P[K.ACK_BEFORE_PERSIST] = self.zab and protocol.zab_ack_before_persist
        if self.kafka:
            P[K.TRUNCATION] = K.TRUNCATIONS.index(protocol.follower_truncation)
            P[K.UNCLEAN] = protocol.unclean_election
            P[K.LATE_LEADER_AND_ISR] = protocol.late_leader_and_isr
            P[K.MIN_ISR] = model.min_isr  # min.insync.replicas, a majority unless the protocol names a count
            P[K.WRITE_MIN_ISR] = model.write_min_isr  # 0: no produce-time check (the majority default)
            P[K.UNFLUSHED] = model.unflushed  # log_flush=never: a crash is a power failure
        if self.partitioned:
            P[K.PARTITIONED] = 1
            P[K.CUT] = self.cut_at
            P[K.PB] = self.partitions_at
            P[K.MAX_PARTITIONS] = config.max_partitions
            P[K.CHECK_QUORUM] = protocol.check_quorum
            P[K.LEASE_READS] = protocol.lease_reads
            P[K.CONTROLLER_FENCING] = self.kafka and protocol.controller_fencing
        if self.bookkeeper:
            P[K.BOOKIES] = model.n
            P[K.ACK_QUORUM] = model.ack_quorum
            P[K.READS_FENCE] = model.reads_fence
            P[K.ENSEMBLE_SIZE] = model.ledger.ensemble_size
            P[K.WRITE_QUORUM] = model.ledger.write_quorum
            P[K.EB] = self.ensembles_base
            P[K.BLOCK_ADDS] = model.block_add_completions
        if rule_tables.hooks_of(model):  # a variant's rules asked of every state (raft's and ZAB's)
            P = rule_tables.with_tables(P, rule_tables.of_model(model))
        self.params = P
        self.perms = (np.array(list(permutations(range(n))), dtype=np.int64) if symmetry
                      else np.zeros((1, n), dtype=np.int64))

    def server_base(self, k: int) -> int:
        return 1 + k * self.server_width

    # --------------------------------------------------------------- pack
    def pack(self, state: State) -> np.ndarray:
        row = np.zeros(self.width, dtype=np.uint8)
        row[0] = state.crashes
        n, max_log = self.n, self.max_log
        for k, s in enumerate(state.servers):
            base = self.server_base(k)
            row[base:base + 5] = (s.generation, s.role == LEADER, s.alive, s.hwm, len(s.log))
            row[base + 5:base + 5 + len(s.log)] = s.log
            if s.match:
                row[base + 5 + max_log:base + 5 + max_log + n] = s.match
        self._pack_entries(row, self.reads_base, state.reads)
        if self.zab:
            for k in range(n):
                at = self.server_base(k) + 5 + max_log + n
                row[at:at + 3] = (state.durable[k], state.synced[k], state.epochs[k])
        if self.bookkeeper:
            for k in range(n - 2):
                at = self.server_base(k) + 5 + max_log + n
                row[at:at + 3] = (state.fenced >> k & 1, state.responded >> k & 1, state.negatives >> k & 1)
        if self.kafka:
            for k, s in enumerate(state.servers):
                at = self.server_base(k) + 5 + max_log + n
                row[at:at + 4] = (s.in_isr, s.leader, s.truncating | s.flushed << 1,
                                  sum(1 << j for j, x in enumerate(s.isr) if x))
        if self.system != K.RAFT:
            self._pack_entries(row, self.acked_base, state.acked)
        if self.bookkeeper and state.ensembles:
            at = self.ensembles_base
            row[at:at + 2] = (len(state.ensembles), state.stored)
            for j, (first, ensemble) in enumerate(state.ensembles):
                slot = at + 2 + j * (1 + self.ensemble_size)
                row[slot:slot + 1 + self.ensemble_size] = (first, *ensemble)
        if self.partitioned:
            for k in range(n):
                row[self.server_base(k) + self.cut_at] = state.cut[k]
            row[self.partitions_at] = state.partitions
        if self.async_network:
            for c, channel in enumerate(state.channels):
                at = self.channels_base + c * self.channel_width
                row[at] = len(channel)
                for j, message in enumerate(channel):
                    m = at + 1 + j * self.message_width
                    if message[0] == APPEND:
                        _, generation, prev, prev_generation, entries, hwm = message
                        data = [APPEND, generation, prev, prev_generation, hwm, len(entries), *entries]
                    else:
                        _, generation, success, index = message
                        data = [message[0], generation, success, index]
                    row[m:m + len(data)] = data
        return row

    def _pack_entries(self, row, at: int, entries) -> None:
        for index, generation in entries:
            row[at + (index - 1) * (self.max_generation + 1) + generation] = 1

    def _unpack_entries(self, data, at: int) -> frozenset:
        g1 = self.max_generation + 1
        return frozenset((1 + j // g1, j % g1) for j, bit in enumerate(data[at:at + self.max_log * g1]) if bit)

    def pack_all(self, states) -> np.ndarray:
        rows = np.zeros((len(states), self.width), dtype=np.uint8)
        for i, s in enumerate(states):
            rows[i] = self.pack(s)
        return rows

    # ------------------------------------------------------------- unpack
    def unpack(self, row) -> State:
        data = row.tolist() if isinstance(row, np.ndarray) else row
        n, max_log = self.n, self.max_log
        servers = []
        for k in range(n):
            base = self.server_base(k)
            generation, role, alive, hwm, length = data[base:base + 5]
            log = tuple(data[base + 5:base + 5 + length])
            with_match = role and (not self.bookkeeper or k == n - 2)  # BookKeeper's recovery client has none
            match = tuple(data[base + 5 + max_log:base + 5 + max_log + n]) if with_match else ()
            servers.append(Server(generation, LEADER if role else FOLLOWER, log, hwm, bool(alive), match))
        reads = self._unpack_entries(data, self.reads_base)
        channels: tuple = ()
        if self.async_network:
            chans = []
            for c in range(n * n):
                at = self.channels_base + c * self.channel_width
                messages = []
                for j in range(data[at]):
                    m = at + 1 + j * self.message_width
                    if data[m] == APPEND:
                        _, generation, prev, prev_generation, hwm, length = data[m:m + 6]
                        messages.append((APPEND, generation, prev, prev_generation,
                                         tuple(data[m + 6:m + 6 + length]), hwm))
                    else:
                        kind, generation, success, index = data[m:m + 4]
                        messages.append((kind, generation, bool(success), index))
                chans.append(tuple(messages))
            channels = tuple(chans)
        if self.partitioned:
            cut = tuple(bool(data[self.server_base(k) + self.cut_at]) for k in range(n))
            partitions = data[self.partitions_at]
        if self.zab:
            extras = [data[self.server_base(k) + 5 + max_log + n:][:3] for k in range(n)]
            if self.partitioned:
                return ZabPartitionState(tuple(servers), reads, data[0], channels, tuple(e[1] for e in extras),
                                         tuple(e[0] for e in extras), tuple(e[2] for e in extras),
                                         self._unpack_entries(data, self.acked_base), cut, partitions)
            return ZabState(tuple(servers), reads, data[0], channels, tuple(e[1] for e in extras),
                            tuple(e[0] for e in extras), tuple(e[2] for e in extras),
                            self._unpack_entries(data, self.acked_base))
        if self.kafka:
            extras = [data[self.server_base(k) + 5 + max_log + n:][:4] for k in range(n)]
            servers = [KafkaServer(*s, bool(e[0]), e[1], bool(e[2] & 1),
                                   tuple(bool(e[3] >> j & 1) for j in range(n)) if s.role == LEADER else (), e[2] >> 1)
                       for s, e in zip(servers, extras)]
            acked = self._unpack_entries(data, self.acked_base)
            if self.partitioned:
                return KafkaPartitionState(tuple(servers), reads, data[0], (), acked, cut, partitions)
            return KafkaState(tuple(servers), reads, data[0], (), acked)
        if self.bookkeeper:
            bits = [data[self.server_base(k) + 5 + max_log + n:][:3] for k in range(n - 2)]
            fenced, responded, negatives = (sum(b[f] << k for k, b in enumerate(bits)) for f in range(3))
            at, size = self.ensembles_base, self.ensemble_size
            ensembles = tuple((data[slot], tuple(data[slot + 1:slot + 1 + size]))
                              for slot in range(at + 2, at + 2 + data[at] * (1 + size), 1 + size))
            return BookKeeperState(tuple(servers), reads, data[0], channels, fenced, responded, negatives,
                                   self._unpack_entries(data, self.acked_base), ensembles, data[at + 1])
        if self.partitioned:
            return PartitionState(tuple(servers), reads, data[0], channels, cut, partitions)
        return State(tuple(servers), reads, data[0], channels)

    def unpack_all(self, rows: np.ndarray) -> list[State]:
        return [self.unpack(r) for r in rows.tolist()]
