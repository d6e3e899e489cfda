"""The second level of a variant (docs/variants.md, "A model"): new per-server state fields and new
actions on top of a system's model (raft's, ZAB's, Kafka's or BookKeeper's), written in the `Variant`
subclass as plain Python over the state, and `eventually` properties of its own.

- `fields = {"name": initial value}`: each server carries these after its system's own fields
  (`state.servers[k].name`); a value is None, a bool, an int, a str or a tuple of these (hashable,
  and encoded the same in every process: `value_bytes`).
- `actions = ("name", ...)`: each an action over one server, `guard_<name>(state, server)` (None when
  enabled, else the reason) and `effect_<name>(state, server)` (the next state), printed as `name(S2)`
  in traces and replays; or over an ordered pair of two servers, when its guard and effect take
  `(state, i, j)`, printed as `name(S1, S2)`.
- `refuses(state, action)`: the variant's further guard on the base's actions (None, or the reason);
  `after(state, action, next_state)`: the variant's part of a base action's effect (the new fields
  keep their values through the base's actions unless `after` changes them).
- `fair = ("name", ...)`: which of its actions the liveness check takes as weakly fair, after its
  system's own (`Model.FAIR`);
  `liveness = {"Name": obligations}`: `eventually` properties, each a function of the snapshot view
  returning the open obligations (`properties.liveness`), with a `sometimes` witness `NameOpens`.
- `symmetric = False` turns symmetry reduction off (a field whose value names another server is not
  renamed with the servers; the per-server fields themselves are permuted with their servers).

A state's encoding is each server's field values, in the order of the servers, then the base model's
own encoding (`server_keys` and `encode_in_order` of every system's model): symmetry reduction sorts
servers by their own bytes and their fields together, so it permutes the fields with their servers.
Such a model runs on the reference backend: the compiled kernels' state layout has no room for its
fields. Errors are `VariantError` before the search and `HookError` during it, each one line naming
file, line, state and action.
"""

from __future__ import annotations

import inspect
from collections import namedtuple
from typing import Any, Callable, Iterator

from hwm.model.actions import BoundHit
from hwm.model.encoding import canonical, fingerprint_bytes
from hwm.model.systems import PARTITIONED
from hwm.model.variant_code import VariantError, defined_at, hook_failure, meaning_of, raised_at, state_text
from hwm.properties.catalogue import Property
from hwm.properties.liveness import LivenessProperty
from hwm.properties.rules import HookError
from hwm.properties.snapshot import ServerSnapshot, Snapshot, server_name

# What a variant may declare at the model level (the names of `Variant`'s class attributes and hooks).
MODEL_HOOKS = ("refuses", "after")
WITNESS_SUFFIX = "Opens"


class FieldValueError(ValueError):
    """A field value that cannot be part of a state (unhashable, or not encodable the same everywhere)."""


# ------------------------------------------------------------- field values
def value_bytes(value: Any, out: list[int]) -> None:
    """Append the bytes of one field value: a tag, then its content, self-delimiting and the same in
    every process (never Python's salted hash)."""
    if value is None:
        out.append(0)
    elif value is False or value is True:
        out.append(1 + value)
    elif type(value) is int:
        if 0 <= value < 256:
            out += (3, value)
        else:
            data = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
            if len(data) > 255:
                raise FieldValueError(f"{value} is too large an int")
            out += (4, len(data), *data)
    elif type(value) is str:
        data = value.encode()
        if len(data) > 255:
            raise FieldValueError(f"a str of {len(data)} bytes is too long (at most 255)")
        out += (5, len(data), *data)
    elif type(value) is tuple:
        if len(value) > 255:
            raise FieldValueError(f"a tuple of {len(value)} items is too long (at most 255)")
        out += (6, len(value))
        for item in value:
            value_bytes(item, out)
    else:
        hashable = "unhashable" if getattr(type(value), "__hash__", None) is None else "not a field value"
        raise FieldValueError(f"{value!r} ({type(value).__name__}) is {hashable}: a field holds None, a bool, "
                              f"an int, a str or a tuple of these")


def read_value(it: Iterator[int]) -> Any:
    """The value `value_bytes` wrote."""
    tag = next(it)
    if tag == 0:
        return None
    if tag in (1, 2):
        return tag == 2
    if tag == 3:
        return next(it)
    if tag == 4:
        return int.from_bytes(bytes(next(it) for _ in range(next(it))), "little", signed=True)
    if tag == 5:
        return bytes(next(it) for _ in range(next(it))).decode()
    return tuple(read_value(it) for _ in range(next(it)))


# ---------------------------------------------------------- the declaration
class ModelLevel:
    """What a `Variant` may declare beyond its rules (docs/variants.md, "A model"); none by default."""

    fields: dict = {}
    actions: tuple = ()
    fair: tuple = ()
    liveness: dict = {}
    symmetric: bool = True
    # The bounds of the search (`model.state.Config`: servers, max_generation, max_log, max_crashes), set
    # before any action is asked: an action that raises a generation or grows a log keeps within them,
    # its guard answering `BoundHit(bound, reason)` (model.actions) where only a bound stops it.
    bounds = None

    def refuses(self, state, action) -> str | None:
        """The variant's further guard on a base action (`("elect", candidate, voters)`, ...): None
        when the variant lets it happen, else the reason."""
        return None

    def after(self, state, action, next_state):
        """The variant's part of a base action's effect: `next_state` is the base's, the new fields
        as they were in `state`; return the state with the fields the action changes."""
        return next_state

    def with_server(self, state, server: int, **changes):
        """`state` with `server`'s fields changed: `self.with_server(state, k, heard=False)`."""
        servers = list(state.servers)
        servers[server] = servers[server]._replace(**changes)
        return state._replace(servers=tuple(servers))


def is_model_level(cls: type) -> bool:
    """Whether the variant changes the model itself (fields, actions, or its hooks on the base's
    actions), not only its rules and properties."""
    return bool(cls.fields or cls.actions) or any(getattr(cls, h) is not getattr(ModelLevel, h) for h in MODEL_HOOKS)


def model_change(cls: type) -> str | None:
    """What the variant adds to its base's model, as reports say it ("adds fields (heard) and actions
    (timeout)", or "adds hooks on its actions (refuses)"), or None for a variant of rules alone."""
    if not is_model_level(cls):
        return None
    added = [f"{kind} ({', '.join(getattr(cls, kind))})" for kind in ("fields", "actions") if getattr(cls, kind)]
    hooks = [h for h in MODEL_HOOKS if getattr(cls, h) is not getattr(ModelLevel, h)]
    return "adds " + (" and ".join(added) or f"hooks on its actions ({', '.join(hooks)})")


def check_declaration(cls: type, system: str, model: type) -> None:
    """VariantError, naming file and line, for a model-level declaration that cannot be built on
    `model`, the model class of the base's `system`: run when the variant is loaded, before any
    search. Registers its actions' step vocabulary."""
    from hwm.properties.trace import ACTIONS

    where, name = defined_at(cls), cls.__name__
    fields, actions = cls.fields, cls.actions
    if not isinstance(fields, dict):
        raise VariantError(f"{where}: {name}.fields must map a field name to its initial value, not "
                           f"{type(fields).__name__}")
    for field, initial in fields.items():
        if not (isinstance(field, str) and field.isidentifier() and not field.startswith("_")):
            raise VariantError(f"{where}: {name}.fields: {field!r} is not a field name")
        if field in model.SERVER._fields or field in ("extra", "count", "index"):
            raise VariantError(f"{where}: {name}.fields: {field} is already a field of every server")
        if field in model.STATE._fields:  # `state.durable[k]` beside `state.servers[k].durable` would mislead
            raise VariantError(f"{where}: {name}.fields: {field} is already part of the {system} system's state "
                               f"({model.STATE.__name__}.{field})")
        try:
            value_bytes(initial, [])
        except FieldValueError as e:
            raise VariantError(f"{where}: {name}.fields[{field!r}]: its initial value {e}") from None
    if isinstance(actions, str) or not isinstance(actions, (tuple, list)):
        raise VariantError(f"{where}: {name}.actions must be a tuple of action names, not {type(actions).__name__}")
    for action in actions:
        if not (isinstance(action, str) and action.isidentifier()):
            raise VariantError(f"{where}: {name}.actions: {action!r} is not an action name")
        if action in ACTIONS and not isinstance(ACTIONS[action], _Signature):
            raise VariantError(f"{where}: {name}.actions: {action} is already an action of the trace format")
        for part in ("guard_", "effect_"):
            if not callable(getattr(cls, part + action, None)):
                raise VariantError(f"{where}: {name}.{part}{action}(state, server) is missing: each action "
                                   f"has a guard and an effect")
        arities = {part: arity(getattr(cls, part + action)) for part in ("guard_", "effect_")}
        if set(arities.values()) not in ({1}, {2}):
            function = getattr(cls, "guard_" + action)
            raise VariantError(f"{defined_at(function)}: {name}.guard_{action} and effect_{action} take (state, server) "
                               f"for an action over one server, or both (state, i, j) for one over two servers; "
                               f"they take {arities['guard_']} and {arities['effect_']} servers")
    for action in cls.fair:
        if action not in actions:
            raise VariantError(f"{where}: {name}.fair: {action!r} is not one of {name}.actions")
    for action in actions:  # its step, `name(S2)` or `name(S1, S2)`, read back by `from_step`
        ACTIONS[action] = SIGNATURES[arity(getattr(cls, "guard_" + action))]


def arity(method: Callable) -> int | None:
    """How many servers a variant's guard or effect takes after the state: 1, 2, or None for another
    signature (a method takes self, the state, then its servers)."""
    try:
        parameters = list(inspect.signature(method).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters):
        return None
    servers = len(parameters) - 2  # self and the state
    return servers if servers in (1, 2) else None


class _Signature(tuple):
    """A trace step's fields for a variant's action, apart from the format's own actions, which no
    variant may declare again."""


# A variant's action over one server, `name(S2)`, or over an ordered pair of two servers, `name(S1, S2)`
# (`{"action": name, "from": "S1", "to": "S2"}` in a trace, as the network's own pairs).
SIGNATURES = {1: _Signature((("server", "server"),)), 2: _Signature((("from", "server"), ("to", "server")))}


# ---------------------------------------------------------- the snapshot view
_SERVER_TYPES: dict[tuple, type] = {}
_VIEW_TYPES: dict[tuple, type] = {}


def server_type(server: type, names: tuple[str, ...]) -> type:
    """A system's `server` type with the fields `names` after its own (`extra` lists them)."""
    key = (server, names)
    if key not in _SERVER_TYPES:
        base = namedtuple("VariantServer", server._fields + names)
        _SERVER_TYPES[key] = type("VariantServer", (base,), {"__slots__": (), "extra": names})
    return _SERVER_TYPES[key]


def view_type(names: tuple[str, ...]) -> type:
    """The snapshot view's server with the fields `names` after the five the catalogue reads."""
    if names not in _VIEW_TYPES:
        base = namedtuple("VariantServerView", ServerSnapshot._fields + names)
        _VIEW_TYPES[names] = type("VariantServerView", (base,), {"__slots__": (), "extra": names})
    return _VIEW_TYPES[names]


def snapshot_view(state) -> Snapshot:
    """What a variant's own properties read: the snapshot view, each server with the variant's fields
    after its five (`view.servers[k].heard`); the catalogue's properties read the five alone."""
    servers = state.servers
    names = getattr(servers[0], "extra", ()) if servers else ()
    if not names:
        from hwm.properties.snapshot import snapshot_of
        return snapshot_of(state)
    kind = view_type(names)
    return Snapshot(tuple(kind(s.generation, s.role, tuple(s.log), s.hwm, s.alive, *(getattr(s, n) for n in names))
                          for s in servers), frozenset(state.reads))


# --------------------------------------------------------------- liveness
def liveness_properties(cls: type) -> tuple[LivenessProperty, ...]:
    """The variant's `eventually` properties, each with its `sometimes` witness `<Name>Opens`."""
    out = []
    for name, obligations in cls.liveness.items():
        check = _Obligations(cls, name, obligations)
        witness = Property(name + WITNESS_SUFFIX, "sometimes", "state",
                           f"an obligation of {name} opens", _first_open(check))
        out.append(LivenessProperty(name, "eventually", meaning_of(obligations, "a liveness property of the variant"),
                                    check, witness))
    return tuple(out)


class _Obligations:
    """A user's obligations function over the snapshot view, checked for what it answers."""

    def __init__(self, cls: type, name: str, function: Callable):
        self.cls, self.name, self.function = cls, name, function

    def __call__(self, state) -> dict:
        try:
            answer = self.function(snapshot_view(state))
        except Exception as e:  # noqa: BLE001 - the user's code: named, never a crash of hwm
            raise HookError(f"{raised_at(e, self.function)}: liveness {self.name} raised {type(e).__name__}: {e}, "
                            f"in state {state_text(state)}") from None
        if answer is None:
            return {}
        if not isinstance(answer, dict) or not all(isinstance(v, str) and v for v in answer.values()):
            raise HookError(f"{defined_at(self.function)}: liveness {self.name} returned {answer!r}, expected a dict "
                            f"from a hashable key to a sentence (str), in state {state_text(state)}")
        return answer


def _first_open(check: _Obligations) -> Callable:
    def witness(state):
        open_ = check(state)
        return open_[min(open_, key=repr)] if open_ else None
    return witness


# -------------------------------------------------------------------- model
_MODEL_CLASSES: dict[type, type] = {}


def model_class(base: type) -> type:
    """`base` (a system's model under a variant, `model.variant.variant_model_class`) with the variant's
    fields and actions: its states' servers carry the fields, its fingerprint and encoding include
    them (permuted with their servers), its actions are the base's the variant does not refuse, then
    its own (over the servers S1..Sn; BookKeeper's bookies, not its two clients)."""
    if base in _MODEL_CLASSES:
        return _MODEL_CLASSES[base]
    from hwm.model.actions import to_step

    class FieldsModel(base):
        def __init__(self, protocol, config):
            super().__init__(protocol, config)
            cls = self.variant
            self.field_names = tuple(cls.fields)
            self.server_type = server_type(self.SERVER, self.field_names)
            self.own_fields = len(self.SERVER._fields)  # where the variant's fields start in a server
            self.own_actions = tuple(cls.actions)
            # Each action's server tuples: every server, or every ordered pair of two (check_declaration).
            self.own_servers = {name: ([(k,) for k in range(self.n)] if arity(getattr(cls, "guard_" + name)) == 1
                                       else [(i, j) for i in range(self.n) for j in range(self.n) if i != j])
                                for name in self.own_actions}
            partitioned, flags = PARTITIONED.get(protocol.system, (None, ()))
            if partitioned is not None and isinstance(self, partitioned):
                asked = ("partitions", *flags)
                asked = ", ".join(asked[:-1]) + " or " + asked[-1] if len(asked) > 1 else asked[0]
                why = "its base's flags or max_partitions ask for them" if flags else "max_partitions asks for them"
                raise VariantError(f"{defined_at(cls)}: {cls.__name__} adds to the {protocol.system} model, which has "
                                   f"no {asked} under a variant with fields or actions in this version ({why})")
            self.refuses = self.rules.refuses if type(self.rules).refuses is not ModelLevel.refuses else None
            self.after = self.rules.after if type(self.rules).after is not ModelLevel.after else None
            self.uncompiled = (f"{cls.name or cls.__name__} {model_change(cls)} to the model, which the compiled "
                               f"kernels do not know")
            if not cls.symmetric:
                self.symmetric = False
                self.symmetry_note = (f"symmetry reduction is off: {cls.__name__}.symmetric is False (a field may "
                                      f"name another server)")
            self._field_bytes: dict = {}
            self.rules.bounds = config  # what the variant's actions read their bounds from (`self.bounds`)
            self.members = len(super().initial_state().servers)  # BookKeeper's clients have fields too

        # ----------------------------------------------------- the interface
        def initial_state(self):
            state = super().initial_state()
            initial = tuple(self.variant.fields.values())
            return state._replace(servers=tuple(self.server_type(*s, *initial) for s in state.servers))

        def _fields_of(self, server) -> bytes:
            try:
                return self._field_bytes[server]
            except KeyError:
                flat: list[int] = []
                for name in self.field_names:
                    value_bytes(getattr(server, name), flat)
                data = self._field_bytes[server] = bytes(flat)
                return data

        def encode(self, state, symmetry: bool = True) -> bytes:
            """Each server's field values in the servers' order, then the base's encoding in that order;
            with symmetry, the smallest over the orders that sort the servers by their own bytes and
            their fields (`model.encoding.canonical`)."""
            fields = [self._fields_of(server) for server in state.servers]

            def in_order(_, order, keys=None) -> bytes:
                return b"".join(fields[k] for k in order) + self.encode_in_order(state, order)
            if symmetry and self.symmetric:
                keys = [own + mine for own, mine in zip(self.server_keys(state), fields)]
                return canonical(state, keys, encode=in_order)
            return in_order(state, range(len(fields)))

        def fingerprint(self, state, symmetry: bool = True) -> int:
            return fingerprint_bytes(self.encode(state, symmetry))

        def decode(self, data: bytes):
            it = iter(data)
            values = [tuple(read_value(it) for _ in self.field_names) for _ in range(self.members)]
            state = super().decode(bytes(it))
            return state._replace(servers=tuple(self.server_type(*server, *mine)
                                                for server, mine in zip(state.servers, values)))

        def action_table(self) -> list:
            return super().action_table() + [(name, *servers) for name in self.own_actions
                                              for servers in self.own_servers[name]]

        # ------------------------------------------------------- the actions
        def refused(self, s, action) -> str | None:
            """The variant's further guard on one of the base's actions (`refuses`): None, or the reason."""
            return None if self.refuses is None else self._call("refuses", s, action, s, action)

        def actions(self, s, bounds_hit=None):
            for action in super().actions(s, bounds_hit):
                if self.refused(s, action) is None:
                    yield action
            for name in self.own_actions:
                for servers in self.own_servers[name]:
                    reason = self._call("guard_" + name, s, (name, *servers), s, *servers)
                    if reason is None:
                        yield (name, *servers)
                    elif bounds_hit is not None and isinstance(reason, BoundHit):
                        bounds_hit.add(reason.bound)  # a bounded check, not a proof: reports say which bound

        def why_not(self, s, action) -> str | None:
            name = action[0]
            if name in self.own_actions:
                if tuple(action[1:]) not in self.own_servers[name]:
                    takes = "one server" if len(self.own_servers[name][0]) == 1 else "two different servers"
                    return f"{name} takes {takes}, of S1..S{self.n}"
                return self._call("guard_" + name, s, action, s, *action[1:])
            reason = super().why_not(s, action)
            return self.refused(s, action) if reason is None else reason

        def apply(self, s, action):
            name = action[0]
            if name in self.own_actions:
                return self._state(self._call("effect_" + name, s, action, s, *action[1:]), s, action,
                                   "effect_" + name)
            after = self.keep_fields(s, super().apply(s, action))
            if self.after is not None:
                after = self._state(self._call("after", s, action, s, action, after), s, action, "after")
            return after

        def keep_fields(self, s, after):
            """`after`, a step of the base's from `s`, with each server the base's effects built as the
            base's type given back its fields as they were in `s` (the effects of `after` aside: the
            validators' own steps, built from the base's, ask no hook of the variant's)."""
            own = self.own_fields
            if all(type(server) is self.server_type for server in after.servers):
                return after
            return after._replace(servers=tuple(
                server if type(server) is self.server_type else self.server_type(*server, *old[own:])
                for server, old in zip(after.servers, s.servers)))

        # --------------------------------------------------------- checking
        def _call(self, hook: str, s, action, *args):
            """The variant's `hook` on `args`; a HookError naming file, line, state and action when it
            raises, or (a guard) answers neither None nor a reason."""
            cls = self.variant
            try:
                answer = getattr(self.rules, hook)(*args)
            except HookError:
                raise
            except Exception as e:  # noqa: BLE001 - the user's code: named, never a crash of hwm
                raise HookError(f"{hook_failure(cls, hook, e)}, at {to_step(action)} from state {state_text(s)}") \
                    from None
            if (hook.startswith("guard_") or hook == "refuses") and not (answer is None or
                                                                         (isinstance(answer, str) and answer)):
                raise HookError(f"{defined_at(getattr(cls, hook))}: {cls.__name__}.{hook} returned {answer!r} "
                                f"({type(answer).__name__}), expected None or the reason (str), at "
                                f"{to_step(action)} from state {state_text(s)}")
            return answer

        def _state(self, result, s, action, hook: str):
            """`result` if it is a state of this model, else a HookError naming what is wrong (a server
            the same as in `s` is not checked again)."""
            cls = self.variant
            problem = None
            if type(result) is not self.STATE:
                problem = (f"returned {type(result).__name__}, not a state ({self.STATE.__name__}, as it was "
                           f"given)")
            elif len(result.servers) != self.members:
                problem = f"returned a state of {len(result.servers)} servers, not {self.members}"
            else:
                for k, server in enumerate(result.servers):
                    if server is s.servers[k]:
                        continue
                    if type(server) is not self.server_type:
                        problem = (f"returned {server_name(k)} as a {type(server).__name__} without the fields "
                                   f"{', '.join(self.field_names)} (change a server with its _replace)")
                        break
                    for name in self.field_names:
                        try:
                            value_bytes(getattr(server, name), [])
                        except FieldValueError as e:
                            problem = f"set {server_name(k)}'s field {name}: {e}"
                            break
                    if problem:
                        break
                else:
                    try:
                        hash(result)
                    except TypeError as e:
                        problem = f"returned a state that is not hashable ({e})"
            if problem:
                raise HookError(f"{defined_at(getattr(cls, hook))}: {cls.__name__}.{hook} {problem}, at "
                                f"{to_step(action)} from state {state_text(s)}")
            return result

    FieldsModel.__name__ = FieldsModel.__qualname__ = f"Fields{base.__name__}"
    _MODEL_CLASSES[base] = FieldsModel
    return FieldsModel


__all__ = ["ModelLevel", "value_bytes", "read_value", "is_model_level", "check_declaration", "snapshot_view",
           "liveness_properties", "model_class", "server_type", "WITNESS_SUFFIX"]
