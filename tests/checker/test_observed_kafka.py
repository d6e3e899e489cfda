"""checker/observed_kafka.py: what a correct Kafka broker does between the model's steps is accepted (a
LeaderAndIsr request arriving late, a restart shown before the controller answers, the HW moved by the
next fetch, an older fetch response, a late answer of a deposed leader, ISR changes as the
controller's answers), and the wrong version of each is still rejected."""

from itertools import islice

import pytest

from hwm.checker.model_events import random_actions, run_events
from hwm.checker.observed_kafka import ObservedKafkaValidator
from hwm.checker.validate import Validator
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.events import Event, Header
from hwm.properties.protocol import resolve

KAFKA = resolve("kafka")[1]
LOGGED = frozenset({"generation", "role", "log", "hwm"})
NODES = ("n1", "n2", "n3")


def run(*events, validator=ObservedKafkaValidator, protocol=KAFKA, servers=3):
    """The verdict on `events`, each (server, fields) or (server, fields, isr the node reports)."""
    v = validator(protocol, Header(tuple(f"n{k}" for k in range(1, servers + 1)), LOGGED))
    for number, (server, fields, *isr) in enumerate(events, 1):
        event = Event(server=server, **fields)
        if (v.feed(event, isr=isr[0]) if isr and isinstance(v, ObservedKafkaValidator) else v.feed(event)) is not None:
            break
    else:
        v.finish()
    return v.verdict()


ELECTED = [("n1", dict(generation=1, role="leader"), NODES), ("n2", dict(generation=1)), ("n3", dict(generation=1))]
# n1 appends an entry; both followers fetch it (their next fetches, which carry offset 1, not yet taken).
ONE = ((1, 1),)
FETCHED = ELECTED + [("n1", dict(log=((1, 1),))), ("n2", dict(log=((1, 1),))), ("n3", dict(log=((1, 1),)))]


def test_a_leader_and_isr_request_may_reach_a_replica_after_another_change_of_it():
    # n2 first shows the start-up LeaderAndIsr of epoch 0 (its ISR changed: nothing the model compares),
    # then the request of epoch 1, which in the model came with n1's election or never.
    events = [("n1", dict(generation=1, role="leader")), ("n2", dict(generation=0)), ("n2", dict(generation=1))]
    verdict = run(*events)
    assert verdict.valid, verdict.discrepancy.describe()
    assert not run(*events, validator=Validator).valid


def test_a_late_leader_and_isr_request_truncates_only_where_the_presets_rule_says():
    # n2 holds epoch 1's entry above its HW; n3 leads epoch 2 (n1 down, n2 not told yet).
    before = FETCHED + [("n1", dict(crash=True)), ("n3", dict(generation=2, role="leader"))]
    verdict = run(*before, ("n2", dict(generation=2)))
    assert verdict.valid, verdict.discrepancy.describe()
    # KIP-320 truncates only after asking the leader; truncating to its own HW is Kafka before KIP-101.
    wrong = run(*before, ("n2", dict(generation=2, log=())))
    assert not wrong.valid and wrong.discrepancy.number == len(before) + 1
    assert run(*before, ("n2", dict(generation=2, log=())), protocol=resolve("kafka-truncate-to-hwm")[1]).valid


def test_a_restarted_broker_shows_its_checkpointed_epoch_before_the_controller_answers():
    # n2 down; n3 leads epoch 2; n2 restarts showing epoch 1 from its disk, then takes epoch 2.
    before = FETCHED + [("n2", dict(crash=True)), ("n1", dict(crash=True)), ("n3", dict(generation=2, role="leader"))]
    verdict = run(*before, ("n2", dict(restart=True, generation=1, role="follower", log=((1, 1),), hwm=0)),
                  ("n2", dict(generation=2)))
    assert verdict.valid, verdict.discrepancy.describe()
    # A broker that forgot its epoch on restart (g0 with an entry of epoch 1) is no Kafka broker.
    wrong = run(*before, ("n2", dict(restart=True, generation=0, role="follower", log=((1, 1),), hwm=0)))
    assert not wrong.valid and wrong.discrepancy.number == len(before) + 1


def test_the_hw_moves_when_the_followers_next_fetches_reach_the_leader():
    events = FETCHED + [("n1", dict(log=((1, 1), (2, 1)))),  # a second produce: the fetches from 1 not yet in
                        ("n1", dict(hwm=1)),  # now they are
                        ("n2", dict(log=((1, 1), (2, 1)), hwm=1)), ("n3", dict(log=((1, 1), (2, 1)), hwm=1)),
                        ("n1", dict(hwm=2))]
    verdict = run(*events)
    assert verdict.valid, verdict.discrepancy.describe()
    # The model's fetch is one round trip: n1's HW would be 1 before its second produce.
    assert not run(*events, validator=Validator).valid


def test_with_five_replicas_the_hw_moves_when_the_last_of_four_fetches_arrives():
    # The three fetches before the last change nothing n1 shows: taken together, within the search's depth.
    five = ("n1", "n2", "n3", "n4", "n5")
    events = ([("n1", dict(generation=1, role="leader"), five)] + [(f"n{k}", dict(generation=1)) for k in range(2, 6)]
              + [("n1", dict(log=((1, 1),)))] + [(f"n{k}", dict(log=((1, 1),))) for k in range(2, 6)])
    verdict = run(*events, ("n1", dict(hwm=1), five), servers=5)
    assert verdict.valid, verdict.discrepancy.describe()
    # n5 never fetched the entry: the ISR's smallest log end offset is 0.
    wrong = run(*events[:-1], ("n1", dict(hwm=1), five), servers=5)
    assert not wrong.valid and wrong.discrepancy.number == len(events)


def test_the_hw_never_passes_the_smallest_log_end_offset_of_the_isr():
    # n2 fetched the entry, n3 (in the ISR n1 shows) did not: the HW stays at 0.
    events = ELECTED + [("n1", dict(log=((1, 1),))), ("n2", dict(log=((1, 1),))), ("n1", dict(hwm=1), NODES)]
    verdict = run(*events)
    assert not verdict.valid and verdict.discrepancy.number == len(events), verdict
    # Once the leader's ISR is {n1, n2} (its AlterIsr without n3 accepted) it may.
    assert run(*events[:-1], ("n1", dict(hwm=1), ("n1", "n2"))).valid


def test_a_fetch_response_carries_the_leaders_log_and_hw_of_when_it_was_answered():
    events = FETCHED + [("n1", dict(log=((1, 1), (2, 1)))), ("n1", dict(hwm=1)),
                        ("n2", dict(log=((1, 1), (2, 1)))),  # answered before the HW moved: HW 0
                        ("n3", dict(hwm=1))]  # an answer with the HW and no new entry
    verdict = run(*events)
    assert verdict.valid, verdict.discrepancy.describe()
    # Never an entry the leader lacks, nor a HW it never had.
    assert not run(*events[:-1], ("n3", dict(log=((1, 1), (2, 1), (3, 1))))).valid
    assert not run(*events[:-2], ("n2", dict(log=((1, 1), (2, 1)), hwm=2))).valid


def test_a_deposed_leaders_late_fetch_response_is_appended_only_in_its_epoch():
    # n1 appends and is killed before n2's fetch is answered... the answer is on its way.
    before = ELECTED + [("n1", dict(log=((1, 1),))), ("n1", dict(crash=True))]
    verdict = run(*before, ("n2", dict(log=((1, 1),))))
    assert verdict.valid, verdict.discrepancy.describe()
    assert not run(*before, ("n2", dict(log=((1, 1), (2, 1))))).valid  # more than n1 ever held
    # Once n2 follows n3 in epoch 2 it fetches from n3: n1's old answer is not for it.
    moved = before + [("n3", dict(generation=2, role="leader")), ("n2", dict(generation=2))]
    wrong = run(*moved, ("n2", dict(log=((1, 1),))))
    assert not wrong.valid and wrong.discrepancy.number == len(moved) + 1


def test_a_late_answer_of_a_leaders_earlier_epoch_arrives_after_it_leads_again():
    # n1 answers n2's fetch with two entries in epoch 1, crashes before the answer arrives, restarts and
    # is elected again for epoch 2 with n3; n2, still n1's follower in epoch 1, appends the old answer.
    again = ELECTED + [("n1", dict(log=((1, 1), (2, 1)))), ("n1", dict(crash=True)),
                       ("n1", dict(restart=True, generation=1, role="follower")),
                       ("n1", dict(generation=2, role="leader")), ("n3", dict(generation=2))]
    verdict = run(*again, ("n2", dict(log=((1, 1), (2, 1)))))
    assert verdict.valid, verdict.discrepancy.describe()
    # Never more than n1 held in epoch 1, and nothing of epoch 2 while n2 is fenced in epoch 1.
    led = again + [("n1", dict(log=((1, 1), (2, 1), (3, 2))))]
    for wrong in (run(*again, ("n2", dict(log=((1, 1), (2, 1), (3, 1))))),
                  run(*led, ("n2", dict(log=((1, 1), (2, 1), (3, 2)))))):
        assert not wrong.valid


def test_a_replica_rejoins_the_isr_while_two_others_leave_between_two_answers_of_the_leader():
    # Five replicas hold four entries at HW 1 with n3 out of the ISR; on the wall clock the leader's next
    # answer shows n3 back (its fetch reached the HW), n4 and n5 shrunk by its timer, and HW 4.
    n5 = ("n1", "n2", "n3", "n4", "n5")
    entries = ((1, 1), (2, 1), (3, 1), (4, 1))

    def before(n3_log=entries):
        events = [("n1", dict(generation=1, role="leader"), n5)] + [(f"n{k}", dict(generation=1)) for k in range(2, 6)]
        events += [("n1", dict(log=entries[:1]))] + [(f"n{k}", dict(log=entries[:1])) for k in range(2, 6)]
        events += [("n1", dict(log=entries[:k])) for k in range(2, 5)]
        events += [(f"n{k}", dict(log=n3_log if k == 3 else entries)) for k in range(2, 6)]
        return events + [("n1", dict(hwm=1), ("n1", "n2", "n4", "n5"))]

    rejoined = ("n1", dict(hwm=4), ("n1", "n2", "n3"))
    verdict = run(*before(), rejoined, servers=5)
    assert verdict.valid, verdict.discrepancy.describe()
    # Never a HW above a rejoined replica's log end: n3 fetched one entry only.
    assert not run(*before(n3_log=entries[:1]), rejoined, servers=5).valid


# n1 holds two entries at HW 0 with ISR {n1, n2, n3}; n2 fetched both, n3 one. n1's next input (n2's fetch
# from offset 2, say) shows nothing new: n3, in the ISR, still holds the HW at 0.
BEHIND = ELECTED + [("n1", dict(log=ONE)), ("n1", dict(log=ONE + ((2, 1),))), ("n2", dict(log=ONE + ((2, 1),))),
                    ("n3", dict(log=ONE)), ("n1", dict(), NODES)]


def test_a_shrink_counts_a_fetch_the_leader_took_at_an_input_that_showed_nothing():
    # On the wall clock n1's lag timer then shrinks n3, the controller in n1's process answers at once, the
    # HW moves to n2's offset 2 and n2's held fetch is answered with it, all before n1's next input: n2
    # shows HW 2 three steps (the fetch, the shrink, the answer) from n1's last shown state.
    events = BEHIND + [("n2", dict(hwm=2)), ("n1", dict(hwm=2), ("n1", "n2"))]
    verdict = run(*events)
    assert verdict.valid, verdict.discrepancy.describe()
    # A leader the controller deposed (n3 elected for epoch 2; n1 and n2 not told yet) has its AlterIsr
    # refused: its HW stays at n3's log end offset, whatever fetches it took.
    deposed = BEHIND + [("n3", dict(generation=2, role="leader"))]
    wrong = run(*deposed, ("n2", dict(hwm=2)))
    assert not wrong.valid and wrong.discrepancy.number == len(deposed) + 1


@pytest.mark.parametrize("fetcher, other", [("n3", "n2"), ("n2", "n3")])
def test_a_replica_shrunk_after_another_counts_until_it_leaves(fetcher, other):
    # A wall-clock run: n1 took the fetcher's fetch from offset 2 at an input that showed nothing (the other
    # replica, empty, held the HW at 0); its timer shrank the other (the HW moves to 2), then the fetcher
    # (killed: the controller holds it down), then n1 took a produce: ISR {n1} at HW 2, where one AlterIsr
    # without both would leave the HW at 0. The empty replica leaves first, whichever its index.
    before = ELECTED + [("n1", dict(log=ONE)), ("n1", dict(log=ONE + ((2, 1),))), (fetcher, dict(log=ONE + ((2, 1),)))]
    after = ("n1", dict(log=ONE + ((2, 1), (3, 1)), hwm=2), ("n1",))
    verdict = run(*before, after)
    assert verdict.valid, verdict.discrepancy.describe()
    # Never past what the fetcher held: with one entry fetched, HW 1 at most.
    short = before[:-1] + [(fetcher, dict(log=ONE))]
    assert run(*short, ("n1", dict(log=ONE + ((2, 1), (3, 1)), hwm=1), ("n1",))).valid
    wrong = run(*short, after)
    assert not wrong.valid and wrong.discrepancy.number == len(short) + 1


def test_a_shrink_counts_only_fetches_that_moved_nothing_the_leader_shows():
    # The step's guard, on a model state: n1 took n3's fetch from offset 1 (HW still 0: n2 at 0). n2's
    # fetch from 2 would move the HW to 1, which n1 shows at that input, before its timer shrinks n3.
    v = ObservedKafkaValidator(KAFKA, Header(NODES, LOGGED))
    for server, fields, *isr in BEHIND:
        assert v.feed(Event(server=server, **fields), isr=isr[0] if isr else None) is None
    state = v.candidates[0].state

    def shrinking_n3(state):
        return [(action, after.servers[0].hwm) for action, after in v._shrinks(state, 0)
                if action[0] == "fetch_then_shrink_isr" and action[3] == (2,)]
    assert shrinking_n3(state) == [(("fetch_then_shrink_isr", 1, 0, (2,)), 2)]
    leader = state.servers[0]
    took_n3 = state._replace(servers=(leader._replace(match=(0, 0, 1)),) + state.servers[1:])
    assert shrinking_n3(took_n3) == []


def test_replicas_leaving_one_at_a_time_may_leave_lowest_offset_first():
    # n1 counts n2 at offset 2 and n3 at 0 (HW 0). n3 lags first: its AlterIsr moves the HW to 2, then n2's
    # leaves {n1}. In index order (n2 first) the HW stays at 0.
    v = ObservedKafkaValidator(KAFKA, Header(NODES, LOGGED))
    for server, fields, *isr in BEHIND:
        assert v.feed(Event(server=server, **fields), isr=isr[0] if isr else None) is None
    state = v.candidates[0].state
    counted = state._replace(servers=(state.servers[0]._replace(match=(0, 2, 0)),) + state.servers[1:])
    both = {action[2]: after.servers[0].hwm for action, after in v._shrinks(counted, 0)
            if action[0] == "shrink_isr" and isinstance(action[2], tuple)}
    assert both == {(1, 2): 0, (2, 1): 2}


def test_a_follower_of_an_older_epoch_is_fenced():
    # n1 restarts and is elected again for epoch 2 without n2 (which still follows it in epoch 1).
    again = ELECTED + [("n1", dict(crash=True)), ("n1", dict(restart=True, generation=1, role="follower")),
                       ("n1", dict(generation=2, role="leader")), ("n3", dict(generation=2)),
                       ("n1", dict(log=((1, 2),)))]
    # KIP-320: n2's fetch carries epoch 1 and is answered FENCED_LEADER_EPOCH; before it, it was served.
    wrong = run(*again, ("n2", dict(log=((1, 2),))))
    assert not wrong.valid and wrong.discrepancy.number == len(again) + 1
    verdict = run(*again, ("n2", dict(log=((1, 2),))), protocol=resolve("kafka-kip279")[1])
    assert verdict.valid, verdict.discrepancy.describe()


def test_isr_changes_are_the_controllers_answers_to_the_leader_of_its_epoch():
    # n3 down: n1's shrink is accepted, and its HW follows the ISR {n1, n2}.
    down = ELECTED + [("n1", dict(log=((1, 1),))), ("n2", dict(log=((1, 1),))), ("n3", dict(crash=True))]
    verdict = run(*down, ("n1", dict(hwm=1), ("n1", "n2")))
    assert verdict.valid, verdict.discrepancy.describe()
    # A leader deposed by epoch 2 (it missed the request) has its AlterIsr refused: its ISR stays.
    deposed = ELECTED + [("n2", dict(generation=2, role="leader")), ("n1", dict(role="leader"), ("n1", "n2"))]
    wrong = run(*deposed)
    assert not wrong.valid and wrong.discrepancy.number == len(deposed), wrong
    # Expansion: n3, restarted, fetches up to the HW and is added back; never while it is behind it.
    behind = down + [("n1", dict(hwm=1), ("n1", "n2")),
                     ("n3", dict(restart=True, generation=1, role="follower", log=(), hwm=0)), ("n3", dict())]
    assert not run(*behind, ("n1", dict(), NODES)).valid
    caught_up = behind + [("n3", dict(log=((1, 1),), hwm=1))]
    verdict = run(*caught_up, ("n1", dict(), NODES))
    assert verdict.valid, verdict.discrepancy.describe()


def test_an_expansion_counts_the_offset_of_the_fetch_that_caused_it():
    # n1's ISR is {n1} alone (below min.insync.replicas: no HW). n3, restarted, fetches from offset 0,
    # which reaches the HW 0: AlterIsr. n3 appends the answer; the controller's answer comes after it,
    # and n1's HW counts n3 at offset 0 (its next fetch, from 1, has not arrived).
    events = ELECTED + [("n2", dict(crash=True)), ("n3", dict(crash=True)), ("n1", dict(), ("n1",)),
                        ("n3", dict(restart=True, generation=1, role="follower", log=(), hwm=0)),
                        ("n1", dict(log=((1, 1),)), ("n1",)), ("n3", dict(log=((1, 1),))),
                        ("n1", dict(), ("n1", "n3"))]
    verdict = run(*events)
    assert verdict.valid, verdict.discrepancy.describe()
    assert run(*events[:-1], ("n1", dict(hwm=1), ("n1", "n3"))).valid  # or after n3's next fetch


def test_the_leaders_isr_is_compared_where_the_node_shows_it():
    shrunk = ELECTED + [("n3", dict(crash=True)), ("n1", dict(), ("n1", "n2")), ("n1", dict(log=ONE), ("n1", "n2")),
                        ("n2", dict(log=ONE)), ("n1", dict(hwm=1), ("n1", "n2"))]
    verdict = run(*shrunk)
    assert verdict.valid, verdict.discrepancy.describe()
    # n3, down, holds nothing: no fetch of its (a fetch it sent before it crashed may still arrive) is at the
    # HW 1, so no AlterIsr could have added it back.
    wrong = run(*shrunk, ("n1", dict(), NODES))
    assert not wrong.valid and wrong.discrepancy.number == len(shrunk) + 1
    assert run(*shrunk, ("n1", dict())).valid  # a node that does not show its ISR: nothing to compare


# n1 leads epoch 1 and n2 fetches its entry (n2's next fetch, from offset 1, is on its way in epoch 1);
# n3 leads epoch 2 and fails; n1 leads epoch 3 with ISR {n1, n2}. n2 has not yet shown epoch 3.
REELECTED = ELECTED + [("n1", dict(log=ONE)), ("n2", dict(log=ONE)), ("n3", dict(generation=2, role="leader")),
                       ("n3", dict(crash=True)), ("n1", dict(generation=3, role="leader"), ("n1", "n2"))]


@pytest.mark.parametrize("preset, before, valid", [
    # n2's fetch from offset 1 was sent to n1's epoch 1: n1 ignores it in epoch 3, and under KIP-320
    # n2's later fetches carry epoch 1 and are fenced: nothing n2 sent counts toward n1's HW yet.
    ("kafka", [], False),
    ("kafka", [("n2", dict(generation=3))], True),  # the same epoch: n2's next fetch counts
    ("kafka-kip279", [], True),  # no epoch in a fetch before KIP-320: n2's next fetch is served and counts
])
def test_only_a_fetch_of_the_leaders_own_epoch_counts_toward_its_hw(preset, before, valid):
    events = REELECTED + before + [("n1", dict(hwm=1), ("n1", "n2"))]
    verdict = run(*events, protocol=resolve(preset)[1])
    assert verdict.valid == valid, verdict
    if not valid:
        assert verdict.discrepancy.number == len(events)


# n3 down: n1's shrink to {n1, n2} accepted; n3 restarts empty, its fetch from offset 0 reaches the HW 0.
REJOINING = ELECTED + [("n3", dict(crash=True)), ("n1", dict(), ("n1", "n2")),
                       ("n3", dict(restart=True, generation=1, role="follower", log=(), hwm=0)), ("n3", dict())]


@pytest.mark.parametrize("before, valid", [
    ([], True),  # the leader of the controller's epoch: its AlterIsr adding n3 is accepted
    ([("n2", dict(generation=2, role="leader"), ("n1", "n2"))], False),  # n1 deposed by epoch 2: refused
])
def test_an_isr_expansion_is_the_controllers_answer_to_the_leader_of_its_epoch(before, valid):
    events = REJOINING + before + [("n1", dict(), NODES)]
    verdict = run(*events)
    assert verdict.valid == valid, verdict
    if not valid:
        assert verdict.discrepancy.number == len(events)


@pytest.mark.parametrize("preset", ["kafka", pytest.param("kafka-truncate-to-hwm", marks=pytest.mark.deep)])
def test_recorded_runs_of_the_kafka_model_stay_valid(preset):
    protocol = resolve(preset)[1]
    model = build_model(protocol, Config(servers=3, max_generation=4, max_log=3, max_crashes=2))
    header, events = run_events(model, list(random_actions(model, 40, 1)), NODES)
    # A model run logs each step's changes leader first: no order between them to rely on.
    verdict = ObservedKafkaValidator(protocol, header, followers_first=False).validate(events)
    assert verdict.valid, verdict.discrepancy.describe()


@pytest.mark.parametrize("followers_first, valid", [
    (True, False),  # hwm test reads each node right after each input: n3's append would show first
    (False, True),  # a run that logs no order between a fetch's two sides (a model run: leader first)
])
def test_a_fetch_counts_toward_the_hw_only_after_its_followers_change_is_shown_where_followers_come_first(
        followers_first, valid):
    # n2's append is shown, n3's is not, and n1 (its ISR all three) shows HW 1: only n3's fetch from
    # offset 1 explains it, sent after the append no event has shown yet.
    events = ELECTED + [("n1", dict(log=ONE)), ("n2", dict(log=ONE)), ("n1", dict(hwm=1), NODES)]
    v = ObservedKafkaValidator(KAFKA, Header(NODES, LOGGED), followers_first=followers_first)
    found = [v.feed(Event(server=server, **fields), isr=isr[0] if isr else None) for server, fields, *isr in events]
    assert [number for number, discrepancy in enumerate(found, 1) if discrepancy] == ([] if valid else [len(events)])


FIVE = ("n1", "n2", "n3", "n4", "n5")


@pytest.mark.parametrize("leader, told, explanations", [
    ("n1", FIVE[1:], 1),  # n1's election, its request reaching the four with it: the ISR all five
    ("n1", FIVE[1:3], 4),  # n4 and n5 not told: each may have left the ISR (the controller held it down)
])
def test_followers_shown_in_an_epoch_before_its_leader_are_told_with_that_leaders_election(leader, told, explanations):
    # The controller elects on its own timer and sends the LeaderAndIsr to every live broker at once: the
    # followers show the epoch before hwm next reads its leader, and the harness names them first.
    v = ObservedKafkaValidator(KAFKA, Header(FIVE, LOGGED))
    for follower in told:
        assert v.feed(Event(server=follower, generation=1), leader=leader, told=told) is None
    # Only that leader's election, and the one sending them its request: each other election, or a
    # request each of them took late, would keep an explanation for each ISR the request left open.
    assert len(v.candidates) == explanations, [c.state.describe() for c in v.candidates]
    for cand in v.candidates:
        assert [k for k, sv in enumerate(cand.state.servers) if sv.role == "leader"] == [0]
        assert all(cand.state.servers[FIVE.index(f)].in_isr for f in told)
    assert v.feed(Event(server="n1", generation=1, role="leader"), isr=FIVE) is None
    assert v.finish() is None


class ModelIsrOnly(ObservedKafkaValidator):
    """The Kafka validator whose elections take the model's ISR only (the live ISR), not the broker sessions'."""

    def _elections(self, state, action):
        yield from islice(super()._elections(state, action), 1)


# n1, the leader of epoch 1, is killed with n2 and n3 in its ISR; or after its AlterIsr without n3 (n3 live,
# lagging) was accepted. The controller elects n2 for epoch 2; its request reaches n2 alone.
KILLED_WITH_ALL = ELECTED + [("n1", dict(crash=True))]
KILLED_WITHOUT_N3 = ELECTED + [("n1", dict(), ("n1", "n2")), ("n1", dict(crash=True))]


@pytest.mark.parametrize("before, isr, valid, model_isr_explains", [
    (KILLED_WITH_ALL, ("n2", "n3"), True, True),  # the live ISR: the model's own
    # n3, live but cut off from the controller, leaves; n1's session has not expired: it stays. Only the
    # sessions' ISR gives this (the model's, then a shrink of n3, gives {n2}: no AlterIsr adds the dead n1).
    (KILLED_WITH_ALL, ("n1", "n2"), True, False),
    (KILLED_WITH_ALL, ("n2",), True, True),  # n3 left (the model's ISR and a shrink explain it too)
    (KILLED_WITHOUT_N3, ("n2",), True, True),  # n3 was out already: the model's own
    (KILLED_WITHOUT_N3, ("n1", "n2"), True, False),  # n1's session still open
    # The guard: the controller's ISR is drawn from the ISR. n3, out of it, never rejoins by an election
    # (no LeaderAndIsr of epoch 2 reached it, so no fetch of its in epoch 2 made an AlterIsr either).
    (KILLED_WITHOUT_N3, ("n2", "n3"), False, False),
    (KILLED_WITHOUT_N3, NODES, False, False),
], ids=["live-isr", "dead-kept-live-left", "live-left", "out-stays-out", "out-dead-kept", "out-rejoins",
        "out-rejoins-all"])
def test_the_controller_elects_with_the_isr_its_broker_sessions_show_but_only_from_the_isr(
        before, isr, valid, model_isr_explains):
    """ObservedKafkaValidator._elections: each ISR replica the LeaderAndIsr did not reach may stay in
    the new ISR or leave it (`others`: ISR replicas only)."""
    events = before + [("n2", dict(generation=2, role="leader"), isr)]
    verdict = run(*events)
    assert verdict.valid == valid, verdict.discrepancy and verdict.discrepancy.describe()
    if not valid:
        assert verdict.discrepancy.number == len(events)
    assert run(*events, validator=ModelIsrOnly).valid == model_isr_explains
