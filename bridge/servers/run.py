"""One schedule against a cluster of real servers: the steps, the client history, the status samples.

A schedule is an ordinary `hwm-schedule/1` (schedule.py) on the wall clock, of the log workload:
`log_append` and `log_read` (with `"serializable": true`, a read the member may serve from its own
copy), `concurrent` (its requests sent at once, each by a client of its own, c<i>.<k>), `kill`,
`restart`, `pause`, `resume`, `partition`, `heal`, `wait`, `power_fail` (SIGKILL, every write and
directory entry the member did not fsync dropped, or with `keep_seed` what its disk does not keep,
a restart: its data directory is a mount of powerfs.py's filesystem, of the schedule's
`filesystem`; with `during`, its requests sent at once as a `concurrent` step's and the power
cut `after_ms` later, while they are in flight, the answers that come collected before the
restart), and the planted `rollback`: the down member's data directory replaced by the copy
kept once the cluster first served (lifecycle.py's `keep_copy`), as an operator restoring an old
backup would. Requests go one at a time, each bounded by the client's timeout, unless a
`concurrent` step sends several at once; the client of node n<i> is c<i>. The history is checked
by the log workload's checks (history.py: ReadNeverTruncated, AckedNeverLost, OneValuePerOffset),
online and after the final phase, and the staleness of its local reads is counted
(`local_read_staleness`). The lin-kv workload (`read`, `write`, `cas` of integer keys) is judged at the end by lin_kv.py: each
key's history must be a register's (Linearizable). A refusal carries Maelstrom's code (20, an
offset or key with nothing there; 22, a cas whose key held another value); any other definite
error is 11 on a write, and on a read makes it indeterminate, like an indeterminate error (0): a
read that got no answer says nothing of what is stored. A member that exits on its own (etcd
refuses to run on a log that lost entries it had acknowledged) is told in the step's events.

After every step each member that runs is asked its status (the adapter's probe), and the samples
are checked against the catalogue's properties that a member's own status shows (`StatusChecks`):
- `HwmNeverTruncated`: a member's commit index (its high-water mark) never goes below one it showed
  before, across restarts on the same data directory too: what a member said is committed is on its
  disk (a kill -9 keeps what was written).
etcd's status pairs its leader with the term of the last entry it *applied*, not the term it leads:
a new leader says the old term until its first entry is applied, so "one leader per term" is not
checked on it (it would report two leaders of one term in a correct cluster).

The final phase is Maelstrom's recovery period: heal, resume, restart what is down, wait until the
cluster serves, then read every offset the history acknowledged or read from every member, again
until each is served or `settle_seconds` is spent.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from hwm.bridge.maelstrom.cluster import RunResult
from hwm.bridge.maelstrom.history import Finding, HistoryChecker, describe_op, final_read_requests
from hwm.bridge.maelstrom.lin_kv import LinKVChecker
from hwm.bridge.maelstrom.protocol import KEY_DOES_NOT_EXIST, PRECONDITION_FAILED, TEMPORARILY_UNAVAILABLE, TIMEOUT
from hwm.bridge.maelstrom.schedule import Schedule, check_step, describe
from hwm.bridge.servers.adapter import Definite, Indefinite, Server, ServerError
from hwm.bridge.servers.lifecycle import ServerCluster

WORKLOADS = ("log", "lin-kv")
CLIENT_OPS = ("log_append", "log_read", "read", "write", "cas")
READS = ("log_read", "read")


class Refused(Definite):
    """A definite answer with Maelstrom's error code: a read of a key never written, a cas refused."""

    def __init__(self, code: int, text: str):
        super().__init__(text)
        self.code = code


@dataclass
class ServerLimits:
    request_seconds: float = 1.0  # one client request's longest wait
    status_seconds: float = 0.5
    settle_seconds: float = 10.0  # the final phase's longest wait (Maelstrom's recovery time)
    linearizable_seconds: float = 10.0  # lin-kv: the linearizability search's budget per schedule


class StatusChecks:
    """The always properties a member's own status shows, checked on every sample."""

    def __init__(self):
        self.findings: list[Finding] = []
        self.highest: dict[str, tuple[int, int | None]] = {}  # member -> (commit index, step it was shown)
        self.reported: set[str] = set()

    def _find(self, name: str, text: str, step) -> None:
        if name not in self.reported:
            self.reported.add(name)
            self.findings.append(Finding(name, text, step))

    def sample(self, member: str, status, step, cause: str) -> None:
        if status.committed_index is not None:
            shown, at = self.highest.get(member, (0, None))
            if status.committed_index < shown:
                when = f"at step {at}" if at is not None else "at start-up"
                self._find("HwmNeverTruncated", f"{member}'s commit index (its high-water mark) was {shown} {when}; "
                                                f"after {cause} it is {status.committed_index}", step)
            else:
                self.highest[member] = (status.committed_index, step)


class ServerRun:
    def __init__(self, server: Server, schedule: Schedule, limits: ServerLimits | None = None,
                 prefix: str = "127.0.1", partitions: bool | None = None, keep_copies: bool = False,
                 power: bool | None = None):
        self.server, self.schedule = server, schedule
        self.limits = limits or ServerLimits()
        self.node_ids = schedule.node_ids()
        if partitions is None:  # a replay: the table only when the schedule partitions
            partitions = any(s["op"] == "partition" for s in schedule.steps)
        if power is None:  # a replay: the mounts only when the schedule loses power
            power = any(s["op"] == "power_fail" for s in schedule.steps)
        self.cluster = ServerCluster(server, schedule.nodes, prefix=prefix, partitions=partitions, power=power,
                                     filesystem=schedule.filesystem or "posix")
        self.keep_copies = keep_copies or any(s["op"] == "rollback" for s in schedule.steps)
        if schedule.workload not in WORKLOADS:
            raise ServerError(f"a server runs the {' or '.join(WORKLOADS)} workload, not {schedule.workload}")
        self.checker = (LinKVChecker(self.limits.linearizable_seconds) if schedule.workload == "lin-kv"
                        else HistoryChecker())
        self.status = StatusChecks()
        self.ops: list[dict] = []
        self.final_ops: list[dict] = []
        self.events: list[list[str]] = [[]]
        self.killed: set[str] = set()  # down because a step killed them
        self.crashed: dict[str, str] = {}  # member -> how it exited on its own (once each)
        self.samples: list[dict] = []  # every status sampled: {"step", "node", "term", "leader", "commit"}
        self.step_number: int | None = 0
        self.cause = "start-up"
        self.lock = threading.Lock()  # concurrent requests: one op at a time into the history and its checks

    def start(self) -> None:
        self.cluster.start()
        self.events[0] += self.cluster.notes
        if self.keep_copies:
            for node in self.node_ids:
                self.cluster.keep_copy(node)  # what a rollback restores: the member as it started
        self._sample_all()

    def close(self) -> None:
        self.cluster.close()

    def _event(self, text: str) -> None:
        self.events[-1].append(text)

    # ---- client operations ---------------------------------------------------------------------
    def _operation(self, node: str, kind: str, request: dict, step, client_name: str | None = None) -> dict:
        with self.lock:  # the checker's clock: this request is sent after every answer it has seen
            op = {"id": len(self.ops) + 1, "client": client_name or f"c{self.node_ids.index(node) + 1}", "node": node,
                  "step": step, "type": kind, "request": request, "status": "pending", "reply": None,
                  "reply_step": None}
            self.ops.append(op)
            self.checker.on_request(op)
        client = self.cluster.client(node, self.limits.request_seconds)
        try:
            if self.cluster.paused(node) or not self.cluster.alive(node):
                raise Definite(f"{node} is {'paused' if self.cluster.alive(node) else 'down'}")
            op["status"], op["reply"] = "ok", self._request(client, kind, request)
        except Refused as e:  # the register said no: Maelstrom's code, a definite answer
            op["status"], op["reply"] = "fail", {"code": e.code, "text": str(e)}
        except Definite as e:
            # A read that got no answer says nothing of what is stored (else an unavailable member
            # would look like one that lost the entry): indeterminate, as a read changes nothing.
            status = "info" if kind in READS else "fail"
            op["status"], op["reply"] = status, {"code": TEMPORARILY_UNAVAILABLE, "text": str(e)}
        except Indefinite as e:
            op["status"], op["reply"] = "info", {"code": TIMEOUT, "text": str(e)}
        with self.lock:
            op["reply_step"] = step
            before = len(self.checker.findings)
            # lin-kv's check orders every answer, a refusal's too; the log's checks read successes.
            if op["status"] == "ok" or (op["status"] == "fail" and self.schedule.workload == "lin-kv"):
                self.checker.on_reply(op, step)
            self._event(f"{op['client']}→{node} {describe_op(op).split(' ', 3)[-1]}: {op['status']} {op['reply']}")
            for finding in self.checker.findings[before:]:
                self._event(f"FINDING {finding}")
        return op

    def _concurrent(self, steps: list[dict], number: int, meanwhile=None) -> None:
        """The requests at once, each from a client of its own (c<node>.<k>), each in its own thread;
        `meanwhile()`, if given, runs while they are in flight, before their answers are awaited."""
        threads = [threading.Thread(target=self._operation, daemon=True,
                                    args=(s["node"], s["op"], {k: v for k, v in s.items() if k not in ("op", "node")},
                                          number, f"c{self.node_ids.index(s['node']) + 1}.{k + 1}"))
                   for k, s in enumerate(steps)]
        for thread in threads:
            thread.start()
        try:
            if meanwhile is not None:
                meanwhile()
        finally:
            for thread in threads:
                thread.join()

    @staticmethod
    def _request(client, kind: str, request: dict) -> dict:
        """One operation on the member's client: the reply, as a Maelstrom node's would read."""
        if kind == "log_append":
            return {"index": client.append(request["value"])}
        if kind == "log_read":
            value = client.read(request["index"], serializable=bool(request.get("serializable")))
            if value is None:
                raise Refused(KEY_DOES_NOT_EXIST, f"nothing at offset {request['index']}")
            return {"index": request["index"], "value": value}
        if kind == "read":
            value = client.get(request["key"], serializable=bool(request.get("serializable")))
            if value is None:
                raise Refused(KEY_DOES_NOT_EXIST, f"key {request['key']} does not exist")
            return {"value": value}
        if kind == "write":
            client.put(request["key"], request["value"])
            return {}
        if not client.cas(request["key"], request["from"], request["to"], bool(request.get("create_if_not_exists"))):
            raise Refused(PRECONDITION_FAILED, f"key {request['key']} does not hold {request['from']}")
        return {}

    # ---- steps -----------------------------------------------------------------------------------
    def run_step(self, step: dict, number: int) -> None:
        self.step_number, self.cause = number, describe(step)
        self.events.append([])
        op, cluster = step["op"], self.cluster
        if op in CLIENT_OPS:
            self._operation(step["node"], op, {k: v for k, v in step.items() if k not in ("op", "node")}, number)
        elif op == "concurrent":
            self._concurrent(step["steps"], number)
        elif op == "kill":
            self.killed.add(step["node"])
            if cluster.alive(step["node"]):
                cluster.kill(step["node"])
                self._event(f"{step['node']} killed (SIGKILL); its data directory stays")
        elif op == "restart":
            self.killed.discard(step["node"])
            if not cluster.alive(step["node"]):
                cluster.restart(step["node"])
                self._event(f"{step['node']} restarted on its data directory")
        elif op == "power_fail":
            if "during" in step:  # the answers that come are collected before the member restarts
                self._concurrent(step["during"], number,
                                 meanwhile=lambda: (time.sleep(step["after_ms"] / 1000), self._power_fail(step)))
            else:
                self._power_fail(step)
            self.killed.discard(step["node"])
            cluster.restart(step["node"])
            self._event(f"{step['node']} restarted on what its disk kept")
        elif op == "rollback":
            if cluster.rollback(step["node"]):
                self._event(f"{step['node']}'s data directory replaced by the copy kept at start-up")
        elif op == "pause":
            cluster.pause(step["node"])
        elif op == "resume":
            cluster.resume(step["node"])
        elif op == "partition":
            cluster.partition(step["groups"])
        elif op == "heal":
            cluster.heal()
        elif op == "wait":
            time.sleep(step["ms"] / 1000)
        elif op in ("tick", "settle"):
            time.sleep(0.05 * step.get("rounds", 1))  # the wall clock: the members' own timers run
        self._sample_all()

    def _power_fail(self, step: dict) -> None:
        """SIGKILL, and the member's disk drops what it did not fsync (or keeps part: `keep_seed`)."""
        node = step["node"]
        lost = self.cluster.power_fail(node, step.get("keep_seed"), step.get("reorder", False))
        how = (f"{lost.reordered} file{'' if lost.reordered == 1 else 's'} out of order" if step.get("reorder") else
               f"{lost.torn} write{'' if lost.torn == 1 else 's'} torn")
        kept = (f"; kept {lost.kept_bytes} bytes not fsynced ({how}) and {lost.kept_entries} directory "
                f"entr{'y' if lost.kept_entries == 1 else 'ies'}" if "keep_seed" in step else "")
        self._event(f"{node} lost power (SIGKILL; {lost.bytes} bytes not fsynced dropped, in {lost.files} "
                    f"file{'' if lost.files == 1 else 's'}; {lost.entries} directory "
                    f"entr{'y' if lost.entries == 1 else 'ies'} not fsynced undone{kept})")

    def _sample_all(self) -> None:
        for node in self.node_ids:
            if not self.cluster.alive(node) and node not in self.killed and node not in self.crashed:
                proc = self.cluster.procs[node]
                reason = self.cluster.exit_reason(node)
                self.crashed[node] = (f"{node} {proc.exit_description()} on its own (hwm did not kill it)"
                                      + (f"; its log says: {reason}" if reason else ""))
                self._event(self.crashed[node])
            if not self.cluster.alive(node) or self.cluster.paused(node):
                continue
            try:
                status = self.cluster.client(node, self.limits.status_seconds).status()
            except (Definite, Indefinite):
                continue  # not answering yet (restarting): nothing to check
            if status is None:
                return  # the server has no probe
            self.samples.append({"step": self.step_number, "node": node, "term": status.term,
                                 "leader": status.leader, "commit": status.committed_index})
            before = len(self.status.findings)
            self.status.sample(node, status, self.step_number, self.cause)
            for finding in self.status.findings[before:]:
                self._event(f"FINDING {finding}")

    # ---- the final phase -------------------------------------------------------------------------
    def finish(self) -> None:
        self.step_number, self.cause = None, "the final phase"
        self.events.append([])
        began = time.monotonic()
        self.cluster.heal()
        self._sample_all()  # a member that exited on its own is told before the restarts
        self.killed = set(self.node_ids) - set(self.crashed)
        for node in self.node_ids:
            self.cluster.resume(node)
            self.cluster.restart(node)
        self.killed.clear()
        try:
            self.cluster.wait_serving(self.limits.settle_seconds)
        except ServerError as e:
            self._event(f"not every member serves after {self.limits.settle_seconds:g} s: {e}".splitlines()[0])
        self._sample_all()
        self.cause = "the final reads"
        while True:
            requests = (self.checker.final_read_requests() if self.schedule.workload == "lin-kv"
                        else final_read_requests("log", self.checker))
            for request in requests:
                for node in self.node_ids:
                    op = self._operation(node, request["type"], {k: v for k, v in request.items() if k != "type"},
                                         None)
                    self.final_ops.append(op)
            if not self.checker.unserved(self.final_ops) or time.monotonic() - began > self.limits.settle_seconds:
                break
            time.sleep(0.2)
        self.checker.at_end(self.final_ops, f"after healing and {time.monotonic() - began:.1f} s")


def run_server_schedule(server: Server, schedule: Schedule, limits: ServerLimits | None = None,
                        prefix: str = "127.0.1", on_step=None) -> RunResult:
    """Run `schedule` against a fresh cluster of `server`; every process, folder and table is gone
    when this returns or raises. ServerError when the cluster does not start."""
    began = time.monotonic()
    run = ServerRun(server, schedule, limits, prefix)
    result = RunResult(schedule)
    try:
        run.start()
        for number, step in enumerate(schedule.steps, 1):
            check_step(step, run.node_ids, schedule.workload, number)
            run.run_step(step, number)
            result.steps_run = number
            if on_step is not None:
                on_step(number, step, run)
        run.finish()
    finally:
        run.close()
    return result_of(run, result, began)


def local_read_staleness(ops: list[dict]) -> tuple[int, int]:
    """(local reads answered, how many were stale) of a log history. A local (serializable) read may
    be stale: it answers that an offset holds nothing when an append acknowledged at that offset in an
    earlier step (so before the read was sent) put something there. That it never shows a value later
    truncated is ReadNeverTruncated's, as for any read."""
    acknowledged: dict[int, int] = {}  # offset -> the first step an append there was acknowledged
    for op in ops:
        if op["type"] == "log_append" and op["status"] == "ok" and op["step"] is not None:
            index = op["reply"]["index"]
            acknowledged[index] = min(acknowledged.get(index, op["step"]), op["step"])
    answered = stale = 0
    for op in ops:
        if op["type"] != "log_read" or not op["request"].get("serializable") or op["step"] is None:
            continue
        refused = op["status"] == "fail" and op["reply"].get("code") == KEY_DOES_NOT_EXIST
        if op["status"] == "ok" or refused:
            answered += 1
            stale += refused and acknowledged.get(op["request"]["index"], op["step"]) < op["step"]
    return answered, stale


def result_of(run: ServerRun, result: RunResult, began: float) -> RunResult:
    result.findings = run.checker.findings + run.status.findings
    result.history = run.ops
    result.observations = run.samples
    result.events = run.events
    result.unanswered = [op for op in run.ops if op["status"] == "info" and op["type"] not in READS]
    result.seconds = time.monotonic() - began
    return result
