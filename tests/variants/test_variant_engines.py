"""A variant on the compiled backend (checker.fast): its constant rules (which servers count, Q1, Q2) are
data for the kernels, and the search must find what the reference backend finds, count for count and
trace for trace; a rule asked of every state keeps the reference backend, named."""

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
'''

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


def test_constant_rules_run_compiled_and_a_rule_of_every_state_is_refused_by_name(rules):
    for name in ("Majority", "Learner", "SeedLearner"):
        _, protocol = resolve(_spec(rules, name))
        assert auto_backend(build_model(protocol, Config(servers=4)))[0] == "fast"
    _, protocol = resolve(_spec(rules, "TrustingLeader"))
    backend, why = auto_backend(build_model(protocol, Config()))
    assert backend == "reference"
    assert why == ("TrustingLeader overrides may_commit, a rule asked of every state in Python, which the "
                   "compiled kernels cannot run")
    result = CliRunner().invoke(main, ["check", "--protocol", _spec(rules, "TrustingLeader"), "--successors", "fast"])
    assert result.exit_code == 2, result.output
    assert [line for line in result.output.splitlines() if "TrustingLeader" in line] == [
        f"Error: --successors fast: TrustingLeader: {why}; use --successors reference"], result.output


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
