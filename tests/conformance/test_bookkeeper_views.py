"""One form for each of BookKeeper's values: a replay's rows on the model (`BookKeeperState`) and on the
implementation (`BookKeeperSnapshot`) hold the fenced bookies, the fencing answers and the writer's
fragments in the same types, so the conformance view, the step table and the pictures read either."""

from __future__ import annotations

from pathlib import Path

import pytest

from hwm.bridge.replay import replay_on_impl
from hwm.bridge.simcluster.bookkeeper import BookKeeperView, view_of
from hwm.checker.replay import replay_on_model
from hwm.properties.trace import load
from hwm.teach.explain import frames_of_outcome
from hwm.teach.systems import row

CATALOGUE = Path(__file__).resolve().parents[2] / "counterexamples"
TRACES = sorted(CATALOGUE.glob("bookkeeper-*.json"))


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_model_and_implementation_rows_hold_the_same_forms(path):
    trace = load(path)
    on_model, on_impl = replay_on_model(trace), replay_on_impl(trace)
    assert len(on_model.rows) == len(on_impl.rows) > 1
    fenced_somewhere = False
    for (label, state), (_, snapshot) in zip(on_model.rows, on_impl.rows):
        model, impl = view_of(state), view_of(snapshot)
        assert model == impl, label
        for field in BookKeeperView._fields:
            assert type(getattr(state, field)) is type(getattr(snapshot, field)), (label, field)
        fenced_somewhere |= bool(impl.fenced)
    assert fenced_somewhere  # the traces fence a bookie: the bits were compared, not only zeros


def test_the_pictures_of_an_implementation_replay_show_the_fences():
    # The implementation's rows are drawn as the model's are (they were refused with a TypeError
    # while its snapshot kept the fenced bookies as a set of positions).
    trace = load(CATALOGUE / "bookkeeper-recovery-without-fencing.json")
    frames = {on: frames_of_outcome(trace, replay(trace)) for on, replay in
              (("model", replay_on_model), ("impl", replay_on_impl))}
    for model_frame, impl_frame in zip(frames["model"], frames["impl"]):
        n = len(impl_frame.state.servers)
        assert [row(impl_frame.state, k)["notes"] for k in range(n)] == \
               [row(model_frame.state, k)["notes"] for k in range(n)], impl_frame.label
    assert "fenced" in row(frames["impl"][-1].state, 0)["notes"]


def test_a_divergence_names_the_bookies():
    view = BookKeeperView(0b101, 0b1, 0, frozenset({(1, 1)}), ((2, (0, 2)),), 1)
    assert [view.shown(f) for f in BookKeeperView._fields] == [
        "{S1,S3}", "{S1}", "{}", "[(1, 1)]", "2:S1,S3", "1"]
