"""Rule hooks on the ZAB and Kafka systems (docs/variants.md, "Other systems"): the rules each system
asks (`properties.rules.SYSTEM_HOOKS`), the shipped examples pinned (a variant that holds and one that
breaks, with their shortest counterexamples), hwm's own replicas asking the same rules (a broken
variant's counterexample replayed on the implementation breaks it at the same step), and the one line
that refuses a rule a system does not ask."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwm.checker.run import CheckRequest, run
from hwm.cli import main
from hwm.impl.kafka import KafkaReplica
from hwm.impl.storage import Durable
from hwm.impl.zab import ZabReplica
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.protocol import PRESETS, resolve
from hwm.properties.rules import Rules, rules_of

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "variants"
ZAB_BOUNDS = Config(servers=4, max_generation=2, max_crashes=0)
KAFKA_BOUNDS = Config(servers=3, max_generation=2, max_crashes=0)
EMPTY = Durable(generation=0, vote=None, hwm=0, log=())

# (spec, bounds): distinct states, transitions, and each violated property's shortest counterexample.
PINNED = {
    ("zab_observers.py:Observer", ZAB_BOUNDS): (5278, 26583, {}),
    ("zab_observers.py:ObserverAckedAlone", ZAB_BOUNDS): (4519, 22362, {
        "ReadNeverTruncated": 6, "HwmNeverTruncated": 5, "ReadNeverLost": 5, "ReadsAgree": 8, "HwmWithinLog": 5,
        "AckedWriteNeverLost": 5}),
    ("kafka_isr.py:AllInSync", KAFKA_BOUNDS): (481, 1437, {}),
    ("kafka_isr.py:UncountedReplica", KAFKA_BOUNDS): (3570, 10530, {
        "ReadNeverTruncated": 6, "HwmNeverTruncated": 5, "ReadNeverLost": 5, "ReadsAgree": 8, "CommittedOnQuorum": 5,
        "AckedWriteNeverLost": 5, "AcknowledgedWriteKept": 4}),
}


def hwm(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize("spec, config", list(PINNED))
def test_the_other_systems_examples_are_pinned(spec, config):
    states, transitions, lengths = PINNED[spec, config]
    report = run(CheckRequest(f"{EXAMPLES / spec}", config))
    assert (report.states, report.transitions) == (states, transitions)
    assert {name: r.length for name, r in report.results.items() if r.kind == "always" and r.found} == lengths


def test_the_presets_own_rules_are_the_flags_on_every_system():
    """With no variant, ZAB and Kafka ask what their flags say (their pinned counts: tests/pinned.py)."""
    zab = rules_of(PRESETS["zab"].protocol, 5)
    assert (zab.counting(), zab.election_quorum(), zab.replication_quorum()) == ((0, 1, 2, 3, 4), 3, 3)
    kafka = PRESETS["kafka"].protocol
    assert rules_of(kafka, 4).replication_quorum() == 3  # min.insync.replicas: a majority
    assert Rules(kafka.__class__(**{**kafka.flags(), "min_insync_replicas": 1}), 4).replication_quorum() == 1


def test_the_zab_replica_asks_the_observers_rules():
    """Four servers, S4 an observer: S1 is established by S2's acknowledgement alone (Q1 = 2 of the three
    voters), and under ObserverAckedAlone commits its own proposal with no follower's ACK (Q2 = 1)."""
    for name, committed_alone in (("Observer", False), ("ObserverAckedAlone", True)):
        _, protocol = resolve(f"{EXAMPLES / 'zab_observers.py'}:{name}")
        replica = ZabReplica("S1", ("S2", "S3", "S4"), protocol, EMPTY)
        assert replica.counting == {"S1", "S2", "S3"} and replica.election_quorum == 2
        assert replica.rules.quorum_index((1, 0, 0, 1)) == (1 if committed_alone else 0)


def test_the_kafka_replica_asks_which_replicas_count_toward_its_high_watermark():
    _, protocol = resolve(f"{EXAMPLES / 'kafka_isr.py'}:UncountedReplica")
    replica = KafkaReplica("S1", ("S2", "S3"), protocol, EMPTY)
    assert replica.counting == {"S1", "S2"} and replica.rules.replication_quorum() == 2
    _, protocol = resolve(f"{EXAMPLES / 'kafka_isr.py'}:AllInSync")
    assert KafkaReplica("S1", ("S2", "S3"), protocol, EMPTY).rules.replication_quorum() == 3


@pytest.mark.parametrize("spec, config, trace, step", [
    ("zab_observers.py:ObserverAckedAlone", ZAB_BOUNDS, "ReadNeverLost", 5),
    ("kafka_isr.py:UncountedReplica", KAFKA_BOUNDS, "AcknowledgedWriteKept", 4),
])
def test_the_broken_variants_counterexample_breaks_the_implementation_at_the_same_step(spec, config, trace, step,
                                                                                      tmp_path):
    saved = hwm("check", "--protocol", EXAMPLES / spec, "--servers", config.servers, "--max-generation",
                config.max_generation, "--max-crashes", config.max_crashes, "--save", tmp_path)
    assert saved.exit_code == 1, saved.output
    name = spec.split(":")[1]
    replayed = hwm("replay", tmp_path / f"{name}.{trace}.json", "--on", "both", "--quiet")
    assert replayed.exit_code == 0, replayed.output
    for target in ("model", "impl"):
        assert re.search(rf"\[{target}\]: violation of {trace} at step {step}: .* \(as expected\)", replayed.output), \
            replayed.output


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "v.py"
    path.write_text("from hwm.model.variant import Variant\n\n\nclass V(Variant):\n" + body)
    return path


@pytest.mark.parametrize("body, expected", [
    ('    base = "zab"\n\n    def grants_vote(self, candidate_log, voter_log):\n        return True\n',
     r"{path}:7: V.grants_vote: the zab system \(base zab\) asks no grants_vote: ZAB's vote is fast leader "
     r"election's order \(currentEpoch, then the last zxid\), which the model and the replica apply themselves"),
    ('    base = "kafka"\n\n    def election_quorum(self):\n        return 1\n',
     r"{path}:7: V.election_quorum: the kafka system \(base kafka\) asks no election_quorum: Kafka's controller "
     r"elects a live ISR replica: nobody votes"),
    ('    base = "kafka"\n\n    def quorum_index(self, match):\n        return max(match)\n',
     r"{path}:7: V.quorum_index: the kafka system \(base kafka\) asks no quorum_index: Kafka's high watermark "
     r"is the minimum log end offset over the ISR .*"),
    ('    base = "bookkeeper"\n\n    def replication_quorum(self):\n        return 1\n',
     r"{path}:7: V.replication_quorum: the bookkeeper system \(base bookkeeper\) asks no replication_quorum: "
     r"BookKeeper's quorums are the ledger's ensemble_size, write_quorum and ack_quorum, flags of its base .*"),
])
def test_a_rule_a_system_does_not_ask_is_refused_in_one_line(tmp_path, body, expected):
    path = write(tmp_path, body)
    result = hwm("check", "--protocol", f"{path}:V", "--servers", "3", "--max-generation", "1")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    line = result.output.strip().splitlines()[-1]
    assert re.fullmatch(r"Error: Invalid value for '--protocol': " + expected.format(path=re.escape(str(path))),
                        line), line


def test_a_variant_of_another_system_with_no_rules_of_its_own_is_its_preset():
    """Only its own invariant added: the preset's states and the compiled backend (nothing refused)."""
    source = ('from hwm.model.variant import Variant\n\n\ndef never(view):\n    return None\n\n\n'
              'class Same(Variant):\n    base = "kafka"\n    invariants = {"Never": never}\n')
    from tempfile import TemporaryDirectory
    with TemporaryDirectory() as folder:
        path = Path(folder) / "same.py"
        path.write_text(source)
        _, protocol = resolve(f"{path}:Same")
        model = build_model(protocol, KAFKA_BOUNDS)
        assert getattr(model, "uncompiled", None) is None
        report = run(CheckRequest(f"{path}:Same", KAFKA_BOUNDS))
        preset = run(CheckRequest("kafka", KAFKA_BOUNDS))
        assert (report.states, report.transitions) == (preset.states, preset.transitions) == (607, 1786)
