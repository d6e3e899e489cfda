"""The raft family's rules the model asks: `Rules` (which servers count, Q1, Q2, the quorum index, the
commit and vote rules) lives in `properties.rules`, beside the quorum arithmetic, because hwm's own
replica (`impl.core`) asks the same object and the implementation never imports the model; the model,
a variant (`model.variant`) and the engines import it from here."""

from __future__ import annotations

from hwm.properties.rules import HOOKS, PER_STATE_HOOKS, Rules, overridden, rules_of, up_to_date

__all__ = ["HOOKS", "PER_STATE_HOOKS", "Rules", "overridden", "rules_of", "up_to_date"]
