"""Replaying a saved `hwm-schedule/1` file against a node command, step by step, and comparing the
history it gives with the saved one.

With the virtual clock and a node whose behaviour depends only on its inputs the two histories
are equal; otherwise the comparison says how many operations agree before the first difference.
"""

from __future__ import annotations

from dataclasses import dataclass

from bridge.maelstrom.cluster import Limits, Run, RunResult, run_schedule
from bridge.maelstrom.history import describe_op
from bridge.maelstrom.schedule import Schedule, describe


def _outcome(op: dict):
    """What a client saw of one operation: the part of the history a replay must reproduce."""
    reply = op.get("reply") or {}
    shown = {k: v for k, v in reply.items() if k not in ("msg_id", "in_reply_to", "text")}
    return (op["client"], op["node"], op["step"], op["type"], op["request"], op["status"], shown)


@dataclass
class Comparison:
    same: bool
    agreeing: int  # operations equal, in order, before the first difference
    saved: int
    replayed: int
    difference: str = ""

    def summary(self) -> str:
        if self.same:
            return f"the same history as the saved run ({self.saved} operations)"
        return (f"{self.agreeing} of {self.saved} saved operations agree before the first difference: "
                f"{self.difference}")


def compare_histories(saved: list[dict], replayed: list[dict]) -> Comparison:
    agreeing = 0
    for old, new in zip(saved, replayed):
        if _outcome(old) != _outcome(new):
            return Comparison(False, agreeing, len(saved), len(replayed),
                              f"saved {describe_op(old)} → {old['status']} {_outcome(old)[-1]}; "
                              f"replayed {describe_op(new)} → {new['status']} {_outcome(new)[-1]}")
        agreeing += 1
    if len(saved) != len(replayed):
        return Comparison(False, agreeing, len(saved), len(replayed),
                          f"the saved run has {len(saved)} operations, the replay {len(replayed)}")
    return Comparison(True, agreeing, len(saved), len(replayed))


def narrate_step(number, step: dict, run: Run, echo) -> None:
    """Print one step: what it was, then every message, reply, changed state and finding it caused."""
    echo(f"step {number}: {describe(step)}")
    for event in run.events[-1]:
        echo(f"    {event}")


def replay(command: list[str], schedule: Schedule, echo=print, limits: Limits | None = None,
           brief: bool = False) -> tuple[RunResult, Comparison | None]:
    """Run the saved schedule against `command`, narrating each step through `echo`."""
    def on_step(number, step, run):
        if not brief:
            narrate_step(number, step, run, echo)

    result = run_schedule(command, schedule, limits, on_step=on_step)
    if not brief and result.steps_run == len(schedule.steps) and result.protocol_error is None:
        echo("the final phase: heal, resume, restart, rounds of tick + deliver_all, then every node is read")
        for events in result.events[len(schedule.steps) + 1:]:
            for event in events:
                if event.startswith(("now ", "FINDING")) or "→c" in event.split(" ")[0]:
                    echo(f"    {event}")
    comparison = compare_histories(schedule.history, result.history) if schedule.history else None
    return result, comparison
