"""Where `hwm replay --on model|impl|both` sends a trace."""

from __future__ import annotations

from typing import Callable

from hwm.bridge.replay import replay_on_impl
from hwm.checker.replay import Outcome, judge, replay_on_model  # noqa: F401 (judge: the command line's)
from hwm.properties.trace import Trace

Replayer = Callable[[Trace, object], Outcome]
REPLAYERS: dict[str, Replayer] = {"model": replay_on_model, "impl": replay_on_impl}
