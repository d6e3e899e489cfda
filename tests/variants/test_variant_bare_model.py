"""A model written from scratch on the base `Model` (docs/variants.md, "A model from scratch"; model/bare.py):
examples/variants/primary_backup.py pinned with its two broken siblings and its own witness, on one and
two workers; its states decode to themselves with a leader that keeps no match indexes; the commands run
on a copy outside the checkout (check --save, replay, --on impl refused, graph, liveness, validate); and
each bad declaration is one line before the search."""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwm.checker.run import CheckRequest, run
from hwm.cli import main
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.protocol import resolve

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "variants" / "primary_backup.py"
SMALL = Config(servers=3, max_generation=2, max_log=1, max_crashes=1)
# Figure 8's bug needs four generations and two crashes.
FOUR = Config(servers=3, max_generation=4, max_log=1, max_crashes=2)
WITNESSES = {"EntryRead": 5, "UncommittedTruncated": 6, "LeaderChangeWithUncommitted": 4, "CrashAndRejoin": 2,
             "PrimaryCarriesOlderEntry": 4}

# (name, bounds): distinct states, transitions, and every property found with its shortest length.
PINNED = {
    ("PrimaryBackup", FOUR): (8249, 27085, WITNESSES),
    ("LastEntryFreshness", FOUR): (8518, 29424, {"ReadNeverTruncated": 14, "HwmNeverTruncated": 13,
                                                 "ReadNeverLost": 13, "ReadsAgree": 16, "CommittedOnQuorum": 13,
                                                 **WITNESSES}),
    ("MinorityTakeOver", SMALL): (732, 2038, {"ReadNeverTruncated": 8, "ReadNeverLost": 6, "ReadsAgree": 9,
                                              "CommittedOnQuorum": 3, **WITNESSES, "EntryRead": 4}),
}


def hwm(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args])


def summary(report) -> tuple:
    return report.states, report.transitions, {n: r.length for n, r in report.results.items() if r.found}


def bounds(config: Config) -> list:
    return ["--servers", config.servers, "--max-generation", config.max_generation, "--max-log", config.max_log,
            "--max-crashes", config.max_crashes]


@pytest.mark.parametrize("name, config", list(PINNED))
def test_the_primary_backup_models_are_pinned(name, config):
    assert summary(run(CheckRequest(f"{EXAMPLE}:{name}", config))) == PINNED[name, config]


def test_two_workers_find_the_same(tmp_path):
    """Each worker builds the model again from its pickled protocol: the base Model's, not raft's."""
    request = CheckRequest(f"{EXAMPLE}:LastEntryFreshness", FOUR, workers=2)
    assert summary(run(request)) == PINNED["LastEntryFreshness", FOUR]


def model_of(name: str, config: Config = SMALL):
    return build_model(resolve(f"{EXAMPLE}:{name}")[1], config)


def test_the_base_model_has_no_election_and_no_replication_of_its_own():
    model = model_of("PrimaryBackup")
    start = model.initial_state()
    assert sorted({a[0] for a in model.action_table()}) == ["commit", "copy", "crash", "read", "restart",
                                                            "take_over", "write"]
    assert model.why_not(start, ("elect", 0, (0, 1))) == "elect is not an action of the base Model"
    assert model.why_not(start, ("replicate", 0, 1)) == "replicate is not an action of the base Model"
    # Raft's write counts the leader's match indexes toward its HWM; the base Model's leaves the commit to
    # the variant: a primary that kept no match indexes writes, and its HWM stays.
    primary = model.apply(start, ("take_over", 0))
    assert primary.servers[0].match == ()
    wrote = model.apply(primary, ("write", 0))
    assert wrote.servers[0].log == (1,) and wrote.servers[0].hwm == 0


def test_every_reachable_state_decodes_as_itself_and_the_guards_agree_with_the_actions():
    """Raft's encoding reads a leader's match indexes by its role: a primary of `take_over` keeps none,
    and is written with zeros, so the decoded state is the same state to every action and property."""
    model = model_of("MinorityTakeOver")
    seen, frontier = {model.fingerprint(model.initial_state())}, [model.initial_state()]
    table = model.action_table()
    while frontier:
        state = frontier.pop()
        again = model.decode(model.encode(state, symmetry=False))
        assert model.encode(again, symmetry=False) == model.encode(state, symmetry=False)
        assert [a for a in model.actions(again)] == [a for a in model.actions(state)]
        enabled = set(model.actions(state))
        for action in table:
            assert (model.why_not(state, action) is None) == (action in enabled), (action, state.describe())
        for action in enabled:
            after = model.apply(state, action)
            if model.fingerprint(after) not in seen:
                seen.add(model.fingerprint(after))
                frontier.append(after)
    assert len(seen) == PINNED["MinorityTakeOver", SMALL][0]


# ------------------------------------------------------------------ commands
@pytest.fixture
def team(tmp_path) -> Path:
    path = tmp_path / "team" / "primary_backup.py"
    path.parent.mkdir()
    shutil.copy(EXAMPLE, path)
    return path


def test_check_saves_figure_8_and_replay_explains_it_step_by_step(team, tmp_path):
    saved = tmp_path / "saved"
    result = hwm("check", "--protocol", f"{team}:LastEntryFreshness", *bounds(FOUR), "--save", saved, "--itf")
    assert result.exit_code == 1, result.output
    assert "on the reference backend: LastEntryFreshness adds actions (take_over, copy, commit)" in result.output
    assert ("✗ ReadNeverTruncated           violated in 14 steps: S1 removed entry 1@g1, which a client has "
            "read; only 1 of 3 servers still store it") in result.output
    trace = saved / "LastEntryFreshness.ReadNeverTruncated.json"
    steps = [s["action"] for s in json.loads(trace.read_text())["steps"]]
    assert steps[-2:] == ["take_over", "copy"] and steps.count("take_over") == 4
    replayed = hwm("replay", trace)
    assert replayed.exit_code == 0, replayed.output
    assert "S3 generation 0 -> 3\n     S3 log [] -> [1]" in replayed.output  # copy(S1, S3): an old entry, a new generation
    assert "(as expected)" in replayed.output
    itf = hwm("replay", saved / "LastEntryFreshness.ReadNeverTruncated.itf.json", "-q")
    assert itf.exit_code == 0 and "(as expected)" in itf.output, itf.output
    refused = hwm("replay", trace, "-q", "--on", "impl")
    assert refused.exit_code == 2, refused.output
    assert refused.output.strip().splitlines()[-1].endswith(
        "LastEntryFreshness adds actions (take_over, copy, commit) to the base Model, which hwm's own replicas do "
        "not have; use the model (--on model)")


def test_graph_and_liveness_of_a_model_from_scratch(team):
    graph = hwm("graph", "--protocol", f"{team}:MinorityTakeOver", *bounds(SMALL))
    assert graph.exit_code == 0, graph.output
    assert re.findall(r"^(states|transitions) +([\d,]+)", graph.output, re.M) == [("states", "732"),
                                                                                  ("transitions", "1,796")]
    live = hwm("check", "--protocol", f"{team}:PrimaryBackup", *bounds(SMALL), "--liveness")
    assert live.exit_code == 0, live.output
    assert "weakly fair: restart;" in live.output  # the base Model's own fair action: no replicate to name
    assert "✓ WrittenEventuallyCommitted   holds" in live.output


def test_validate_steps_a_recorded_run_with_the_variants_actions(team, tmp_path):
    """A recording whose changes are the primary-backup protocol's steps is valid; a backup that shows an
    entry its primary never had is no step of the model's (the base Model has no raft steps to try)."""
    def record(folder: Path, backup_append: list) -> Path:
        folder.mkdir()
        events = {"S1": [{"generation": 1, "role": "leader", "time": 1}, {"append": [[1, 1]], "time": 2},
                         {"hwm": 1, "time": 4}],
                  "S2": [{"generation": 1, "append": backup_append, "time": 3}], "S3": []}
        for server, lines in events.items():
            header = {"format": "hwm-events/1", "servers": ["S1", "S2", "S3"], "protocol": f"{team}:PrimaryBackup",
                      "part": server}
            (folder / f"{server}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in
                                                            [header] + [{"server": server, **e} for e in lines]))
        return folder

    good = hwm("validate", record(tmp_path / "good", [[1, 1]]), "--protocol", f"{team}:PrimaryBackup")
    assert good.exit_code == 0 and "valid: 4 events" in good.output, good.output
    bad = hwm("validate", record(tmp_path / "bad", [[1, 2]]), "--protocol", f"{team}:PrimaryBackup")
    assert bad.exit_code == 1 and "no model step explains event 3" in bad.output, bad.output


# ------------------------------------------------------------------ bad input
BARE = '''from hwm.model.actions import Model
from hwm.model.variant import Variant


class Mine(Variant):
    base = Model
    actions = ("lead",)

    def guard_lead(self, state, server):
        return None if state.servers[server].role == "follower" else "leads"

    def effect_lead(self, state, server):
        return self.with_server(state, server, role="leader", generation=1)
'''


@pytest.mark.parametrize("replace, expected", [
    ('    actions = ("lead",)\n', r"mine.py:5: Mine.base 'Model': the base Model has no election and no replication: "
                                r"a variant of it declares the actions that elect, replicate and commit"),
    ("    base = Model\n", r"mine.py:\d: Mine.base 'RaftModel': a class as a base is the base Model "
                           r"\(hwm.model.actions.Model\) alone; a system's model is named by a preset"),
    ("\nclass Mine", r"mine.py:\d+: Mine.grants_vote: the base Model has no elections, votes, appends or commits of "
                     r"its own: the variant's actions decide them"),
])
def test_a_bad_declaration_on_the_base_model_is_one_line(tmp_path, replace, expected):
    source = BARE
    if replace.startswith("    actions"):
        source = source.replace(replace, "")
    elif replace.startswith("    base"):
        source = "from hwm.model.raft import RaftModel\n" + source.replace(replace, "    base = RaftModel\n")
    else:
        source += "\n    def grants_vote(self, candidate_log, voter_log):\n        return True\n"
    path = tmp_path / "mine.py"
    path.write_text(textwrap.dedent(source))
    result = hwm("check", "--protocol", f"{path}:Mine", "--max-generation", "1", "--max-crashes", "0")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert re.search(expected, result.output.strip().splitlines()[-1]), result.output


@pytest.mark.parametrize("option", [["--network", "async"], ["--max-partitions", "1"]])
def test_the_base_model_has_no_network_of_its_own(tmp_path, option):
    path = tmp_path / "mine.py"
    path.write_text(BARE)
    result = hwm("check", "--protocol", f"{path}:Mine", "--max-generation", "1", "--max-crashes", "0", *option)
    assert result.exit_code == 2, result.output
    assert "the base Model has no network of its own" in result.output and "Traceback" not in result.output
