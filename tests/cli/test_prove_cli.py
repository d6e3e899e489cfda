"""`hwm prove` on the command line (hwm/prove_cli.py): its exit codes, its JSON, and the models it refuses
(the proofs themselves: tests/proofs/test_proofs.py)."""

import json

from click.testing import CliRunner

from hwm.prove_cli import prove


def _invoke(*args):
    return CliRunner().invoke(prove, list(args))


def test_prove_refuses_partitions_and_leases_naming_why():
    result = _invoke("--protocol", "raft-lease-reads")
    assert result.exit_code == 2 and "no partitions, check-quorum" in result.output


def test_prove_command_exit_codes():
    ok = _invoke("--part", "quorum", "--max-n", "6")
    assert ok.exit_code == 0, ok.output
    assert ok.output.splitlines()[0].startswith("✓")
    # A broken preset whose counterexample is not found within the depth: exit 1.
    short = _invoke("--protocol", "kip101", "--part", "bmc", "--depth", "3", "--no-explorer")
    assert short.exit_code == 1, short.output
    assert short.output.splitlines()[0].startswith("✗")
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
    data = json.loads(result.output)
    bmc_proof = data["proofs"][0]
    assert not data["ok"] and data["obligations_met"] and data["violations_found"] == ["bmc raft-truncate-to-own-hwm"]
    assert bmc_proof["part"] == "bmc"
    assert bmc_proof["results"]["ReadNeverTruncated"]["length"] == 6
