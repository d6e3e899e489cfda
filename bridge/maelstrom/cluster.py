"""One run of a schedule against N copies of a node program: hwm is the network, the clients and the clock.

hwm speaks Maelstrom's protocol strictly: a node gets `init {node_id, node_ids}`, the workload's
requests, the services' replies and its peers' messages, nothing else, unless its `init_ok` declares
hwm's extensions (`"hwm": [...]`, `EXTENSIONS`). Its data directory is its current directory (also
`HWM_DATA_DIR`); the clock hwm keeps is in `HWM_CLOCK`.

Every node-to-node message goes into hwm's in-flight list and reaches its destination only when a
step delivers it, one at a time, in the schedule's order. After each input hwm writes to a node that
declared `hwm_state` it asks for the node's state and waits for the answer (an answer of any kind
tells hwm the node has handled everything before it); any other node is given a short quiet period
instead, and what it says later is routed when it comes. A service (lin-kv, seq-kv, lww-kv) is a
node of the network: its requests and replies are in flight until delivered. So with the virtual clock and a node whose behaviour depends only on its inputs, a schedule yields
the same history every time.

Every wait is bounded (`Limits`). A run ends after its steps and a final phase, Maelstrom's recovery
period: heal, resume, restart, then rounds of tick + deliver-all until every request is answered,
and reads of everything clients were shown, again and again until every node serves it or the
phase's budget is spent (`final_rounds` on the virtual clock, `settle_seconds` on the wall clock), so
a node that forwards requests or replicates on a timer has its chance. Every process is killed when
the run closes, whatever ends it.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import random
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from hwm.bridge.maelstrom.history import Finding, HistoryChecker, describe_op, final_read_requests
from hwm.bridge.maelstrom.lin_kv import LinKVChecker
from hwm.bridge.maelstrom.observe import ObservationError, Observer, describe_observation, parse_state
from hwm.bridge.maelstrom.process import EOF_LINE, NodeProcess, kill_all
from hwm.bridge.maelstrom.protocol import (INDEFINITE, MAX_LINE_BYTES, NOT_SUPPORTED, REPLIES, SENT_BY, SERVICES,
                                       NodeProtocolError, parse_line, sender)
from hwm.bridge.maelstrom.schedule import Schedule, ScheduleError, check_step, describe
from hwm.bridge.maelstrom.services import services
from hwm.bridge.maelstrom.validation import ModelSteps, steps_against_model

HWM_CLIENT = "c0"  # hwm's own client id: init, hwm_state and hwm_tick come from it
KAFKA_OFFSETS_ARE_INDEXES = "log-index"  # hwm_state_ok's optional `kafka_offsets`
WALL_TICK_MS = 50
# What a node may declare in init_ok's "hwm" list: the messages of hwm's it answers, and the faults
# beyond Maelstrom's it is built to survive. Nothing else is ever sent to a node, nor done to it.
EXTENSIONS = {
    "hwm_state": "answers hwm_state with its generation, role, log and high-water mark",
    "hwm_tick": "follows hwm's virtual clock (hwm_tick) and runs no timers of its own under it",
    "kill": "keeps its state in its data directory: a SIGKILL and a restart are fair",
    "duplicate": "tolerates a message delivered twice",
}


@dataclass
class Limits:
    init_seconds: float = 10.0  # a node that has not answered init by then is broken
    barrier_seconds: float = 2.0  # longest wait for a node's answer to hwm_state
    quiet_seconds: float = 0.03  # for a node that does not answer hwm_state: this long without output = done
    # More lines than this from one node in one step, with no input of hwm's to it between them, is a
    # flood. Counted from its last input: a step of the wall clock lasts as long as its deliveries
    # take, and a node answers each input (hwm_state's answer at least), so a long step of a busy
    # correct node (a Kafka controller's node hearing every broker's heartbeats) is no flood.
    lines_per_step: int = 10_000
    first_rounds: int = 12  # rounds of tick + deliver-all after healing before the first final reads
    final_rounds: int = 40  # virtual clock: the final phase's most rounds of tick + deliver-all
    settle_seconds: float = 10.0  # wall clock: the final phase's longest wait (Maelstrom's recovery time)
    deliver_all_seconds: float = 5.0  # wall clock: a deliver_all's longest run (`Run._deliver_all`)
    # A request never answered is indeterminate (Maelstrom's :info), reported as availability; True
    # makes it a finding (NoReply), for a node that must answer every request once the network heals.
    replies_required: bool = False
    # The lin-kv workload: the linearizability search's budget per run, all keys together; a key not
    # decided by then is reported undecided, never a finding.
    linearizable_seconds: float = 10.0


@dataclass
class RunResult:
    schedule: Schedule
    findings: list[Finding] = field(default_factory=list)
    history: list[dict] = field(default_factory=list)
    observations: list[dict] = field(default_factory=list)
    protocol_error: NodeProtocolError | None = None
    unanswered: list[dict] = field(default_factory=list)  # requests never answered: indeterminate
    undecided: list[str] = field(default_factory=list)  # lin-kv: keys the search did not decide in time
    stepping_undecided: str | None = None  # --protocol: stepping stopped at the validator's bound, no finding
    steps_run: int = 0
    events: list[list[str]] = field(default_factory=list)  # per step (index 0: start-up), what happened
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return bool(self.findings) or self.protocol_error is not None

    def operations(self) -> int:
        return sum(1 for op in self.history if op.get("step") is not None)


_OPEN_ROOTS: set[Path] = set()  # the nodes' folders of runs not closed yet


def _remove_open_roots() -> None:
    """At exit, the folders of runs a Ctrl-C left before their close (its nodes killed first: they write there)."""
    kill_all()
    for root in list(_OPEN_ROOTS):
        shutil.rmtree(root, ignore_errors=True)
        _OPEN_ROOTS.discard(root)


atexit.register(_remove_open_roots)


class Run:
    def __init__(self, command: list[str], schedule: Schedule, limits: Limits | None = None,
                 data_root: Path | None = None):
        self.command, self.schedule = absolute_paths(command), schedule
        self.limits = limits or Limits()
        self.node_ids = schedule.node_ids()
        self.own_root = data_root is None
        self.root = Path(tempfile.mkdtemp(prefix="hwm-nodes-")) if data_root is None else Path(data_root)
        if self.own_root:
            _OPEN_ROOTS.add(self.root)
        try:
            self._set_up(schedule)
        except BaseException:  # a Ctrl-C or an error before the run exists: its folder must not outlive it
            self._remove_root()
            raise

    def _set_up(self, schedule: Schedule) -> None:
        self.lines: queue.Queue = queue.Queue()
        self.procs = {n: NodeProcess(n, self.command, self.root / n, self.lines) for n in self.node_ids}
        self.clients = [f"c{k}" for k in range(1, len(self.node_ids) + 1)]
        self.known = {*self.node_ids, *self.clients, HWM_CLIENT, *SERVICES}
        self.rng = random.Random(schedule.seed)
        self.services = services(self.rng)
        self.in_flight: list[dict] = []  # node-to-node messages, in the order they were sent
        self.held: dict[str, list[str]] = {n: [] for n in self.node_ids}  # input for a paused node
        self.group: dict[str, int] | None = None  # partition: node -> its side
        self.ops: list[dict] = []
        self.op_by_request: dict[tuple[str, int], dict] = {}
        self.next_msg_id = 0
        self.awaiting: dict[str, int | None] = {n: None for n in self.node_ids}  # hwm_state id awaited
        self.introspects: dict[str, bool | None] = {n: None for n in self.node_ids}
        self.extensions: dict[str, frozenset] = {}  # node -> what its init_ok declared (EXTENSIONS)
        # Nodes whose hwm_state_ok says `"kafka_offsets": "log-index"`: a kafka offset is the index of
        # the entry in the log the node shows, so sends and polls are checked as log_append and log_read.
        self.offsets_are_indexes: set[str] = set()
        self.barrier_ok: dict[str, bool] = {n: True for n in self.node_ids}
        self.lines_this_step: dict[str, int] = {}
        self.killed_by_us: set[str] = set()
        self.checker = (LinKVChecker(self.limits.linearizable_seconds) if schedule.workload == "lin-kv"
                        else HistoryChecker())
        self.observer = Observer(self.node_ids)
        if steps_against_model(schedule.protocol):  # the preset the node implements: step each change against it
            self.observer.model_steps = ModelSteps(schedule.protocol, self.node_ids)
            self.observer.always = self.observer.model_steps.always()
        self.step_number: int | None = 0
        self.cause = "start-up"
        self.events: list[list[str]] = [[]]
        self.final_ops: list[dict] = []
        self.unanswered: list[dict] = []
        self.init_waiting: dict[str, int] = {}  # node -> the msg_id of the init it has not answered
        self.initialised: set[str] = set()
        self.last_line_at: dict[str, float] = {}

    # ---- life cycle ------------------------------------------------------------------------
    def start(self) -> None:
        for node in self.node_ids:
            self.procs[node].start(clock=self.schedule.clock)
        self._init(*self.node_ids)  # all at once: a node that takes seconds to start costs them once
        if self.schedule.clock == "virtual":
            for node in self.node_ids:
                if "hwm_tick" not in self.extensions[node]:
                    raise NodeProtocolError(node, "does not follow hwm's virtual clock: its init_ok declares no "
                                                  '"hwm_tick" (a node that does says "hwm": ["hwm_tick"] in init_ok); '
                                                  "run it with --clock wall")

    def declared(self, extension: str) -> bool:
        """Whether every node declared `extension` in its init_ok (all run the same program)."""
        return all(extension in self.extensions.get(n, ()) for n in self.node_ids)

    def close(self) -> None:
        for proc in self.procs.values():
            proc.kill()
        self._remove_root()

    def _remove_root(self) -> None:
        if self.own_root:
            shutil.rmtree(self.root, ignore_errors=True)
            _OPEN_ROOTS.discard(self.root)

    def _init(self, *nodes: str) -> None:
        """Send `nodes` Maelstrom's init and wait for every init_ok (each within init_seconds)."""
        for node in nodes:
            msg_id = self._msg_id()
            # Exactly Maelstrom's init: a node may build a record from every field it is given.
            body = {"type": "init", "msg_id": msg_id, "node_id": node, "node_ids": self.node_ids}
            self.procs[node].write(self._line(HWM_CLIENT, node, body))
            self.init_waiting[node] = msg_id
        deadline = time.monotonic() + self.limits.init_seconds
        before = len(self.in_flight)
        while self.init_waiting:
            # Lines from other nodes keep coming on the wall clock: the deadline is checked apart.
            if time.monotonic() > deadline or not self._route_next(deadline - time.monotonic()):
                node, msg_id = min(self.init_waiting.items(), key=lambda item: self.node_ids.index(item[0]))
                raise NodeProtocolError(node, f"did not answer init within {self.limits.init_seconds:g} s "
                                              "(it must reply {\"type\": \"init_ok\", \"in_reply_to\": "
                                              f"{msg_id}}})" + self._log_note(node))
        # What the nodes sent while starting, in the order of the nodes, each sender's own order
        # kept: the same schedule gives the same network whichever node answered first.
        started = sorted(self.in_flight[before:], key=lambda m: self.node_ids.index(sender(m)))
        self.in_flight[before:] = started
        for node in nodes:
            self._barrier(node)

    # ---- writing to nodes ------------------------------------------------------------------
    def _msg_id(self) -> int:
        self.next_msg_id += 1
        return self.next_msg_id

    @staticmethod
    def _line(src: str, dest: str, body: dict) -> str:
        return json.dumps({"src": src, "dest": dest, "body": body}, separators=(",", ":"))

    def _input(self, node: str, line: str) -> bool:
        """Give `node` one line and wait until it has handled it; False when the node is down."""
        proc = self.procs[node]
        if not proc.alive:
            return False
        if proc.paused:
            self.held[node].append(line)
            return True
        proc.write(line)
        self._barrier(node)
        return True

    def _barrier(self, node: str) -> None:
        proc = self.procs[node]
        if not proc.alive or proc.paused:
            return
        self.lines_this_step[node] = 0  # it was just given an input: what it says now is its answer
        if self.barrier_ok[node] and "hwm_state" in self.extensions.get(node, ()):
            msg_id = self._msg_id()
            self.awaiting[node] = msg_id
            proc.write(self._line(HWM_CLIENT, node, {"type": "hwm_state", "msg_id": msg_id}))
            deadline = time.monotonic() + self.limits.barrier_seconds
            while self.awaiting[node] == msg_id and proc.alive:
                if time.monotonic() > deadline or not self._route_next(deadline - time.monotonic()):
                    self.barrier_ok[node] = False  # it ignores hwm_state: fall back to quiet periods
                    self.awaiting[node] = None
                    break
            if self.barrier_ok[node]:
                return
        # No barrier: wait until this node has been quiet for a while (others may go on talking),
        # and never longer than a barrier would have waited.
        began = time.monotonic()
        while time.monotonic() - began < self.limits.barrier_seconds:
            quiet_for = time.monotonic() - max(self.last_line_at.get(node, 0.0), began)
            if quiet_for >= self.limits.quiet_seconds:
                break
            self._route_next(self.limits.quiet_seconds - quiet_for)

    # ---- reading from nodes ----------------------------------------------------------------
    def _route_next(self, timeout: float) -> bool:
        """Route one line from any node; False when none came within `timeout` seconds."""
        try:
            node, incarnation, raw = self.lines.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return False
        self._route(node, incarnation, raw)
        return True

    def drain(self, seconds: float = 0.0) -> None:
        """Route everything the nodes print in the next `seconds` (at least what is already there)."""
        deadline = time.monotonic() + seconds
        while self._route_next(max(0.0, deadline - time.monotonic())):
            pass

    def _log_note(self, node: str) -> str:
        tail = self.procs[node].log_tail()
        return f"\n  its log (stderr) ends:\n{tail}" if tail else ""

    def _route(self, node: str, incarnation: int, raw) -> None:
        proc = self.procs[node]
        if raw is EOF_LINE:
            if incarnation == proc.incarnation and node not in self.killed_by_us:
                proc.proc.wait()
                at = ("at start-up, before init_ok" if node not in self.initialised else
                      f"at step {self.step_number}" if self.step_number is not None else f"during {self.cause}")
                raise NodeProtocolError(node, f"{proc.exit_description()} on its own {at} "
                                              "(hwm did not kill it)" + self._log_note(node))
            return
        self.last_line_at[node] = time.monotonic()
        count = self.lines_this_step.get(node, 0) + 1
        self.lines_this_step[node] = count
        if count > self.limits.lines_per_step or len(raw) > MAX_LINE_BYTES:
            what = (f"more than {self.limits.lines_per_step} lines in one step, with no input between them"
                    if count > self.limits.lines_per_step
                    else f"a line longer than {MAX_LINE_BYTES} bytes")
            raise NodeProtocolError(node, f"flooded stdout: {what}",
                                    raw.decode("utf-8", errors="replace")[:300])
        msg = parse_line(node, raw, self.known)
        dest, body = msg["dest"], msg["body"]
        if dest in self.procs:
            self.in_flight.append(msg)
            passed_on = f" from {msg['src']}" if msg["src"] != node else ""
            self._event(f"{node}→{dest} {body['type']}{passed_on} (in flight)")
        elif dest in self.services:
            if node in self.initialised:
                # A service is a node of Maelstrom's network: its requests and replies take a delivery
                # each, so two nodes' read-then-write on one key can interleave, as they do there.
                self.in_flight.append(msg)
                self._event(f"{node}→{dest} {_brief(body)} (in flight)")
            else:
                self._service(msg)
        elif dest == HWM_CLIENT:
            self._own_reply(node, body, raw)
        else:
            self._client_reply(node, dest, body, raw)

    def init_waiting_for(self, node: str) -> bool:
        return node in self.init_waiting

    def _own_reply(self, node: str, body: dict, raw) -> None:
        reply_to = body.get("in_reply_to")
        if self.init_waiting_for(node) and reply_to == self.init_waiting[node]:
            if body["type"] != "init_ok":
                raise NodeProtocolError(node, f"answered init with {body['type']!r}; expected 'init_ok'",
                                        raw.decode(errors="replace"))
            self.extensions[node] = declared_extensions(node, body, raw.decode(errors="replace"))
            del self.init_waiting[node]
            self.initialised.add(node)
            return
        if body["type"] == "hwm_state_ok":
            try:
                state = parse_state(body)
            except ObservationError as e:
                raise NodeProtocolError(node, str(e), raw.decode(errors="replace"))
            self.introspects[node] = True
            if body.get("kafka_offsets") == KAFKA_OFFSETS_ARE_INDEXES:
                self.offsets_are_indexes.add(node)
            self._observed(lambda: self.observer.observe(node, self.step_number, self.cause, state))
        elif body["type"] == "error" and body.get("code") == NOT_SUPPORTED:
            self.introspects[node] = False
        elif body["type"] != "error":
            raise NodeProtocolError(node, f"answered hwm's request with unknown type {body['type']!r} "
                                          "(expected init_ok, hwm_state_ok or an error)", raw.decode(errors="replace"))
        if reply_to is not None and reply_to == self.awaiting[node]:
            self.awaiting[node] = None
            self.barrier_ok[node] = True

    def _client_reply(self, node: str, client: str, body: dict, raw) -> None:
        op = self.op_by_request.get((client, body.get("in_reply_to")))
        line = raw.decode(errors="replace")
        if op is None:
            raise NodeProtocolError(node, f"sent {client} a {body['type']!r} in reply to a request it was never "
                                          f"sent (in_reply_to {body.get('in_reply_to')!r})", line)
        expected = REPLIES[op["type"]]
        if body["type"] not in (expected, "error"):
            raise NodeProtocolError(node, f"answered {op['type']} with unknown type {body['type']!r} "
                                          f"(expected {expected!r} or 'error')", line)
        if op["status"] != "pending":
            self._event(f"{node}→{client} answered op {op['id']} a second time (ignored)")
            return
        op["reply"], op["reply_step"] = body, self.step_number
        if body["type"] == "error":
            op["status"] = "info" if body.get("code") in INDEFINITE else "fail"
        else:
            op["status"] = "ok"
        self._event(f"{node}→{client} {_brief(body)} (op {op['id']})")
        if op["status"] == "ok":
            before = len(self.checker.findings)
            self.checker.on_reply(op, self.step_number)
            if op["type"] == "log_append" and isinstance(body.get("index"), int):
                self.observer.acknowledge(node, body["index"], describe_op(op))
            if op["type"] == "log_read" and isinstance(body.get("index"), int):
                self._observed(lambda: self.observer.read_served(node, body["index"], self.step_number,
                                                                 f"{self.cause}: {describe_op(op)}"))
            if node in self.offsets_are_indexes:
                self._kafka_offsets_checked(node, op, body)
            for finding in self.checker.findings[before:]:
                self._event(f"FINDING {finding}")
        else:
            self.checker.on_error(op, self.step_number)

    def _kafka_offsets_checked(self, node: str, op: dict, body: dict) -> None:
        """A node whose kafka offsets are log indexes: an acknowledged send is an acknowledged append at
        its offset, each polled message a read of its offset (judged on the node's next state)."""
        if op["type"] == "send" and type(body.get("offset")) is int:
            self.observer.acknowledge(node, body["offset"], describe_op(op), "send")
        elif op["type"] == "poll" and isinstance(body.get("msgs"), dict):
            offsets = sorted({pair[0] for pairs in body["msgs"].values() if isinstance(pairs, list) for pair in pairs
                              if isinstance(pair, list) and len(pair) == 2 and type(pair[0]) is int})
            for offset in offsets:
                self._observed(lambda: self.observer.read_served(node, offset, self.step_number,
                                                                 f"{self.cause}: {describe_op(op)}", "poll"))

    def _observed(self, observe) -> None:
        """Run one observer call; what it adds (a changed state, a finding) goes into the step's events."""
        seen, found = len(self.observer.observations), len(self.observer.findings)
        observe()
        for observation in self.observer.observations[seen:]:
            self._event(f"now {describe_observation(observation)}")
        for finding in self.observer.findings[found:]:
            self._event(f"FINDING {finding}")

    def in_flight_from(self, src: str, dest: str) -> list[dict]:
        """The messages node `src` printed for `dest` that the network still holds, oldest first (by
        their sender: a message a node passed on keeps another's `src`)."""
        return [m for m in self.in_flight if sender(m) == src and m["dest"] == dest]

    def _event(self, text: str) -> None:
        self.events[-1].append(text)

    # ---- steps -----------------------------------------------------------------------------
    def run_step(self, step: dict, number: int | None) -> None:
        inner = self.step_number == number and number is not None and self.cause.startswith("settle")
        self.step_number, self.cause = number, describe(step) if not inner else self.cause
        if not inner:
            self.events.append([])
            self.lines_this_step = {}
        op = step["op"]
        if op in REPLIES:
            self._client_request(step)
        elif op in ("deliver", "drop", "duplicate"):
            matching = self.in_flight_from(step["from"], step["to"])
            if not matching:
                self._event(f"nothing in flight from {step['from']} to {step['to']}")
            else:
                msg = matching[min(step.get("nth", 0), len(matching) - 1)]
                if op != "duplicate":
                    self.in_flight.remove(msg)
                if op == "drop":
                    self._event(f"dropped {msg['src']}→{msg['dest']} {msg['body']['type']}")
                else:
                    self._deliver(msg)
        elif op == "deliver_all":
            self._deliver_all()
        elif op == "partition":
            self.group = {}
            for side, nodes in enumerate(step["groups"]):
                for node in nodes:
                    self.group[node] = side
            for node in self.node_ids:
                self.group.setdefault(node, len(step["groups"]))
        elif op == "heal":
            self.group = None
        elif op == "kill":
            self._kill(step["node"])
        elif op == "restart":
            self._restart(step["node"])
        elif op == "pause":
            self.procs[step["node"]].pause()
        elif op == "resume":
            self._resume(step["node"])
        elif op == "tick":
            if self.schedule.clock == "wall":
                self.drain(WALL_TICK_MS / 1000)
            else:
                for node in [step["node"]] if "node" in step else self.node_ids:
                    self._input(node, self._line(HWM_CLIENT, node, {"type": "hwm_tick"}))
        elif op == "wait":
            self.drain(step["ms"] / 1000)
        elif op == "settle":
            for _ in range(step["rounds"]):
                self.run_step({"op": "tick"}, number)
                self.run_step({"op": "deliver_all"}, number)
            self.step_number, self.cause = number, describe(step)
        else:  # a real server's step (schedule.SERVER_STEPS): refused when the schedule is read
            raise ScheduleError(f"{op} is a step of a real server's run, not of node programs", step=number,
                                field="op")
        self.drain()

    def _deliver_all(self) -> None:
        """Deliver everything in flight at the start, oldest first (what is sent meanwhile waits for
        the next). On the wall clock for at most `deliver_all_seconds`: the rest stays in flight, ahead
        of what was sent since. Each delivery waits for the node's answer, while the nodes' timers run
        on in real time: a loaded machine may deliver more slowly than five Kafka brokers heartbeat,
        and a round that took a minute would leave more for the next one, without end."""
        batch, self.in_flight = self.in_flight, []
        deadline = (time.monotonic() + self.limits.deliver_all_seconds if self.schedule.clock == "wall"
                    else None)
        delivered = 0
        try:
            for msg in batch:
                if deadline is not None and delivered and time.monotonic() > deadline:
                    self._event(f"{len(batch) - delivered} messages left in flight after "
                                f"{self.limits.deliver_all_seconds:g} s of deliveries")
                    break
                delivered += 1
                self._deliver(msg)
        finally:
            self.in_flight = batch[delivered:] + self.in_flight

    def _service(self, msg: dict) -> None:
        """A service answers a request it just received; its reply goes back at once during a node's
        start-up, else into the network (in flight, like any other message)."""
        node, dest, body = msg["src"], msg["dest"], msg["body"]
        reply = self.services[dest].handle(node, body)
        reply = dict(reply, msg_id=self._msg_id(), in_reply_to=body.get("msg_id"))
        self._event(f"{node}→{dest} {_brief(body)}; {dest} answers {_brief(reply)}")
        if node not in self.procs:  # a client's request a node passed on: the service answers the client
            self._client_reply(dest, node, reply, json.dumps(reply).encode())
        elif node in self.initialised:
            self.in_flight.append({"src": dest, "dest": node, "body": reply})
        else:
            self._input(node, self._line(dest, node, reply))

    def _deliver(self, msg: dict) -> None:
        src, dest = msg["src"], msg["dest"]
        if dest in self.services:
            self._service(msg)  # services stand apart from partitions, as in Maelstrom
            return
        if self.group is not None and src in self.group and self.group[src] != self.group[dest]:
            self._event(f"{src}→{dest} {msg['body']['type']} lost to the partition")
            return
        if not self.procs[dest].alive:
            self._event(f"{src}→{dest} {msg['body']['type']} lost: {dest} is down")
            return
        self._event(f"{src}→{dest} {msg['body']['type']} delivered")
        self._input(dest, json.dumps({k: v for k, v in msg.items() if k != SENT_BY}, separators=(",", ":")))

    def _client_request(self, step: dict) -> dict:
        node = step["node"]
        request = {k: v for k, v in step.items() if k not in ("op", "node")}
        op = self._new_op(node, step["op"], request, self.step_number)
        if not self._input(node, self._line(op["client"], node, dict(request, type=op["type"], msg_id=op["msg_id"]))):
            op["status"], op["reply"] = "info", {"note": f"{node} is down"}
            self._event(f"op {op['id']}: {node} is down")
        return op

    def _new_op(self, node: str, kind: str, request: dict, step) -> dict:
        client = self.clients[self.node_ids.index(node)]
        op = {"id": len(self.ops) + 1, "client": client, "node": node, "step": step, "type": kind,
              "request": request, "status": "pending", "reply": None, "reply_step": None,
              "msg_id": self._msg_id()}
        self.ops.append(op)
        self.op_by_request[(client, op["msg_id"])] = op
        self.checker.on_request(op)
        self._event(f"{client}→{node} {kind} {json.dumps(request, separators=(',', ':'))} (op {op['id']})")
        return op

    def _kill(self, node: str) -> None:
        proc = self.procs[node]
        if not proc.alive:
            return
        self.killed_by_us.add(node)
        proc.kill()
        self.held[node].clear()
        self.awaiting[node] = None
        for op in self.ops:
            if op["node"] == node and op["status"] == "pending":
                op["status"], op["reply"] = "info", {"note": f"{node} was killed before it answered"}
        self._event(f"{node} killed (SIGKILL); its data directory stays")
        self._observed(lambda: self.observer.observe(node, self.step_number, self.cause, None, alive=False))

    def _restart(self, node: str) -> None:
        proc = self.procs[node]
        if proc.alive:
            return
        self.killed_by_us.discard(node)
        proc.start(clock=self.schedule.clock)
        self._event(f"{node} restarted on {proc.data_dir}")
        self._init(node)

    def _resume(self, node: str) -> None:
        proc = self.procs[node]
        if not proc.paused:
            return
        proc.resume()
        held, self.held[node] = self.held[node], []
        for line in held:  # one at a time, each observed: a change per input, as when it ran
            proc.write(line)
            self._barrier(node)
        if not held:
            self._barrier(node)

    # ---- the whole run ---------------------------------------------------------------------
    def finish(self) -> None:
        """Maelstrom's recovery period: heal, resume, restart, let every request be answered, read
        everything back until it is served (or the budget is spent), then judge."""
        self.step_number, self.cause = None, "the final phase"
        self.events.append([])
        self.lines_this_step = {}
        self.group = None
        for node in self.node_ids:
            self._resume(node)
            self._restart(node)
        budget = FinalBudget(self.schedule.clock, self.limits)
        # First the cluster gets a few rounds to find its leader again (a read before that would see
        # what a truncation is about to remove), then as many as the requests still open need: a
        # forwarded one needs its peer's answer, then its own.
        for _ in range(self.limits.first_rounds):
            if budget.take(share=0.5):
                self._final_round()
        while any(op["status"] == "pending" for op in self.ops) and budget.take(share=0.5):
            self._final_round()
        self.step_number, self.cause = None, "the final reads"
        while True:
            requests = final_read_requests(self.schedule.workload, self.checker)
            if not requests:
                break
            asked = []
            for request in requests:
                for node in self.node_ids:
                    op = self._new_op(node, request["type"], {k: v for k, v in request.items() if k != "type"}, None)
                    asked.append(op)
                    self._input(node, self._line(op["client"], node, dict(request, msg_id=op["msg_id"])))
            self.final_ops.extend(asked)
            while any(op["status"] == "pending" for op in asked) and budget.take():
                self._final_round()
            # Served everywhere it must be: done. Else a node on a timer may serve it later: read again
            # (each read of everything counts as a round of the budget).
            if not self.checker.unserved(self.final_ops) or not budget.take():
                break
            for _ in range(budget.rounds_between_reads):
                if budget.take():
                    self._final_round()
        self._observed(self.observer.finish)
        self.checker.at_end(self.final_ops, f"after healing and {budget.spent()}")
        self.unanswered = [op for op in self.ops if op["status"] == "pending"]
        if self.limits.replies_required:
            for op in self.unanswered:
                self.checker.findings.append(Finding(
                    "NoReply", f"{describe_op(op)} got no reply by the end of the run (after healing and "
                               f"{budget.spent()})", op["step"]))

    def _final_round(self) -> None:
        self.run_step({"op": "tick"}, None)
        self.run_step({"op": "deliver_all"}, None)


class FinalBudget:
    """How long the final phase may go on: rounds on the virtual clock, seconds on the wall clock
    (where a round is a tick's 50 ms of the nodes' own timers and the delivery of all in flight)."""

    def __init__(self, clock: str, limits: Limits):
        self.clock, self.limits = clock, limits
        self.began, self.rounds = time.monotonic(), 0
        # Between two reads of everything: a few rounds, for what is still on its way.
        self.rounds_between_reads = 4 if clock == "virtual" else 5

    def used(self) -> float:
        """The share of the budget spent: rounds taken on the virtual clock, time on the wall clock."""
        if self.clock == "virtual":
            return self.rounds / max(1, self.limits.final_rounds)
        return (time.monotonic() - self.began) / max(1e-9, self.limits.settle_seconds)

    def take(self, share: float = 1.0) -> bool:
        """One more round, while less than `share` of the budget is spent (waiting for open requests
        takes at most half: the reads get the rest)."""
        if self.used() >= share:
            return False
        self.rounds += 1
        return True

    def spent(self) -> str:
        if self.clock == "virtual":
            return f"{self.rounds} rounds of ticks and deliveries"
        return f"{time.monotonic() - self.began:.1f} s of the nodes' own timers and deliveries"


def declared_extensions(node: str, body: dict, line: str) -> frozenset:
    """The extensions an init_ok declares (`"hwm": [...]`, names from EXTENSIONS); none when absent."""
    declared = body.get("hwm", [])
    if not isinstance(declared, list) or not all(isinstance(x, str) for x in declared):
        raise NodeProtocolError(node, 'init_ok\'s "hwm" must be a list of extension names '
                                      f"({', '.join(EXTENSIONS)})", line)
    unknown = [x for x in declared if x not in EXTENSIONS]
    if unknown:
        raise NodeProtocolError(node, f"init_ok declares unknown hwm extension {unknown[0]!r}; "
                                      f"known: {', '.join(EXTENSIONS)}", line)
    return frozenset(declared)


def absolute_paths(command: list[str]) -> list[str]:
    """The command with each argument that names an existing relative path made absolute, a variant's
    file in `path/to/file.py:Name` too (docs/variants.md): nodes run in their data directories, so
    `./mynode`, `examples/nodes/log_node.py` or `--protocol examples/variants/flexible.py:Flexible`
    would not resolve. Symbolic links are kept: `.venv/bin/python` is a link to the interpreter it was
    made from, and only through the link does Python find the virtual environment's packages."""
    def relative(arg: str) -> bool:
        return not Path(arg).is_absolute() and ("/" in arg or Path(arg).is_file()) and Path(arg).exists()

    absolute = []
    for arg in command:
        path, colon, name = arg.rpartition(":")
        if relative(arg):
            arg = os.path.abspath(arg)
        elif colon and path.endswith(".py") and relative(path):
            arg = f"{os.path.abspath(path)}:{name}"
        absolute.append(arg)
    return absolute


def _brief(body: dict) -> str:
    shown = {k: v for k, v in body.items() if k not in ("type", "msg_id", "in_reply_to")}
    text = json.dumps(shown, separators=(",", ":"))
    return f"{body.get('type')} {text if len(text) < 120 else text[:117] + '...'}"


def result_of(run: Run, result: RunResult) -> RunResult:
    """Fill `result` with what `run` saw (findings, history, observations, per-step events)."""
    result.findings = run.checker.findings + run.observer.findings
    result.history = [{k: v for k, v in op.items() if k != "msg_id"} for op in run.ops]
    result.unanswered = run.unanswered
    result.undecided = list(getattr(run.checker, "undecided", []))
    if run.observer.model_steps is not None:
        result.stepping_undecided = run.observer.model_steps.undecided
    result.observations = run.observer.observations
    result.events = run.events
    return result


def run_schedule(command: list[str], schedule: Schedule, limits: Limits | None = None,
                 data_root: Path | None = None, on_step=None) -> RunResult:
    """Run `schedule` against `command`; every process is gone when this returns (or raises).

    `on_step(number, step, run)` is called after each step (the replay narrates with it)."""
    began = time.monotonic()
    result = RunResult(schedule)
    run = Run(command, schedule, limits, data_root)
    try:
        try:
            run.start()
            for number, step in enumerate(schedule.steps, 1):
                check_step(step, run.node_ids, schedule.workload, number)
                run.run_step(step, number)
                result.steps_run = number
                if on_step is not None:
                    on_step(number, step, run)
            run.finish()
        except NodeProtocolError as e:
            result.protocol_error = e
    finally:
        run.close()
    result_of(run, result)
    result.seconds = time.monotonic() - began
    return result
