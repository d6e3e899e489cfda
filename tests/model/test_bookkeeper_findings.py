"""BookKeeper's findings name its servers by their part: the writer and the recovery client are
servers of the state (S4 and S5 with 3 bookies), so a count out of 5 or "S5 became leader" must say
so, or a reader looks for bookies that do not exist. Other systems' findings keep their wording."""

import re

from hwm.checker.run import CheckRequest, run
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.protocol import PRESETS

CLIENTS = "5 servers (3 bookies, the writer and the recovery client)"


def findings(preset: str) -> dict[str, str]:
    report = run(CheckRequest(preset, successors="fast"), model=build_model(PRESETS[preset].protocol, Config()))
    return {name: r.finding for name, r in report.results.items() if r.found}


def test_bookkeeper_findings_name_the_writer_and_the_recovery_client():
    found = findings("bookkeeper-recovery-without-fencing")
    assert found["ReadNeverLost"].startswith("S5 (the recovery client) became leader of generation 2"), found
    assert found["CommittedOnQuorum"].startswith("S4 (the writer) counts entry 1@g1"), found
    assert f"only 2 of {CLIENTS} store it" in found["CommittedOnQuorum"]
    assert f"only 1 of {CLIENTS} still store it" in found["ReadNeverTruncated"]
    assert f"stored on only 2 of {CLIENTS} (a quorum is 3)" in found["AckedWriteNeverLost"]
    assert "S5 (the recovery client) became leader of generation 2 while S4 (the writer) held" \
        in found["LeaderChangeWithUncommitted"]
    assert not [text for text in found.values() if re.search(r"of 5 servers(?! \(3 bookies)|S[45] (?!\(the)", text)]


def test_a_raft_finding_counts_servers_as_before():
    found = findings("raft-any-generation-commit")
    assert found["ReadNeverTruncated"].endswith("only 1 of 3 servers still store it"), found
    assert found["LeaderChangeWithUncommitted"].startswith("S"), found
    assert "(the" not in " ".join(found.values())
