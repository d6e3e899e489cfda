"""`hwm validate FILE|DIR... --protocol P`: is each recorded run a behaviour of P's model?

Exit 0 when every run is valid, 1 when one is not (its first unexplained event is printed),
2 on bad input (a malformed line, an unknown field, an undeclared server), before any
validation starts, 130 on Ctrl-C.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from hwm.checker.recorded import recorded_run_validator
from hwm.params import OutputFile, ProtocolParam
from hwm.model.state import Config
from hwm.properties.events import EventError, load_runs
from hwm.properties.protocol import ProtocolError, resolve

EXIT_OK, EXIT_FOUND, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
RUN_SUFFIXES = (".jsonl", ".events")


def run_files(paths: tuple[Path, ...]) -> list[Path]:
    """The recorded runs named: files as given, directories by their *.jsonl and *.events files."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in RUN_SUFFIXES)
            if not found:
                raise EventError("no recorded runs (*.jsonl, *.events) in this directory", file=str(path))
            files += found
        else:
            files.append(path)
    return files


def validate_files(files: list[Path], protocol_spec, depth: int):
    """(file, header, verdict) per run; EventError on the first bad file, before any validation."""
    runs = load_runs(files)
    out = []
    for path, header, events in runs:
        spec = protocol_spec if protocol_spec is not None else header.protocol
        if spec is None:
            raise EventError("no protocol: name one with --protocol or in the header's protocol field",
                             file=str(path), line=1, field="protocol")
        try:
            _, protocol = resolve(spec)
        except ProtocolError as e:
            raise EventError(str(e), file=str(path), line=1, field="protocol") from None
        out.append((path, header, recorded_run_validator(protocol, header, depth=depth).validate(events)))
    return out


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--protocol", "protocol", type=ProtocolParam(), default=None,
              help="The protocol whose model judges the runs (default: each header's protocol).")
@click.option("--depth", type=click.IntRange(1, 6), default=2, show_default=True,
              help="The most model steps that may explain one event.")
@click.option("--engine", type=click.Choice(["local", "spark"]), default="local", show_default=True,
              help="spark: validate the runs in parallel on Spark and print the coverage table.")
@click.option("--spark-master", default="local[*]", show_default=True, help="Spark master URL (--engine spark).")
@click.option("--coverage", "with_coverage", is_flag=True,
              help="Print the model coverage table: which reachable states (at the bounds below) the runs visit.")
@click.option("--max-generation", type=click.IntRange(1, 99), default=Config.max_generation, show_default=True,
              help="Coverage bound.")
@click.option("--max-log", type=click.IntRange(0, 99), default=Config.max_log, show_default=True,
              help="Coverage bound.")
@click.option("--max-crashes", type=click.IntRange(0, 99), default=Config.max_crashes, show_default=True,
              help="Coverage bound.")
@click.option("--table", "table_out", type=OutputFile((".json",)), default=None,
              help="Write the table (per run verdict, coverage, never-reached states) as JSON.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run instead of text.")
def validate(paths, protocol, depth, engine, spark_master, with_coverage, max_generation, max_log, max_crashes,
             table_out, as_json) -> None:
    """Validate recorded runs (hwm-events/1 JSON lines) against a protocol's model."""
    from hwm.model.variant_code import VariantError
    from hwm.properties.rules import HookError

    try:
        if engine == "spark" or with_coverage or table_out is not None:
            bounds = {"max_generation": max_generation, "max_log": max_log, "max_crashes": max_crashes}
            _coverage(run_files(paths), protocol, depth, engine, spark_master, bounds, table_out)
        results = validate_files(run_files(paths), protocol, depth)
    except (EventError, HookError, VariantError) as e:  # a variant's hook that failed, or its file on an executor
        click.echo(f"hwm validate: {e}", err=True)
        sys.exit(EXIT_USAGE)
    except KeyboardInterrupt:
        click.echo("hwm validate: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    bad = 0
    for path, header, verdict in results:
        if not verdict.valid:
            bad += 1
        if as_json:
            click.echo(json.dumps(verdict_json(path, verdict)))
        elif verdict.valid:
            click.echo(f"{path}: valid: {verdict.events} events, {verdict.candidates} model state"
                       f"{'s' if verdict.candidates != 1 else ''} consistent with the run")
        else:
            click.echo(verdict.discrepancy.describe(str(path)))
        if not as_json and verdict.capped:
            click.echo(f"  (bounded: after {verdict.capped} events more explanations than the validator keeps "
                       "were open; some were dropped)")
    if not as_json and len(results) > 1:
        click.echo(f"{len(results) - bad} of {len(results)} runs valid")
    sys.exit(EXIT_FOUND if bad else EXIT_OK)


def _coverage(files, protocol_spec, depth, engine, spark_master, bounds, table_out) -> None:
    """Validate on `engine` and print the coverage table; exits as `hwm validate` does."""
    from hwm.checker.validate_spark import coverage_table
    from hwm.properties.events import dumps

    runs = load_runs(files)
    specs = {json.dumps(protocol_spec if protocol_spec is not None else h.protocol, sort_keys=True) for _, h, _ in runs}
    servers = {len(h.servers) for _, h, _ in runs}
    if len(specs) != 1 or None in (json.loads(s) for s in specs):
        raise EventError("the coverage table judges every run under one protocol: give --protocol")
    if len(servers) != 1:
        raise EventError("the coverage table compares runs of one cluster size; these declare "
                         + ", ".join(map(str, sorted(servers))) + " servers")
    spec = json.loads(specs.pop())
    try:
        _, protocol = resolve(spec)
    except ProtocolError as e:
        raise EventError(str(e), field="protocol") from None
    bounds = dict(bounds, servers=servers.pop())
    spark = None
    if engine == "spark":
        from hwm.checker.spark_session import SparkUnavailable, get_spark
        try:
            spark = get_spark(spark_master)
        except SparkUnavailable as e:
            error = click.ClickException(str(e))
            error.exit_code = EXIT_USAGE  # what to install or start, before any run is read
            raise error
    texts = [(str(name), dumps(header, events)) for name, header, events in runs]
    result = coverage_table(texts, spec, bounds, depth=depth, engine=engine, spark=spark)
    click.echo(result.describe())
    if table_out is not None:
        table_out.write_text(json.dumps(result.to_json(), indent=1) + "\n")
        click.echo(f"wrote {table_out}")
    sys.exit(EXIT_OK if all(r["valid"] for r in result.runs) else EXIT_FOUND)


def verdict_json(path: Path, verdict) -> dict:
    out = {"run": str(path), "valid": verdict.valid, "events": verdict.events}
    d = verdict.discrepancy
    if d is not None:
        out.update({"event": d.number, "line": d.event.line if d.event is not None else None, "reason": d.reason, "nearest": d.nearest,
                    "properties": sorted(d.properties)})
    return out
