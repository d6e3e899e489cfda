"""`hwm test --server etcd` and `hwm replay FILE` of a real server's schedule: parse, call
bridge/servers, render. docs/real-servers.md walks through it."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import click

EXIT_OK, EXIT_FOUND, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def loopback_prefix(value: str) -> str:
    """`--loopback 127.0.N`: the first three parts of the members' addresses (member i is .i)."""
    if not re.fullmatch(r"127\.\d{1,3}\.\d{1,3}", value) or any(int(p) > 255 for p in value.split(".")):
        raise click.BadParameter(f"{value!r} is not 127.X.Y (member i listens on 127.X.Y.i)", param_hint="--loopback")
    return value


def recurrence(value: str):
    from hwm.bridge.servers.hunt import Recurrence

    match = re.fullmatch(r"(\d+)/(\d+)", value)
    if not match or not 1 <= int(match[1]) <= int(match[2]) <= 20:
        raise click.BadParameter(f"{value!r} is not K/M with 1 <= K <= M <= 20", param_hint="--recur")
    return Recurrence(int(match[1]), int(match[2]))


def server_faults(value: str) -> tuple[str, ...]:
    from hwm.bridge.servers.hunt import SERVER_FAULTS, STOCK_FAULTS

    if value == "auto":  # partitions where this user can make them (root and nft), else the others
        from hwm.bridge.servers import netfilter
        why = netfilter.available()
        if why is not None:
            click.echo(f"note: no partitions: {why}", err=True)
            return tuple(f for f in STOCK_FAULTS if f != "partition")
        return STOCK_FAULTS
    if value == "none":
        return ()
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    unknown = [n for n in names if n not in SERVER_FAULTS]
    if unknown:
        raise click.BadParameter(f"unknown fault {unknown[0]!r}; a server's faults are {', '.join(SERVER_FAULTS)}, "
                                 "or auto, or none", param_hint="--faults")
    if "power_fail" in names:
        from hwm.bridge.servers import powerfs
        why = powerfs.unavailable()
        if why is not None:
            raise NotAvailable(why)
    return names


class NotAvailable(Exception):
    """A fault asked for that this machine cannot make: one line, exit 2, before anything starts."""


def power_choice(option: str, value: str | None, choices: tuple[str, ...], faults: tuple[str, ...] | None) -> str | None:
    """Why `--filesystem` or `--power-loss` VALUE is refused, in one line; None when it is not. With
    `faults` None, only the value is checked."""
    if value is None:
        return None
    if value not in choices:
        return f"{option} {value!r} is not {', '.join(choices[:-1])} or {choices[-1]}"
    if faults is not None and "power_fail" not in faults:
        return f"{option} is about power failures: add power_fail to --faults"
    return None


def test_server(name: str, workload: str, nodes: int, schedules: int, steps: int, seed: int, faults: str,
                settle_time: float, linearizable_budget: float, save: Path | None, time_limit: float, no_shrink: bool,
                as_json: bool, prefix: str, recur: str, on_interrupt, filesystem: str | None = None,
                power_loss: str | None = None) -> int:
    from hwm.bridge.servers import server_named
    from hwm.bridge.servers.adapter import ServerError
    from hwm.bridge.servers.hunt import POWER_LOSSES, hunt_server
    from hwm.bridge.servers.powerfs import FILESYSTEMS
    from hwm.bridge.servers.run import ServerLimits

    from hwm.bridge.servers.run import WORKLOADS

    if workload not in WORKLOADS:
        raise click.BadParameter(f"a server runs the {' or '.join(WORKLOADS)} workload, not {workload}",
                                 param_hint="--workload")
    power = (("--filesystem", filesystem, FILESYSTEMS), ("--power-loss", power_loss, POWER_LOSSES))
    for option, value, choices in power:  # a bad value first: it is wrong on any machine
        if problem := power_choice(option, value, choices, None):
            click.echo(f"error: {problem}", err=True)
            return EXIT_USAGE
    server = server_named(name)
    try:
        missing = server.missing()  # first: without the server, nothing else is worth saying
    except ServerError as e:
        missing = str(e)
    if missing is not None:
        click.echo(f"error: {missing}", err=True)
        return EXIT_USAGE
    try:
        chosen = server_faults(faults)
    except NotAvailable as e:
        click.echo(f"error: {e}", err=True)
        return EXIT_USAGE
    for option, value, choices in power:
        if problem := power_choice(option, value, choices, chosen):
            click.echo(f"error: {problem}", err=True)
            return EXIT_USAGE
    filesystem, power_loss = filesystem or FILESYSTEMS[0], power_loss or POWER_LOSSES[0]
    k_of_m = recurrence(recur)
    prefix = loopback_prefix(prefix)
    if save is None:
        from hwm.params import file_problem
        save = Path("hwm-out") / "servers" / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
        problem = file_problem(save, create_parent=True)
        if problem:
            raise click.UsageError(f"the default --save path: {problem}; give --save FILE")

    def progress(report, result):
        if not as_json and sys.stderr.isatty():
            mark = "✗" if result.failed else "·"
            click.echo(f"\r  schedules {report.schedules:>4} {mark} operations {report.operations:>6}", nl=False, err=True)

    try:
        report = hunt_server(server, nodes=nodes, schedules=schedules, steps=steps, seed=seed, workload=workload,
                             faults=chosen, limits=ServerLimits(settle_seconds=settle_time,
                                                                linearizable_seconds=linearizable_budget),
                             time_limit=time_limit,
                             shrink=not no_shrink, recurrence=k_of_m, prefix=prefix, on_schedule=progress,
                             filesystem=filesystem, power_loss=power_loss)
    except KeyboardInterrupt:
        return on_interrupt()
    except ServerError as e:
        click.echo(f"error: {e}", err=True)
        return EXIT_USAGE
    if not as_json and sys.stderr.isatty():
        click.echo("", err=True)
    for note in report.cleaned:
        click.echo(f"note: {note}", err=True)
    if report.start_error is not None:
        click.echo(f"error: {report.start_error}", err=True)
        return EXIT_USAGE
    found, saved = report.found, {}
    for number, (kind, result) in enumerate(found.items()):
        path = save if number == 0 else save.with_name(f"{save.stem}-{kind}{save.suffix}")
        schedule = result.schedule
        schedule.server = name
        schedule.findings = [str(f) for f in result.findings]
        schedule.history, schedule.observations = result.history, result.observations
        schedule.title = schedule.title or f"{len(schedule.steps)} steps against {name}"
        try:
            saved[kind] = str(schedule.save(path))
        except OSError as e:
            click.echo(f"error: cannot save {path}: {e.strerror or e}", err=True)
            return EXIT_USAGE
    minutes = max(1e-9, report.seconds) / 60
    if as_json:
        click.echo(json.dumps({"server": name, "workload": workload, "schedules": report.schedules, "shrink_runs": report.shrink_runs,
                               "operations": report.operations, "succeeded": report.answered_ok,
                               "indeterminate": report.unanswered, "crashes": report.crashes, "seconds": round(report.seconds, 1),
                               "faults": list(chosen), "first_failure_at": report.first_failure_at,
                               **({"filesystem": filesystem, "power_loss": power_loss} if "power_fail" in chosen
                                  else {}),
                               "local_reads": {"answered": report.local_reads, "stale": report.stale_reads},
                               "first_failure_seconds": report.first_failure_seconds and round(report.first_failure_seconds, 1),
                               "found": {kind: {"findings": [str(f) for f in result.findings if f.name == kind],
                                                "steps": len(result.schedule.steps), "saved": saved[kind],
                                                "recurred": list(report.rates[kind]) if kind in report.rates else None}
                                         for kind, result in found.items()}}, indent=1))
    else:
        click.echo(f"{report.schedules} schedules of the {workload} workload against {nodes} {name} members "
                   f"({', '.join(chosen) or 'no faults'}"
                   + (f"; power failures on a {filesystem} filesystem, "
                      + {"torn": "some writes kept, torn", "reordered": "some writes kept, torn or out of order"}.get(
                          power_loss, "all not fsynced lost")
                      if "power_fail" in chosen else "")
                   + f"), {report.operations} client operations in "
                   f"{report.seconds:.1f} s ({report.schedules / minutes:.1f} schedules/min, "
                   f"{report.operations / max(1e-9, report.seconds):.1f} operations/s)")
        if not found:
            click.echo(f"no finding in {report.schedules} schedules of up to {steps} steps; "
                       f"{report.answered_ok} of the {report.operations} operations succeeded, "
                       f"{report.unanswered} writes indeterminate")
        for kind, result in found.items():
            rate = report.rates.get(kind)
            recurred = (f"recurred in {rate[0]} of {rate[1]} runs" if rate else
                        f"did not recur in {k_of_m.k} of {k_of_m.m} runs: not shrunk" if not no_shrink else "not shrunk")
            click.echo(f"{kind} after {report.first_failure_at} schedules ({report.first_failure_seconds:.0f} s); "
                       f"{len(result.schedule.steps)} steps, {recurred}:")
            for finding in result.findings:
                if finding.name == kind:
                    click.echo(f"  ✗ {finding}")
            click.echo(f"saved {saved[kind]}\nreplay it: hwm replay {saved[kind]}")
        if report.local_reads:
            click.echo(f"local reads: {report.stale_reads} of {report.local_reads} stale "
                       f"({100 * report.stale_reads / report.local_reads:.0f}%: an offset acknowledged before the read "
                       "was not there yet)")
        if report.crashes:
            click.echo(f"availability: a member exited on its own in {len(report.crashes)} case(s) "
                       f"(the run's events say why); the first: {report.crashes[0]}")
    return EXIT_FOUND if found else EXIT_OK


def replay_server_schedule(path: Path, schedule, brief: bool, filesystem: str | None = None) -> int:
    """`hwm replay FILE` of a schedule that names its server: run it once, narrate, judge; with
    `filesystem`, its power failures on that filesystem instead of the one it names."""
    from hwm.bridge.maelstrom.hunt import kinds, saved_kinds
    from hwm.bridge.servers import SERVERS, server_named
    from hwm.bridge.servers.adapter import ServerError
    from hwm.bridge.servers.powerfs import FILESYSTEMS
    from hwm.bridge.servers.run import run_server_schedule

    if schedule.server not in SERVERS:
        click.echo(f"error: {path}: unknown server {schedule.server!r}; servers are {', '.join(SERVERS)}", err=True)
        return EXIT_USAGE
    if problem := power_choice("--filesystem", filesystem, FILESYSTEMS, None):
        click.echo(f"error: {problem}", err=True)
        return EXIT_USAGE
    schedule.filesystem = filesystem or schedule.filesystem
    power = any(step["op"] == "power_fail" for step in schedule.steps)
    click.echo(f"== {path} against {schedule.nodes} {schedule.server} members, {len(schedule.steps)} steps"
               + (f", power failures on a {schedule.filesystem or FILESYSTEMS[0]} filesystem" if power else ""))

    def narrate(number, step, run):
        if not brief:
            from hwm.bridge.maelstrom.schedule import describe
            click.echo(f"step {number}: {describe(step)}")
            for event in run.events[-1]:
                click.echo(f"    {event}")

    try:
        result = run_server_schedule(server_named(schedule.server), schedule, on_step=narrate)
    except ServerError as e:
        click.echo(f"error: {e}", err=True)
        return EXIT_USAGE
    for finding in result.findings:
        click.echo(f"  ✗ {finding}")
    before, now = saved_kinds(schedule.findings), kinds(result)
    if before:
        came_back = [k for k in before if k in now]
        click.echo(f"the saved finding came back: {', '.join(came_back)}" if came_back else
                   f"the saved finding did not come back: {', '.join(before)} (a real server is not "
                   "deterministic: replay it again)")
    return EXIT_FOUND if now else EXIT_OK
