"""`hwm test -- CMD ...`: check any replicated-log node program that speaks Maelstrom's protocol.

hwm starts N copies of the command, is their network, clients and clock, lets Hypothesis choose
schedules of client requests, deliveries and faults, checks the client history (and, for nodes
that answer `hwm_state`, the property catalogue on the observed cluster states), shrinks a failing
schedule and saves it for `hwm replay FILE -- CMD ...`. docs/tutorial-your-node.md walks through it.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from hwm.params import ProtocolParam
from hwm.properties.protocol import resolve

EXIT_OK, EXIT_FOUND, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


@contextmanager
def _sigterm_as_ctrl_c() -> Iterator[None]:
    """While nodes run, SIGTERM (a CI job cancelled) ends the run as Ctrl-C does: every node process
    is killed. The previous handler comes back after, for a caller that runs the command in its own
    process (one left behind was inherited by forked workers, which terminate() then could not stop)."""
    def terminated(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _default_save(command: list[str]) -> Path:
    # Name it after the program: the first argument that is a file (python3 mynode.py), else the command.
    name = next((Path(a).stem for a in command if Path(a).is_file()), Path(command[0]).name)
    return Path("hwm-out") / "nodes" / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"


@click.command(name="test", context_settings={"ignore_unknown_options": False})
@click.argument("command", nargs=-1, required=True)
@click.option("--nodes", type=click.IntRange(1, 9), default=3, show_default=True, help="Copies of the node to run.")
@click.option("--workload", type=click.Choice(["kafka", "log"]), default="kafka", show_default=True,
              help="kafka: Maelstrom's (send, poll, commit_offsets, list_committed_offsets); "
                   "log: hwm's (log_append, log_read).")
@click.option("--clock", type=click.Choice(["wall", "virtual"]), default="wall", show_default=True,
              help="virtual: hwm sends hwm_tick and a tick step is one tick (repeatable runs); "
                   "wall: the node keeps its own timers and a tick step waits 50 ms.")
@click.option("--schedules", type=click.IntRange(1), default=20, show_default=True,
              help="Schedules to try before declaring the node clean.")
@click.option("--steps", type=click.IntRange(1), default=30, show_default=True, help="Rules per schedule, at most.")
@click.option("--seed", type=int, default=0, show_default=True, help="Hypothesis's seed (the same seed, the same schedules).")
@click.option("--protocol", "protocol", type=ProtocolParam(), default=None,
              help="The preset the node implements (raft, raft-noop,hwm_durable=true, zab, ...): each change a "
                   "node shows through hwm_state is stepped against the preset's model (the raft, zab and kafka systems' "
                   "presets), and the first the model cannot make is a finding (ModelStep). Recorded in the saved "
                   "schedule: hwm replay steps it too.")
@click.option("--save", "save", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to save the shrunk failing schedule [default: hwm-out/nodes/<node>-<time>.json].")
@click.option("--time-limit", type=click.FloatRange(1), default=600.0, show_default=True,
              help="Seconds after which no new schedule starts (shrinking gets at most 120 s more).")
@click.option("--no-shrink", is_flag=True, help="Report the first failing schedule as found.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def test(command, nodes, workload, clock, schedules, steps, seed, protocol, save, time_limit, no_shrink, as_json):
    """Run N copies of the node COMMAND (after --) under hwm's network and check what clients see.

    Exit status: 0 when no schedule found anything, 1 for a finding (a safety property or a
    request never answered), 2 for bad input (bad options, a node that breaks the protocol),
    130 on Ctrl-C. Every process started is killed before hwm exits.
    """
    from hwm.bridge.maelstrom.hunt import HypothesisMissing, hunt, saved_schedule
    from hwm.bridge.maelstrom.process import kill_all
    from hwm.bridge.maelstrom.validation import STEPPED_SYSTEMS, steps_against_model

    command = list(command)
    save = save or _default_save(command)
    if not save.parent.exists():
        try:
            save.parent.mkdir(parents=True)
        except OSError as e:
            raise click.UsageError(f"--save {save}: cannot create {save.parent}: {e.strerror}")
    name = protocol  # a preset name or {"preset", "flags"}: JSON either way

    stepped = [0]  # observed changes stepped against the model, over all schedules

    def progress(report, result):
        stepped[0] += len(result.observations)
        if not as_json and sys.stderr.isatty():  # a progress line for people, not for logs
            mark = "✗" if result.failed else "·"
            click.echo(f"\r  schedules {report.schedules:>4} {mark} operations {report.operations:>6}  "
                       f"{report.schedules / max(1e-9, time.monotonic() - began):.1f} schedules/s", nl=False, err=True)

    began = time.monotonic()
    try:
        with _sigterm_as_ctrl_c():
            report = hunt(command, workload=workload, nodes=nodes, clock=clock, schedules=schedules, steps=steps,
                          seed=seed, protocol=name, time_limit=time_limit, shrink=not no_shrink, on_schedule=progress)
    except HypothesisMissing as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(EXIT_USAGE)
    except KeyboardInterrupt:
        kill_all()
        click.echo("\ninterrupted: every node process has been killed", err=True)
        sys.exit(EXIT_INTERRUPTED)
    if not as_json and sys.stderr.isatty():
        click.echo("", err=True)
    shortest = report.shortest
    saved = saved_schedule(shortest, command, save) if shortest is not None else None
    if as_json:
        click.echo(json.dumps({"schedules": report.schedules, "operations": report.operations,
                               "succeeded": report.answered_ok,
                               "seconds": round(report.seconds, 3),
                               "first_failure_at": report.first_failure_at,
                               "findings": shortest.schedule.findings if shortest else [],
                               "protocol_error": str(shortest.protocol_error) if shortest and shortest.protocol_error else None,
                               "shrunk_steps": len(shortest.schedule.steps) if shortest else None,
                               "model_steps": stepped[0] if steps_against_model(protocol) else None,
                               "saved": str(saved) if saved else None}, indent=1))
    else:
        click.echo(f"{report.schedules} schedules, {report.operations} client operations in {report.seconds:.1f} s "
                   f"({report.schedules / max(1e-9, report.seconds):.2f} schedules/s, "
                   f"{report.operations / max(1e-9, report.seconds):.1f} operations/s)")
        if protocol is not None and not steps_against_model(protocol):
            click.echo(f"--protocol {resolve(protocol)[0]}: recorded in the schedule; observed changes are stepped "
                       f"against the model for the {', '.join(STEPPED_SYSTEMS[:-1])} and {STEPPED_SYSTEMS[-1]} "
                       "systems' presets only")
        elif protocol is not None:
            click.echo(f"{stepped[0]} observed changes stepped against the model of {resolve(protocol)[0]}"
                       if stepped[0] else "--protocol: no node answered hwm_state, so no change was stepped "
                                          "against the model")
        if shortest is None:
            note = " (stopped by --time-limit)" if report.out_of_time else ""
            click.echo(f"no finding in {report.schedules} schedules of up to {steps} steps{note}; "
                       f"{report.answered_ok} of the {report.operations} operations succeeded")
            if report.operations and not report.answered_ok:
                click.echo("  (no operation succeeded: the node never served a client, so this says little)")
        else:
            if shortest.protocol_error:
                click.echo(f"error: {shortest.protocol_error}", err=True)
            click.echo(f"found after {report.first_failure_at} schedules; shrunk to {len(shortest.schedule.steps)} steps:")
            for finding in shortest.findings:
                click.echo(f"  ✗ {finding}")
            click.echo(f"saved {saved} (the history so far included)")
            click.echo(f"replay it: hwm replay {saved} -- {' '.join(command)}")
    if shortest is None:
        sys.exit(EXIT_OK)
    sys.exit(EXIT_USAGE if shortest.protocol_error else EXIT_FOUND)


def replay_schedule(path: Path, command: list[str], brief: bool) -> int:
    """`hwm replay FILE -- CMD ...` for an hwm-schedule/1 FILE: the exit status (0, 1 or 2)."""
    from hwm.bridge.maelstrom.process import kill_all
    from hwm.bridge.maelstrom.replay import replay
    from hwm.bridge.maelstrom.schedule import ScheduleError, load

    try:
        schedule = load(path)
    except ScheduleError as e:
        click.echo(f"error: {e}", err=True)
        return EXIT_USAGE
    if not command:
        click.echo(f"error: {path} is a node schedule: give the node's command after --, "
                   f"e.g. hwm replay {path} -- python3 mynode.py", err=True)
        return EXIT_USAGE
    click.echo(f"== {path} against {' '.join(command)}" + (f": {schedule.title}" if schedule.title else ""))
    click.echo(f"   {schedule.nodes} nodes, {schedule.workload} workload, {schedule.clock} clock, "
               f"{len(schedule.steps)} steps")
    try:
        with _sigterm_as_ctrl_c():
            result, comparison = replay(command, schedule, echo=click.echo, brief=brief)
    except KeyboardInterrupt:
        kill_all()
        click.echo("\ninterrupted: every node process has been killed", err=True)
        return EXIT_INTERRUPTED
    except ScheduleError as e:
        click.echo(f"error: {path}: {e}", err=True)
        return EXIT_USAGE
    if result.protocol_error:
        click.echo(f"error: {result.protocol_error}", err=True)
    for finding in result.findings:
        click.echo(f"  ✗ {finding}")
    if comparison is not None:
        click.echo(f"history: {comparison.summary()}")
    if result.protocol_error:
        return EXIT_USAGE
    click.echo(f"{path}: " + (f"{len(result.findings)} findings" if result.findings else "no finding"))
    return EXIT_FOUND if result.findings else EXIT_OK
