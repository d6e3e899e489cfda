"""Successor backends: how the engine turns a batch of states into the next ones.

The breadth-first engine (`checker.engine`) never touches a state itself: it hands
a whole batch (a slice of one level's frontier) to a backend and gets back flat
arrays, so a compiled backend can expand the batch in one call. A backend is
bound to one model and one symmetry setting and offers:

    initial() -> Batch
        the initial state, as a batch of length 1.
    expand(batch) -> Expansion
        every transition out of every state of the batch, in the canonical order:
        by position in the batch, then by the model's action order
        (`Model.actions`). `Expansion` holds, one entry per transition,
          successors    Batch         the state reached (len = number of transitions)
          fingerprints  uint64[T]     `Model.fingerprint(successor, symmetry)`
          parents       int64[T]      position in `batch` of the state it leaves
                                      (non-decreasing)
          actions       int32[T]      action ids (`action(id)` gives the action tuple)
        and `bounds_hit`, the set of bound names that cut some action (`BoundHit`).
    fingerprints(batch) -> uint64[len(batch)]
        the fingerprints of a batch's states (used for the initial state).
    take(batch, positions) -> Batch
        the states at `positions` (an int64 array, increasing), as a compact,
        picklable batch: the engine keeps frontiers only in this form, and the
        parallel engine sends them between processes.
    concat(batches) -> Batch
        one batch of the given ones, in order.
    states(batch) -> list[State]
        the states as model objects (for property checks, visitors, traces).
    batch_of(states) -> Batch
        a batch of model states (the inverse of `states`).
    to_bytes(batch) -> list[bytes] / from_bytes(rows) -> Batch
        one byte string per state and back, for engines that keep states outside
        Python (the Spark engine's rows). The defaults go through `states` and
        `batch_of` with `model.encoding.encode`/`decode`; a backend may override
        both with its own encoding (rows only ever return to the same backend).
    action(id) -> Action
        the action tuple of an id, e.g. ("replicate", 0, 2).
    check_states(batch, props) / check_steps(frontier, expansion, props)
        property checks on a batch (state properties) or on an expansion's
        transitions (step properties): per property the FIRST position (state
        properties) or transition index (step properties) where it is found, as
        {name: (position, finding)}. The defaults below decode with `states()`
        and call `Property.check`; a backend may override them with faster
        equivalents, which must return the same first positions.

A `Batch` is any object with `len()` that pickles; only its backend looks inside.
Every backend must give identical fingerprints, transition order and bounds for
the same model: engines, worker counts and backends all agree on counts and
traces because of that order (tests/checker/test_engine.py checks it on the pins).

Backends are chosen by name in `CheckOptions.successors`: "reference" (this
module: the readable `Model` itself), "fast" (`checker.fast.FastBackend`, a
compiled successor function, loaded only when asked for) and "objects" (any
object with the model interface, states kept as Python objects: product models). A backend that cannot
handle a model raises `BackendUnavailable` from its constructor, naming why.
"""

from __future__ import annotations

import importlib
from typing import Any, NamedTuple, Sequence

import numpy as np

from hwm.model.actions import Action, Model
from hwm.model.encoding import fingerprint_bytes
from hwm.model.state import State

Batch = Any  # len() and picklable; only its backend looks inside

__all__ = ["Backend", "BackendUnavailable", "Batch", "Expansion", "ObjectBackend", "PackedStates", "ReferenceBackend",
           "BACKENDS", "make_backend", "refusal", "action_table"]


class BackendUnavailable(RuntimeError):
    """This backend cannot run this model (the message says why and what to use instead)."""


class Expansion(NamedTuple):
    successors: Batch
    fingerprints: np.ndarray  # uint64, one per transition
    parents: np.ndarray  # int64 positions in the expanded batch
    actions: np.ndarray  # int32 action ids
    bounds_hit: set


def action_table(model: Model) -> list[Action]:
    """Every action the model's configuration can name, in a fixed order: the ids (`Model.action_table`)."""
    return model.action_table()


class Backend:
    """Shared parts of every backend: the action ids and the default property checks."""

    name = "?"

    @staticmethod
    def unsupported(model: Model) -> str | None:
        """Why this backend cannot run `model` (None when it can), without building anything."""
        return None

    def __init__(self, model: Model, symmetry: bool):
        self.model = model
        self.symmetry = symmetry
        self.actions_by_id = action_table(model)
        self.action_ids = {a: k for k, a in enumerate(self.actions_by_id)}

    def action(self, action_id: int) -> Action:
        return self.actions_by_id[action_id]

    # Subclasses provide initial, expand, fingerprints, take, concat, states and batch_of.

    def to_bytes(self, batch: Batch) -> list[bytes]:
        encode = self.model.encode
        return [encode(s, False) for s in self.states(batch)]

    def from_bytes(self, rows: Sequence[bytes]) -> Batch:
        return self.batch_of([self.model.decode(r) for r in rows])

    def check_states(self, batch: Batch, props: Sequence) -> dict[str, tuple[int, str]]:
        found: dict[str, tuple[int, str]] = {}
        if not props:
            return found
        for position, state in enumerate(self.states(batch)):
            for p in props:
                if p.name not in found:
                    finding = p.check(state)
                    if finding:
                        found[p.name] = (position, finding)
            if len(found) == len(props):
                break
        return found

    def check_steps(self, frontier: Batch, expansion: Expansion, props: Sequence) -> dict[str, tuple[int, str]]:
        found: dict[str, tuple[int, str]] = {}
        if not props:
            return found
        before = self.states(frontier)
        after = self.states(expansion.successors)
        for t, parent in enumerate(expansion.parents.tolist()):
            for p in props:
                if p.name not in found:
                    finding = p.check(before[parent], after[t])
                    if finding:
                        found[p.name] = (t, finding)
            if len(found) == len(props):
                break
        return found


class PackedStates:
    """States as one byte string (each state's `Model.encode`, servers in their real order) and offsets.

    About 30 bytes per state instead of the ~1 kB of a `State` object graph; the
    list of model objects is built on demand and dropped when packed again. The
    model's codec is passed in, never pickled: a batch travels as bytes alone.
    """

    __slots__ = ("blob", "offsets", "_states", "_encode")

    def __init__(self, blob: bytes = b"", offsets: np.ndarray | None = None, states: list | None = None,
                 encode=None):
        self.blob = blob
        self.offsets = offsets if offsets is not None else np.zeros(1, dtype=np.int64)
        self._states = states  # decoded (or not yet encoded) model states
        self._encode = encode  # set while the states exist only as objects

    @classmethod
    def of(cls, states: list[State], encode) -> "PackedStates":
        return cls(states=states, encode=encode)

    def __len__(self) -> int:
        return len(self._states) if self._states is not None else len(self.offsets) - 1

    def states(self, decode) -> list[State]:
        if self._states is None:
            blob, bounds = self.blob, self.offsets.tolist()
            self._states = [decode(blob[a:b]) for a, b in zip(bounds, bounds[1:])]
        return self._states

    def packed(self, positions: np.ndarray | None = None) -> "PackedStates":
        """A packed batch of the states at `positions` (all when None)."""
        if self._encode is None:  # the bytes exist (the states, if decoded, came from them)
            if positions is None:
                return PackedStates(self.blob, self.offsets)
            if len(positions) and positions[-1] - positions[0] + 1 == len(positions):  # a slice
                a, b = int(positions[0]), int(positions[-1]) + 1
                start, end = int(self.offsets[a]), int(self.offsets[b])
                return PackedStates(self.blob[start:end], self.offsets[a:b + 1] - start)
            bounds = self.offsets
            starts, ends = bounds[positions], bounds[positions + 1]
            blob = self.blob
            parts = [blob[a:b] for a, b in zip(starts.tolist(), ends.tolist())]
        else:
            chosen = self._states if positions is None else [self._states[k] for k in positions.tolist()]
            encode = self._encode
            parts = [encode(s) for s in chosen]
        offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        if parts:
            np.cumsum([len(p) for p in parts], out=offsets[1:])
        return PackedStates(b"".join(parts), offsets)

    def __getstate__(self):
        packed = self if self._encode is None else self.packed()
        return packed.blob, packed.offsets

    def __setstate__(self, data):
        self.blob, self.offsets = data
        self._states = None
        self._encode = None

    def nbytes(self) -> int:
        return len(self.blob) + self.offsets.nbytes


class ReferenceBackend(Backend):
    """The readable model itself: `Model.successors` and `Model.fingerprint` state by state."""

    name = "reference"

    def __init__(self, model: Model, symmetry: bool):
        super().__init__(model, symmetry)
        self._encode = lambda state, encode=model.encode: encode(state, False)  # real server order

    def initial(self) -> PackedStates:
        return PackedStates.of([self.model.initial_state()], self._encode)

    def fingerprints(self, batch: PackedStates) -> np.ndarray:
        fingerprint, symmetry = self.model.fingerprint, self.symmetry
        return np.fromiter((fingerprint(s, symmetry) for s in self.states(batch)), dtype=np.uint64,
                           count=len(batch))

    def expand(self, batch: PackedStates) -> Expansion:
        model = self.model
        actions, apply, encode, symmetry = model.actions, model.apply, model.encode, self.symmetry
        ids = self.action_ids
        bounds_hit: set[str] = set()
        successors: list[State] = []
        fps: list[int] = []
        parents: list[int] = []
        action_ids: list[int] = []
        for position, state in enumerate(self.states(batch)):
            for action in actions(state, bounds_hit):
                succ = apply(state, action)
                successors.append(succ)
                fps.append(fingerprint_bytes(encode(succ, symmetry)))
                parents.append(position)
                action_ids.append(ids[action])
        return Expansion(PackedStates.of(successors, self._encode), np.array(fps, dtype=np.uint64),
                         np.array(parents, dtype=np.int64), np.array(action_ids, dtype=np.int32), bounds_hit)

    def take(self, batch: PackedStates, positions: np.ndarray) -> PackedStates:
        return batch.packed(np.asarray(positions, dtype=np.int64))

    def concat(self, batches: Sequence[PackedStates]) -> PackedStates:
        packed = [b.packed() if b._encode is not None else b for b in batches]
        if not packed:
            return PackedStates()
        blob = b"".join(b.blob for b in packed)
        shifts = np.cumsum([0] + [len(b.blob) for b in packed[:-1]])
        offsets = np.concatenate([np.zeros(1, dtype=np.int64)] +
                                 [b.offsets[1:] + shift for b, shift in zip(packed, shifts)])
        return PackedStates(blob, offsets)

    def states(self, batch: PackedStates) -> list[State]:
        return batch.states(self.model.decode)

    def batch_of(self, states: list[State]) -> PackedStates:
        return PackedStates.of(list(states), self._encode)

    def to_bytes(self, batch: PackedStates) -> list[bytes]:
        packed = batch.packed() if batch._encode is not None else batch
        blob, bounds = packed.blob, packed.offsets.tolist()
        return [blob[a:b] for a, b in zip(bounds, bounds[1:])]

    def from_bytes(self, rows: Sequence[bytes]) -> PackedStates:
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        if rows:
            np.cumsum([len(r) for r in rows], out=offsets[1:])
        return PackedStates(b"".join(rows), offsets)


class ObjectBackend(Backend):
    """Any model object with the model interface (initial_state, actions, apply, fingerprint).

    Batches are plain lists of its states, not packed: for product models whose
    states are not `State`s, such as the induction explorer's (state, commit ghost)
    pairs. The model must name its servers (`n`, `voter_sets`, `pairs`) for the action ids.
    """

    name = "objects"

    def initial(self) -> list:
        return [self.model.initial_state()]

    def fingerprints(self, batch: list) -> np.ndarray:
        fingerprint, symmetry = self.model.fingerprint, self.symmetry
        return np.fromiter((fingerprint(s, symmetry) for s in batch), dtype=np.uint64, count=len(batch))

    def expand(self, batch: list) -> Expansion:
        model, ids, symmetry = self.model, self.action_ids, self.symmetry
        bounds_hit: set[str] = set()
        successors, fps, parents, action_ids = [], [], [], []
        for position, state in enumerate(batch):
            for action in model.actions(state, bounds_hit):
                succ = model.apply(state, action)
                successors.append(succ)
                fps.append(model.fingerprint(succ, symmetry))
                parents.append(position)
                action_ids.append(ids[action])
        return Expansion(successors, np.array(fps, dtype=np.uint64), np.array(parents, dtype=np.int64),
                         np.array(action_ids, dtype=np.int32), bounds_hit)

    def take(self, batch: list, positions: np.ndarray) -> list:
        return [batch[k] for k in np.asarray(positions).tolist()]

    def concat(self, batches: Sequence[list]) -> list:
        return [s for b in batches for s in b]

    def states(self, batch: list) -> list:
        return batch

    def batch_of(self, states: list) -> list:
        return list(states)


# name -> "module:Class"; the class is imported only when chosen
BACKENDS = {"reference": "hwm.checker.backend:ReferenceBackend", "fast": "hwm.checker.fast:FastBackend",
            "objects": "hwm.checker.backend:ObjectBackend"}


def refusal(name: str, model: Model) -> str | None:
    """Why backend `name` cannot run `model`, or None; cheap (nothing is compiled), for checking options early."""
    if name not in BACKENDS:
        return f"unknown successor backend {name!r}: choose one of {', '.join(BACKENDS)}"
    module_name, class_name = BACKENDS[name].split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        return f"the {name} successor backend cannot be loaded ({e})"
    return getattr(module, class_name).unsupported(model)


def make_backend(name: str, model: Model, symmetry: bool) -> Backend:
    """The backend called `name` for this model (BackendUnavailable when it cannot run it)."""
    if name not in BACKENDS:
        raise ValueError(f"unknown successor backend {name!r}: choose one of {', '.join(BACKENDS)}")
    module_name, class_name = BACKENDS[name].split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise BackendUnavailable(f"the {name} successor backend cannot be loaded ({e})") from e
    return getattr(module, class_name)(model, symmetry)

