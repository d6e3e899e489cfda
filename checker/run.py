"""One engine interface: a `CheckRequest` in, a `Report` out, whatever the engine (the local
breadth-first search, Spark, random walks); and the tour, every preset at once.

`run` is the one way to run a search: by a protocol's spec and bounds, or on a model built already
(`run(request, model=...)`: a test's planted model, a variant's), with visitors for the local engine
(the state graph, the liveness graph)."""

from __future__ import annotations

import multiprocessing
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Sequence

from hwm.checker.report import Report
from hwm.checker.verdict import tour_config
from hwm.checker.workers import worker_signals
from hwm.model.actions import Model
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.catalogue import Property
from hwm.properties.protocol import PRESETS, resolve

if TYPE_CHECKING:
    from hwm.checker.engine import Visitor



@dataclass(frozen=True)
class CheckRequest:
    protocol: str | dict  # preset name or {"preset":..., "flags":...}; with `run(model=...)`, the report's name
    config: Config | None = None  # None only with `run(model=...)`: the model's own bounds
    symmetry: bool = True
    engine: str = "local"
    spark_master: str | None = None
    walks: int = 2000
    seed: int = 0
    workers: int = 1  # processes of the local engine
    successors: str = "reference"  # the successor backend (checker.backend): reference | fast | auto
    spark_exchange: str | None = None  # Spark's exchange between levels (`spark_bfs`'s `exchange`); None: its default
    spark_dir: str | None = None  # Spark's checkpoint and exchange directory; None: a temporary one
    # The local engine's limits (a search they cut is reported incomplete) and the properties it
    # checks (None: the model's own, `model.properties`); `chunk`: states expanded per batch.
    max_states: int | None = None
    max_depth: int | None = None
    properties: Iterable[Property] | None = None
    chunk: int | None = None


def _local(model, name: str, request: CheckRequest, progress, visitors: Sequence[Visitor] = ()) -> Report:
    """The breadth-first search (`checker.engine`); Ctrl-C stops it and returns what it found so far
    (complete=False, interrupted=True)."""
    from hwm.checker.engine import CheckOptions, Search  # numpy: loaded when a search runs

    limits = {"chunk": request.chunk} if request.chunk is not None else {}
    options = CheckOptions(symmetry=request.symmetry, workers=request.workers, max_states=request.max_states,
                           max_depth=request.max_depth, progress=progress, successors=request.successors,
                           properties=None if request.properties is None else tuple(request.properties), **limits)
    return Search(model, options, visitors, name).run()


def _simulation(model, name: str, request: CheckRequest, progress) -> Report:
    from hwm.checker.simulation import simulate
    return simulate(model, name, walks=request.walks, seed=request.seed, symmetry=request.symmetry,
                    progress=progress)


def _spark(model, name: str, request: CheckRequest, progress) -> Report:
    from hwm.checker.spark_engine import spark_bfs  # PySpark is optional: imported only when asked for
    return spark_bfs(model, name, symmetry=request.symmetry, master=request.spark_master or "local[*]",
                     progress=progress, successors=request.successors, exchange=request.spark_exchange,
                     checkpoint_dir=request.spark_dir)


# Every engine takes the same arguments and returns the same `Report`.
ENGINES = {"local": _local, "simulation": _simulation, "spark": _spark}


def run(request: CheckRequest, progress=None, *, model: Model | None = None,
        visitors: Sequence[Visitor] = ()) -> Report:
    """Check one protocol with the requested engine: the model of `request.protocol` at
    `request.config`, or `model` itself (then `request.protocol` names the report). `visitors` see
    every expanded batch of the local engine (`checker.engine.Visitor`)."""
    engine = ENGINES.get(request.engine)
    if engine is None:
        raise ValueError(f"unknown engine {request.engine!r}")
    if visitors and request.engine != "local":
        raise ValueError(f"visitors: only the local engine takes visitors, not {request.engine!r}")
    local_only = (request.max_states, request.max_depth, request.properties, request.chunk)
    if request.engine != "local" and local_only != (None, None, None, None):
        raise ValueError(f"max_states, max_depth, properties and chunk: the local engine's, not {request.engine!r}'s")
    if model is None:
        if request.config is None:
            raise ValueError("config: a request names its bounds unless it brings its model")
        name, protocol = resolve(request.protocol)
        model = build_model(protocol, request.config)  # ValueError: the model cannot run this config
    else:
        name = request.protocol
    if request.successors == "auto":  # checker.auto_backend: the compiled one wherever it pays
        from dataclasses import replace
        from hwm.checker.auto_backend import choose
        request = replace(request, successors=choose({name: model}, request.symmetry, request.engine,
                                                     request.spark_master)[0][name])
    if visitors:
        return engine(model, name, request, progress, visitors)
    return engine(model, name, request, progress)


def choose_successors(protocols, config: Config, symmetry: bool, successors: str, engine: str = "local",
                      tour: bool = False, spark_master: str | None = None,
                      chosen: frozenset[str] | None = None) -> tuple[dict[str, str], list[str]]:
    """The backend each of `protocols` runs under `successors` (each at its tour bounds when `tour`, with
    the bounds the user `chosen`: `tour_config`), and for `auto` the notes on those that run the
    reference backend (`checker.auto_backend.choose`). The tour's are by spec (a variant's is not its name)."""
    models = {}
    for spec in protocols:
        name, protocol = resolve(spec)
        key = spec if tour else name
        try:
            models[key] = build_model(protocol, tour_config(key, config, chosen) if tour else config)
        except ValueError:  # the model refuses these bounds itself: its own check says so
            continue
    if successors != "auto":
        return {name: successors for name in models}, []
    from hwm.checker.auto_backend import choose
    return choose(models, symmetry, engine, spark_master)


def successors_refusal(protocols, config: Config, successors: str) -> str | None:
    """Why the successor backend cannot run one of `protocols` at `config` (checked before any search)."""
    from hwm.checker.backend import refusal

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


def long_run_warning(protocols, config: Config, symmetry: bool, backends: dict[str, str], parallel: int = 1,
                     tour: bool = False, chosen: frozenset[str] | None = None) -> str | None:
    """`checker.estimate.long_run_warning` for these protocols (each at its tour bounds when `tour`),
    with the backend each runs (`backends`, by name: `choose_successors`)."""
    from hwm.checker.estimate import long_run_warning as warning

    runs = []
    for spec in protocols:
        name, protocol = resolve(spec)
        key = spec if tour else name
        if key in backends:
            runs.append((protocol.system, tour_config(key, config, chosen) if tour else config, backends[key]))
    return warning(runs, symmetry, parallel)


def _run_quiet(request: CheckRequest) -> Report:
    return run(request)



class TourInterrupted(KeyboardInterrupt):
    """Ctrl-C during the tour, carrying the presets that finished before it (in tour order) and the
    names of those that did not, so the caller can still report what was checked."""

    def __init__(self, finished: list[tuple[str, Report]], unfinished: list[str]):
        super().__init__()
        self.finished, self.unfinished = finished, unfinished


def tour(config: Config, symmetry: bool, jobs: int, progress_stream=None,
         successors: str | dict[str, str] = "reference",
         chosen: frozenset[str] | None = None, variants: tuple[str, ...] = ()) -> list[tuple[str, Report]]:
    """Check every preset, then each of `variants` (specs: docs/variants.md), each at `tour_config` with the
    bounds the user `chosen`; they run in parallel processes (one per core
    by default). `successors`: one backend for all, "auto", or one per preset (`choose_successors`).
    `progress_stream` hears of each preset as it finishes and, on a terminal, of those still
    running, every second."""
    names = runnable_presets(config, variants)
    if successors == "auto":
        successors = choose_successors(names, config, symmetry, "auto", tour=True, chosen=chosen)[0]
    backends = successors if isinstance(successors, dict) else dict.fromkeys(names, successors)
    requests = [CheckRequest(name, tour_config(name, config, chosen), symmetry, successors=backends[name])
                for name in names]
    if "fast" in backends.values():
        from hwm.checker.auto_backend import prepare_fast
        prepare_fast()  # built (first use) or loaded once here, not by every worker at once
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
    pool = multiprocessing.get_context().Pool(jobs, initializer=worker_signals)
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


def runnable_presets(config: Config, variants: tuple[str, ...] = ()) -> list[str]:
    """The presets whose model runs under `config` (ZAB and BookKeeper take the rpc network only), then
    those of `variants` (specs) whose model does."""
    names = []
    for name, protocol in [*((n, p.protocol) for n, p in PRESETS.items()), *((v, resolve(v)[1]) for v in variants)]:
        try:
            build_model(protocol, config)
        except ValueError:
            continue
        names.append(name)
    return names


def default_jobs() -> int:
    return max(1, min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 8))
