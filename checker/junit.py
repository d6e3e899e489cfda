"""A check's verdicts as JUnit XML, the report format CI systems show natively: one test suite per
preset, one test case per property. A violated always property, or a witness the bounds allow but
the search never reached, is a failure carrying the shortest counterexample's steps and the path
of its saved trace; a property the search could not decide (an unfinished search, a witness the
bounds rule out, a violation the bounds are too small to show, a preset an interrupted tour never
reached) is skipped with the reason."""

from __future__ import annotations

import contextlib
import xml.etree.ElementTree as ET
from pathlib import Path

from hwm.checker.report import Report
from hwm.checker.verdict import impossible_witnesses
from hwm.model.state import Config
from hwm.properties.protocol import PRESETS, resolve


def _case(suite: ET.Element, preset: str, prop: str, seconds: float) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=f"hwm.{preset}", name=prop, time=f"{seconds:.3f}")


def suite(report: Report, protocol_spec, saved: dict[str, Path] | None = None,
          not_shown: dict[str, str] | None = None) -> ET.Element:
    """One preset's test suite. `saved`: property -> the saved trace; `not_shown`: property -> the
    bounds its expected violation needs (the tour's judgement)."""
    saved, not_shown = saved or {}, not_shown or {}
    _, protocol = resolve(protocol_spec)
    impossible = impossible_witnesses(report, protocol, Config.from_mapping(report.config))
    unfinished = report.interrupted or not report.complete
    name = report.protocol_name
    element = ET.Element("testsuite", name=name)
    per_case = report.seconds / max(1, len(report.results))
    for prop, result in report.results.items():
        case = _case(element, name, prop, per_case)
        if result.kind == "always" and result.found:
            failure = ET.SubElement(case, "failure", type="violation",
                                    message=f"{prop} violated in {result.length} steps: {result.finding}")
            text = [f"{prop} violated in {result.length} steps: {result.finding}"]
            text += [f"{k + 1:3}. {step}" for k, step in enumerate(result.steps)]
            if prop in saved:
                text.append(f"saved to {saved[prop]}  (hwm replay {saved[prop]})")
            failure.text = "\n".join(text)
        elif result.kind == "sometimes" and result.found:
            continue
        elif result.kind == "sometimes" and prop in impossible:
            ET.SubElement(case, "skipped", message=f"impossible at these bounds (needs {impossible[prop]})")
        elif unfinished:
            ET.SubElement(case, "skipped", message="the search did not finish: not decided")
        elif result.kind == "sometimes":
            ET.SubElement(case, "failure", type="unreached",
                          message=f"{prop} never happens, so the checks may be vacuous")
        elif prop in not_shown:
            ET.SubElement(case, "skipped", message=f"expected violation not shown at these bounds "
                                                   f"(needs {not_shown[prop]})")
    cases = element.findall("testcase")
    element.set("tests", str(len(cases)))
    element.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
    element.set("errors", "0")
    element.set("skipped", str(sum(1 for c in cases if c.find("skipped") is not None)))
    element.set("time", f"{report.seconds:.3f}")
    return element


def not_checked(preset: str, config: Config, reason: str) -> ET.Element:
    """The suite of a preset that was never checked (a tour stopped by Ctrl-C): each property its
    model would have checked, skipped with `reason`, so a CI system shows it as not run, not passed."""
    from hwm.model.registry import build_model

    _, protocol = resolve(preset)
    element = ET.Element("testsuite", name=preset)
    for prop in build_model(protocol, config).properties:
        ET.SubElement(_case(element, preset, prop.name, 0.0), "skipped", message=reason)
    count = len(element.findall("testcase"))
    for key, value in (("tests", count), ("failures", 0), ("errors", 0), ("skipped", count)):
        element.set(key, str(value))
    element.set("time", "0.000")
    return element


def document(suites: list[ET.Element]) -> str:
    root = ET.Element("testsuites", name="hwm check")
    for key in ("tests", "failures", "errors", "skipped"):
        root.set(key, str(sum(int(s.get(key)) for s in suites)))
    root.set("time", f"{sum(float(s.get('time')) for s in suites):.3f}")
    root.extend(suites)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write(path: Path, suites: list[ET.Element]) -> Path:
    """Write the document through a temporary file (a CI job never reads half a report); OSError
    names the path."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(document(suites), encoding="utf-8")
        tmp.replace(path)
    except OSError as error:  # named by the path the user gave, not the temporary file's
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise OSError(error.errno, error.strerror, str(path)) from error
    return path


def expected_not_shown(preset: str, report: Report) -> dict[str, str]:
    """The expected violations `report`'s bounds were too small to show, with what each needs."""
    from hwm.checker.expectations import expected_properties, needs_text, shows

    if preset not in PRESETS or not PRESETS[preset].broken:
        return {}
    config = Config.from_mapping(report.config)
    return {p: needs_text(preset, p, config) for p in expected_properties(preset)
            if p not in report.violated and not shows(preset, p, config)}
