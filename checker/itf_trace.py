"""hwm-trace/1 <-> ITF through the model: the states of a trace's steps, and the steps behind an ITF
trace's states (each found as the model action whose successor is the next state).

ITF carries the raft family's variables on the rpc network (properties/itf.py), and after them every
further variable of the model's state: the other systems', a variant's fields. The async network's
channels and a partition's cut are not exported, and are refused.
"""

from __future__ import annotations

from hwm.model.actions import from_step, to_step
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.model.variant_source import TRACE_KEY
from hwm.properties.itf import ItfError, ItfState, ItfTrace, parse_state, state_json, to_json
from hwm.properties.protocol import ProtocolError, resolve
from hwm.properties.trace import Trace, TraceError, full_config


def unsupported(protocol) -> str | None:
    """Why ITF cannot carry the traces of `protocol` at any bounds, or None."""
    if protocol.check_quorum or protocol.lease_reads:
        return ("ITF here carries the model's variables, not a partition's cut or the lease rules "
                "(model/partition.py)")
    return None


def _supported(protocol, config: Config, *, source: str | None) -> None:
    if unsupported(protocol):
        raise TraceError(unsupported(protocol), file=source, field="protocol")
    if config.network != "rpc":
        raise TraceError("ITF here carries the rpc network's variables; this trace uses async (its channels "
                         "are not exported)", file=source, field="config.network")
    if config.max_partitions:
        raise TraceError("ITF here carries the model's variables, not a partition's cut (model/partition.py)",
                         file=source, field="config.max_partitions")


def itf_of_trace(trace: Trace, protocol_spec=None) -> dict:
    """The ITF document of the states `trace` goes through on the model (up to a step that is not enabled)."""
    spec = protocol_spec if protocol_spec is not None else trace.protocol
    _, protocol = resolve(spec)
    config = Config.from_mapping(trace.config, where=trace.source)
    _supported(protocol, config, source=trace.source)
    model = build_model(protocol, config)
    state = model.initial_state()
    states, actions = [state], [None]
    for step in trace.steps:
        action = from_step(step)
        if model.why_not(state, action) is not None:
            break
        state = model.apply(state, action)
        states.append(state)
        actions.append(str(step))
    meta = {"protocol": spec, "config": dict(trace.config), "property": trace.property, "expect": trace.expect,
            "title": trace.title, "explanation": trace.explanation}
    if protocol_spec is None and TRACE_KEY in trace.extra:  # the digest of the variant's file it was found with
        meta[TRACE_KEY] = trace.extra[TRACE_KEY]
    loop = trace.loop - 1 if trace.loop is not None else None  # ITF's loop is a state index
    return to_json(states, actions, meta, trace.title, loop)


def _as_itf(state) -> ItfState:
    """A model state as ITF reads it back (no action), to compare with a file's."""
    return parse_state(state_json(state, 0), 0)


def _same(model_state: ItfState, target: ItfState) -> bool:
    """Whether the file's state is the model's: the eight variables, and each further variable of the
    model's (another tool's file may have variables of its own, which no model state says anything of)."""
    further = dict(target.further)
    return (model_state.servers, model_state.reads, model_state.crashes) == (
        target.servers, target.reads, target.crashes) and all(further.get(k) == v for k, v in model_state.further)


def _inferred_config(itf: ItfTrace) -> dict:
    """Bounds that admit every state of a trace from another tool."""
    states = itf.states
    return {"servers": len(states[0].servers),
            "max_generation": max(1, max(srv.generation for s in states for srv in s.servers)),
            "max_log": max(len(srv.log) for s in states for srv in s.servers),
            "max_crashes": max(s.crashes for s in states), "network": "rpc"}


def trace_of_itf(itf: ItfTrace, protocol_spec=None, *, source: str | None = None) -> Trace:
    """The hwm-trace/1 trace whose steps lead the model through the ITF trace's states."""
    meta = itf.hwm
    spec = protocol_spec if protocol_spec is not None else meta.get("protocol")
    if spec is None:
        raise TraceError("this ITF trace names no protocol (no #meta.hwm): give --protocol", file=source,
                         field="protocol")
    try:
        _, protocol = resolve(spec)
    except ProtocolError as e:
        raise TraceError(str(e), file=source, field="protocol") from None
    raw_config = meta.get("config") or _inferred_config(itf)
    if not isinstance(raw_config, dict):
        raise TraceError("#meta.hwm.config is an object", file=source, field="config")
    full = full_config(raw_config, where=source)
    config = Config(**full)
    _supported(protocol, config, source=source)
    model = build_model(protocol, config)
    state = model.initial_state()
    if len(state.servers) != len(itf.states[0].servers):  # BookKeeper's: its bookies, then its two clients
        raise ItfError(f"the states have {len(itf.states[0].servers)} servers, the model of the config "
                       f"{len(state.servers)}", file=source, state=0)
    first = _as_itf(state)
    missing = [name for name, _ in first.further if name not in dict(itf.states[0].further)]
    if missing:
        raise ItfError(f"the model of {spec} has a variable {missing[0]!r}, which this state has not",
                       file=source, state=0, variable=missing[0])
    if not _same(first, itf.states[0]):
        raise ItfError("the first state is not the model's initial state (every server a follower of "
                       "generation 0 with an empty log)", file=source, state=0)
    steps = []
    for index, target in enumerate(itf.states[1:], 1):
        found = [(a, after) for a in model.actions(state)
                 for after in [model.apply(state, a)] if _same(_as_itf(after), target)]
        if not found:
            raise ItfError(f"no step of the model leads from state {index - 1} to this one", file=source,
                           state=index)
        named = [(a, after) for a, after in found if str(to_step(a)).split("(")[0] == (target.action or "")
                 .split("(")[0] and _same_servers(str(to_step(a)), target.action)]
        action, state = (named or found)[0]
        steps.append(to_step(action))
    prop = meta.get("property")
    expect = meta.get("expect", "violation" if prop else "holds")
    loop = itf.loop + 1 if itf.loop is not None else None
    return Trace(protocol=spec, config=full, property=prop, expect=expect, steps=steps,
                 title=str(meta.get("title", itf.description)), explanation=str(meta.get("explanation", "")),
                 source=source, loop=loop)


def _same_servers(step: str, named: str | None) -> bool:
    """Whether a step's servers are the ones the ITF state names (values of writes aside)."""
    if named is None:
        return False
    import re
    servers = re.compile(r"S\d+")
    return servers.findall(step) == servers.findall(named)
