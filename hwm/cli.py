"""The `hwm` command line.

click gives us subcommands, typed options with eager validation, help text and
the conventional exit status 2 for usage errors, which the CLI contract needs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from hwm import check as checking
from hwm.params import OutputDir, OutputFile, ProtocolParam, directory_problem
from hwm.render import Progress, step_table
from hwm.replay import REPLAYERS, judge
from model.state import Config
from properties.protocol import FLAG_MEANINGS, FLAG_VALUES, PRESETS, ProtocolError, RAFT, _show, resolve
from properties.trace import TraceError, load

EXIT_OK, EXIT_FOUND, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="hwm")
def main() -> None:
    """Model checking and property testing for the High-Water Mark replication pattern."""


@main.command()
@click.option("--protocol", "protocol", type=ProtocolParam(), default=None,
              help="Preset to check (see `hwm protocols`), optionally with flags: raft,commit=any-generation. "
                   "Without it: the tour of every preset.")
@click.option("--servers", type=click.IntRange(1, 9), default=Config.servers, show_default=True)
@click.option("--max-generation", type=click.IntRange(1, 99), default=Config.max_generation, show_default=True)
@click.option("--max-log", type=click.IntRange(0, 99), default=Config.max_log, show_default=True)
@click.option("--max-crashes", type=click.IntRange(0, 99), default=Config.max_crashes, show_default=True)
@click.option("--network", type=click.Choice(["rpc", "async"]), default=Config.network, show_default=True)
@click.option("--channel-capacity", type=click.IntRange(1, 99), default=Config.channel_capacity, show_default=True,
              help="Messages a channel holds (async network).")
@click.option("--no-symmetry", is_flag=True, help="Explore without symmetry reduction over server identities.")
@click.option("--engine", type=click.Choice(["local", "simulation", "spark"]), default="local", show_default=True,
              help="local: breadth-first, shortest counterexamples; simulation: random walks; spark: "
                   "breadth-first on a Spark cluster.")
@click.option("--spark-master", default="local[*]", show_default=True, help="Spark master URL (--engine spark).")
@click.option("--walks", type=click.IntRange(1), default=2000, show_default=True, help="Random walks (--engine simulation).")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed (--engine simulation).")
@click.option("--jobs", type=click.IntRange(1, 64), default=None,
              help="Presets checked in parallel by the tour [default: one per core].")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--save", type=OutputDir(), default=None,
              help="Save each shortest counterexample as an hwm-trace/1 file in DIR "
                   "[tour default: hwm-out/<bounds>, e.g. hwm-out/s3-g4-l1-c1-rpc].")
def check(protocol, servers, max_generation, max_log, max_crashes, network, channel_capacity, no_symmetry,
          engine, spark_master, walks, seed, jobs, as_json, save) -> None:
    """Explore the model exhaustively and report every property's verdict.

    Exit status: 0 when every always property holds and every sometimes witness
    the bounds allow is reached (a witness the bounds rule out is reported as
    impossible and does not fail the check); the tour: when every preset behaves
    as the catalogue expects. 1 otherwise, 2 on bad arguments.
    """
    config = Config(servers, max_generation, max_log, max_crashes, network, channel_capacity)
    symmetry = not no_symmetry
    if protocol is None:
        if save is None:
            save = Path("hwm-out") / checking.bounds_directory(config, symmetry)
            if directory_problem(save):  # checked now, not after the whole tour
                raise click.UsageError(f"cannot save the tour's traces: {directory_problem(save)}; "
                                       f"give --save DIR")
        _tour(config, symmetry, jobs or checking.default_jobs(), as_json, save, engine)
        return
    progress = Progress(f"checking {protocol if isinstance(protocol, str) else resolve(protocol)[0]}")
    request = checking.CheckRequest(protocol, config, symmetry, engine, spark_master, walks, seed)
    try:
        report = checking.run(request, progress)
    except RuntimeError as e:  # engine unavailable (e.g. Spark without Java): say what to install
        raise click.ClickException(str(e))
    finally:
        progress.close()
    saved = {}
    if save is not None:
        for path in checking.save_counterexamples(report, protocol, save):
            saved[path.name.split(".")[-2]] = path
    _, resolved = resolve(protocol)
    if as_json:
        click.echo(json.dumps(checking.report_json(report, resolved), indent=2))
    else:
        click.echo(checking.describe_report(report, saved, resolved))
    if report.interrupted:
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(EXIT_OK if checking.passed(report, resolved, config) else EXIT_FOUND)


def _tour(config: Config, symmetry: bool, jobs: int, as_json: bool, save: Path, engine: str) -> None:
    if engine != "local":
        raise click.UsageError("the tour runs on the local engine; give --protocol to use another engine")
    click.echo(f"Checking every preset at {config.describe()} (symmetry {'on' if symmetry else 'off'}, "
               f"{jobs} in parallel)...", err=True)
    try:
        results = checking.tour(config, symmetry, jobs, progress_stream=sys.stderr)
    except KeyboardInterrupt:
        click.echo("\nINTERRUPTED: the tour was stopped; presets finished so far are listed above", err=True)
        sys.exit(EXIT_INTERRUPTED)
    saved = []
    for name, report in results:
        saved += checking.save_counterexamples(report, name, save)
    problems = checking.judge_tour(results, config)
    if as_json:
        click.echo(json.dumps({"config": config.to_mapping(),
                               "reports": [checking.report_json(r, PRESETS[name].protocol) for name, r in results],
                               "problems": problems}, indent=2))
    else:
        click.echo(checking.tour_table(results, config))
        bounds = sorted(set().union(*(r.bounds_hit for _, r in results)))
        if bounds:
            click.echo(f"bounded by {', '.join(bounds)}: a ✓ is a check within these bounds, not a proof")
        click.echo(f"\nsaved {len(saved)} shortest counterexamples to {save}/ (replay one: hwm replay {save}/<file>)")
        for name, _ in results:
            caught = PRESETS[name].caught_at
            if PRESETS[name].broken and caught.get("servers", config.servers) != config.servers:
                click.echo(f"note: {name} is caught at servers={caught['servers']}: "
                           f"hwm check --protocol {name} --servers {caught['servers']}")
        for name, report in results:
            reason = checking.thin(PRESETS[name].protocol, Config.from_mapping(report.config))
            if reason:
                click.echo(f"THIN: {name}: {reason}; its verdicts say nothing about client entries")
            elif report.config != config.to_mapping():
                click.echo(f"note: {name} is checked at {Config.from_mapping(report.config).describe()}: "
                           f"its no-op takes a log slot, so client entries get the room the others get")
        if problems:
            click.echo("\nNOT AS EXPECTED:")
            for p in problems:
                click.echo(f"  {p}")
        else:
            click.echo("\nevery preset behaves as the catalogue expects: safe presets hold, broken ones fail")
    sys.exit(EXIT_FOUND if problems else EXIT_OK)


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
        click.echo(f"  {flag:17} {' | '.join(map(_show, values)):50} {FLAG_MEANINGS[flag]}")
    click.echo("")
    for name, p in PRESETS.items():
        diff = p.protocol.differences(RAFT)
        flags = ("flags of raft with " + ", ".join(f"{k}={_show(v)}" for k, v in diff.items())) if diff and name != "seed" \
            else ", ".join(f"{k}={_show(v)}" for k, v in p.protocol.flags().items())
        status = "broken" if p.broken else "safe"
        click.echo(f"{name}  [{status}]\n  {p.summary}\n  flags: {flags}\n  from: {p.reference}\n")


@main.command()
@click.option("--protocol", "protocol", type=ProtocolParam(), default="raft", show_default=True)
@click.option("--servers", type=click.IntRange(1, 9), default=Config.servers, show_default=True)
@click.option("--max-generation", type=click.IntRange(1, 99), default=Config.max_generation, show_default=True)
@click.option("--max-log", type=click.IntRange(0, 99), default=Config.max_log, show_default=True)
@click.option("--max-crashes", type=click.IntRange(0, 99), default=Config.max_crashes, show_default=True)
@click.option("--network", type=click.Choice(["rpc", "async"]), default=Config.network, show_default=True)
@click.option("--no-symmetry", is_flag=True)
@click.option("--max-states", type=click.IntRange(1), default=20_000, show_default=True)
@click.option("--out", type=OutputFile((".graphml", ".gexf", ".json")), default=None,
              help="Write the graph: .graphml, .gexf or .json (node-link).")
def graph(protocol, servers, max_generation, max_log, max_crashes, network, no_symmetry, max_states, out) -> None:
    """Build the reachable state graph (networkx) of a small configuration.

    Prints its strongly connected components, deadlocks and violating states and
    steps; --out writes it for a graph viewer (nodes carry the state as text).
    """
    from model.actions import build_model
    from model.graph import GraphTooLarge, state_graph, summary, write

    name, proto = resolve(protocol)
    config = Config(servers, max_generation, max_log, max_crashes, network)
    try:
        built = state_graph(build_model(proto, config), symmetry=not no_symmetry, max_states=max_states)
    except GraphTooLarge as e:
        raise click.ClickException(str(e))
    for key, value in summary(built).items():
        click.echo(f"{key.replace('_', ' '):18} {value:,}")
    if out:
        write(built, str(out))
        click.echo(f"wrote {out}")


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--on", "on", type=click.Choice(["model", "impl", "both"]), default="model", show_default=True,
              help="Replay on the model, the implementation, or both.")
@click.option("--protocol", "protocol", type=ProtocolParam(), default=None,
              help="Replay under another protocol: the file's `expect` no longer applies.")
@click.option("--quiet", "-q", is_flag=True, help="Only the verdict line per file.")
def replay(files, on, protocol, quiet) -> None:
    """Replay saved counterexample traces and compare each outcome with its `expect`.

    Exit status: 0 when every file's outcome equals its expect (with --protocol:
    no violation), 1 when one differs, 2 on invalid input.
    """
    targets = ["model", "impl"] if on == "both" else [on]
    missing = [t for t in targets if t not in REPLAYERS]
    if missing:
        raise click.UsageError(f"replay on {missing[0]} is not available in this build")
    status = EXIT_OK
    for path in files:
        try:
            trace = load(path)
            for target in targets:
                outcome = REPLAYERS[target](trace, protocol)
                code, verdict = judge(trace, outcome, protocol is not None)
                if not quiet:
                    click.echo(f"== {path} on the {target} ({outcome.protocol})" + (f": {trace.title}" if trace.title else ""))
                    marks = {}
                    if outcome.kind == "violation":
                        marks[outcome.step] = f"{outcome.property}: {outcome.finding}"
                    click.echo(step_table(outcome.rows, marks))
                    if outcome.kind == "blocked":
                        click.echo(f"   step {outcome.step} is not enabled: {outcome.reason}")
                click.echo(f"{path} [{target}]: {verdict}")
                status = max(status, code)
        except TraceError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(EXIT_USAGE)
        except ProtocolError as e:
            click.echo(f"error: {path}: {e}", err=True)
            sys.exit(EXIT_USAGE)
    sys.exit(status)


# The running cluster: hwm node, cluster, put, get, status (hwm/cluster_cli.py).
from hwm.cluster_cli import COMMANDS as _CLUSTER_COMMANDS  # noqa: E402

for _command in _CLUSTER_COMMANDS:
    main.add_command(_command)

# z3 proofs: hwm prove (hwm/prove_cli.py).
from hwm.prove_cli import prove as _prove  # noqa: E402

main.add_command(_prove)

if __name__ == "__main__":
    main()
