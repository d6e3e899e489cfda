"""`hwm check --liveness` and `hwm graph --liveness`: run the eventually properties, print their rows,
save their lassos as hwm-trace/1 files."""

from __future__ import annotations

from pathlib import Path

from hwm.model.registry import build_model
from hwm.checker.liveness import LivenessReport, check_liveness, refusal
from hwm.model.state import Config
from hwm.properties.protocol import resolve

SYMMETRY_NOTE = ("liveness explores without symmetry reduction: fairness names action instances "
                 "(replicate(S1, S2)) that a symmetry class does not keep apart")


def refused(protocol_spec, config: Config) -> str | None:
    """Why the liveness check cannot run on this configuration (checked before any long work)."""
    _, protocol = resolve(protocol_spec)
    return refusal(build_model(protocol, config))


def run(protocol_spec, config: Config, max_states: int | None = None, successors: str = "auto") -> LivenessReport:
    """The check on the graph of `successors` (the backend the safety check ran: its graph; anything else:
    `auto`); `max_states` defaults to that graph's limit."""
    name, protocol = resolve(protocol_spec)
    successors = successors if successors in ("fast", "reference") else "auto"
    return check_liveness(build_model(protocol, config), name, max_states=max_states, successors=successors)


def strongly_fair(report: LivenessReport) -> str:
    """The report's strongly fair actions as a clause of its first line (none on the rpc network)."""
    return f"; strongly fair: {', '.join(report.strong_fairness)}" if report.strong_fairness else ""


def describe(report: LivenessReport, symmetry_requested: bool, saved: dict[str, Path] | None = None) -> str:
    saved = saved or {}
    graph = " (compiled graph)" if report.successors == "fast" else ""
    lines = ["", f"liveness: {report.states:,} concrete states, {report.transitions:,} transitions{graph}; weakly fair: "
             + ", ".join(report.fairness) + strongly_fair(report)
             + "; elections and crashes stop within the bounds"]
    if symmetry_requested:
        lines.append(f"  ({SYMMETRY_NOTE})")
    for prop in report.properties:
        r = report.results[prop.name]
        if r.found:
            lines.append(f"  ✗ {prop.name:28} violated (lasso {r.stem}+{r.cycle} steps): {r.finding}")
            stem, cycle = r.steps[:r.stem], r.steps[r.stem:]
            lines.append(f"      {' '.join(map(str, stem))} | cycle: {' '.join(map(str, cycle))}")
            if prop.name in saved:
                lines.append(f"      saved to {saved[prop.name]}  (hwm replay {saved[prop.name]})")
        else:
            lines.append(f"  ✓ {prop.name:28} holds")
        if r.cut:
            lines.append(f"      {r.cut:,} terminal states (a bound stopped every action) have an obligation open: "
                         "not counted as violations")
    for prop in report.properties:
        w = report.results[prop.witness.name]
        if w.found:
            lines.append(f"  ✓ {w.name:28} witnessed in {len(w.steps)} steps: {w.finding}")
        else:
            lines.append(f"  ! {w.name:28} UNREACHED: {prop.witness.meaning} never happens, so "
                         f"{prop.name} holds vacuously")
    return "\n".join(lines)


__all__ = ["SYMMETRY_NOTE", "describe", "refused", "run"]
