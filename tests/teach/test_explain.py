"""Explained replays: every step says why it changed what it changed."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from hwm.cli import main
from hwm.checker.replay import replay_on_model
from hwm.teach.explain import explain, frames_of, frames_of_outcome, narrate
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.protocol import resolve
from hwm.properties.trace import load, parse

CATALOGUE = Path(__file__).resolve().parents[2] / "counterexamples"


def story(path, protocol=None) -> str:
    trace = load(path)
    return narrate(frames_of_outcome(trace, replay_on_model(trace, protocol), protocol))


def trace(protocol, steps, network="rpc", servers=3, max_log=2):
    return parse({"format": "hwm-trace/1", "protocol": protocol, "expect": "holds", "property": None,
                  "config": {"servers": servers, "max_log": max_log, "network": network}, "steps": steps})


def elect(c, *voters):
    return {"action": "elect", "server": c, "voters": [c, *voters]}


def test_new_hwm_shows_match_indexes_and_the_seeds_quorum_arithmetic():
    text = story(CATALOGUE / "seed.json")
    assert ("S1's match indexes S1=1, S2=1, S3=0 give quorum index 1 (sorted [0, 1, 1], the seed's "
            "computeHighwaterMark takes position 3/2 = 1)") in text
    assert "S1's high-water mark rises 0 -> 1" in text
    # The rejoin rule: which leader, which HWM, which entry (with its written value) goes.
    assert ("S1 restarts and asks the leader S2 for its high-water mark, 0, and truncates its log to it "
            "(restart=truncate-to-leader-hwm): removes 1@g1 \"v1\"") in text
    assert "!! ReadNeverTruncated violated" in text


def test_even_quorum_says_the_seed_index_is_not_a_majority():
    text = story(CATALOGUE / "raft-seed-quorum.json")
    assert "only 1 of 2 servers hold index 1: that is not a majority (2 needed)" in text


def test_append_check_names_the_compared_entry_and_the_truncated_one():
    text = story(CATALOGUE / "raft-any-generation-commit.json")
    assert "S1 truncates 1@g1 \"v1\"" in text and "S1 appends 1@g2 \"v2\"" in text
    t = trace("raft", [elect("S1", "S2"), {"action": "write", "server": "S1"},
                       {"action": "replicate", "leader": "S1", "follower": "S2"},
                       {"action": "write", "server": "S1", "value": "b"},
                       {"action": "replicate", "leader": "S1", "follower": "S2"}])
    text = narrate(frames_of_outcome(t, replay_on_model(t)))
    assert "S2 checks the entry before the batch, index 1: leader has g1, S2 has g1: match" in text
    seed = story(CATALOGUE / "raft-generation-mismatch.json")
    assert "the entry before the batch is not checked" in seed


def test_current_generation_rule_says_why_the_hwm_does_not_move():
    # S1 writes 1@g1 alone, is deposed by S2's generation 2, wins generation 3 and replicates 1@g1:
    # a quorum holds index 1 but its generation is 1, not 3.
    t = trace("raft", [elect("S1", "S2"), {"action": "write", "server": "S1"}, elect("S2", "S3"),
                       {"action": "replicate", "leader": "S2", "follower": "S1"},
                       elect("S1", "S3"), {"action": "replicate", "leader": "S1", "follower": "S3"}])
    text = narrate(frames_of_outcome(t, replay_on_model(t)))
    assert "quorum index 1" in text
    assert ("S1's high-water mark stays 0: entry 1 has generation 1, not the leader's 3, and only an entry "
            "of the current generation is committed by counting (Raft 5.4.2)") in text


def test_refused_vote_and_messages_in_flight():
    text = story(CATALOGUE / "raft-any-election.json", "raft")
    assert "(not enabled)" in text and "S1 refuses the vote: its log is more up to date" in text
    t = trace("raft", [elect("S1", "S2"), {"action": "write", "server": "S1", "value": "a"},
                       {"action": "send", "from": "S1", "to": "S2"},
                       {"action": "deliver", "from": "S1", "to": "S2"},
                       {"action": "deliver", "from": "S2", "to": "S1"}], network="async")
    text = narrate(frames_of_outcome(t, replay_on_model(t)))
    assert 'in flight: S1->S2: append g1 after 0@g0 [1@g1 "a"] hwm 0' in text
    assert "in flight: S2->S1: reply g1 ok index 1" in text
    assert "S1 sets S2's match index to 1" in text


def test_unknown_action_falls_back_to_the_difference():
    _, protocol = resolve("raft")
    model = build_model(protocol, Config())
    before = model.initial_state()
    after = model.apply(before, ("elect", 0, (0, 1)))
    lines = explain(model, before, ("become_observer", 0), after)
    assert "S1 role follower -> leader" in lines and "S1 generation 0 -> 1" in lines
    # And a model of another kind (None: an implementation's snapshots) the same way.
    assert frames_of(None, load(CATALOGUE / "seed.json").steps[:1], [before, after])[1].lines == [
        "S1 role follower -> leader", "S1 generation 0 -> 1", "S2 generation 0 -> 1"]


def test_cli_replay_explains_by_default_and_brief_is_the_table(tmp_path):
    runner = CliRunner()
    path = CATALOGUE / "seed.json"
    full = runner.invoke(main, ["replay", str(path)])
    assert full.exit_code == 0
    explanation = json.loads(path.read_text())["explanation"]
    assert explanation.split()[:6] == full.output.split("\n")[1].split()[:6]
    assert "Step by step:" in full.output and "quorum index 1" in full.output
    brief = runner.invoke(main, ["replay", "--brief", str(path)])
    assert brief.exit_code == 0
    assert "Step by step:" not in brief.output and explanation[:40] not in brief.output
    assert "#  step" in brief.output


def test_a_model_that_changes_an_action_gets_the_difference_not_wrong_words():
    from hwm.model.raft import RaftModel

    class MinimumHwm(RaftModel):  # another system's HWM rule behind the same action names
        def _advance_hwm(self, leader, position):
            return leader

    _, protocol = resolve("raft")
    model = MinimumHwm(protocol, Config())
    before = model.apply(model.apply(model.initial_state(), ("elect", 0, (0, 1))), ("write", 0))
    after = model.apply(before, ("replicate", 0, 1))
    lines = explain(model, before, ("replicate", 0, 1), after)
    assert lines == ["S2 log [] -> [1]"]
    assert not any("quorum index" in line for line in lines)


def test_a_lassos_replay_says_where_the_cycle_starts_and_that_it_repeats():
    from hwm.checker.replay import replay_on_model

    trace = load(CATALOGUE / "liveness" / "seed-followers-catch-up.json")
    frames = frames_of_outcome(trace, replay_on_model(trace))
    assert [f.number for f in frames if f.cycle] == [10, 11] and {f.loop for f in frames} == {10}
    assert frames[10].lines[0] == "the cycle starts: steps 10..11 repeat for ever from here"
    assert frames[11].lines[-1] == ("the cluster is back in the state it was in before step 10: the cycle repeats "
                                    "from step 10")
    assert "FollowersCatchUp" in frames[11].violations
    text = narrate(frames)
    assert "-- the cycle: steps 10..11 repeat for ever --\n10. replicate(S1, S2)  (cycle)" in text
    assert text.endswith("-- then step 10 again, and so on for ever --")
    # A lasso whose cycle does not close says so rather than claiming it repeats.
    broken = frames_of(None, trace.steps, [f.state for f in frames[:11]] + [frames[3].state], loop=10)
    assert "the cycle should close here" in broken[11].lines[-1]
