"""The names of a packed row's fields and of the configuration vector `P`, shared by the kernels
(`checker.fast.kernels`, which compute on them) and the Python side (`checker.fast.layout`, which packs
rows), without importing Numba: a process that runs the kernels compiled ahead of time
(`checker.fast.aot`) never imports it.
"""

# Indexes into P, the configuration vector (see Layout.params). SYSTEM says whose extras a row
# carries (the raft model's rows have none); AB is where a ZAB row's `acked` set starts.
N, L, G, SW, RB, CB, CAP, MW, CW, W, MAX_CRASHES, QUORUM_K, MAJORITY, COMMIT_CURRENT, LONGEST_LOG, \
    APPEND_PREVIOUS, RESTART, HWM_DURABLE, NOOP, ASYNC, SYMMETRY, NPERM, SYSTEM, AB, ZAB_ELECTION, \
    ACK_BEFORE_PERSIST, BOOKIES, ACK_QUORUM, READS_FENCE, TRUNCATION, UNCLEAN, LATE_LEADER_AND_ISR, MIN_ISR, WRITE_MIN_ISR, \
    UNFLUSHED, COUNTING, NEEDED, PARTITIONED, CUT, PB, MAX_PARTITIONS, CHECK_QUORUM, LEASE_READS, \
    ELECTION_QUORUM, CONTROLLER_FENCING, QUORUM_INDEX_AT, MAY_COMMIT_AT, GRANTS_VOTE_AT, ACCEPTS_APPEND_AT, \
    RESTART_KEEPS_AT, READABLE_AT, RULE_RAISED, ENSEMBLE_SIZE, WRITE_QUORUM, EB, BLOCK_ADDS = range(56)
PARAMS = 56
# COUNTING: bit k set when server k's match index counts toward QUORUM_K (model.rules.Rules.counts: all
# servers, but a variant's learners). NEEDED: how many servers ReadNeverTruncated and CommittedOnQuorum
# require to hold an entry (the catalogue's `needed`: a majority, or a variant's Q2).
# A partitioned model's (model/partition.py, zab_partition.py): PARTITIONED is 1 when its rows carry the
# cut, CUT where a server's cut byte lies in its slot (after the system's extras), PB the row's byte of
# partitions made; MAX_PARTITIONS, CHECK_QUORUM and LEASE_READS its bound and flags; CONTROLLER_FENCING
# Kafka's flag (model/kafka_partition.py). ELECTION_QUORUM is the raft and ZAB models' `quorum`, Q1 of the
# servers that count: how many servers a leader must reach under check_quorum, and how many a ZAB
# leader's NEWLEADER needs.
# QUORUM_INDEX_AT .. READABLE_AT: where in P a variant's rule asked of every state starts as a table of its
# answers (checker.fast.rule_tables, which says how each is indexed); 0 where the built-in rule applies.
# RULE_RAISED is the one field a kernel writes: 1 once it looked up an entry whose rule raised when it
# was tabulated (the backend then asks the reference model, which raises the rule's error where the
# reference backend would).
# BookKeeper's ledger (model/bookkeeper.py): ENSEMBLE_SIZE (E) and WRITE_QUORUM (WQ) beside BOOKIES and
# ACK_QUORUM (AQ); EB where a row's ensemble changes start (Layout's docstring); BLOCK_ADDS the writer's
# bookkeeper_block_add_completions.
# Systems (P[SYSTEM]). A BookKeeper row's servers are the bookies 0..BOOKIES-1, the writer
# (BOOKIES) and the recovery client (BOOKIES + 1); N counts all of them, as the state does.
RAFT, ZAB, BOOKKEEPER, KAFKA = range(4)
# Fields of a server's slot: generation, role (0 follower, 1 leader), alive, hwm, log length,
# log[L], match[N] (zero unless a leader), then the system's extras (ZAB: durable, synced, epoch).
GEN, ROLE, ALIVE, HWM, LEN, LOG = range(6)
DURABLE, SYNCED, EPOCH = range(3)
FENCED, RESPONDED, NEGATIVES = range(3)  # BookKeeper's bits of a bookie, one byte each
# A Kafka replica's: in the (controller's) ISR, its leader (position + 1), truncating, and a leader's own
# copy of the ISR that it counts for its HW (bit k: replica k; kafka.KafkaServer.isr). The truncating
# byte is kafka._server_bytes': bit 0 truncating, the bits above the flushed length (log_flush=never).
IN_ISR, LEADER_OF, TRUNCATING, ISR_VIEW = range(4)
# Kafka's follower_truncation rules (P[TRUNCATION]), by name: a value not listed has no kernel.
# last-fetched-epoch is KIP-320's first attempt (kafka.diverged_at), for the model that has it.
TRUNCATIONS = ("own-hwm", "leader-epoch", "leader-epoch-kip279", "fenced", "last-fetched-epoch")
OWN_HWM, LEADER_EPOCH, LEADER_EPOCH_KIP279, FENCED_EPOCH, LAST_FETCHED_EPOCH = range(5)
# Bit 7 of a ZAB leader's `synced`: established (model.zab._ESTABLISHED).
ESTABLISHED = 128
# Restart rules (P[RESTART]), as properties.protocol orders them.
KEEP, TRUNCATE_TO_LEADER_HWM, TRUNCATE_TO_OWN_HWM = range(3)
# Message kinds (model.state): an append is [0, generation, prev, prev_generation, hwm, len, entries...],
# a reply [1, generation, success, index].
APPEND, REPLY = 0, 1
# Rows of server_ids (FastBackend): the actions of one server, per kind; ADD_ID's row holds ("add",).
# PARTITION_ID's row holds ("partition", k), HEAL_ID's ("heal",).
WRITE_ID, READ_ID, CRASH_ID, RESTART_ID, PERSIST_ID, SEND_ADD_ID, FENCE_ID, RECOVERY_READ_ID, ADD_ID, FLUSH_ID, \
    PARTITION_ID, HEAL_ID, CHANGE_ENSEMBLE_ID = range(13)
# Rows of pair_ids (FastBackend): the actions between two servers, per kind.
REPLICATE_KIND, SEND_KIND, DELIVER_KIND, DROP_KIND, SYNC_KIND, SHRINK_ISR_KIND, LEADER_AND_ISR_KIND = range(7)
PAIR_KINDS = ("replicate", "send", "deliver", "drop", "sync", "shrink_isr", "leader_and_isr")
# Bounds (Expansion.bounds_hit), as flags in `hits`.
HIT_GENERATION, HIT_LOG, HIT_CRASHES, HIT_CAPACITY, HIT_PARTITIONS = range(5)
# A rule table's entry for arguments on which the variant's rule raised or answered wrongly.
RAISED = -1
