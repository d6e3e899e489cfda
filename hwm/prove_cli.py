"""`hwm prove`: the z3 proofs (quorum arithmetic, inductive invariant, bounded model checking).

Exit status, as `hwm check --protocol`: 0 when every proof obligation is met and no
violation was found; 1 when an obligation is not met or the protocol violates a property
(a BMC trace, a reachable counterexample to induction), whether or not the catalogue
expects that preset to be broken; 2 on bad arguments. `--expect-catalogue` judges
against the catalogue instead: a preset it calls broken passes when its counterexample
is found.
"""

from __future__ import annotations

import json
import sys

import click

from hwm.proofs.plan import DEFAULT_BMC_DEPTH, DEFAULT_BMC_PROPERTIES, PARTS, Plan, render, run, unencoded, violations_found
from hwm.proofs.symbolic import ALWAYS_CHECKED
from hwm.model.state import Config
from hwm.params import ProtocolParam, spec_text
from hwm.properties.protocol import resolve

EXIT_OK, EXIT_FAILED = 0, 1


@click.command("prove", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--protocol", "protocol", type=ProtocolParam(), default="raft", show_default=True,
              help="Preset (see `hwm protocols`), optionally with flags: raft,commit=any-generation.")
@click.option("--part", type=click.Choice([*PARTS, "all"]), default="all", show_default=True,
              help="quorum: the quorum arithmetic for N up to --max-n; induction: the inductive invariant; "
                   "bmc: bounded model checking from the initial state.")
@click.option("--servers", type=click.IntRange(1, 9), default=3, show_default=True,
              help="Servers for induction and BMC.")
@click.option("--max-log", type=click.IntRange(1, 99), default=None,
              help="Log length bound L [default: 2 for induction, "
                   f"{Config.max_log} (the explorer's default) for BMC].")
@click.option("--max-n", type=click.IntRange(1, 64), default=15, show_default=True,
              help="Quorum proofs cover N = 1..max-n.")
@click.option("--depth", type=click.IntRange(1, 99), default=DEFAULT_BMC_DEPTH, show_default=True,
              help="BMC unrolls at most this many steps.")
@click.option("--max-generation", type=click.IntRange(1, 30), default=Config.max_generation, show_default=True,
              help="BMC generation bound (induction's generations are unbounded).")
@click.option("--max-crashes", type=click.IntRange(0, 30), default=Config.max_crashes, show_default=True,
              help="BMC crash bound (induction's crashes are unbounded).")
@click.option("--property", "properties", multiple=True, type=click.Choice([*ALWAYS_CHECKED, "all"]),
              help="Property for BMC (repeatable; 'all' for every always property) "
                   f"[default: {', '.join(DEFAULT_BMC_PROPERTIES)}].")
@click.option("--no-explorer", is_flag=True,
              help="Do not run the breadth-first explorer to compare BMC's shortest lengths.")
@click.option("--expect-catalogue", is_flag=True,
              help="Judge against the catalogue: a preset it calls broken passes (exit 0) when its "
                   "counterexample is found.")
@click.option("--json", "as_json", is_flag=True, help="Print the proofs as JSON.")
def prove(protocol, part, servers, max_log, max_n, depth, max_generation, max_crashes, properties, no_explorer,
          expect_catalogue, as_json):
    """Prove what the explorer cannot: quorum arithmetic for every N ≤ --max-n, an inductive invariant
    with unbounded generations, and bounded model checking whose shortest violations must equal
    the explorer's.

    Exit 0 when every obligation is met and no violation is found; 1 when one is not met or
    the protocol violates a property (with --expect-catalogue: only when an obligation is not
    met, so a broken preset passes by showing its counterexample); 2 on bad arguments.
    """
    name, resolved = resolve(protocol)
    if resolved.system != "raft":
        # The z3 encoding (proofs/symbolic.py) is the raft model's.
        raise click.UsageError(f"hwm prove encodes the raft model; {name} follows the {resolved.system} rules "
                               f"(check it with hwm check --protocol {name})")
    why = unencoded(resolved)
    if why:
        raise click.UsageError(f"hwm prove cannot check {name}: {why} (check it with hwm check --protocol "
                               f"{spec_text(protocol)})")
    if "all" in properties:
        properties = ALWAYS_CHECKED
    plan = Plan(name, resolved, PARTS if part == "all" else (part,), servers=servers, max_log=max_log,
                max_n=max_n, depth=depth, max_generation=max_generation, max_crashes=max_crashes,
                properties=tuple(properties) or DEFAULT_BMC_PROPERTIES, compare_with_explorer=not no_explorer)
    proofs = run(plan)
    met = all(p.ok for p in proofs)
    violated = violations_found(proofs)
    ok = met and (expect_catalogue or not violated)
    if as_json:
        click.echo(json.dumps({"protocol": name, "ok": ok, "obligations_met": met, "violations_found": violated,
                               "proofs": [p.to_json() for p in proofs]}, indent=2, ensure_ascii=False))
    else:
        click.echo(render(proofs))
        total = sum(p.seconds for p in proofs)
        verdict = "all obligations met" if met else f"{sum(not p.ok for p in proofs)} obligation(s) not met"
        if violated:
            verdict += f"; {name} violates a property ({', '.join(violated)})"
            if expect_catalogue and met:
                verdict += ", as the catalogue expects"
        click.echo(f"{name}: {verdict} ({total:.1f}s)")
    sys.exit(EXIT_OK if ok else EXIT_FAILED)
