"""Hypothesis-chosen schedules against real servers, and a shrink that counts a failure only when it
recurs.

The rules are the workload's requests (the log's: an append, a linearizable or serializable read
near the newest offset, an append read back at once from another member, two or three of these at
once; lin-kv's: read, write and cas of two keys, and two or three at once on one key) and the faults
in force: kill and
restart, pause and resume, partition and heal, `power_fail` (one member, a majority or every
member loses power at once: all of them are killed before any drops what it did not fsync and
restarts; with `power_loss="torn"`, each power failure either loses all of it or carries a
`keep_seed` from which powerfs.py draws what each disk keeps; with "reordered", such a failure
may also keep each file's unsynced sectors in any order, `reorder`), and the planted `rollback` (kill a majority, put back the copies of their data
directories kept at start-up, restart them). Requests aimed at "leader" go to
the member that last said it leads.

Real servers are not deterministic: the same schedule may fail once and pass the next time. A
shrink candidate counts as failing only when it shows the kind of finding in `k` of `m` runs
(`Recurrence`), and the report gives that rate for each shrunk schedule. A schedule found failing
is reported whether or not it recurs: every finding is a real history that broke a property.
A power failure may come while requests sent to the member are in flight (`during`, the cut
`after_ms` later): between steps a stock server has fsynced all it answered, so only then is there
something unsynced to keep or tear. Once shrunk, a power failure is tried between steps, then as
one that keeps nothing not fsynced, the plainest case, and stays so where the finding still recurs.
"""

from __future__ import annotations

import dataclasses

import time
from dataclasses import dataclass, field

import hypothesis.strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from hwm.bridge.maelstrom.cluster import RunResult
from hwm.bridge.maelstrom.hunt import HuntReport, counted, kinds, run_machine, shows, shrink_further
from hwm.bridge.maelstrom.schedule import Schedule
from hwm.bridge.servers.adapter import Server, ServerError
from hwm.bridge.servers.run import ServerLimits, ServerRun, local_read_staleness, result_of, run_server_schedule

SERVER_FAULTS = ("kill", "pause", "partition", "power_fail", "rollback")
STOCK_FAULTS = ("kill", "pause", "partition")  # rollback is an operator's mistake, planted on request
# What a power failure loses of what was not fsynced: all of it, or (torn) what a seed on its step
# does not keep: a prefix of each file's writes, the last perhaps torn at a sector, and of the names;
# or (reordered) that, or each file's unsynced sectors kept in any order.
POWER_LOSSES = ("all", "torn", "reordered")


@dataclass
class Recurrence:
    """A candidate fails when `k` of `m` runs show the kind."""
    k: int = 2
    m: int = 3


@dataclass
class ServerHuntReport(HuntReport):
    rates: dict[str, tuple[int, int]] = field(default_factory=dict)  # kind -> (runs showing it, runs)
    cleaned: list[str] = field(default_factory=list)  # what earlier runs killed with SIGKILL had left
    crashes: list[str] = field(default_factory=list)  # members that exited on their own, one line each
    start_error: ServerError | None = None
    local_reads: int = 0  # serializable reads answered, over every schedule
    stale_reads: int = 0  # of them, stale (run.py's local_read_staleness)


def recurring(server: Server, kind: str, recurrence: Recurrence, limits: ServerLimits | None, prefix: str,
              report: ServerHuntReport | None = None, filesystem: str | None = None):
    """rerun(schedule) for shrink_further: a result that shows `kind` when k of m runs did, else one
    that does not; the rate of the last schedule accepted is kept in report.rates[kind]."""
    def rerun(schedule: Schedule) -> RunResult:
        schedule.server, schedule.filesystem = server.name, filesystem
        hits, last, shown = 0, None, None
        for run in range(recurrence.m):
            last = run_server_schedule(server, schedule, limits, prefix)
            if report is not None and run:
                report.shrink_runs += 1
            if shows(last, kind):
                hits, shown = hits + 1, last
            if hits >= recurrence.k or hits + recurrence.m - run - 1 < recurrence.k:
                break  # decided either way
        if hits >= recurrence.k and report is not None:
            report.rates[kind] = (hits, run + 1)
        return shown if hits >= recurrence.k else last
    return rerun


# What makes a power failure less plain, plainest last: one during requests in flight (else between
# steps), one that keeps unsynced sectors in any order (else a prefix of each file's writes), one that
# keeps part of what was not fsynced (else nothing of it).
PLAINER = (("during", "after_ms"), ("reorder",), ("keep_seed", "reorder"))


def plainer_power_failures(found: RunResult, kind: str, rerun, seconds: float,
                           report: ServerHuntReport) -> RunResult:
    """`found` with its power failures made plainer where `kind` still recurs: first between steps
    (their `during` requests taken out), then keeping a prefix (`reorder` out), then losing everything
    (their `keep_seed`s taken out)."""
    began, best = time.monotonic(), found
    for fields in PLAINER:
        best = _without(best, fields, kind, rerun, max(0.0, seconds - (time.monotonic() - began)), report)
    return best


def _without(found: RunResult, fields: tuple[str, ...], kind: str, rerun, seconds: float,
             report: ServerHuntReport) -> RunResult:
    """`found` with `fields` taken out of its power failures (every one at once, else one at a
    time) where `kind` still recurs."""
    began, best = time.monotonic(), found

    def plain(step: dict) -> dict:
        return {k: v for k, v in step.items() if k not in fields} if step["op"] == "power_fail" else step

    def trying(steps: list[dict]) -> RunResult | None:
        report.shrink_runs += 1
        result = rerun(dataclasses.replace(best.schedule, steps=steps, findings=[], history=[], observations=[]))
        return result if shows(result, kind) else None

    seeded = [k for k, step in enumerate(found.schedule.steps) if step["op"] == "power_fail" and fields[0] in step]
    if not seeded or seconds <= 0:
        return found
    every = trying([plain(step) for step in best.schedule.steps])
    if every is not None:
        return every
    for k in seeded if len(seeded) > 1 else []:  # one alone was tried just now
        if time.monotonic() - began > seconds:
            break
        shorter = trying(best.schedule.steps[:k] + [plain(best.schedule.steps[k])] + best.schedule.steps[k + 1:])
        if shorter is not None:
            best = shorter
    return best


def hunt_server(server: Server, nodes: int = 3, schedules: int = 10, steps: int = 20, seed: int | None = 0,
                workload: str = "log",
                faults=STOCK_FAULTS, limits: ServerLimits | None = None, time_limit: float = 600.0,
                shrink: bool = True, shrink_seconds: float = 300.0, recurrence: Recurrence | None = None,
                prefix: str = "127.0.1", on_schedule=None, filesystem: str = "posix",
                power_loss: str = "all") -> ServerHuntReport:
    recurrence = recurrence or Recurrence()
    report = ServerHuntReport(faults=frozenset(faults))
    began = time.monotonic()
    node_ids = [f"n{i}" for i in range(1, nodes + 1)]
    node = st.sampled_from(node_ids)
    target = st.one_of(st.just("leader"), node)

    class Stop(Exception):
        pass

    def allowed(fault: str):
        return precondition(lambda self: fault in faults)

    class ServerSchedule(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.schedule = Schedule(workload=workload, nodes=nodes, clock="wall", server=server.name,
                                     filesystem=filesystem if "power_fail" in faults else None)
            self.run: ServerRun | None = None
            self.values = 0
            self.began = time.monotonic()
            if report.failures or report.start_error is not None or report.schedules >= schedules:
                return
            if time.monotonic() - began > time_limit:
                report.out_of_time = True
                return
            self.run = ServerRun(server, self.schedule, limits, prefix, partitions="partition" in faults,
                                 keep_copies="rollback" in faults, power="power_fail" in faults)
            try:
                self.run.start()
                report.cleaned += self.run.cluster.notes
            except BaseException as e:
                # Hypothesis calls teardown (which closes the run) only for a machine it could build.
                self.run.close()
                self.run = None
                if not isinstance(e, ServerError):
                    raise
                report.start_error = e
                raise Stop()

        def apply(self, step: dict) -> None:
            if self.run is None or len(self.schedule.steps) >= steps:
                return
            self.schedule.steps.append(step)
            self.run.run_step(step, len(self.schedule.steps))

        def resolve(self, chosen: str) -> str:
            if chosen != "leader" or self.run is None:
                return chosen
            said = [s["node"] for s in self.run.samples if s["leader"]]
            return said[-1] if said else node_ids[0]

        def newest(self) -> int:
            acknowledged = [op["reply"]["index"] for op in self.run.ops
                            if op["status"] == "ok" and op["type"] == "log_append"] if self.run else []
            return max(acknowledged, default=1)

        if workload == "log":
            @rule(node=target)
            def append(self, node):
                self.values += 1
                self.apply({"op": "log_append", "node": self.resolve(node), "value": self.values})

            @rule(node=target, back=st.integers(0, 2), serializable=st.booleans())
            def read(self, node, back, serializable):
                step = {"op": "log_read", "node": self.resolve(node), "index": max(1, self.newest() - back)}
                self.apply(dict(step, serializable=True) if serializable else step)

            @rule(requests=st.lists(st.tuples(target, st.sampled_from(["append", "read", "local read"])),
                                    min_size=2, max_size=3))
            def concurrent(self, requests):
                steps = []
                for chosen, kind in requests:
                    if kind == "append":
                        self.values += 1
                        steps.append({"op": "log_append", "node": self.resolve(chosen), "value": self.values})
                    else:
                        step = {"op": "log_read", "node": self.resolve(chosen), "index": self.newest()}
                        steps.append(dict(step, serializable=True) if kind == "local read" else step)
                self.apply({"op": "concurrent", "steps": steps})

            @rule(reader=node)
            def append_then_read(self, reader):
                self.values += 1
                self.apply({"op": "log_append", "node": self.resolve("leader"), "value": self.values})
                self.apply({"op": "log_read", "node": reader, "index": self.newest(), "serializable": True})
        else:  # lin-kv: few keys, so each key's history is long enough to contradict itself
            @rule(node=target, key=st.sampled_from([0, 1]))
            def read(self, node, key):
                self.apply({"op": "read", "node": self.resolve(node), "key": key})

            @rule(node=target, key=st.sampled_from([0, 1]))
            def write(self, node, key):
                self.values += 1
                self.apply({"op": "write", "node": self.resolve(node), "key": key, "value": self.values})

            @rule(node=target, key=st.sampled_from([0, 1]), back=st.integers(0, 1), create=st.booleans())
            def cas(self, node, key, back, create):
                self.values += 1
                step = {"op": "cas", "node": self.resolve(node), "key": key, "from": max(1, self.values - 1 - back),
                        "to": self.values}
                self.apply(dict(step, create_if_not_exists=True) if create else step)

            @rule(requests=st.lists(st.tuples(target, st.sampled_from(["read", "write", "cas"])), min_size=2,
                                    max_size=3), key=st.sampled_from([0, 1]))
            def concurrent(self, requests, key):  # one key from several clients: more orders to refute
                steps = []
                for chosen, kind in requests:
                    step = {"op": kind, "node": self.resolve(chosen), "key": key}
                    if kind != "read":
                        self.values += 1
                        step.update({"value": self.values} if kind == "write" else
                                    {"from": max(1, self.values - 1), "to": self.values})
                    steps.append(step)
                self.apply({"op": "concurrent", "steps": steps})

        @allowed("kill")
        @rule(node=target, restart=st.booleans())
        def kill(self, node, restart):
            node = self.resolve(node)
            self.apply({"op": "kill", "node": node})
            if restart:
                self.apply({"op": "restart", "node": node})

        @allowed("kill")
        @rule(node=node)
        def restart(self, node):
            self.apply({"op": "restart", "node": node})

        @allowed("pause")
        @rule(node=target, resume=st.booleans())
        def pause(self, node, resume):
            node = self.resolve(node)
            self.apply({"op": "pause", "node": node})
            if resume:
                self.apply({"op": "resume", "node": node})

        @allowed("partition")
        @rule(isolated=target)
        def partition(self, isolated):
            isolated = self.resolve(isolated)
            self.apply({"op": "partition", "groups": [[isolated], [n for n in node_ids if n != isolated]]})

        @allowed("partition")
        @rule()
        def heal(self):
            self.apply({"op": "heal"})

        @rule(ms=st.sampled_from([100, 500, 1500]))
        def wait(self, ms):  # long enough, at the top, for an election after a leader is lost
            self.apply({"op": "wait", "ms": ms})

        # torn: a power failure keeps nothing not fsynced (Hypothesis's simplest choice) or carries a
        # seed, one per member, from which its disk keeps part of it.
        # reordered: a seeded failure may also keep each file's unsynced sectors in any order (`reorder`).
        keeping = ({"keep_seed": st.one_of(st.none(), st.integers(0, 2**31))} if power_loss in ("torn", "reordered")
                   else {})
        if power_loss == "reordered":
            keeping["reorder"] = st.booleans()

        def in_flight(self, kind: str, member: str) -> dict:
            """A request of the workload to `member`, for a power failure during requests."""
            if kind == "read":
                return ({"op": "log_read", "node": member, "index": self.newest()} if workload == "log"
                        else {"op": "read", "node": member, "key": 0})
            self.values += 1
            return ({"op": "log_append", "node": member, "value": self.values} if workload == "log"
                    else {"op": "write", "node": member, "key": 0, "value": self.values})

        @allowed("power_fail")
        @rule(first=target, how_many=st.sampled_from(["all", "majority", "one"]),
              during=st.one_of(st.none(), st.tuples(st.lists(st.sampled_from(["write", "read"]), min_size=1,
                                                             max_size=3), st.integers(0, 30))),
              **keeping)
        def power_fail(self, first, how_many, during, keep_seed=None, reorder=False):
            # Members that lose power together: all are down before any restarts, so what none of
            # them fsynced survives only on the others, if any. "all" first: Hypothesis's simplest
            # choice, and the one that loses what no member fsynced (a majority alone leaves a member
            # that holds it and leads the others back to it).
            if self.run is None:  # no cluster (the hunt is over): no leader to resolve
                return
            k = node_ids.index(self.resolve(first))
            count = {"one": 1, "majority": nodes // 2 + 1, "all": nodes}[how_many]
            lost = [node_ids[(k + j) % nodes] for j in range(count)]
            for member in lost[1:]:
                self.apply({"op": "kill", "node": member})
            for j, member in enumerate(lost):
                step = {"op": "power_fail", "node": member,
                        **({"keep_seed": keep_seed + j} if keep_seed is not None else {}),
                        **({"reorder": True} if reorder and keep_seed is not None else {})}
                if during is not None and j == 0:
                    # Between steps a stock server has fsynced all it answered: the first member
                    # loses power while requests sent to it are in flight, so that what it was
                    # writing for them is unsynced. None (between steps) is the simplest choice.
                    kinds, after_ms = during
                    step.update(during=[self.in_flight(kind, member) for kind in kinds], after_ms=after_ms)
                self.apply(step)

        @allowed("rollback")
        @rule(first=node)
        def rollback(self, first):
            # A majority restored from the start-up backup while the others run: what they had
            # acknowledged survives only on the minority.
            k = node_ids.index(first)
            majority = [node_ids[(k + j) % nodes] for j in range(nodes // 2 + 1)]
            for op in ("kill", "rollback", "restart"):
                for member in majority:
                    self.apply({"op": op, "node": member})

        def teardown(self):
            if self.run is None:
                return
            result = RunResult(self.schedule)
            try:
                self.run.finish()
            finally:
                self.run.close()
            result_of(self.run, result, self.began)
            reads, stale = local_read_staleness(self.run.ops)
            report.local_reads += reads
            report.stale_reads += stale
            report.crashes += [f"schedule {report.schedules + 1}: {line}" for line in self.run.crashed.values()]
            result.steps_run = len(self.schedule.steps)
            if counted(report, result, began, on_schedule):
                raise Stop()

    run_machine(ServerSchedule, report, schedules, steps, seed, Stop)
    if report.failures and shrink:
        found = report.failures[0]
        wanted = kinds(found)
        for kind in wanted:
            rerun = recurring(server, kind, recurrence, limits, prefix, report, found.schedule.filesystem)
            shrunk = shrink_further([], found, None, shrink_seconds / len(wanted), kind=kind, report=report,
                                    rerun=rerun)
            shrunk = plainer_power_failures(shrunk, kind, rerun, shrink_seconds / len(wanted), report)
            if shrunk is found:  # no shorter candidate recurred: how often does the schedule as found?
                rerun(found.schedule)
            report.shrunk[kind] = shrunk
    report.seconds = time.monotonic() - began
    return report
