"""The bug catalogue: every file is the explorer's shortest trace and replays as it says, on the
model and on the implementation (bridge.simcluster: real replicas, storage and codec)."""

import re

import pytest
from click.testing import CliRunner

from hwm.counterexamples.build import CATALOGUE, HERE, KAFKA, preset_of_entry
from hwm.checker.traces import trace_for
from hwm.cli import main
from hwm.checker.replay import judge, replay_on_model
from hwm.bridge.replay import replay_on_impl
from hwm.model.state import Config
from hwm.properties.protocol import MODEL_ONLY_SYSTEMS, PRESETS, model_only, resolve
from hwm.properties.snapshot import snapshot_of
from hwm.properties.trace import TraceError, load
from tests.explored import explore_compiled

FILES = sorted(HERE.glob("*.json"))
# Entries whose protocol the implementation follows (every system's), and the model-only ones (a flag
# the implementation lacks: Kafka's min_insync_replicas, log_flush ...).
ON_IMPL = [f for f in FILES if not model_only(resolve(load(f).protocol)[1])]
MODEL_ONLY = [f for f in FILES if f not in ON_IMPL]


def safe_preset(trace) -> str:
    """The safe preset of the trace's system: the preset named after it (raft, zab, bookkeeper), or
    raft-lease-reads for a raft whose leader serves reads from its lease (LeaseReadNeverStale is
    about those reads), or bookkeeper-ensemble-change for a ledger with spare bookies (its ensemble
    changes need them)."""
    protocol = resolve(trace.protocol)[1]
    if protocol.system == "bookkeeper" and protocol.ensemble_size != "all":
        return "bookkeeper-ensemble-change"
    return "raft-lease-reads" if protocol.lease_reads else protocol.system


def test_every_broken_preset_has_an_entry_and_every_entry_a_preset():
    broken = {name for name, p in PRESETS.items() if p.broken}
    assert {f.stem for f in FILES} == set(CATALOGUE) | set(KAFKA)
    assert {preset_of_entry(f.stem) for f in FILES} == broken
    assert all(load(f).protocol == preset_of_entry(f.stem) for f in FILES)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_entry_replays_as_expected_on_the_model(path):
    trace = load(path)
    assert trace.title and len(trace.explanation) > 200
    outcome = replay_on_model(trace)
    assert judge(trace, outcome, overridden=False)[0] == 0, outcome.summary()
    assert outcome.step == len(trace.steps)  # the violation is the last step: nothing is superfluous


# Entries whose space takes seconds to explore (a 2-entry log under power failures; a partition, on the
# reference backend, whose pins tests/model/test_partition_kafka_zab.py checks by default): under -m deep.
SLOW_TO_EXPLORE = {"kafka-unflushed-divergence", "kafka-without-controller-fencing"}


@pytest.mark.parametrize("path", [pytest.param(f, marks=pytest.mark.deep) if f.stem in SLOW_TO_EXPLORE else f
                                  for f in FILES], ids=lambda p: p.stem)
def test_entry_is_the_explorers_shortest_trace(path):
    trace = load(path)
    report = explore_compiled(trace.protocol, Config.from_mapping(trace.config))
    shortest = trace_for(report, trace.protocol, trace.property)
    assert [s.to_json() for s in trace.steps] == [s.to_json() for s in shortest.steps]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_raft_holds_or_blocks_with_a_reason(path):
    trace = load(path)
    outcome = replay_on_model(trace, safe_preset(trace))
    assert outcome.kind in ("holds", "blocked")
    if outcome.kind == "blocked":
        assert outcome.reason and ":" in outcome.reason


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_the_systems_safe_preset_holds_or_blocks_with_a_reason(path):
    trace = load(path)
    outcome = replay_on_model(trace, safe_preset(trace))
    assert outcome.kind in ("holds", "blocked"), outcome.summary()
    if outcome.kind == "blocked":
        assert outcome.reason and ":" in outcome.reason


def test_the_systems_bugs_hold_under_their_safe_presets_step_for_step():
    # Every step of the ZAB and BookKeeper entries is enabled under the fix: the fix changes what a
    # step does (persist before the ACK, fence on the recovery read), not whether it can happen.
    for path in FILES:
        trace = load(path)
        if safe_preset(trace) not in ("zab", "bookkeeper"):  # Kafka's fixes block steps (below)
            continue  # and so does blocking add completions (test_bookkeeper_unblocked_adds_...)
        outcome = replay_on_model(trace, safe_preset(trace))
        assert (outcome.kind, len(outcome.rows)) == ("holds", len(trace.steps) + 1), (path.stem, outcome.summary())


def test_bookkeeper_unblocked_adds_is_blocked_where_the_fixed_writer_stops():
    # Holding back add completions, the writer's failed metadata update stops it at the ensemble
    # change: the send to the replacement bookie is refused.
    outcome = replay_on_model(load(HERE / "bookkeeper-unblocked-adds.json"), "bookkeeper-ensemble-change")
    assert (outcome.kind, outcome.step) == ("blocked", 6), outcome.summary()
    assert "the writer has been fenced out" in outcome.reason


@pytest.mark.parametrize("path", MODEL_ONLY, ids=lambda p: p.stem)
def test_a_model_only_entry_says_so_on_the_implementation(path):
    with pytest.raises(TraceError, match="model-only"):
        replay_on_impl(load(path))



# Kafka's entries: what each shows under the safe preset `kafka`, and the source it cites.
KAFKA_UNDER_SAFE = {
    "kafka-truncate-to-hwm": ("holds", None, None),
    "kafka-truncate-to-hwm-divergence": ("holds", None, None),
    "kafka-kip101": ("holds", None, None),
    "kafka-kip279": ("blocked", 11, "FENCED_LEADER_EPOCH"),
    "kafka-kip320-first-try": ("blocked", 6, "FENCED_LEADER_EPOCH"),
    "kafka-unclean-election": ("blocked", 9, "unclean leader election is disabled"),
    "kafka-min-insync-1": ("holds", None, None),  # a majority's HW waits: nothing is acknowledged
    "kafka-unflushed": ("holds", None, None),  # every append is on disk: the crash keeps the log
    "kafka-unflushed-last-replica-standing": ("holds", None, None),
    # S1 keeps its two entries of epoch 1 across the crash, so its second write of epoch 2 exceeds the
    # trace's max_log: a bound, not the fix, stops the model; the implementation has no max_log and holds.
    "kafka-unflushed-divergence": ("blocked", 9, "max_log 2"),
    # The partition takes S1 out of the ISR (its session expires) and its shrink cannot reach the controller.
    "kafka-without-controller-fencing": ("blocked", 5, "cut off from the controller"),
}
# Entries that a bound of the trace stops under the safe preset (above): the implementation holds.
KAFKA_SAFE_PAST_A_BOUND = {"kafka-unflushed-divergence"}
# Entries with a step the implementation's simulated cluster does not take (a partition): it says so there.
KAFKA_ON_IMPL = {"kafka-without-controller-fencing": ("blocked", 4, "partition is not an action of Kafka's replicas")}


@pytest.mark.parametrize("name", sorted(KAFKA))
def test_kafka_entry_cites_its_source_and_the_safe_preset_stops_it(name):
    trace = load(HERE / f"{name}.json")
    source = trace.extra["source"]
    assert "KIP-" in source or "KAFKA-" in source or "documentation" in source or "jepsen" in source
    kind, step, words = KAFKA_UNDER_SAFE[name]
    outcome = replay_on_model(trace, "kafka")
    assert (outcome.kind, outcome.step) == (kind, step), outcome.summary()
    if words and name not in KAFKA_SAFE_PAST_A_BOUND:
        assert words in outcome.reason and "max_" not in outcome.reason  # the protocol blocks it, not a bound
    elif words:
        assert words in outcome.reason
    # The explanation names the servers in the order they first act.
    first = []
    for s in trace.steps:
        for v in s.args.values():
            for server in (v if isinstance(v, tuple) else (v,)):
                if isinstance(server, str) and server.startswith("S") and server not in first:
                    first.append(server)
    mentioned = sorted(first, key=trace.explanation.find)
    assert mentioned == first, (mentioned, first)


def test_a_kafka_trace_does_not_replay_under_a_raft_protocol():
    result = CliRunner().invoke(main, ["replay", "--protocol", "raft", str(HERE / "kafka-kip101.json")])
    assert result.exit_code == 2 and "this trace is of kafka" in result.output


@pytest.mark.parametrize("name", sorted(KAFKA))
def test_kafka_entry_on_the_implementation_under_the_safe_preset(name):
    # The implementation's Kafka replicas take the same steps as the model under `kafka`, and
    # refuse the same one, in their own words (the leader's error code, the controller's refusal).
    trace = load(HERE / f"{name}.json")
    kind, step, words = (("holds", None, None) if name in KAFKA_SAFE_PAST_A_BOUND
                         else KAFKA_ON_IMPL.get(name, KAFKA_UNDER_SAFE[name]))
    outcome = replay_on_impl(trace, "kafka")
    assert (outcome.kind, outcome.step) == (kind, step), outcome.summary()
    if words:
        assert words in outcome.reason
    model = replay_on_model(trace, "kafka")
    # Step by step the same, up to where the model's bound stops it.
    shared = min(len(outcome.rows), len(model.rows))
    assert [snapshot_of(view) for _, view in outcome.rows][:shared] == [snapshot_of(view) for _, view in model.rows][:shared]
    assert shared == len(model.rows) or name in KAFKA_ON_IMPL


def test_kafka_replays_on_the_implementation_from_the_command_line():
    result = CliRunner().invoke(main, ["replay", "--on", "impl", "-q", str(HERE / "kafka-kip101.json")])
    assert result.exit_code == 0 and "LogMatching" in result.output and "(as expected)" in result.output, result.output


@pytest.mark.parametrize("path", ON_IMPL, ids=lambda p: p.stem)
def test_entry_replays_as_expected_on_the_implementation(path):
    trace = load(path)
    outcome = replay_on_impl(trace)
    assert outcome.on == "impl"
    assert judge(trace, outcome, overridden=False)[0] == 0, outcome.summary()
    assert outcome.step == len(trace.steps)
    model = replay_on_model(trace)
    assert (outcome.property, outcome.finding) == (model.property, model.finding)
    # Step by step, the implementation's snapshots are the model's.
    assert [snapshot_of(view) for _, view in outcome.rows] == [snapshot_of(view) for _, view in model.rows]


@pytest.mark.parametrize("path", ON_IMPL, ids=lambda p: p.stem)
def test_the_systems_safe_preset_holds_or_blocks_with_a_reason_on_the_implementation(path):
    trace = load(path)
    outcome = replay_on_impl(trace, safe_preset(trace))
    assert outcome.kind in ("holds", "blocked"), outcome.summary()
    if outcome.kind == "blocked":
        assert outcome.reason and ":" in outcome.reason
    model = replay_on_model(trace, safe_preset(trace))
    # Where the model's guard forbids a step, the implementation refuses the same step (a lost
    # vote carries the same words); a read both refuse says why in each one's terms.
    assert (outcome.kind, outcome.step) == (model.kind, model.step)
    if outcome.kind == "blocked" and "vote" in model.reason:
        assert outcome.reason == model.reason


def test_the_whole_catalogue_replays_on_both_from_the_command_line():
    result = CliRunner().invoke(main, ["replay", "--on", "both", "-q"] + [str(p) for p in FILES])
    assert result.exit_code == 0, result.output
    assert result.output.count("[impl]: ") == len(FILES) and "(expected" not in result.output
    assert result.output.count("[model]: ") == result.output.count("(as expected)") - len(ON_IMPL) == len(FILES)
    assert result.output.count("[impl]: not replayed: ") == len(MODEL_ONLY)
    for path in MODEL_ONLY:  # the implementation has no such replica: exit 2, said plainly
        result = CliRunner().invoke(main, ["replay", "--on", "impl", "-q", str(path)])
        assert result.exit_code == 2 and "model-only" in result.output, result.output
    # Each entry under its own safe preset: its system's, or raft-lease-reads (model-only) for the lease
    # entries, whose partition step the implementation does not take.
    for preset in ("raft", "kafka", "zab", "bookkeeper", "raft-lease-reads"):
        files = [str(p) for p in FILES if safe_preset(load(p)) == preset]
        on = "model" if preset in MODEL_ONLY_SYSTEMS or model_only(PRESETS[preset].protocol) else "both"
        result = CliRunner().invoke(main, ["replay", "--on", on, "-q", "--protocol", preset] + files)
        assert files and result.exit_code == 0, result.output


# ------------------------------------------- explanations tell the steps in order
# What an explanation says happens, in the words the catalogue uses: (action, pattern). A pattern's
# groups are the acting server (optional where the sentence has it earlier), then the follower,
# generation or server read from.
TOLD = [
    ("elect", re.compile(r"\b(S\d)(?:, [^,]+,)? (?:then )?wins (?:generation|epoch) (\d+)")),
    ("write", re.compile(r"(?:\b(S\d)(?:, [^,]+,)? )?\bwrites\b")),
    ("replicate", re.compile(r"(?:\b(S\d)(?:, [^,]+,)? )?\breplicates\b[^.;:]*?\bto (S\d)")),
    ("read", re.compile(r"\ba client reads\b[^.;:]*?\bfrom (S\d)", re.IGNORECASE)),
    ("crash", re.compile(r"\b(S\d) crashes\b")),
]


def told_events(explanation: str) -> list[tuple[str, tuple]]:
    """The events an explanation tells, in the order it tells them."""
    found = []
    for action, pattern in TOLD:
        found += [(m.start(), action, m.groups()) for m in pattern.finditer(explanation)]
    return [(action, groups) for _, action, groups in sorted(found)]


def matches(step, state_after, action, groups) -> bool:
    step = step.to_json()
    if step["action"] != action:
        return False
    if action == "elect":
        server, generation = groups
        position = int(server[1:]) - 1
        return step["server"] == server and state_after.servers[position].generation == int(generation)
    if action == "replicate":
        leader, follower = groups
        return step["follower"] == follower and leader in (None, step["leader"])
    return groups[0] in (None, step["server"])


# Kafka's entries tell a controller's elections in its own words; their order is checked by
# test_kafka_entry_cites_its_source_and_the_safe_preset_stops_it above.
@pytest.mark.parametrize("path", [f for f in FILES if not f.stem.startswith("kafka-")], ids=lambda p: p.stem)
def test_explanation_tells_the_steps_in_their_order(path):
    """Every election, read and crash of the trace is told, with its server (and an election with
    its generation), and everything told happens in the trace in the order told."""
    trace = load(path)
    rows = replay_on_model(trace).rows  # rows[k] is the state after step k (rows[0]: initial)
    told = told_events(trace.explanation)
    position = 0
    for action, groups in told:
        while position < len(trace.steps) and not matches(trace.steps[position], rows[position + 1][1],
                                                          action, groups):
            position += 1
        assert position < len(trace.steps), f"told {action} {groups} is not a later step of the trace"
        position += 1
    key_steps = [s.to_json() for s in trace.steps if s.to_json()["action"] in ("elect", "read", "crash")]
    told_keys = [(a, g) for a, g in told if a in ("elect", "read", "crash")]
    assert len(told_keys) == len(key_steps), (told_keys, key_steps)
