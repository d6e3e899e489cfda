"""`hwm prove` on the command line (hwm/prove_cli.py): its exit codes, its JSON, its progress on stderr, its
timeout and SIGTERM, and the models it refuses (the proofs themselves: tests/proofs/test_proofs.py)."""

import json
import os
import re
import signal
import subprocess
import sys
import time

from click.testing import CliRunner

from hwm.prove_cli import EXIT_INTERRUPTED, EXIT_UNDECIDED, prove


def _invoke(*args):
    return CliRunner().invoke(prove, list(args))


def test_prove_refuses_what_it_has_no_encoding_for_in_one_line():
    for args, line in [
        (("--protocol", "bookkeeper", "--max-partitions", "1"),
         "Error: hwm prove cannot check bookkeeper: partitions (max_partitions=1) are modelled for the raft, zab and "
         "kafka systems (model/partition.py, zab_partition.py, kafka_partition.py); the bookkeeper model has none "
         "yet"),
        (("--protocol", "bookkeeper", "--property", "AcknowledgedWriteKept"),
         "Error: the bookkeeper model keeps no state AcknowledgedWriteKept is about (--property takes "
         "ReadNeverTruncated, HwmNeverTruncated, ReadNeverLost, ReadsAgree, HwmWithinLog, CommittedOnQuorum, "
         "OneLeaderPerGeneration, LogMatching, AckedWriteNeverLost)"),
        (("--protocol", "zab", "--servers", "8"), "Error: hwm prove cannot check zab: the ZAB model supports at "
                                                  "most 7 servers"),
        (("--property", "AckedWriteNeverLost"), "Error: the raft model keeps no state AckedWriteNeverLost is about "
                                                "(--property takes ReadNeverTruncated, HwmNeverTruncated, "
                                                "ReadNeverLost, ReadsAgree, HwmWithinLog, CommittedOnQuorum, "
                                                "OneLeaderPerGeneration, LogMatching)"),
    ]:
        result = _invoke(*args)
        assert (result.exit_code, result.stdout, result.stderr) == (2, "", line + "\n"), args


def test_prove_command_exit_codes():
    ok = _invoke("--part", "quorum", "--max-n", "6")
    assert ok.exit_code == 0, ok.output
    assert ok.stdout.splitlines()[0].startswith("✓")
    # A broken preset whose counterexample is not found within the depth: exit 1.
    short = _invoke("--protocol", "kip101", "--part", "bmc", "--depth", "3", "--no-explorer")
    assert short.exit_code == 1, short.output
    assert short.stdout.splitlines()[0].startswith("✗")
    # Not a preset, so expected safe; BMC finds a violation: exit 1.
    unsafe = _invoke("--protocol", "raft,restart=truncate-to-own-hwm,hwm_durable=true,noop_on_election=true",
                     "--part", "bmc", "--depth", "7", "--no-explorer")
    assert unsafe.exit_code == 1, unsafe.output
    # raft-seed-quorum is broken exactly at even N (the quorum proof), two servers included: a
    # violation exits 1 as `hwm check` does, expected or not; --expect-catalogue judges by the catalogue.
    even = _invoke("--protocol", "raft-seed-quorum", "--servers", "2", "--part", "bmc", "--depth", "4")
    assert even.exit_code == 1, even.output
    assert "raft-seed-quorum violates a property (bmc raft-seed-quorum)" in even.output
    even = _invoke("--protocol", "raft-seed-quorum", "--servers", "2", "--part", "bmc", "--depth", "4",
                   "--expect-catalogue")
    assert even.exit_code == 0, even.output
    assert "as the catalogue expects" in even.output
    odd = _invoke("--protocol", "raft-seed-quorum", "--servers", "3", "--part", "bmc", "--depth", "4",
                  "--expect-catalogue")
    assert odd.exit_code == 0, odd.output  # at odd N it is raft: nothing to find, nothing expected
    assert _invoke("--protocol", "nope").exit_code == 2
    assert _invoke("--part", "everything").exit_code == 2
    assert _invoke("--servers", "0").exit_code == 2


def test_prove_command_json():
    result = _invoke("--protocol", "raft-truncate-to-own-hwm", "--part", "bmc", "--json")
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    bmc_proof = data["proofs"][0]
    assert not data["ok"] and data["obligations_met"] and data["violations_found"] == ["bmc raft-truncate-to-own-hwm"]
    assert bmc_proof["part"] == "bmc"
    assert bmc_proof["results"]["ReadNeverTruncated"]["length"] == 6
    # Every z3 query's obligation: BMC's are one per (property, depth), the last the violation found.
    rnt = [o for o in data["obligations"] if "ReadNeverTruncated" in o["name"]]
    assert [o["verdict"] for o in rnt] == ["holds"] * 5 + ["fails"]
    assert rnt[-1]["name"] == "bmc raft-truncate-to-own-hwm: ReadNeverTruncated at depth 6"
    assert all(isinstance(o["seconds"], float) for o in data["obligations"])
    assert data["undecided"] == [] and data["interrupted"] is None


def test_prove_reports_each_obligation_on_stderr_as_it_starts_and_ends():
    result = _invoke("--part", "quorum", "--max-n", "3")
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    # Six claims, each announced and then concluded, with the run's elapsed time first.
    assert len(lines) == 12 and all(line.startswith("[") and "s] quorum: " in line for line in lines)
    assert lines[0].endswith("quorum: majority = largest index held by ⌊N/2⌋+1 servers …")
    assert " quorum: majority = largest index held by ⌊N/2⌋+1 servers: holds in " in lines[1]
    assert not any(line.startswith("[") for line in result.stdout.splitlines())  # the report: stdout, unmixed


def test_a_tiny_timeout_leaves_obligations_undecided_exit_3():
    result = _invoke("--part", "induction", "--timeout", "0.001", "--json")
    assert result.exit_code == EXIT_UNDECIDED == 3, result.output
    data = json.loads(result.stdout)
    assert not data["ok"] and data["timeout"] == 0.001
    assert data["proofs"][0]["undecided"] and not data["proofs"][0]["ok"]
    undecided = [o for o in data["obligations"] if o["verdict"] == "undecided"]
    assert undecided and {o["detail"] for o in undecided} == {"z3's timeout of 0.001s"}
    assert data["undecided"] == [o["name"] for o in undecided]
    assert "induction raft: IndNext write(S1, v1)" in data["undecided"]
    text = _invoke("--part", "induction", "--timeout", "0.001")
    assert text.exit_code == 3
    assert text.stdout.splitlines()[0].startswith("?")
    # How many of the queries z3 answers within 1 ms depends on the machine.
    assert re.search(r"^raft: \d+ obligation\(s\) undecided within z3's timeout of 0.001s", text.stdout, re.M)
    assert _invoke("--timeout", "0").exit_code == 2


def _until(stream, text):
    for line in stream:
        if text in line:
            return line
    raise AssertionError(f"no line with {text!r}")


def test_sigterm_prints_what_was_decided_and_exits_130():
    # A run that would take minutes (N = 5); stopped once its first obligation is decided.
    process = subprocess.Popen([sys.executable, "-m", "hwm.cli", "prove", "--protocol", "raft", "--servers", "5",
                                "--part", "induction", "--json"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        _until(process.stderr, "IndInit: holds")
        started = time.perf_counter()
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == EXIT_INTERRUPTED == 130
    assert time.perf_counter() - started < 30  # z3's query was interrupted, not waited for
    data = json.loads(out)
    assert data["interrupted"] == "SIGTERM" and not data["ok"] and data["proofs"] == []
    assert data["obligations"][0] == {**data["obligations"][0], "name": "induction raft: IndInit", "verdict": "holds"}
    # The signal may come during a query (that one is abandoned, undecided) or between two.
    assert all(o["verdict"] == "holds" or o["detail"] == "interrupted by SIGTERM" for o in data["obligations"])


def test_prove_runs_each_systems_own_inductive_invariant(monkeypatch):
    # Which invariant `hwm prove --part induction` asks for each system: the z3 work itself is tested
    # in tests/proofs (and through this command under -m deep).
    import importlib

    from hwm.proofs import plan
    from hwm.proofs.symbolic import Proof

    for system, module in (("zab", "hwm.proofs.zab_induction"), ("kafka", "hwm.proofs.kafka_induction"),
                           ("bookkeeper", "hwm.proofs.bookkeeper")):
        assert plan.INDUCTION[system] is importlib.import_module(module).induction_proof, system
        asked = []

        def invariant(name, protocol, *, broken, servers, max_log, ledger, module=module):
            asked.append((module, name, broken))
            return Proof("induction", f"induction {name}: Inv holds ({module})", True, 0.0, "held")

        monkeypatch.setitem(plan.INDUCTION, system, invariant)
        result = CliRunner().invoke(prove, ["--protocol", system, "--part", "induction"])
        assert result.exit_code == 0, result.output
        assert asked == [(module, system, False)], asked
        assert f"induction {system}: Inv holds ({module})" in result.stdout


def test_prove_with_every_part_plans_every_part(monkeypatch):
    # The default --part all runs quorum, induction and BMC for every system (it once stopped with a
    # NameError before the first proof).
    import hwm.prove_cli
    from hwm.proofs.plan import PARTS

    planned = []
    monkeypatch.setattr(hwm.prove_cli, "run", lambda plan, ledger: planned.append(plan.parts))
    for system in ("raft", "zab", "kafka", "bookkeeper"):
        result = _invoke("--protocol", system)
        assert result.exit_code == 0, result.output
    assert planned == [PARTS] * 4
