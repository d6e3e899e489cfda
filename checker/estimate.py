"""How long a check will take: a rough prediction from the bounds before it starts, and a remaining
time from the shape of its levels once it is under way.

Before the search (`long_run_warning`): the distinct states grow about geometrically in each bound.
A least-squares fit of log10(states) on servers, max_generation, max_log and max_crashes over the
raft pins (tests/pinned.py, 96 to 16,668,484 states, rpc network, symmetry on) predicts every one
of them within a factor of 2.1; each system's preset at the default bounds sets its offset (the other
presets of a system are within a factor of 7 of it: seed has 39,973 states where raft has 6,936), the
async network and symmetry off multiply. Outside the pins' range it is an extrapolation, and says
"roughly". The states per second are each backend's on one core (docs/scaling.md).

During the search (`remaining_states`, `remaining_seconds`): a breadth-first search's levels grow,
peak and shrink, and
the shrinking side roughly mirrors the growing one (raft at log <= 2: 17,240 predicted after the
first smaller level, 13,711 found; Kafka at generation <= 3, log <= 2: 60,828 and 79,215). Until a
level is smaller than the one before, no remaining time is claimed.
"""

from __future__ import annotations

import math

from hwm.model.state import Config

__all__ = ["LONG_RUN_SECONDS", "predicted_states", "predicted_seconds", "long_run_warning", "remaining_states",
           "remaining_seconds", "about"]

# A run predicted to take longer than this is announced with its estimate before it starts.
LONG_RUN_SECONDS = 180.0

# log10(states) = INTERCEPT + sum of PER_BOUND[b] * bound b (raft, rpc network, symmetry on)
INTERCEPT = -3.643
PER_BOUND = {"servers": 1.133, "max_generation": 0.397, "max_log": 1.063, "max_crashes": 1.376}
# log10 of each system's states over raft's at the same bounds (its preset at the tour's bounds)
SYSTEM_OFFSET = {"raft": 0.0, "zab": 0.23, "bookkeeper": -0.37, "kafka": 1.09}
# raft at 3 servers, generation <= 4, log <= 1, one crash: 28,122,358 states on the async network
# (channel capacity 1) against 6,073 predicted on rpc
ASYNC_OFFSET = 3.67
# distinct states per second on one core (docs/scaling.md: 34,000-93,000 fast, 2,000-13,000 reference)
STATES_PER_SECOND = {"fast": 40_000.0, "reference": 3_000.0}


def predicted_states(system: str, config: Config, symmetry: bool = True) -> float:
    """Roughly how many distinct states a check of `system` at `config` explores."""
    exponent = INTERCEPT + sum(weight * getattr(config, bound) for bound, weight in PER_BOUND.items())
    exponent += SYSTEM_OFFSET.get(system, 0.0)
    if config.network == "async":
        exponent += ASYNC_OFFSET + (config.channel_capacity - 1)  # a slot more per channel: about 10x
    states = 10 ** exponent
    if not symmetry:
        states *= math.factorial(config.servers)  # at most one state per ordering of the servers
    return max(states, 1.0)


def predicted_seconds(states: float, successors: str, workers: int = 1) -> float:
    return states / (STATES_PER_SECOND.get(successors, STATES_PER_SECOND["reference"]) * max(1, workers))


def about(seconds: float) -> str:
    """`about 4 min`, `about 3 h`, `about 12 days`, `about 5,000 years`: no false precision."""
    for unit, size in (("years", 365 * 86400), ("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size:
            return f"about {seconds / size:,.0f} {unit}"
    return f"about {seconds:.0f} s"


def long_run_warning(runs: list[tuple[str, Config, str]], symmetry: bool, parallel: int = 1) -> str | None:
    """The warning for the checks `runs` ((system, bounds, successor backend) each: the tour's are
    many) when the bounds predict more than LONG_RUN_SECONDS of search, or None. `parallel`: checks
    (the tour's --jobs) or workers running at once."""
    states = seconds = 0.0
    for system, config, backend in runs:
        predicted = predicted_states(system, config, symmetry)
        states += predicted
        seconds += predicted_seconds(predicted, backend)
    seconds /= max(1, parallel)
    if seconds <= LONG_RUN_SECONDS:
        return None
    magnitude = f"{states:,.0f}" if states < 1e7 else f"10^{math.log10(states):.0f}"
    return (f"warning: these bounds predict roughly {magnitude} states, {about(seconds)} of search "
            f"(a rough estimate from the bounds: within 2x of raft's pinned counts, presets differ up to 7x); "
            f"smaller bounds, --engine simulation (random walks) or --engine spark (a cluster) finish sooner")


def remaining_states(levels: list[int], current: int = 0) -> float | None:
    """States still to find, once the finished `levels` (their sizes, from the initial state's) have
    started to shrink: the levels still to come mirror those before the peak. `current`: states found
    so far in the level under way. None while the levels still grow."""
    if len(levels) < 3:
        return None
    peak = max(range(len(levels)), key=levels.__getitem__)
    if peak == len(levels) - 1:
        return None
    after = len(levels) - 1 - peak  # finished levels past the peak
    return float(max(0, sum(levels[:max(0, peak - after)]) - current))


def remaining_seconds(info: dict) -> float | None:
    """The time left of a search, from one of the engine's progress reports (`levels`, `frontier`: the
    states found so far in the level under way, `expanded`, `states`, `elapsed`): the states still to
    expand, found or still to be found (`remaining_states`), at the rate states have been expanded so
    far (a state's expansion costs about the same all along; new states per second fall as the search
    finds mostly known ones). None until the levels shrink."""
    remaining = remaining_states(info.get("levels", []), info.get("frontier", 0))
    expanded, elapsed = info.get("expanded", 0), info.get("elapsed", 0.0)
    if remaining is None or expanded <= 0 or elapsed <= 0:
        return None
    return max(0.0, info["states"] + remaining - expanded) / (expanded / elapsed)
