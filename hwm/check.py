"""`hwm check`: the reports it prints, one protocol's and the tour's table. The checking itself is
`hwm.checker`'s; the command line imports it from there."""

from __future__ import annotations

from pathlib import Path

from hwm.checker.report import Report
from hwm.checker.verdict import impossible_witnesses, passed, thin, tour_protocol
from hwm.model.state import Config
from hwm.properties.acked import ALL_BY_NAME
from hwm.properties.protocol import PRESETS, Protocol
from hwm.render import table

# Every property any model is checked for, in catalogue order, each system's own after.
ALL_PROPERTIES = tuple(ALL_BY_NAME.values())


def symmetry_note(spec, config: Config) -> str | None:
    """Why symmetry reduction reduces nothing for `spec`'s model, where the model says so (BookKeeper's
    striped ledgers and spare bookies give each bookie a place); None otherwise."""
    from hwm.model.registry import build_model
    from hwm.properties.protocol import resolve

    name, protocol = resolve(spec)
    try:
        reason = getattr(build_model(protocol, config), "symmetry_note", None)
    except ValueError:  # the model refuses these bounds itself: its own check says so
        return None
    return f"{name}: {reason}" if reason else None


def report_json(report: Report, protocol: Protocol) -> dict:
    """The report as JSON, with the judgement `describe_report` prints."""
    config = Config.from_mapping(report.config)
    data = report.to_json()
    data["impossible_witnesses"] = impossible_witnesses(report, protocol, config)
    data["thin"] = thin(protocol, config)
    data["passed"] = passed(report, protocol, config)
    return data


def describe_report(report: Report, saved: dict[str, Path] | None = None, protocol: Protocol | None = None,
                    stopped_by: str = "Ctrl-C") -> str:
    """The closing report of one check; with `protocol`, witnesses the bounds rule out and a thin
    check are told as such. `stopped_by`: what interrupted the search, if it was (Ctrl-C, SIGTERM)."""
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
        lines.append(f"INTERRUPTED: {stopped_by} stopped the search; below is what the explored part shows, "
                     "nothing is proved")
    elif not report.complete:
        lines.append("INCOMPLETE: a state or depth limit stopped the search; nothing is proved")
    unfinished = report.interrupted or not report.complete
    if unfinished:
        pass  # where the search stopped is not where the bounds cut it: no claim about the bounds
    elif report.bounds_hit:
        lines.append("bounded: exploration was cut by " + ", ".join(sorted(report.bounds_hit))
                     + " (a pass is a check within these bounds, not a proof)")
    else:
        lines.append("no bound cut exploration: the whole reachable state space was explored")
    if protocol is not None and thin(protocol, config):
        lines.append(f"THIN: {thin(protocol, config)}; the verdicts below say nothing about client entries")
    lines.append("")
    from hwm.model.variant import own_properties
    checked = [p for p in (*ALL_PROPERTIES, *own_properties(protocol)) if p.name in report.results]
    for p in checked:
        if p.kind != "always":
            continue
        r = report.results[p.name]
        if r.found:
            lines.append(f"  ✗ {p.name:28} violated in {r.length} steps: {r.finding}")
            lines.append(f"      {' '.join(str(s) for s in r.steps)}")
            if p.name in saved:
                lines.append(f"      saved to {saved[p.name]}  (hwm replay {saved[p.name]})")
        elif unfinished:  # a property is proved only by a finished search
            lines.append(f"  ? {p.name:28} not violated in the explored part (the search did not finish)")
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
    """One row per preset, then per variant in the tour (by its name); a row checked at other bounds
    than the tour's (`tour`) says which."""
    from hwm.model.variant import own_properties
    # One column per always property some preset was checked for; "-" where it does not apply. A
    # variant's own invariants come after the catalogue's, by their full names.
    own = {p.name: p for name, _ in results if name not in PRESETS for p in own_properties(tour_protocol(name)[0])}
    columns = [p for p in (*ALL_PROPERTIES, *own.values())
               if p.kind == "always" and any(p.name in r.results for _, r in results)]
    header = ["preset", "states", "secs"] + [ABBREVIATIONS.get(p.name, p.name) for p in columns] + ["witnesses"]
    rows = []
    for name, r in results:
        cells = []
        for p in columns:
            res = r.results.get(p.name)
            cells.append("-" if res is None else f"✗{res.length}" if res.found else "✓")
        sometimes = [res for res in r.results.values() if res.kind == "sometimes"]
        reached = sum(1 for res in sometimes if res.found)
        config = Config.from_mapping(r.config)
        protocol = tour_protocol(name)[0]
        impossible = len(impossible_witnesses(r, protocol, config))
        witnesses = f"{reached}/{len(sometimes) - impossible}" + (f" ({impossible} impossible)" if impossible else "")
        notes = []
        if tour is not None and config.max_log != tour.max_log:
            notes.append(f"log ≤ {config.max_log}")
        if thin(protocol, config):
            notes.append("THIN")
        rows.append([r.protocol_name + (f" ({', '.join(notes)})" if notes else ""), f"{r.states:,}", f"{r.seconds:.1f}"]
                    + cells + [witnesses])
    legend = "  ".join(f"{ABBREVIATIONS[p.name]}={p.name}" for p in columns if p.name in ABBREVIATIONS)
    return table(header, rows) + "\n\n✓ holds, ✗N violated (shortest counterexample: N steps)\n" + legend



