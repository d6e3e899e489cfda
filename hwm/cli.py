"""The `hwm` command line.

click gives us subcommands, typed options with eager validation, help text and
the conventional exit status 2 for usage errors, which the CLI contract needs.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
from pathlib import Path

import click
from click.core import ParameterSource

from hwm.checker.auto_backend import BUILD_ESTIMATE
from hwm.params import OutputDir, OutputFile, ProtocolParam, directory_problem
from hwm.render import Progress
from hwm.model.state import Config
from hwm.properties.protocol import FLAG_MEANINGS, FLAG_VALUES, PRESETS, ProtocolError, _show, flags_of, model_only, resolve
from hwm.properties.trace import TraceError, load

EXIT_OK, EXIT_FOUND, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C
# The tour ran and nothing contradicts the catalogue, but its bounds are below those some expected
# violation needs: not a pass (a CI job that lowered the bounds lost those checks), not a finding.
EXIT_NOT_SHOWN = 3
EXPLORE_SAVE_DIR = Path("hwm-out/explore")  # where `hwm explore -- CMD`'s page saves paths


class _Commands(click.Group):
    """The hwm group; the running cluster's and the proofs' commands are imported only when named (or
    listed by --help), so `hwm check` starts without asyncio, the implementation's client or z3."""

    LAZY = {"node": "hwm.cluster_cli", "cluster": "hwm.cluster_cli", "put": "hwm.cluster_cli",
            "get": "hwm.cluster_cli", "status": "hwm.cluster_cli", "prove": "hwm.prove_cli",
            "controller": "hwm.cluster_cli", "validate": "hwm.validate_cli",
            "test": "hwm.nodes_cli"}

    def list_commands(self, ctx):
        return sorted({*super().list_commands(ctx), *self.LAZY})

    def get_command(self, ctx, name):
        if name not in self.commands and name in self.LAZY:
            import importlib
            self.add_command(getattr(importlib.import_module(self.LAZY[name]), name))
        return super().get_command(ctx, name)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="hwm")
def main() -> None:
    """Model checking and property testing for the High-Water Mark replication pattern."""


@main.command()
@click.option("--protocol", "protocol", type=ProtocolParam(), default=None,
              help="Preset to check (see `hwm protocols`), optionally with flags: raft,commit=any-generation. "
                   "Without it: the tour of every preset.")
@click.option("--variant", "variants", type=ProtocolParam(), multiple=True,
              help="The tour checks this variant too (file.py:Name, package.module:Name or an installed "
                   "variant's name: docs/variants.md), at its base preset's tour bounds, and expects it to hold "
                   "as a safe preset. Repeatable.")
@click.option("--servers", type=click.IntRange(1, 9), default=Config.servers, show_default=True)
@click.option("--max-generation", type=click.IntRange(1, 99), default=Config.max_generation, show_default=True)
@click.option("--max-log", type=click.IntRange(0, 99), default=Config.max_log, show_default=True)
@click.option("--max-crashes", type=click.IntRange(0, 99), default=Config.max_crashes, show_default=True)
@click.option("--network", type=click.Choice(["rpc", "async"]), default=Config.network, show_default=True)
@click.option("--channel-capacity", type=click.IntRange(1, 99), default=Config.channel_capacity, show_default=True,
              help="Messages a channel holds (async network).")
@click.option("--max-partitions", type=click.IntRange(0, 9), default=Config.max_partitions, show_default=True,
              help="Partitions of the rpc network a run may make (each cuts one server off until healed; "
                   "raft, Kafka and ZAB; not BookKeeper).")
@click.option("--no-symmetry", is_flag=True, help="Explore without symmetry reduction over server identities.")
@click.option("--engine", type=click.Choice(["local", "simulation", "spark"]), default="local", show_default=True,
              help="local: breadth-first, shortest counterexamples; simulation: random walks; spark: "
                   "breadth-first on a Spark cluster.")
@click.option("--spark-master", default="local[*]", show_default=True, help="Spark master URL (--engine spark).")
@click.option("--spark-exchange", type=click.Choice(["auto", "resident", "files", "shuffle"]), default="auto",
              show_default=True,
              help="How Spark's levels hand their states on (--engine spark): resident keeps one task per core "
                   "running from level to level, meeting through files in --spark-dir (the fastest); files runs "
                   "a stage per level, through the same files; shuffle goes through Spark's shuffle and needs no "
                   "shared directory. auto: resident on local[N], shuffle on a cluster.")
@click.option("--spark-dir", type=OutputDir(), default=None,
              help="Directory for Spark's checkpoints and exchange files (--engine spark); resident and files need "
                   "one that the driver and every executor see at the same path, e.g. an NFS mount "
                   "[default: a temporary directory on this machine].")
@click.option("--walks", type=click.IntRange(1), default=2000, show_default=True, help="Random walks (--engine simulation).")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed (--engine simulation).")
@click.option("--jobs", type=click.IntRange(1, 64), default=None,
              help="Presets checked in parallel by the tour [default: one per core].")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--save", type=OutputDir(), default=None,
              help="Save each shortest counterexample as an hwm-trace/1 file in DIR "
                   "[tour default: hwm-out/<bounds>, e.g. hwm-out/s3-g4-l1-c1-rpc].")
@click.option("--workers", type=click.IntRange(1, 1024), default=1, show_default=True,
              help="Processes that expand each level (--engine local); the result is the same for any number.")
@click.option("--liveness", is_flag=True,
              help="Also check the eventually properties under fairness on the concrete state graph "
                   "(the compiled engine's where it runs the model; either network, not with partitions; "
                   "lassos are saved with --save).")
@click.option("--liveness-max-states", type=click.IntRange(1), default=None,
              help="State limit of the liveness graph (--liveness) [default: 3,000,000 on the compiled "
                   "graph, 50,000 on the reference one].")
@click.option("--itf", "itf_too", is_flag=True,
              help="Also write each saved counterexample as an ITF trace (FILE.itf.json, for the TLA+ tools).")
@click.option("--successors", type=click.Choice(["auto", "reference", "fast"]), default="auto", show_default=True,
              help="How states are expanded (--engine local or spark): fast runs the model compiled (10-40x "
                   "faster; its first use on a machine builds it, " + BUILD_ESTIMATE + ", reported as set-up); "
                   "reference the readable model; auto the compiled one where it runs the protocol and bounds, "
                   "once built or where the run would take longer than the build, else reference, saying why. "
                   "Verdicts and lengths are the same.")
@click.option("--junit", "junit_out", type=OutputFile((".xml",)), default=None,
              help="Also write the verdicts as JUnit XML to FILE, for CI systems, failing where the exit status "
                   "does: one test case per preset and property; a violation is a failure carrying its shortest "
                   "counterexample and saved file, except in the tour, where an expected violation seen passes.")
@click.option("--progress", "progress_mode", type=click.Choice(["auto", "always", "never"]), default="auto",
              show_default=True,
              help="Progress on stderr: auto redraws one line on a terminal and writes a line every "
                   "--progress-interval off one (a CI log); always writes lines even on a terminal.")
@click.option("--progress-interval", type=click.FloatRange(0.1), default=10.0, show_default=True,
              help="Seconds between progress lines off a terminal.")
def check(**options) -> None:
    """Explore the model exhaustively and report every property's verdict.

    Exit status: 0 when every always property holds and every sometimes witness
    the bounds allow is reached (a witness the bounds rule out is reported as
    impossible and does not fail the check); the tour: when every preset behaves
    as the catalogue expects and every violation it expects was seen. 1 otherwise,
    2 on bad arguments or an output path that cannot be written, 3 (the tour) when
    the bounds are below those some expected violation needs, 130 on Ctrl-C or
    SIGTERM (after the partial report).
    """
    with _sigterm_as_ctrl_c():
        _check(**options)


def _check(protocol, servers, max_generation, max_log, max_crashes, network, channel_capacity, no_symmetry,
           engine, spark_master, walks, seed, jobs, as_json, save, workers, liveness=False,
           liveness_max_states=None, successors="auto", junit_out=None, progress_mode="auto",
           progress_interval=10.0, itf_too=False, max_partitions=0, spark_exchange="auto", spark_dir=None,
           variants=()) -> None:
    # The search's modules are imported here, not at the top: `hwm node`, started once per node of every
    # schedule `hwm test` runs, loads this module too and needs none of them.
    from hwm import check as checking
    from hwm.checker.run import (CheckRequest, choose_successors, default_jobs, long_run_warning, run,
                                 successors_refusal)
    from hwm.checker.traces import counterexample_paths, save_counterexamples, tour_directories
    from hwm.checker.verdict import CHOSEN_ALL, passed

    config = Config(servers, max_generation, max_log, max_crashes, network, channel_capacity, max_partitions)
    if variants and protocol is not None:
        raise click.UsageError("--variant adds a variant to the tour; to check one alone, give it as --protocol")
    flagged = [v for v in variants if not isinstance(v, str) or resolve(v)[0] in PRESETS]
    if flagged:
        raise click.UsageError(f"--variant {resolve(flagged[0])[0]}: the tour checks every preset already; "
                               f"--variant takes a variant's name (file.py:Name), without flags")
    symmetry = not no_symmetry
    if engine != "spark" and (spark_exchange != "auto" or spark_dir is not None):
        raise click.UsageError("--spark-exchange and --spark-dir apply to --engine spark")
    if workers > 1 and (engine != "local" or protocol is None):
        raise click.UsageError("--workers applies to one protocol on the local engine (the tour runs presets "
                               "in parallel with --jobs; Spark has its own executors)")
    if successors == "fast":
        if engine == "simulation":
            raise click.UsageError(f"--successors {successors} applies to breadth-first search (--engine local or "
                                   "spark); the simulation walks the model itself")
        reason = successors_refusal(list(PRESETS) if protocol is None else [protocol], config, successors)
        if reason:
            raise click.UsageError(f"--successors {successors}: {reason}")
    if protocol is None:
        if liveness:
            raise click.UsageError("--liveness checks one protocol: give --protocol")
        # The bounds given on the command line are the user's; every other takes each preset's tour value.
        context = click.get_current_context()
        chosen = frozenset(bound for bound in CHOSEN_ALL
                           if context.get_parameter_source(bound) not in (None, ParameterSource.DEFAULT,
                                                                          ParameterSource.DEFAULT_MAP))
        if save is None:
            directories = tour_directories(config, symmetry, chosen, variants=variants)
            for directory in sorted(set(directories.values())):
                if directory_problem(directory):  # checked now, not after the whole tour
                    raise click.UsageError(f"cannot save the tour's traces: {directory_problem(directory)}; "
                                           f"give --save DIR")
        else:
            directories = {name: save for name in (*PRESETS, *variants)}
        _tour(config, symmetry, jobs or default_jobs(), as_json, directories, engine, successors, junit_out,
              progress_mode != "never", itf_too, chosen, variants)
        return
    if liveness:
        from hwm import liveness_report
        from hwm.checker.liveness import LivenessRefused
        from hwm.checker.traces import lasso_paths, save_lassos
        reason = liveness_report.refused(protocol, config)
        if reason:
            raise click.UsageError(f"--liveness: {reason}")
    if engine == "spark":  # before the kernels' build or the search: what to install or start, exit 2
        from hwm.checker.spark_session import SparkUnavailable, preflight
        try:
            preflight(spark_master)
        except SparkUnavailable as e:
            raise click.UsageError(str(e))
    if engine != "simulation":
        backends, notes = choose_successors([protocol], config, symmetry, successors, engine,
                                                     spark_master=spark_master)
        for note in notes:
            click.echo(f"note: {note}", err=True)
        successors = next(iter(backends.values()), successors)
        note = checking.symmetry_note(protocol, config) if symmetry else None
        if note:
            click.echo(f"note: {note}", err=True)
        warning = long_run_warning([protocol], config, symmetry, backends, workers)
        if warning:
            click.echo(warning, err=True)
    progress = Progress(f"checking {protocol if isinstance(protocol, str) else resolve(protocol)[0]}",
                        mode=progress_mode, interval=progress_interval)
    request = CheckRequest(protocol, config, symmetry, engine, spark_master, walks, seed, workers,
                                    successors, None if spark_exchange == "auto" else spark_exchange,
                                    None if spark_dir is None else str(spark_dir))
    try:
        report = run(request, progress)
    except RuntimeError as e:  # engine unavailable (e.g. Spark without Java): say what to install
        from hwm.model.variant import HookError
        if isinstance(e, HookError):  # a variant's hook failed on Spark, which keeps no partial report
            click.echo(f"error: {e}", err=True)
            sys.exit(EXIT_USAGE)
        error = click.ClickException(str(e))
        if engine == "spark":
            from hwm.checker.spark_session import SparkUnavailable
            if isinstance(e, SparkUnavailable):
                error.exit_code = EXIT_USAGE  # what to install or start, before any search
        raise error
    except ValueError as e:  # the protocol's model cannot run these options (e.g. ZAB on async)
        raise click.UsageError(str(e))
    finally:
        progress.close()
    # The report names the files it is about to write and is printed first: an output path that
    # fails then costs a one-line error, not the search's result.
    saved = counterexample_paths(report, save) if save is not None else {}
    lively, lively_saved = None, {}
    if liveness:
        from hwm.model.variant import HookError
        try:
            lively = liveness_report.run(protocol, config, liveness_max_states, successors)
        except LivenessRefused as e:
            raise click.UsageError(f"--liveness: {e} (--liveness-max-states)")
        except HookError as e:  # a variant's liveness property failed: the report, then the error (exit 2)
            report.error = report.error or str(e)
        lively_saved = lasso_paths(lively, save) if lively is not None and save is not None else {}
    _, resolved = resolve(protocol)
    if as_json:
        body = checking.report_json(report, resolved)
        if lively is not None:
            body["liveness"] = lively.to_json()
        click.echo(json.dumps(body, indent=2))
    else:
        click.echo(checking.describe_report(report, saved, resolved,
                                            stopped_by="an error in the variant" if report.error else _stop()))
        if lively is not None:
            click.echo(liveness_report.describe(lively, symmetry, lively_saved))
    with _output_errors():
        if saved:
            _save_pages(save_counterexamples(report, protocol, save))
            if itf_too:
                _save_itf(saved.values())
        if lively_saved:
            _save_pages(save_lassos(lively, protocol, save).values())  # a lasso's page too: stem and cycle
        if junit_out is not None:
            from hwm.checker import junit
            junit.write(junit_out, [junit.suite(report, protocol, saved)])
    if report.error:  # a variant's hook failed during the search: the report above is what it explored
        click.echo(f"error: {report.error}", err=True)
        sys.exit(EXIT_USAGE)
    if report.interrupted:
        sys.exit(EXIT_INTERRUPTED)
    ok = passed(report, resolved, config) and (lively is None or lively.ok)
    sys.exit(EXIT_OK if ok else EXIT_FOUND)


def _tour(config: Config, symmetry: bool, jobs: int, as_json: bool, directories: dict[str, Path], engine: str,
          successors: str = "auto", junit_out: Path | None = None, progress: bool = True,
          itf_too: bool = False, chosen: frozenset[str] = frozenset(), variants: tuple[str, ...] = ()) -> None:
    from hwm import check as checking
    from hwm.checker.expectations import judge
    from hwm.checker.run import TourInterrupted, choose_successors, long_run_warning, runnable_presets, tour
    from hwm.checker.traces import counterexample_paths, save_counterexamples
    from hwm.checker.verdict import thin, tour_config, tour_protocol

    if engine != "local":
        raise click.UsageError("the tour runs on the local engine; give --protocol to use another engine")
    click.echo(f"Checking every preset at {config.describe()} (symmetry {'on' if symmetry else 'off'}, "
               f"{jobs} in parallel)...", err=True)
    # Name the presets checked at other bounds, not their whole system: raft-noop alone gets a
    # log slot more, and Kafka's presets alone a generation less (docs/systems-kafka.md).
    lowered: dict[str, list[str]] = {}
    for n in (*PRESETS, *variants):
        if tour_config(n, config, chosen) != config:
            lowered.setdefault(tour_config(n, config, chosen).describe(), []).append(resolve(n)[0])
    for bounds, names in lowered.items():
        click.echo(f"  {', '.join(names)} at {bounds}", err=True)
    presets = runnable_presets(config, variants)
    backends, notes = choose_successors(presets, config, symmetry, successors, tour=True, chosen=chosen)
    for note in notes:
        click.echo(f"  note: {note}", err=True)
    warning = long_run_warning(presets, config, symmetry, backends, parallel=jobs, tour=True, chosen=chosen)
    if warning:
        click.echo(warning, err=True)
    try:
        results = tour(config, symmetry, jobs, progress_stream=sys.stderr if progress else None,
                                successors=backends, chosen=chosen, variants=variants)
    except TourInterrupted as stop:
        # What finished is as true as a whole tour's row; what did not is named, not guessed.
        if stop.finished:
            click.echo(checking.tour_table(stop.finished, config))
        click.echo(f"\nINTERRUPTED: {_stop()} stopped the tour; {len(stop.finished)} of "
                   f"{len(stop.finished) + len(stop.unfinished)} presets finished"
                   + (f"; not checked: {', '.join(stop.unfinished)}" if stop.unfinished else ""))
        if junit_out is not None:  # what finished, as a whole tour's; the rest skipped, never passed
            from hwm.checker import junit
            with _output_errors():
                junit.write(junit_out, [junit.tour_suite(name, r) for name, r in stop.finished]
                            + [junit.not_checked(name, tour_config(name, config, chosen),
                                                 f"not checked: {_stop()} stopped the tour before this preset")
                               for name in stop.unfinished])
        sys.exit(EXIT_INTERRUPTED)
    saved = [path for name, report in results
             for path in counterexample_paths(report, directories[name]).values()]
    judgement = judge(results)
    problems = judgement.problems
    if as_json:
        click.echo(json.dumps({"config": config.to_mapping(),
                               "reports": [checking.report_json(r, tour_protocol(name)[0])
                                           for name, r in results],
                               "problems": problems, "not_shown": judgement.not_shown,
                               "expected_violations_seen": judgement.seen,
                               "expected_violations": judgement.expected}, indent=2))
    else:
        click.echo(checking.tour_table(results, config))
        bounds = sorted(set().union(*(r.bounds_hit for _, r in results)))
        if bounds:
            click.echo(f"bounded by {', '.join(bounds)}: a ✓ is a check within these bounds, not a proof")
        places = sorted({str(p.parent) for p in saved}) or sorted({str(directories[n]) for n, _ in results})
        click.echo(f"\nsaved {len(saved)} shortest counterexamples to {' and '.join(d + '/' for d in places)} "
                   f"(replay one: hwm replay {places[0]}/<file>; each has its picture beside it, <file>.html)")
        skipped = [resolve(name)[0] for name in (*PRESETS, *variants) if name not in dict(results)]
        if skipped:
            click.echo(f"not run at these options (their models take the rpc network only): {', '.join(skipped)}")
        for name, _ in results:
            if name not in PRESETS:  # a variant in the tour
                continue
            caught = PRESETS[name].caught_at
            if PRESETS[name].broken and caught.get("servers", config.servers) != config.servers:
                click.echo(f"note: {name} is caught at servers={caught['servers']}: "
                           f"hwm check --protocol {name} --servers {caught['servers']}")
        for name, report in results:
            protocol = tour_protocol(name)[0]
            reason = thin(protocol, Config.from_mapping(report.config))
            if reason:
                click.echo(f"THIN: {report.protocol_name}: {reason}; its verdicts say nothing about client entries")
            elif report.config != config.to_mapping() and protocol.noop_on_election:
                click.echo(f"note: {report.protocol_name} is checked at {Config.from_mapping(report.config).describe()}: "
                           f"its no-op takes a log slot, so client entries get the room the others get")
        if problems:
            click.echo("\nNOT AS EXPECTED:")
            for p in problems:
                click.echo(f"  {p}")
        if judgement.not_shown:
            click.echo(f"\nNOT SHOWN at these bounds ({judgement.seen} of {judgement.expected} expected violations "
                       "seen): the broken presets below pass only because the bounds are too small to reach their bugs")
            for p in judgement.not_shown:
                click.echo(f"  {p}")
        if judgement.all_seen:
            click.echo(f"\nevery preset behaves as the catalogue expects: safe presets hold, broken ones fail "
                       f"({judgement.seen} of {judgement.expected} expected violations seen)")
    with _output_errors():  # the table is out: a path that fails now costs one line, not the tour
        for name, report in results:
            written = save_counterexamples(report, name, directories[name])
            _save_pages(written)
            if itf_too:
                _save_itf(written)
        if junit_out is not None:
            from hwm.checker import junit
            junit.write(junit_out, [junit.tour_suite(name, r, counterexample_paths(r, directories[name]))
                                    for name, r in results])
    sys.exit(EXIT_FOUND if problems else EXIT_NOT_SHOWN if judgement.not_shown else EXIT_OK)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the presets as JSON.")
def protocols(as_json) -> None:
    """List the presets, their flags and the text each comes from."""
    if as_json:
        click.echo(json.dumps({name: {"flags": p.protocol.flags(), "summary": p.summary, "reference": p.reference,
                                      "broken": p.broken, "caught_at": dict(p.caught_at)}
                               for name, p in PRESETS.items()}, indent=2))
        return
    click.echo("Flags:")
    for flag, values in FLAG_VALUES.items():
        click.echo(f"  {flag:31} {' | '.join(map(_show, values)):50} {FLAG_MEANINGS[flag]}")
    click.echo("")
    for name, p in PRESETS.items():
        # A preset shows the flags of its own system: the difference from that system's safe
        # preset (raft, kafka, ...), or all of them for the seed and the safe presets.
        system = p.protocol.system
        own = {k: v for k, v in p.protocol.flags().items() if k in flags_of(system)}
        diff = {k: v for k, v in p.protocol.differences(PRESETS[system].protocol).items() if k in own}
        flags = (f"flags of {system} with " + ", ".join(f"{k}={_show(v)}" for k, v in diff.items())) \
            if diff and name != "seed" else ", ".join(f"{k}={_show(v)}" for k, v in own.items())
        if system != "raft":
            flags = f"system={system}: {flags}"
        status = "broken" if p.broken else "safe"
        click.echo(f"{name}  [{status}]\n  {p.summary}\n  flags: {flags}\n  from: {p.reference}\n")
    from hwm.model.variant import installed
    variants = installed()  # entry-point group hwm.protocols (docs/variants.md)
    if variants:
        click.echo("Installed variants (--protocol NAME):")
        for name, point in sorted(variants.items()):
            click.echo(f"  {name:31} {point.value}")


@main.command()
@click.option("--protocol", "protocol", type=ProtocolParam(), default="raft", show_default=True)
@click.option("--servers", type=click.IntRange(1, 9), default=Config.servers, show_default=True)
@click.option("--max-generation", type=click.IntRange(1, 99), default=Config.max_generation, show_default=True)
@click.option("--max-log", type=click.IntRange(0, 99), default=Config.max_log, show_default=True)
@click.option("--max-crashes", type=click.IntRange(0, 99), default=Config.max_crashes, show_default=True)
@click.option("--network", type=click.Choice(["rpc", "async"]), default=Config.network, show_default=True)
@click.option("--no-symmetry", is_flag=True)
@click.option("--max-states", type=click.IntRange(1), default=20_000, show_default=True)
@click.option("--out", type=OutputFile((".dot", ".svg", ".graphml", ".gexf", ".json")), default=None,
              help="Write the graph: .dot or .svg to look at (states as in the step table, violating "
                   "steps in red), or .graphml, .gexf, .json (node-link) for a graph viewer.")
@click.option("--liveness", is_flag=True,
              help="Also check the eventually properties on the concrete graph (its SCCs), within --max-states.")
def graph(protocol, servers, max_generation, max_log, max_crashes, network, no_symmetry, max_states, out,
          liveness=False) -> None:
    """Build the reachable state graph (networkx) of a small configuration.

    Prints its strongly connected components, deadlocks and violating states and
    steps; --out writes it as a picture (.dot, .svg) or for a graph viewer.
    """
    from hwm.model.registry import build_model
    from hwm.checker.graph import GraphTooLarge, state_graph, summary, write

    picture = out is not None and out.suffix in (".dot", ".svg")  # OutputFile checked the path already
    name, proto = resolve(protocol)
    config = Config(servers, max_generation, max_log, max_crashes, network)
    label = None
    if picture:
        from hwm.teach.graph_render import state_label as label
    if liveness:
        from hwm import liveness_report
        from hwm.checker.liveness import LivenessRefused
        reason = liveness_report.refused(protocol, config)
        if reason:
            raise click.UsageError(f"--liveness: {reason}")
    limit = max_states
    if picture:
        from hwm.teach.graph_render import MAX_DRAWN
        limit = min(max_states, MAX_DRAWN)  # stop at what can be drawn, not after the whole space
    from hwm.model.variant import HookError
    try:
        built = state_graph(build_model(proto, config), symmetry=not no_symmetry, max_states=limit,
                            label=label)
    except HookError as e:  # a variant's hook failed: no graph of part of the states
        click.echo(f"error: {e}", err=True)
        sys.exit(EXIT_USAGE)
    except GraphTooLarge as e:  # a refusal of the bounds, found within `limit` states: bad input
        if picture and limit < max_states:
            raise click.UsageError(f"--out {out}: more than {limit:,} states are too many to draw; choose smaller "
                                   "bounds, or write .graphml, .gexf or .json for a graph viewer")
        raise click.UsageError(f"{e} (--max-states)")
    for key, value in summary(built).items():
        click.echo(f"{key.replace('_', ' '):18} {value:,}")
    if out:
        try:
            with _output_errors():  # the summary is out already
                if picture:
                    from hwm.teach.graph_render import write_picture
                    write_picture(built, str(out), f"{name}: {config.describe()}")
                else:
                    write(built, str(out))
        except ValueError as e:
            raise click.ClickException(str(e))
        click.echo(f"wrote {out}")
    if liveness:
        try:
            lively = liveness_report.run(protocol, config, max_states)
        except LivenessRefused as e:
            raise click.UsageError(f"--liveness: {e} (--max-states)")
        except HookError as e:  # a variant's hook or liveness property failed
            click.echo(f"error: {e}", err=True)
            sys.exit(EXIT_USAGE)
        click.echo(liveness_report.describe(lively, not no_symmetry))


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--on", "on", type=click.Choice(["model", "impl", "both"]), default="model", show_default=True,
              help="Replay on the model, the implementation, or both.")
@click.option("--protocol", "protocol", type=ProtocolParam(), default=None,
              help="Replay under another protocol: the file's `expect` no longer applies.")
@click.option("--quiet", "-q", is_flag=True, help="Only the verdict line per file.")
@click.option("--brief", is_flag=True,
              help="The step table only: without the file's explanation and the reason for every step.")
@click.option("--html", "html_out", type=OutputFile(), default=None,
              help="Write the trace as one self-contained HTML page (slider, keys; opens offline).")
@click.option("--svg", "svg_dir", type=OutputDir(), default=None,
              help="Write one SVG picture per step into DIR (step-00.svg is the initial state).")
@click.option("--compare", "compare", type=ProtocolParam(), default=None,
              help="With --html: the same steps under this protocol too, side by side (e.g. the fix).")
@click.option("--itf", "itf_out", type=OutputFile(), default=None,
              help="Write the states the trace goes through on the model as an ITF trace (for the TLA+ tools).")
@click.option("--fixed", is_flag=True,
              help="A node schedule replayed against a node meant to be fixed: exit 0 when the saved finding does "
                   "not come back (else such a replay exits 3: the finding did not reproduce).")
@click.option("--filesystem", "filesystem", default=None,
              help="A real server's schedule: its power failures on this filesystem (posix or journalled) instead "
                   "of the one it names.")
def replay(files, on, protocol, quiet, brief, html_out, svg_dir, compare, itf_out=None, fixed=False,
           filesystem=None) -> None:
    """Replay saved counterexample traces and compare each outcome with its `expect`.

    Prints the file's explanation, the step table, then every step with why it
    changed what it changed (match indexes and quorum index behind a new HWM, the
    entry an append check compares, truncated entries, a refused vote).

    Exit status: 0 when every file's outcome equals its expect (with --protocol:
    no violation), 1 when one differs, 2 on invalid input. A node schedule (hwm replay
    FILE -- CMD): 0 nothing found, 1 a finding, 2 bad input, 3 the saved finding did not
    come back (0 with --fixed).
    """
    from hwm.bridge.maelstrom.schedule import is_schedule_file
    if is_schedule_file(files[0]):  # a node schedule: hwm replay FILE -- CMD ... (hwm/nodes_cli.py)
        from hwm.nodes_cli import replay_schedule
        given = {"--on": on != "model", "--quiet": quiet, "--html": html_out, "--svg": svg_dir,
                 "--compare": compare, "--itf": itf_out}
        unused = [name for name, value in given.items() if value]
        if unused:
            raise click.UsageError(f"{unused[0]} is for traces; {files[0]} is a node schedule (it takes --protocol, "
                                   "--brief and --fixed)")
        sys.exit(replay_schedule(files[0], [str(f) for f in files[1:]], brief, fixed, protocol, filesystem))
    if filesystem is not None:
        raise click.UsageError(f"--filesystem is for a real server's schedule; {files[0]} is a trace")
    from hwm.model.variant import HookError
    from hwm.bridge.replay import REPLAYERS  # here: the simulated cluster is not needed by `hwm check`
    from hwm.checker.replay import judge
    from hwm.teach import explain as explained
    from hwm.teach.text import step_table
    from hwm.itf_cli import load_any
    from hwm.properties.itf import ItfError

    targets = ["model", "impl"] if on == "both" else [on]
    missing = [t for t in targets if t not in REPLAYERS]
    if missing:
        raise click.UsageError(f"replay on {missing[0]} is not available in this build")
    _check_picture_options(files, html_out, svg_dir, compare)
    if itf_out is not None and len(files) != 1:
        raise click.UsageError("--itf writes one trace: give exactly one FILE")
    status = EXIT_OK
    for path in files:
        try:
            trace = load_any(path, protocol)
            if itf_out is not None:
                from hwm.itf_cli import refusal
                if refusal(protocol if protocol is not None else trace.protocol):
                    raise TraceError(refusal(protocol if protocol is not None else trace.protocol), file=str(path),
                                     field="protocol")
            for target in targets:
                unavailable = model_only(resolve(protocol if protocol is not None else trace.protocol)[1])
                if target == "impl" and unavailable and on == "both":
                    # --on impl alone is a usage error (exit 2); --on both replays what it can.
                    click.echo(f"{path} [impl]: not replayed: {unavailable}")
                    continue
                outcome = REPLAYERS[target](trace, protocol)
                code, verdict = judge(trace, outcome, protocol is not None)
                if not quiet:
                    click.echo(f"== {path} on the {target} ({outcome.protocol})" + (f": {trace.title}" if trace.title else ""))
                    if not brief and trace.explanation:
                        note = f" (The file's explanation, for {resolve(trace.protocol)[0]}.)" if protocol is not None else ""
                        click.echo(explained.wrap(trace.explanation + note) + "\n")
                    marks = {}
                    if outcome.kind == "violation":
                        marks[outcome.step] = f"{outcome.property}: {outcome.finding}"
                    click.echo(step_table(outcome.rows, marks))
                    if outcome.kind == "blocked":
                        click.echo(f"   step {outcome.step} is not enabled: {outcome.reason}")
                    if not brief:
                        click.echo("\nStep by step:\n" + explained.narrate(
                            explained.frames_of_outcome(trace, outcome, protocol)))
                click.echo(f"{path} [{target}]: {verdict}")
                status = max(status, code)
            with _output_errors():  # the replay's verdict is out already
                _write_pictures(trace, protocol, compare, targets, html_out, svg_dir)
                if itf_out is not None:
                    from hwm.itf_cli import write as write_itf
                    click.echo(f"wrote {write_itf(trace, protocol, itf_out)}")
        except (TraceError, ItfError) as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(EXIT_USAGE)
        except (ProtocolError, HookError) as e:  # HookError: a variant's rule raised on the model or the replicas
            click.echo(f"error: {path}: {e}", err=True)
            sys.exit(EXIT_USAGE)
    sys.exit(status)


def _check_picture_options(files, html_out, svg_dir, compare) -> None:
    """Refuse bad picture options before any replay (usage errors, exit 2)."""
    if (html_out or svg_dir) and len(files) != 1:
        raise click.UsageError("--html and --svg draw one trace: give exactly one FILE")
    if compare is not None and html_out is None:
        raise click.UsageError("--compare draws a second column on the --html page: give --html too")
    if compare is not None:
        try:
            own = resolve(load(files[0]).protocol)[1].system
        except (TraceError, ProtocolError, OSError):
            return  # the replay itself reports a bad file, naming its field
        other = resolve(compare)[1].system
        if other != own:
            raise click.UsageError(f"--compare {resolve(compare)[0]} is a {other} protocol; {files[0]} is a trace of "
                                   f"{own}: compare it with a {own} protocol")


_stopped_by = ["Ctrl-C"]  # what stops a search that a KeyboardInterrupt ended: Ctrl-C, or SIGTERM


def _stop() -> str:
    return _stopped_by[-1]


@contextlib.contextmanager
def _sigterm_as_ctrl_c():
    """While `hwm check` runs, SIGTERM (a CI job cancelled, `timeout`, `kill`) stops it as Ctrl-C does:
    the search ends, what it explored is reported, exit 130. The previous handler comes back after
    (one left behind would reach forked workers, which terminate() then could not stop)."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread takes signals
        yield
        return

    def terminated(signum, frame):
        _stopped_by.append("SIGTERM")
        raise KeyboardInterrupt

    _stopped_by[:] = ["Ctrl-C"]
    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _output_errors():
    """An OS error on an output path, after the report is out: one line naming the path, exit 2."""
    try:
        yield
    except OSError as e:
        where = e.filename or "an output file"
        click.echo(f"error: cannot write {where}: {e.strerror or e}", err=True)
        sys.exit(EXIT_USAGE)


def _save_itf(paths) -> None:
    """Beside each saved counterexample FILE.json, its ITF trace FILE.itf.json (raft family)."""
    from hwm.itf_cli import save_beside

    written, skipped = save_beside(list(paths))
    click.echo(f"wrote {len(written)} ITF traces" + (f"; not as ITF: {'; '.join(skipped)}" if skipped else ""),
               err=True)


def _save_pages(paths) -> None:
    """Beside each saved counterexample FILE.json, its picture FILE.html (hwm replay FILE --html)."""
    from hwm.teach.page import write_trace_page
    from hwm.properties.trace import load as load_trace

    for path in paths:
        write_trace_page(load_trace(path), path.with_suffix(".html"))


def _write_pictures(trace, protocol, compare, targets, html_out, svg_dir) -> None:
    from hwm.teach.page import trace_columns, write_svgs, write_trace_page

    if html_out is not None:
        write_trace_page(trace, html_out, protocol, compare, targets)
        click.echo(f"wrote {html_out}")
    if svg_dir is not None:
        heading, frames = trace_columns(trace, protocol, None, targets[:1])[0]
        written = write_svgs(svg_dir, frames, title=heading, max_log=trace.config.get("max_log", 0))
        click.echo(f"wrote {len(written)} pictures to {svg_dir}/")


@main.command()
@click.option("--protocol", "protocol", type=ProtocolParam(), default=None,
              help="The preset the page opens with (the page can switch); a preset with flags changed "
                   "(raft,commit=any-generation) opens the changed protocol with the preset beside it.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; the default serves this machine only.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="Port to listen on (0: any free port).")
@click.option("--verbose", is_flag=True, help="Log every request to stderr.")
@click.option("--nodes", type=click.IntRange(1, 9), default=3, show_default=True,
              help="With -- CMD: how many copies of the node program to run.")
@click.option("--save-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help=f"With -- CMD: the folder the page saves paths to [default: {EXPLORE_SAVE_DIR}].")
@click.option("--open", "schedule", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="With -- CMD: start from a saved schedule (hwm-schedule/1, e.g. what hwm test found), at its end.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def explore(protocol, host, port, verbose, nodes, save_dir, schedule, command) -> None:
    """Serve the explorer: click the model's actions, see each state drawn and explained.

    Pick a preset and bounds, click any enabled step, go back, jump to every
    shortest counterexample and witness, and play the same steps under a second
    protocol side by side, or switch a flag mid-trace and see the step where the
    fix blocks the bug. Everything is served from the installed package; Ctrl-C
    stops it.

    With `-- CMD ...` the page steps your own node program instead (the log
    workload over stdin/stdout, hwm's virtual clock): deliver or drop each
    message, crash and restart nodes, send client requests, go back to any
    step, and save the path for `hwm replay FILE -- CMD`.
    """
    from urllib.parse import quote

    from hwm.teach.explorer import make_server, offer_variant, serve_until_ctrl_c, url_of

    if command:
        from hwm.teach.node_explorer import serve_from_command_line

        # Checked here, not by the option's type: the default matters only with a node program (the
        # model's explorer saves nothing), and a read-only working directory must not refuse that.
        save_dir = EXPLORE_SAVE_DIR if save_dir is None else save_dir
        if directory_problem(save_dir):
            raise click.BadParameter(directory_problem(save_dir), param_hint="'--save-dir'")
        sys.exit(serve_from_command_line(list(command), nodes, save_dir, host, port, verbose, schedule))
    for flag, value in (("--open FILE", schedule), ("--save-dir DIR", save_dir)):
        if value is not None:
            raise click.UsageError(f"{flag} is for exploring a node program: give its command after --, "
                                   f"e.g. hwm explore {flag.split()[0]} {value} -- python3 mynode.py")

    try:
        server = make_server(host, port, verbose)
    except OSError as e:
        raise click.UsageError(f"cannot listen on {host}:{port}: {e.strerror}")
    url = url_of(server)
    head = protocol.get("preset") if isinstance(protocol, dict) else protocol
    if head is not None and head not in PRESETS:  # a variant: the page offers it beside the presets
        offer_variant(head)
    if isinstance(protocol, str):
        url += f"?protocol={quote(protocol)}"
    elif protocol is not None:
        # A preset with flags switched: the page explores the switched protocol, with the preset as
        # it was side by side.
        url += "#" + quote(json.dumps({"protocol": protocol, "steps": []}))
    serve_until_ctrl_c(server, f"hwm explorer at {url}")


# The running cluster (hwm node, cluster, put, get, status: hwm/cluster_cli.py) and the z3 proofs
# (hwm prove: hwm/prove_cli.py) join the group when named: _Commands.LAZY.

if __name__ == "__main__":
    main()
