"""What every engine's report must say about its own traces (shared by tests/checker/test_findings.py and
tests/spark/test_spark_findings.py).

A finding names servers; under symmetry reduction an engine finds a property on one member of a
symmetry class (the Spark engine on the canonical one) while the trace it reports is rebuilt
through another member. The finding must be the rebuilt trace's, and the saved file must agree
with its own steps.
"""

from __future__ import annotations

from pathlib import Path

from hwm.checker.traces import save_counterexamples, trace_filename
from hwm.checker.replay import replay_on_model
from hwm.model.actions import Model
from hwm.model.encoding import canonical, decode
from hwm.model.state import Config
from hwm.properties.catalogue import BY_NAME
from hwm.properties.trace import load

# The case: kip101 at 3 servers, generation <= 2, symmetry on. The canonical
# representatives of its violating states name other servers than the rebuilt traces.
RENAMED = ("kip101", Config(servers=3, max_generation=2, max_log=1, max_crashes=1))
# The smallest such case (99 states, 8 levels): CommittedOnQuorum's canonical member names S2.
RENAMED_SMALL = ("kip101", Config(servers=2, max_generation=2, max_log=1, max_crashes=1))


def rebuilt_findings(model: Model, report) -> dict[str, str]:
    """Each found property's sentence on the last step of its own trace, replayed from scratch."""
    out = {}
    for name, result in report.results.items():
        if not result.found:
            continue
        before = state = model.initial_state()
        for action in result.actions:
            assert model.why_not(state, action) is None, (name, action)
            before, state = state, model.apply(state, action)
        p = BY_NAME[name]
        out[name] = p.check(before, state) if p.on == "step" else p.check(state)
    return out


def canonical_findings(model: Model, report) -> dict[str, str]:
    """State properties' sentences on the canonical member of each trace's last state: what an
    engine holding canonical states sees."""
    out = {}
    for name, result in report.results.items():
        p = BY_NAME[name]
        if result.found and p.on == "state":
            state = model.initial_state()
            for action in result.actions:
                state = model.apply(state, action)
            out[name] = p.check(decode(canonical(state)))
    return out


def assert_findings_match_traces(model: Model, report, protocol, directory: Path) -> None:
    """Findings equal their traces' own sentences, in the report and in the `--save` files."""
    found = {n: r.finding for n, r in report.results.items() if r.found}
    assert found == rebuilt_findings(model, report)
    # The case is one where names matter: some canonical representative names other servers.
    differ = {n for n, f in canonical_findings(model, report).items() if f != found[n]}
    assert differ, "no finding depends on server names: this case cannot catch a renaming bug"

    saved = save_counterexamples(report, protocol, directory)
    assert sorted(p.name for p in saved) == sorted(trace_filename(report.protocol_name, n) for n in report.violated)
    for path in saved:
        trace = load(path)
        result = report.results[trace.property]
        assert trace.steps == result.steps
        assert trace.explanation.startswith(result.finding + ". "), (trace.explanation, result.finding)
        outcome = replay_on_model(trace)
        assert (outcome.kind, outcome.property, outcome.step) == ("violation", trace.property, len(trace.steps))
        assert outcome.finding == result.finding
