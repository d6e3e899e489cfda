"""Protocol variants: a protocol named where a command takes one (a preset, a preset with flags
changed, a variant), and where it runs (the model only, or also the implementation).

The vocabulary lives in its own modules and is importable from here too: the flags and `Protocol`
(`properties.flags`), the presets (`properties.presets`), the tour's bounds (`properties.tour_bounds`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from hwm.properties.flags import (  # noqa: F401 (the vocabulary, importable from here)
    FLAG_MEANINGS,
    FLAG_SYSTEMS,
    FLAG_VALUES,
    RAFT_RULES,
    Protocol,
    ProtocolError,
    _show,
    flags_of,
    parse_flag_value,
)
from hwm.properties.presets import (  # noqa: F401
    BOOKKEEPER,
    KAFKA,
    MUTANTS,
    PRESETS,
    RAFT,
    SEED,
    ZAB,
    Preset,
    preset_of,
    presets_of,
)
from hwm.properties.rules import overridden
from hwm.properties.tour_bounds import PRESET_TOUR_BOUNDS, TOUR_BOUNDS  # noqa: F401

__all__ = [
    "FLAG_MEANINGS", "FLAG_SYSTEMS", "FLAG_VALUES", "RAFT_RULES", "Protocol", "ProtocolError", "flags_of",
    "parse_flag_value", "BOOKKEEPER", "KAFKA", "MUTANTS", "PRESETS", "RAFT", "SEED", "ZAB", "Preset", "preset_of",
    "presets_of", "PRESET_TOUR_BOUNDS", "TOUR_BOUNDS", "register_loader", "resolve", "MODEL_ONLY_SYSTEMS",
    "SIMULATION_ONLY_SYSTEMS", "model_only", "without_runtime",
]


# Loads a variant named where a preset is (`file.py:Name`, `package.module:Name`, an installed entry
# point): `model.variant` registers it, since `properties` imports nothing of the rest of the project.
_LOADERS: list = []


def register_loader(load) -> None:
    """`load(spec) -> (name, protocol)` resolves the specs that are not presets (`model.variant.load`)."""
    if load not in _LOADERS:
        _LOADERS.append(load)


def resolve(spec: Any) -> tuple[str, Protocol]:
    """A protocol from a preset name or `{"preset": NAME, "flags": {...}}`, or a variant's spec
    (`file.py:Name`, `package.module:Name`, an installed variant's name: docs/variants.md).

    Returns a display name and the protocol. The display name is the preset's
    name, or `NAME+flag=value,...` for a modified preset.
    """
    if isinstance(spec, str) and spec not in PRESETS and _LOADERS:
        if ":" in spec:
            return _LOADERS[0](spec)
        try:
            return _LOADERS[0](spec)  # an installed variant's name
        except ProtocolError as e:
            if "no preset or installed variant" not in str(e):
                raise
    if isinstance(spec, str):
        if spec not in PRESETS:
            import difflib  # a typo is the common case: name the preset it most likely meant
            close = difflib.get_close_matches(spec, list(PRESETS), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ProtocolError(f"unknown protocol {spec!r}{hint} presets are " + ", ".join(PRESETS))
        return spec, PRESETS[spec].protocol
    if isinstance(spec, Mapping):
        unknown = set(spec) - {"preset", "flags"}
        if unknown:
            raise ProtocolError(f"protocol object has unknown keys {sorted(unknown)}")
        base_name = spec.get("preset", "raft")
        _, base = resolve(base_name)
        flags = spec.get("flags", {})
        if not isinstance(flags, Mapping):
            raise ProtocolError("protocol 'flags' must be an object of flag: value")
        changes = {k: parse_flag_value(k, v) for k, v in flags.items()}
        protocol = replace(base, **changes)
        if not changes:
            return base_name, protocol
        shown = ",".join(f"{k}={_show(v)}" for k, v in sorted(changes.items()))
        return f"{base_name}+{shown}", protocol
    raise ProtocolError(f"a protocol is a preset name or an object, not {type(spec).__name__}")


# Systems the real replicated log (impl/) does not implement: their presets run on the model only.
MODEL_ONLY_SYSTEMS: tuple[str, ...] = ()
# Systems the implementation runs in the simulated cluster only (hwm replay --on impl, the
# conformance machine), not on the TCP runtime (hwm node, hwm cluster): none today.
SIMULATION_ONLY_SYSTEMS: tuple[str, ...] = ()


def model_only(protocol: Protocol, hint: str = "use the model (--on model)") -> str | None:
    """Why `protocol` cannot run on the implementation, or None when it can; `hint` ends the reason
    (replay's --on model by default; a command without --on says what to run instead)."""
    if protocol.system in MODEL_ONLY_SYSTEMS:
        implemented = " and ".join(s for s in FLAG_VALUES["system"] if s not in MODEL_ONLY_SYSTEMS)
        return (f"the {protocol.system} presets are model-only: the implementation (impl/) runs {implemented} "
                f"and has no {protocol.system} replica; {hint}")
    if protocol.system == "kafka":
        reasons = []
        if protocol.follower_truncation == "last-fetched-epoch":
            reasons.append("follower_truncation=last-fetched-epoch (KIP-320's first attempt) is model-only: the "
                           "implementation's fetch carries no last fetched epoch")
        if protocol.min_insync_replicas != "majority":
            reasons.append(f"min_insync_replicas={protocol.min_insync_replicas} is model-only: the implementation's "
                           "leader counts a majority and has no NotEnoughReplicas refusal of a produce")
        if protocol.log_flush != "always":
            reasons.append(f"log_flush={protocol.log_flush} is model-only: the implementation's write-ahead log "
                           "fsyncs every append before it answers")
        if protocol.late_leader_and_isr:
            reasons.append("late_leader_and_isr=true is model-only: the implementation's controller delivers a "
                           "LeaderAndIsr request with its election or never")
        if not protocol.controller_fencing:
            reasons.append("controller_fencing=false is model-only: the implementation's controller fences and "
                           "the simulated cluster takes no partition step")
        if reasons:
            return "; ".join(reasons) + f"; {hint}"
    variant = getattr(type(protocol), "variant", None)  # a variant's protocol (model.variant) carries its rules
    added = getattr(type(protocol), "model_change", None)
    if variant is not None and added:
        model = getattr(type(protocol), "base_model", None) or f"the {protocol.system} model"
        return (f"{variant.name or variant.__name__} {added} to {model}, which hwm's own "
                f"replicas do not have; {hint}")
    if variant is not None and "grants_vote" in overridden(variant):
        return (f"{variant.__name__}.grants_vote is model-only: the implementation's vote request carries the "
                f"candidate's last index and generation, not its log; {hint}")
    leases = [flag for flag in ("check_quorum", "lease_reads") if getattr(protocol, flag)]
    if leases:
        return (f"{' and '.join(f'{flag}=true' for flag in leases)} is model-only: the implementation's leader "
                f"neither counts the followers it hears from nor serves reads from a lease; {hint}")
    return None


def without_runtime(protocol: Protocol) -> str | None:
    """Why `protocol` cannot run on the TCP runtime (hwm node, hwm cluster), or None when it can."""
    # hwm node and hwm cluster have no --on: the model is what `hwm check` explores.
    reason = model_only(protocol, hint="check it on the model (hwm check --protocol ...)")
    if reason is None and protocol.system in SIMULATION_ONLY_SYSTEMS:
        reason = (f"the {protocol.system} presets are model-only on the TCP runtime: its {protocol.system} replica "
                  f"runs in the simulated cluster (hwm replay --on impl, the conformance tests), and hwm node "
                  f"and hwm cluster run the raft family's replicas")
    return reason
