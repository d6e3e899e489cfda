"""checker/observed_zab.py: what a correct ZAB node does between the model's steps is accepted (an ACK
of NEWLEADER or of a proposal counted later, a NEWLEADER carrying an older history, a later epoch
learnt without a vote, a leader stepping down), and what ZAB's model forbids is still rejected."""

import pytest

from hwm.checker.model_events import random_actions, run_events
from hwm.checker.observed_zab import ObservedZabValidator
from hwm.checker.validate import Validator
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.catalogue import check_state
from hwm.properties.events import Event, Header, UNNAMED
from hwm.properties.protocol import resolve
from tests.checker.test_observed import feed as feed_under

ZAB = resolve("zab")[1]
LOGGED = frozenset({"generation", "role", "log", "hwm"})


def run(*events, servers=3, validator=ObservedZabValidator, protocol=ZAB):
    """The verdict on `events`, each (server, fields)."""
    header = Header(tuple(f"n{k}" for k in range(1, servers + 1)), LOGGED)
    return validator(protocol, header).validate([Event(server=server, **fields) for server, fields in events])


ELECTED = [("n1", dict(generation=1, role="leader")), ("n2", dict(generation=1)), ("n3", dict(generation=1))]
# n1 established (n2's ACK of NEWLEADER), one proposal stored on n2, not yet counted.
PROPOSED = ELECTED + [("n1", dict(log=((1, 1),))), ("n2", dict(log=((1, 1),)))]


def test_a_proposal_is_committed_when_its_ack_reaches_the_leader_after_the_followers_change():
    events = PROPOSED + [("n1", dict(log=((1, 1), (2, 1)))),  # a second proposal: n2's ACK not yet in
                         ("n1", dict(hwm=1)),  # now it is
                         ("n2", dict(log=((1, 1), (2, 1)), hwm=1)), ("n1", dict(hwm=2))]
    verdict = run(*events)
    assert verdict.valid, verdict.discrepancy.describe()
    # ZAB's model counts the ACK in the proposal's own step: its HWM would be 1 at the second proposal.
    assert not run(*events, validator=Validator).valid


def test_a_leader_commits_nothing_no_follower_was_shown_to_store():
    verdict = run(*ELECTED, ("n1", dict(log=((1, 1),))), ("n1", dict(hwm=1)))
    assert not verdict.valid and verdict.discrepancy.number == 5
    assert "has n1 as the run says: leader g1 log=[1] hwm=1" in verdict.discrepancy.reason


def test_an_ack_of_an_earlier_epoch_is_not_counted():
    events = PROPOSED + [("n1", dict(generation=UNNAMED, role="follower")),  # n1 steps down
                         ("n1", dict(generation=2, role="leader")), ("n3", dict(generation=2)),  # n3 votes
                         ("n1", dict(hwm=1))]  # n2's ACK was to epoch 1; n3 holds nothing
    verdict = run(*events)
    # Only n2's ACK of epoch 2's NEWLEADER could commit it, and n2 never showed epoch 2.
    assert not verdict.valid and verdict.discrepancy.event is None, verdict.discrepancy.describe()
    assert "needs a change no event logged: n2 follower g2 log=[1]" in verdict.discrepancy.reason


def test_a_newleader_may_carry_an_older_history_but_never_truncate_what_the_follower_shares():
    two = PROPOSED + [("n1", dict(log=((1, 1), (2, 1))))]
    # n3 synchronises from a NEWLEADER sent when n1 held one entry, and learns no HWM from it.
    verdict = run(*two, ("n3", dict(log=((1, 1),))))
    assert verdict.valid, verdict.discrepancy.describe()
    # n2 already holds n1's entry: no NEWLEADER of n1 (links are FIFO) takes it away again.
    verdict = run(*two, ("n2", dict(log=())))
    assert not verdict.valid and verdict.discrepancy.number == len(two) + 1


def test_a_follower_learns_a_later_epoch_without_voting_for_it():
    # n1, cut off with a proposal no one else stores, refused n2's vote (its history is fresher);
    # when it hears of epoch 2 it steps down and takes it, keeping its history and currentEpoch.
    events = ELECTED + [("n1", dict(log=((1, 1),))), ("n2", dict(generation=2, role="leader")),
                        ("n3", dict(generation=2)), ("n1", dict(generation=2, role="follower"))]
    verdict = run(*events)
    assert verdict.valid, verdict.discrepancy.describe()


def test_a_leader_may_step_down_without_a_new_leader_but_not_lose_its_history():
    verdict = run(*PROPOSED, ("n1", dict(generation=UNNAMED, role="follower")))
    assert verdict.valid, verdict.discrepancy.describe()
    assert not run(*PROPOSED, ("n1", dict(role="follower", log=()))).valid


@pytest.mark.parametrize("preset", ["zab", "zab-ack-before-persist"])
def test_recorded_runs_of_the_zab_model_stay_valid(preset):
    protocol = resolve(preset)[1]
    model = build_model(protocol, Config(servers=3, max_generation=4, max_log=3, max_crashes=2))
    header, events = run_events(model, list(random_actions(model, 40, 1)), ("n1", "n2", "n3"))
    # A model run logs each step's changes leader first: no order between them to rely on.
    verdict = ObservedZabValidator(protocol, header, followers_first=False).validate(events)
    assert verdict.valid, verdict.discrepancy.describe()


def test_a_prospective_leader_of_five_may_write_after_acks_of_newleader_no_node_showed():
    # n2 and n3 already hold n1's (empty) history: their NEWLEADER ACKs change nothing they show,
    # and n1 shows nothing until the quorum's last one establishes it.
    elected = [("n1", dict(generation=1, role="leader"))] + [(f"n{k}", dict(generation=1)) for k in (2, 3)]
    verdict = run(*elected, ("n1", dict(log=((1, 1),))), servers=5)
    assert verdict.valid, verdict.discrepancy.describe()


def feed(events, late_at: int, servers=3):
    """test_observed.py's `feed` under the ZAB validator."""
    return feed_under(events, late_at, servers, ObservedZabValidator, ZAB)


# n2 leads epoch 2 with n3's vote, n3 synchronises, and entry 1@g2 is committed on both.
LED_TWO = [("n2", dict(generation=2, role="leader")), ("n3", dict(generation=2)), ("n2", dict(log=((1, 2),))),
           ("n3", dict(log=((1, 2),))), ("n2", dict(hwm=1))]


def test_a_candidate_leads_an_epoch_below_one_led_and_the_run_goes_on_in_the_renumbered_epochs():
    # n1 stood for epoch 1 (unseen here) and reads its grants now: a prospective leader of epoch 1,
    # which then hears of epoch 2, is synchronised by n2 and gets its next proposal.
    events = LED_TWO + [("n1", dict(generation=1, role="leader")), ("n1", dict(generation=2, role="follower")),
                        ("n1", dict(log=((1, 2),), hwm=1)), ("n2", dict(log=((1, 2), (2, 2)))),
                        ("n1", dict(log=((1, 2), (2, 2)))), ("n2", dict(hwm=2))]
    discrepancy = feed(events, late_at=len(LED_TWO))
    assert discrepancy is None, discrepancy.describe()
    # Without the caller's word, the model's election would number the epoch above n3's vote of epoch 2.
    discrepancy = feed(events, late_at=-1)
    assert discrepancy is not None and discrepancy.number == len(LED_TWO) + 1


def test_a_late_election_never_takes_a_candidate_back_to_an_epoch_below_its_own():
    # n1 took epoch 2 (it heard of n2's leadership): its currentEpoch or vote may be older, its epoch is not.
    events = LED_TWO + [("n1", dict(generation=2)), ("n1", dict(generation=1, role="leader"))]
    discrepancy = feed(events, late_at=len(LED_TWO) + 1)
    assert discrepancy is not None and discrepancy.number == len(LED_TWO) + 2


def test_a_late_election_renumbers_the_acknowledged_entries_with_the_logs_that_hold_them():
    # Entry 1@g2 is acknowledged (n2's HWM covers it) before n1 leads epoch 1 late: every model state
    # kept must still hold it on a quorum (AckedWriteNeverLost), under its renumbered epoch.
    header = Header(("n1", "n2", "n3"), LOGGED)
    validator = ObservedZabValidator(ZAB, header)
    for i, (server, fields) in enumerate(LED_TWO + [("n1", dict(generation=1, role="leader"))]):
        assert validator.feed(Event(server=server, **fields), late_election=i == len(LED_TWO)) is None
    always = tuple(p for p in validator.model.properties if p.kind == "always")
    assert all(cand.state.acked for cand in validator.candidates)
    for cand in validator.candidates:
        assert check_state(cand.state, always) == {}, cand.state


def test_each_validator_step_is_named_with_its_servers_in_a_finding():
    """The names a finding's "nearest model step" and the coverage use for the validators' own steps
    (tuples of server positions): each its own words, the servers by the run's names."""
    from tests.checker.test_observed import LOGGED

    zab = ObservedZabValidator(resolve("zab")[1], Header(("n1", "n2", "n3"), LOGGED))
    assert zab._action_text(("ack", 2, 0)) == "ack(n3→n1)"
    assert zab._action_text(("elect-late", 1)) == "elect(n2) with grants it read after later generations were led"
    assert zab._action_text(("restart-voted", 0, 3)) == "restart(n1) with the generation of a vote it persisted"
    assert zab._action_text(("learn_generation", 2, 4)) == "learn_generation(n3, 4), a later generation it heard of"


class WithoutSynchronisedCandidates(ObservedZabValidator):
    """The ZAB validator without `_elections_of_a_synchronised_candidate`."""

    def _elections_of_a_synchronised_candidate(self, state):
        return iter(())


# n3 is down throughout; n2 voted n1 into epoch 1 (the model's n2: currentEpoch 0, never synchronised).
VOTED_N1 = [("n3", dict(crash=True)), ("n2", dict(generation=1)), ("n1", dict(generation=1, role="leader"))]


@pytest.mark.parametrize("events, valid, first_unexplained_without", [
    # n2 leads epoch 1 with n1's vote; unseen, n1 wins epoch 2 with n2's vote and synchronises it (n2's
    # empty history was n1's: no change shown, currentEpoch 2), then n2 wins epoch 3 with n1's vote.
    # The model's second election needs n2's currentEpoch 2, which only a third step (the sync) gives.
    ([("n3", dict(crash=True)), ("n2", dict(generation=1, role="leader")), ("n1", dict(generation=1)),
      ("n2", dict(generation=3, role="leader")),
      ("n1", dict(generation=2, role="leader")), ("n1", dict(generation=3, role="follower"))], True, 4),
    # n1 steps down; n2 (its history n1's) wins epoch 2 with n1's vote.
    (VOTED_N1 + [("n1", dict(role="follower")), ("n2", dict(generation=2, role="leader")),
                 ("n1", dict(generation=2, role="follower"))], True, None),  # the model's own
    # The same after n1 logged a proposal n2 lacks: n1's last zxid is above n2's whatever n2's
    # currentEpoch was (even after an unseen election of n1's, in its epoch), so n1 refuses its vote.
    (VOTED_N1 + [("n1", dict(log=((1, 1),))), ("n1", dict(role="follower")),
                 ("n2", dict(generation=2, role="leader"))], False, 6),
], ids=["unseen-sync", "same-history", "voter-fresher"])
def test_a_candidates_unseen_current_epoch_may_be_up_to_its_generation_but_its_history_still_counts(
        events, valid, first_unexplained_without):
    """ObservedZabValidator._elections_of_a_synchronised_candidate: the model's election, the candidate's
    currentEpoch taken as its generation, and the rest of fast leader election's order kept
    (`synchronised >= fresh[v]`: a voter with a later zxid refuses)."""
    verdict = run(*events)
    assert verdict.valid == valid, verdict.discrepancy and verdict.discrepancy.describe()
    if not valid:
        assert verdict.discrepancy.number == len(events)
    # Without the relaxation: the first row's election (its fourth event) has no explanation.
    verdict = run(*events, validator=WithoutSynchronisedCandidates)
    assert (verdict.discrepancy and verdict.discrepancy.number) == first_unexplained_without
