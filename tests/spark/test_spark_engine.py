"""The Spark engine: the local engine's results, distributed.

Every case runs both engines in the test and compares them with each other and
with the pinned numbers of tests/pinned.py: distinct states, transitions, depth,
bounds hit, verdicts and shortest trace lengths. One test starts a real
standalone cluster (a master and two workers on 127.0.0.1).
"""

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from hwm.checker import spark_engine, spark_session
from hwm.checker.run import CheckRequest, run
from hwm.model.raft import RaftModel
from hwm.model.registry import build_model
from hwm.checker.spark_engine import spark_bfs, to_signed, to_unsigned
from hwm.checker.spark_session import (SparkUnavailable, check_java, check_master, free_port, get_spark,
                                       standalone_cluster)
from hwm.properties.catalogue import Property
from hwm.properties.protocol import PRESETS
from tests.spark.conftest import TEST_MASTER
from tests.pinned import PINNED, PINNED_PARTITIONS, config_of, partition_config_of

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]

# (preset, servers, max_generation, max_log, max_crashes, network, symmetry), as in PINNED.
# The default run keeps one case per promise: violations with symmetry off (kip101, 2 servers; TINY
# below covers them with symmetry on), a safe protocol with every witness on the async network.
CASES = [
    ("kip101", 2, 2, 1, 1, "rpc", False),  # violations: shortest counterexamples must agree; symmetry off
    ("raft", 3, 1, 1, 1, "async", True),
    # Models with their own state types (ZAB, BookKeeper): the engine moves the model's bytes.
    ("zab-ack-before-persist", 3, 2, 1, 1, "rpc", True),
    ("bookkeeper-recovery-without-fencing", 3, 4, 1, 1, "rpc", True),
    ("kafka-kip101", 2, 3, 2, 1, "rpc", True),  # Kafka's model: its own state type and bytes
    ("bookkeeper-striped", 3, 1, 1, 0, "rpc", False),  # a striped ledger (never with symmetry): write sets of 2
]
DEEP_CASES = [
    ("raft", 3, 3, 1, 1, "rpc", True),
    ("raft-any-generation-commit", 3, 3, 2, 1, "rpc", True),
    ("kip101", 3, 3, 1, 1, "rpc", True),
    ("raft", 3, 3, 1, 1, "rpc", False),
    ("raft-any-generation-commit", 3, 3, 1, 1, "rpc", True),
    ("raft-any-generation-commit", 3, 3, 1, 1, "rpc", False),
    ("raft", 3, 3, 2, 1, "rpc", True),
    ("raft", 3, 3, 2, 1, "rpc", False),
    ("raft-any-generation-commit", 3, 3, 2, 1, "rpc", False),
    ("raft", 3, 2, 1, 1, "async", True),
    ("raft-any-generation-commit", 3, 4, 2, 1, "rpc", True),  # Figure 8
    ("zab", 3, 4, 1, 1, "rpc", True),
    ("bookkeeper", 3, 4, 1, 1, "rpc", False),
    ("kafka", 2, 3, 2, 1, "rpc", False),
    ("kafka-truncate-to-hwm", 3, 2, 1, 1, "rpc", True),
    ("kafka-kip320-first-try", 3, 3, 1, 0, "rpc", True),  # late LeaderAndIsr requests
    ("kafka-unflushed", 2, 2, 1, 1, "rpc", True),  # power failures: the flushed length in the state bytes
    ("bookkeeper-unblocked-adds", 3, 4, 1, 1, "rpc", True),  # the ledger's fragments in the state bytes
]
# The smallest violating case: 99 states, 8 levels, two violated properties.
TINY = ("kip101", 2, 2, 1, 1, "rpc", True)


def case_id(key):
    return "-".join(map(str, key))


def outcome(report) -> dict:
    """Everything two engines must agree on."""
    return {
        "states": report.states, "transitions": report.transitions, "depth": report.depth,
        "bounds_hit": sorted(report.bounds_hit), "complete": report.complete,
        "verdicts": {name: r.verdict for name, r in report.results.items()},
        "lengths": {name: r.length for name, r in report.results.items() if r.found},
    }


def pinned_outcome(key) -> dict:
    expected = PINNED[key]
    return {"states": expected["states"], "transitions": expected["transitions"], "depth": expected["depth"],
            "bounds_hit": expected["bounds_hit"], "lengths": expected["lengths"]}


def assert_traces_replay(model, report) -> None:
    """Each trace is enabled step by step and its last step shows the finding."""
    for result in report.results.values():
        if not result.found:
            continue
        state = before = model.initial_state()
        for action in result.actions:
            assert model.why_not(state, action) is None, (result.name, action)
            before, state = state, model.apply(state, action)
        prop = next(p for p in model.properties if p.name == result.name)
        assert prop.check(before, state) if prop.on == "step" else prop.check(state), result.name


# Levels reached by more than this many candidates run on Spark, the first few on the driver: both
# paths and the hand-over from one to the other run in every case.
DRIVER_LEVEL = 50


def check_case(spark, key, **options):
    options.setdefault("driver_level", DRIVER_LEVEL)
    preset, config, symmetry = config_of(key)
    model = build_model(PRESETS[preset].protocol, config)
    report = spark_bfs(model, preset, symmetry=symmetry, spark=spark, **options)
    local = run(CheckRequest(preset, symmetry=symmetry), model=model)
    assert report.engine == "spark" and report.symmetry == symmetry
    assert report.config == local.config
    assert outcome(report) == outcome(local)
    got = outcome(report)
    assert {k: got[k] for k in pinned_outcome(key)} == pinned_outcome(key)
    assert_traces_replay(model, report)
    return report


@pytest.mark.parametrize("key", CASES, ids=case_id)
def test_spark_equals_local_and_pinned(spark, key):
    # The first case through Spark's shuffle (the default off local[N]): its middle levels go to Spark and its
    # last come back to the driver; the others in resident stages (local[N]'s default).
    check_case(spark, key, exchange="shuffle" if key == CASES[0] else None)


@pytest.mark.deep
@pytest.mark.parametrize("key", DEEP_CASES, ids=case_id)
def test_spark_equals_local_and_pinned_deep(spark, key):
    check_case(spark, key)


def test_results_do_not_depend_on_partitioning_or_checkpoints_and_progress_covers_every_level(spark):
    """Ties are broken in the local engine's order, whatever the partitioning: traces are reproducible."""
    seen = []
    # One partition on the driver alone (a search this small never leaves it by default), then on Spark alone.
    one = check_case(spark, TINY, partitions=1, checkpoint_every=100, progress=seen.append,
                     driver_level=spark_engine.DRIVER_LEVEL)
    # The shuffle, a reliable checkpoint every third level (the others run their map stage alone).
    three = check_case(spark, TINY, partitions=3, checkpoint_every=3, driver_level=0, exchange="shuffle")
    assert {n: r.steps for n, r in one.results.items()} == {n: r.steps for n, r in three.results.items()}
    # The file exchange, a stage per level, every level on Spark, the traces looked up in its files.
    files = check_case(spark, TINY, partitions=2, driver_level=0, exchange="files")
    assert {n: r.steps for n, r in one.results.items()} == {n: r.steps for n, r in files.results.items()}
    # Resident stages (local[N]'s default) of at most 2 levels: 3 partitions on local[2]'s 2 tasks, so one
    # task holds two partitions and keeps what they send each other; then one task alone, whose records
    # never go to a file after the hand-over.
    for partitions in (3, 1):
        stats: dict = {}
        resident = check_case(spark, TINY, partitions=partitions, checkpoint_every=2, driver_level=0,
                              exchange="resident", stats=stats)
        assert {n: r.steps for n, r in one.results.items()} == {n: r.steps for n, r in resident.results.items()}
        assert all(lv["on_spark"] for lv in stats["levels"])

    assert [set(p) for p in seen] == [{"depth", "states", "frontier", "states_per_second", "elapsed"}] * one.depth
    assert [p["depth"] for p in seen] == list(range(1, one.depth + 1))
    assert seen[-1]["states"] == one.states
    assert 1 + sum(p["frontier"] for p in seen) == one.states
    assert all(p["states_per_second"] > 0 for p in seen)


def test_a_resident_stage_that_loses_a_task_is_launched_again(spark, tmp_path):
    """A task's Python worker dies in the middle of a resident stage (as on a lost executor): the stage
    fails, the driver launches it again from its first level, and takes in only the levels it had not,
    so the search ends as the local engine's. The death is planted in a property's check, run on the
    executors: the first worker to check a state with an entry takes the flag and exits."""
    flag = tmp_path / "die-once"
    flag.touch()

    def dies_once(state):
        if any(server.log for server in state.servers):
            try:
                os.remove(flag)
            except FileNotFoundError:
                return None
            os._exit(3)
        return None

    preset, config, symmetry = config_of(TINY)
    model = build_model(PRESETS[preset].protocol, config)
    properties = [*model.properties, Property("DiesOnce", "always", "state", "a planted worker death", dies_once)]
    stats: dict = {}
    report = spark_bfs(model, preset, symmetry=symmetry, spark=spark, driver_level=0, exchange="resident",
                       stats=stats, properties=properties)
    assert not flag.exists()
    assert stats["resident_launches"] == 2
    assert [lv["level"] for lv in stats["levels"]] == list(range(report.depth + 2))  # each level taken in once
    # The flag is gone: here the planted check finds nothing, as it found nothing on the executors.
    assert outcome(report) == outcome(run(CheckRequest(preset, symmetry=symmetry, properties=properties), model=model))
    assert {k: outcome(report)[k] for k in pinned_outcome(TINY)} == pinned_outcome(TINY)
    assert_traces_replay(model, report)


def test_check_on_spark_takes_the_exchange_and_its_directory(spark, tmp_path):
    """`hwm check --engine spark --spark-exchange ... --spark-dir DIR`: the report is the local engine's; the
    exchange's files go under DIR (emptied at the end); the flags without Spark, or a directory that cannot be
    written, are refused before any search."""
    from click.testing import CliRunner

    from hwm.cli import main

    preset, config, symmetry = config_of(TINY)
    flags = ["check", "--protocol", preset, "--servers", str(config.servers), "--max-generation",
             str(config.max_generation), "--max-log", str(config.max_log), "--max-crashes", str(config.max_crashes),
             "--json", "--progress", "never"]
    local = run(CheckRequest(preset, symmetry=symmetry), model=build_model(PRESETS[preset].protocol, config))
    for exchange in ("resident", "shuffle"):
        spark_dir = tmp_path / exchange
        result = CliRunner().invoke(main, flags + ["--engine", "spark", "--spark-master", TEST_MASTER,
                                                   "--spark-exchange", exchange, "--spark-dir", str(spark_dir)])
        assert result.exit_code in (0, 1), result.output
        got = json.loads(result.stdout)
        assert (got["engine"], got["distinct_states"], got["transitions"]) == \
            ("spark", local.states, local.transitions)
        assert spark_dir.is_dir() and not list(spark_dir.iterdir())  # the search's own folder is gone
    refused = CliRunner().invoke(main, flags + ["--spark-exchange", "resident"])
    assert refused.exit_code == 2 and "--spark-exchange and --spark-dir apply to --engine spark" in refused.output
    (tmp_path / "a file").write_text("")
    refused = CliRunner().invoke(main, flags + ["--engine", "spark", "--spark-dir", str(tmp_path / "a file")])
    assert refused.exit_code == 2 and "exists and is not a directory" in refused.output


def test_max_depth_stops_like_the_local_engine(spark):
    preset, config, symmetry = config_of(TINY)
    model = build_model(PRESETS[preset].protocol, config)
    # EntryRead is first reached at depth 4: the deepest level is checked, not expanded.
    report = spark_bfs(model, preset, symmetry=symmetry, spark=spark, max_depth=4, driver_level=DRIVER_LEVEL)
    local = run(CheckRequest(preset, symmetry=symmetry, max_depth=4), model=model)
    assert not report.complete
    assert outcome(report) == outcome(local)
    assert report.results["EntryRead"].length == 4


def test_a_bad_exchange_is_named(spark):
    model = build_model(PRESETS[TINY[0]].protocol, config_of(TINY)[1])
    with pytest.raises(ValueError, match="exchange must be one of 'resident', 'files', 'shuffle', not 'mail'"):
        spark_bfs(model, TINY[0], spark=spark, exchange="mail")
    for exchange in ("files", "resident"):
        with pytest.raises(ValueError, match=f"exchange='{exchange}' needs a directory path every executor sees, "
                                             "not hdfs://cluster/checkpoints"):
            spark_bfs(model, TINY[0], spark=spark, exchange=exchange, checkpoint_dir="hdfs://cluster/checkpoints")


def test_resident_stages_under_dynamic_allocation_are_refused_by_name(spark, monkeypatch):
    class DynamicConf:
        def get(self, key, default=None):
            return "true" if key == "spark.dynamicAllocation.enabled" else default

    model = build_model(PRESETS[TINY[0]].protocol, config_of(TINY)[1])
    monkeypatch.setattr(spark.sparkContext, "getConf", DynamicConf)
    with pytest.raises(ValueError, match="exchange='resident' runs gang-scheduled stages, which Spark refuses "
                                         "under dynamic allocation: set spark.dynamicAllocation.enabled=false"):
        spark_bfs(model, TINY[0], spark=spark, exchange="resident")


def test_fingerprints_survive_the_signed_round_trip():
    for fp in (0, 1, 2**63 - 1, 2**63, 2**64 - 1):
        signed = to_signed(fp)
        assert -(2**63) <= signed < 2**63
        assert to_unsigned(signed) == fp


# ---------------------------------------------------------------- errors
def test_unreachable_master_fails_fast_naming_what_to_start():
    port = free_port()  # nothing listens there
    started = time.monotonic()
    with pytest.raises(SparkUnavailable, match=rf"no Spark master at spark://127.0.0.1:{port} .*start one with"):
        get_spark(f"spark://127.0.0.1:{port}")
    assert time.monotonic() - started < 5


def test_spark_bfs_on_an_unreachable_master_raises_before_starting_anything():
    preset, config, symmetry = config_of(TINY)
    with pytest.raises(SparkUnavailable, match="no Spark master"):
        spark_bfs(build_model(PRESETS[preset].protocol, config), preset, master=f"spark://127.0.0.1:{free_port()}")


def test_a_silent_master_times_out(monkeypatch):
    waited = []

    def no_answer(address, timeout):
        waited.append(timeout)
        raise socket.timeout("timed out")

    monkeypatch.setattr(spark_session.socket, "create_connection", no_answer)
    with pytest.raises(SparkUnavailable, match=r"no Spark master at spark://10.0.0.9:7077 \(10.0.0.9:7077 timed out "
                                               r"after 1.5s\): start one with"):
        check_master("spark://10.0.0.9:7077", timeout=1.5)
    assert waited == [1.5]


def test_a_bad_master_url_is_named():
    with pytest.raises(SparkUnavailable, match="expected spark://HOST:PORT"):
        check_master("spark://nohost")


# `hwm check --engine spark` in a fresh interpreter in which PySpark cannot be imported.
WITHOUT_PYSPARK = r'''
import sys
class NoPySpark:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "pyspark":
            raise ImportError(f"No module named {name!r}")
sys.meta_path.insert(0, NoPySpark())
import hwm
print(hwm.__file__)
from hwm.cli import main
main(["check", "--protocol", "raft", "--servers", "5", "--max-log", "2", "--engine", "spark"])
'''
CHECK_ON_SPARK = ["-m", "hwm.cli", "check", "--protocol", "raft", "--servers", "2", "--max-generation", "1",
                  "--max-log", "1", "--engine", "spark"]
EXECUTORS_ZIP = ("import io, json, zipfile\n"
                 "from hwm.checker.spark_session import package_zip\n"
                 "print(json.dumps(zipfile.ZipFile(io.BytesIO(package_zip())).namelist()))\n")


def _installed_copy(target: Path) -> None:
    """The package laid out as `pip install hwm` lays it out (pyproject's package-dir), under `target`."""
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    for name, folder in settings["package-dir"].items():
        shutil.copytree(ROOT / folder, target / name.replace(".", "/"),
                        ignore=shutil.ignore_patterns("__pycache__", "*.so"))


def test_a_missing_pyspark_or_java_exits_2_with_the_install_line(tmp_path):
    """Before any search: the extra of the checkout hwm runs from (an editable install), or of the installed
    package; a missing Java, the package to install. An installed package also ships its own code to the
    executors (the zip laid out as the package, whichever layout it is read from)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    checkout = subprocess.run([sys.executable, "-c", WITHOUT_PYSPARK], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=120)
    assert checkout.returncode == 2, checkout.stderr
    assert checkout.stdout.startswith(str(ROOT))
    assert f"PySpark is not installed (No module named 'pyspark'): pip install -e '{ROOT}[spark]'" in checkout.stderr
    # Refused before anything slow: no long-run warning for these bounds, no note on the kernels, no build.
    assert "predict" not in checkout.stderr and "note:" not in checkout.stderr and "compiling" not in checkout.stderr

    site = tmp_path / "site"
    _installed_copy(site)
    env = dict(os.environ, PYTHONPATH=str(site))
    installed = subprocess.run([sys.executable, "-c", WITHOUT_PYSPARK], cwd=tmp_path, env=env, capture_output=True,
                               text=True, timeout=120)
    assert installed.returncode == 2, installed.stderr
    assert installed.stdout.startswith(str(site / "hwm"))
    assert "PySpark is not installed (No module named 'pyspark'): pip install 'hwm[spark]'" in installed.stderr
    shipped = subprocess.run([sys.executable, "-c", EXECUTORS_ZIP], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=120)
    names = json.loads(shipped.stdout)
    assert {"hwm/__init__.py", "hwm/checker/spark_levels.py", "hwm/checker/fast/__init__.py",
            "hwm/model/state.py", "hwm/properties/catalogue.py"} <= set(names), names
    assert all(re.match(r"hwm/(__init__\.py$|checker/|model/|properties/)", n) for n in names), names

    no_java = subprocess.run([sys.executable, *CHECK_ON_SPARK], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT), JAVA_HOME=str(tmp_path)))
    assert no_java.returncode == 2, no_java.stderr
    assert f"JAVA_HOME={tmp_path} has no bin/java" in no_java.stderr and "openjdk-17-jre-headless" in no_java.stderr


def test_missing_java_says_what_to_install(monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SparkUnavailable, match=r"apt-get install openjdk-17-jre-headless"):
        check_java()


def test_old_java_says_what_to_install(monkeypatch):
    monkeypatch.setattr(spark_session, "_java_version", lambda java: 11)
    with pytest.raises(SparkUnavailable, match=r"needs Java 17 or newer.*openjdk-17-jre-headless"):
        check_java()


def test_missing_pyspark_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspark", None)
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    with pytest.raises(SparkUnavailable, match=re.escape(f"pip install -e '{ROOT}[spark]'")):  # from a checkout
        get_spark("local[2]")


def test_one_session_per_process(spark):
    assert get_spark(spark.sparkContext.master) is spark
    with pytest.raises(SparkUnavailable, match="holds one master"):
        get_spark("local[1]")


# ------------------------------------------------------- a standalone cluster
@pytest.mark.deep  # a master and two workers started for the test, three checks: 1-4 minutes; local[2] runs by default
def test_standalone_cluster_equals_local(tmp_path):
    """A master and two one-core workers on 127.0.0.1, driven by `hwm check --engine spark`, and by
    `spark_bfs` with small levels sent to the workers, through the shuffle and through files.

    The checks run in their own processes: a JVM holds one SparkContext, and this
    process's already runs on local[2].
    """
    key = ("raft", 3, 3, 2, 1, "rpc", True)
    preset, config, symmetry = config_of(key)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    command = [sys.executable, "-m", "hwm.cli", "check", "--protocol", preset, "--servers", str(config.servers),
               "--max-generation", str(config.max_generation), "--max-log", str(config.max_log),
               "--max-crashes", str(config.max_crashes), "--network", config.network, "--engine", "spark",
               "--json"]
    # The engine's default keeps a search this small on the driver (`driver_level`): here most levels go
    # to the workers and, with a stage per level, the last come back; resident stages keep them to the end
    # (the files: this machine's /tmp).
    script = ("import json, sys\n"
              "from hwm.checker.spark_engine import spark_bfs\n"
              "from hwm.model.registry import build_model\n"
              "from hwm.properties.protocol import PRESETS\n"
              "from tests.pinned import config_of\n"
              f"preset, config, symmetry = config_of({key!r})\n"
              "model, found = build_model(PRESETS[preset].protocol, config), {}\n"
              "for exchange in ('shuffle', 'files', 'resident'):\n"
              "    stats = {}\n"
              "    r = spark_bfs(model, preset, symmetry=symmetry, master=sys.argv[1], driver_level=50,\n"
              "                  exchange=exchange, stats=stats)\n"
              "    found[exchange] = [r.states, r.transitions, r.depth, {n: p.length for n, p in r.results.items()},\n"
              "                       ''.join('S' if lv['on_spark'] else 'd' for lv in stats['levels'])]\n"
              "print(json.dumps(found))\n")
    with standalone_cluster(workers=2, cores=1, memory="1g", timeout=120, log_dir=str(tmp_path / "logs")) as master:
        run = subprocess.run(command + ["--spark-master", master], env=env, cwd=tmp_path, capture_output=True,
                             text=True, timeout=400)
        direct = subprocess.run([sys.executable, "-c", script, master], env=env, cwd=ROOT, capture_output=True,
                                text=True, timeout=400)
    assert run.returncode in (0, 1), run.stderr[-3000:]
    assert direct.returncode == 0, direct.stderr[-3000:]
    pinned = PINNED[key]
    for exchange, (states, transitions, depth, lengths, where) in json.loads(direct.stdout).items():
        assert (states, transitions, depth) == (pinned["states"], pinned["transitions"], pinned["depth"]), exchange
        assert {n: v for n, v in lengths.items() if v is not None} == pinned["lengths"], exchange
        assert re.fullmatch(r"d+S+" if exchange == "resident" else r"d+S+d+", where), (exchange, where)
    got = json.loads(run.stdout)
    assert got["engine"] == "spark"
    local = run(CheckRequest(preset, symmetry=symmetry), model=build_model(PRESETS[preset].protocol, config))
    assert {"states": got["distinct_states"], "transitions": got["transitions"], "depth": got["depth"],
            "bounds_hit": got["bounds_hit"], "complete": got["complete"],
            "verdicts": {n: p["verdict"] for n, p in got["properties"].items()},
            "lengths": {n: p["length"] for n, p in got["properties"].items() if p["length"] is not None},
            } == outcome(local)
    assert got["distinct_states"] == PINNED[key]["states"]
    # The cluster's process groups were killed on leaving the block.
    port = int(master.rsplit(":", 1)[1])
    deadline = time.monotonic() + 10
    while _listening(port):
        assert time.monotonic() < deadline, f"the master still listens on port {port}"
        time.sleep(0.2)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True


# ------------------------------------------------- executors and the successor backends
FAST = importlib.util.find_spec("hwm.checker.fast") is not None


def test_executors_expand_with_the_chosen_backend(spark):
    """Another backend (model objects, not packed bytes) gives the same results on the executors, and
    builds a model state per state there: the count of the fast backend's test below does count."""
    stats: dict = {}
    report = check_case(spark, TINY, successors="objects", stats=stats, count_states=True)
    assert stats["states_built"] >= report.states
    with pytest.raises(ValueError, match="unknown successor backend"):
        spark_bfs(RaftModel(PRESETS["raft"].protocol, config_of(TINY)[1]), "raft", spark=spark, successors="quick")


# The executors' compiled successors on both networks and a striped ledger (the newest kernels) by
# default; the other systems' kernels (each equal to the reference in tests/checker/test_engine.py)
# on Spark under -m deep.
FAST_CASES = CASES[:2] + [CASES[-1]] + [pytest.param(key, marks=pytest.mark.deep) for key in CASES[2:-1]]


@pytest.mark.skipif(not FAST, reason="the fast successor backend (checker.fast) is not installed")
@pytest.mark.parametrize("key", FAST_CASES, ids=case_id)
def test_spark_with_the_fast_backend_equals_local_and_pinned(spark, compiled, key):
    """Executors run the compiled successor function; a preset without a fast path fails here,
    except the systems checker.fast lists as not compiled yet, which are refused by name."""
    from hwm.checker.backend import BackendUnavailable
    from hwm.checker.fast import NOT_COMPILED

    if PRESETS[key[0]].protocol.system in NOT_COMPILED:
        with pytest.raises(BackendUnavailable, match="no compiled"):
            check_case(spark, key, successors="fast")
        return
    stats: dict = {}
    # The async case with a stage per level, whose last levels come back to the driver; the rpc one resident.
    exchange = "files" if key == ("raft", 3, 1, 1, 1, "async", True) else "resident"
    report = check_case(spark, key, successors="fast", stats=stats, count_states=True, exchange=exchange)
    # No model state per state on the executors' hot path: the state type's constructor, counted there
    # during every task, builds only the states that word a finding (one, or two for a step), at most
    # once per partition that finds the property in the level.
    found = sum(r.found for r in report.results.values())
    assert stats["states_built"] <= 2 * stats["partitions"] * found < report.states / 4
    if key == ("raft", 3, 1, 1, 1, "async", True):
        # The first levels on the driver, the large ones on Spark, the last ones back on the driver.
        where = "".join("S" if lv["on_spark"] else "d" for lv in stats["levels"])
        assert re.fullmatch(r"d+S+d+", where), where


@pytest.mark.deep
@pytest.mark.parametrize("key", [("raft", 2, 2, 1, 1, 1, True), ("kafka", 2, 2, 1, 1, 1, True),
                                 ("zab-step-down", 2, 2, 1, 1, 1, True)], ids=lambda k: k[0])
def test_spark_reproduces_a_partitioned_pin(spark, key):
    # model/partition.py's, kafka_partition.py's and zab_partition.py's own state types (the cut, the
    # partitions made) travel as the models' bytes.
    preset, config, symmetry = partition_config_of(key)
    model = build_model(PRESETS[preset].protocol, config)
    report = spark_bfs(model, preset, symmetry=symmetry, spark=spark)
    expected = PINNED_PARTITIONS[key]
    got = outcome(report)
    assert (got["states"], got["transitions"], got["depth"], got["bounds_hit"], got["lengths"]) == (
        expected["states"], expected["transitions"], expected["depth"], expected["bounds_hit"], expected["lengths"])
    assert_traces_replay(model, report)
