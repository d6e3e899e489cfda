"""Fields and actions on the ZAB, Kafka and BookKeeper models (docs/variants.md, "A model: fields and
actions"; model/variant_model.py): the shipped examples pinned, each with a broken sibling and a
`sometimes` witness; the fields in each system's encoding and symmetry reduction; `hwm check`, `replay`
and `graph` on them; and the bad input each refuses in one line."""

from __future__ import annotations

import json
import re
from collections import deque
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwm.checker.run import CheckRequest, run
from hwm.cli import main
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.protocol import resolve
from hwm.properties.trace import load

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "variants"
SMALL = Config(servers=3, max_generation=2, max_crashes=0)
ONE_CRASH = Config(servers=3, max_generation=2, max_crashes=1)

# (spec, bounds): distinct states, transitions, each violated property's shortest counterexample, and
# the variant's own witness with its length.
PINNED = {
    ("zab_read_only.py:ReadOnlyMode", SMALL): (606, 2869, {}, ("ReadOnlyServerServes", 5)),
    ("zab_read_only.py:ReadOnlyFromLog", SMALL): (706, 3311, {"ReadNeverTruncated": 8, "ReadsAgree": 11},
                                                  ("ReadOnlyServerServes", 5)),
    ("kafka_follower_fetch.py:FollowerFetching", SMALL): (976, 2612, {}, ("FollowerServesConsumers", 5)),
    ("kafka_follower_fetch.py:FollowerFetchingPastHighWatermark", SMALL): (
        1218, 3399, {"ReadNeverTruncated": 6, "ReadNeverLost": 5, "ReadsAgree": 8}, ("FollowerServesConsumers", 5)),
    ("bookkeeper_fencing_reads.py:FencingRecoveryReads", ONE_CRASH): (3735, 13282, {}, ("FencedBookieBehind", 4)),
    ("bookkeeper_fencing_reads.py:FencingRecoveryReadsInMemory", ONE_CRASH): (4038, 14425, {
        "ReadNeverTruncated": 11, "HwmNeverTruncated": 10, "ReadNeverLost": 11, "CommittedOnQuorum": 9,
        "AckedWriteNeverLost": 9}, ("FencedBookieBehind", 4)),
}


def hwm(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args])


def bounds_args(config: Config) -> list:
    return ["--servers", config.servers, "--max-generation", config.max_generation, "--max-crashes",
            config.max_crashes]


@pytest.mark.parametrize("spec, config", list(PINNED))
def test_the_examples_on_the_other_systems_are_pinned(spec, config):
    states, transitions, lengths, (witness, witnessed_in) = PINNED[spec, config]
    report = run(CheckRequest(f"{EXAMPLES / spec}", config))
    assert (report.states, report.transitions) == (states, transitions)
    assert {name: r.length for name, r in report.results.items() if r.kind == "always" and r.found} == lengths
    assert report.results[witness].found and report.results[witness].length == witnessed_in


def test_the_bookkeeper_example_fixes_its_base():
    """Its base, recovery reads that do not fence, loses an acknowledged entry without a crash; the
    field's fence closes that, and the broken sibling needs the crash that forgets it."""
    base = run(CheckRequest("bookkeeper-recovery-without-fencing", SMALL))
    assert base.results["AckedWriteNeverLost"].found and base.results["AckedWriteNeverLost"].length == 7
    fixed = run(CheckRequest(f"{EXAMPLES}/bookkeeper_fencing_reads.py:FencingRecoveryReadsInMemory", SMALL))
    assert not fixed.violated


# ------------------------------------------------ states, encodings, symmetry
MIRROR = '''from hwm.model.variant import Variant


class Mirror(Variant):
    """A field that follows each server's own `alive`: the states and their classes are the base's."""

    base = {base!r}
    fields = {{"up": True}}

    def after(self, state, action, next_state):
        for k, server in enumerate(next_state.servers):
            if server.up != server.alive:
                next_state = self.with_server(next_state, k, up=server.alive)
        return next_state
'''


# Kafka and BookKeeper on two servers (their three-server spaces cost 2 s each on the reference backend).
TWO_ONE_CRASH = Config(servers=2, max_generation=2, max_crashes=1)


@pytest.mark.parametrize("base, config, states", [
    ("zab", ONE_CRASH, 1111), ("kafka", TWO_ONE_CRASH, 350), ("bookkeeper", TWO_ONE_CRASH, 434),
    ("raft", ONE_CRASH, 702), ("bookkeeper-striped", ONE_CRASH, 2459)])  # whose bookies have places: no symmetry
def test_a_field_that_mirrors_a_servers_own_state_leaves_the_counts_as_they_were(tmp_path, base, config, states):
    """The fields enter each system's encoding and symmetry sorts by them: a field that adds nothing
    the state does not say already must leave its distinct states and transitions as the preset's."""
    path = tmp_path / "mirror.py"
    path.write_text(MIRROR.format(base=base))
    variant = run(CheckRequest(f"{path}:Mirror", config))
    preset = run(CheckRequest(base, config))
    assert (variant.states, variant.transitions) == (preset.states, preset.transitions)
    assert variant.states == states


def model_of(spec: str, config: Config = SMALL):
    return build_model(resolve(f"{EXAMPLES / spec}")[1], config)


@pytest.mark.parametrize("spec, field, value", [
    ("zab_read_only.py:ReadOnlyMode", "read_only", True),
    ("kafka_follower_fetch.py:FollowerFetching", "fetch_epoch", 1),
    ("bookkeeper_fencing_reads.py:FencingRecoveryReads", "read_fenced", True),
])
def test_fields_enter_the_fingerprint_and_symmetry_permutes_them_with_their_servers(spec, field, value):
    model = model_of(spec)
    start = model.initial_state()
    second = model.rules.with_server(start, 1, **{field: value})
    third = model.rules.with_server(start, 2, **{field: value})
    assert getattr(second.servers[1], field) == value and second != third
    assert model.fingerprint(second) != model.fingerprint(start)
    assert model.fingerprint(second) == model.fingerprint(third)  # S2 and S3 swapped
    assert model.fingerprint(second, symmetry=False) != model.fingerprint(third, symmetry=False)


ACTIONS_ON_BOOKIES = '''from hwm.model.variant import Variant


class ReadOnlyBookie(Variant):
    """A bookie whose disks are full goes read-only, and refuses the writer's adds."""

    base = "bookkeeper"
    fields = {"read_only": False}
    actions = ("go_read_only",)

    def refuses(self, state, action):
        if action[0] == "send_add" and state.servers[action[1]].read_only:
            return "the bookie is read-only"
        return None

    def guard_go_read_only(self, state, bookie):
        return "already read-only" if state.servers[bookie].read_only else None

    def effect_go_read_only(self, state, bookie):
        return self.with_server(state, bookie, read_only=True)
'''


def reachable(model) -> list:
    start = model.initial_state()
    seen, queue, out = {start}, deque([start]), []
    while queue:
        state = queue.popleft()
        out.append(state)
        for _, after in model.successors(state):
            if after not in seen:
                seen.add(after)
                queue.append(after)
    return out


@pytest.mark.parametrize("spec, config, concrete", [
    ("zab_read_only.py:ReadOnlyFromLog", Config(servers=3, max_generation=1, max_crashes=0), 524),
    ("kafka_follower_fetch.py:FollowerFetchingPastHighWatermark", Config(servers=3, max_generation=1, max_crashes=0),
     268),
    ("read_only_bookie.py:ReadOnlyBookie", Config(servers=2, max_generation=1, max_crashes=0), 816),
])
def test_every_reachable_state_decodes_to_itself_and_the_guards_agree_with_the_actions(tmp_path, spec, config,
                                                                                      concrete):
    if spec.startswith("read_only_bookie"):
        (tmp_path / "read_only_bookie.py").write_text(ACTIONS_ON_BOOKIES)
        model = build_model(resolve(f"{tmp_path / spec}")[1], config)
    else:
        model = model_of(spec, config)
    states = reachable(model)
    assert len(states) == concrete
    table = model.action_table()
    own = [a for a in table if a[0] in model.own_actions]
    assert own and all(a[1] < config.servers for a in own)  # over the servers (BookKeeper's bookies) only
    for state in states:
        assert model.decode(model.encode(state, symmetry=False)) == state
        assert model.fingerprint(model.decode(model.encode(state))) == model.fingerprint(state)
        enabled = set(model.actions(state))
        for action in table:
            assert (model.why_not(state, action) is None) == (action in enabled), (action, state.describe())


# --------------------------------------------------------- the command line
# What each example adds to its system's model, as hwm names it where the implementation cannot follow it.
ADDED = {"FollowerFetchingPastHighWatermark": ("kafka", "fields (fetch_epoch) and actions (follower_fetch)"),
         "ReadOnlyFromLog": ("zab", "fields (read_only) and actions (go_read_only, read_only_read)"),
         "FencingRecoveryReadsInMemory": ("bookkeeper", "fields (read_fenced)")}


@pytest.mark.parametrize("spec, config, trace, steps, changed", [
    ("kafka_follower_fetch.py:FollowerFetchingPastHighWatermark", SMALL, "ReadNeverLost",
     ["elect(S1, {S1,S2})", "write(S1, v1)", "replicate(S1, S2)", "follower_fetch(S2)", "elect(S3, {S3})"],
     "S2 fetch_epoch 0 -> 1"),
    ("zab_read_only.py:ReadOnlyFromLog", SMALL, "ReadNeverTruncated",
     ["elect(S1, {S1,S2})", "sync(S1, S2)", "elect(S2, {S2,S3})", "write(S1, v1)", "sync(S1, S2)",
      "go_read_only(S1)", "read_only_read(S1)", "sync(S2, S1)"], "S1 read_only False -> True"),
    ("bookkeeper_fencing_reads.py:FencingRecoveryReadsInMemory", ONE_CRASH, "CommittedOnQuorum", None,
     "read_fenced False -> True"),
])
def test_check_saves_replay_replays_and_draws_and_graph_builds(tmp_path, spec, config, trace, steps, changed):
    name = spec.split(":")[1]
    result = hwm("check", "--protocol", EXAMPLES / spec, *bounds_args(config), "--save", tmp_path, "--itf")
    assert result.exit_code == 1, result.output
    assert re.search(rf"note: {name} on the reference backend: {name} adds fields \(\w+\)", result.output)
    if steps is not None:  # the shortest counterexample, as printed
        assert " ".join(steps) in result.output, result.output
    saved = tmp_path / f"{name}.{trace}.json"
    recorded = json.loads(saved.read_text())["steps"]
    replayed = hwm("replay", saved)
    assert replayed.exit_code == 0, replayed.output
    assert f"[model]: violation of {trace} at step {len(recorded)}" in replayed.output
    field = changed.split()[-4]
    assert f"{field}=" in replayed.output and changed in replayed.output
    # ITF: the variant's field after the model's own variables, in every state, taking the value the step
    # table shows; each step by name; the file replays as the trace does.
    doc = json.loads((tmp_path / f"{name}.{trace}.itf.json").read_text())
    assert field in doc["vars"][8:] and all(field in state for state in doc["states"])
    assert [state["#meta"]["action"] for state in doc["states"][1:]] == [str(step) for step in load(saved).steps]
    assert any(str(value) == changed.split()[-1] for state in doc["states"] for _, value in state[field]["#map"])
    from_itf = hwm("replay", tmp_path / f"{name}.{trace}.itf.json", "-q")
    assert from_itf.exit_code == 0, from_itf.output
    assert f"[model]: violation of {trace} at step {len(recorded)}" in from_itf.output
    page = tmp_path / "trace.html"
    drawn = hwm("replay", "--html", page, saved)
    assert drawn.exit_code == 0, drawn.output
    assert f"{field}=" in page.read_text()
    graph = hwm("graph", "--protocol", EXAMPLES / spec, *bounds_args(SMALL))
    assert graph.exit_code == 0, graph.output
    assert re.search(r"violating states +[1-9]", graph.output) or "bookkeeper" in spec
    # hwm's own replicas have no such field or action: --on impl is one line before the first step (the
    # BookKeeper example's steps are all its base's, which the replicas would take without its fence).
    system, added = ADDED[name]
    refusal = (f"{name} adds {added} to the {system} model, which hwm's own replicas do not have; use the model "
               f"(--on model)")
    on_impl = hwm("replay", saved, "-q", "--on", "impl")
    assert on_impl.exit_code == 2 and on_impl.output.strip().splitlines() == [
        f"error: {saved}, field 'protocol': {refusal}"], on_impl.output
    on_both = hwm("replay", saved, "-q", "--on", "both")  # the model's replay, then the same reason
    assert on_both.exit_code == 0, on_both.output
    model_verdict, impl_verdict = on_both.output.strip().splitlines()[-2:]
    assert model_verdict.startswith(f"{saved} [model]: violation of {trace} at step {len(recorded)}: "), on_both.output
    assert impl_verdict == f"{saved} [impl]: not replayed: {refusal}", on_both.output


def test_the_compiled_backend_is_refused_in_one_line():
    result = hwm("check", "--protocol", EXAMPLES / "kafka_follower_fetch.py:FollowerFetching", *bounds_args(SMALL),
                 "--successors", "fast")
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines()[-1] == (
        "Error: --successors fast: FollowerFetching: FollowerFetching adds fields (fetch_epoch) and actions "
        "(follower_fetch) to the model, which the compiled kernels do not know; use --successors reference")


# ------------------------------------------------------------------ bad input
def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "v.py"
    path.write_text("from hwm.model.variant import Variant\n\n\nclass V(Variant):\n" + body)
    return path


@pytest.mark.parametrize("body, expected", [
    ('    base = "kafka"\n    fields = {"in_isr": False}\n',
     r"{path}:4: V.fields: in_isr is already a field of every server"),
    ('    base = "zab"\n    fields = {"durable": 0}\n',
     r"{path}:4: V.fields: durable is already part of the zab system's state \(ZabState.durable\)"),
    ('    base = "bookkeeper"\n    fields = {"fenced": False}\n',
     r"{path}:4: V.fields: fenced is already part of the bookkeeper system's state \(BookKeeperState.fenced\)"),
    ('    base = "kafka"\n    fields = {"epochs": []}\n',
     r"{path}:4: V.fields\['epochs'\]: its initial value \[\] \(list\) is unhashable: a field holds None, a bool, "
     r"an int, a str or a tuple of these"),
    ('    base = "zab-step-down"\n    fields = {"heard": False}\n',
     r"{path}:4: V adds to the zab model, which has no partitions or check_quorum under a variant with fields or "
     r"actions in this version \(its base's flags or max_partitions ask for them\)"),
])
def test_bad_input_on_the_other_systems_is_one_line(tmp_path, body, expected):
    path = write(tmp_path, body)
    result = hwm("check", "--protocol", f"{path}:V", "--servers", "3", "--max-generation", "1")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    line = result.output.strip().splitlines()[-1]
    assert re.fullmatch(r"Error: (Invalid value for '--protocol': )?" + expected.format(path=re.escape(str(path))),
                        line), line


def test_partitions_are_refused_in_one_line_on_kafka():
    result = hwm("check", "--protocol", EXAMPLES / "kafka_follower_fetch.py:FollowerFetching", "--servers", "3",
                 "--max-generation", "1", "--max-partitions", "1")
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines()[-1] == (
        f"Error: {EXAMPLES / 'kafka_follower_fetch.py'}:26: FollowerFetching adds to the kafka model, which has no "
        f"partitions under a variant with fields or actions in this version (max_partitions asks for them)")


def test_an_effect_that_returns_another_systems_state_stops_the_search_in_one_line(tmp_path):
    path = write(tmp_path, '    base = "kafka"\n    fields = {"seen": 0}\n    actions = ("look",)\n\n'
                           '    def guard_look(self, state, server):\n        return None\n\n'
                           '    def effect_look(self, state, server):\n'
                           '        from hwm.model.state import State\n'
                           '        return State(state.servers, state.reads, state.crashes, ())\n')
    result = hwm("check", "--protocol", f"{path}:V", "--servers", "3", "--max-generation", "1", "--max-crashes", "0")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert re.search(rf"{re.escape(str(path))}:12: V.effect_look returned State, not a state \(KafkaState, as it was "
                     r"given\), at look\(S1\) from state S1 follower", result.output), result.output


@pytest.mark.parametrize("base, steps", [
    ("zab", [("elect", 0, (0, 1)), ("sync", 0, 1)]),  # the follower's server is built anew (DIFF/TRUNC/SNAP)
    ("bookkeeper", [("add",), ("send_add", 1)]),  # so is the bookie that stores an add
])
def test_a_field_keeps_its_value_through_the_bases_actions(tmp_path, base, steps):
    path = tmp_path / "tagged.py"
    path.write_text(f"from hwm.model.variant import Variant\n\n\nclass Tagged(Variant):\n    base = {base!r}\n"
                    f"    fields = {{'tag': 0}}\n")
    model = build_model(resolve(f"{path}:Tagged")[1], SMALL)
    state = model.rules.with_server(model.initial_state(), 1, tag=7)
    for action in steps:
        assert model.why_not(state, action) is None, action
        state = model.apply(state, action)
    assert type(state.servers[1]) is model.server_type and state.servers[1].tag == 7
    assert [s.tag for k, s in enumerate(state.servers) if k != 1] == [0] * (len(state.servers) - 1)


def test_the_docs_example_prints_what_the_docs_show():
    """docs/variants.md, "Fields and actions on the other systems": its `hwm check` and the lines it shows."""
    text = (ROOT / "docs" / "variants.md").read_text()
    block = next(b for b in re.findall(r"```console\n(\$ hwm check .*?)```", text, re.S) if "follower_fetch" in b)
    command, *shown = block.splitlines()
    result = hwm("check", *[str(ROOT / a) if a.startswith("examples/") else a for a in command.split()[3:]])
    assert result.exit_code == 1, result.output
    printed = result.output.splitlines()
    for line in shown:
        if line.strip() != "...":
            assert line in printed, (line, result.output)


def test_worker_processes_find_the_same_states_and_counterexamples(monkeypatch):
    """Batches of states cross to the workers as their encodings: every level expanded by two of them."""
    import hwm.checker.engine as engine
    monkeypatch.setattr(engine, "SMALL_LEVEL", 1)
    spec, config = "bookkeeper_fencing_reads.py:FencingRecoveryReadsInMemory", ONE_CRASH
    states, transitions, lengths, _ = PINNED[spec, config]
    report = run(CheckRequest(f"{EXAMPLES / spec}", config, workers=2, chunk=16))
    assert (report.states, report.transitions) == (states, transitions)
    assert {name: r.length for name, r in report.results.items() if r.kind == "always" and r.found} == lengths


def test_the_pictures_show_each_systems_notes_after_the_variants_field():
    """Kafka's server shows two notes of its own (the ISR, the epochs): the variant's field comes first."""
    from hwm.model.actions import from_step
    from hwm.properties.trace import Step
    from hwm.teach.explain import frames_of
    from hwm.teach.svg import Layout, draw

    model = model_of("kafka_follower_fetch.py:FollowerFetching")
    steps = [Step("elect", {"server": "S1", "voters": ("S1", "S2")}), Step("write", {"server": "S1", "value": "v1"}),
             Step("replicate", {"leader": "S1", "follower": "S2"})]
    states = [model.initial_state()]
    for step in steps:
        states.append(model.apply(states[-1], from_step(step)))
    frames = frames_of(model, steps, states)
    assert frames[3].lines[-1] == "S2 fetch_epoch 0 -> 1"
    svg = draw(frames[3], Layout.of(frames), with_lines=True)
    assert svg.count(">fetch_epoch=0<") == 2 and svg.count(">fetch_epoch=1<") == 1
    assert ">ISR {S1,S2,S3}<" in svg


def test_the_explorer_searches_a_variant_with_fields_on_zab(monkeypatch):
    from hwm.teach import explorer

    monkeypatch.setattr(explorer, "OFFERED_VARIANTS", {})
    spec = f"{EXAMPLES / 'zab_read_only.py'}:ReadOnlyFromLog"
    explorer.offer_variant(spec)
    found = explorer.search({"protocol": spec, "config": {"servers": 3, "max_generation": 2, "max_crashes": 0}})
    assert found["states"] == 706
    assert {r["property"]: r["length"] for r in found["results"] if r["found"]}["ReadNeverTruncated"] == 8
