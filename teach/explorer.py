"""`hwm explore`: a local web page where a student drives the model by hand.

A stdlib HTTP server (no framework, nothing downloaded) serves the page and its
scripts from the installed package and a small JSON API. The server keeps no
session: every request carries the protocol, the bounds and the whole path of
steps taken so far, so going back is dropping the last step. A bad request (an
unknown action, a step that is not enabled, bad bounds) gets HTTP 400 with a
message that says what was wrong, and the server keeps serving.

API (JSON bodies):
- GET  /api/presets: presets, flags with their values, configuration keys and defaults;
- POST /api/state  {protocol, config, steps, compare?, loop?, until_blocked?}: the frames of
  the path (drawn and explained), the enabled next steps, why the other steps are refused,
  with `compare` the same steps under a second protocol (it may block one) and where the
  two part (`divergence`); with `until_blocked` the explored protocol may block one too (a
  flag switched mid-trace): its column stops there and the next steps follow from there;
- POST /api/search {protocol, config}: the shortest counterexample to each `always`
  property and the shortest witness of each `sometimes` property (breadth-first);
- GET  /api/catalogue: the saved traces of `hwm.counterexamples` (lassos included),
  each with its preset, bounds and steps, so a page loads one with its own bounds (a search at
  the default bounds of a larger model may stop before it reaches them).

A path may carry `loop`, a lasso's first cycle step: its frames mark the stem and the cycle.
"""

from __future__ import annotations

import json
import threading
from functools import lru_cache
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any

from hwm.teach.explain import frames_of
from hwm.teach.motion import mark_departure
from hwm.teach.page import column
from hwm.teach.svg import Layout
from hwm.model.actions import BoundHit, from_step, to_step
from hwm.model.registry import build_model
from hwm.model.variant import HookError
from hwm.checker.run import CheckRequest, run
from hwm.model.state import Config
from hwm.properties.catalogue import ALWAYS, SOMETIMES
from hwm.properties.protocol import FLAG_MEANINGS, FLAG_VALUES, PRESETS, ProtocolError, _show, flags_of, resolve
from hwm.properties.trace import CONFIG_KEYS, Step, TraceError, load, parse_step

MAX_STEPS = 200  # a path longer than this is not a student clicking
MAX_BODY = 1 << 20
SEARCH_STATES = 60_000  # every preset at the default bounds fits (seed: 39,973); beyond, the page says "stopped early"
STATIC = {"explorer.html": "text/html", "explorer.js": "text/javascript", "view.js": "text/javascript",
          "view.css": "text/css"}


class BadRequest(ValueError):
    """A request the explorer refuses: the message goes back to the page as HTTP 400."""


# ------------------------------------------------------------------ the API
# The variants the page may explore (docs/variants.md): those named on the command line alone, since a
# request that named any file would have the server import and run it.
OFFERED_VARIANTS: dict[str, Any] = {}


def offer_variant(spec: str) -> None:
    """Let the page explore the variant `spec` names (`hwm explore --protocol file.py:Name`), beside the presets."""
    OFFERED_VARIANTS[spec] = resolve(spec)


def presets() -> dict:
    from hwm.model.variant import describe  # what a variant changes, as its summary
    offered = {spec: (describe(protocol), protocol) for spec, (_, protocol) in OFFERED_VARIANTS.items()}
    return {"presets": {name: {"flags": {k: _show(v) for k, v in protocol.flags().items()},
                               "summary": summary, "broken": broken, "system": protocol.system,
                               # the flags a student may switch: those of the preset's system
                               "switchable": list(flags_of(protocol.system))}
                        for name, (summary, broken, protocol) in
                        {**{n: (p.summary, p.broken, p.protocol) for n, p in PRESETS.items()},
                         **{n: (summary, False, protocol) for n, (summary, protocol) in offered.items()}}.items()},
            "flags": {flag: [_show(v) for v in values] for flag, values in FLAG_VALUES.items()},
            "meanings": FLAG_MEANINGS,
            "config": {key: {"default": default,
                             "choices": list(valid) if not isinstance(valid, range) else None,
                             "min": valid.start if isinstance(valid, range) else None,
                             "max": valid.stop - 1 if isinstance(valid, range) else None}
                       for key, (default, valid) in CONFIG_KEYS.items()}}


def _protocol(spec: Any, field: str = "protocol"):
    from hwm.model.variant import installed, is_variant_spec
    head = spec.get("preset", "raft") if isinstance(spec, dict) else spec
    if head not in OFFERED_VARIANTS and (is_variant_spec(head) or (isinstance(head, str) and head in installed())):
        raise BadRequest(f"{field}: {head!r} is no preset; the explorer explores a variant named on its command "
                         f"line (hwm explore --protocol FILE.py:NAME)")
    try:
        return resolve(spec)
    except ProtocolError as e:
        raise BadRequest(f"{field}: {e}") from None


def _model(body: dict):
    if not isinstance(body, dict):
        raise BadRequest("the request body is a JSON object")
    name, protocol = _protocol(body.get("protocol", "raft"))
    try:
        config = Config.from_mapping(body.get("config") or {}, where="bounds")
    except TraceError as e:
        raise BadRequest(str(e)) from None
    return name, build_model(protocol, config)


def _steps(body: dict, config: Config) -> list:
    raw = body.get("steps", [])
    if not isinstance(raw, list):
        raise BadRequest("steps must be a list")
    if len(raw) > MAX_STEPS:
        raise BadRequest(f"a path of {len(raw)} steps is longer than the explorer's {MAX_STEPS}")
    try:
        steps = [parse_step(step, number, config.to_mapping(), source="path") for number, step in enumerate(raw, 1)]
    except TraceError as e:
        raise BadRequest(str(e)) from None
    # A write without a value gets the one the page would have offered (v1, v2, ...).
    return [Step(s.action, {**s.args, "value": _next_value(steps[:k])})
            if s.action == "write" and "value" not in s.args else s for k, s in enumerate(steps)]


def walk(model, steps) -> tuple[list, str | None]:
    """The states along `steps` (initial first) and, if a step is not enabled, why (the walk stops there)."""
    states = [model.initial_state()]
    for step in steps:
        reason = model.why_not(states[-1], from_step(step))
        if reason is not None:
            return states, str(reason)
        states.append(model.apply(states[-1], from_step(step)))
    return states, None


def _next_value(steps) -> str:
    return f"v{1 + sum(1 for s in steps if s.action == 'write')}"


def _loop(body: dict, steps: list) -> int | None:
    loop = body.get("loop")
    if loop is None:
        return None
    if not isinstance(loop, int) or isinstance(loop, bool) or not 1 <= loop <= len(steps):
        raise BadRequest(f"loop must be a step number 1..{len(steps)} (the first step of the cycle), not {loop!r}")
    return loop


def lasso_findings(model, steps, states, loop: int) -> dict[str, str]:
    """The `eventually` properties a lasso breaks (its cycle closes, stays fair, keeps one open)."""
    from hwm.checker.liveness import lasso_verdict, liveness_of, refusal

    if refusal(model):
        return {}
    actions = [from_step(s) for s in steps]
    found = {}
    properties, fair = liveness_of(model)  # a variant's own too, under its fairness
    for prop in properties:
        finding, _ = lasso_verdict(model, list(states), actions, loop, prop, fair)
        if finding:
            found[prop.name] = finding
    return found


def state(body: dict) -> dict:
    """The frames of a path, what may come next, and (with `compare`) the path under another protocol.

    With `until_blocked` (what the page sends) a step the protocol does not enable ends its column
    there instead of the request: a flag switched mid-trace may forbid a step already taken, and
    the next steps offered follow the last state reached (`reachable` steps in).
    """
    name, model = _model(body)
    steps = _steps(body, model.config)
    loop = _loop(body, steps)
    states, blocked = walk(model, steps)
    if blocked is not None and body.get("until_blocked") is not True:
        number = len(states)
        raise BadRequest(f"step {number} {steps[number - 1]} is not enabled under {name}: {blocked}")
    frames = frames_of(model, steps, states, blocked=blocked, loop=None if blocked else loop)
    if loop is not None and blocked is None:
        frames[-1].violations.update(lasso_findings(model, steps, states, loop))
    columns = [(name + (f": blocked at step {len(states)}" if blocked else ""), frames)]
    if body.get("compare") not in (None, ""):
        other_name, other = _protocol(body["compare"], "compare")
        other_model = build_model(other, model.config)
        other_states, other_blocked = walk(other_model, steps)
        heading = other_name + (f": blocked at step {len(other_states)}" if other_blocked else ": every step enabled")
        columns.append((heading, frames_of(other_model, steps, other_states, blocked=other_blocked,
                                           loop=None if other_blocked else loop)))
    if len(columns) == 2:  # both columns mark the step where the two protocols part
        mark_departure(columns[0][1], columns[1][1], (name, other_name))
    layout = Layout.of([f for _, fs in columns for f in fs], model.config.max_log)
    last = states[-1]
    value = _next_value(steps[:len(states) - 1])
    enabled = [to_step(a, value) for a in model.actions(last)]
    return {"protocol": name, "config": model.config.to_mapping(), "reachable": len(states) - 1,
            "columns": [column(h, fs, layout) for h, fs in columns],
            "divergence": divergence(columns) if len(columns) > 1 else None,
            "enabled": [{"step": s.to_json(), "label": str(s)} for s in enabled],
            "refused": refused(model, last, value)}


def divergence(columns: list) -> dict | None:
    """Where the same steps part under two protocols: the first step one of them does not enable,
    or else the first step where one breaks a property the other does not; None when they agree.

    This is the step a student switching a flag mid-trace wants to see: where the fix blocks the bug.
    """
    (heading_a, a), (heading_b, b) = columns
    names = (heading_a.split(": ", 1)[0], heading_b.split(": ", 1)[0])
    blocked = sorted((frames[-1].number, k) for k, frames in enumerate((a, b)) if frames[-1].blocked)
    if blocked:
        step, k = blocked[0]
        stopped, other = (a, b)[k][-1], (b, a)[k]
        text = f"under {names[k]}, step {step} {stopped.label} is not enabled: {stopped.blocked}"
        broken = next((f for f in other[1:] if f.violations and not f.blocked), None)
        if broken is not None:
            verb = "goes on and breaks" if broken.number >= step else "had already broken"
            text += f"; under {names[1 - k]} the path {verb} {', '.join(broken.violations)} at step {broken.number}"
        return {"step": step, "kind": "blocked", "text": text}
    for mine, theirs in zip(a[1:], b[1:]):
        for k, (x, y) in enumerate(((mine, theirs), (theirs, mine))):
            avoided = [p for p in x.violations if p not in y.violations]
            if avoided:
                differs = next((f.number for f, g in zip(a[1:], b[1:]) if f.state != g.state), None)
                text = (f"under {names[k]}, step {x.number} {x.label} breaks {', '.join(avoided)}; under "
                        f"{names[1 - k]} it does not")
                if differs is not None and differs <= x.number:
                    text += f" (the two protocols part at step {differs}: compare the reasons there)"
                return {"step": x.number, "kind": "avoided", "text": text, "differs": differs}
    return None


def refused(model, last, value: str) -> list[dict]:
    """Why each simple step (not elections: too many voter sets) is not enabled now."""
    out = []
    if hasattr(model, "action_table"):  # every model names its own actions (Kafka's shrink_isr, ZAB's sync...)
        candidates = [a for a in model.action_table() if a[0] != "elect"]
    else:
        n = model.n
        candidates = [(a, k) for a in ("write", "read", "crash", "restart") for k in range(n)]
        pair_actions = ("send", "deliver", "drop") if model.config.network == "async" else ("replicate",)
        candidates += [(a, x, y) for a in pair_actions for x in range(n) for y in range(n) if x != y]
    for action in candidates:
        try:
            reason = model.why_not(last, action)
        except (AttributeError, TypeError, IndexError):  # a model of another system without this action
            continue
        if reason is not None:
            bound = f" (bound {reason.bound})" if isinstance(reason, BoundHit) else ""
            out.append({"label": str(to_step(action, value)), "reason": str(reason) + bound})
    return out


@lru_cache(maxsize=32)
def _search(spec_json: str, config_json: str) -> dict:
    name, protocol = resolve(json.loads(spec_json))
    model = build_model(protocol, Config.from_mapping(json.loads(config_json)))
    report = run(CheckRequest(name, max_states=SEARCH_STATES), model=model)
    if report.error:  # a variant's hook failed: what was found is not every shortest path
        raise BadRequest(report.error)
    found = []
    for p in getattr(model, "properties", None) or ALWAYS + SOMETIMES:
        if p.name not in report.results:
            continue
        r = report.results[p.name]
        found.append({"property": p.name, "kind": p.kind, "meaning": p.meaning, "found": r.found,
                      "finding": r.finding, "length": r.length,
                      "steps": [s.to_json() for s in r.steps] if r.steps is not None else None})
    return {"protocol": name, "states": report.states, "complete": report.complete,
            "bounds_hit": sorted(report.bounds_hit), "results": found}


def search(body: dict) -> dict:
    """Shortest counterexamples and witnesses for the request's protocol and bounds."""
    name, model = _model(body)
    spec = body.get("protocol", "raft")
    return _search(json.dumps(spec, sort_keys=True), json.dumps(model.config.to_mapping(), sort_keys=True))


# The saved traces (hwm.counterexamples ships them as package data).
CATALOGUE = Path(str(resources.files("hwm.counterexamples")))


@lru_cache(maxsize=1)
def catalogue() -> dict:
    """The saved traces whose protocol is a preset, lassos included, by file name."""
    traces = []
    for path in sorted(CATALOGUE.glob("*.json")) + sorted(CATALOGUE.glob("liveness/*.json")):
        try:
            trace = load(path)
        except TraceError:  # a file that is no trace: not the explorer's to judge
            continue
        if isinstance(trace.protocol, str) and trace.protocol in PRESETS:
            traces.append({"file": str(path.relative_to(CATALOGUE)), "title": trace.title,
                           "protocol": trace.protocol, "property": trace.property, "expect": trace.expect,
                           "config": Config.from_mapping(trace.config).to_mapping(), "loop": trace.loop,
                           "steps": [s.to_json() for s in trace.steps]})
    return {"traces": traces}


ROUTES = {"/api/state": state, "/api/search": search}


# --------------------------------------------------------------- the server
class Handler(BaseHTTPRequestHandler):
    server_version = "hwm-explorer"
    static = STATIC  # the files under /static/ this server gives, with their content types
    max_body = MAX_BODY

    def log_message(self, format, *args):  # noqa: A002 - the stdlib's name
        if getattr(self.server, "verbose", False):
            super().log_message(format, *args)

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type + "; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data: dict) -> None:
        self._send(status, json.dumps(data).encode(), "application/json")

    def _serve_static(self, path: str) -> bool:
        """Answer a GET of one of `static`'s files; False when `path` is not one."""
        name = path[len("/static/"):] if path.startswith("/static/") else None
        if name not in self.static:
            return False
        self._send(HTTPStatus.OK, resources.files("hwm.teach").joinpath("static", name).read_bytes(), self.static[name])
        return True

    def _read_json(self) -> dict:
        """The request's body as a JSON object; BadRequest saying why when it is not one."""
        length = int(self.headers.get("Content-Length") or 0)
        if length > self.max_body:
            raise BadRequest(f"a request body of {length} bytes is over the explorer's {self.max_body}")
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise BadRequest(f"the request body is not JSON: {e}") from None
        if not isinstance(body, dict):
            raise BadRequest("the request body is a JSON object")
        return body

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        path = self.path.split("?", 1)[0]
        if path == "/":
            path = "/static/explorer.html"
        if path == "/api/presets":
            return self._json(HTTPStatus.OK, presets())
        if path == "/api/catalogue":
            return self._json(HTTPStatus.OK, catalogue())
        if not self._serve_static(path):
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no page {path}; the explorer is at /"})

    def do_POST(self) -> None:  # noqa: N802
        route = ROUTES.get(self.path.split("?", 1)[0])
        if route is None:
            return self._json(HTTPStatus.NOT_FOUND, {"error": f"no API {self.path}; APIs are " + ", ".join(ROUTES)})
        try:
            self._json(HTTPStatus.OK, route(self._read_json()))
        except BadRequest as e:
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(e)})
        except HookError as e:  # a variant's hook failed on the page's step (docs/variants.md)
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(e)})
        except Exception as e:  # a bug must not stop the server a class is using
            self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"internal error: {type(e).__name__}: {e}"})


def make_server(host: str = "127.0.0.1", port: int = 0, verbose: bool = False) -> ThreadingHTTPServer:
    """The explorer's server, bound (loopback unless told otherwise) but not yet serving."""
    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    server.verbose = verbose
    return server


def serve_in_thread(host: str = "127.0.0.1", port: int = 0) -> tuple[ThreadingHTTPServer, str]:
    """Start the explorer in a background thread; returns the server and its URL (for tests)."""
    server = make_server(host, port)
    threading.Thread(target=server.serve_forever, name="hwm-explorer", daemon=True).start()
    return server, url_of(server)


def url_of(server: ThreadingHTTPServer) -> str:
    host, port = server.server_address[:2]
    return f"http://{host if ':' not in host else '[' + host + ']'}:{port}/"


def serve_until_ctrl_c(server: ThreadingHTTPServer, announce: str) -> None:
    """Print `announce` (the explorer's address), serve until Ctrl-C, then close the socket."""
    import click

    click.echo(f"{announce}  (Ctrl-C stops it)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        click.echo("stopped")
    finally:
        server.server_close()
