"""The conformance machine: a model state and a `SimCluster` side by side, one rule per model action,
checked after each (what is checked, and what a failure writes, is told in
`bridge/conformance/__init__.py`); `machine_for` makes one for a protocol and configuration."""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from hwm.bridge.simcluster import build_cluster
from hwm.impl.core import Replica
from hwm.model.actions import to_step
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.catalogue import SOMETIMES, check_state, check_step
from hwm.properties.protocol import PRESETS, RAFT, Protocol, preset_of, resolve
from hwm.properties.snapshot import LEADER, describe_server, server_name, snapshot_of
from hwm.properties.trace import Step, Trace


# Where failing runs are written unless a machine says otherwise (HWM_CONFORMANCE_OUT overrides).
DEFAULT_OUT = Path(os.environ.get("HWM_CONFORMANCE_OUT", "hwm-out/conformance"))

# Bounds of the default run: three servers, enough generations, entries and crashes for leader
# changes with uncommitted entries, truncations and rejoins, small enough that a step is cheap.
RPC = Config(servers=3, max_generation=5, max_log=3, max_crashes=2, network="rpc")
ASYNC = Config(servers=3, max_generation=5, max_log=3, max_crashes=2, network="async", channel_capacity=2)
# Steps per example, at most (Hypothesis draws how many).
STEPS = 30


ACTION_KINDS = ("elect", "write", "replicate", "send", "deliver", "drop", "read", "crash", "restart", "sync",
                "persist", "shrink_isr", "add", "send_add", "fence", "recovery_read", "change_ensemble")


class ConformanceFailure(AssertionError):
    """A failed check; `trace_path` is the hwm-trace/1 file the failing run was written to."""

    expect = "holds"
    property: str | None = None
    trace_path: Path | None = None


class Divergence(ConformanceFailure):
    """The implementation and the model disagree (refusal, exception, snapshot or channels)."""


class PropertyViolation(ConformanceFailure):
    """An `always` property fails on the implementation's history (the snapshots still agree)."""

    expect = "violation"

    def __init__(self, prop: str, message: str):
        super().__init__(message)
        self.property = prop


def protocol_spec(protocol: Protocol) -> Any:
    """The protocol as a trace names it: a preset name, a variant's spec (`file.py:Name`, docs/variants.md),
    or raft with the flags that differ (from the variant's own, for a variant with flags)."""
    spec = getattr(type(protocol), "spec", None)
    if spec:
        flags = protocol.differences(resolve(spec)[1])
        return {"preset": spec, "flags": flags} if flags else spec
    name = preset_of(protocol)
    if name is not None:
        return name
    base = protocol.system if protocol.system in PRESETS else "raft"  # each system's safe preset
    return {"preset": base, "flags": protocol.differences(PRESETS[base].protocol)}


def removed_entries(before, after) -> bool:
    """True when some server's log lost an entry (a truncation, or a crash losing unsynced entries)."""
    for b, a in zip(before.servers, after.servers):
        if len(a.log) < len(b.log) or a.log[: len(b.log)] != b.log:
            return True
    return False


def new_leader(before, after) -> bool:
    for b, a in zip(before.servers, after.servers):
        if a.alive and a.role == LEADER and (b.role != LEADER or b.generation != a.generation):
            return True
    return False


class ConformanceMachine(RuleBasedStateMachine):
    """The model and a SimCluster side by side: the rules every network has. `RpcConformance` and
    `AsyncConformance` add their network's rules; `machine_for` sets the protocol and bounds."""

    protocol: Protocol = RAFT
    config: Config = RPC
    replica_factory = Replica
    out_dir: Path = DEFAULT_OUT
    label = "raft-rpc"  # names the trace file
    # Statistics over every run of this class (the bench and the vacuity test read them).
    runs = 0
    steps_run = 0
    first_failure: tuple[int, float] | None = None  # (runs, seconds since started) at the first failure
    started: float | None = None
    witnessed: Counter = Counter()

    def __init__(self):
        super().__init__()
        cls = type(self)
        cls.runs += 1
        if cls.started is None:
            cls.started = time.perf_counter()
        self.model = build_model(self.protocol, self.config)
        self.state = self.model.initial_state()
        self.always = tuple(p for p in self.model.properties if p.kind == "always")
        self.cluster = build_cluster(self.protocol, self.config, replica_factory=self.replica_factory)
        self.steps: list[Step] = []
        self.writes = 0
        self._enabled: dict[str, list] | None = None
        self.snapshot = self.cluster.snapshot()
        if snapshot_of(self.snapshot) != snapshot_of(self.state):
            self._fail(Divergence(f"the initial states differ:\n{self._diff(self.snapshot)}"))

    # ------------------------------------------------------------------ rules: one per model action
    def enabled(self, kind: str) -> list:
        """The model's enabled actions of one kind in the current state."""
        if self._enabled is None:
            self._enabled = {}
            for action in self.model.actions(self.state):
                self._enabled.setdefault(action[0], []).append(action)
        return self._enabled.get(kind, [])

    def _draw_and_run(self, data, kind: str) -> None:
        self.run(data.draw(st.sampled_from(self.enabled(kind)), label=kind))

    @precondition(lambda self: self.enabled("elect"))
    @rule(data=st.data())
    def elect(self, data):
        self._draw_and_run(data, "elect")

    @precondition(lambda self: self.enabled("write"))
    @rule(data=st.data())
    def write(self, data):
        self._draw_and_run(data, "write")

    @precondition(lambda self: self.enabled("read"))
    @rule(data=st.data())
    def read(self, data):
        self._draw_and_run(data, "read")

    @precondition(lambda self: self.enabled("crash"))
    @rule(data=st.data())
    def crash(self, data):
        self._draw_and_run(data, "crash")

    @precondition(lambda self: self.enabled("restart"))
    @rule(data=st.data())
    def restart(self, data):
        self._draw_and_run(data, "restart")

    @precondition(lambda self: not any(self.enabled(k) for k in ACTION_KINDS))
    @rule()
    def stutter(self):
        """Every bound is reached and no action is enabled: nothing happens (Hypothesis needs a rule)."""
        event("deadlock: no action enabled")

    # ------------------------------------------------------------------ one step on both sides
    def run(self, action: tuple) -> None:
        """Apply a model-enabled action to the model and the implementation, then check."""
        value = None
        if action[0] in ("write", "add"):  # a client's write, or a BookKeeper writer's add
            self.writes += 1
            value = f"w{self.writes}"  # every write its own value: ReadsAgree compares values
        step = to_step(action, value)
        self.steps.append(step)
        type(self).steps_run += 1
        try:
            self._check(action, step, value)
        except ConformanceFailure as failure:
            self._fail(failure)

    def _check(self, action: tuple, step: Step, value: str | None) -> None:
        where = f"step {len(self.steps)} {step}"
        reason = self.model.why_not(self.state, action)
        assert reason is None, f"{where}: drawn from the enabled actions but the model refuses it: {reason}"
        self.state = self.model.apply(self.state, action)
        self._enabled = None
        try:
            refused = self.cluster.apply(action, value)
        except Exception as error:
            raise Divergence(f"{where}: the implementation raised {error!r}") from error
        if refused is not None:
            raise Divergence(f"{where}: the model takes this step, the implementation refuses it: {refused}")
        before, after = self.snapshot, self.cluster.snapshot()
        if snapshot_of(after) != snapshot_of(self.state):
            raise Divergence(f"{where}: the implementation's snapshot differs from the model's\n{self._diff(after)}")
        if self.cluster.model_channels() != self.state.channels:
            raise Divergence(f"{where}: the channels differ\nmodel {self.state.channels}\n"
                             f"impl  {self.cluster.model_channels()}")
        self._events(action, before, after)
        found = check_state(after, self.always)  # the model's `always` properties
        found.update(check_step(before, after, self.always))
        disagreement = self.cluster.value_disagreement()
        if disagreement:
            found.setdefault("ReadsAgree", disagreement)
        if found:
            prop, finding = next(iter(found.items()))
            raise PropertyViolation(prop, f"{where}: {prop} fails on the implementation: {finding}")
        self.snapshot = after

    def _events(self, action: tuple, before, after) -> None:
        """Rule-firing statistics (`pytest --hypothesis-show-statistics`) and the vacuity counters."""
        seen = [action[0]]
        if removed_entries(before, after):
            seen.append("truncation")
        if new_leader(before, after):
            seen.append("leader change")
        for p in SOMETIMES:
            if p.on == "step" and check_step(before, after, (p,)):
                seen.append(p.name)
            elif p.on == "state" and p.check(after):
                seen.append(p.name)
        for name in seen:
            event(name)
            type(self).witnessed[name] += 1

    def _diff(self, impl_snapshot) -> str:
        expected = snapshot_of(self.state)
        lines = []
        for k, (m, i) in enumerate(zip(expected.servers, impl_snapshot.servers)):
            mark = "  " if m == i else "≠ "
            lines.append(f"{mark}{server_name(k)} model {describe_server(m)} | impl {describe_server(i)}")
        if expected.reads != impl_snapshot.reads:
            lines.append(f"≠ reads model {sorted(expected.reads)} | impl {sorted(impl_snapshot.reads)}")
        return "\n".join(lines)

    # ------------------------------------------------------------------ failures become traces
    def _fail(self, failure: ConformanceFailure) -> None:
        cls = type(self)
        if cls.first_failure is None:
            cls.first_failure = (cls.runs, time.perf_counter() - cls.started)
        path = self.save_trace(failure)
        failure.trace_path = path
        failure.args = (f"{failure.args[0]}\nthe failing run is saved as a trace: {path}\n"
                        f"  replay it: hwm replay {path} --on both",)
        raise failure

    def save_trace(self, failure: ConformanceFailure) -> Path:
        name = f"{self.label}-{failure.property or 'divergence'}"
        path = Path(self.out_dir) / (re.sub(r"[^A-Za-z0-9_.=+-]", "_", name) + ".json")
        kind = "a violation of " + failure.property if failure.property else "a divergence from the model"
        trace = Trace(
            protocol=protocol_spec(self.protocol), config=self.config.to_mapping(),
            property=failure.property, expect=failure.expect, steps=list(self.steps),
            title=f"conformance: {kind} found by Hypothesis in {len(self.steps)} steps",
            explanation=str(failure.args[0]),
        )
        return trace.save(path)


class RpcConformance(ConformanceMachine):
    """The rpc network: `replicate` is one whole append round trip."""

    @precondition(lambda self: self.enabled("replicate"))
    @rule(data=st.data())
    def replicate(self, data):
        self._draw_and_run(data, "replicate")


class KafkaConformance(RpcConformance):
    """Kafka's replicas (rpc network only) add the leader's ISR shrink."""

    @precondition(lambda self: self.enabled("shrink_isr"))
    @rule(data=st.data())
    def shrink_isr(self, data):
        self._draw_and_run(data, "shrink_isr")


class AsyncConformance(ConformanceMachine):
    """The async network: appends and replies travel on FIFO channels that may lose them."""

    config = ASYNC
    label = "raft-async"

    @precondition(lambda self: self.enabled("send"))
    @rule(data=st.data())
    def send(self, data):
        self._draw_and_run(data, "send")

    @precondition(lambda self: self.enabled("deliver"))
    @rule(data=st.data())
    def deliver(self, data):
        self._draw_and_run(data, "deliver")

    @precondition(lambda self: self.enabled("drop"))
    @rule(data=st.data())
    def drop(self, data):
        self._draw_and_run(data, "drop")


class ZabConformance(RpcConformance):
    """ZAB: the rpc network's rules and the synchronisation phase's `sync` and `persist`. After every
    step the replicas must also agree with the model on what ZAB tracks beyond a snapshot: entries
    on disk, currentEpoch, which leaders are established and who synchronised with them, and the
    entries acknowledged to clients (`bridge.simcluster.zab.ZabView`)."""

    label = "zab-rpc"

    @precondition(lambda self: self.enabled("sync"))
    @rule(data=st.data())
    def sync(self, data):
        self._draw_and_run(data, "sync")

    @precondition(lambda self: self.enabled("persist"))
    @rule(data=st.data())
    def persist(self, data):
        self._draw_and_run(data, "persist")

    def _check(self, action: tuple, step: Step, value: str | None) -> None:
        from hwm.bridge.simcluster.zab import model_view

        super()._check(action, step, value)
        mine, expected = self.cluster.zab_view(), model_view(self.state)
        if mine != expected:
            where = f"step {len(self.steps)} {step}"
            raise Divergence(f"{where}: the implementation's ZAB state differs from the model's\n"
                             + "\n".join(f"≠ {field}: model {expected.shown(field)} | impl {mine.shown(field)}"
                                         for field in expected._fields
                                         if getattr(expected, field) != getattr(mine, field)))


class BookKeeperConformance(ConformanceMachine):
    """BookKeeper's ledger (rpc network only): the writer's `add`, `send_add` and (with spare
    bookies) `change_ensemble`, the recovery client's `fence` and `recovery_read`, and the bookies'
    `read`, `crash`, `restart`. After every step the implementation must also agree with the model
    on what BookKeeper tracks beyond a snapshot: fenced bookies, fencing answers, "no such entry"
    answers, acknowledged entries, the writer's fragments and those the ledger metadata holds
    (`bridge.simcluster.bookkeeper.BookKeeperView`)."""

    label = "bookkeeper-rpc"

    @precondition(lambda self: self.enabled("add"))
    @rule(data=st.data())
    def add(self, data):
        self._draw_and_run(data, "add")

    @precondition(lambda self: self.enabled("send_add"))
    @rule(data=st.data())
    def send_add(self, data):
        self._draw_and_run(data, "send_add")

    @precondition(lambda self: self.enabled("fence"))
    @rule(data=st.data())
    def fence(self, data):
        self._draw_and_run(data, "fence")

    @precondition(lambda self: self.enabled("recovery_read"))
    @rule(data=st.data())
    def recovery_read(self, data):
        self._draw_and_run(data, "recovery_read")

    @precondition(lambda self: self.enabled("change_ensemble"))
    @rule(data=st.data())
    def change_ensemble(self, data):
        self._draw_and_run(data, "change_ensemble")

    def _check(self, action: tuple, step: Step, value: str | None) -> None:
        from hwm.bridge.simcluster.bookkeeper import view_of

        super()._check(action, step, value)
        mine, expected = self.cluster.bookkeeper_view(), view_of(self.state)
        if mine != expected:
            where = f"step {len(self.steps)} {step}"
            raise Divergence(f"{where}: the implementation's ledger state differs from the model's\n"
                             + "\n".join(f"≠ {field}: model {expected.shown(field)} | impl {mine.shown(field)}"
                                         for field in expected._fields
                                         if getattr(expected, field) != getattr(mine, field)))


def machine_for(protocol: str | Protocol, config: Config = RPC, *, replica_factory=Replica,
                out_dir: Path | str | None = None, label: str | None = None) -> type[ConformanceMachine]:
    """A ConformanceMachine class for one protocol (a preset's name, a variant's spec, or a Protocol) and
    configuration."""
    if isinstance(protocol, str):
        name, protocol = resolve(protocol)
    else:
        name = preset_of(protocol) or "custom"
    label = label or f"{name}-{config.network}-{config.servers}"
    base = AsyncConformance if config.network == "async" else RpcConformance
    if protocol.system == "zab":
        base = ZabConformance
    if protocol.system == "kafka":
        base = KafkaConformance
    if protocol.system == "bookkeeper":
        base = BookKeeperConformance
    return type(base)(f"Conformance[{label}]", (base,), {
        "protocol": protocol, "config": config, "replica_factory": staticmethod(replica_factory),
        "out_dir": Path(out_dir) if out_dir is not None else DEFAULT_OUT, "label": label,
        "runs": 0, "steps_run": 0, "first_failure": None, "started": None, "witnessed": Counter(),
    })
