"""An action over two servers: followers gossip their high-water marks. `share_hwm(S1, S2)` is S2
taking S1's high-water mark, an entry it may then serve to readers without hearing from the leader.
Safe when S2's log holds the same entries as S1's up to that mark (Raft's log matching then says they
are the committed ones); `HwmGossipUnchecked` compares only the lengths, and S2 serves an entry of an
old leader that the new one overwrites (docs/variants.md, "A model: fields and actions")."""

from hwm.model.variant import Variant


class HwmGossip(Variant):
    """S2 takes S1's high-water mark when its log agrees with S1's up to it."""

    base = "raft"
    actions = ("share_hwm",)

    def guard_share_hwm(self, state, i, j):
        giver, taker = state.servers[i], state.servers[j]
        if not (giver.alive and taker.alive):
            return "both servers must be up"
        if giver.hwm <= taker.hwm:
            return f"S{j + 1}'s high-water mark {taker.hwm} is not below S{i + 1}'s {giver.hwm}"
        return self.differs(giver, taker)

    def differs(self, giver, taker):
        """Why `taker` may not take `giver`'s high-water mark, or None."""
        if taker.log[:giver.hwm] != giver.log[:giver.hwm]:
            return "their logs differ below the giver's high-water mark"
        return None

    def effect_share_hwm(self, state, i, j):
        return self.with_server(state, j, hwm=state.servers[i].hwm)


class HwmGossipUnchecked(HwmGossip):
    """S2 takes S1's high-water mark when its log is long enough, whatever entries it holds."""

    def differs(self, giver, taker):
        if len(taker.log) < giver.hwm:
            return "the taker's log is shorter than the giver's high-water mark"
        return None
