"""A check's verdicts as JUnit XML, the report format CI systems show natively: one test suite per
preset, one test case per property, failing exactly where the exit status does. One check
(`--protocol P`): a violated always property, or a witness the bounds allow but the search never
reached, is a failure carrying the shortest counterexample's steps and the path of its saved trace.
The tour judges each preset against the catalogue: an expected violation seen is a passing case
(its counterexample in the case's output); a safe preset's violation, a violation the catalogue does
not expect, an expected violation these bounds show but the search missed, and a missed witness are
failures. A property the search could not decide (an unfinished search, a witness the bounds rule
out, an expected violation the bounds are too small to show, a preset an interrupted tour never
reached) is skipped with the reason."""

from __future__ import annotations

import contextlib
import xml.etree.ElementTree as ET
from pathlib import Path

from hwm.checker.report import Report
from hwm.checker.expectations import needs_text
from hwm.checker.expectations import tour_verdicts
from hwm.checker.verdict import impossible_witnesses
from hwm.model.state import Config
from hwm.properties.protocol import resolve


def _case(suite: ET.Element, preset: str, prop: str, seconds: float) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=f"hwm.{preset}", name=prop, time=f"{seconds:.3f}")


def _counterexample(prop: str, result, saved: dict[str, Path]) -> str:
    text = [f"{prop} violated in {result.length} steps: {result.finding}"]
    text += [f"{k + 1:3}. {step}" for k, step in enumerate(result.steps)]
    if prop in saved:
        text.append(f"saved to {saved[prop]}  (hwm replay {saved[prop]})")
    return "\n".join(text)


def suite(report: Report, protocol_spec, saved: dict[str, Path] | None = None,
          not_shown: dict[str, str] | None = None, tour: dict[str, str] | None = None) -> ET.Element:
    """One preset's test suite. `saved`: property -> the saved trace; `not_shown`: property -> the
    bounds its expected violation needs. `tour`: property -> the tour's verdict against the catalogue
    (`expectations.tour_verdicts`), which a case then means, as the tour's exit status does: an expected
    violation seen passes (its counterexample in the case's output), an unexpected one or an expected
    one these bounds show but the search missed fails; without it (one check) a violation fails."""
    saved, not_shown = saved or {}, not_shown or {}
    _, protocol = resolve(protocol_spec)
    config = Config.from_mapping(report.config)
    impossible = impossible_witnesses(report, protocol, config)
    unfinished = report.interrupted or not report.complete
    name = report.protocol_name
    element = ET.Element("testsuite", name=name)
    per_case = report.seconds / max(1, len(report.results))
    for prop, result in report.results.items():
        case = _case(element, name, prop, per_case)
        verdict = (tour or {}).get(prop)
        if result.kind == "always" and result.found and verdict in ("expected", "beyond"):
            why = ("expected violation seen" if verdict == "expected" else
                   "violated above the bounds the catalogue knows this preset at (not judged)")
            ET.SubElement(case, "system-out").text = f"{why}: " + _counterexample(prop, result, saved)
        elif result.kind == "always" and result.found:
            failure = ET.SubElement(case, "failure", type="violation",
                                    message=f"{prop} violated in {result.length} steps: {result.finding}"
                                            + (" (the catalogue does not expect it)" if tour is not None else ""))
            failure.text = _counterexample(prop, result, saved)
        elif result.kind == "sometimes" and result.found:
            continue
        elif result.kind == "sometimes" and prop in impossible:
            ET.SubElement(case, "skipped", message=f"impossible at these bounds (needs {impossible[prop]})")
        elif unfinished:
            ET.SubElement(case, "skipped", message="the search did not finish: not decided")
        elif result.kind == "sometimes":
            ET.SubElement(case, "failure", type="unreached",
                          message=f"{prop} never happens, so the checks may be vacuous")
        elif verdict == "missing":
            ET.SubElement(case, "failure", type="expected violation missing",
                          message=f"the catalogue expects {name} to violate {prop} at these bounds "
                                  f"(needs {needs_text(name, prop, config)}); the search did not")
        elif verdict == "not shown" or prop in not_shown:
            needs = not_shown.get(prop) or needs_text(name, prop, config)
            ET.SubElement(case, "skipped", message=f"expected violation not shown at these bounds (needs {needs})")
    cases = element.findall("testcase")
    element.set("tests", str(len(cases)))
    element.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
    element.set("errors", "0")
    element.set("skipped", str(sum(1 for c in cases if c.find("skipped") is not None)))
    element.set("time", f"{report.seconds:.3f}")
    return element


def tour_suite(preset: str, report: Report, saved: dict[str, Path] | None = None) -> ET.Element:
    """A tour preset's suite, judged against the catalogue: failures exactly where the tour's exit
    status finds a mismatch (`checker.expectations.judge`)."""
    return suite(report, preset, saved, tour=tour_verdicts(preset, report))


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
