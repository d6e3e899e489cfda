"""`FastBackend` (`checker.backend`'s interface over the compiled kernels), `unsupported()` (why a model
runs on the reference backend instead) and the kernels' compile bookkeeping; the package's opening says
what the kernels are."""

from __future__ import annotations

import resource
from contextlib import contextmanager
from pathlib import Path
from typing import Sequence

import numpy as np

from hwm.model.actions import Model
from hwm.checker.backend import Backend, BackendUnavailable, Expansion
from hwm.checker.fast import rule_tables
from hwm.checker.fast.fields import RULE_RAISED
from hwm.checker.report import used_symmetry
from hwm.properties.rules import HookError
from hwm.properties.protocol import Protocol

__all__ = ["FastBackend", "unsupported", "compile_seconds", "NOT_COMPILED", "NOT_COMPILED_FLAGS",
           "NOT_COMPILED_PARTITIONS"]

_BOUNDS = ("max_generation", "max_log", "max_crashes", "channel_capacity", "max_partitions")  # kernels' HIT_*
_COMPILE: dict[str, float] = {}


def unsupported(model) -> str | None:
    """Why the fast backend cannot run `model` (None when it can)."""
    from hwm.checker.fast.layout import MAX_SERVERS

    uncompiled = getattr(model, "uncompiled", None)  # a model that says why itself (a variant's fields)
    if uncompiled:
        return uncompiled
    variant = getattr(model, "variant", None)
    # The constant rules (which servers count, Q1, Q2) are asked once and are data for the kernels
    # (Layout.params, the election tables); a rule asked of every state is asked of every argument the
    # bounds allow, and the kernels look its answers up (checker.fast.rule_tables).
    if rule_tables.hooks_of(model):
        try:
            rule_tables.of_model(model)
        except rule_tables.TooLarge as e:
            return (f"{variant.name or variant.__name__} overrides {', '.join(rule_tables.hooks_of(model))}, "
                    f"rules asked of every state, and {e}")
    system = getattr(getattr(model, "protocol", None), "system", "raft")
    partitions = getattr(getattr(model, "config", None), "max_partitions", 0)
    if partitions and system in NOT_COMPILED_PARTITIONS:
        return (f"the fast backend has no compiled {system} partitions (max_partitions={partitions}): "
                f"{NOT_COMPILED_PARTITIONS[system]}")
    for flag, why in NOT_COMPILED_FLAGS.items():
        value = getattr(model.protocol, flag, None)
        if value is not None and value != getattr(Protocol(), flag):
            return f"the fast backend has no compiled form of flag {flag}={value!r} ({why})"
    if system in NOT_COMPILED:
        return f"the fast backend has no compiled {system} model yet ({NOT_COMPILED[system]})"
    compiled = _compiled_models()
    if type(model) not in compiled and not (variant is not None and type(model).__base__ in compiled):
        names = [c.__name__ for c in compiled]
        return (f"the fast backend compiles {', '.join(names[:-1])} and {names[-1]} only, "
                f"not {type(model).__name__}")
    protocol = model.protocol
    if type(protocol) is not Protocol and not (variant is not None and isinstance(protocol, Protocol)):
        return f"the fast backend knows the protocol flags only, not {type(protocol).__name__}"
    defaults = Protocol()
    for flag, value in protocol.flags().items():
        # A flag the kernels do not know is fine at its default (the model's behaviour without it).
        known = KNOWN_FLAGS.get(flag, (getattr(defaults, flag),))
        if value not in known:
            return f"the fast backend has no compiled form of flag {flag}={value!r}"
    config = model.config
    if system == "bookkeeper" and config.servers > MAX_SERVERS - 2:  # its writer and recovery client are servers
        return f"the fast backend handles up to {MAX_SERVERS - 2} bookies, not {config.servers}"
    if config.servers > MAX_SERVERS:
        return f"the fast backend handles up to {MAX_SERVERS} servers, not {config.servers}"
    if config.network not in ("rpc", "async"):
        return f"the fast backend has no compiled form of network {config.network!r}"
    return None


def _compiled_models() -> tuple[type, ...]:
    """The model classes the kernels transcribe (checker.fast.layout.Layout packs their states)."""
    from hwm.model.bookkeeper import BookKeeperModel
    from hwm.model.kafka import KafkaModel
    from hwm.model.kafka_partition import PartitionedKafkaModel
    from hwm.model.partition import PartitionedRaftModel
    from hwm.model.raft import RaftModel
    from hwm.model.zab import ZabModel
    from hwm.model.zab_partition import PartitionedZabModel

    return (RaftModel, ZabModel, BookKeeperModel, KafkaModel, PartitionedRaftModel, PartitionedZabModel,
            PartitionedKafkaModel)


# Systems whose models have no compiled form yet: the reference backend checks them. Listed, so a
# user hears why, and so tests/checker/test_fast.py fails for any other preset without a fast path.
NOT_COMPILED: dict[str, str] = {}

# Systems whose partitioned model has no kernels (max_partitions > 0 on them is refused), with the
# reason: the reference backend checks them. None today; a system added without them is listed here.
NOT_COMPILED_PARTITIONS: dict[str, str] = {}

# Flags whose non-default values have no kernels yet, with the reason: the reference backend checks
# them. Listed, as NOT_COMPILED is, so tests/checker/test_fast.py fails for any other flag without a
# fast path. None today (BookKeeper's ledger parameters and ensemble changes were the last).
NOT_COMPILED_FLAGS: dict[str, str] = {}

# The flag values the kernels implement (a new flag or value must be added to the kernels first).
KNOWN_FLAGS = {
    "quorum": ("seed-index", "majority"),
    "commit": ("any-generation", "current-generation"),
    "election": ("any", "longest-log"),
    "append_check": ("generation-mismatch", "previous-entry"),
    "restart": ("keep", "truncate-to-leader-hwm", "truncate-to-own-hwm"),
    "hwm_durable": (False, True),
    "noop_on_election": (False, True),
    "zab_ack_before_persist": (False, True),
    "bookkeeper_recovery_reads_fence": (False, True),
    "follower_truncation": ("own-hwm", "leader-epoch", "leader-epoch-kip279", "fenced",  # kernels.TRUNCATIONS
                            "last-fetched-epoch"),
    "unclean_election": (False, True),
    "late_leader_and_isr": (False, True),
    "min_insync_replicas": ("majority", 1, 2, 3, 4, 5, 6, 7),  # P[MIN_ISR], the model's min_isr
    "log_flush": ("always", "never"),  # P[UNFLUSHED]; the flushed length shares the truncating byte
    "controller_fencing": (False, True),  # P[CONTROLLER_FENCING]: acts only on a cut (kernels._kafka_partition_*)
    "check_quorum": (False, True),  # kernels._step_down, _election_refused (raft and ZAB)
    "lease_reads": (False, True),  # kernels._election_refused (raft)
    "system": ("raft", "zab", "bookkeeper", "kafka"),  # each system's model is transcribed in kernels.py
    # BookKeeper's ledger: striping (kernels._bk_in_write_set), ensemble changes (kernels._bk_change_ensemble)
    "ensemble_size": ("all", 1, 2, 3, 4, 5, 6, 7),
    "write_quorum": ("ensemble", 1, 2, 3, 4, 5, 6, 7),
    "ack_quorum": ("majority", 1, 2, 3, 4, 5, 6, 7),
    "bookkeeper_block_add_completions": (False, True),
}


def compile_seconds() -> dict[str, float]:
    """Seconds spent building or loading the kernels' module ("module") and on each kernel's first call
    (Numba's compile or cache load under the JIT) in this process."""
    return dict(_COMPILE)


def _warm(name: str, call) -> None:
    """Run `call` once, timing it as kernel `name`'s compile (or cache load) cost."""
    if name in _COMPILE:
        call()
        return
    started = _cpu_seconds()
    call()
    _COMPILE[name] = _cpu_seconds() - started


def _cpu_seconds() -> float:
    """This process's CPU seconds and its finished children's (the module is built by one)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@contextmanager
def _one_compiler(kernels):
    """While this process compiles Numba's JIT kernels (or loads them from its cache), hold a
    machine-wide lock: Numba's cache has none, and processes that start at once on a fresh machine
    (a test run's workers, Spark's executors) would each compile them, about 30 CPU s apiece. The
    module compiled ahead of time has nothing to compile here (its build has its own lock)."""
    if kernels.ahead_of_time or "expand" in _COMPILE:
        yield
        return
    import hashlib
    import tempfile
    from contextlib import ExitStack

    from hwm.checker.fast.aot import exclusive

    where = hashlib.sha256(str(Path(__file__).resolve().parent).encode()).hexdigest()[:16]
    with ExitStack() as stack:
        try:
            stack.enter_context(exclusive(str(Path(tempfile.gettempdir()) / f"hwm-kernels-{where}.lock")))
        except OSError:  # no writable temporary directory: compile unlocked, as Numba alone would
            pass
        yield


class FastBackend(Backend):
    """Compiled successors on packed rows (one uint8 row per state)."""

    name = "fast"
    unsupported = staticmethod(unsupported)

    def __init__(self, model: Model, symmetry: bool):
        why = unsupported(model)
        if why:
            raise BackendUnavailable(why + "; use --successors reference")
        # A model that gives some servers a place of their own (a variant's counts) is explored without
        # symmetry reduction, as its fingerprint is.
        symmetry = used_symmetry(model, symmetry)
        super().__init__(model, symmetry)
        from hwm.checker.fast.aot import kernels
        from hwm.checker.fast.checks import CompiledProperties
        from hwm.checker.fast.fields import PAIR_KINDS
        from hwm.checker.fast.layout import Layout

        _warm("module", kernels)
        self._kernels = kernels()
        self.kernels_origin = self._kernels.origin
        self.layout = layout = Layout(model, symmetry)
        n = model.n
        ids = self.action_ids
        # The elect actions the model has (BookKeeper's has none), as (candidate, voter bit set, id).
        elections = [(c, sum(1 << v for v in voters), ids[("elect", c, voters)])
                     for c in range(n) for voters in model.voter_sets[c] if ("elect", c, voters) in ids]
        self._elect_candidates = np.array([c for c, _, _ in elections], dtype=np.int64)
        self._elect_voters = np.array([voters for _, voters, _ in elections], dtype=np.int64)
        self._elect_ids = np.array([i for _, _, i in elections], dtype=np.int32)
        # Ids of actions a model does not have (ZAB's sync and persist in the raft model) are -1;
        # rows in the order of kernels.WRITE_ID..CHANGE_ENSEMBLE_ID.
        server_ids = np.array([[ids.get((kind, k), -1) for k in range(n)] for kind in
                               ("write", "read", "crash", "restart", "persist", "send_add", "fence", "recovery_read")]
                              + [[ids.get(("add",), -1)] * n] + [[ids.get(("flush", k), -1) for k in range(n)]]
                              + [[ids.get(("partition", k), -1) for k in range(n)]] + [[ids.get(("heal",), -1)] * n]
                              + [[ids.get(("change_ensemble", k), -1) for k in range(n)]],
                              dtype=np.int32)
        self._server_ids = server_ids
        pair_ids = np.full((len(PAIR_KINDS), n, n), -1, dtype=np.int32)
        for j, kind in enumerate(PAIR_KINDS):
            for a, b in model.pairs:
                pair_ids[j, a, b] = ids.get((kind, a, b), -1)
        self._pair_ids = pair_ids
        # The most transitions one state can have (restart excludes write, read and crash; send and
        # replicate belong to different networks; a partitioned model adds a partition per server, or a heal).
        pairs = n * (n - 1)
        self._most = (len(self.actions_by_id) if layout.bookkeeper else
                      len(self._elect_ids) + 3 * n + (3 * pairs if layout.async_network else pairs)
                      + (pairs + n if layout.zab else pairs if layout.kafka else 0)
                      + (pairs if layout.kafka and model.protocol.late_leader_and_isr else 0)
                      + (n if layout.kafka and model.unflushed else 0)
                      + (n if layout.partitioned else 0))
        self.properties = CompiledProperties(layout, self._kernels)
        initial = self.initial()
        with _one_compiler(self._kernels):
            _warm("expand", lambda: self._expand_quietly(initial))
            _warm("fingerprints", lambda: self.fingerprints(initial))
            self.properties.warm(initial, _warm)

    # --------------------------------------------------------------- batches
    def initial(self) -> np.ndarray:
        return self.layout.pack_all([self.model.initial_state()])

    def states(self, batch: np.ndarray) -> list:
        return self.layout.unpack_all(batch)

    def batch_of(self, states: list) -> np.ndarray:
        return self.layout.pack_all(list(states))

    def take(self, batch: np.ndarray, positions: np.ndarray) -> np.ndarray:
        positions = np.asarray(positions, dtype=np.int64)
        if len(positions) and positions[-1] - positions[0] + 1 == len(positions):
            return batch[positions[0]:positions[-1] + 1].copy()  # a slice
        return batch[positions]

    def concat(self, batches: Sequence[np.ndarray]) -> np.ndarray:
        batches = [b for b in batches if len(b)]
        if not batches:
            return np.zeros((0, self.layout.width), dtype=np.uint8)
        return np.concatenate(batches) if len(batches) > 1 else batches[0]

    def to_bytes(self, batch: np.ndarray) -> list[bytes]:
        return [r.tobytes() for r in batch]

    def from_bytes(self, rows: Sequence[bytes]) -> np.ndarray:
        if not rows:
            return np.zeros((0, self.layout.width), dtype=np.uint8)
        return np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(len(rows), self.layout.width).copy()

    # ------------------------------------------------------------ successors
    def fingerprints(self, batch: np.ndarray) -> np.ndarray:
        layout = self.layout
        fps = np.zeros(len(batch), dtype=np.uint64)
        self._kernels.fingerprints(layout.params, np.ascontiguousarray(batch), layout.perms, layout.encoding_size,
                                   fps)
        return fps

    def expand(self, batch: np.ndarray) -> Expansion:
        layout = self.layout
        size = len(batch) * self._most
        out = np.empty((size, layout.width), dtype=np.uint8)
        parents = np.empty(size, dtype=np.int64)
        actions = np.empty(size, dtype=np.int32)
        fps = np.empty(size, dtype=np.uint64)
        hits = np.zeros(len(_BOUNDS), dtype=np.int64)
        t = self._kernels.expand(layout.params, np.ascontiguousarray(batch), self._elect_candidates,
                                 self._elect_voters, self._elect_ids, self._server_ids, self._pair_ids, layout.perms,
                                 layout.encoding_size, out, parents, actions, fps, hits)
        if layout.params[RULE_RAISED]:
            layout.params[RULE_RAISED] = 0
            self._rule_raised(batch)
        bounds_hit = {name for name, hit in zip(_BOUNDS, hits.tolist()) if hit}
        return Expansion(out[:t], fps[:t].copy(), parents[:t].copy(), actions[:t].copy(), bounds_hit)

    def _expand_quietly(self, batch: np.ndarray) -> None:
        """expand, where a variant's rule that raises is left for the search to meet and report."""
        try:
            self.expand(batch)
        except HookError:
            pass

    def _rule_raised(self, batch: np.ndarray) -> None:
        """A rule table's entry whose rule raised was looked up: the reference model, asked the same
        states, raises the rule's error (a HookError naming the state and the action), as the reference
        backend does."""
        for state in self.states(batch):
            for _ in self.model.successors(state):
                pass
        raise RuntimeError("a variant's rule table gave an answer its rule raised on, but the reference model "
                           "expanded the same states without asking it: please report this")

    # ------------------------------------------------------------ properties
    def check_states(self, batch: np.ndarray, props: Sequence) -> dict[str, tuple[int, str]]:
        return self.properties.check_states(self, batch, props)

    def check_steps(self, frontier: np.ndarray, expansion: Expansion, props: Sequence) -> dict[str, tuple[int, str]]:
        return self.properties.check_steps(self, frontier, expansion, props)
