"""`hwm check`: one protocol, or the tour of every preset, and the reports they print."""

from __future__ import annotations

import os
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from hwm.render import table
from model.actions import build_model
from model.checker import Report, bfs
from model.state import Config
from properties.catalogue import ALWAYS, SOMETIMES
from properties.protocol import PRESETS, resolve
from properties.trace import Trace

DEFAULT_CONFIG = Config()


@dataclass(frozen=True)
class CheckRequest:
    protocol: str | dict  # preset name or {"preset":..., "flags":...}
    config: Config
    symmetry: bool = True
    engine: str = "local"
    spark_master: str | None = None
    walks: int = 2000
    seed: int = 0
    workers: int = 1  # processes of the local engine
    successors: str = "reference"  # the successor backend (model.backend): reference | fast


def run(request: CheckRequest, progress=None) -> Report:
    """Check one protocol with the requested engine."""
    name, protocol = resolve(request.protocol)
    model = build_model(protocol, request.config)
    if request.engine == "local":
        return bfs(model, name, symmetry=request.symmetry, progress=progress, workers=request.workers,
                   successors=request.successors)
    if request.engine == "simulation":
        from model.simulation import simulate
        return simulate(model, name, walks=request.walks, seed=request.seed, symmetry=request.symmetry,
                        progress=progress)
    if request.engine == "spark":
        from model.spark_engine import spark_bfs
        return spark_bfs(model, name, symmetry=request.symmetry, master=request.spark_master or "local[*]",
                         progress=progress, successors=request.successors)
    raise ValueError(f"unknown engine {request.engine!r}")


def successors_refusal(protocols, config: Config, successors: str) -> str | None:
    """Why the successor backend cannot run one of `protocols` at `config` (checked before any search)."""
    from model.backend import refusal

    for spec in protocols:
        name, protocol = resolve(spec)
        try:
            model = build_model(protocol, config)
        except ValueError:  # the model refuses these bounds itself: its own check says so
            continue
        why = refusal(successors, model)
        if why:
            return f"{name}: {why}; use --successors reference"
    return None


def _run_quiet(request: CheckRequest) -> Report:
    return run(request)


def expected_violations(preset: str, config: Config) -> frozenset[str] | None:
    """The always properties the catalogue expects to fail, when known for these bounds."""
    p = PRESETS[preset]
    if config != DEFAULT_CONFIG:
        return None
    return p.breaks


def tour(config: Config, symmetry: bool, jobs: int, progress_stream=None,
         successors: str = "reference") -> list[tuple[str, Report]]:
    """Check every preset; presets run in parallel processes (one per core by default)."""
    requests = [CheckRequest(name, config, symmetry, successors=successors) for name in PRESETS]
    if jobs <= 1:
        return [(r.protocol, run(r)) for r in requests]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [(r.protocol, pool.submit(_run_quiet, r)) for r in requests]
        results = []
        for done, (name, future) in enumerate(futures, 1):
            if progress_stream is not None and progress_stream.isatty():
                progress_stream.write(f"\rtour: {done - 1}/{len(futures)} presets checked, waiting for {name}...".ljust(80))
                progress_stream.flush()
            results.append((name, future.result()))
        if progress_stream is not None and progress_stream.isatty():
            progress_stream.write("\r" + " " * 80 + "\r")
        return results


def default_jobs() -> int:
    return max(1, min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 8))


# ----------------------------------------------------------------- reporting
def trace_for(report: Report, protocol_spec, prop: str) -> Trace:
    """The shortest counterexample to `prop` as a saveable hwm-trace/1 trace."""
    result = report.results[prop]
    name = report.protocol_name
    summary = PRESETS[name].summary if name in PRESETS else name
    return Trace(
        protocol=protocol_spec, config=dict(report.config), property=prop, expect="violation",
        steps=list(result.steps),
        title=f"{name}: {prop} violated in {result.length} steps",
        explanation=(f"{result.finding}. Found by breadth-first search ({report.engine} engine), so no "
                     f"shorter trace violates {prop} at these bounds. Protocol: {summary}."),
    )


def trace_filename(protocol_name: str, prop: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=+-]", "_", f"{protocol_name}.{prop}") + ".json"


def save_counterexamples(report: Report, protocol_spec, directory: Path) -> list[Path]:
    saved = []
    for name in report.violated:
        saved.append(trace_for(report, protocol_spec, name).save(directory / trace_filename(report.protocol_name, name)))
    return saved


def describe_report(report: Report, saved: dict[str, Path] | None = None) -> str:
    saved = saved or {}
    lines = [f"protocol {report.protocol_name}   engine {report.engine}   symmetry {'on' if report.symmetry else 'off'}"
             + (f"   successors {report.successors}" if report.engine != "simulation" else ""),
             "config   " + " ".join(f"{k}={v}" for k, v in report.config.items())]
    rate = f"{report.states_per_second:,.0f} states/s" if report.seconds > 0 else ""
    lines.append(f"explored {report.states:,} distinct states, {report.transitions:,} transitions, depth "
                 f"{report.depth}, in {report.seconds:.1f} s ({rate})")
    if report.engine != "simulation":
        # Compiling (or loading the compiled code's cache) is a one-off cost, not search speed.
        lines.append(f"set-up {report.setup_seconds:.1f} s before the search (building the {report.successors} "
                     "successor backend: compiling or loading its cache)")
    if not report.complete:
        lines.append("INCOMPLETE: a state or depth limit stopped the search; nothing is proved")
    if report.bounds_hit:
        lines.append("bounded: exploration was cut by " + ", ".join(sorted(report.bounds_hit))
                     + " (a pass is a check within these bounds, not a proof)")
    else:
        lines.append("no bound cut exploration: the whole reachable state space was explored")
    lines.append("")
    for p in ALWAYS:
        r = report.results[p.name]
        if r.found:
            lines.append(f"  ✗ {p.name:28} violated in {r.length} steps: {r.finding}")
            lines.append(f"      {' '.join(str(s) for s in r.steps)}")
            if p.name in saved:
                lines.append(f"      saved to {saved[p.name]}  (hwm replay {saved[p.name]})")
        else:
            lines.append(f"  ✓ {p.name:28} holds")
    for p in SOMETIMES:
        r = report.results[p.name]
        if r.found:
            lines.append(f"  ✓ {p.name:28} witnessed in {r.length} steps: {r.finding}")
        else:
            lines.append(f"  ! {p.name:28} UNREACHED: {p.meaning} never happens, so the checks above may be vacuous")
    return "\n".join(lines)


ABBREVIATIONS = {p.name: "".join(c for c in p.name if c.isupper()) for p in ALWAYS + SOMETIMES}


def tour_table(results: list[tuple[str, Report]]) -> str:
    header = ["preset", "states", "secs"] + [ABBREVIATIONS[p.name] for p in ALWAYS] + ["witnesses"]
    rows = []
    for name, r in results:
        cells = []
        for p in ALWAYS:
            res = r.results[p.name]
            cells.append(f"✗{res.length}" if res.found else "✓")
        reached = sum(1 for p in SOMETIMES if r.results[p.name].found)
        rows.append([name, f"{r.states:,}", f"{r.seconds:.1f}"] + cells + [f"{reached}/{len(SOMETIMES)}"])
    legend = "  ".join(f"{ABBREVIATIONS[p.name]}={p.name}" for p in ALWAYS)
    return table(header, rows) + "\n\n✓ holds, ✗N violated (shortest counterexample: N steps)\n" + legend


def judge_tour(results: list[tuple[str, Report]], config: Config) -> list[str]:
    """Mismatches between what each preset did and what the catalogue expects of it."""
    problems = []
    for name, r in results:
        preset = PRESETS[name]
        if r.unreached:
            problems.append(f"{name}: sometimes witnesses unreached: {', '.join(r.unreached)}")
        expected = expected_violations(name, config)
        got = frozenset(r.violated)
        if expected is None:
            if not preset.broken and got:
                problems.append(f"{name} is expected safe but violates {', '.join(sorted(got))}")
            continue
        if got != expected:
            missing, extra = sorted(expected - got), sorted(got - expected)
            parts = []
            if missing:
                parts.append("expected to violate " + ", ".join(missing) + " but did not")
            if extra:
                parts.append("unexpectedly violates " + ", ".join(extra))
            problems.append(f"{name}: " + "; ".join(parts))
    return problems
