"""What drives a simulated run and what it yields: a `Schedule` (a seed and its `Step`s), the
Hypothesis strategy that draws them, the shrinker that makes a failing one smaller, and the run's
`Outcome`."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

ACTIONS = ("put", "get", "crash", "power", "outage", "restart", "isolate", "heal", "fault")
CRASHES = ("crash", "power", "outage")
SERVERS = ("S1", "S2", "S3")


@dataclass(frozen=True)
class Step:
    """After `pause_ms` of virtual time, `action` on server `server` (0-based) with `arg`."""

    pause_ms: int
    action: str
    server: int = 0
    arg: int = 0

    def __str__(self) -> str:
        machine = "controller" if self.server == len(SERVERS) else SERVERS[self.server % len(SERVERS)]
        return f"+{self.pause_ms}ms {self.action} {machine} {self.arg}"


@dataclass(frozen=True)
class Schedule:
    seed: int
    steps: tuple[Step, ...]

    def __str__(self) -> str:
        return f"seed {self.seed}: " + "; ".join(str(s) for s in self.steps)



@dataclass
class Outcome:
    violations: list[str] = field(default_factory=list)
    witnesses: Counter = field(default_factory=Counter)
    events: list[str] = field(default_factory=list)  # what happened, in order (for determinism)
    acked: dict[int, bytes] = field(default_factory=dict)  # index -> value of acknowledged puts

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256("\n".join(self.events).encode()).hexdigest()

    def report(self, schedule: Schedule) -> str:
        lines = [f"schedule: {schedule!r}", *[f"  step {k}: {s}" for k, s in enumerate(schedule.steps)]]
        lines += [f"violation: {v}" for v in self.violations]
        return "\n".join(lines)


def schedules(max_steps: int = 10, max_pause_ms: int = 200, machines: int = len(SERVERS)):
    """Hypothesis strategy: a seed and up to `max_steps` steps, at least one of them a crash (a
    process crash, a power failure or an outage) somewhere in the list; the end of every schedule
    restarts every machine, so each is a crash/restart schedule. Puts are drawn more often than
    the rest: the checks need acknowledged writes to protect. A step names one of `machines`
    (Kafka's simulation adds its controller). Shrinks towards fewer, shorter steps."""
    from hypothesis import strategies as st

    weighted = ("put", "put", "put") + ACTIONS[1:]
    machine = st.integers(0, machines - 1)
    step = st.builds(Step, st.integers(0, max_pause_ms), st.sampled_from(weighted), machine, st.integers(0, 7))
    crash = st.builds(Step, st.integers(0, max_pause_ms), st.sampled_from(CRASHES), machine, st.integers(0, 7))

    @st.composite
    def schedule(draw):
        steps = draw(st.lists(step, max_size=max_steps - 1))
        at = draw(st.integers(0, len(steps)))
        steps.insert(at, draw(crash))
        return Schedule(draw(st.integers(0, 2**32 - 1)), tuple(steps))

    return schedule()


def shrink(schedule: Schedule, fails: Callable[[Schedule], bool], budget: int = 60) -> Schedule:
    """A smaller schedule that still `fails`: drop steps, then zero pauses and arguments, greedily,
    in at most `budget` runs. (Hypothesis's own shrinker finds smaller ones but may spend minutes:
    every candidate is a whole simulated run.)"""
    runs = 0

    def attempt(candidate: Schedule) -> bool:
        nonlocal runs
        runs += 1
        return runs <= budget and fails(candidate)

    changed = True
    while changed and runs < budget:
        changed = False
        for k in range(len(schedule.steps) - 1, -1, -1):
            candidate = Schedule(schedule.seed, schedule.steps[:k] + schedule.steps[k + 1:])
            if k < len(schedule.steps) and attempt(candidate):
                schedule, changed = candidate, True
        for k, step in enumerate(schedule.steps):
            # Each simplification of the step as it now is (from the original, the second undid the first).
            for simplify in (lambda s: Step(0, s.action, s.server, s.arg), lambda s: Step(s.pause_ms, s.action, s.server, 0)):
                simpler = simplify(step)
                if simpler != step:
                    candidate = Schedule(schedule.seed, schedule.steps[:k] + (simpler,) + schedule.steps[k + 1:])
                    if attempt(candidate):
                        schedule, step, changed = candidate, simpler, True
    return schedule
