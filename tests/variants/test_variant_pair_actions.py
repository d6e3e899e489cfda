"""A variant's action over two servers (docs/variants.md, "A model: fields and actions"): its guard and
effect take `(state, i, j)`, it runs over every ordered pair of two servers, prints as `name(S1, S2)`,
is saved in a trace with `from` and `to`, and replays and draws as any step. `examples/variants/gossip.py`
pinned: followers gossiping their high-water marks, checked (holds) and unchecked (caught)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwm.checker.run import CheckRequest, run
from hwm.cli import main
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.protocol import resolve

ROOT = Path(__file__).resolve().parents[2]
GOSSIP = ROOT / "examples" / "variants" / "gossip.py"
BOUNDS = ["--servers", "3", "--max-generation", "2", "--max-crashes", "0"]


def hwm(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize("name, states, transitions, lengths", [
    ("HwmGossip", 139, 659, {}),
    ("HwmGossipUnchecked", 159, 772, {"ReadNeverTruncated": 8, "HwmNeverTruncated": 7, "ReadsAgree": 8,
                                      "CommittedOnQuorum": 6}),
])
def test_gossip_is_pinned(name, states, transitions, lengths):
    config = Config(servers=3, max_generation=2, max_crashes=0)
    _, protocol = resolve(f"{GOSSIP}:{name}")
    table = build_model(protocol, config).action_table()
    assert ("share_hwm", 1, 0) in table and ("share_hwm", 0, 0) not in table
    assert sum(1 for action in table if action[0] == "share_hwm") == 6  # every ordered pair of two of three
    report = run(CheckRequest(f"{GOSSIP}:{name}", config))
    assert (report.states, report.transitions) == (states, transitions)
    assert {n: r.length for n, r in report.results.items() if r.kind == "always" and r.found} == lengths


def test_a_two_server_step_is_saved_replayed_and_drawn(tmp_path):
    checked = hwm("check", "--protocol", f"{GOSSIP}:HwmGossipUnchecked", *BOUNDS, "--save", tmp_path)
    assert checked.exit_code == 1, checked.output
    assert ("elect(S1, {S1,S2}) elect(S2, {S2,S3}) write(S1, v1) write(S2, v2) replicate(S2, S3) share_hwm(S2, S1)"
            in checked.output)
    saved = tmp_path / "HwmGossipUnchecked.CommittedOnQuorum.json"
    steps = json.loads(saved.read_text())["steps"]
    assert steps[-1] == {"action": "share_hwm", "from": "S2", "to": "S1"}
    replayed = hwm("replay", saved, "--brief", "--html", tmp_path / "page.html")
    assert replayed.exit_code == 0, replayed.output
    assert re.search(r"^6  share_hwm\(S2, S1\)\s+L1 \[1\] h1\s+L2 \[2\] h1\s+F2 \[2\] h0", replayed.output, re.M), \
        replayed.output
    assert "violation of CommittedOnQuorum at step 6" in replayed.output
    assert "share_hwm(S2, S1)" in (tmp_path / "page.html").read_text()
    # The same steps under the checked rule: S1's log differs from S2's below its HWM, so step 6 is refused.
    refused = hwm("replay", saved, "--brief", "--protocol", f"{GOSSIP}:HwmGossip")
    assert ("step 6 is not enabled: share_hwm(S2, S1): their logs differ below the giver's high-water mark"
            in refused.output), refused.output


@pytest.mark.parametrize("methods, expected", [
    ("    def guard_pair(self, state, i, j):\n        return None\n"
     "    def effect_pair(self, state, server):\n        return state\n",
     r"{path}:7: V.guard_pair and effect_pair take \(state, server\) for an action over one server, or both "
     r"\(state, i, j\) for one over two servers; they take 2 and 1 servers"),
    ("    def guard_pair(self, state, i, j, k):\n        return None\n"
     "    def effect_pair(self, state, i, j, k):\n        return state\n",
     r"{path}:7: V.guard_pair and effect_pair take .*; they take None and None servers"),
])
def test_a_guard_and_effect_that_disagree_on_their_servers_are_one_line(tmp_path, methods, expected):
    path = tmp_path / "v.py"
    path.write_text("from hwm.model.variant import Variant\n\n\nclass V(Variant):\n    base = 'raft'\n"
                    "    actions = ('pair',)\n" + methods)
    result = hwm("check", "--protocol", f"{path}:V", *BOUNDS)
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    line = result.output.strip().splitlines()[-1]
    assert re.fullmatch(r"Error: Invalid value for '--protocol': " + expected.format(path=re.escape(str(path))),
                        line), line
