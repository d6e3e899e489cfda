"""checker/observed_kafka.py and `hwm validate` on Kafka: the real broker steps that were false findings
(two ISR changes between two answers of a node, one AlterIsr removing several replicas, a follower
learning the HW from a fetch that carries no entries), each with a case that breaks only its guard
and must still be rejected; and the causality rule (no HW before the entry on the replicas it counts)."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from hwm.checker.recorded import recorded_run_validator
from hwm.checker.observed_kafka import ObservedKafkaValidator
from hwm.cli import main
from hwm.properties.events import Event, Header, parse_lines
from hwm.properties.protocol import resolve
from tests.checker.test_observed_kafka import ELECTED, FETCHED, KAFKA, NODES, run

ONE = ((1, 1),)
FOUR = tuple((i, 1) for i in range(1, 5))


# ----------------------------------------------- two ISR changes between two answers (hwm test, wall clock)
# n1 leads with the ISR {n1} (n2, then n3, shrunk out while behind); n3 holds entry 1 (its fetch from
# offset 1 not yet taken), n2 nothing, n1 two entries.
SHRUNK = ELECTED + [("n1", dict(log=ONE), NODES), ("n3", dict(log=ONE)),
                    ("n1", dict(log=((1, 1), (2, 1))), ("n1", "n3")), ("n1", dict(hwm=0), ("n1",))]


def test_an_expansion_then_a_shrink_between_two_answers_is_accepted():
    # Between two answers n1 takes n3's fetch from offset 1 (at the HW 0: the ISR expands and the HW moves
    # to 1), then its lag timer shrinks n3 out again (behind the log end 2): it shows HW 1, ISR {n1}.
    events = SHRUNK + [("n1", dict(hwm=1), ("n1",))]
    verdict = run(*events)
    assert verdict.valid, verdict.discrepancy.describe()


def test_an_isr_only_change_is_still_compared():
    # The guard: the second change is a real ISR step. HW 2 has no fetch behind it (n3 holds one entry).
    events = SHRUNK + [("n1", dict(hwm=2), ("n1",))]
    verdict = run(*events)
    assert not verdict.valid and verdict.discrepancy.number == len(events)
    # And an ISR that no AlterIsr made: n2, behind the HW, never expanded.
    events = SHRUNK + [("n1", dict(hwm=1), ("n1", "n2", "n3"))]
    verdict = run(*events)
    assert not verdict.valid and verdict.discrepancy.number == len(events)
    assert "they differ in isr: model " in verdict.discrepancy.nearest


def test_one_alter_isr_may_remove_every_out_of_sync_replica():
    # n1 shows its ISR {n1,n2,n3}, then one more entry and the ISR {n1}: a produce and both followers out
    # (Partition.maybeShrinkIsr's one AlterIsr; hwm's broker, one per tick, several ticks between answers).
    events = ELECTED + [("n1", dict(log=ONE), NODES), ("n1", dict(log=((1, 1), (2, 1))), ("n1",))]
    verdict = run(*events)
    assert verdict.valid, verdict.discrepancy.describe()
    # The guard: only the leader of the controller's epoch shrinks. n1, deposed by n2's epoch 2, cannot.
    deposed = ELECTED + [("n1", dict(log=ONE), NODES), ("n1", dict(crash=True)), ("n1", dict(restart=True, hwm=0,
                         generation=1, role="follower", log=ONE)), ("n2", dict(generation=2, role="leader"), NODES),
                         ("n2", dict(log=((1, 2),)), ("n2",))]
    verdict = run(*deposed)
    assert verdict.valid, verdict.discrepancy.describe()  # n2, the leader of epoch 2, may
    wrong = ELECTED + [("n1", dict(log=ONE), NODES), ("n2", dict(generation=2, role="leader"), NODES),
                       ("n1", dict(log=((1, 1), (2, 1))), ("n1",))]
    verdict = run(*wrong)
    assert not verdict.valid and verdict.discrepancy.number == len(wrong)


# --------------------------------------------------------------- recorded runs (`hwm validate`)
# Three `hwm cluster --protocol kafka --record DIR` parts merged by time, one put: the followers append
# entry 1, the leader's HW moves on their next fetches, each follower learns HW 1 from a fetch response
# that carries no entries, and n1 has appended entry 2 in between.
RECORDED = """{"format": "hwm-events/1", "servers": ["n1", "n2", "n3"], "protocol": "kafka"}
{"server": "n3", "generation": 1}
{"server": "n2", "generation": 1}
{"server": "n1", "generation": 1, "role": "leader"}
{"server": "n1", "append": [[1, 1]]}
{"server": "n3", "append": [[1, 1]]}
{"server": "n2", "append": [[1, 1]]}
{"server": "n1", "hwm": 1}
{"server": "n1", "ack": [[1, 1]]}
{"server": "n3", "hwm": 1}
{"server": "n1", "append": [[2, 1]]}
{"server": "n2", "hwm": 1}
"""


def recorded(text: str):
    header, events = parse_lines(text.splitlines())
    return recorded_run_validator(KAFKA, header).validate(list(events))


def test_a_follower_learns_the_hw_from_a_fetch_that_carries_no_entries():
    verdict = recorded(RECORDED)
    assert verdict.valid, verdict.discrepancy.describe()
    header, _ = parse_lines(RECORDED.splitlines())
    assert isinstance(recorded_run_validator(KAFKA, header), ObservedKafkaValidator)


def test_a_follower_never_learns_a_hw_the_leader_did_not_have():
    # The guard: the answer carries the leader's HW of when it was answered, at most its HW now (1).
    verdict = recorded(RECORDED.replace('{"server": "n2", "hwm": 1}', '{"server": "n2", "hwm": 2}'))
    assert not verdict.valid and verdict.discrepancy.number == 11
    # Nor one above its own log end.
    verdict = recorded(RECORDED.replace('{"server": "n3", "hwm": 1}', '{"server": "n3", "append": [[2, 1]], "hwm": 2}'))
    assert not verdict.valid and verdict.discrepancy.number == 9


def test_a_leader_hw_recorded_before_the_isr_recorded_the_entry_is_a_finding_at_that_event():
    lines = RECORDED.splitlines()
    # n1's HW 1 before either follower appended entry 1: no fetch from offset 1 has been sent yet.
    early = "\n".join(lines[:5] + [lines[7]] + lines[5:7] + lines[8:]) + "\n"
    verdict = recorded(early)
    assert not verdict.valid and verdict.discrepancy.number == 5
    assert "which only n1 has logged so far" in verdict.discrepancy.reason
    # One follower's append before it suffices: the controller's ISR may have left n2 out.
    one = "\n".join(lines[:6] + [lines[7]] + [lines[6]] + lines[8:]) + "\n"
    assert recorded(one).valid


def test_hwm_validate_names_the_part_file_and_the_runs_servers(tmp_path: Path):
    header, events = parse_lines(RECORDED.replace('{"server": "n2", "hwm": 1}', '{"server": "n2", "hwm": 2}')
                                 .splitlines())
    events = list(events)
    parts = tmp_path / "run"
    parts.mkdir()
    for name in header.servers:
        mine = [e for e in events if e.server == name]
        text = [f'{{"format": "hwm-events/1", "servers": ["n1", "n2", "n3"], "protocol": "kafka", "part": "{name}"}}']
        text += [str(e)[:-1] + f', "time": {k}}}' for k, e in enumerate(events) if e.server == name and e in mine]
        (parts / f"{name}.jsonl").write_text("\n".join(text) + "\n")
    result = CliRunner().invoke(main, ["validate", str(parts), "--protocol", "kafka"], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    assert f"line 4 of {parts / 'n2.jsonl'}: no model step explains event 11" in result.output
    assert "S1" not in result.output and "S2" not in result.output
    assert "they differ in hwm: model " in result.output and ", run 2" in result.output


def test_a_finding_never_shows_two_states_that_read_alike():
    verdict = recorded(RECORDED.replace('{"server": "n2", "hwm": 1}', '{"server": "n2", "hwm": 2}'))
    text = verdict.discrepancy.describe()
    nearest = verdict.discrepancy.nearest
    giving, has = nearest.split(", giving ", 1)[1].split(" where the run has ")
    assert giving.split(";")[0] != has.split(";")[0]
    listed = [block for block in text.split("model states possible just before it")[1].split("nearest")[0].split("--")]
    assert len(listed) == len(set(b.strip() for b in listed))


def test_an_observed_leader_shows_no_hw_before_its_followers_show_the_entry():
    # hwm test's stepping: each node's state is read after each input, so a follower's append is shown
    # before its fetch from offset 1 reaches the leader.
    early = ELECTED + [("n1", dict(log=ONE), NODES), ("n1", dict(hwm=1), NODES)]
    verdict = run(*early)
    assert not verdict.valid and verdict.discrepancy.number == len(early)
    assert run(*FETCHED, ("n1", dict(hwm=1), NODES)).valid


def test_an_event_without_a_source_file_names_its_line():
    verdict = recorded(RECORDED.replace('{"server": "n2", "hwm": 1}', '{"server": "n2", "hwm": 2}'))
    assert verdict.discrepancy.describe().startswith("line 12: no model step explains event 11")
    assert Event(server="n1", hwm=1) == Event(server="n1", hwm=1, source="a.jsonl")  # not part of the event
    assert resolve("kafka")[1] == KAFKA and Header(NODES, frozenset()).servers == NODES


def test_hwm_validate_accepts_the_recorded_kafka_run(tmp_path: Path):
    (tmp_path / "run.jsonl").write_text(RECORDED)
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "run.jsonl"), "--protocol", "kafka"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "valid: 11 events" in result.output


def test_a_fetch_that_arrives_again_may_expand_the_isr_again():
    # n3's fetches from offset 0, resent while a partition held them (or duplicated), reach n1 one after
    # the other: each expands the ISR at the HW 0 without moving it, and n1's lag timer shrinks n3 again.
    flips = [("n1", dict(hwm=0), ("n1", "n3")), ("n1", dict(hwm=0), ("n1",))] * 3
    verdict = run(*SHRUNK, *flips)
    assert verdict.valid, verdict.discrepancy.describe()
    # The guard: f holds the offset it fetched from. n2 holds nothing: no fetch of its expands at HW 1.
    events = SHRUNK + [("n1", dict(hwm=1), ("n1",)), ("n1", dict(hwm=1), ("n1", "n2"))]
    verdict = run(*events)
    assert not verdict.valid and verdict.discrepancy.number == len(events)


def test_a_fetch_sent_before_its_follower_crashed_may_arrive_after():
    before = ELECTED + [("n1", dict(log=ONE), NODES), ("n3", dict(crash=True)), ("n1", dict(hwm=0), ("n1",))]
    verdict = run(*before, ("n1", dict(hwm=0), ("n1", "n3")))
    assert verdict.valid, verdict.discrepancy.describe()
    # The guard: from an offset it held. n3 never held entry 1: no fetch of its moves the HW to 1.
    verdict = run(*before, ("n1", dict(hwm=1), ("n1", "n3")))
    assert not verdict.valid and verdict.discrepancy.number == len(before) + 1


# ------------------------------------------ fetches of a follower whose log diverged (Kafka before KIP-101)
# Under kafka-truncate-to-hwm a replica truncates to its own HW when it becomes a follower, which lags the
# leader's: logs diverge (KIP-101 scenario 2), and a follower of the leader's epoch that holds other entries
# below its log end is what `_repeated`'s prefix guard and `_offers`'s `offset <= len(leader.log)` are for.
# n3 down and shrunk out; n1 writes three entries, n2 fetches them (HW 1 from the answer), n1's HW is 3.
# n2 restarts and truncates to its HW 1; n1 is killed, n2 leads epoch 2 (the controller keeps n1's open
# session in the ISR); n1 restarts and truncates to its own HW 3, keeping 2@1 and 3@1: it diverges from n2
# at offset 1 and fetches from its log end, 3.
TO_HWM = resolve("kafka-truncate-to-hwm")[1]
N12 = ("n1", "n2")
THREE = ((1, 1), (2, 1), (3, 1))
DIVERGED = ELECTED + [
    ("n3", dict(crash=True)), ("n1", dict(), N12),
    ("n1", dict(log=ONE)), ("n2", dict(log=ONE)), ("n1", dict(hwm=1), N12), ("n2", dict(hwm=1)),
    ("n1", dict(log=THREE)), ("n2", dict(log=THREE)), ("n1", dict(hwm=3), N12),
    ("n2", dict(crash=True)), ("n2", dict(restart=True, generation=1, role="follower", log=ONE, hwm=1)),
    ("n1", dict(crash=True)), ("n2", dict(generation=2, role="leader"), N12),
    ("n1", dict(restart=True, generation=2, role="follower", log=THREE, hwm=3)),
]


@pytest.mark.parametrize("log, hwm, valid", [
    # n2 holds three entries: n1's fetch from 3 counts (the preset's bug: its entries 2 and 3 are not n2's).
    (((1, 1), (2, 2), (3, 2)), 3, True),
    (((1, 1), (2, 2), (3, 2)), 1, True),  # not yet counted
    # `_repeated`'s guard: n1 never fetched from 2 in epoch 2 (its prefix up to 2 is not n2's), and its log
    # end is 3: no fetch of its gives HW 2.
    (((1, 1), (2, 2), (3, 2)), 2, False),
    # `_offers`'s guard: n2 holds two entries, n1's fetch from 3 is past n2's log end (OFFSET_OUT_OF_RANGE,
    # answered by a truncation n1 has not shown): it counts nothing, and HW 2 has no fetch behind it.
    (((1, 1), (2, 2)), 2, False),
    (((1, 1), (2, 2)), 1, True),
])
def test_a_diverged_followers_fetch_counts_only_from_its_log_end_and_never_past_the_leaders(log, hwm, valid):
    events = DIVERGED + [("n2", dict(log=log), N12), ("n2", dict(hwm=hwm), N12)]
    verdict = run(*events, protocol=TO_HWM)
    assert verdict.valid == valid, verdict.discrepancy and verdict.discrepancy.describe()
    if not valid:
        assert verdict.discrepancy.number == len(events)
