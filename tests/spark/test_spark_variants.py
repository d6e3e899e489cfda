"""A variant (docs/variants.md) on the Spark engine: its protocol pickles by its spec, the executors load
it again from the copy the driver sent them (they never see the user's folder), and the search gives
the local engine's states, transitions and shortest lengths."""

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwm.checker.run import CheckRequest, run
from hwm.checker.spark_engine import spark_bfs
from hwm.cli import main
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.protocol import resolve
from tests.spark.conftest import TEST_MASTER

pytestmark = pytest.mark.spark

FLEXIBLE = Path(__file__).resolve().parents[2] / "examples" / "variants" / "flexible.py"
CONFIG = Config(servers=3, max_generation=2, max_crashes=0)
# FlexibleTooSmall at CONFIG: states, transitions, and each property found with its shortest length.
PINNED = (89, 379, {"ReadNeverTruncated": 6, "HwmNeverTruncated": 5, "ReadNeverLost": 4, "ReadsAgree": 6,
                    "EntryRead": 3, "LeaderCommitsAlone": 2})


def summary(report):
    return report.states, report.transitions, {n: r.length for n, r in report.results.items() if r.found}


def test_executors_load_a_variant_from_the_copy_the_driver_sent(spark, tmp_path, monkeypatch):
    """A module only the driver's path has: every level on the executors (driver_level=0), which must
    import it from the shipped copy (Spark's shuffle, as on a cluster); the local engine's numbers. A
    hook failing there comes out as the variant's own error, as on the local engine, not Spark's."""
    from hwm.model.variant import HookError

    shutil.copy(FLEXIBLE, tmp_path / "team_flexible_rules.py")
    (tmp_path / "team_bad_rules.py").write_text("from hwm.model.variant import Variant\nclass V(Variant):\n"
                                                "    def may_commit(self, index, log, generation):\n"
                                                "        return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    name, protocol = resolve("team_flexible_rules:FlexibleTooSmall")
    model = build_model(protocol, CONFIG)
    assert summary(run(CheckRequest(name), model=model)) == PINNED
    assert summary(spark_bfs(model, name, spark=spark, driver_level=0, exchange="shuffle")) == PINNED

    name, protocol = resolve("team_bad_rules:V")
    with pytest.raises(HookError, match=r"^\S*team_bad_rules.py:3: V.may_commit returned 1 \(int\), expected bool, "
                                        r"at replicate\(S1, S2\) from state S1 leader +g1"):
        spark_bfs(build_model(protocol, CONFIG), name, spark=spark, driver_level=0, exchange="shuffle")


# The other systems' variants with fields and actions (docs/variants.md, "Fields and actions on the other
# systems"), each at its pinned bounds (tests/variants/test_variant_models_other_systems.py): states,
# transitions, and each property found with its shortest length, as the local engine gives them.
EXAMPLES = FLEXIBLE.parent
WITH_FIELDS = {
    "kafka_follower_fetch.py:FollowerFetchingPastHighWatermark": (CONFIG, (1218, 3399, {
        "ReadNeverTruncated": 6, "ReadNeverLost": 5, "ReadsAgree": 8, "EntryRead": 4, "UncommittedTruncated": 4,
        "LeaderChangeWithUncommitted": 3, "WriteAcknowledged": 4, "FollowerServesConsumers": 5})),
    "zab_read_only.py:ReadOnlyFromLog": (CONFIG, (706, 3311, {
        "ReadNeverTruncated": 8, "ReadsAgree": 11, "EntryRead": 5, "UncommittedTruncated": 5,
        "LeaderChangeWithUncommitted": 4, "WriteAcknowledged": 4, "ReadOnlyServerServes": 5})),
    "bookkeeper_fencing_reads.py:FencingRecoveryReadsInMemory": (Config(servers=3, max_generation=2, max_crashes=1), (
        4038, 14425, {"ReadNeverTruncated": 11, "HwmNeverTruncated": 10, "ReadNeverLost": 11, "CommittedOnQuorum": 9,
                      "EntryRead": 5, "UncommittedTruncated": 6, "LeaderChangeWithUncommitted": 5, "CrashAndRejoin": 2,
                      "AckedWriteNeverLost": 9, "WriteAcknowledged": 3, "FencedBookieBehind": 4})),
}


# A model written from scratch on the base Model (docs/variants.md, "A model from scratch"), at the bounds
# tests/variants/test_variant_bare_model.py pins.
WITH_FIELDS["primary_backup.py:MinorityTakeOver"] = (
    Config(servers=3, max_generation=2, max_log=1, max_crashes=1), (732, 2038, {
        "ReadNeverTruncated": 8, "ReadNeverLost": 6, "ReadsAgree": 9, "CommittedOnQuorum": 3, "EntryRead": 4,
        "UncommittedTruncated": 6, "LeaderChangeWithUncommitted": 4, "CrashAndRejoin": 2, "PrimaryCarriesOlderEntry": 4}))


@pytest.mark.parametrize("example", [pytest.param(spec, marks=() if spec.startswith(("kafka", "primary"))
                                                   else pytest.mark.deep) for spec in WITH_FIELDS])
def test_a_variant_with_fields_and_actions_on_another_system(spark, tmp_path, monkeypatch, example):
    """The executors decode and expand states whose servers carry the variant's fields, with its actions, from
    the module they load from the copy the driver sent (a name only the driver's path has): the local engine's
    states, transitions and shortest lengths."""
    file, name = example.split(":")
    module = "team_" + file.removesuffix(".py")
    shutil.copy(EXAMPLES / file, tmp_path / f"{module}.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    config, pinned = WITH_FIELDS[example]
    spec, protocol = resolve(f"{module}:{name}")
    model = build_model(protocol, config)
    assert summary(run(CheckRequest(spec), model=model)) == pinned
    assert summary(spark_bfs(model, spec, spark=spark, driver_level=0, exchange="shuffle")) == pinned


@pytest.mark.deep
def test_hwm_check_engine_spark_of_a_variant_file(spark, tmp_path):
    variant = tmp_path / "flexible.py"
    shutil.copy(FLEXIBLE, variant)
    args = ["check", "--protocol", f"{variant}:FlexibleTooSmall", "--servers", "3", "--max-generation", "2",
            "--max-crashes", "0", "--json"]
    local = CliRunner().invoke(main, args)
    remote = CliRunner().invoke(main, args + ["--engine", "spark", "--spark-master", TEST_MASTER])
    assert local.exit_code == remote.exit_code == 1, remote.output
    reports = [json.loads(r.output[r.output.index("{"):]) for r in (local, remote)]
    assert reports[1]["engine"] == "spark"
    for key in ("distinct_states", "transitions", "depth"):
        assert reports[0][key] == reports[1][key]
    lengths = [{n: r["length"] for n, r in report["properties"].items() if r["verdict"] in ("violated", "reached")}
               for report in reports]
    assert lengths[0] == lengths[1] == PINNED[2]



@pytest.mark.deep
def test_validate_on_spark_judges_a_recorded_run_with_a_variants_model(spark, tmp_path, monkeypatch):
    """hwm validate --engine spark: the executors get the variant's protocol, loaded from the copy sent, and
    give the local engine's verdicts: hwm's raft-noop recording is no run of a variant whose Q2 is every
    server (its leader took HWM 1 with one follower's copy)."""
    from hwm.checker.validate_spark import coverage_table

    (tmp_path / "team_all_copies.py").write_text(
        "from hwm.model.variant import Variant\nclass AllCopies(Variant):\n    base = 'raft-noop'\n"
        "    def replication_quorum(self):\n        return self.servers\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from hwm.properties.events import dumps, load_runs

    recorded = Path(__file__).resolve().parents[1] / "checker" / "recorded_raft_noop"
    runs = [(str(name), dumps(header, events)) for name, header, events in load_runs(sorted(recorded.glob("*.jsonl")))]
    bounds = {"servers": 3, "max_generation": 2, "max_log": 2, "max_crashes": 0}
    local = coverage_table(runs, "team_all_copies:AllCopies", bounds)
    distributed = coverage_table(runs, "team_all_copies:AllCopies", bounds, engine="spark", spark=spark)
    assert [(r["valid"], r["event"]) for r in local.runs] == [(r["valid"], r["event"]) for r in distributed.runs] \
        == [(False, 6)]


def test_rules_asked_of_every_state_run_compiled_on_the_executors_as_locally(spark):
    """A read rule (examples/variants/server_rules.py's FollowerReadsUnchecked) on the executors'
    compiled kernels, as tables each executor builds again from the variant it loads: the local
    engine's states, transitions and shortest lengths, on both backends."""
    spec = str(FLEXIBLE.parent / "server_rules.py") + ":FollowerReadsUnchecked"
    name, protocol = resolve(spec)
    config = Config(servers=4, max_generation=2, max_crashes=0)
    local = summary(run(CheckRequest(name, successors="reference"), model=build_model(protocol, config)))
    assert local[:2] == (383, 2155) and local[2]["ReadNeverTruncated"] == 7
    assert summary(spark_bfs(build_model(protocol, config), name, spark=spark, driver_level=0, exchange="shuffle",
                             successors="fast")) == local
