"""`hwm explore -- CMD`: a student steps their own node program in the page, as DViz does.

hwm runs N copies of the program (`bridge.maelstrom`: real processes, JSON lines on stdin and
stdout, hwm's virtual clock) and owns the network: every message a node sends waits in hwm's
in-flight list until the student delivers or drops it. The student also crashes (SIGKILL) and
restarts nodes, sends client requests, ticks the clock, and goes back to any earlier step.
A process cannot go back, so going back starts a fresh cluster and runs the path up to there
again: with the virtual clock and a node that depends only on its inputs, that is the same
cluster (a branch then starts from it, as in DViz's time travel). The path is saved as an
`hwm-schedule/1` file that `hwm replay FILE -- CMD` runs again.

Unlike the model's explorer this server holds one session (the running processes), for the one
student at this machine; every request that changes it is serialised by a lock.

API (JSON):
- GET  /api/node: the session (`view`);
- POST /api/node/step {step}: take one step (a schedule step: deliver, drop, kill, restart,
  log_append, log_read, tick, deliver_all ...);
- POST /api/node/back {to}: go back to step `to` (0: the cluster just started);
- POST /api/node/save {name}: save the path under the session's folder, as NAME.json.
"""

from __future__ import annotations

import json
import re
import threading
from http import HTTPStatus
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from hwm.bridge.maelstrom.cluster import Limits, Run
from hwm.bridge.maelstrom.history import describe_op
from hwm.bridge.maelstrom.protocol import NodeProtocolError, sender
from hwm.bridge.maelstrom.schedule import Schedule, ScheduleError, check_step, describe
from hwm.teach.frame import Frame
from hwm.teach.explorer import BadRequest  # noqa: F401 (a request the page gets back as HTTP 400)
from hwm.teach.explorer import Handler as ExplorerHandler
from hwm.teach.svg import Layout, draw
from hwm.properties.snapshot import FOLLOWER, ServerSnapshot, Snapshot

MAX_STEPS = 300  # a path longer than this is not a student clicking
MAX_BODY = 1 << 16
STATIC = {"node.html": "text/html", "node.js": "text/javascript", "view.js": "text/javascript",
          "view.css": "text/css"}
SAVE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")


class NodeSession:
    """The cluster a student drives: the node program, the path of steps taken, the running `Run`."""

    def __init__(self, command: list[str], nodes: int = 3, workload: str = "log",
                 save_dir: Path = Path("hwm-out/explore"), limits: Limits | None = None):
        self.command, self.nodes, self.workload = list(command), nodes, workload
        self.save_dir = Path(save_dir)
        self.limits = limits or Limits()
        self.steps: list[dict] = []
        self.moved: tuple[str, str, str, str] | None = None  # the message the last step delivered or dropped
        self.error: str | None = None  # the node broke the protocol: what it did (going back recovers)
        self.lock = threading.Lock()
        self.run: Run | None = None
        self._fresh()

    def schedule(self) -> Schedule:
        return Schedule(workload=self.workload, nodes=self.nodes, clock="virtual", steps=list(self.steps),
                        title=f"explored by hand: {' '.join(self.command)}")

    def _fresh(self) -> None:
        """A new cluster, started (NodeProtocolError when a node does not come up: said at once)."""
        self.close()
        self.run = Run(self.command, Schedule(workload=self.workload, nodes=self.nodes, clock="virtual"),
                       self.limits)
        try:
            self.run.start()
        except BaseException:
            self.close()  # its nodes and their folder go with it
            raise

    def close(self) -> None:
        if self.run is not None:
            self.run.close()
            self.run = None

    def take(self, step: Any) -> None:
        if self.error is not None:
            raise BadRequest(f"the cluster stopped: {self.error}; go back to an earlier step")
        if len(self.steps) >= MAX_STEPS:
            raise BadRequest(f"a path of more than {MAX_STEPS} steps is not one to click through")
        number = len(self.steps) + 1
        try:
            check_step(step, self.run.node_ids, self.workload, number)
        except ScheduleError as e:
            raise BadRequest(str(e)) from None
        self.moved = None
        if step["op"] in ("deliver", "drop"):  # the message it takes out of its channel, to draw it moving
            waiting = self.run.in_flight_from(step["from"], step["to"])
            if waiting:
                m = waiting[min(step.get("nth", 0), len(waiting) - 1)]
                self.moved = (step["from"], m["dest"], _brief(m["body"]), step["op"])
        self.steps.append(step)
        try:
            self.run.run_step(step, number)
        except NodeProtocolError as e:
            self.error = str(e)

    def back(self, to: Any) -> None:
        if not isinstance(to, int) or isinstance(to, bool) or not 0 <= to <= len(self.steps):
            raise BadRequest(f"'to' must be a step number 0..{len(self.steps)}, not {to!r}")
        path, self.steps, self.error, self.moved = self.steps[:to], [], None, None
        self._fresh()
        for step in path:
            self.take(step)

    def save(self, name: Any) -> Path:
        if not isinstance(name, str) or not SAVE_NAME.fullmatch(name.removesuffix(".json")):
            raise BadRequest("the file name is letters, digits, '.', '_' and '-' (at most 80), e.g. "
                             f"my-bug.json, not {name!r}")
        schedule = self.schedule()
        run = self.run
        if run is not None:
            schedule.history = [{k: v for k, v in op.items() if k != "msg_id"} for op in run.ops]
            schedule.observations = list(run.observer.observations)
            schedule.findings = [str(f) for f in run.checker.findings + run.observer.findings]
        path = self.save_dir / (name.removesuffix(".json") + ".json")
        try:
            return schedule.save(path)
        except OSError as e:  # the folder went away or filled up since `hwm explore` checked it
            raise BadRequest(f"cannot write {path}: {e.strerror or e}") from None

    # ------------------------------------------------------------------ what the page shows
    def view(self) -> dict:
        run = self.run
        in_flight = []
        count: dict[tuple[str, str], int] = {}
        for msg in run.in_flight:  # each by its sender: the node whose link carries it (deliver's "from")
            pair = (sender(msg), msg["dest"])
            nth = count.get(pair, 0)
            count[pair] = nth + 1
            body = {k: v for k, v in msg["body"].items() if k not in ("msg_id", "in_reply_to")}
            in_flight.append({"from": pair[0], "to": msg["dest"], "nth": nth, "type": body.get("type"),
                              "text": _brief(body)})
        nodes = []
        for node in run.node_ids:
            proc = run.procs[node]
            seen = run.observer.latest.get(node)
            nodes.append({"node": node, "alive": proc.alive, "paused": proc.paused,
                          "pid": proc.proc.pid if proc.alive else None,
                          "role": seen["role"] if seen else None, "generation": seen["generation"] if seen else None,
                          "hwm": seen["hwm"] if seen else None,
                          "log": [g for _, g in seen["log"]] if seen else None})
        history = [{"id": op["id"], "client": op["client"], "node": op["node"], "step": op["step"],
                    "text": describe_op(op), "status": op["status"],
                    "reply": _brief(op["reply"]) if isinstance(op.get("reply"), dict) else None}
                   for op in run.ops]
        findings = [str(f) for f in run.checker.findings + run.observer.findings]
        return {"command": self.command, "nodes": nodes, "steps": [{"step": s, "label": describe(s)} for s in self.steps],
                "in_flight": in_flight, "history": history, "findings": findings, "error": self.error,
                "events": run.events[-1] if run.events else [], "offered": self.offered(in_flight, nodes),
                "svg": self.picture(in_flight, nodes, findings)}

    def offered(self, in_flight: list[dict], nodes: list[dict]) -> list[dict]:
        """The steps a click can take now, grouped for the page: the network, crashes and restarts,
        partitions, clients, the clock."""
        out = []
        for m in in_flight:
            for op in ("deliver", "drop"):
                step = {"op": op, "from": m["from"], "to": m["to"]}
                if m["nth"]:
                    step["nth"] = m["nth"]
                out.append({"group": "network", "step": step, "label": f"{describe(step)}: {m['type']}"})
        if in_flight:
            out.append({"group": "network", "step": {"op": "deliver_all"}, "label": "deliver_all()"})
        value = 1 + sum(1 for s in self.steps if s["op"] == "log_append")
        for n in nodes:
            fault = {"op": "kill" if n["alive"] else "restart", "node": n["node"]}
            out.append({"group": "faults", "step": fault, "label": describe(fault)})
        if self.run.group is not None:
            out.append({"group": "partitions", "step": {"op": "heal"}, "label": "heal() the partition"})
        elif len(nodes) > 2:  # cut one node off from the others; messages across the cut are lost
            for n in nodes:
                cut = {"op": "partition", "groups": [[n["node"]]]}
                out.append({"group": "partitions", "step": cut, "label": f"partition({n['node']} | the others)"})
        for n in nodes:
            if not n["alive"]:
                continue
            for step in ({"op": "log_append", "node": n["node"], "value": value},
                         {"op": "log_read", "node": n["node"], "index": max(1, n["hwm"] or 1)}):
                if self.workload == "log":
                    out.append({"group": "clients", "step": step, "label": describe(step)})
        out.append({"group": "clock", "step": {"op": "tick"}, "label": "tick() every node"})
        for n in nodes:
            if n["alive"]:
                step = {"op": "tick", "node": n["node"]}
                out.append({"group": "clock", "step": step, "label": describe(step)})
        return out

    def open_schedule(self, path: Path) -> None:
        """Take a saved schedule's steps (what `hwm test` found, or a path saved here) one by one:
        the page opens at its end, and any step can be gone back to. ScheduleError names what is wrong."""
        from hwm.bridge.maelstrom.schedule import load

        schedule = load(path)
        if schedule.workload != self.workload:
            raise ScheduleError(f"the explorer drives the {self.workload} workload; this schedule's is "
                                f"{schedule.workload}", file=path, field="workload")
        if schedule.nodes != self.nodes:
            self.nodes = schedule.nodes
            self._fresh()
        for number, step in enumerate(schedule.steps, 1):
            try:
                self.take(step)
            except BadRequest as e:
                raise ScheduleError(str(e), file=path, step=number) from None

    def picture(self, in_flight: list[dict], nodes: list[dict], findings: list[str]) -> str:
        """The cluster as the nodes report it (`hwm_state`), drawn as the model's states are, with
        each message in flight an arrow waiting in its channel; node k is drawn in row k."""
        names = [n["node"] for n in nodes]
        servers = tuple(ServerSnapshot(n["generation"] or 0, n["role"] or FOLLOWER, tuple(n["log"] or ()),
                                       n["hwm"] or 0, n["alive"]) for n in nodes)
        state = Snapshot(servers, frozenset(self.run.observer.reads))
        label = describe(self.steps[-1]) if self.steps else "(started)"
        # A property the nodes' reports break at this step: the picture's banner turns red, as the model's does.
        broken = {f.name: f.text for f in self.run.checker.findings + self.run.observer.findings
                  if f.step == len(self.steps) and self.steps}
        frame = Frame(len(self.steps), label, state, violations=broken)
        frame.messages = []
        if self.moved is not None:  # leaves its channel for its receiver, or is lost there
            src, dest, text, op = self.moved
            lost = op == "drop"
            frame.messages.append({"from": names.index(src), "to": names.index(dest), "label": ("lost: " if lost else "")
                                   + text, "kind": op, "order": 0, "start": 0.5, "stop": 0.5 if lost else 1.0,
                                   "lost": lost})
        frame.messages += [{"from": names.index(m["from"]), "to": names.index(m["to"]), "label": m["text"],
                            "kind": "in-flight", "order": 0, "start": 0.5, "stop": 0.5, "lost": False}
                           for m in in_flight if m["from"] in names and m["to"] in names]
        layout = Layout(len(servers), max([3] + [len(s.log) for s in servers]), max(2, len(frame.messages)))
        svg = draw(frame, layout)
        # The catalogue's names are S1..Sn; this cluster's nodes are n1..nN.
        return re.sub(r"\bS(\d+)\b", r"n\1", svg)


def _brief(body: dict) -> str:
    shown = {k: v for k, v in body.items() if k not in ("msg_id", "in_reply_to")}
    text = json.dumps(shown, separators=(",", ":"))
    return text if len(text) <= 100 else text[:99] + "\u2026"


# --------------------------------------------------------------- the server
def _handler(session: NodeSession):
    routes = {"/api/node/step": lambda body: session.take(body.get("step")),
              "/api/node/back": lambda body: session.back(body.get("to")),
              "/api/node/save": lambda body: {"saved": str(session.save(body.get("name")))}}

    class Handler(ExplorerHandler):  # the model explorer's logging and JSON answers; its own routes
        server_version = "hwm-node-explorer"
        static, max_body = STATIC, MAX_BODY

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            path = self.path.split("?", 1)[0]
            if path == "/":
                path = "/static/node.html"
            if path == "/api/node":
                with session.lock:
                    return self._json(HTTPStatus.OK, session.view())
            if not self._serve_static(path):
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no page {path}; the explorer is at /"})

        def do_POST(self) -> None:  # noqa: N802
            route = routes.get(self.path.split("?", 1)[0])
            if route is None:
                return self._json(HTTPStatus.NOT_FOUND, {"error": f"no API {self.path}; APIs are " + ", ".join(routes)})
            try:
                body = self._read_json()
                with session.lock:
                    extra = route(body) or {}
                    self._json(HTTPStatus.OK, dict(session.view(), **extra))
            except BadRequest as e:
                self._json(HTTPStatus.BAD_REQUEST, {"error": str(e)})
            except NodeProtocolError as e:  # the node failed to come up again while going back
                self._json(HTTPStatus.BAD_REQUEST, {"error": str(e)})
            except Exception as e:  # a bug must not stop the server a student is using
                self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"internal error: {type(e).__name__}: {e}"})

    return Handler


def make_server(session: NodeSession, host: str = "127.0.0.1", port: int = 0,
                verbose: bool = False) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer((host, port), _handler(session))
    server.daemon_threads = True
    server.verbose = verbose
    return server


def serve_in_thread(session: NodeSession, host: str = "127.0.0.1", port: int = 0):
    """Serve `session` from a background thread; returns the server and its URL (for tests)."""
    from hwm.teach.explorer import url_of

    server = make_server(session, host, port)
    threading.Thread(target=server.serve_forever, name="hwm-node-explorer", daemon=True).start()
    return server, url_of(server)


def serve_from_command_line(command: list[str], nodes: int, save_dir: Path, host: str, port: int, verbose: bool,
                            schedule: Path | None) -> int:
    """`hwm explore [--open FILE] -- CMD`: serve until Ctrl-C; the exit status (0, or 2 for bad input:
    a node program that does not start, a schedule it cannot run, a port it cannot listen on)."""
    import click

    from hwm.teach.explorer import serve_until_ctrl_c, url_of

    try:
        session = NodeSession(command, nodes, save_dir=save_dir)
    except NodeProtocolError as e:
        click.echo(f"hwm explore: the node program did not start: {e}", err=True)
        return 2
    except OSError as e:
        click.echo(f"hwm explore: cannot run {command[0]}: {e.strerror}", err=True)
        return 2
    try:
        if schedule is not None:
            try:
                session.open_schedule(schedule)
            except (ScheduleError, NodeProtocolError) as e:
                click.echo(f"hwm explore: {e}", err=True)
                return 2
        try:
            server = make_server(session, host, port, verbose)
        except OSError as e:
            click.echo(f"hwm explore: cannot listen on {host}:{port}: {e.strerror}", err=True)
            return 2
        serve_until_ctrl_c(server, f"hwm explorer of {' '.join(command)} at {url_of(server)}")
        return 0
    finally:
        session.close()
