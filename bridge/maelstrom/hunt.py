"""Schedules chosen by Hypothesis: a state machine whose rules are client requests, deliveries,
faults and ticks, each applied at once to a live cluster of node processes.

Besides single steps, three rules aim at the moments where the High-Water Mark pattern goes wrong,
each written as plain steps (so a schedule stays an ordinary, replayable hwm-schedule/1, and the
step-deleting shrinker can drop any part of them):

- `append_then_read` (`send_then_poll` for the kafka workload): an append at the leader, then at
  once a read there of its newest index, before any delivery: a client asks for an entry no
  follower has yet stored (for lin-kv, `write_then_read`: a write at the leader, then at once a
  read of its key at any node, which a node answering from its own copy gets wrong);
- `cut_off`: partition, kill or pause the node that answered the latest read (or the leader), then
  optionally let the others run election rounds: whatever that node served or acknowledged must
  survive without it;
- `replicate_then_restart`: deliver what the leader has in flight to one follower and the
  follower's answers back (the leader may now count the entry as stored on a majority), then kill
  and restart the follower before the new high-water mark reaches it.

Hypothesis's stateful testing already turns a random subset of the rules off for each schedule
(swarm testing, Groce et al. 2012), so some schedules are all appends, reads and cut-offs, others
all message-level faults. Each schedule also reports two scores to `hypothesis.target`, which
steers the second half of a hunt towards higher ones: the steps after which an entry a client has
read is stored on fewer than a majority, and the entries a majority stores above a killed node's
own high-water mark (both zero for a node that does not answer `hwm_state`).

The faults are Maelstrom's (`MAELSTROM_FAULTS`: partitions, which also lose and reorder messages,
and pauses, a slow process) plus those every node declares in its init_ok that it survives (`kill`:
its state is on disk; `duplicate`), or exactly those `faults` names.

The hunt stops at the first failing schedule (a finding, or a node breaking the protocol once
started) and shrinks it once for each kind of finding in it (`shrink_further`, deleting steps while
the schedule still shows that kind), so a false-looking finding at the end of a run never hides a
real one found earlier: every distinct kind is reported with its own shortest schedule. A node
that fails to start fails no schedule: that is reported as it is, at once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import hypothesis
import hypothesis.stateful
import hypothesis.strategies

from hwm.bridge.maelstrom.cluster import WALL_TICK_MS, Limits, Run, RunResult, result_of
from hwm.bridge.maelstrom.protocol import NodeProtocolError
from hwm.bridge.maelstrom.schedule import Schedule
from hwm.properties.protocol import resolve as resolve_protocol

FAULTS = ("partition", "pause", "kill", "duplicate")
# What Maelstrom's own network and nemesis do to any node: partitions (messages lost between the
# sides, and reordered by their delays) and a paused process, which is only a slow one.
MAELSTROM_FAULTS = frozenset({"partition", "pause"})
PROTOCOL = "protocol"  # the kind of a failure where a node broke the protocol


def faults_for(asked, run: Run) -> frozenset:
    """The faults a hunt injects: `asked` (names from FAULTS), or with None Maelstrom's plus those every
    node declared in init_ok that it survives."""
    if asked is not None:
        return frozenset(asked)
    return MAELSTROM_FAULTS | {f for f in ("kill", "duplicate") if run.declared(f)}


def kinds(result: RunResult) -> list[str]:
    """The distinct kinds of failure one run shows, the earliest seen first (a protocol error first)."""
    if result.protocol_error is not None:
        return [PROTOCOL]
    ordered = sorted(result.findings, key=lambda f: (f.step is None, f.step or 0))
    return list(dict.fromkeys(f.name for f in ordered))


def saved_kinds(findings: list[str]) -> list[str]:
    """The kinds of the findings a schedule file saved (`Finding`'s text, "Name (step 3): ...", or a
    protocol error's, "node n1: ..."), in order."""
    heads = (text.split(" ", 1)[0].rstrip(":") for text in findings)
    return list(dict.fromkeys(PROTOCOL if head == "node" else head for head in heads))


def shows(result: RunResult, kind: str) -> bool:
    return result.protocol_error is not None if kind == PROTOCOL else any(f.name == kind for f in result.findings)


@dataclass
class HuntReport:
    schedules: int = 0  # schedules run to the end (or to their failure), shrinking's runs not counted
    shrink_runs: int = 0  # runs of shorter schedules while shrinking
    operations: int = 0  # client operations sent, over all schedules
    answered_ok: int = 0  # of which the node answered with success: a clean hunt where none did says little
    unanswered: int = 0  # requests never answered: indeterminate, an availability figure
    undecided: list[str] = field(default_factory=list)  # lin-kv: keys the search did not decide in time
    stepping_undecided: list[str] = field(default_factory=list)  # schedules whose stepping met its bound
    seconds: float = 0.0
    first_failure_at: int | None = None  # how many schedules until the first failure
    first_failure_seconds: float | None = None
    failures: list[RunResult] = field(default_factory=list)  # the failing schedule as found
    shrunk: dict[str, RunResult] = field(default_factory=dict)  # kind -> its shortest schedule
    start_error: NodeProtocolError | None = None  # the node did not start: no schedule ran
    faults: frozenset = frozenset()
    out_of_time: bool = False
    first_settle_rounds: int = 0  # the first settle's rounds in the latest schedule (`longer_first_settle`)
    schedules_served: int = 0  # schedules in which some operation succeeded
    last_unserved: bool = False  # the latest schedule sent operations and none succeeded

    @property
    def found(self) -> dict[str, RunResult]:
        """Each kind of failure with its schedule: shrunk when shrinking ran, else as found."""
        if self.shrunk:
            return self.shrunk
        return {kind: self.failures[0] for kind in kinds(self.failures[0])} if self.failures else {}

    @property
    def shortest(self) -> RunResult | None:
        """The first kind's schedule; a node that broke the protocol comes before any finding its
        broken answers caused."""
        found = self.found
        return next(iter(found.values())) if found else None


# The rounds of the first settle, which lets the cluster elect a leader before a schedule's own steps
# (most schedules are worth more with one): 6, or more where the protocol the node implements takes
# longer. A ZAB leader takes no write until a quorum has acknowledged its NEWLEADER, after the
# election's own round trips: with 6 rounds hwm's ZAB node was still prospective, and a hunt of it
# served no client (0 of 139 operations at seed 11; 33 with 12 rounds).
FIRST_SETTLE_ROUNDS = {"zab": 12}


def first_settle_rounds(protocol: str | None) -> int:
    return 6 if protocol is None else FIRST_SETTLE_ROUNDS.get(resolve_protocol(protocol)[1].system, 6)


def longer_first_settle(report: HuntReport, clock: str, limits: Limits) -> int:
    """The next schedule's first settle on the wall clock: twice the last, after a schedule whose
    operations all failed while fewer than half the schedules so far served any, up to the final
    phase's `settle_seconds` of ticks. A node whose own timers take seconds (Maelstrom's demo Raft
    waits 2 to 4 s before it stands for election) serves nothing in a fraction of a second, and a
    hunt of schedules that never let it elect says little; Maelstrom runs such a node for tens of
    seconds. A node that serves most schedules keeps the short settle, whatever faults cost one."""
    rounds = report.first_settle_rounds
    if clock != "wall" or not report.last_unserved or 2 * report.schedules_served >= report.schedules:
        return rounds
    return max(rounds, min(2 * rounds, int(limits.settle_seconds * 1000 / WALL_TICK_MS)))


def hunt(command: list[str], workload: str = "log", nodes: int = 3, clock: str = "virtual",
         schedules: int = 20, steps: int = 30, seed: int | None = 0, protocol: str | None = None,
         limits: Limits | None = None, time_limit: float = 600.0, shrink: bool = True,
         on_schedule=None, settle_rounds: int | None = None, shrink_seconds: float = 120.0,
         faults=None) -> HuntReport:
    """Run up to `schedules` Hypothesis-chosen schedules of at most `steps` steps each; stop at the
    first failure and shrink it, each kind of finding on its own. `seed` None draws fresh
    randomness; an integer makes the hunt repeatable. No schedule starts after `time_limit`
    seconds. Shrinking takes at most `shrink_seconds` (or a little more), shared by the kinds.
    `faults` None: Maelstrom's and those the node declares (`faults_for`)."""
    st = hypothesis.strategies
    from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

    report = HuntReport()
    began = time.monotonic()
    report.first_settle_rounds = first_settle_rounds(protocol) if settle_rounds is None else settle_rounds
    limits = limits or Limits()
    node_ids = [f"n{k}" for k in range(1, nodes + 1)]
    node = st.sampled_from(node_ids)
    # "leader": the node that, by its last hwm_state answer, leads the highest generation; faults and
    # requests aimed there find the pattern's bugs far sooner (any node when the node does not say).
    target = st.one_of(st.just("leader"), node)
    lin_kv_key = st.sampled_from([0, 1])  # few keys: each key's history is long enough to contradict itself

    class Stop(Exception):
        """Ends the hunt: a schedule failed, or the node could not start."""

    def allowed(*wanted: str):
        # On the faults alone, the same in every example of the hunt: Hypothesis requires the rules
        # it may draw to depend on the same things each time (an example after the hunt is over
        # draws as the others did, and runs nothing).
        return precondition(lambda self: any(f in self.faults for f in wanted))

    class NodeRun(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.schedule = Schedule(workload=workload, nodes=nodes, clock=clock, seed=0, protocol=protocol)
            self.run: Run | None = None
            self.error: NodeProtocolError | None = None
            self.values = 0
            self.values_of: dict = {}  # lin-kv: key -> the values written to it, oldest first
            self.last_reader: str | None = None  # the node that answered the latest successful read
            self.steps_at_risk = 0  # the two scores given to hypothesis.target
            self.risky_kills = 0
            self.faults = report.faults  # what the first start chose (faults_for), for every example after
            if report.failures or report.start_error is not None or report.schedules >= schedules:
                return  # the hunt is over: Hypothesis's own re-runs find nothing to do
            if time.monotonic() - began > time_limit:
                report.out_of_time = True  # this and later examples pass at once: Hypothesis ends soon
                return
            self.run = Run(command, self.schedule, limits)
            try:
                self.run.start()
                self.faults = report.faults = faults_for(faults, self.run)
                # Let the cluster elect a leader first: most schedules are worth more with one.
                report.first_settle_rounds = longer_first_settle(report, clock, limits)
                self.apply({"op": "settle", "rounds": report.first_settle_rounds})
            except BaseException as e:
                # Hypothesis calls teardown (which closes the run) only for a machine it could build:
                # a Ctrl-C or an error here must close it, or its nodes' folder outlives the hunt.
                self.run.close()
                self.run = None
                if not isinstance(e, NodeProtocolError):
                    raise
                report.start_error = e
                raise Stop()

        def apply(self, step: dict) -> None:
            if self.run is None or self.error is not None or len(self.schedule.steps) >= steps:
                return
            if step["op"] == "kill":
                self.risky_kills += self.stored_above_own_hwm(step["node"])
            self.schedule.steps.append(step)
            try:
                self.run.run_step(step, len(self.schedule.steps))
            except NodeProtocolError as e:
                self.error = e
                return
            if step["op"] in ("log_read", "poll", "read"):
                self.read_answered(step)
            if self.read_entry_at_risk():
                self.steps_at_risk += 1

        def holders(self, index: int, generation: int) -> int:
            """How many nodes' logs, as they last showed them, hold entry `index`@`generation`."""
            return sum(1 for seen in self.run.observer.latest.values()
                       if len(seen["log"]) >= index and seen["log"][index - 1][1] == generation)

        def stored_above_own_hwm(self, node: str) -> int:
            """The entries above `node`'s own high-water mark that a majority already stores: a
            restart now tests what the node does with entries it cannot yet know are committed."""
            seen = self.run.observer.latest.get(node) if self.run is not None else None
            if not seen or not seen["alive"]:
                return 0
            return sum(1 for index, generation in seen["log"][seen["hwm"]:]
                       if self.holders(index, generation) >= len(node_ids) // 2 + 1)

        def read_answered(self, step: dict) -> None:
            op = self.run.ops[-1] if self.run.ops else None
            if op is not None and op["step"] == len(self.schedule.steps) and op["status"] == "ok":
                self.last_reader = step["node"]

        def read_entry_at_risk(self) -> bool:
            """Whether an entry a client has read is stored, as far as hwm has seen, on fewer than
            a majority: one cut-off away from a new leader that never had it."""
            return any(self.holders(index, generation) < len(node_ids) // 2 + 1
                       for index, generation in self.run.observer.reads)

        def resolve(self, chosen: str) -> str:
            if chosen != "leader":
                return chosen
            latest = self.run.observer.latest if self.run is not None else {}
            leaders = [(seen["generation"], n) for n, seen in latest.items() if seen["role"] == "leader" and seen["alive"]]
            return max(leaders)[1] if leaders else node_ids[0]

        def newest_index(self) -> int:
            """The end of the longest log a node has shown (else one past the appends so far):
            reads just below it find the entries that are not yet, or never will be, committed."""
            latest = self.run.observer.latest if self.run is not None else {}
            return max((len(seen["log"]) for seen in latest.values()), default=self.values + 1)

        def next_value(self) -> int:
            self.values += 1
            return self.values

        def written_to(self, key) -> int:
            """A new value, remembered as one `key` may hold (a cas's from)."""
            value = self.next_value()
            self.values_of.setdefault(key, []).append(value)
            return value

        def cut_off_node(self, node: str) -> None:
            """Partition `node` away from all the others."""
            self.apply({"op": "partition", "groups": [[node], [n for n in node_ids if n != node]]})

        if workload == "log":
            @rule(node=target)
            def log_append(self, node):
                self.apply({"op": "log_append", "node": self.resolve(node), "value": self.next_value()})

            @rule(node=target, back=st.integers(0, 2))
            def log_read(self, node, back):
                index = max(1, self.newest_index() - back)
                self.apply({"op": "log_read", "node": self.resolve(node), "index": index})
        elif workload == "lin-kv":
            @rule(node=target, key=lin_kv_key)
            def read(self, node, key):
                self.apply({"op": "read", "node": self.resolve(node), "key": key})

            @rule(node=target, key=lin_kv_key)
            def write(self, node, key):
                self.apply({"op": "write", "node": self.resolve(node), "key": key, "value": self.written_to(key)})

            @rule(node=target, key=lin_kv_key, back=st.integers(0, 2), create=st.sampled_from([False, False, True]))
            def cas(self, node, key, back, create):
                # From a value the key held lately (0, never written, while it has none), to a new one.
                held = self.values_of.get(key, [])
                source = held[max(0, len(held) - 1 - back)] if held else 0
                step = {"op": "cas", "node": self.resolve(node), "key": key, "from": source, "to": self.written_to(key)}
                self.apply(dict(step, create_if_not_exists=True) if create else step)
        else:
            @rule(node=target, key=st.sampled_from(["k1", "k2"]))
            def send(self, node, key):
                self.apply({"op": "send", "node": self.resolve(node), "key": key, "msg": self.next_value()})

            @rule(node=target, key=st.sampled_from(["k1", "k2"]), offset=st.integers(0, 4))
            def poll(self, node, key, offset):
                self.apply({"op": "poll", "node": self.resolve(node), "offsets": {key: offset}})

            @rule(node=node, key=st.sampled_from(["k1", "k2"]), offset=st.integers(0, 4))
            def commit_offsets(self, node, key, offset):
                self.apply({"op": "commit_offsets", "node": node, "offsets": {key: offset}})

            @rule(node=node)
            def list_committed_offsets(self, node):
                self.apply({"op": "list_committed_offsets", "node": node, "keys": ["k1", "k2"]})

        # ---- rules aimed at the pattern's weak moments (see the module's docstring) ----------
        if workload == "log":
            @rule()
            def append_then_read(self):
                node = self.resolve("leader")  # only a leader takes the append
                self.apply({"op": "log_append", "node": node, "value": self.next_value()})
                seen = self.run.observer.latest.get(node) if self.run is not None else None
                newest = len(seen["log"]) if seen else self.newest_index()  # the entry just appended, if shown
                self.apply({"op": "log_read", "node": node, "index": max(1, newest)})
        elif workload == "lin-kv":
            @rule(key=lin_kv_key, reader=node)
            def write_then_read(self, key, reader):
                # A write at the leader, then at once a read elsewhere, before any delivery: a node
                # that answers from its own copy answers what the write replaced.
                self.apply({"op": "write", "node": self.resolve("leader"), "key": key, "value": self.written_to(key)})
                self.apply({"op": "read", "node": reader, "key": key})
        else:
            @rule(key=st.sampled_from(["k1", "k2"]))
            def send_then_poll(self, key):
                node = self.resolve("leader")
                self.apply({"op": "send", "node": node, "key": key, "msg": self.next_value()})
                self.apply({"op": "poll", "node": node, "offsets": {key: 0}})

        if nodes > 1:
            @allowed("partition", "kill", "pause")
            @rule(who=st.sampled_from(["reader", "leader"]), how=st.sampled_from(["partition", "kill", "pause"]),
                  rounds=st.sampled_from([0, 8]))
            def cut_off(self, who, how, rounds):
                node = self.last_reader if who == "reader" and self.last_reader else self.resolve("leader")
                if how not in self.faults:
                    how = next(f for f in ("partition", "kill", "pause") if f in self.faults)
                if how == "partition":
                    self.cut_off_node(node)
                else:
                    self.apply({"op": how, "node": node})
                    # What it sent but the network had not yet carried goes down with it; else the
                    # others would still receive its latest entries, and nothing would be cut off.
                    for dest in node_ids:
                        waiting = len(self.run.in_flight_from(node, dest)) if self.run is not None else 0
                        for _ in range(min(waiting, 3) if "partition" in self.faults else 0):
                            self.apply({"op": "drop", "from": node, "to": dest})
                if rounds:  # enough for the others to time out and elect among themselves
                    self.apply({"op": "settle", "rounds": rounds})

            @allowed("kill")
            @rule(follower=node)
            def replicate_then_restart(self, follower):
                leader = self.resolve("leader")
                if follower == leader:
                    follower = node_ids[(node_ids.index(leader) + 1) % len(node_ids)]
                for src, dest in ((leader, follower), (follower, leader)):
                    # The newest message carries the most: the leader's latest entries, the follower's
                    # latest match.
                    waiting = len(self.run.in_flight_from(src, dest)) if self.run is not None else 0
                    if waiting:
                        newest = {"nth": waiting - 1} if waiting > 1 else {}
                        self.apply({"op": "deliver", "from": src, "to": dest, **newest})
                self.apply({"op": "kill", "node": follower})
                self.apply({"op": "restart", "node": follower})

            @allowed("partition")
            @rule(isolated=target)
            def partition(self, isolated):
                self.cut_off_node(self.resolve(isolated))

            @allowed("partition")
            @rule()
            def heal(self):
                self.apply({"op": "heal"})

        # ---- single steps --------------------------------------------------------------------
        @rule()
        def deliver_all(self):
            self.apply({"op": "deliver_all"})

        @rule(how=st.sampled_from(["deliver", "deliver", "drop", "duplicate"]), src=node, dest=node,
              nth=st.integers(0, 2))
        def one_message(self, how, src, dest, nth):
            # Maelstrom's network loses a message only to a partition, and never duplicates one.
            if (how == "drop" and "partition" not in self.faults) or (how == "duplicate" and how not in self.faults):
                how = "deliver"
            step = {"op": how, "from": src, "to": dest}
            if nth:
                step["nth"] = nth  # a later message overtakes the oldest: reordering
            self.apply(step)

        @rule(one=st.one_of(st.none(), node))
        def tick(self, one):
            self.apply({"op": "tick"} if one is None else {"op": "tick", "node": one})

        @allowed("kill", "pause")
        @rule(fault=st.sampled_from(["kill", "restart", "pause", "resume"]), node=target)
        def fault(self, fault, node):
            if {"kill": "kill", "restart": "kill", "pause": "pause", "resume": "pause"}[fault] in self.faults:
                self.apply({"op": fault, "node": self.resolve(node)})

        @rule(rounds=st.integers(1, 8))
        def settle(self, rounds):
            self.apply({"op": "settle", "rounds": rounds})

        def teardown(self):
            if self.run is None:
                return
            hypothesis.target(float(self.steps_at_risk), label="steps with a read entry on fewer than a majority")
            hypothesis.target(float(self.risky_kills), label="kills of a node with stored entries above its HWM")
            result = RunResult(self.schedule)
            try:
                if self.error is None:
                    try:
                        self.run.finish()
                    except NodeProtocolError as e:
                        self.error = e
            finally:
                self.run.close()
            result_of(self.run, result)
            result.protocol_error, result.steps_run = self.error, len(self.schedule.steps)
            if counted(report, result, began, on_schedule):
                raise Stop()

    run_machine(NodeRun, report, schedules, steps, seed, Stop)
    if report.failures and shrink:
        found = report.failures[0]
        wanted = kinds(found)
        for k, kind in enumerate(wanted):
            left = shrink_seconds - (time.monotonic() - began - report.first_failure_seconds)
            share = max(shrink_seconds / (2 * len(wanted)), left / (len(wanted) - k))
            report.shrunk[kind] = shrink_further(command, found, limits, share, kind=kind, report=report)
    report.seconds = time.monotonic() - began
    return report


def counted(report: HuntReport, result: RunResult, began: float, on_schedule=None) -> bool:
    """Add one schedule run to its end to `report`; whether it failed (the hunt stops there)."""
    report.schedules += 1
    report.operations += result.operations()
    served = sum(1 for op in result.history if op["step"] is not None and op["status"] == "ok")
    report.answered_ok += served
    report.schedules_served += served > 0
    report.last_unserved = result.operations() > 0 and not served
    report.unanswered += len(result.unanswered)
    report.undecided += [f"schedule {report.schedules}, {line}" for line in result.undecided]
    if result.stepping_undecided:
        report.stepping_undecided.append(f"schedule {report.schedules}, {result.stepping_undecided}")
    if on_schedule is not None:
        on_schedule(report, result)
    if not result.failed:
        return False
    report.failures.append(result)
    report.first_failure_at = report.schedules
    report.first_failure_seconds = time.monotonic() - began
    return True


def run_machine(machine, report: HuntReport, schedules: int, steps: int, seed: int | None, stop: type) -> None:
    """Let Hypothesis choose `machine`'s schedules until one raises `stop` (a failure, a start
    error) or `schedules` have run; shrinking is hwm's own (shrink_further), one kind at a time."""
    phases = [p for p in hypothesis.Phase if p not in (hypothesis.Phase.shrink, hypothesis.Phase.explain)]
    settings = hypothesis.settings(max_examples=schedules, stateful_step_count=steps, deadline=None,
                                   database=None, phases=phases, report_multiple_bugs=False,
                                   suppress_health_check=list(hypothesis.HealthCheck),
                                   verbosity=hypothesis.Verbosity.quiet, print_blob=False,
                                   derandomize=False)
    from hypothesis.stateful import get_state_machine_test
    test = get_state_machine_test(machine, settings=settings)
    if seed is not None:
        test = hypothesis.seed(seed)(test)
    try:
        test()
    except stop:
        pass
    except hypothesis.errors.HypothesisException as e:
        if not report.failures and report.start_error is None:  # what failed is kept: nothing to raise then
            inner = getattr(e, "exceptions", ())
            if len(inner) == 1:  # Hypothesis's re-run did not raise it again (the hunt was over): raise it
                raise inner[0] from None
            # Hypothesis's own complaint about examples it drew after the hunt was over (they run
            # nothing) says nothing of the schedules that ran.
            if not (report.schedules >= schedules or report.out_of_time):
                raise


def shrink_further(command: list[str], failure: RunResult, limits: Limits | None = None,
                   seconds: float = 60.0, kind: str | None = None, report: HuntReport | None = None,
                   rerun=None) -> RunResult:
    """Delete steps while the schedule still shows `kind` (a finding's name, or PROTOCOL; by default
    the failure's first kind): halves, then quarters, down to single steps, then fewer settle rounds.
    Only that kind counts, so a shorter schedule that fails some other way never replaces it.

    Each try is a run of real processes, so this direct pass over the steps is the whole shrink.
    `rerun(schedule)` runs a candidate instead of `command` (bridge/servers: k of m runs of real servers)."""
    from hwm.bridge.maelstrom.cluster import run_schedule

    began = time.monotonic()
    kind = kind or kinds(failure)[0]
    best = failure

    def still_fails(steps: list[dict]) -> RunResult | None:
        schedule = Schedule(workload=best.schedule.workload, nodes=best.schedule.nodes, clock=best.schedule.clock,
                            seed=best.schedule.seed, protocol=best.schedule.protocol, steps=steps)
        result = rerun(schedule) if rerun is not None else run_schedule(command, schedule, limits)
        if report is not None:
            report.shrink_runs += 1
        return result if shows(result, kind) else None

    # A finding seen online was visible at its step, so the steps after it are seldom needed:
    # one run tries without all of them before the slower deletions.
    seen_at = [f.step for f in failure.findings if f.step is not None and kind != PROTOCOL and f.name == kind]
    if seen_at and min(seen_at) < len(best.schedule.steps):
        found = still_fails(best.schedule.steps[:min(seen_at)])
        if found is not None:
            best = found
    chunk = max(1, len(best.schedule.steps) // 2)
    while chunk >= 1 and time.monotonic() - began < seconds:
        steps, start, removed = best.schedule.steps, 0, False
        while start < len(steps) and time.monotonic() - began < seconds:
            found = still_fails(steps[:start] + steps[start + chunk:])
            if found is not None:
                best, steps, removed = found, found.schedule.steps, True
            else:
                start += chunk
        if not removed:
            chunk //= 2
    for k, step in enumerate(best.schedule.steps):  # fewer rounds in each settle, where enough
        while step["op"] == "settle" and step["rounds"] > 1 and time.monotonic() - began < seconds:
            found = still_fails(best.schedule.steps[:k] + [dict(step, rounds=step["rounds"] - 1)]
                                + best.schedule.steps[k + 1:])
            if found is None:
                break
            best, step = found, found.schedule.steps[k]
    return best


def saved_schedule(result: RunResult, command: list[str], path: Path) -> Path:
    """Save a run as an hwm-schedule/1 file: its steps, findings, history and observations."""
    schedule = result.schedule
    schedule.findings = ([str(result.protocol_error)] if result.protocol_error else []) + [str(f) for f in result.findings]
    schedule.history, schedule.observations = result.history, result.observations
    if not schedule.title:
        schedule.title = f"{len(schedule.steps)} steps against {' '.join(command)}"
    return schedule.save(path)
