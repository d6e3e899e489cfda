"""Your own variant of a system: a `Variant` names a base preset and overrides some of its rules
(`model.rules.Rules`) as plain methods, and may add invariants and `sometimes` witnesses over the
snapshot view. docs/variants.md is the surface kept stable.

A variant is named where a preset is, as `path/to/file.py:Name` or `package.module:Name`, or by the name
an installed package gives it in the entry-point group `hwm.protocols`; `resolve` (`properties.protocol`)
turns that spec into the variant's protocol, a `Protocol` with the base's flags whose class carries the
variant, and `build_model` (`model.registry`) gives its model the variant's rules.

Bad input is a `VariantError` naming the file, the line and what is wrong, raised before any search; a
hook or a property that raises or answers the wrong type during the search is a `HookError` naming the
state and the action too.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import sys
import traceback
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, Callable, Mapping

from hwm.model.actions import Model
from hwm.model.bare import BARE_HOOKS, BARE_NOT_ASKED, BareModel
from hwm.model.rules import HOOKS, Rules, overridden
from hwm.model.systems import MODELS
from hwm.properties.rules import HookError, not_asked  # raised here, caught by the engines and the replicas' runners
from hwm.model.variant_code import VariantError, defined_at, hook_failure, meaning_of, raised_at, state_text
from hwm.model.variant_model import (ModelLevel, check_declaration, is_model_level, liveness_properties, model_change,
                                     model_class, snapshot_view)
from hwm.model.variant_source import digest_of, fallback_spec, source_file
from hwm.properties.catalogue import Property, at_quorum
from hwm.properties.protocol import Protocol, ProtocolError, register_loader, resolve

__all__ = ["Variant", "HookError", "ENTRY_POINT_GROUP", "load", "installed", "is_variant_spec"]

ENTRY_POINT_GROUP = "hwm.protocols"


class Variant(ModelLevel, Rules):
    """Subclass it, name a `base` preset, and override any of the rules of `model.rules.Rules`:
    `counts`, `election_quorum`, `replication_quorum`, `quorum_index`, `may_commit`, `grants_vote`,
    `accepts_append`, `restart_keeps`, `readable`.
    `self.servers` is the cluster's size and `self.protocol` the base's flags; `super()` gives the
    base's rule. `invariants` and `witnesses` map a property's name to a function of the snapshot view
    that returns None, or a sentence: the violation (an invariant) or the witness (a `sometimes`).
    A model's fields, actions and liveness properties: `model.variant_model.ModelLevel`."""

    base: str = "raft"
    name: str | None = None
    invariants: Mapping[str, Callable] = {}
    witnesses: Mapping[str, Callable] = {}


class VariantProtocol(Protocol):
    """The protocol of a variant: the base's flags; each variant gets a subclass whose class attributes
    carry the variant and the spec that names it (so `dataclasses.replace` keeps them)."""

    variant: type = Variant
    spec: str = ""
    display: str = ""
    digest: str | None = None  # the sha256 of the variant's file (`model.variant_source`)
    # What it adds to its base's model (`model_change`), which hwm's own replicas do not follow, or None;
    # that model where it is not its system's ("the base Model", model.bare).
    model_change: str | None = None
    base_model: str | None = None

    def rules(self, protocol: Protocol, servers: int) -> Rules:
        return checked_rules(type(self).variant, protocol, servers)

    def __reduce__(self):
        # Pickled by its spec: a process that has not loaded the variant (a Spark executor) loads it again.
        kind = type(self)
        return reloaded, (kind.spec, fallback_spec(kind), kind.digest, self.flags())

    def property_kinds(self) -> dict[str, str]:
        """The kind of each property the variant adds (a trace may name it): always, sometimes, eventually."""
        cls = type(self).variant
        kinds = {name: "always" for name in cls.invariants} | {name: "sometimes" for name in cls.witnesses}
        for prop in liveness_properties(cls):
            kinds |= {prop.name: "eventually", prop.witness.name: "sometimes"}
        return kinds


# ------------------------------------------------------------------ loading
def is_variant_spec(spec: Any) -> bool:
    """Whether `spec` names a variant (`file.py:Name`, `package.module:Name`), not a preset."""
    return isinstance(spec, str) and ":" in spec


def _line_of_name(path: str | None, name: str) -> int | None:
    """The line of the top-level statement of the file at `path` that defines `name`, if any."""
    if not path:
        return None
    try:
        tree = ast.parse(Path(path).read_text(), path)
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        targets: list = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            targets = [node.name]
        elif isinstance(node, ast.Assign):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            targets = [node.target.id]
        if name in targets:
            return node.lineno
    return None


def _import_failure(error: BaseException, path: str | None, what: str) -> VariantError:
    if isinstance(error, SyntaxError) and error.lineno is not None:
        return VariantError(f"{error.filename or path}:{error.lineno}: syntax error: {error.msg}")
    frames = traceback.extract_tb(error.__traceback__)
    mine = [f for f in frames if path and Path(f.filename).resolve() == Path(path).resolve()]
    frame = (mine or frames or [None])[-1]
    where = f"{frame.filename}:{frame.lineno}" if frame is not None else (path or what)
    return VariantError(f"{where}: importing {what} raised {type(error).__name__}: {error}")


def _module_of_file(path: Path) -> Any:
    if not path.is_file():
        raise VariantError(f"{path}: no such file" if not path.exists() else f"{path}: not a file")
    resolved = str(path.resolve())
    # One module per file, by its real path: loading it again (another resolve) reuses it.
    name = f"hwm_variant_{path.stem}_{hashlib.blake2b(resolved.encode(), digest_size=4).hexdigest()}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise VariantError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as e:  # noqa: BLE001 - whatever the file does is the user's: one line
        del sys.modules[name]
        if isinstance(e, KeyboardInterrupt):
            raise
        raise _import_failure(e, resolved, str(path)) from None
    return module


def _module_of_name(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name and (name == e.name or name.startswith(e.name + ".")):
            raise VariantError(f"{name}: no module named {e.name!r} (a file is named path/to/file.py:Name)") from None
        raise _import_failure(e, None, name) from None
    except Exception as e:  # noqa: BLE001
        spec = importlib.util.find_spec(name) if "." not in name else None
        raise _import_failure(e, getattr(spec, "origin", None), name) from None


def _variant_class(module: Any, where: str, attr: str) -> type[Variant]:
    path = getattr(module, "__file__", None)
    if not attr.isidentifier():
        raise VariantError(f"{where}: {attr!r} is not a Python name")
    if not hasattr(module, attr):
        defined = sorted(n for n, v in vars(module).items()
                         if isinstance(v, type) and issubclass(v, Variant) and v is not Variant)
        hint = f"; its variants: {', '.join(defined)}" if defined else "; it defines no Variant subclass"
        raise VariantError(f"{path or where}: no name {attr!r}{hint}")
    obj = getattr(module, attr)
    if not (isinstance(obj, type) and issubclass(obj, Variant)):
        line = _line_of_name(path, attr)
        kind = "class" if isinstance(obj, type) else type(obj).__name__
        raise VariantError(f"{path or where}:{line or '?'}: {attr} is a {kind}, not a variant (a subclass of "
                           f"hwm.model.variant.Variant)")
    return obj


def is_bare(cls: type) -> bool:
    """Whether the variant builds on the base `Model` (model.bare), not on a system's model."""
    return getattr(cls, "base", None) is Model


def base_preset(cls: type) -> str | dict:
    """The preset a variant's flags start from: its base's, or raft's defaults under the base `Model`."""
    return "raft" if is_bare(cls) else cls.base


def _check_class(cls: type[Variant]) -> tuple[str, Protocol]:
    """The base's display name and protocol; VariantError on a bad base, hook or property."""
    where = defined_at(cls)
    base = cls.base
    try:
        if is_variant_spec(base):
            raise ProtocolError("a variant's base is a preset (subclass another variant to build on it)")
        if isinstance(base, type):
            if base is not Model:
                raise ProtocolError("a class as a base is the base Model (hwm.model.actions.Model) alone; a "
                                    "system's model is named by a preset")
            if not cls.actions:
                raise ProtocolError("the base Model has no election and no replication: a variant of it declares "
                                    "the actions that elect, replicate and commit")
        base_name, protocol = resolve(base_preset(cls))
    except ProtocolError as e:
        raise VariantError(f"{where}: {cls.__name__}.base {getattr(base, '__name__', base)!r}: {e}") from None
    for hook in HOOKS:
        if not callable(getattr(cls, hook)):
            raise VariantError(f"{where}: {cls.__name__}.{hook} must be a method, not {getattr(cls, hook)!r}")
    for hook in overridden(cls):
        if is_bare(cls):
            if hook not in BARE_HOOKS:
                raise VariantError(f"{defined_at(getattr(cls, hook))}: {cls.__name__}.{hook}: {BARE_NOT_ASKED}")
            continue
        why = not_asked(protocol.system, hook)
        if why:
            raise VariantError(f"{defined_at(getattr(cls, hook))}: {cls.__name__}.{hook}: the {protocol.system} system "
                               f"(base {base_name}) asks no {hook}: {why}")
    from hwm.properties.acked import ALL_BY_NAME
    from hwm.properties.liveness import LIVENESS_BY_NAME
    check_declaration(cls, protocol.system, MODELS[protocol.system])
    seen: set[str] = set()
    for kind in ("invariants", "witnesses", "liveness"):
        table = getattr(cls, kind)
        if not isinstance(table, Mapping):
            raise VariantError(f"{where}: {cls.__name__}.{kind} must map a property name to a function, "
                               f"not {type(table).__name__}")
        for name, check in table.items():
            if not (isinstance(name, str) and name.isidentifier()):
                raise VariantError(f"{where}: {cls.__name__}.{kind}: {name!r} is not a property name")
            if name in ALL_BY_NAME or name in LIVENESS_BY_NAME or name in seen:
                raise VariantError(f"{where}: {cls.__name__}.{kind}: {name} is already a property"
                                   + (" of the catalogue" if name in ALL_BY_NAME or name in LIVENESS_BY_NAME else ""))
            if not callable(check):
                raise VariantError(f"{where}: {cls.__name__}.{kind}[{name!r}] must be a function of the snapshot "
                                   f"view, not {type(check).__name__}")
            seen.add(name)
            if kind == "liveness":  # its witness's name
                seen.add(name + "Opens")
    return base_name, protocol


_LOADED: dict[str, tuple[str, Protocol]] = {}


def load(spec: str) -> tuple[str, Protocol]:
    """(display name, protocol) of the variant `spec` names: `file.py:Name`, `package.module:Name`, or an
    entry point's name in `hwm.protocols`. VariantError, naming file and line, when it cannot be."""
    if spec in _LOADED:
        return _LOADED[spec]
    if is_variant_spec(spec):
        target, _, attr = spec.rpartition(":")
        if target.endswith(".py") or "/" in target or "\\" in target:
            module = _module_of_file(Path(target))
        else:
            module = _module_of_name(target)
        cls = _variant_class(module, target, attr)
    else:
        point = installed().get(spec)
        if point is None:
            raise ProtocolError(f"no preset or installed variant {spec!r}")
        try:
            cls = point.load()
        except Exception as e:  # noqa: BLE001
            raise _import_failure(e, None, f"entry point {spec!r} ({point.value})") from None
        if not (isinstance(cls, type) and issubclass(cls, Variant)):
            raise VariantError(f"entry point {spec!r} ({point.value}) is not a variant (a subclass of "
                               f"hwm.model.variant.Variant)")
    base_name, base = _check_class(cls)
    display = cls.name or cls.__name__
    kind = type(f"{cls.__name__}Protocol", (VariantProtocol,),
                {"variant": cls, "spec": spec, "display": display, "digest": digest_of(cls),
                 "model_change": model_change(cls), "base_model": "the base Model" if is_bare(cls) else None})
    protocol = kind(**base.flags())
    _LOADED[spec] = (display, protocol)
    return display, protocol


def installed() -> dict[str, Any]:
    """The variants installed packages declare in the entry-point group `hwm.protocols`, by name."""
    from importlib.metadata import entry_points
    return {point.name: point for point in entry_points(group=ENTRY_POINT_GROUP)}


def reloaded(spec: str, fallback: str, digest: str | None, flags: dict) -> Protocol:
    """The protocol a pickled variant's protocol stands for, loaded in this process: by its spec, or where
    that does not load here, by `fallback` from what `model.variant_source.shipment` sent; the file must be
    the one the sender loaded."""
    try:
        protocol = load(spec)[1]
    except ProtocolError as e:
        try:
            protocol = load(fallback)[1]
        except ProtocolError:
            raise VariantError(f"{spec}: cannot load the variant in this process ({e}), nor the copy shipped to "
                               f"it ({fallback})") from None
    if digest is not None and type(protocol).digest != digest:
        raise VariantError(f"{source_file(type(protocol).variant) or spec}: the variant's file here differs from "
                           f"the one loaded where the search started (sha256 {digest[:12]})")
    return replace(protocol, **flags)


register_loader(load)


# ------------------------------------------------------------ checked hooks
_TYPES = {"counts": bool, "election_quorum": int, "replication_quorum": int, "quorum_index": int,
          "may_commit": bool, "grants_vote": bool, "accepts_append": bool, "restart_keeps": int, "readable": int}
# The hooks that answer an index into a log they are given (which argument), and so between 0 and its length.
_WITHIN_LOG = {"restart_keeps": 0, "readable": 2}


def _checked(rules: Rules, cls: type, hook: str) -> Callable:
    function = getattr(rules, hook)
    expected = _TYPES[hook]
    within = _WITHIN_LOG.get(hook)

    def call(*args):
        try:
            answer = function(*args)
        except HookError:
            raise
        except Exception as e:  # noqa: BLE001 - the user's code: named, never a crash of hwm
            raise HookError(hook_failure(cls, hook, e)) from None
        if type(answer) is not expected:
            raise HookError(f"{defined_at(getattr(cls, hook))}: {cls.__name__}.{hook} returned {answer!r} "
                            f"({type(answer).__name__}), expected {expected.__name__}")
        if within is not None and not 0 <= answer <= len(args[within]):
            raise HookError(f"{defined_at(getattr(cls, hook))}: {cls.__name__}.{hook} returned {answer}, but the log "
                            f"it was given has {len(args[within])} entries (expected 0..{len(args[within])})")
        return answer
    return call


def checked_rules(cls: type[Variant], protocol: Protocol, servers: int) -> Rules:
    """An instance of the variant whose overridden hooks check what they answer; the constant ones
    (which servers count, Q1, Q2) are asked here, before any search."""
    rules = cls(protocol, servers)
    for hook in overridden(rules):
        setattr(rules, hook, _checked(rules, cls, hook))
    try:
        counting = rules.counting()
        for hook, size in (("election_quorum", rules.election_quorum()),
                           ("replication_quorum", rules.replication_quorum())):
            if not 1 <= size <= len(counting):
                raise VariantError(f"{defined_at(getattr(cls, hook))}: {cls.__name__}.{hook} is {size}, but a quorum of "
                                   f"{len(counting)} counting servers (of {servers}) is 1..{len(counting)}")
    except HookError as e:
        raise VariantError(str(e)) from None
    return rules


# --------------------------------------------------------------- properties
class _UserCheck:
    """A user's property function, over the snapshot view, checked for what it answers."""

    def __init__(self, cls: type, kind: str, name: str, function: Callable, protocol: Protocol | None = None):
        self.cls, self.kind, self.name, self.function, self.protocol = cls, kind, name, function, protocol

    def __reduce__(self):  # by its variant's protocol, which pickles by spec (VariantProtocol)
        if self.protocol is None:
            raise TypeError(f"{self.kind} {self.name} of {self.cls.__name__} pickles with its protocol")
        return _own_check, (self.protocol, self.kind, self.name)

    def __call__(self, state) -> str | None:
        view = snapshot_view(state)
        try:
            answer = self.function(view)
        except Exception as e:  # noqa: BLE001
            raise HookError(f"{raised_at(e, self.function)}: {self.kind} {self.name} raised {type(e).__name__}: {e}, "
                            f"in state {state_text(state)}") from None
        if answer is None or answer is False:
            return None
        if not isinstance(answer, str) or not answer:
            raise HookError(f"{defined_at(self.function)}: {self.kind} {self.name} returned {answer!r} "
                            f"({type(answer).__name__}), expected None or a sentence (str), in state "
                            f"{state_text(state)}")
        return answer


def _own_check(protocol: Protocol, kind: str, name: str) -> _UserCheck:
    cls = type(protocol).variant
    return _UserCheck(cls, kind, name, (cls.invariants if kind == "invariant" else cls.witnesses)[name], protocol)


def variant_properties(cls: type[Variant], catalogue: tuple[Property, ...], rules: Rules) -> tuple[Property, ...]:
    """The catalogue's properties, with the variant's replication quorum where they count a quorum, then
    the variant's own invariants and witnesses."""
    protocol = rules.protocol if rules is not None else None
    # Raft's catalogue counts Q2 always (a preset's Q2 is its quorum flag's); another system's counts
    # the variant's Q2 only when the variant changes it (a preset's min.insync.replicas=1 stays a finding).
    counted = catalogue and (protocol.system == "raft" or {"counts", "replication_quorum"} & set(overridden(rules)))
    own = [Property(name, "always", "state", meaning_of(check, "an invariant of the variant"),
                    _UserCheck(cls, "invariant", name, check, protocol)) for name, check in cls.invariants.items()]
    own += [Property(name, "sometimes", "state", meaning_of(check, "a witness of the variant"),
                     _UserCheck(cls, "witness", name, check, protocol)) for name, check in cls.witnesses.items()]
    if not counted:
        return tuple(catalogue) + tuple(own)
    needed = rules.replication_quorum()
    return tuple(replace(p, check=partial(acked_write_never_lost, needed=needed)) if p.name == "AckedWriteNeverLost"
                 else p for p in at_quorum(catalogue, needed)) + tuple(own)


def acked_write_never_lost(view, needed: int) -> str | None:
    """`properties.acked.acked_write_never_lost` counting the variant's replication quorum (as
    `at_quorum` does for the catalogue's two; that module's source is what the compiled checks hash,
    so the count is taken here): a client's acknowledged write is on `needed` servers."""
    from hwm.properties.acked import acknowledged
    from hwm.properties.snapshot import out_of
    for index, generation in sorted(acknowledged(view)):
        holders = sum(1 for s in view.servers if len(s.log) >= index and s.log[index - 1] == generation)
        if holders < needed:
            return (f"entry {index}@g{generation}, acknowledged to a client, is stored on only {holders} of "
                    f"{out_of(view)} (a quorum is {needed})")
    return None


# -------------------------------------------------------------------- model
_MODEL_CLASSES: dict[type, type] = {}


def variant_model_class(base: type) -> type:
    """`base` (a system's model class) under a variant: its properties are the variant's, and a
    `HookError` during an action names the state and the action."""
    if base in _MODEL_CLASSES:
        return _MODEL_CLASSES[base]

    class VariantModel(base):
        def __init__(self, protocol, config):
            super().__init__(protocol, config)
            self.variant = type(protocol).variant
            self.properties = variant_properties(self.variant, tuple(self.properties), self.rules)
            # Every rule a system asks (properties.rules.SYSTEM_HOOKS) is data or a table for its kernels
            # (checker.fast.layout, checker.fast.rule_tables); BookKeeper asks none.
            hooks = overridden(self.rules)
            if "counts" in hooks:  # servers that do not count have a place of their own
                self.symmetry_note = (f"symmetry reduction is off: {self.variant.__name__}.counts gives some "
                                      f"servers a place of their own")
                self.symmetric = False

        symmetric = True

        def __reduce__(self):  # built again from its protocol, which pickles by spec (VariantProtocol)
            return variant_model, (base, self.protocol, self.config)

        def fingerprint(self, state, symmetry=True):
            return base.fingerprint(self, state, symmetry and self.symmetric)

        def encode(self, state, symmetry=True):
            return base.encode(self, state, symmetry and self.symmetric)

        def actions(self, s, bounds_hit=None):
            try:
                yield from base.actions(self, s, bounds_hit)
            except HookError as e:
                raise HookError(f"{e}, enumerating the actions of state {state_text(s)}") from None

        def apply(self, s, action):
            try:
                return base.apply(self, s, action)
            except HookError as e:
                from hwm.model.actions import to_step
                raise HookError(f"{e}, at {to_step(action)} from state {state_text(s)}") from None

    VariantModel.__name__ = VariantModel.__qualname__ = f"Variant{base.__name__}"
    _MODEL_CLASSES[base] = VariantModel
    return VariantModel


def variant_model(base: type, protocol: Protocol, config) -> Any:
    """The model of a variant's `protocol` under `config`: `base`, the model class its base preset runs on
    (`model.registry` picks it), under the variant's rules and properties, and with its own fields and
    actions where it declares them (`model.variant_model`)."""
    if is_bare(type(protocol).variant) and not issubclass(base, BareModel):
        base = BareModel  # raft's state without raft's steps: the variant's actions are the protocol
    cls = variant_model_class(base)
    if is_model_level(type(protocol).variant):
        cls = model_class(cls)
    return cls(protocol, config)


def describe(protocol: Protocol) -> str | None:
    """One line on what a variant's protocol changes, or None for a preset's."""
    cls = getattr(type(protocol), "variant", None)
    if cls is None or not isinstance(protocol, VariantProtocol):
        return None
    hooks = tuple(h for h in HOOKS if getattr(cls, h) is not getattr(Rules, h))
    model = "".join(f"; {kind} {', '.join(getattr(cls, kind))}" for kind in ("fields", "actions") if getattr(cls, kind))
    base = "Model" if is_bare(cls) else cls.base
    return f"{cls.name or cls.__name__} (base {base}; rules {', '.join(hooks) or 'none'}{model})"


def own_properties(protocol: Protocol | None) -> tuple[Property, ...]:
    """The invariants and witnesses a variant's protocol adds to the catalogue's (none for a preset's)."""
    cls = getattr(type(protocol), "variant", None)
    if cls is None:
        return ()
    return variant_properties(cls, (), None)
