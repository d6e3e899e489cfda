"""The conformance machine notices an implementation that drifts from the model.

Each replica below is broken on purpose, in a way no protocol flag describes. The first two change
what the snapshot shows: the machine must fail on snapshot equality (a `Divergence`, not a property
violation) and write the failing run as a trace that the model replays as `holds`. The last one
serves a wrong value, which no snapshot shows (entries are (index, generation) there): ReadsAgree on
the values of the real reads must catch it.
"""

from __future__ import annotations

import pytest

from hwm.checker.replay import judge, replay_on_model
from hwm.impl.core import LEADER, Replica
from hwm.properties.quorum import quorum_index
from hwm.properties.trace import load
from hwm.bridge.conformance import ASYNC, RPC, Divergence, PropertyViolation, hunt, machine_for


class FollowerSkipsOneHwmUpdate(Replica):
    """A follower that ignores the first high-water mark a leader tells it."""

    skipped = False

    def _set_high_water_mark(self, hwm: int) -> None:
        if self.role != LEADER and hwm > self.high_water_mark and not self.skipped:
            self.skipped = True
            return
        super()._set_high_water_mark(hwm)


class LeaderCountsOlderGenerations(Replica):
    """A leader that forgets Raft 5.4.2 in its code while the protocol says current-generation:
    it advances its HWM over any entry stored on a quorum."""

    def _advance_high_water_mark(self) -> None:
        indexes = [self.last_index] + [self.match[peer] for peer in self.peers]
        index_at_quorum = quorum_index(self.protocol.quorum, indexes)
        if index_at_quorum > self.high_water_mark:
            self._set_high_water_mark(index_at_quorum)


@pytest.mark.parametrize("broken", [FollowerSkipsOneHwmUpdate, LeaderCountsOlderGenerations],
                         ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("config", [RPC, ASYNC], ids=["rpc", "async"])
def test_a_broken_replica_fails_on_snapshot_equality(broken, config, tmp_path):
    machine = machine_for("raft", config, replica_factory=broken, out_dir=tmp_path,
                          label=f"raft-{config.network}-{broken.__name__}")
    found = hunt(machine, budget=300)
    assert isinstance(found.failure, Divergence), \
        f"the conformance machine did not notice {broken.__name__} in 300 examples ({found.failure!r})"
    assert "differs from the model's" in str(found.failure)
    trace = load(found.failure.trace_path)
    assert (trace.expect, trace.property) == ("holds", None)
    # The model sees nothing wrong with these steps: the file replays as it says.
    outcome = replay_on_model(trace)
    assert judge(trace, outcome, overridden=False)[0] == 0, outcome.summary()


class FollowerServesAWrongValue(Replica):
    """A follower that answers a client's read with a value nobody wrote."""

    def read(self, index: int) -> tuple[int, bytes]:
        generation, value = super().read(index)
        return generation, (value if self.role == LEADER else value + b"?")


def test_a_replica_serving_a_wrong_value_violates_reads_agree(tmp_path):
    machine = machine_for("raft", RPC, replica_factory=FollowerServesAWrongValue, out_dir=tmp_path,
                          label="raft-rpc-FollowerServesAWrongValue")
    found = hunt(machine, budget=300)
    assert isinstance(found.failure, PropertyViolation), found.failure
    assert found.failure.property == "ReadsAgree" and "two values at index" in str(found.failure)
    # Saved under the property it violates (a divergence's file is named so instead).
    assert found.failure.trace_path.name == "raft-rpc-FollowerServesAWrongValue-ReadsAgree.json"


class StartsAsLeader(Replica):
    """A replica that comes up already leading, before any election: its first state is not the model's."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.role = LEADER


def test_a_replica_whose_first_state_is_not_the_models_fails_before_any_step(tmp_path):
    machine = machine_for("raft", RPC, replica_factory=StartsAsLeader, out_dir=tmp_path, label="raft-starts-as-leader")
    with pytest.raises(Divergence, match="the initial states differ") as failed:
        machine()  # the machine compares the two first states as it is built
    assert "leader" in str(failed.value)
    assert load(failed.value.trace_path).steps == []
    assert failed.value.trace_path.name == "raft-starts-as-leader-divergence.json"
