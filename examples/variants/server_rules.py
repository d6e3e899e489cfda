"""The three rules of one server's own steps, as rule hooks of Raft (docs/variants.md): the append check
(`accepts_append`), what a restart keeps (`restart_keeps`) and who serves a read, up to which index
(`readable`). Pinned in tests/variants/test_variant_server_rules.py."""

from hwm.model.variant import Variant


class TruncateToOwnHwm(Variant):
    """Raft with a checkpointed HWM whose restarting server keeps only its log up to that HWM, which
    lags the leader's: Kafka before KIP-101, as the kip101 preset has it by its `restart` flag."""

    base = {"preset": "raft", "flags": {"hwm_durable": True}}

    def restart_keeps(self, log, hwm, leader_hwm):
        return min(hwm, len(log))


class TruncateUnchecked(TruncateToOwnHwm):
    """TruncateToOwnHwm whose follower accepts every append, with no check of the entry before it: a
    restarted follower that lost the entries up to its leader's match index acknowledges them again,
    and takes the leader's HWM over entries it does not hold. (The raft model's leader sends from the
    match index it learned, so the check matters once a restart cuts a follower's log below it.)"""

    def accepts_append(self, log, prev_index, prev_generation):
        return True


class LeaderReads(Variant):
    """Only the leader serves reads, up to its HWM; a follower serves none."""

    base = "raft"

    def readable(self, server, leading, log, hwm):
        return min(hwm, len(log)) if leading else 0


class FollowerReadsUnchecked(Variant):
    """The leader serves up to its HWM, a follower its whole log, with no word from the leader on what
    is committed: a client reads an entry no quorum holds."""

    base = "raft"

    def readable(self, server, leading, log, hwm):
        return min(hwm, len(log)) if leading else len(log)
