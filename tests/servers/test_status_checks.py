"""The status check's boundary table: a member's commit index may stay or grow, never go below the
highest it showed, across restarts included; each member is judged on its own."""

from hwm.bridge.servers.adapter import Status
from hwm.bridge.servers.run import StatusChecks


def judged(samples):
    checks = StatusChecks()
    for step, (member, commit) in enumerate(samples):
        checks.sample(member, Status(term=2, leader=False, committed_index=commit), step, f"step {step}")
    return [f.name for f in checks.findings]


def test_equal_and_growing_commit_indexes_pass():
    assert judged([("n1", 0), ("n1", 0), ("n1", 5), ("n1", 5), ("n1", 9)]) == []


def test_one_below_the_highest_shown_is_a_finding():
    assert judged([("n1", 5), ("n1", 4)]) == ["HwmNeverTruncated"]


def test_below_an_earlier_highest_is_a_finding_even_after_a_rise():
    assert judged([("n1", 7), ("n1", 3)]) == ["HwmNeverTruncated"]
    assert judged([("n1", 7), ("n1", 8), ("n1", 7)]) == ["HwmNeverTruncated"]


def test_members_are_judged_apart():
    assert judged([("n1", 9), ("n2", 3), ("n2", 4)]) == []


def test_the_finding_names_the_member_both_indexes_and_the_step():
    checks = StatusChecks()
    checks.sample("n2", Status(committed_index=12), 3, "kill(n2)")
    checks.sample("n2", Status(committed_index=4), 5, "restart(n2)")
    assert str(checks.findings[0]) == ("HwmNeverTruncated (step 5): n2's commit index (its high-water mark) was 12 "
                                       "at step 3; after restart(n2) it is 4")
