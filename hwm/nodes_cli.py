"""`hwm test -- CMD ...`: check any replicated-log node program that speaks Maelstrom's protocol.

hwm starts N copies of the command, is their network, clients and clock, lets Hypothesis choose
schedules of client requests, deliveries and faults, checks the client history (and, for nodes
that answer `hwm_state`, the property catalogue on the observed cluster states), shrinks a failing
schedule and saves it for `hwm replay FILE -- CMD ...`. docs/tutorial-your-node.md walks through it.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from hwm.bridge.servers import SERVERS
from hwm.params import OutputFile, ProtocolParam
from hwm.properties.protocol import resolve
from hwm.properties.rules import HookError

EXIT_OK, EXIT_FOUND, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_NOT_REPRODUCED = 3  # hwm replay of a node schedule whose saved finding did not come back


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


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _faults(value: str):
    """`--faults`: auto (None: Maelstrom's and what the node declares) or names from FAULTS, or none."""
    from hwm.bridge.maelstrom.hunt import FAULTS

    if value == "auto":
        return None
    if value == "none":
        return ()
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in FAULTS]
    if unknown:
        raise click.BadParameter(f"unknown fault {unknown[0]!r}; faults are {', '.join(FAULTS)}, or auto, or none",
                                 param_hint="--faults")
    return tuple(names)


def _print_found(report, found: dict, saved: dict, command: list[str]) -> None:
    """Each kind of finding with its own (shrunk) schedule, where it is saved and how to replay it."""
    from hwm.bridge.maelstrom.hunt import PROTOCOL

    def length(result) -> str:
        return _plural(len(result.schedule.steps), "step")

    head = f"found after {_plural(report.first_failure_at, 'schedule')}"
    if len(found) == 1:
        result = next(iter(found.values()))
        click.echo(f"{head}; " + (f"shrunk to {length(result)}:" if report.shrunk else f"not shrunk: {length(result)}:"))
    else:
        click.echo(f"{head}: {len(found)} kinds of finding, " + ("each shrunk on its own:" if report.shrunk
                                                                  else f"not shrunk: {length(report.shortest)}:"))
    for kind, result in found.items():
        if len(found) > 1 and report.shrunk:
            click.echo(f"{kind}, shrunk to {length(result)}:")
        if kind == PROTOCOL:
            click.echo(f"error: {result.protocol_error}", err=True)
        for finding in result.findings:
            if finding.name == kind:
                click.echo(f"  ✗ {finding}")
        if kind in saved and (report.shrunk or kind == next(iter(found))):
            click.echo(f"saved {saved[kind]} (the history so far included)")
            click.echo(f"replay it: hwm replay {saved[kind]} -- {' '.join(command)}")


def _saved_paths(save: Path, kinds: list[str]) -> dict[str, Path]:
    """One file per kind of finding: the first at `save`, the others beside it, named by their kind."""
    return {kind: save if k == 0 else save.with_name(f"{save.stem}-{kind}{save.suffix}") for k, kind in enumerate(kinds)}


@click.command(name="test", context_settings={"ignore_unknown_options": False})
@click.argument("command", nargs=-1, required=False)
@click.option("--server", "server", type=click.Choice(SERVERS), default=None,
              help="Test a real server, unchanged, instead of a node COMMAND: hwm starts N members on their own "
                   "loopback addresses and drives the log or lin-kv workload against them (docs/real-servers.md).")
@click.option("--loopback", "loopback", default="127.0.1", show_default=True,
              help="With --server: member i listens on 127.X.Y.i.")
@click.option("--recur", "recur", default="2/3", show_default=True,
              help="With --server: a shrink candidate fails when K of M runs show the finding (K/M).")
@click.option("--nodes", type=click.IntRange(1, 9), default=3, show_default=True, help="Copies of the node to run.")
@click.option("--workload", type=click.Choice(["kafka", "log", "lin-kv"]), default=None,
              help="kafka: Maelstrom's (send, poll, commit_offsets, list_committed_offsets); "
                   "log: hwm's (log_append, log_read); lin-kv: Maelstrom's (read, write, cas on integer keys), "
                   "each key's history checked for linearizability. [default: kafka; log with --server]")
@click.option("--clock", type=click.Choice(["wall", "virtual"]), default="wall", show_default=True,
              help="virtual: hwm sends hwm_tick and a tick step is one tick (repeatable runs; the node must "
                   "declare \"hwm_tick\" in init_ok); wall: the node keeps its own timers and a tick step waits 50 ms.")
@click.option("--schedules", type=click.IntRange(1), default=20, show_default=True,
              help="Schedules to try before declaring the node clean.")
@click.option("--steps", type=click.IntRange(1), default=30, show_default=True,
              help="Steps per schedule, at most (the first settle included).")
@click.option("--seed", type=int, default=0, show_default=True, help="Hypothesis's seed (the same seed, the same schedules).")
@click.option("--faults", "faults", default="auto", show_default=True,
              help="Faults to inject: auto (Maelstrom's partitions and pauses, plus kill and duplicate when the node "
                   "declares them in init_ok), none, or a list of partition,pause,kill,duplicate; with --server, "
                   "auto is kill,pause,partition and a list may also name power_fail and rollback.")
@click.option("--filesystem", "filesystem", default=None,
              help="With --server and power_fail: what a file's fsync keeps of its name. posix: nothing, a name is "
                   "durable once its directory is fsynced; journalled (ext4, XFS): its name and every name created, "
                   "renamed or removed before it. Recorded in the saved schedule. [default: posix]")
@click.option("--power-loss", "power_loss", default=None,
              help="With --server and power_fail: what a power failure loses of what was not fsynced. all: every "
                   "write and name; torn: a power failure may keep a prefix of each file's writes (the last "
                   "perhaps torn at a 512-byte sector) and of each directory's names, drawn from a seed the "
                   "schedule records; reordered: as torn, and such a failure may keep each file's unsynced sectors "
                   "in any order (a later one kept, an earlier one lost). [default: all]")
@click.option("--settle-time", "settle_time", type=click.FloatRange(0), default=10.0, show_default=True,
              help="Wall clock: the final phase's longest wait, in seconds, for open requests and for every "
                   "acknowledged message to be served again (Maelstrom's recovery time; a node that replicates on "
                   "a timer needs more than its period).")
@click.option("--settle-rounds", "settle_rounds", type=click.IntRange(1), default=40, show_default=True,
              help="Virtual clock: the final phase's most rounds of tick + deliver-all.")
@click.option("--require-replies", is_flag=True,
              help="A request still unanswered after the final phase is a finding (NoReply); by default it is "
                   "indeterminate, as in Maelstrom, and reported as availability.")
@click.option("--linearizable-budget", "linearizable_budget", type=click.FloatRange(0.1), default=10.0,
              show_default=True,
              help="lin-kv: seconds the linearizability search may take per schedule, all keys together; a key "
                   "not decided by then is reported undecided, never as a finding.")
@click.option("--protocol", "protocol", type=ProtocolParam(), default=None,
              help="The preset the node implements (raft, raft-noop,hwm_durable=true, zab, ...): each change a "
                   "node shows through hwm_state is stepped against the preset's model (the raft, zab and kafka systems' "
                   "presets), and the first the model cannot make is a finding (ModelStep). Recorded in the saved "
                   "schedule: hwm replay steps it too.")
@click.option("--save", "save", type=OutputFile((".json",), create_parent=True), default=None,
              help="Where to save the shrunk failing schedule [default: hwm-out/nodes/<node>-<time>.json]; "
                   "each further kind of finding beside it, as <name>-<Kind>.json.")
@click.option("--time-limit", type=click.FloatRange(1), default=600.0, show_default=True,
              help="Seconds after which no new schedule starts (shrinking gets at most 120 s more).")
@click.option("--no-shrink", is_flag=True, help="Report the first failing schedule as found.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def test(command, server, loopback, recur, nodes, workload, clock, schedules, steps, seed, faults, filesystem,
         power_loss, settle_time, settle_rounds, require_replies, linearizable_budget, protocol, save, time_limit,
         no_shrink, as_json):
    """Run N copies of the node COMMAND (after --) under hwm's network and check what clients see.

    hwm speaks Maelstrom's protocol strictly: a node gets nothing of hwm's unless its init_ok
    declares it ("hwm": ["hwm_state", "hwm_tick", "kill", "duplicate"]). Exit status: 0 when no
    schedule found anything, 1 for a finding, 2 for bad input (bad options, a node that breaks the
    protocol or does not start), 130 on Ctrl-C. Every process started is killed before hwm exits.
    """
    from hwm.bridge.maelstrom.cluster import WALL_TICK_MS, Limits
    from hwm.bridge.maelstrom.hunt import first_settle_rounds, hunt, saved_schedule
    from hwm.bridge.maelstrom.process import kill_all
    from hwm.bridge.maelstrom.validation import STEPPED_SYSTEMS, steps_against_model
    from hwm.params import file_problem

    command = list(command)
    if server is not None:
        if command:
            raise click.UsageError("give either --server or a node COMMAND, not both")
        # A real server keeps its own clocks and says nothing of a model's state.
        for given, option in ((clock != "wall", "--clock virtual"), (protocol is not None, "--protocol"),
                              (require_replies, "--require-replies")):
            if given:
                raise click.UsageError(f"{option} does not apply to --server (a real server keeps its own clocks "
                                       "and is judged by its history and its status)")
        from hwm.servers_cli import test_server
        with _sigterm_as_ctrl_c():
            sys.exit(test_server(server, workload or "log", nodes, schedules, steps, seed, faults, settle_time,
                                 linearizable_budget, save, time_limit, no_shrink, as_json, loopback, recur,
                                 _servers_interrupted, filesystem, power_loss))
    for given, option in ((filesystem, "--filesystem"), (power_loss, "--power-loss")):
        if given is not None:
            raise click.UsageError(f"{option} is for a real server's power failures (--server, power_fail in "
                                   "--faults); a node COMMAND has no disk of hwm's")
    if not command:
        raise click.UsageError(f"give the node's COMMAND after --, or --server ({', '.join(SERVERS)})")
    workload = workload or "kafka"
    chosen_faults = _faults(faults)
    if save is None:
        save = _default_save(command)
        problem = file_problem(save, create_parent=True)
        if problem:
            raise click.UsageError(f"the default --save path: {problem}; give --save FILE")
    limits = Limits(final_rounds=settle_rounds, settle_seconds=settle_time, replies_required=require_replies,
                    linearizable_seconds=linearizable_budget)

    stepped = [0]  # observed changes stepped against the model, over all schedules
    finished = [None]  # the report as of the last schedule run to its end

    def progress(report, result):
        stepped[0] += len(result.observations)
        finished[0] = report
        if not as_json and sys.stderr.isatty():  # a progress line for people, not for logs
            mark = "✗" if result.failed else "·"
            click.echo(f"\r  schedules {report.schedules:>4} {mark} operations {report.operations:>6}  "
                       f"{report.schedules / max(1e-9, time.monotonic() - began):.1f} schedules/s", nl=False, err=True)

    began = time.monotonic()
    try:
        with _sigterm_as_ctrl_c():
            report = hunt(command, workload=workload, nodes=nodes, clock=clock, schedules=schedules, steps=steps,
                          seed=seed, protocol=protocol, limits=limits, time_limit=time_limit, shrink=not no_shrink,
                          on_schedule=progress, faults=chosen_faults)
    except KeyboardInterrupt:
        kill_all()
        click.echo("\ninterrupted: every node process has been killed", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except HookError as e:  # the variant --protocol names failed while a change was stepped against its model
        kill_all()
        done = finished[0]
        click.echo(("" if as_json or not sys.stderr.isatty() else "\n")
                   + (f"{_plural(done.schedules, 'schedule')} run to the end before it, {done.operations} client "
                      f"operations, {_plural(len(done.failures), 'finding')}" if done is not None
                      else "no schedule ran to its end before it"))
        click.echo(f"error: {e}", err=True)
        sys.exit(EXIT_USAGE)
    if not as_json and sys.stderr.isatty():
        click.echo("", err=True)
    if report.start_error is not None:
        # No schedule ran: there is nothing to shrink, save or replay.
        if as_json:
            click.echo(json.dumps({"schedules": 0, "start_error": str(report.start_error)}, indent=1))
        click.echo(f"error: the node did not start: {report.start_error}", err=True)
        sys.exit(EXIT_USAGE)
    found = report.found
    paths = _saved_paths(save, list(found))
    saved, save_error = {}, None
    for kind, result in (found.items() if report.shrunk else list(found.items())[:1]):
        try:
            saved[kind] = saved_schedule(result, command, paths[kind])
        except OSError as e:
            save_error = f"error: cannot save {paths[kind]}: {e.strerror or e}"
            break
    shrunk_note = f" (+{_plural(report.shrink_runs, 'run')} while shrinking)" if report.shrink_runs else ""
    if as_json:
        click.echo(json.dumps({"schedules": report.schedules, "shrink_runs": report.shrink_runs,
                               "operations": report.operations, "succeeded": report.answered_ok,
                               "unanswered": report.unanswered, "undecided": report.undecided,
                               "stepping_undecided": report.stepping_undecided,
                               "seconds": round(report.seconds, 3), "faults": sorted(report.faults),
                               "first_failure_at": report.first_failure_at,
                               "found": {kind: {"findings": [str(f) for f in result.findings],
                                                "protocol_error": str(result.protocol_error) if result.protocol_error else None,
                                                "steps": len(result.schedule.steps),
                                                "saved": str(saved[kind]) if kind in saved else None}
                                         for kind, result in found.items()},
                               "findings": [str(f) for result in found.values() for f in result.findings],
                               "protocol_error": next((str(r.protocol_error) for r in found.values() if r.protocol_error), None),
                               "shrunk_steps": len(report.shortest.schedule.steps) if found and report.shrunk else None,
                               "model_steps": stepped[0] if steps_against_model(protocol) else None,
                               "saved": str(next(iter(saved.values()))) if saved else None}, indent=1))
    else:
        click.echo(f"{_plural(report.schedules, 'schedule')}{shrunk_note}, {report.operations} client operations in "
                   f"{report.seconds:.1f} s ({report.schedules / max(1e-9, report.seconds):.2f} schedules/s, "
                   f"{report.operations / max(1e-9, report.seconds):.1f} operations/s)")
        if protocol is not None and not steps_against_model(protocol):
            click.echo(f"--protocol {resolve(protocol)[0]}: recorded in the schedule; observed changes are stepped "
                       f"against the model for the {', '.join(STEPPED_SYSTEMS[:-1])} and {STEPPED_SYSTEMS[-1]} "
                       "systems' presets only")
        elif protocol is not None:
            click.echo(f"{stepped[0]} observed changes stepped against the model of {resolve(protocol)[0]}"
                       if stepped[0] else "--protocol: no node answered hwm_state, so no change was stepped "
                                          "against the model (a node declares \"hwm_state\" in init_ok to be stepped)")
        if report.first_settle_rounds > first_settle_rounds(protocol):
            click.echo(f"the first settle grew to {report.first_settle_rounds} rounds (at least "
                       f"{report.first_settle_rounds * WALL_TICK_MS / 1000:g} s of the nodes' own timers) while most "
                       "schedules served no operation: a node whose timers take seconds needs them to serve at all")
        if not found:
            note = " (stopped by --time-limit)" if report.out_of_time else ""
            click.echo(f"no finding in {_plural(report.schedules, 'schedule')} of up to {steps} steps{note}; "
                       f"{report.answered_ok} of the {report.operations} operations succeeded")
            if not report.answered_ok:
                click.echo("  (no operation succeeded: the node never served a client, so this says little)")
        else:
            _print_found(report, found, saved, command)
        if report.unanswered:
            click.echo(f"availability: {_plural(report.unanswered, 'request')} never answered, even after the final "
                       "phase (indeterminate, as in Maelstrom; --require-replies makes it a finding)")
        if report.undecided:
            histories = "history" if len(report.undecided) == 1 else "histories"
            click.echo(f"linearizability: {len(report.undecided)} key {histories} undecided (no finding; "
                       f"--linearizable-budget gives the search more time): {report.undecided[0]}")
        if report.stepping_undecided:
            click.echo(f"stepping: {_plural(len(report.stepping_undecided), 'schedule')} undecided at the validator's "
                       f"bound (no finding): {report.stepping_undecided[0]}")
    if save_error:
        click.echo(save_error, err=True)
        sys.exit(EXIT_USAGE)
    if not found:
        sys.exit(EXIT_OK)
    sys.exit(EXIT_USAGE if report.shortest.protocol_error else EXIT_FOUND)


def _servers_interrupted() -> int:
    from hwm.bridge.maelstrom.process import kill_all
    from hwm.bridge.servers.lifecycle import close_all
    close_all()  # the members, the run's folder and its nftables table
    kill_all()
    click.echo("\ninterrupted: every server process has been killed", err=True)
    return EXIT_INTERRUPTED


def replay_schedule(path: Path, command: list[str], brief: bool, fixed: bool = False, protocol=None,
                    filesystem: str | None = None) -> int:
    """`hwm replay FILE -- CMD ...` for an hwm-schedule/1 FILE: the exit status. 0: nothing found (and,
    with `fixed`, the saved finding is gone); 1: a finding; 2: bad input or a protocol error; 3: the
    saved finding did not come back and `fixed` was not given (a replay that proves nothing)."""
    from hwm.bridge.maelstrom.hunt import kinds, saved_kinds
    from hwm.bridge.maelstrom.process import kill_all
    from hwm.bridge.maelstrom.replay import replay
    from hwm.bridge.maelstrom.schedule import ScheduleError, load

    try:
        schedule = load(path)
    except ScheduleError as e:
        click.echo(f"error: {e}", err=True)
        return EXIT_USAGE
    if schedule.server is not None and not command:  # a real server's schedule (hwm test --server)
        from hwm.servers_cli import replay_server_schedule
        with _sigterm_as_ctrl_c():
            try:
                return replay_server_schedule(path, schedule, brief, filesystem)
            except KeyboardInterrupt:
                return _servers_interrupted()
    if filesystem is not None:
        click.echo("error: --filesystem is for a real server's schedule, replayed without a node COMMAND", err=True)
        return EXIT_USAGE
    if not command:
        click.echo(f"error: {path} is a node schedule: give the node's command after --, "
                   f"e.g. hwm replay {path} -- python3 mynode.py", err=True)
        return EXIT_USAGE
    if protocol is not None:  # stepped against this preset's model instead of the one the file names
        schedule = dataclasses.replace(schedule, protocol=protocol)
    click.echo(f"== {path} against {' '.join(command)}" + (f": {schedule.title}" if schedule.title else ""))
    stepped = f", stepped against {resolve(schedule.protocol)[0]}'s model" if schedule.protocol is not None else ""
    click.echo(f"   {schedule.nodes} nodes, {schedule.workload} workload, {schedule.clock} clock, "
               f"{_plural(len(schedule.steps), 'step')}{stepped}")
    try:
        with _sigterm_as_ctrl_c():
            result, comparison = replay(command, schedule, echo=click.echo, brief=brief)
    except KeyboardInterrupt:
        kill_all()
        click.echo("\ninterrupted: every node process has been killed", err=True)
        return EXIT_INTERRUPTED
    except HookError as e:  # the steps so far are printed; the variant's model failed at the next one
        kill_all()
        click.echo(f"error: {path}: {e}", err=True)
        return EXIT_USAGE
    except ScheduleError as e:
        click.echo(f"error: {path}: {e}", err=True)
        return EXIT_USAGE
    if result.protocol_error:
        click.echo(f"error: {result.protocol_error}", err=True)
    for finding in result.findings:
        click.echo(f"  ✗ {finding}")
    if comparison is not None:
        click.echo(f"history: {comparison.summary()}")
    before, now = saved_kinds(schedule.findings), kinds(result)
    came_back = [k for k in before if k in now]
    gone = [k for k in before if k not in now]
    if came_back:
        click.echo(f"the saved finding came back: {', '.join(came_back)}"
                   + (f" (not {', '.join(gone)})" if gone else ""))
    elif gone:
        click.echo(f"the saved finding did not come back: {', '.join(gone)}"
                   + (" (as --fixed expects)" if fixed and not now else
                      "" if now else "; with a node that is not deterministic, replay it again, or pass --fixed "
                                      "when the node is meant to be fixed"))
    if result.protocol_error:
        return EXIT_USAGE
    click.echo(f"{path}: " + (_plural(len(result.findings), "finding") if result.findings else "no finding"))
    if result.findings:
        return EXIT_FOUND
    return EXIT_NOT_REPRODUCED if gone and not fixed else EXIT_OK
