"""The compiled backend (checker/fast) against the readable model it transcribes.

The models (`model/actions.py`, `model/zab.py`, `model/bookkeeper.py`,
`model/kafka.py`, and the partitioned `model/partition.py`, `model/zab_partition.py`) and the
properties (`properties/catalogue.py`, `properties/acked.py`, `properties/leases.py`,
`properties/step_down.py`, BookKeeper's `properties/ledger.py`) are the specification. Here, on random
reachable states of every preset and every flag value of every system (the rpc network, and the async
one where the model has it; 3 and 4 servers; with partitions where the kernels have them; BookKeeper's
ledgers on five bookies too; with and without symmetry): the same transitions in the same order,
the same successor states and fingerprints, the same bounds; packing round-trips;
the compiled properties agree with the Python ones on states and steps. Whole
reports (counts, depth, bounds, verdicts, traces) on every non-deep pin are
compared in tests/checker/test_engine.py (test_every_backend_reproduces_the_pins[fast]).
"""

import hashlib
import random
import zlib
from dataclasses import fields, replace

import numpy as np
import pytest

from hwm.model.actions import Model
from hwm.model.raft import RaftModel
from hwm.model.registry import build_model
from hwm.checker.backend import BackendUnavailable, make_backend
from hwm.checker.fast import KNOWN_FLAGS, NOT_COMPILED, NOT_COMPILED_FLAGS, NOT_COMPILED_PARTITIONS, FastBackend, \
    compile_seconds, unsupported
from hwm.checker.fast.blake2b import blake2b64_of
from hwm.checker.fast.checks import compiled_code
from hwm.checker.fast.properties import state_found, step_found
from hwm.model.state import FOLLOWER, LEADER, Config, Server, State
from hwm.model.bookkeeper import BookKeeperState
from hwm.model.kafka import KafkaServer, KafkaState
from hwm.model.partition import PartitionState
from hwm.model.zab import ZabState
from hwm.model.zab_partition import ZabPartitionState
from hwm.properties.protocol import FLAG_SYSTEMS, FLAG_VALUES, PRESET_TOUR_BOUNDS, PRESETS, RAFT, ZAB, BOOKKEEPER, KAFKA, Protocol, flags_of

RPC = Config(servers=3, max_generation=3, max_log=2, max_crashes=1, network="rpc")
ASYNC = Config(servers=3, max_generation=2, max_log=1, max_crashes=1, network="async", channel_capacity=2)
# Four servers: the seed's quorum index differs from a majority only for an even count.
RPC4 = Config(servers=4, max_generation=2, max_log=2, max_crashes=1, network="rpc")
# Partitions (model/partition.py, zab_partition.py): two cuts on three servers (a heal between them), one on four.
CUT = replace(RPC, max_partitions=2)
CUT4 = replace(RPC4, max_partitions=1)
PARTITIONED_SYSTEMS = [system for system in ("raft", "zab", "kafka") if system not in NOT_COMPILED_PARTITIONS]

# Every preset of each compiled system, and each compiled system with every value of every flag
# that applies to it. Presets and flag values of systems without a compiled form (NOT_COMPILED):
# test_every_preset_and_flag_value_has_a_fast_path fails naming each of them, once, rather than
# every test here.
COMPILED_SYSTEMS = [system for system in FLAG_VALUES["system"] if system not in NOT_COMPILED]
def _compiled(protocol: Protocol) -> bool:
    return protocol.system in COMPILED_SYSTEMS and not any(_refused(protocol, f) for f in NOT_COMPILED_FLAGS)


def _refused(protocol: Protocol, flag: str) -> bool:
    """Whether `protocol` sets a NOT_COMPILED_FLAGS flag away from its default (the kernels know the default)."""
    return getattr(protocol, flag) != getattr(Protocol(), flag)


PROTOCOLS = {name: p.protocol for name, p in PRESETS.items() if _compiled(p.protocol)}
for _system in COMPILED_SYSTEMS:
    for _flag in flags_of(_system):
        for _value in FLAG_VALUES[_flag]:
            if _flag in NOT_COMPILED_FLAGS:  # refused by name (below); the default is the system's own
                continue
            PROTOCOLS[f"{_system}+{_flag}={_value}"] = replace(Protocol(system=_system), **{_flag: _value})
# Each protocol on each configuration its model accepts (ZAB runs on the rpc network only); on a network
# that partitions, every preset of a system with compiled partitions, and the values of the flags that
# act on a cut or change what a cut-off server does.
ACT_ON_A_CUT = ("check_quorum", "lease_reads", "controller_fencing", "late_leader_and_isr", "log_flush")
CASES = []
for _name, _protocol in PROTOCOLS.items():
    _configs = [("rpc", RPC), ("async", ASYNC), ("rpc4", RPC4)]
    if _protocol.system in PARTITIONED_SYSTEMS and (_name in PRESETS or any(f"+{flag}=" in _name
                                                                            for flag in ACT_ON_A_CUT)):
        _configs += [("cut", CUT), ("cut4", CUT4)]
    for _id, _config in _configs:
        try:
            build_model(_protocol, _config)
        except ValueError:
            continue
        CASES.append(pytest.param(_name, _config, id=f"{_name}-{_id}"))


def reachable(model: Model, count: int, seed: int) -> list[State]:
    """`count` states met on random walks from the initial state (each walk up to 40 steps)."""
    rng = random.Random(seed)
    states: list[State] = []
    while len(states) < count:
        state = model.initial_state()
        for _ in range(rng.randrange(1, 40)):
            successors = list(model.successors(state))
            if not successors:
                break
            state = rng.choice(successors)[1]
            states.append(state)
    return states[:count]


# Under -m deep: Numba compiles the function for this test alone (ten seconds of CPU on a fresh clone). By
# default the compiled module's fingerprints, which hash each encoding with the same function, equal
# hashlib's (model.encoding) on every successor test_successors_equal_the_reference samples.
@pytest.mark.deep
def test_blake2b_is_hashlibs():
    rng = random.Random(1)
    for length in [*range(0, 260), 383, 384, 385]:
        data = bytes(rng.randrange(256) for _ in range(length))
        want = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")
        assert int(blake2b64_of(np.frombuffer(data, dtype=np.uint8))) == want, length


def assert_successors_equal(model, samples: list) -> None:
    """Same transitions, order, states, fingerprints and bounds as `model`, state by state."""
    for symmetry in (True, False):
        backend = FastBackend(model, symmetry)
        rows = backend.batch_of(samples)
        expansion = backend.expand(rows)
        parents = expansion.parents.tolist()
        got_states = backend.states(expansion.successors)
        for position, state in enumerate(samples):
            assert backend.states(rows[position:position + 1])[0] == state  # the packing round-trips
            hit: set = set()
            want = list(model.successors(state, hit))
            mine = [t for t, p in enumerate(parents) if p == position]
            assert [backend.action(int(expansion.actions[t])) for t in mine] == [a for a, _ in want], state.describe()
            assert [got_states[t] for t in mine] == [s for _, s in want], state.describe()
            assert [int(expansion.fingerprints[t]) for t in mine] == [model.fingerprint(s, symmetry) for _, s in want]
            single = backend.expand(rows[position:position + 1])
            assert single.bounds_hit == hit, state.describe()
        assert backend.fingerprints(rows).tolist() == [model.fingerprint(s, symmetry) for s in samples]


@pytest.mark.parametrize("name,config", CASES)
def test_successors_equal_the_reference(name, config):
    """On random reachable states of every preset and flag value."""
    model = build_model(PROTOCOLS[name], config)
    assert_successors_equal(model, reachable(model, 60, seed=zlib.crc32(name.encode())))


def breadth_first(model, count: int) -> list:
    """The first `count` distinct states in breadth-first order (every state near the initial one)."""
    states = [model.initial_state()]
    seen = set(states)
    for state in states:
        if len(states) >= count:
            break
        for _, successor in model.successors(state):
            if successor not in seen:
                seen.add(successor)
                states.append(successor)
    return states[:count]


# Two servers with two entries each: small enough to take every state near the start, large
# enough for KIP-279's divergence, a ZAB resynchronisation and a closed BookKeeper ledger.
SMALL = Config(servers=2, max_generation=3, max_log=2, max_crashes=1, network="rpc")


@pytest.mark.parametrize("name", [n for n, p in PRESETS.items()
                                  if p.protocol.system != "raft" and n in PROTOCOLS])
def test_successors_equal_the_reference_breadth_first(name):
    """On the first 500 states of a breadth-first search of every preset of the systems beyond the raft
    family (whose rules reach further from the start): the corners a random walk misses. A BookKeeper
    ledger with an ensemble of its own size runs on three bookies (striping on three, a spare for two)."""
    protocol = PRESETS[name].protocol
    model = build_model(protocol, SMALL if protocol.ensemble_size == "all" else replace(SMALL, servers=3))
    assert_successors_equal(model, breadth_first(model, 500))


# Five bookies, three entries, three crashes: striping with spares (bookkeeper-striped's E=3 of 5), a second
# ensemble change.
LEDGER = Config(servers=5, max_generation=2, max_log=3, max_crashes=3, network="rpc")
LEDGER_PRESETS = [name for name, p in PRESETS.items() if p.protocol.system == "bookkeeper"
                  and p.protocol.ensemble_size != "all"]


@pytest.mark.parametrize("name", LEDGER_PRESETS)
def test_ledger_successors_equal_the_reference(name):
    """BookKeeper's ledgers where their rules meet: stripes over an ensemble with a spare, a second
    ensemble change, a change the metadata does not hold, recovery over several fragments."""
    model = build_model(PRESETS[name].protocol, LEDGER)
    assert_successors_equal(model, ledger_samples(model, name))


def ledger_samples(model, name: str) -> list:
    """Random reachable states of a ledger preset, with those where its rules meet: ensemble changes (the
    most first), a closed ledger, a change the metadata does not hold (without blocked add completions)."""
    walked = reachable(model, 3000, seed=zlib.crc32(name.encode()))
    corners = [sorted((s for s in walked if s.ensembles), key=lambda s: -len(s.ensembles)),
               [s for s in walked if model.closed(s)]]
    if not model.block_add_completions:
        corners.append([s for s in walked if s.stored < len(s.ensembles)])
    assert all(corners), [len(c) for c in corners]
    return walked[:150] + [s for corner in corners for s in corner[:50]]


def _planted(monkeypatch, field, value):
    """Kernels that read `value` for P[field] (one ledger rule changed in the kernels only)."""
    from hwm.checker.fast import layout

    built = layout.Layout.__init__

    def planted(self, model, symmetry):
        built(self, model, symmetry)
        self.params[field] = value(self.params)

    monkeypatch.setattr(layout.Layout, "__init__", planted)


# Each BookKeeper ledger flag's value changed in the kernels only: (preset, P's field, its planted value).
PLANTS = {
    "ensemble_size": ("bookkeeper-striped", "ENSEMBLE_SIZE", lambda P, K: P[K.ENSEMBLE_SIZE] - 1),
    "write_quorum": ("bookkeeper-striped", "WRITE_QUORUM", lambda P, K: P[K.ENSEMBLE_SIZE]),  # no stripes
    "ack_quorum": ("bookkeeper-striped", "ACK_QUORUM", lambda P, K: P[K.ACK_QUORUM] - 1),
    "bookkeeper_block_add_completions": ("bookkeeper-ensemble-change", "BLOCK_ADDS", lambda P, K: 0),
}


@pytest.mark.parametrize("flag", PLANTS)
def test_a_planted_ledger_rule_makes_the_successors_differ(monkeypatch, flag):
    """Check the check: kernels that read another value of one ledger flag than the model (a smaller
    ensemble, entries sent to the whole ensemble, a smaller ack quorum, an ensemble change kept after
    recovery began) fail the agreement above."""
    from hwm.checker.fast import fields as K

    name, field, value = PLANTS[flag]
    _planted(monkeypatch, getattr(K, field), lambda P: value(P, K))
    model = build_model(PRESETS[name].protocol, LEDGER)
    samples = ledger_samples(model, name)
    with pytest.raises(AssertionError):
        assert_successors_equal(model, samples)


@pytest.mark.parametrize("name", [n for n, p in PRESETS.items() if p.protocol.system in PARTITIONED_SYSTEMS
                                  and (PRESET_TOUR_BOUNDS.get(n, {}).get("max_partitions") or n in ("raft", "zab"))])
def test_partitioned_successors_equal_the_reference_breadth_first(name):
    """The same near the start of a partitioned network, on three servers: a cut and a heal in the
    first steps, a leader stepping down as it is cut off, the timing rules refusing votes."""
    model = build_model(PRESETS[name].protocol, replace(CUT, max_crashes=0))
    assert_successors_equal(model, breadth_first(model, 500))


def random_state(rng: random.Random, config: Config) -> State:
    """Any snapshot within the bounds, reachable or not: the properties are defined on every one."""
    n, max_log, max_generation = config.servers, config.max_log, config.max_generation
    servers = []
    for _ in range(n):
        log = tuple(sorted(rng.randint(1, max_generation) for _ in range(rng.randint(0, max_log))))
        if rng.random() < 0.3:
            log = tuple(rng.randint(1, max_generation) for _ in log)
        leader = rng.random() < 0.4
        servers.append(Server(rng.randint(0, max_generation), LEADER if leader else FOLLOWER, log,
                              rng.randint(0, max_log), rng.random() < 0.8,
                              tuple(rng.randint(0, max_log) for _ in range(n)) if leader else ()))
    reads = frozenset((rng.randint(1, max_log), rng.randint(1, max_generation)) for _ in range(rng.randint(0, 3)))
    return State(tuple(servers), reads, rng.randint(0, config.max_crashes), ())


def with_acked(rng: random.Random, config: Config, state: State) -> ZabState:
    """A random snapshot with ZAB's extras: anything within the bounds, acked entries included."""
    n = config.servers
    acked = frozenset((rng.randint(1, config.max_log), rng.randint(1, config.max_generation))
                      for _ in range(rng.choice((0, 0, 1, 2))))
    return ZabState(state.servers, state.reads, state.crashes, (), tuple(rng.randrange(256) for _ in range(n)),
                    tuple(rng.randint(0, config.max_log) for _ in range(n)),
                    tuple(rng.randint(0, config.max_generation) for _ in range(n)), acked)


def bookkeeper_state(rng: random.Random, config: Config, state: State) -> BookKeeperState:
    """A random snapshot of the bookies, the writer and the recovery client, with their bits and acked."""
    clients = random_state(rng, replace(config, servers=2)).servers
    writer = clients[0]._replace(match=tuple(rng.randint(0, config.max_log) for _ in range(config.servers + 2))
                                 if clients[0].role == LEADER else ())
    recovery = clients[1]._replace(match=())
    acked = frozenset((i, 1) for i in range(1, rng.randint(0, config.max_log) + 1))
    bits = [rng.randrange(1 << config.servers) for _ in range(3)]
    servers = tuple(s._replace(role=FOLLOWER, match=()) for s in state.servers)
    return BookKeeperState(servers + (writer, recovery), state.reads, state.crashes, (), *bits, acked)


def ledger_state(model):
    """`bookkeeper_state` with holes in the bookies' logs and, where `model`'s ensemble has spares, up to
    max_crashes ensemble changes of its size, some of them not in the ledger metadata."""
    def extend(rng: random.Random, config: Config, state: State) -> BookKeeperState:
        s = bookkeeper_state(rng, config, state)
        n, size = config.servers, model.ledger.ensemble_size
        bookies = tuple(b._replace(log=tuple(0 if rng.random() < 0.3 else g for g in b.log)) for b in s.servers[:n])
        ensembles = tuple((rng.randint(1, config.max_log + 1), tuple(rng.sample(range(n), size)))
                          for _ in range(rng.randint(0, config.max_crashes) if size < n else 0))
        return s._replace(servers=bookies + s.servers[n:], ensembles=ensembles, stored=rng.randint(0, len(ensembles)))
    return extend


def with_cut(rng: random.Random, config: Config, state):
    """A random snapshot with a partitioned model's cut (any bits, not only the model's one isolated
    server: the properties are defined on every one) and partitions made."""
    cut = tuple(rng.random() < 0.4 for _ in range(config.servers))
    partitions = rng.randint(0, config.max_partitions)
    if isinstance(state, ZabState):
        return ZabPartitionState(*state, cut, partitions)
    return PartitionState(*state, cut, partitions)


def kafka_state(rng: random.Random, config: Config, state: State) -> KafkaState:
    """A random snapshot of Kafka's replicas: ISR, leaders, truncating, acked."""
    n = config.servers
    servers = tuple(KafkaServer(*s, rng.random() < 0.6, rng.randint(0, n), rng.random() < 0.3) for s in state.servers)
    acked = frozenset((rng.randint(1, config.max_log), rng.randint(1, config.max_generation))
                      for _ in range(rng.choice((0, 0, 1, 2))))
    return KafkaState(servers, state.reads, state.crashes, (), acked)


def compiled_agree(model, presets, extend=lambda rng, config, state: state) -> dict[str, int]:
    """Compare every compiled property of `model`'s catalogue with its Python check, on random snapshots
    (`extend` adds a system's extras) and on the reachable steps of `presets`; how often each was found."""
    config = model.config
    backend = FastBackend(model, True)
    P = backend.layout.params
    compiled = [(p, compiled_code(p)) for p in model.properties if compiled_code(p) is not None]
    rng = random.Random(7)
    found = {p.name: 0 for p, _ in compiled}
    pairs = [(extend(rng, config, random_state(rng, config)), extend(rng, config, random_state(rng, config)))
             for _ in range(3000)]
    for preset in presets:
        model = build_model(PRESETS[preset].protocol, config)
        for state in reachable(model, 150, seed=3):
            pairs += [(state, succ) for _, succ in model.successors(state)]
    for before, after in pairs:
        row_before, row_after = backend.layout.pack(before), backend.layout.pack(after)
        for p, code in compiled:
            if p.on == "state":
                want = bool(p.check(after))
                assert state_found(P, row_after, code) == want, (p.name, after)
            else:
                want = bool(p.check(before, after))
                assert step_found(P, row_before, row_after, code) == want, (p.name, before, after)
            found[p.name] += want
    return found


def test_compiled_properties_equal_the_catalogue():
    """On random snapshots and steps, and on reachable steps of broken presets: each property found
    exactly where the Python one is, and every property found somewhere (no vacuous agreement)."""
    found = compiled_agree(RaftModel(RAFT, RPC), ("seed", "kip101", "raft-any-generation-commit", "raft-noop"))
    assert found and all(found.values()), found


def test_compiled_properties_equal_the_catalogue_on_zab():
    """The same on ZAB's rows, whose catalogue adds the acknowledged-write properties."""
    found = compiled_agree(build_model(ZAB, RPC), ("zab", "zab-ack-before-persist"), with_acked)
    assert {"AckedWriteNeverLost", "WriteAcknowledged"} <= set(found) and all(found.values()), found


def test_compiled_properties_equal_the_catalogue_on_bookkeeper():
    """The same on BookKeeper's rows: the bookies, then the writer and the recovery client."""
    found = compiled_agree(build_model(BOOKKEEPER, RPC), ("bookkeeper", "bookkeeper-recovery-without-fencing"),
                           bookkeeper_state)
    assert {"AckedWriteNeverLost", "WriteAcknowledged"} <= set(found) and all(found.values()), found


@pytest.mark.parametrize("name", LEDGER_PRESETS)
def test_compiled_properties_equal_the_ledgers(name):
    """The same for properties/ledger.py's properties (copies on AQ bookies of an entry's write set, holes
    that are no entries), on each ledger preset's rows: its stripes and its ensemble changes."""
    model = build_model(PRESETS[name].protocol, LEDGER)
    assert model.in_ledger_terms
    found = compiled_agree(model, (name,), ledger_state(model))
    assert {"ReadNeverTruncated", "HwmNeverTruncated", "CommittedOnQuorum", "AckedWriteNeverLost", "LogMatching",
            "UncommittedTruncated"} <= set(found) and all(found.values()), found


def test_compiled_properties_equal_the_catalogue_on_kafka():
    """The same on Kafka's rows, whose catalogue adds acks=all's statement about new leaders."""
    found = compiled_agree(build_model(KAFKA, RPC), ("kafka-truncate-to-hwm", "kafka-kip101", "kafka-unclean-election"),
                           kafka_state)
    assert {"AckedWriteNeverLost", "WriteAcknowledged", "AcknowledgedWriteKept"} <= set(found), found
    assert all(found.values()), found


def test_compiled_properties_equal_the_catalogue_on_partitions():
    """The same on the partitioned rows: the lease properties (raft's lease_reads) and ZAB's step-down
    witness, with the cut bits in the rows."""
    found = compiled_agree(build_model(PRESETS["raft-lease-reads"].protocol, CUT),
                           ("raft-lease-reads", "raft-lease-reads-without-check-quorum"), with_cut)
    assert {"LeaseReadNeverStale", "LeaseHolderPartitioned"} <= set(found) and all(found.values()), found
    found = compiled_agree(build_model(PRESETS["zab-step-down"].protocol, CUT), ("zab-step-down",),
                           lambda rng, config, state: with_cut(rng, config, with_acked(rng, config, state)))
    assert "LeaderStepsDown" in found and all(found.values()), found


def test_kafka_truncation_rules_are_the_kernels():
    """The follower_truncation values the backend accepts are the ones the kernels implement, by name."""
    from hwm.checker.fast.kernels import TRUNCATIONS

    assert KNOWN_FLAGS["follower_truncation"] == TRUNCATIONS


def test_every_catalogue_property_has_an_up_to_date_compiled_form():
    """A property added or changed in the catalogue is checked in Python (slowly) until compiled again."""
    models = [build_model(Protocol(system=system), RPC) for system in COMPILED_SYSTEMS]
    models += [build_model(PRESETS[name].protocol, LEDGER) for name in LEDGER_PRESETS]  # properties.ledger's
    models += [build_model(PRESETS[name].protocol, CUT) for name in PROTOCOLS
               if name in PRESETS and PRESETS[name].protocol.system in PARTITIONED_SYSTEMS]
    stale = sorted({p.name for model in models for p in model.properties if compiled_code(p) is None})
    assert not stale, (f"no compiled form (checker/fast/properties.py, listed in checker/fast/checks.py) of the current "
                       f"source of: {', '.join(stale)}")


def test_every_preset_and_flag_value_has_a_fast_path():
    """Fails, naming them, for presets and flag values the kernels do not implement yet."""
    # A flag of a system without a compiled model (NOT_COMPILED, each with its reason) has no kernel
    # to reach; every other flag value must be compiled.
    only_uncompiled = {flag for flag, systems in FLAG_SYSTEMS.items()
                       if flag != "system" and set(systems) <= set(NOT_COMPILED)}
    missing = [f"flag {flag}={value!r}" for flag, values in FLAG_VALUES.items() for value in values
               if value not in KNOWN_FLAGS.get(flag, ()) and flag not in only_uncompiled
               and not (flag == "system" and value in NOT_COMPILED)
               and not (flag in NOT_COMPILED_FLAGS and value != getattr(Protocol(), flag))]
    assert set(NOT_COMPILED) <= set(FLAG_VALUES["system"])
    for name, preset in PRESETS.items():
        if preset.protocol.system in NOT_COMPILED:
            with pytest.raises(BackendUnavailable, match=f"no compiled {preset.protocol.system} model yet"):
                make_backend("fast", build_model(preset.protocol, RPC), True)
            continue
        for config in (RPC, ASYNC, CUT):
            try:
                model = build_model(preset.protocol, config)
            except ValueError:  # the model itself refuses this network: nothing to compile
                continue
            why = unsupported(model)
            if config.max_partitions and preset.protocol.system in NOT_COMPILED_PARTITIONS:
                # refused, naming the system and the listed reason
                assert why and NOT_COMPILED_PARTITIONS[preset.protocol.system] in why, (name, why)
                continue
            listed = [f for f in NOT_COMPILED_FLAGS if _refused(preset.protocol, f)]
            if listed:  # refused, naming the flag and the listed reason
                assert why and listed[0] in why and NOT_COMPILED_FLAGS[listed[0]] in why, (name, why)
            elif why:
                missing.append(f"preset {name} ({config.network}): {why}")
    assert not missing, "no fast path for:\n" + "\n".join(missing)


def test_unknown_models_and_flags_are_refused_by_name():
    class Product(RaftModel):
        pass

    with pytest.raises(BackendUnavailable,
                       match="compiles RaftModel, ZabModel, BookKeeperModel, KafkaModel, PartitionedRaftModel, "
                             "PartitionedZabModel and PartitionedKafkaModel only, not Product"):
        make_backend("fast", Product(RAFT, RPC), True)
    assert FastBackend(RaftModel(RAFT, RPC), True).name == "fast"
    # BookKeeper's writer and recovery client are servers of its rows (permuted under symmetry).
    assert unsupported(build_model(BOOKKEEPER, replace(RPC, servers=6))) == \
        "the fast backend handles up to 5 bookies, not 6"
    assert unsupported(build_model(BOOKKEEPER, replace(RPC, servers=5))) is None
    assert set(f.name for f in fields(Protocol)) == set(FLAG_VALUES)


def test_batches_round_trip_through_bytes_and_takes():
    model = RaftModel(PRESETS["kip101"].protocol, ASYNC)
    backend = FastBackend(model, True)
    states = reachable(model, 50, seed=5)
    batch = backend.batch_of(states)
    assert backend.states(backend.from_bytes(backend.to_bytes(batch))) == states
    picked = np.array([1, 4, 9, 10, 11])
    assert backend.states(backend.take(batch, picked)) == [states[k] for k in picked]
    assert backend.states(backend.concat([backend.take(batch, np.arange(3)), backend.take(batch, np.arange(3, 50))])) \
        == states
    assert set(compile_seconds()) >= {"expand", "fingerprints", "state properties", "step properties"}


def test_limits_and_workers_give_the_reference_report():
    """State and depth limits cut the search at the same state; forked workers run the kernels too."""
    from hwm.checker.run import CheckRequest, run

    model = RaftModel(PRESETS["kip101"].protocol, Config(3, 3, 1, 1, "rpc"))

    def outcome(**options):
        data = run(CheckRequest("kip101", **options), model=model).to_json()
        for timing_or_name in ("seconds", "setup_seconds", "successors"):
            del data[timing_or_name]
        return data

    for limits in ({"max_states": 700}, {"max_depth": 6}, {"max_states": 1}):
        assert outcome(successors="fast", chunk=13, **limits) == outcome(**limits)
    assert outcome(successors="fast", workers=2, chunk=97) == outcome()


_COMPILE_ONCE = """
from hwm.model.registry import build_model
from hwm.checker.fast import FastBackend, compile_seconds
from hwm.model.state import Config
from hwm.properties.protocol import PRESETS
FastBackend(build_model(PRESETS["raft"].protocol, Config(servers=2, max_generation=1, max_log=1,
                                                         max_crashes=0)), True)
print(compile_seconds()["expand"])
"""


@pytest.mark.deep
def test_processes_that_start_at_once_compile_the_kernels_once(tmp_path):
    """Under the JIT (the fallback when the module cannot be built), two processes on an empty
    Numba cache: one compiles (tens of seconds), the other waits for
    it and loads the machine code (checker.fast._one_compiler), instead of both compiling."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(root), "HWM_KERNELS": "jit"}
    runs = [subprocess.Popen([sys.executable, "-c", _COMPILE_ONCE], cwd=root, env=env, text=True,
                             stdout=subprocess.PIPE) for _ in range(2)]
    seconds = sorted(float(run.communicate(timeout=600)[0]) for run in runs)
    assert seconds[1] > 5, seconds  # a real compile happened
    assert seconds[0] < 2, seconds  # and only one
