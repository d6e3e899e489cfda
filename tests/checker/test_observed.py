"""checker/observed.py: what a correct node does between the model's steps is accepted (a leader
learning an acknowledgement later, an append of a crashed leader arriving late, a leader stepping
down), and what the model forbids is still rejected."""

import pytest

from hwm.checker.model_events import random_actions, run_events
from hwm.checker.observed import ObservedValidator
from hwm.checker.validate import Validator
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.events import Event, Header, UNNAMED
from hwm.properties.protocol import resolve

RAFT = resolve("raft")[1]
LOGGED = frozenset({"generation", "role", "log", "hwm"})


def run(*events, servers=3, validator=ObservedValidator, protocol=RAFT):
    """The verdict on `events`, each (server, fields)."""
    header = Header(tuple(f"n{k}" for k in range(1, servers + 1)), LOGGED)
    v = validator(protocol, header)
    return v.validate([Event(server=server, **fields) for server, fields in events])


ELECTED = [("n1", dict(generation=1, role="leader")), ("n2", dict(generation=1)), ("n3", dict(generation=1))]


def test_a_leader_that_writes_before_its_followers_acknowledgement_arrives_is_a_behaviour():
    events = ELECTED + [("n1", dict(log=((1, 1),))), ("n2", dict(log=((1, 1),))),
                        ("n1", dict(log=((1, 1), (2, 1)))),  # the second write: n2's reply not yet in
                        ("n1", dict(hwm=1)),  # now it is
                        ("n2", dict(log=((1, 1), (2, 1)), hwm=1)), ("n1", dict(hwm=2))]
    verdict = run(*events)
    assert verdict.valid, verdict.discrepancy.describe()
    # The model's round trip is one step: without the deferred acknowledgement the leader's HWM
    # would already be 1 at its second write.
    assert not run(*events, validator=Validator).valid


def test_two_acknowledgements_on_their_way_apply_one_after_the_other():
    # n2 appends both entries before n1 hears of either: n1 applies the reply for 1 (HWM 1), then the
    # one for 2, which applying the first must leave on its way.
    events = ELECTED + [("n1", dict(log=((1, 1),))), ("n2", dict(log=((1, 1),))),
                        ("n1", dict(log=((1, 1), (2, 1)))), ("n2", dict(log=((1, 1), (2, 1)))),
                        ("n1", dict(hwm=1)), ("n1", dict(hwm=2))]
    verdict = run(*events)
    assert verdict.valid, verdict.discrepancy.describe()


def test_a_leader_counts_only_acknowledgements_it_was_sent():
    stored_on_one = ELECTED + [("n1", dict(log=((1, 1),))), ("n2", dict(log=((1, 1),)))]
    verdict = run(*stored_on_one, ("n1", dict(hwm=1)))
    assert verdict.valid, verdict.discrepancy.describe()
    # Five servers: the entry on n1 and n2 is no quorum, however the replies arrive.
    five = [("n1", dict(generation=1, role="leader"))] + [(f"n{k}", dict(generation=1)) for k in (2, 3, 4, 5)]
    verdict = run(*five, ("n1", dict(log=((1, 1),))), ("n2", dict(log=((1, 1),))), ("n1", dict(hwm=1)), servers=5)
    assert not verdict.valid and verdict.discrepancy.number == 8  # at the claim, not at the end of the run
    assert "has n1 as the run says: leader g1 log=[1] hwm=1" in verdict.discrepancy.reason


def test_an_acknowledgement_to_an_earlier_generation_is_not_counted():
    events = ELECTED + [("n1", dict(log=((1, 1),))), ("n2", dict(log=((1, 1),))),
                        ("n1", dict(generation=UNNAMED, role="follower")),  # n1 steps down
                        ("n1", dict(generation=2, role="leader")),  # and wins generation 2 (n3 votes)
                        ("n3", dict(generation=2)),
                        ("n1", dict(hwm=1))]  # n2's reply was to generation 1
    verdict = run(*events)
    assert not verdict.valid and verdict.discrepancy.number == len(events)


def test_an_append_a_crashed_leader_sent_may_arrive_late_but_carries_only_what_it_held():
    sent = ELECTED + [("n1", dict(log=((1, 1),))), ("n1", dict(crash=True))]
    verdict = run(*sent, ("n2", dict(log=((1, 1),))))
    assert verdict.valid, verdict.discrepancy.describe()
    assert not run(*sent, ("n2", dict(log=((1, 1),))), validator=Validator).valid
    # The leader held one entry: no late append gives two, nor one of another generation.
    assert not run(*sent, ("n2", dict(log=((1, 1), (2, 1))))).valid
    assert not run(*sent, ("n2", dict(log=((1, 0),)))).valid


def test_a_leader_may_step_down_without_a_new_leader_but_not_lose_its_log():
    stepped = ELECTED + [("n1", dict(log=((1, 1),))), ("n1", dict(generation=UNNAMED, role="follower"))]
    verdict = run(*stepped)
    assert verdict.valid, verdict.discrepancy.describe()
    assert not run(*ELECTED, ("n1", dict(log=((1, 1),))), ("n1", dict(role="follower", log=()))).valid


# n2 leads generation 2 while n1, which led 1, is cut off; n2 steps down (it hears no quorum) after
# writing its second entry, which reaches n3 late.
STEPPED_DOWN_AFTER_WRITING = ELECTED + [
    ("n1", dict(log=((1, 1),))), ("n1", dict(log=((1, 1), (2, 1)))),
    ("n2", dict(generation=2, role="leader")), ("n3", dict(generation=2)), ("n1", dict(role="follower")),
    ("n2", dict(log=((1, 2),))), ("n3", dict(log=((1, 2),))), ("n2", dict(hwm=1)), ("n3", dict(hwm=1)),
    ("n2", dict(log=((1, 2), (2, 2)))), ("n2", dict(role="follower")),
    ("n3", dict(log=((1, 2), (2, 2)))),
]


def test_an_append_a_leader_sent_before_it_stepped_down_may_arrive_late_and_be_refused():
    # n2's append reaches n1, which lacks its previous entry (2@g2): n1 takes generation 2 and
    # keeps its log, though n2 leads no more (hwm node's own node, bench/false_findings_nodes.py).
    refused = STEPPED_DOWN_AFTER_WRITING + [("n1", dict(generation=2))]
    verdict = run(*refused)
    assert verdict.valid, verdict.discrepancy.describe()
    # A refusal changes nothing but the generation: n1 may not lose its own entry 2 ...
    truncated = run(*STEPPED_DOWN_AFTER_WRITING, ("n1", dict(generation=2, log=((1, 1),))))
    assert not truncated.valid and truncated.discrepancy.number == len(refused)
    # ... nor learn an HWM from the append it refused.
    learned = run(*STEPPED_DOWN_AFTER_WRITING, ("n1", dict(generation=2, hwm=1)))
    assert not learned.valid and learned.discrepancy.number == len(refused)


def test_a_late_append_of_an_older_generation_than_the_followers_changes_nothing():
    # n1 voted n3 into generation 3; n2's append of generation 2 reaching it now is stale: n1 keeps
    # generation 3 (the guard), whether it holds n2's previous entry or not.
    voted = STEPPED_DOWN_AFTER_WRITING + [("n3", dict(generation=3, role="leader")), ("n1", dict(generation=3))]
    verdict = run(*voted)
    assert verdict.valid, verdict.discrepancy.describe()
    events = voted + [("n1", dict(generation=2))]
    verdict = run(*events)
    assert not verdict.valid and verdict.discrepancy.number == len(events)


# n1 leads generation 1 and writes two entries; the first reaches n2 and n3, the second n1 alone
# (no HWM shown). n2 wins generation 2 with n3's vote, n1 steps down, and n2 writes its own entry 2,
# acknowledged by n3: n1 holds a conflicting entry 2 (g1) past the prefix it shares with n2.
CONFLICTING_SUFFIX = ELECTED + [
    ("n1", dict(log=((1, 1),))), ("n2", dict(log=((1, 1),))), ("n3", dict(log=((1, 1),))),
    ("n1", dict(log=((1, 1), (2, 1)))),
    ("n2", dict(generation=2, role="leader")), ("n3", dict(generation=2)), ("n1", dict(role="follower")),
    ("n2", dict(log=((1, 1), (2, 2)))), ("n3", dict(log=((1, 1), (2, 2)))), ("n2", dict(hwm=2)),
]


def test_an_append_within_the_matched_prefix_keeps_the_followers_suffix_and_raises_its_hwm_to_the_prefix():
    # n2's heartbeat (previous entry 1, which matches; no entries) reaches n1: no entry sent
    # conflicts, so n1 keeps its entry 2 for now, takes generation 2 and learns HWM min(2, 1) = 1.
    events = CONFLICTING_SUFFIX + [("n1", dict(generation=2, hwm=1))]
    verdict = run(*events)
    assert verdict.valid, verdict.discrepancy.describe()
    # n2's leadership carries on: the next append replaces n1's entry 2 with n2's.
    verdict = run(*events, ("n1", dict(log=((1, 1), (2, 2)), hwm=2)))
    assert verdict.valid, verdict.discrepancy.describe()


def test_an_append_within_the_matched_prefix_raises_the_hwm_no_further_than_the_prefix():
    # HWM 2 would commit n1's own entry 2 (g1), which is not n2's.
    events = CONFLICTING_SUFFIX + [("n1", dict(generation=2, hwm=2))]
    verdict = run(*events)
    assert not verdict.valid and verdict.discrepancy.number == len(events)


def test_no_hwm_is_learned_from_a_leader_whose_entries_up_to_it_differ():
    # n1 wrote two entries of generation 1 alone; n2 leads generation 2 and commits its own entry 1:
    # n1 shares no prefix with n2, so no append of n2's raises n1's HWM while n1 keeps its log.
    events = ELECTED + [
        ("n1", dict(log=((1, 1),))), ("n1", dict(log=((1, 1), (2, 1)))),
        ("n2", dict(generation=2, role="leader")), ("n3", dict(generation=2)), ("n1", dict(role="follower")),
        ("n2", dict(log=((1, 2),))), ("n3", dict(log=((1, 2),))), ("n2", dict(hwm=1)),
        ("n1", dict(generation=2, hwm=1)),
    ]
    verdict = run(*events)
    assert not verdict.valid and verdict.discrepancy.number == len(events)


@pytest.mark.parametrize("seed", range(3))
def test_recorded_runs_of_the_raft_model_stay_valid(seed):
    model = build_model(RAFT, Config(servers=3, max_generation=5, max_log=3, max_crashes=2))
    header, events = run_events(model, list(random_actions(model, 50, seed)), ("n1", "n2", "n3"))
    # A model run logs each step's changes leader first: no order between them to rely on.
    verdict = ObservedValidator(RAFT, header, followers_first=False).validate(events)
    assert verdict.valid, verdict.discrepancy.describe()


# The appends a follower takes from a leader other than the one the model's step names (a refused
# append, one within the matched prefix), from a leader alive and leading or one as it last led: the
# guard is the generation, never below the follower's (Raft's receiver rule 1 refuses such an append
# and changes nothing). Each guard row differs from an accepted row by the follower's generation alone.
LEADING_G2 = STEPPED_DOWN_AFTER_WRITING[:-2]  # n2 leads generation 2 and has just written its entry 2
G3_VOTED = [("n3", dict(generation=3, role="leader")), ("n1", dict(generation=3))]


@pytest.mark.parametrize("events, valid", [
    # refused: n1 lacks the previous entry 2@g2 of n2's append
    (LEADING_G2 + [("n1", dict(generation=2))], True),  # a live leader's: n1 takes g2
    (STEPPED_DOWN_AFTER_WRITING + [("n1", dict(generation=2))], True),  # the same, arriving late
    (LEADING_G2 + [("n1", dict(generation=2)), ("n1", dict(generation=2, role="follower"))], True),  # g2 = g2
    (LEADING_G2 + G3_VOTED + [("n1", dict(generation=2))], False),  # a live g2 leader's, n1 at g3
    (STEPPED_DOWN_AFTER_WRITING + G3_VOTED + [("n1", dict(generation=2))], False),  # the same, late
    # matched: n2's append ends within the prefix n1 shares with it, n1 keeps its entry 2@g1
    (CONFLICTING_SUFFIX + [("n1", dict(generation=2, hwm=1))], True),
    (CONFLICTING_SUFFIX + [("n1", dict(generation=2)), ("n1", dict(hwm=1))], True),  # n1 at g2 already
    (CONFLICTING_SUFFIX + G3_VOTED + [("n1", dict(hwm=1))], False),  # n1 at g3: the g2 append changes nothing
    (CONFLICTING_SUFFIX + G3_VOTED + [("n1", dict(generation=2, hwm=1))], False),
])
def test_an_append_of_a_generation_below_the_followers_is_refused_without_a_change(events, valid):
    verdict = run(*events)
    assert verdict.valid == valid, verdict.discrepancy and verdict.discrepancy.describe()
    if not valid:
        assert verdict.discrepancy.number == len(events)


# n1 leads generation 1 and writes three entries, the first two reaching n2 and n3 (no HWM shown);
# n2 wins generation 2, writes its own entry 3 with n3 and commits it (HWM 3). n1 holds entries 1..2
# in common with n2 and a conflicting entry 3@g1.
MATCHED_TWO = ELECTED + [
    ("n1", dict(log=((1, 1),))), ("n1", dict(log=((1, 1), (2, 1)))), ("n2", dict(log=((1, 1), (2, 1)))),
    ("n3", dict(log=((1, 1), (2, 1)))), ("n1", dict(log=((1, 1), (2, 1), (3, 1)))),
    ("n2", dict(generation=2, role="leader")), ("n3", dict(generation=2)), ("n1", dict(role="follower")),
    ("n2", dict(log=((1, 1), (2, 1), (3, 2)))), ("n3", dict(log=((1, 1), (2, 1), (3, 2)))), ("n2", dict(hwm=3)),
]


@pytest.mark.parametrize("hwm, valid", [
    (2, True),  # min(n2's HWM 3, the end of the matched prefix 2)
    (1, True),  # an append n2 sent before its HWM rose: an older HWM
    (3, False),  # past the matched prefix: n1's own entry 3@g1 is no committed entry
])
def test_a_matched_append_gives_at_most_the_senders_hwm_up_to_the_matched_prefix(hwm, valid):
    events = MATCHED_TWO + [("n1", dict(generation=2, hwm=hwm))]
    verdict = run(*events)
    assert verdict.valid == valid, verdict.discrepancy and verdict.discrepancy.describe()



# n3 leads generations 1 and 2 (n2 votes each time), then n2 and n3 are killed: no election is
# possible until n1 is back, and the highest generation any election reached is 2. n1 is killed
# at g0 before anyone stands, or at g1 after it followed n3 there.
LED_TWICE = [("n3", dict(generation=2, role="leader")), ("n2", dict(generation=2)),
             ("n2", dict(crash=True)), ("n3", dict(crash=True))]
KILLED_AT = {0: [("n1", dict(crash=True)), ("n3", dict(generation=1, role="leader")), ("n2", dict(generation=1))],
             1: [("n3", dict(generation=1, role="leader")), ("n1", dict(generation=1)), ("n2", dict(generation=1)),
                 ("n1", dict(crash=True))]}


@pytest.mark.parametrize("killed_at, back_at, persisted, valid", [
    (0, 1, True, True),  # the generation of a vote n1 granted before its kill: the caller says it may carry one
    (0, 1, False, False),  # the same without the caller's word: the model's restart keeps g0
    (0, 2, True, True),  # the highest generation an election reached
    (0, 3, True, False),  # one past it: no election reached it, so no vote was granted in it
    (1, 0, True, False),  # below the generation the model's n1 held at its kill: a restart keeps it
    (1, 1, True, True),  # the same generation: the model's own restart
])
def test_a_restart_carries_a_persisted_votes_generation_only_where_the_caller_says_and_an_election_reached_it(
        killed_at, back_at, persisted, valid):
    # The guards of restart-voted: the caller's word, a generation above the model's n1, and at most
    # the highest one any election reached (n1 alone elects no one here, so nothing else explains it).
    v = ObservedValidator(RAFT, Header(("n1", "n2", "n3"), LOGGED))
    for server, fields in KILLED_AT[killed_at] + LED_TWICE:
        assert v.feed(Event(server=server, **fields)) is None, (server, fields)
    restart = Event(server="n1", restart=True, generation=back_at, role="follower", log=(), hwm=0)
    assert (v.feed(restart, persisted_generation=persisted) is None) == valid


def feed(events, late_at: int, servers=3, validator_class=ObservedValidator, protocol=None):
    """The first discrepancy of `events` (each (server, fields)) under `validator_class` (raft's by
    default), the one at index `late_at` fed as a possible late election (`elect-late`); None if every
    event is explained."""
    header = Header(tuple(f"n{k}" for k in range(1, servers + 1)), LOGGED)
    validator = validator_class(protocol or RAFT, header)
    for i, (server, fields) in enumerate(events):
        discrepancy = validator.feed(Event(server=server, **fields), late_election=i == late_at)
        if discrepancy is not None:
            return discrepancy
    return validator.finish()


# n2 leads generation 2 with n3's vote, and entry 1@g2 is committed on both.
LED_TWO = [("n2", dict(generation=2, role="leader")), ("n3", dict(generation=2)), ("n2", dict(log=((1, 2),))),
           ("n3", dict(log=((1, 2),))), ("n2", dict(hwm=1))]


def test_a_candidate_leads_a_generation_below_one_led_and_the_run_goes_on_in_the_renumbered_ones():
    # n1 stood for generation 1 (unseen here) and reads its grants now (hwm's raft node does:
    # tests/impl/test_core.py); as leader of 1 it writes, then hears of 2 and n2's append replaces
    # its entry.
    events = LED_TWO + [("n1", dict(generation=1, role="leader")), ("n1", dict(log=((1, 1),))),
                        ("n1", dict(generation=2, role="follower", log=((1, 2),), hwm=1)),
                        ("n2", dict(log=((1, 2), (2, 2)))), ("n1", dict(log=((1, 2), (2, 2)))), ("n2", dict(hwm=2))]
    discrepancy = feed(events, late_at=len(LED_TWO))
    assert discrepancy is None, discrepancy.describe()
    # Without the caller's word, the model's election would number the generation above n3's vote.
    discrepancy = feed(events, late_at=-1)
    assert discrepancy is not None and discrepancy.number == len(LED_TWO) + 1


@pytest.mark.parametrize("before", [
    [("n1", dict(generation=2))],  # n1 took generation 2 (it heard of n2's leadership): never taken back
    [("n3", dict(generation=1, role="leader")), ("n3", dict(generation=2, role="follower"))],  # 1 has a leader
], ids=["taken-back", "led-already"])
def test_a_late_election_never_lowers_a_candidate_nor_gives_a_generation_a_second_leader(before):
    events = before + LED_TWO + [("n1", dict(generation=1, role="leader"))]
    discrepancy = feed(events, late_at=len(events) - 1)
    assert discrepancy is not None and discrepancy.number == len(events), discrepancy and discrepancy.describe()


# n3 is down, so n2 wins generation 2 with n1's vote alone (the model's n1 follows n2 in 2, a change n1
# has not shown); n3 comes back and leads generation 5 with n2's vote. n1 then leads generation 3.
VOTED_UNSHOWN = [("n3", dict(crash=True)), ("n2", dict(generation=2, role="leader"))]
LED_FIVE = [("n3", dict(restart=True, generation=0, role="follower", log=(), hwm=0)),
            ("n3", dict(generation=5, role="leader")), ("n2", dict(generation=5, role="follower"))]
N1_VOTED = [("n1", dict(generation=2))]
LATE_THREE = [("n1", dict(generation=3, role="leader"))]


@pytest.mark.parametrize("events, valid", [
    (VOTED_UNSHOWN + N1_VOTED + LED_FIVE + LATE_THREE, True),  # n1 showed its vote in 2, then stood for 3
    (VOTED_UNSHOWN + LED_FIVE + N1_VOTED + LATE_THREE, True),  # the same, shown later
    (VOTED_UNSHOWN + LED_FIVE + LATE_THREE, False),  # its vote in 2 never shown: a change waiting
], ids=["shown", "shown-later", "unshown"])
def test_a_late_election_needs_the_candidate_to_have_no_change_of_the_models_waiting_to_be_shown(events, valid):
    """The guard `cand.pending[k]` of ObservedValidator._late_elections: each row's every other guard
    holds (n1 alive, in the model a follower of the run's generation 2, below the freed one; 3 named by
    no one and below 5, which was led)."""
    discrepancy = feed(events, late_at=len(events) - 1)
    assert (discrepancy is None) == valid, discrepancy and discrepancy.describe()
    if not valid:
        assert discrepancy.number == len(events)
    # Without the caller's word none is explained: the model's election numbers 3 above 5.
    assert feed(events, late_at=-1) is not None


# n2 wins generation 2 with n3 while n1 still leads generation 1.
DEPOSED = ELECTED + [("n2", dict(generation=2, role="leader")), ("n3", dict(generation=2))]
# n1 has stepped down and n2 and n3 are down: no election can take n1 anywhere (no restart is logged),
# so only a message explains a later generation of n1's, and the highest any sender held is 2.
CUT_OFF = DEPOSED + [("n1", dict(role="follower")), ("n2", dict(crash=True)), ("n3", dict(crash=True))]


@pytest.mark.parametrize("events, valid", [
    (DEPOSED + [("n1", dict(generation=2, role="follower"))], True),  # a leader learns g2 and steps down
    (DEPOSED + [("n1", dict(role="follower")), ("n1", dict(generation=2))], True),  # a follower learns it
    (DEPOSED + [("n1", dict(generation=2))], False),  # still leading, in a generation n2 leads
    (CUT_OFF + [("n1", dict(generation=2))], True),  # the highest another server holds (a crashed one's)
    (CUT_OFF + [("n1", dict(generation=3))], False),  # above every other server's: no sender held it
])
def test_only_a_live_follower_learns_a_later_generation_without_voting(events, valid):
    """The relaxation's guards (ObservedValidator._later_generations): a follower learns a generation
    from a message; a leader that learns one steps down; the generation is at most the highest another
    server holds."""
    verdict = run(*events)
    assert verdict.valid == valid, verdict.discrepancy and verdict.discrepancy.describe()
    if not valid:
        assert verdict.discrepancy.number == len(events)
