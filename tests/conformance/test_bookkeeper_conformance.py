"""BookKeeper's bookies, writer and recovery client (impl/bookkeeper.py) against BookKeeper's model.

The saved counterexample of issue 2614 replays on the implementation with the same violation at the
same step, snapshot for snapshot; under the fix the same steps hold (the late add is refused). The
conformance machine drives the implementation with the model's actions and compares, after every
step, the snapshots and what the model tracks beyond them (fence bits, fencing answers, "no such
entry" answers, acknowledged entries); tests/quality/test_kill_matrix.py hunts the broken preset.
Recovery's wait for its recovery adds is driven by hand: the model refuses the step where it waits.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from hypothesis.stateful import run_state_machine_as_test

from hwm.bridge.conformance import Divergence, PropertyViolation, conformance_settings, hunt, machine_for
from hwm.bridge.simcluster import build_cluster
from hwm.bridge.simcluster.bookkeeper import BookKeeperSimCluster
from hwm.cli import main
from hwm.counterexamples.build import HERE
from hwm.impl.bookkeeper import Bookie
from hwm.model.actions import from_step
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.catalogue import check_state
from hwm.properties.protocol import BOOKKEEPER
from hwm.properties.snapshot import snapshot_of
from hwm.properties.trace import load

TRACE = HERE / "bookkeeper-recovery-without-fencing.json"
CONFIG = Config(servers=3, max_generation=4, max_log=2, max_crashes=1)


class FenceIgnoringBookie(Bookie):
    """A planted bug: the bookie takes the writer's adds even when it is fenced."""

    def _on_add(self, add):
        fenced, self.fenced = self.fenced, False
        try:
            super()._on_add(add)
        finally:
            self.fenced = fenced


def test_the_saved_counterexample_replays_on_the_implementation_and_the_fix_holds():
    result = CliRunner().invoke(main, ["replay", "--on", "both", str(TRACE)])
    assert result.exit_code == 0, result.output
    assert result.output.count("violation of AckedWriteNeverLost at step 7") == 2, result.output
    result = CliRunner().invoke(main, ["replay", "--on", "impl", "--protocol", "bookkeeper", str(TRACE)])
    assert result.exit_code == 0 and "[impl]: holds" in result.output, result.output
    assert "S4 role leader -> follower" in result.output  # the fenced S3 refuses the late add: the writer stops


def test_the_simulated_cluster_of_a_bookkeeper_protocol_is_the_ledger_and_refuses_what_it_has_not():
    cluster = build_cluster(BOOKKEEPER, CONFIG)
    assert isinstance(cluster, BookKeeperSimCluster)
    assert cluster.apply(("elect", 0, (0, 1))).startswith("elect is not an action of BookKeeper's ledger")
    assert cluster.apply(("read", 3)) == "S4 is not a bookie"
    assert cluster.apply(("recovery_read", 0)).startswith("fencing has not completed: 0 of 3 bookies")
    assert cluster.apply(("crash", 0)) is None and cluster.apply(("send_add", 0)) == "S1 is down"
    with pytest.raises(ValueError, match="rpc network only"):
        build_cluster(BOOKKEEPER, Config(servers=3, network="async"))


def test_a_planted_fence_ignoring_bookie_loses_an_acknowledged_entry_under_the_fix():
    trace = load(TRACE)
    cluster = build_cluster(BOOKKEEPER, Config.from_mapping(trace.config), replica_factory=FenceIgnoringBookie)
    for step in trace.steps:
        assert cluster.apply_step(step) is None
    assert cluster.snapshot().acked == {(1, 1)} and cluster.snapshot().servers[2].log == (1,)


# ------------------------------------------------------------------ the conformance machine
def test_bookkeeper_conforms(tmp_path):
    machine = machine_for("bookkeeper", CONFIG, out_dir=tmp_path)
    run_state_machine_as_test(machine, settings=conformance_settings(max_examples=10, derandomize=True))
    must_happen = {"add", "send_add", "fence", "recovery_read", "read", "crash", "restart", "leader change",
                   "truncation"}
    assert must_happen <= set(machine.witnessed), f"never happened: {must_happen - set(machine.witnessed)}"


def test_the_machine_catches_issue_2614_on_the_implementation(tmp_path, monkeypatch):
    # A random walk lines the bug up about once in 500 examples (tests/quality/test_kill_matrix.py
    # hunts it under -m deep): here the machine takes the saved counterexample's steps, each drawn
    # from the model's enabled actions and checked as a hunt checks it, and must flag the last one.
    monkeypatch.setattr("hwm.bridge.conformance.machine.event", lambda name: None)  # statistics: for Hypothesis's runs only
    preset = "bookkeeper-recovery-without-fencing"
    trace = load(TRACE)
    machine = machine_for(preset, Config.from_mapping(trace.config), out_dir=tmp_path)()
    for step in trace.steps[:-1]:
        action = from_step(step)
        assert action in machine.enabled(action[0])
        machine.run(action)
    with pytest.raises(PropertyViolation) as caught:
        machine.run(from_step(trace.steps[-1]))
    assert caught.value.property in ("AckedWriteNeverLost", "CommittedOnQuorum")
    saved = load(caught.value.trace_path)
    assert saved.protocol == preset and saved.expect == "violation" and len(saved.steps) == len(trace.steps)
    # The same steps under the fix: the machine sees the late add refused, and nothing fails.
    machine = machine_for("bookkeeper", Config.from_mapping(trace.config), out_dir=tmp_path)()
    for step in trace.steps:
        machine.run(from_step(step))
    assert machine.cluster.writer.fenced_out and not machine.cluster.acked


def test_the_machine_notices_a_bookie_that_departs_from_the_model(tmp_path):
    machine = machine_for("bookkeeper", CONFIG, replica_factory=FenceIgnoringBookie, out_dir=tmp_path)
    found = hunt(machine, 300)
    assert isinstance(found.failure, Divergence), found.failure
    assert "differs from the model's" in str(found.failure)
    assert load(found.failure.trace_path).steps[-1].action == "send_add"


# ------------------------------------------------------------------ striped ledgers and ensemble changes
UNBLOCKED = HERE / "bookkeeper-unblocked-adds.json"


def test_issue_1591_replays_on_the_implementation_and_the_fix_stops_the_writer():
    result = CliRunner().invoke(main, ["replay", "--on", "both", str(UNBLOCKED)])
    assert result.exit_code == 0, result.output
    assert result.output.count("violation of AckedWriteNeverLost at step 6") == 2, result.output
    assert "of the 2 bookies the ledger metadata names for it" in result.output  # the ledger's own property
    # Under the fix the writer's conditional metadata update fails and it stops: the send to S3 is refused.
    result = CliRunner().invoke(main, ["replay", "--on", "impl", "--protocol", "bookkeeper-ensemble-change",
                                       str(UNBLOCKED)])
    assert result.exit_code == 0 and "blocked at step 6: send_add(S3): the writer has been fenced out" \
        in result.output, result.output


def test_the_machine_catches_issue_1591_on_the_implementation(tmp_path, monkeypatch):
    monkeypatch.setattr("hwm.bridge.conformance.machine.event", lambda name: None)
    trace = load(UNBLOCKED)
    machine = machine_for("bookkeeper-unblocked-adds", Config.from_mapping(trace.config), out_dir=tmp_path)()
    for step in trace.steps[:-1]:
        machine.run(from_step(step))
    cluster = machine.cluster
    # The writer's change is its own: the metadata, which recovery marked, still names S1, S2.
    assert cluster.writer.ensemble == ("S1", "S3") and cluster.metadata.fragments == ((1, ("S1", "S2")),)
    with pytest.raises(PropertyViolation) as caught:
        machine.run(from_step(trace.steps[-1]))
    assert caught.value.property in ("AckedWriteNeverLost", "CommittedOnQuorum")


@pytest.mark.parametrize("preset", ["bookkeeper-striped", "bookkeeper-ensemble-change"])
def test_the_ledger_presets_conform(preset, tmp_path):
    # A striped ledger (holes in the bookies' journals) and one with a spare bookie: the snapshots,
    # fence bits, answers, acknowledged entries and fragments agree with the model after every step.
    machine = machine_for(preset, CONFIG, out_dir=tmp_path)
    run_state_machine_as_test(machine, settings=conformance_settings(max_examples=5, derandomize=True))
    must_happen = {"add", "send_add", "fence", "recovery_read", "crash", "leader change"}
    if preset == "bookkeeper-ensemble-change":
        must_happen.add("change_ensemble")
    assert must_happen <= set(machine.witnessed), f"never happened: {must_happen - set(machine.witnessed)}"


# ------------------------------------------------------------------ recovery's write-back
FOUR_BOOKIES = Config(servers=4, max_log=1, max_crashes=3)
# The model's shortest counterexample while recovery closed without waiting for its write-back
# (tests/model/test_bookkeeper_recovery.py): S1 alone holds the unacknowledged entry 1, S1 and S2
# answered the fencing reads, S1 gave recovery entry 1 and S2 said it lacks entry 2; then S2, S3
# and S4 crash. S1's "no such entry" for entry 2 is the answer that ends the ledger at entry 1.
BEFORE_THE_CLOSE = [("add",), ("send_add", 0), ("fence", 0), ("fence", 1), ("recovery_read", 0),
                    ("recovery_read", 1), ("crash", 1), ("crash", 2), ("crash", 3)]


def test_recovery_closes_the_ledger_only_once_an_ack_quorum_acknowledged_its_recovery_adds():
    model = build_model(BOOKKEEPER, FOUR_BOOKIES)
    always = tuple(p for p in model.properties if p.kind == "always")
    cluster = build_cluster(BOOKKEEPER, FOUR_BOOKIES)
    for action in BEFORE_THE_CLOSE:
        assert cluster.apply(action) is None, action
    # Entry 1's recovery add reaches S1 alone, one of the ack quorum of 3: the ledger stays open (the
    # model refuses this step: recovery cannot write entry 1 back to an ack quorum). Closing here
    # broke CommittedOnQuorum: entry 1 on S1, the writer and the recovery client, 3 of 6 servers.
    waiting = cluster.apply(("recovery_read", 0))
    assert check_state(cluster.snapshot(), always) == {}
    assert cluster.metadata.closed_at is None and cluster.recovery.closed is None, cluster.recovery
    assert waiting == ("recovery waits to close the ledger at entry 1: entry 1's recovery adds are "
                       "acknowledged by 1 bookie of its write set (S1), not the ack quorum of 3")
    # S2 and S3 come back: recovery sends them its recovery adds again, they acknowledge, and only
    # then does it close the ledger, with entry 1 on S1, S2 and S3.
    assert cluster.apply(("restart", 1)) is None and cluster.metadata.closed_at is None
    assert cluster.apply(("restart", 2)) is None
    assert cluster.metadata.closed_at == 1 and cluster.recovery.closed is not None
    snapshot = cluster.snapshot()
    assert [(s.log, s.hwm) for s in snapshot.servers[:3]] == [((1,), 1)] * 3
    assert check_state(snapshot, always) == {}
    # Then the model's own closing step from the same state holds too (S2 and S3 restarted first).
    state = model.initial_state()
    for action in BEFORE_THE_CLOSE + [("restart", 1), ("restart", 2), ("recovery_read", 0)]:
        assert model.why_not(state, action) is None, action
        state = model.apply(state, action)
    assert snapshot_of(state).servers[:4] == snapshot.servers[:4]
