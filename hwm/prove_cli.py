"""`hwm prove`: the z3 proofs (quorum arithmetic, inductive invariant, bounded model checking).

Exit status, as `hwm check --protocol`: 0 when every proof obligation is met and no
violation was found; 1 when an obligation is not met or the protocol violates a property
(a BMC trace, a reachable counterexample to induction), whether or not the catalogue
expects that preset to be broken; 2 on bad arguments and on what the encoding cannot
check (one line); 3 when nothing failed but z3 left some obligation undecided (its
`--timeout`); 130 on Ctrl-C or SIGTERM, after printing what was decided. `--expect-catalogue`
judges against the catalogue instead: a preset it calls broken passes when its
counterexample is found.

While it works, a line on stderr says which obligation starts and how each ended, with the
run's elapsed time.
"""

from __future__ import annotations

import json
import signal
import sys
import threading

import click

from hwm.proofs.plan import (DEFAULT_BMC_DEPTH, DEFAULT_BMC_PROPERTIES, ENCODED_SYSTEMS, PARTS, Plan,
                              render, run, unencoded, violations_found)
from hwm.proofs.progress import FAILS, HOLDS, UNDECIDED, Interrupted, Ledger
from hwm.proofs.symbolic import ENCODED_PROPERTIES, checked_properties
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.params import ProtocolParam, spec_text
from hwm.properties.protocol import resolve

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNDECIDED = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as `hwm check` and shells report Ctrl-C
STOP_GRACE_S = 5.0  # after a stop, how long the proofs get to record the query z3 abandoned
HEARTBEAT_S = 15.0  # a line at least this often while one obligation runs long


@click.command("prove", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--protocol", "protocol", type=ProtocolParam(), default="raft", show_default=True,
              help="Preset (see `hwm protocols`), optionally with flags: raft,commit=any-generation.")
@click.option("--part", type=click.Choice([*PARTS, "all"]), default="all", show_default=True,
              help="quorum: the quorum arithmetic for N up to --max-n; induction: the inductive invariant "
                   "(raft, zab and kafka with generations and crashes unbounded, and partitions where the model "
                   "partitions: kafka, zab-step-down, raft's lease presets; bookkeeper with crashes and ensemble "
                   "changes unbounded); bmc: bounded model checking from the initial state "
                   "(raft, zab, kafka, bookkeeper).")
@click.option("--servers", type=click.IntRange(1, 9), default=3, show_default=True,
              help="Servers for induction and BMC.")
@click.option("--max-log", type=click.IntRange(1, 99), default=None,
              help="Log length bound L [default: 2 for induction; for BMC the tour's for the preset, else "
                   f"{Config.max_log} (the explorer's default)].")
@click.option("--max-n", type=click.IntRange(1, 64), default=15, show_default=True,
              help="Quorum proofs cover N = 1..max-n.")
@click.option("--depth", type=click.IntRange(1, 99), default=DEFAULT_BMC_DEPTH, show_default=True,
              help="BMC unrolls at most this many steps.")
@click.option("--max-generation", type=click.IntRange(1, 30), default=None,
              help="BMC generation bound (induction's generations are unbounded) "
                   f"[default: the tour's for the preset, else {Config.max_generation}; kafka: 3].")
@click.option("--max-crashes", type=click.IntRange(0, 30), default=None,
              help="BMC crash bound (induction's crashes are unbounded) "
                   f"[default: the tour's for the preset, else {Config.max_crashes}].")
@click.option("--max-partitions", type=click.IntRange(0, 30), default=None,
              help="BMC partition bound (raft, zab, kafka; induction's partitions are unbounded) [default: the "
                   "tour's for the preset: 1 for the lease presets, zab-step-down and kafka-without-controller-fencing, "
                   "else 0].")
@click.option("--property", "properties", multiple=True,
              type=click.Choice([*ENCODED_PROPERTIES, "all"]),
              help="Property for BMC (repeatable; 'all' for every always property the model has; "
                   "AckedWriteNeverLost: zab, kafka, bookkeeper; AcknowledgedWriteKept: kafka) "
                   f"[default: {', '.join(DEFAULT_BMC_PROPERTIES)}; and LeaseReadNeverStale with lease_reads].")
@click.option("--no-explorer", is_flag=True,
              help="Do not run the breadth-first explorer to compare BMC's shortest lengths.")
@click.option("--expect-catalogue", is_flag=True,
              help="Judge against the catalogue: a preset it calls broken passes (exit 0) when its "
                   "counterexample is found.")
@click.option("--timeout", type=click.FloatRange(0, min_open=True), default=None,
              help="Seconds z3 may spend on one query; an obligation whose query runs out of time is "
                   "undecided (exit 3 when nothing failed).  [default: no limit]")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object: the proofs, and every obligation's name, verdict, seconds and CTI.")
def prove(protocol, part, servers, max_log, max_n, depth, max_generation, max_crashes, max_partitions, properties,
          no_explorer, expect_catalogue, timeout, as_json):
    """Prove what the explorer cannot: quorum arithmetic for every N ≤ --max-n, an inductive invariant
    with unbounded generations, crashes and partitions (raft, zab, kafka; BookKeeper's with unbounded crashes
    and ensemble changes), and bounded model checking whose shortest violations must equal the explorer's
    (raft, zab, kafka, bookkeeper).

    Exit 0 when every obligation is met and no violation is found; 1 when one is not met or
    the protocol violates a property (with --expect-catalogue: only when an obligation is not
    met, so a broken preset passes by showing its counterexample); 2 on bad arguments or a
    protocol the encoding cannot check; 3 when nothing failed but some obligation is
    undecided (--timeout); 130 on Ctrl-C or SIGTERM, after printing what was decided.
    Progress (each obligation as it starts and ends) goes to stderr.
    """
    name, resolved = resolve(protocol)
    if resolved.system not in ENCODED_SYSTEMS:
        _refuse(f"hwm prove encodes the {', '.join(ENCODED_SYSTEMS)} models; {name} follows the {resolved.system} "
                f"rules (check it with hwm check --protocol {name})")
    why = unencoded(resolved)
    if why:
        _refuse(f"hwm prove cannot check {name}: {why} (check it with hwm check --protocol {spec_text(protocol)})")
    checked = checked_properties(resolved)
    if "all" in properties:
        properties = checked
    for prop in properties:
        if prop not in checked:
            _refuse(f"the {resolved.system} model keeps no state {prop} is about (--property takes "
                    f"{', '.join(checked)})")
    plan = Plan(name, resolved, PARTS if part == "all" else (part,), servers=servers, max_log=max_log,
                max_n=max_n, depth=depth, max_generation=max_generation, max_crashes=max_crashes,
                max_partitions=max_partitions,
                properties=tuple(properties) or None, compare_with_explorer=not no_explorer)
    try:
        build_model(resolved, plan.bmc_config)  # the model's own limits (ZAB: at most 7 servers)
    except ValueError as e:
        _refuse(f"hwm prove cannot check {name}: {e}")
    ledger = Ledger(timeout=timeout, report=lambda line: click.echo(line, err=True))
    _run_stoppably(lambda: run(plan, ledger), ledger)
    proofs = ledger.proofs
    met = all(p.ok or p.undecided for p in proofs)
    undecided = [o.name for o in ledger.undecided()]
    violated = violations_found(proofs)
    failed = not met or (violated and not expect_catalogue)
    ok = not failed and not undecided and not ledger.interrupted_by
    if as_json:
        click.echo(json.dumps({"protocol": name, "ok": ok, "obligations_met": met and not undecided,
                               "violations_found": violated, "undecided": undecided,
                               "interrupted": ledger.interrupted_by, "timeout": timeout,
                               "seconds": round(ledger.elapsed(), 3),
                               "proofs": [p.to_json() for p in proofs],
                               "obligations": [o.to_json() for o in ledger.obligations]}, indent=2,
                              ensure_ascii=False))
    else:
        if proofs:
            click.echo(render(proofs))
        if ledger.interrupted_by:
            # The part that was running has no proof yet: show its obligations one by one.
            finished = {p.part for p in proofs}
            for o in ledger.obligations:
                if o.part not in finished:
                    mark = {HOLDS: "✓", FAILS: "✗", UNDECIDED: "?"}[o.verdict]
                    click.echo(f"{mark} {o.seconds:7.2f}s  {o.name}: {o.verdict}"
                               + (f" ({o.detail})" if o.detail else ""))
        click.echo(f"{name}: {_verdict(name, ledger, proofs, met, violated, undecided, expect_catalogue)} "
                   f"({ledger.elapsed():.1f}s)")
    if ledger.interrupted_by:
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(EXIT_FAILED if failed else EXIT_UNDECIDED if undecided else EXIT_OK)


def _verdict(name: str, ledger: Ledger, proofs, met: bool, violated: list[str], undecided: list[str],
             expect_catalogue: bool) -> str:
    if ledger.interrupted_by:
        counts = {v: sum(o.verdict == v for o in ledger.obligations) for v in (HOLDS, FAILS, UNDECIDED)}
        return (f"interrupted by {ledger.interrupted_by}: {len(ledger.obligations)} obligations decided or "
                f"abandoned ({counts[HOLDS]} hold, {counts[FAILS]} fail, {counts[UNDECIDED]} undecided); "
                f"the rest not run")
    text = "all obligations met" if met else f"{sum(not (p.ok or p.undecided) for p in proofs)} obligation(s) not met"
    if undecided:
        text = (f"{len(undecided)} obligation(s) undecided within z3's timeout of {ledger.timeout:g}s"
                if ledger.timeout is not None else f"{len(undecided)} obligation(s) undecided") + (
                    "" if met else "; " + text)
    if violated:
        text += f"; {name} violates a property ({', '.join(violated)})"
        if expect_catalogue and met:
            text += ", as the catalogue expects"
    return text


def _refuse(why: str) -> None:
    """What the encoding cannot check: one line, exit 2 (no usage text: the arguments were well formed)."""
    click.echo(f"Error: {why}", err=True)
    sys.exit(EXIT_USAGE)


def _run_stoppably(work, ledger: Ledger) -> None:
    """Run `work` so that Ctrl-C or SIGTERM stops it between or during z3's queries.

    z3 holds the thread that asked it until it answers, so the proofs run in a second
    thread while this one waits for signals; a signal interrupts z3 (its query answers
    unknown) and no new obligation starts. What was decided is then in `ledger`.
    """
    if threading.current_thread() is not threading.main_thread():  # only the main thread takes signals
        try:
            work()
        except Interrupted:
            pass
        return
    failure: list[BaseException] = []

    def proofs():
        try:
            work()
        except Exception as e:
            # Stopped: z3 refuses what it is asked after the interrupt. Otherwise a real error,
            # re-raised below in the thread that reports.
            if not ledger.interrupted_by:
                failure.append(e)

    def stop(signum, frame):
        ledger.interrupt("SIGTERM" if signum == signal.SIGTERM else "Ctrl-C")

    worker = threading.Thread(target=proofs, name="hwm-prove", daemon=True)
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        worker.start()
        while worker.is_alive() and not ledger.interrupted_by:
            worker.join(0.2)
            ledger.heartbeat(HEARTBEAT_S)
        # Stopped: z3 answers at once, but the explorer (plain Python) may be mid-search.
        worker.join(STOP_GRACE_S)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if failure:
        raise failure[0]
