"""A check's shortest counterexamples as saveable `hwm-trace/1` traces, and where they are saved."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from hwm.checker.report import Report
from hwm.model.state import Config
from hwm.model.variant_source import recorded_of
from hwm.properties.protocol import PRESETS
from hwm.properties.trace import Trace

if TYPE_CHECKING:  # annotations only: the liveness checker imports networkx, which `hwm node` never needs
    from hwm.checker.liveness import LivenessReport


def trace_for(report: Report, protocol_spec, prop: str) -> Trace:
    """The shortest counterexample to `prop` as a saveable hwm-trace/1 trace."""
    result = report.results[prop]
    name = report.protocol_name
    summary = PRESETS[name].summary if name in PRESETS else name
    return Trace(
        protocol=protocol_spec, config=dict(report.config), property=prop, expect="violation",
        steps=list(result.steps), extra=recorded_of(protocol_spec),  # a variant's file's digest
        title=f"{name}: {prop} violated in {result.length} steps",
        explanation=(f"{result.finding}. Found by breadth-first search ({report.engine} engine), so no "
                     f"shorter trace violates {prop} at these bounds. Protocol: {summary}."),
    )


def bounds_directory(config: Config, symmetry: bool = True) -> str:
    """A directory name for one run's traces, by its bounds: `s3-g4-l1-c1-rpc` (runs at other
    bounds save traces of the same names elsewhere)."""
    name = f"s{config.servers}-g{config.max_generation}-l{config.max_log}-c{config.max_crashes}-{config.network}"
    if config.network == "async":
        name += f"-k{config.channel_capacity}"
    if config.max_partitions:
        name += f"-p{config.max_partitions}"
    return name + ("" if symmetry else "-nosym")


def trace_filename(protocol_name: str, prop: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=+-]", "_", f"{protocol_name}.{prop}") + ".json"


def counterexample_paths(report: Report, directory: Path) -> dict[str, Path]:
    """Where `save_counterexamples` puts each violated property's trace: known before anything is
    written, so the report can name the files and be printed first."""
    return {name: directory / trace_filename(report.protocol_name, name) for name in report.violated}


def save_counterexamples(report: Report, protocol_spec, directory: Path) -> list[Path]:
    """Save each shortest counterexample; OSError (naming the path) when one cannot be written."""
    return [trace_for(report, protocol_spec, name).save(path)
            for name, path in counterexample_paths(report, directory).items()]


def tour_directories(config: Config, symmetry: bool = True, chosen: frozenset[str] | None = None,
                     root: Path = Path("hwm-out"), variants: tuple[str, ...] = ()) -> dict[str, Path]:
    """Where the tour saves each preset's traces by default: under the bounds it checks that preset at
    (`verdict.tour_config`, with the bounds the user `chosen`: Kafka's presets at a generation less,
    raft-noop at a log slot more), so a trace's directory never names bounds it was not found at."""
    from hwm.checker.verdict import tour_config

    return {name: root / bounds_directory(tour_config(name, config, chosen), symmetry) for name in (*PRESETS, *variants)}


def lasso_trace(report: LivenessReport, protocol_spec, prop: str) -> Trace:
    """The shortest lasso violating `prop` as a saveable, replayable hwm-trace/1 trace."""
    r = report.results[prop]
    name = report.protocol_name
    summary = PRESETS[name].summary if name in PRESETS else name
    return Trace(
        protocol=protocol_spec, config=dict(report.config), property=prop, expect="violation",
        steps=list(r.steps), loop=r.loop, extra=recorded_of(protocol_spec),
        title=f"{name}: {prop} violated by a lasso of {r.stem} + {r.cycle} steps",
        explanation=(f"{r.finding}. Steps {r.loop}..{len(r.steps)} repeat forever and every weakly fair action "
                     f"({', '.join(report.fairness)}) that stays enabled is taken on them"
                     + (f", as is every strongly fair one ({', '.join(report.strong_fairness)}) enabled on them"
                        if report.strong_fairness else "")
                     + ". Found on the state "
                     f"graph's strongly connected components: no lasso is shorter at these bounds. "
                     f"Protocol: {summary}."),
    )


def lasso_paths(report: LivenessReport, directory: Path) -> dict[str, Path]:
    """Where `save_lassos` puts each violated eventually property's lasso: known before anything is
    written, so the report can name the files and be printed first."""
    return {name: directory / trace_filename(report.protocol_name, name) for name in report.violated}


def save_lassos(report: LivenessReport, protocol_spec, directory: Path) -> dict[str, Path]:
    """Save each lasso; OSError (naming the path) when one cannot be written."""
    return {name: lasso_trace(report, protocol_spec, name).save(path)
            for name, path in lasso_paths(report, directory).items()}
