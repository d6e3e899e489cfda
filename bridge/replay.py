"""Replaying a saved trace on the implementation: a simulated cluster of real replicas
(`bridge.simcluster`), judged with the same outcome as replay on the model (`checker.replay`)."""

from __future__ import annotations

from hwm.bridge.simcluster import SimCluster, build_cluster
from hwm.checker.replay import Outcome, lasso_label, replay_lasso_on_model, replay_on_model, resolve_for, watched_properties
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.model.variant import HookError
from hwm.properties.liveness import LIVENESS_BY_NAME
from hwm.properties.protocol import model_only
from hwm.properties.trace import Trace, TraceError


def replay_on_impl(trace: Trace, protocol: str | dict | None = None) -> Outcome:
    """Run the trace's steps on real replicas (`bridge.simcluster.build_cluster`); stop at the first
    violation of a watched property, evaluated on the implementation's snapshots (step properties
    on the snapshots before and after each step). ReadsAgree also compares the values the real
    reads returned. A step the implementation refuses ends the replay as `blocked`, with its reason.
    """
    name, proto = resolve_for(trace, protocol)
    reason = model_only(proto)
    if reason:
        raise TraceError(reason, file=trace.source, field="protocol")
    config = Config.from_mapping(trace.config, where=trace.source)
    cluster = build_cluster(proto, config)
    if trace.property in LIVENESS_BY_NAME:
        return replay_lasso_on_impl(trace, name, cluster, build_model(proto, config))
    before = cluster.snapshot()
    outcome = Outcome("holds", "impl", name, rows=[("(initial)", before)])
    # BookKeeper's ledger states its properties per write set (properties.ledger): the model's own.
    props = watched_properties(trace, build_model(proto, config) if proto.system == "bookkeeper" else None)
    for number, step in enumerate(trace.steps, start=1):
        try:
            reason = cluster.apply_step(step)
        except HookError as e:  # a variant's rule, asked by a replica
            raise HookError(f"{e}, at step {number} {step} on the implementation") from None
        if reason is not None:
            outcome.kind, outcome.step, outcome.reason = "blocked", number, f"{step}: {reason}"
            return outcome
        after = cluster.snapshot()
        outcome.rows.append((str(step), after))
        for p in props:
            finding = p.check(before, after) if p.on == "step" else p.check(after)
            if not finding and p.name == "ReadsAgree":
                finding = cluster.value_disagreement()
            if finding:
                outcome.kind, outcome.property, outcome.finding, outcome.step = "violation", p.name, finding, number
                return outcome
        before = after
    return outcome


def replay_lasso_on_impl(trace: Trace, name: str, cluster: SimCluster, model) -> Outcome:
    """Run a lasso's steps on real replicas: the cycle must close on the implementation's snapshots
    and keep one obligation open in each. Whether the cycle is fair is a question about the
    actions the protocol enables, which the model answers (the implementation does not list them)."""
    from hwm.checker.liveness import refusal
    from hwm.properties.snapshot import snapshot_of

    reason = refusal(model)
    if reason:
        raise TraceError(reason, file=trace.source, field="config.max_partitions")
    outcome = Outcome("holds", "impl", name, rows=[("(initial)", cluster.snapshot())], loop=trace.loop)
    for number, step in enumerate(trace.steps, start=1):
        reason = cluster.apply_step(step)
        if reason is not None:
            outcome.kind, outcome.step, outcome.reason = "blocked", number, f"{step}: {reason}"
            return outcome
        outcome.rows.append((lasso_label(trace, number, step), cluster.snapshot()))
    views = [view for _, view in outcome.rows]
    last, prop = len(trace.steps), LIVENESS_BY_NAME[trace.property]
    if snapshot_of(views[last]) != snapshot_of(views[trace.loop - 1]):
        outcome.reason = (f"the loop does not close: after step {last} the replicas are not in the state they "
                          f"were in before step {trace.loop}")
        return outcome
    open_ = set(prop.obligations(views[trace.loop - 1]))
    for view in views[trace.loop:last]:
        open_ &= set(prop.obligations(view))
    if not open_:
        outcome.reason = f"no obligation of {prop.name} stays open along the cycle (steps {trace.loop}..{last})"
        return outcome
    on_model = replay_lasso_on_model(trace, name, model)
    if on_model.kind != "violation":
        outcome.reason = f"on the model: {on_model.reason}"
        return outcome
    outcome.kind, outcome.property, outcome.step = "violation", prop.name, last
    outcome.finding = prop.obligations(views[trace.loop - 1])[min(open_)] + ", and stays so forever along a fair cycle"
    return outcome


# Where a trace replays, by the name `hwm replay --on` and the trace pages' columns give it.
REPLAYERS = {"model": replay_on_model, "impl": replay_on_impl}
