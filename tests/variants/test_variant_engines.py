"""A variant on the compiled backend (checker.fast): its constant rules (which servers count, Q1, Q2) are
data for the kernels, its rules asked of every state are tables of their answers (checker.fast.rule_tables),
and the search must find what the reference backend finds, count for count and trace for trace; rules
whose tables do not fit keep the reference backend, named."""

from __future__ import annotations

import textwrap

import pytest
from click.testing import CliRunner

from hwm.checker.auto_backend import auto_backend
from hwm.checker.run import CheckRequest, run
from hwm.cli import main
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.protocol import PRESETS, resolve

from tests.variants.test_variants import FLEXIBLE

pytest.importorskip("numba")

RULES = '''
from hwm.model.variant import Variant
from hwm.properties.quorum import majority


def learner_stores_entry(view):
    """the learner stores an entry"""
    return "S4 stores an entry" if view.servers[3].log else None


class Majority(Variant):
    """Raft's own rules, Q2 said explicitly: the raft preset's search."""

    def replication_quorum(self):
        return majority(self.servers)


class Learner(Variant):
    """S4 is a learner: it never votes, never leads, and its copy does not count."""

    witnesses = {"LearnerStoresEntry": learner_stores_entry}

    def counts(self, server):
        return server != 3


class SeedLearner(Learner):
    """The seed's rules with a learner: ceil(3/2) = 2 of the three counting servers commit."""

    base = "seed"


class TrustingLeader(Variant):
    """A leader commits whatever its quorum index is: a rule asked of every state."""

    def may_commit(self, index, log, generation):
        return True


class SeedUpToDate(Variant):
    """The seed's rules with Raft 5.4.1's vote, written as the rule."""

    base = "seed"

    def grants_vote(self, candidate_log, voter_log):
        last = lambda log: (log[-1] if log else 0, len(log))
        return last(candidate_log) >= last(voter_log)


class EveryCopy(Variant):
    """The HWM is the lowest match index: every server must hold an entry."""

    def quorum_index(self, match):
        return min(match)


class CommitsOwnGeneration(Variant):
    """Raft 5.4.2 written as the rule; it raises where no reachable leader asks (generation 0)."""

    def may_commit(self, index, log, generation):
        if generation == 0:
            raise ValueError("no leader has generation 0")
        return index <= len(log) and log[index - 1] == generation


class LeaseFollowerReads(Variant):
    """Followers serve their whole log, on the partitioned model with leases."""

    base = "raft-lease-reads"

    def readable(self, server, leading, log, hwm):
        return min(hwm, len(log)) if leading else len(log)


class ZabEveryCopy(Variant):
    """ZAB's leader commits what every server acknowledged."""

    base = "zab"

    def quorum_index(self, match):
        return min(match)


class ZabCommitsOwnEpoch(Variant):
    """ZAB's leader commits by counting only a proposal of its own epoch."""

    base = "zab"

    def may_commit(self, index, log, generation):
        return index <= len(log) and log[index - 1] == generation


class ServesNothingCommitted(Variant):
    """A leader with a committed entry raises when asked to serve it."""

    def readable(self, server, leading, log, hwm):
        if leading and hwm:
            raise ValueError("a leader asked to serve its committed entries")
        return min(hwm, len(log))
'''
from tests.variants.test_variant_server_rules import RULES as SERVER_RULES  # noqa: E402

OBSERVERS = FLEXIBLE.parent / "zab_observers.py"
KAFKA_ISR = FLEXIBLE.parent / "kafka_isr.py"

FOUR = Config(**{"servers": 4, "max_generation": 3, "max_crashes": 0})
# (variant, bounds, distinct states, transitions, depth): the reference backend's search, pinned.
CASES = [
    (f"{FLEXIBLE}:Flexible", FOUR, 1441, 9999, 12),
    (f"{FLEXIBLE}:FlexibleTooSmall", FOUR, 717, 5126, 12),
    ("Majority", Config(), None, None, None),  # the raft preset's own numbers, below
    ("Learner", Config(servers=4, max_generation=2, max_crashes=0), 4033, 20907, 10),
    ("SeedLearner", Config(servers=4, max_generation=2, max_crashes=0), 10651, 55434, 12),
    (f"{FLEXIBLE}:FlexibleTooSmall", Config(max_generation=1, max_log=1, max_crashes=0, network="async",
                                            channel_capacity=1), 427, 2604, 15),
    (f"{OBSERVERS}:Observer", Config(servers=4, max_generation=2, max_crashes=0), 5278, 26583, 11),  # ZAB: Q1, Q2
    (f"{OBSERVERS}:ObserverAckedAlone", Config(servers=4, max_generation=2, max_crashes=0), 4519, 22362, 12),
    (f"{KAFKA_ISR}:AllInSync", Config(servers=3, max_generation=2, max_crashes=0), 481, 1437, 10),  # Kafka's Q2
    (f"{KAFKA_ISR}:UncountedReplica", Config(servers=3, max_generation=2, max_crashes=0), 3570, 10530, 10),  # counts
]


@pytest.fixture(scope="module")
def rules(tmp_path_factory):
    path = tmp_path_factory.mktemp("variants") / "rules.py"
    path.write_text(textwrap.dedent(RULES))
    return path


def _spec(rules, name: str) -> str:
    return name if ":" in name else f"{rules}:{name}"


def _search(spec: str, config: Config, successors: str):
    _, protocol = resolve(spec)
    return run(CheckRequest(spec, successors=successors), model=build_model(protocol, config))


def _seen(report) -> tuple:
    """What a search found: counts, depth, and per property its verdict, finding and shortest trace."""
    return (report.states, report.transitions, report.depth, report.error,
            {name: (r.found, r.length, r.finding, r.actions) for name, r in report.results.items()})


@pytest.mark.parametrize("name, config, states, transitions, depth", CASES,
                         ids=[f"{c[0].rpartition(':')[2]}-{c[1].network}" for c in CASES])
def test_the_engines_agree_on_a_variant(rules, name, config, states, transitions, depth):
    spec = _spec(rules, name)
    reference = _search(spec, config, "reference")
    compiled = _search(spec, config, "fast")
    assert _seen(compiled) == _seen(reference)
    if name == "Majority":  # Q2 said explicitly is raft's own rule: raft's search
        raft = run(CheckRequest("raft", successors="fast"), model=build_model(PRESETS["raft"].protocol, config))
        assert (reference.states, reference.transitions, reference.depth) == (raft.states, raft.transitions,
                                                                              raft.depth)
    else:
        assert (reference.states, reference.transitions, reference.depth) == (states, transitions, depth)


SMALL4 = Config(servers=4, max_generation=2, max_crashes=0)
LOG2 = Config(max_generation=2, max_log=2, max_crashes=1)
# Rules asked of every state, one or more per rule (variant, bounds, distinct states, transitions,
# depth): the reference backend's search, pinned; the compiled one must find the same.
PER_STATE = [
    ("TrustingLeader", SMALL4, 326, 1790, 10),  # may_commit
    ("CommitsOwnGeneration", SMALL4, 334, 1795, 11),  # may_commit, raising where no state asks: raft's search
    ("SeedUpToDate", SMALL4, 270, 1524, 10),  # grants_vote
    ("EveryCopy", SMALL4, 208, 1117, 12),  # quorum_index
    (f"{SERVER_RULES}:TruncateToOwnHwm", LOG2, 5233, 21284, 15),  # restart_keeps: kip101's search
    (f"{SERVER_RULES}:TruncateUnchecked", LOG2, 6007, 24491, 15),  # accepts_append and restart_keeps
    (f"{SERVER_RULES}:TruncateUnchecked", Config(servers=2, max_generation=2, max_log=2, max_crashes=1,
                                                 network="async", channel_capacity=1), 2503, 9972, 23),
    (f"{SERVER_RULES}:LeaderReads", SMALL4, 334, 1570, 11),  # readable
    (f"{SERVER_RULES}:FollowerReadsUnchecked", SMALL4, 383, 2155, 12),
    ("LeaseFollowerReads", Config(max_generation=2, max_log=1, max_crashes=0, max_partitions=1), 273, 982, 11),
    ("ZabEveryCopy", LOG2, 3778, 13318, 15),  # ZAB's quorum_index
    ("ZabCommitsOwnEpoch", LOG2, 5209, 19016, 15),  # ZAB's may_commit
]


@pytest.mark.parametrize("name, config, states, transitions, depth", PER_STATE,
                         ids=[f"{c[0].rpartition(':')[2]}-{c[1].network}{'-partitioned' * bool(c[1].max_partitions)}"
                              for c in PER_STATE])
def test_the_engines_agree_on_rules_asked_of_every_state(rules, name, config, states, transitions, depth):
    spec = _spec(rules, name)
    _, protocol = resolve(spec)
    assert auto_backend(build_model(protocol, config))[0] == "fast"
    reference = _search(spec, config, "reference")
    compiled = _search(spec, config, "fast")
    assert _seen(compiled) == _seen(reference)
    assert (reference.states, reference.transitions, reference.depth) == (states, transitions, depth)


def test_a_rule_that_raises_in_a_reachable_state_stops_both_engines_with_the_same_line(rules):
    spec = _spec(rules, "ServesNothingCommitted")
    reference, compiled = _search(spec, SMALL4, "reference"), _search(spec, SMALL4, "fast")
    assert _seen(compiled) == _seen(reference)
    assert "ServesNothingCommitted.readable raised ValueError: a leader asked to serve its committed entries" \
        in compiled.error, compiled.error


def test_rules_whose_tables_do_not_fit_stay_on_the_reference_backend_by_name(rules):
    """A vote rule over logs of 5 entries of 9 generations would need 10**10 answers."""
    _, protocol = resolve(_spec(rules, "SeedUpToDate"))
    backend, why = auto_backend(build_model(protocol, Config(max_generation=9, max_log=5)))
    assert backend == "reference"
    assert why == ("SeedUpToDate overrides grants_vote, rules asked of every state, and its rules' tables would "
                   "hold 10,000,000,000 answers at these bounds (at most 1,048,576)")
    result = CliRunner().invoke(main, ["check", "--protocol", _spec(rules, "SeedUpToDate"), "--max-generation", "9",
                                       "--max-log", "5", "--successors", "fast"])
    assert result.exit_code == 2, result.output
    assert [line for line in result.output.splitlines() if "SeedUpToDate" in line] == [
        f"Error: --successors fast: SeedUpToDate: {why}; use --successors reference"], result.output


@pytest.mark.parametrize("plant", ["tables dropped", "one answer flipped"])
def test_a_planted_rule_table_bug_makes_the_engines_differ(monkeypatch, plant):
    """Check the check: kernels that ignore the tables (the built-in read rule), or a table with one
    answer wrong, do not find the reference's search of FollowerReadsUnchecked."""
    from hwm.checker.fast import rule_tables

    tabulate = rule_tables.tabulate

    def planted(*args):
        built = tabulate(*args)
        if plant == "tables dropped":
            return []
        table = built[0][1]
        table[table.argmax()] = 0  # the largest index some server serves, served no more
        return built

    monkeypatch.setattr(rule_tables, "tabulate", planted)
    spec = f"{SERVER_RULES}:FollowerReadsUnchecked"
    assert _search(spec, SMALL4, "fast").transitions != 2155


def test_a_zab_leader_established_by_every_server_is_not_the_observers_search(monkeypatch):
    """Check the check: kernels that count every server's NEWLEADER acknowledgement against a
    majority of all (P[ELECTION_QUORUM] and P[COUNTING] ignored) do not find the reference's Observer."""
    from hwm.checker.fast import fields, layout

    built = layout.Layout.__init__

    def planted(self, model, symmetry):
        built(self, model, symmetry)
        self.params[fields.ELECTION_QUORUM] = self.n // 2 + 1

    monkeypatch.setattr(layout.Layout, "__init__", planted)
    _, protocol = resolve(f"{OBSERVERS}:Observer")
    report = run(CheckRequest("Observer", successors="fast", properties=()),
                 model=build_model(protocol, Config(servers=4, max_generation=2, max_crashes=0)))
    assert (report.states, report.transitions) != (5278, 26583)


def test_a_kafka_hw_over_every_isr_copy_is_not_the_uncounted_replicas_search(monkeypatch):
    """Check the check: kernels whose high watermark counts every ISR replica (P[COUNTING] all) do not
    find the reference's UncountedReplica."""
    from hwm.checker.fast import fields, layout

    built = layout.Layout.__init__

    def planted(self, model, symmetry):
        built(self, model, symmetry)
        self.params[fields.COUNTING] = (1 << self.n) - 1

    monkeypatch.setattr(layout.Layout, "__init__", planted)
    _, protocol = resolve(f"{KAFKA_ISR}:UncountedReplica")
    report = run(CheckRequest("UncountedReplica", successors="fast", properties=()),
                 model=build_model(protocol, Config(servers=3, max_generation=2, max_crashes=0)))
    assert (report.states, report.transitions) != (3570, 10530)


@pytest.mark.parametrize("plant", ["every server counts", "symmetry kept"])
def test_a_planted_kernel_bug_makes_the_engines_differ(rules, monkeypatch, plant):
    """Check the check: the learner's search on kernels that count its match index (P's counting mask
    dropped), or that reduce by symmetry though S4 has a place of its own, is not the reference's."""
    from hwm.checker.fast import fields, layout

    built = layout.Layout.__init__

    def planted(self, model, symmetry):
        built(self, model, True if plant == "symmetry kept" else symmetry)
        if plant == "every server counts":
            self.params[fields.COUNTING] = (1 << self.n) - 1

    monkeypatch.setattr(layout.Layout, "__init__", planted)
    _, protocol = resolve(_spec(rules, "Learner"))
    model = build_model(protocol, Config(servers=4, max_generation=2, max_crashes=0))
    # The counts alone (no trace to rebuild).
    report = run(CheckRequest("Learner", successors="fast", properties=()), model=model)
    assert (report.states, report.transitions) != (4033, 20907)


def test_constant_rules_run_compiled(rules):
    for name in ("Majority", "Learner", "SeedLearner"):
        _, protocol = resolve(_spec(rules, name))
        assert auto_backend(build_model(protocol, Config(servers=4)))[0] == "fast"


def test_a_property_failing_on_the_compiled_backend_keeps_the_partial_report(tmp_path):
    path = tmp_path / "boom.py"
    path.write_text("from hwm.model.variant import Variant\nclass V(Variant):\n"
                    "    invariants = {'Boom': lambda view: view.nothing}\n")
    result = CliRunner().invoke(main, ["check", "--protocol", f"{path}:V", "--max-generation", "2",
                                       "--max-crashes", "0", "--successors", "fast"])
    assert result.exit_code == 2, result.output
    assert "successors fast" in result.output and "INTERRUPTED: an error in the variant" in result.output
    assert "boom.py:3: invariant Boom raised AttributeError" in result.output


def test_the_compiled_quorum_properties_count_the_variants_replication_quorum():
    """ReadNeverTruncated and CommittedOnQuorum count Q2 under a variant (catalogue.at_quorum); their
    compiled forms count P[NEEDED]: equal to the Python checks on random snapshots and reachable steps,
    with Flexible's Q2 = 2 of 4 where a majority is 3."""
    from tests.checker.test_fast import compiled_agree

    _, protocol = resolve(f"{FLEXIBLE}:Flexible")
    model = build_model(protocol, Config(servers=4, max_generation=3, max_log=2, max_crashes=1))
    found = compiled_agree(model, ("seed",))
    assert found["ReadNeverTruncated"] and found["CommittedOnQuorum"], found


def test_the_report_says_symmetry_is_off_where_a_variants_counts_turned_it_off(rules):
    """Learner's S4 has a place of its own: the search runs without symmetry, and the report, its
    header and its JSON say so, as the note does."""
    result = CliRunner().invoke(main, ["check", "--protocol", _spec(rules, "Learner"), "--servers", "4",
                                       "--max-generation", "1", "--max-crashes", "0"])
    assert "symmetry reduction is off" in result.output and "symmetry off" in result.output, result.output
    result = CliRunner().invoke(main, ["check", "--protocol", _spec(rules, "Majority"), "--max-generation", "1",
                                       "--max-crashes", "0"])
    assert "symmetry on" in result.output, result.output
