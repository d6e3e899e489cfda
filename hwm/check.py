"""`hwm check`: one protocol, or the tour of every preset, and the reports they print."""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import time
from dataclasses import dataclass, replace
from pathlib import Path

from hwm.render import table
from model.actions import build_model
from model.checker import Report, bfs
from model.state import Config
from properties.acked import ALL_BY_NAME
from properties.protocol import PRESETS, TOUR_BOUNDS, Protocol, resolve

# Every property any model is checked for, in catalogue order, each system's own after.
ALL_PROPERTIES = tuple(ALL_BY_NAME.values())
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
    model = build_model(protocol, request.config)  # ValueError: the model cannot run this config
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


# ------------------------------------------------- what the bounds make possible
def _competing_leader(protocol: Protocol, config: Config) -> str | None:
    """Why no leader can be elected without another leader's uncommitted entries, or None.

    That needs a second generation and, under Raft's election rule on the rpc network, a third
    server or a third generation: with two servers every quorum is both, and an uncommitted entry
    of the current generation is on the leader alone (a whole round trip would have committed
    it), so the leader refuses its vote to the other; only an older generation's entry, which a
    leader of generation 2 or more replicates without committing, is on both.
    """
    if config.max_generation < 2:
        return "max_generation >= 2"
    if config.servers < 2:
        return "servers >= 2"
    if (config.servers < 3 and config.max_generation < 3 and protocol.election == "longest-log"
            and config.network == "rpc"):
        return "servers >= 3 or max_generation >= 3 (or election=any, or the async network)"
    return None


def witness_needs(name: str, protocol: Protocol, config: Config) -> str | None:
    """What a `sometimes` witness needs that these bounds rule out, or None when it is possible.

    Conservative: a witness is called impossible only when no run within the bounds can reach
    it; an unreached witness that is possible still fails the check.
    """
    if config.max_log < 1 and name != "CrashAndRejoin":
        return "max_log >= 1"
    if name == "CrashAndRejoin":
        return "max_crashes >= 1" if config.max_crashes < 1 else None
    if name == "EntryRead":
        return None
    if name == "LeaderChangeWithUncommitted":
        return _competing_leader(protocol, config)
    if name == "UncommittedTruncated":
        # A conflicting entry from a competing leader, or a restart rule that truncates.
        competing = _competing_leader(protocol, config)
        if competing is None or (protocol.restart != "keep" and config.max_crashes >= 1):
            return None
        return competing + (" or a truncating restart rule with max_crashes >= 1" if protocol.restart == "keep"
                            else " or max_crashes >= 1")
    return None


def impossible_witnesses(report: Report, protocol: Protocol, config: Config) -> dict[str, str]:
    """Unreached witnesses the bounds rule out, with what each needs."""
    out = {}
    for name in report.unreached:
        needs = witness_needs(name, protocol, config)
        if needs is not None:
            out[name] = needs
    return out


def missed_witnesses(report: Report, protocol: Protocol, config: Config) -> list[str]:
    """Unreached witnesses that the bounds allow: the check may be vacuous, and it fails."""
    impossible = impossible_witnesses(report, protocol, config)
    return [name for name in report.unreached if name not in impossible]


def passed(report: Report, protocol: Protocol, config: Config) -> bool:
    """Every always property holds and every witness the bounds allow is reached."""
    return not report.violated and not missed_witnesses(report, protocol, config)


def thin(protocol: Protocol, config: Config) -> str | None:
    """Why a check at these bounds never writes a client entry, or None.

    Client entries are what the properties protect; a check without any is no evidence
    about them, whatever its verdicts. A new leader's no-op takes a log slot first.
    """
    needed = 2 if protocol.noop_on_election else 1
    if config.max_log < needed:
        why = " (the new leader's no-op takes the first slot)" if protocol.noop_on_election else ""
        return f"no client entry is ever written: needs max_log >= {needed}{why}"
    return None


def expected_violations(preset: str, config: Config) -> frozenset[str] | None:
    """The always properties the catalogue expects to fail, when known for these bounds."""
    p = PRESETS[preset]
    if config != DEFAULT_CONFIG:
        return None
    return p.breaks


def tour_config(preset: str, config: Config) -> Config:
    """The bounds the tour checks `preset` at. At the default bounds its system's TOUR_BOUNDS lower
    them (other bounds are the user's and are kept); a preset whose no-op fills the log gets one
    slot more, so that its client entries get the room every other preset's get."""
    protocol = PRESETS[preset].protocol
    lowered = TOUR_BOUNDS.get(protocol.system, {})
    if config == DEFAULT_CONFIG and lowered:
        config = replace(config, **{k: min(v, getattr(config, k)) for k, v in lowered.items()})
    if protocol.noop_on_election and config.max_log >= 1 and thin(protocol, config):
        return replace(config, max_log=config.max_log + 1)
    return config


class TourInterrupted(KeyboardInterrupt):
    """Ctrl-C during the tour, carrying the presets that finished before it (in tour order) and the
    names of those that did not, so the caller can still report what was checked."""

    def __init__(self, finished: list[tuple[str, Report]], unfinished: list[str]):
        super().__init__()
        self.finished, self.unfinished = finished, unfinished


def tour(config: Config, symmetry: bool, jobs: int, progress_stream=None,
         successors: str = "reference") -> list[tuple[str, Report]]:
    """Check every preset (each at `tour_config`); presets run in parallel processes (one per core
    by default). `progress_stream` hears of each preset as it finishes and, on a terminal, of
    those still running, every second."""
    requests = [CheckRequest(name, tour_config(name, config), symmetry, successors=successors)
                for name in runnable_presets(config)]
    started = time.perf_counter()
    tty = progress_stream is not None and progress_stream.isatty()

    def say(line: str, final: bool) -> None:
        if progress_stream is None or not (tty or final):
            return
        progress_stream.write(("\r" + line[:120].ljust(100)) if tty else line + "\n")
        if tty and final:
            progress_stream.write("\n")
        progress_stream.flush()

    def finished(name: str, report: Report, done: int) -> None:
        say(f"tour: {done}/{len(requests)} {name}: {report.states:,} states in {report.seconds:.1f} s", True)

    by_name: dict[str, Report] = {}

    def interrupted() -> TourInterrupted:
        return TourInterrupted([(r.protocol, by_name[r.protocol]) for r in requests if r.protocol in by_name],
                               [r.protocol for r in requests if r.protocol not in by_name])

    if jobs <= 1:
        try:
            for r in requests:
                say(f"tour: checking {r.protocol}...", False)
                report = run(r)
                if report.interrupted:  # the search caught Ctrl-C: a partial preset is not a row
                    raise KeyboardInterrupt
                by_name[r.protocol] = report
                finished(r.protocol, report, len(by_name))
        except KeyboardInterrupt:  # in a search or between two
            raise interrupted() from None
        return [(r.protocol, by_name[r.protocol]) for r in requests]
    # Workers ignore SIGINT: Ctrl-C is the parent's to handle, and terminate() stops searches mid-way
    # (a worker's own search would catch it and return a partial report as if finished).
    pool = multiprocessing.get_context().Pool(jobs, initializer=signal.signal,
                                              initargs=(signal.SIGINT, signal.SIG_IGN))
    try:
        pending = {r.protocol: pool.apply_async(_run_quiet, (r,)) for r in requests}
        while pending:
            for name in [n for n, result in pending.items() if result.ready()]:
                by_name[name] = pending.pop(name).get()
                finished(name, by_name[name], len(by_name))
            if pending:
                waiting = ", ".join(sorted(pending))
                say(f"tour: {time.perf_counter() - started:.0f} s, still checking {waiting}", False)
                next(iter(pending.values())).wait(1.0)
        pool.close()
    except KeyboardInterrupt:
        raise interrupted() from None
    finally:
        pool.terminate()
        pool.join()
    if tty:
        progress_stream.write("\r" + " " * 100 + "\r")
        progress_stream.flush()
    return [(r.protocol, by_name[r.protocol]) for r in requests]


def runnable_presets(config: Config) -> list[str]:
    """The presets whose model runs under `config` (ZAB and BookKeeper take the rpc network only)."""
    names = []
    for name, preset in PRESETS.items():
        try:
            build_model(preset.protocol, config)
        except ValueError:
            continue
        names.append(name)
    return names


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


def bounds_directory(config: Config, symmetry: bool = True) -> str:
    """A directory name for one run's traces, by its bounds: `s3-g4-l1-c1-rpc` (runs at other
    bounds save traces of the same names elsewhere)."""
    name = f"s{config.servers}-g{config.max_generation}-l{config.max_log}-c{config.max_crashes}-{config.network}"
    if config.network == "async":
        name += f"-k{config.channel_capacity}"
    return name + ("" if symmetry else "-nosym")


def trace_filename(protocol_name: str, prop: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=+-]", "_", f"{protocol_name}.{prop}") + ".json"


def save_counterexamples(report: Report, protocol_spec, directory: Path) -> list[Path]:
    saved = []
    for name in report.violated:
        saved.append(trace_for(report, protocol_spec, name).save(directory / trace_filename(report.protocol_name, name)))
    return saved


def report_json(report: Report, protocol: Protocol) -> dict:
    """The report as JSON, with the judgement `describe_report` prints."""
    config = Config.from_mapping(report.config)
    data = report.to_json()
    data["impossible_witnesses"] = impossible_witnesses(report, protocol, config)
    data["thin"] = thin(protocol, config)
    data["passed"] = passed(report, protocol, config)
    return data


def describe_report(report: Report, saved: dict[str, Path] | None = None, protocol: Protocol | None = None) -> str:
    """The closing report of one check; with `protocol`, witnesses the bounds rule out and a thin
    check are told as such."""
    saved = saved or {}
    config = Config.from_mapping(report.config)
    impossible = impossible_witnesses(report, protocol, config) if protocol is not None else {}
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
    if report.interrupted:
        lines.append("INTERRUPTED: Ctrl-C stopped the search; below is what the explored part shows, "
                     "nothing is proved")
    elif not report.complete:
        lines.append("INCOMPLETE: a state or depth limit stopped the search; nothing is proved")
    if report.bounds_hit:
        lines.append("bounded: exploration was cut by " + ", ".join(sorted(report.bounds_hit))
                     + " (a pass is a check within these bounds, not a proof)")
    else:
        lines.append("no bound cut exploration: the whole reachable state space was explored")
    if protocol is not None and thin(protocol, config):
        lines.append(f"THIN: {thin(protocol, config)}; the verdicts below say nothing about client entries")
    lines.append("")
    checked = [p for p in ALL_PROPERTIES if p.name in report.results]
    for p in checked:
        if p.kind != "always":
            continue
        r = report.results[p.name]
        if r.found:
            lines.append(f"  ✗ {p.name:28} violated in {r.length} steps: {r.finding}")
            lines.append(f"      {' '.join(str(s) for s in r.steps)}")
            if p.name in saved:
                lines.append(f"      saved to {saved[p.name]}  (hwm replay {saved[p.name]})")
        else:
            lines.append(f"  ✓ {p.name:28} holds")
    for p in checked:
        if p.kind != "sometimes":
            continue
        r = report.results[p.name]
        if r.found:
            lines.append(f"  ✓ {p.name:28} witnessed in {r.length} steps: {r.finding}")
        elif p.name in impossible:
            lines.append(f"  - {p.name:28} impossible at these bounds (needs {impossible[p.name]})")
        else:
            lines.append(f"  ! {p.name:28} UNREACHED: {p.meaning} never happens, so the checks above may be vacuous")
    return "\n".join(lines)


ABBREVIATIONS = {p.name: "".join(c for c in p.name if c.isupper()) for p in ALL_PROPERTIES}


def tour_table(results: list[tuple[str, Report]], tour: Config | None = None) -> str:
    """One row per preset; a preset checked at other bounds than the tour's (`tour`) says which."""
    # One column per always property some preset was checked for; "-" where it does not apply.
    columns = [p for p in ALL_PROPERTIES if p.kind == "always" and any(p.name in r.results for _, r in results)]
    header = ["preset", "states", "secs"] + [ABBREVIATIONS[p.name] for p in columns] + ["witnesses"]
    rows = []
    for name, r in results:
        cells = []
        for p in columns:
            res = r.results.get(p.name)
            cells.append("-" if res is None else f"✗{res.length}" if res.found else "✓")
        sometimes = [res for res in r.results.values() if res.kind == "sometimes"]
        reached = sum(1 for res in sometimes if res.found)
        config = Config.from_mapping(r.config)
        impossible = len(impossible_witnesses(r, PRESETS[name].protocol, config))
        witnesses = f"{reached}/{len(sometimes) - impossible}" + (f" ({impossible} impossible)" if impossible else "")
        notes = []
        if tour is not None and config.max_log != tour.max_log:
            notes.append(f"log ≤ {config.max_log}")
        if thin(PRESETS[name].protocol, config):
            notes.append("THIN")
        rows.append([name + (f" ({', '.join(notes)})" if notes else ""), f"{r.states:,}", f"{r.seconds:.1f}"]
                    + cells + [witnesses])
    legend = "  ".join(f"{ABBREVIATIONS[p.name]}={p.name}" for p in columns)
    return table(header, rows) + "\n\n✓ holds, ✗N violated (shortest counterexample: N steps)\n" + legend


def judge_tour(results: list[tuple[str, Report]], config: Config) -> list[str]:
    """Mismatches between what each preset did and what the catalogue expects of it."""
    problems = []
    for name, r in results:
        preset = PRESETS[name]
        missed = missed_witnesses(r, preset.protocol, Config.from_mapping(r.config))
        if missed:
            problems.append(f"{name}: sometimes witnesses unreached: {', '.join(missed)}")
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
