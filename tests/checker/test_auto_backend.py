"""`--successors auto` (checker/auto_backend.py), hwm check's default: the compiled backend once its
kernels are built, or when the run would take the reference backend longer than their build; the
reference one, with the reason, otherwise. Nothing here builds the kernels: the cache is a temporary
directory whose module file is there or not."""

import os

import pytest

from hwm.checker.auto_backend import BUILD_ESTIMATE, choose
from hwm.checker.fast import aot
from hwm.checker.run import choose_successors, runnable_presets
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.protocol import PRESETS


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    """A machine whose kernels are not built yet."""
    monkeypatch.setenv("HWM_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("HWM_KERNELS", raising=False)
    return tmp_path


def _models(*names, config=Config()):
    return {name: build_model(PRESETS[name].protocol, config) for name in names}


def test_a_small_check_on_a_fresh_machine_runs_the_reference_backend_saying_why(empty_cache):
    chosen, notes = choose(_models("raft"), symmetry=True)
    assert chosen == {"raft": "reference"}
    [note] = notes
    assert note.startswith("raft on the reference backend: the compiled kernels are not built on this machine yet")
    assert BUILD_ESTIMATE in note and "--successors fast build them" in note


def test_the_tour_on_a_fresh_machine_builds_the_kernels_its_search_would_take_longer_without(empty_cache):
    chosen, notes = choose_successors(runnable_presets(Config()), Config(), True, "auto", tour=True)
    # Every preset gets them, the presets the tour partitions and BookKeeper's ledger presets (striping,
    # ensemble changes) included: no preset runs on the reference backend, and no note says one does.
    partitioned = {"raft-lease-reads", "raft-lease-reads-without-check-quorum", "kafka-without-controller-fencing",
                   "zab-step-down"}
    ledger = {"bookkeeper-striped", "bookkeeper-ensemble-change", "bookkeeper-unblocked-adds"}
    assert set(chosen.values()) == {"fast"} and partitioned | ledger <= set(chosen)
    assert not notes
    big, _ = choose(_models("raft", config=Config(servers=4, max_log=2)), symmetry=True)
    assert big == {"raft": "fast"}


def test_once_built_or_failed_every_check_runs_the_compiled_backend(empty_cache):
    os.makedirs(os.path.dirname(aot.module_path()))
    for marker in (aot.module_path(), aot.module_path() + ".failed"):  # the module, or the JIT after a failed build
        open(marker, "w").close()
        assert choose(_models("raft", "zab", "bookkeeper", "kafka"), symmetry=True) == (
            dict.fromkeys(("raft", "zab", "bookkeeper", "kafka"), "fast"), [])
        os.remove(marker)


def test_what_the_kernels_cannot_run_and_a_spark_cluster_get_the_reference_backend_with_the_reason(empty_cache):
    os.makedirs(os.path.dirname(aot.module_path()))
    open(aot.module_path(), "w").close()  # built: what is refused is refused for what it is
    chosen, [note] = choose(_models("raft", config=Config(servers=8)), symmetry=True)
    assert chosen == {"raft": "reference"} and "handles up to 7 servers, not 8" in note
    chosen, [note] = choose(_models("raft"), symmetry=True, engine="spark", spark_master="spark://10.0.0.9:7077")
    assert chosen == {"raft": "reference"} and "Spark cluster's executors would each build" in note
    # Spark on local[N]: its executors share this machine's built kernels, as the local engine's workers do.
    assert choose(_models("raft"), symmetry=True, engine="spark", spark_master="local[2]") == ({"raft": "fast"}, [])
    assert choose(_models("raft"), symmetry=True, engine="spark") == ({"raft": "fast"}, [])  # local[*]
    assert choose(_models("raft"), symmetry=True, engine="simulation") == ({"raft": "reference"}, [])
