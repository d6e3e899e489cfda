"""One breadth-first level on one fingerprint partition: the Spark engine's executor side, in numpy.

The Spark engine (`checker.spark_engine`) cuts the state space into `P` partitions by
fingerprint (`fp % P`) and runs each level as one task per partition. A task gets, as a
few large records (never a record per state):

- its partition's visited set (`Visited`: fingerprints sorted, with each state's
  parent fingerprint and level), from the task of the same partition one level up;
- the candidate successors every partition sent it (`Candidates`: packed rows,
  fingerprints, parent fingerprints and the keys below), one block per sender;
- every partition's sorted keys of the level above (`LevelKeys`).

It deduplicates the candidates (keeping each fingerprint's smallest key), drops the
visited ones (`np.searchsorted` on the sorted fingerprints), adds the rest to its visited
set, checks the state properties on them and expands them with the backend in one call
(the compiled one with `successors="fast"`: rows stay uint8 arrays), checks the step
properties on the transitions, and sends each successor block to its partition.

Ties are broken in the local engine's order (`checker.engine`: levels, then states in
discovery order, then each state's transitions in action order). A state's `key` is
`rank of its parent * STEPS + position among the parent's transitions`, where a rank
is a state's index in its level's order; keys order a level as the local engine does,
so a state reached several times keeps its smallest key (the local engine's parent and,
under symmetry, its member of the class). The ranks of a level come from the keys
every partition sent: a state's rank is the number of the level's keys below its own.

Nothing here builds a model object per state, unless the backend itself does (the
reference backend's `expand`) or a property has no compiled check.
"""

from __future__ import annotations

import os
import resource
import time
from typing import Any, Iterable, NamedTuple, Sequence

import numpy as np

__all__ = ["STEPS", "Visited", "Candidates", "LevelKeys", "Summary", "Level", "advance", "as_rows",
           "as_batch", "row_bytes"]

STEPS = 1 << 16  # positions among one state's transitions: keys are rank * STEPS + position


class Visited(NamedTuple):
    """One partition's visited states: `fps` sorted, `parents` and `levels` aligned with them."""

    fps: np.ndarray  # uint64, sorted
    parents: np.ndarray  # uint64 parent fingerprints (0 for the initial state, whose level, 0, says it has none)
    levels: np.ndarray  # uint16

    @classmethod
    def empty(cls) -> "Visited":
        return cls(np.zeros(0, np.uint64), np.zeros(0, np.uint64), np.zeros(0, np.uint16))

    @property
    def nbytes(self) -> int:
        return self.fps.nbytes + self.parents.nbytes + self.levels.nbytes

    def add(self, fps: np.ndarray, parents: np.ndarray, level: int) -> "Visited":
        """With new fingerprints (not visited, distinct), merged in sorted order."""
        order = np.argsort(fps, kind="stable")
        fps, parents = fps[order], parents[order]
        at = np.searchsorted(self.fps, fps)
        return Visited(np.insert(self.fps, at, fps), np.insert(self.parents, at, parents),
                       np.insert(self.levels, at, np.full(len(fps), level, np.uint16)))

    def contains(self, fps: np.ndarray) -> np.ndarray:
        at = np.searchsorted(self.fps, fps)
        inside = at < len(self.fps)
        found = np.zeros(len(fps), dtype=bool)
        found[inside] = self.fps[at[inside]] == fps[inside]
        return found

    def lookup(self, fps: Iterable[int]) -> dict[int, tuple[int, int]]:
        """{fp: (parent fp, level)} for the given fingerprints that are in this partition."""
        wanted = np.array(sorted(fps), dtype=np.uint64)
        found = self.contains(wanted)
        at = np.searchsorted(self.fps, wanted[found])
        return {int(f): (int(p), int(lv)) for f, p, lv in
                zip(wanted[found].tolist(), self.parents[at].tolist(), self.levels[at].tolist())}


class Candidates(NamedTuple):
    """Successors sent to one partition by one partition, each with the key parts of its transition."""

    rows: Any  # packed rows (`as_rows`)
    fps: np.ndarray  # uint64
    parents: np.ndarray  # uint64: the source state's fingerprint
    source_keys: np.ndarray  # int64: the source state's key (its place in the level above)
    steps: np.ndarray  # int64: the transition's position among the source's transitions

    @property
    def nbytes(self) -> int:
        return row_bytes(self.rows) + self.fps.nbytes + self.parents.nbytes + self.source_keys.nbytes \
            + self.steps.nbytes


class LevelKeys(NamedTuple):
    """One partition's keys of one level, sorted: every partition needs them to rank that level."""

    partition: int
    keys: np.ndarray  # int64, sorted


class Summary(NamedTuple):
    """What a task tells the driver: a few numbers and the first discovery of each property."""

    partition: int
    new: int  # states of this level new in the partition
    transitions: int
    bounds_hit: frozenset
    # (name, key of the state, position of the transition or -1, target fp, source fp or None, finding)
    discoveries: tuple
    candidate_bytes: int  # payload of the candidate blocks sent on
    record_bytes: int  # payload of every record sent on (candidates, the visited set, the keys)
    visited_bytes: int
    visited: int
    seconds: float
    states_built: int  # model objects built in the task (counted only when asked: `Level.count_states`)
    worker: int  # the Python worker's process id
    peak_rss: int  # its peak resident memory so far, bytes
    candidates: int = 0  # candidate successors sent on (the next level's work, before deduplication there)
    cpu_seconds: float = 0.0  # the task's CPU time (its wall `seconds` include waiting for a core)
    written_bytes: int = 0  # bytes of files the task wrote for the next level (`checker.spark_files`)


class Level(NamedTuple):
    """What every task of one level needs, besides its records (small: pickled with each level's job)."""

    level: int
    partitions: int
    state_props: tuple  # names of the state properties not found yet
    step_props: tuple
    expand: bool  # False at the depth limit: the level's states are checked, not expanded
    count_states: bool = False


# ------------------------------------------------------------- packed rows
def as_rows(backend, batch):
    """A batch as an array with one entry per state: the fast backend's rows are one already (2-D uint8);
    other backends' states become an object array of their bytes."""
    if isinstance(batch, np.ndarray):
        return batch
    rows = np.empty(len(batch), dtype=object)
    rows[:] = backend.to_bytes(batch)
    return rows


def as_batch(backend, rows):
    if rows.dtype != object:
        return rows
    return backend.from_bytes(list(rows))


def row_bytes(rows) -> int:
    return rows.nbytes if rows.dtype != object else sum(len(r) for r in rows)


def _concat_rows(parts: Sequence, empty):
    parts = [p for p in parts if len(p)]
    if not parts:
        return empty
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


# --------------------------------------------------------------- one level
def advance(partition: int, records: Iterable, backend, props: dict, level: Level) -> tuple[list[tuple], "Summary"]:
    """One partition's task for `level.level`: its records in; `(partition, record)` pairs for the next
    level and this task's `Summary` out.

    `props` maps property names to `Property` objects (the ones `level` names are checked).
    """
    started, cpu_started = time.perf_counter(), time.process_time()
    visited = None
    keys_above: list[np.ndarray] = []
    blocks: list[Candidates] = []
    for record in records:
        if isinstance(record, Visited):
            visited = record
        elif isinstance(record, LevelKeys):
            keys_above.append(record.keys)
        else:
            blocks.append(record)
    if visited is None:
        raise RuntimeError(f"partition {partition} of level {level.level} got no visited set")
    empty_rows = as_rows(backend, backend.take(backend.initial(), np.zeros(0, dtype=np.int64)))
    # The level above, ranked: a source's rank is the number of that level's keys below its key.
    ranked = np.sort(np.concatenate(keys_above)) if keys_above else np.zeros(0, np.int64)
    fps = np.concatenate([b.fps for b in blocks]) if blocks else np.zeros(0, np.uint64)
    parents = np.concatenate([b.parents for b in blocks]) if blocks else np.zeros(0, np.uint64)
    keys = (np.searchsorted(ranked, np.concatenate([b.source_keys for b in blocks])) * STEPS
            + np.concatenate([b.steps for b in blocks])) if blocks else np.zeros(0, np.int64)
    rows = _concat_rows([b.rows for b in blocks], empty_rows)
    # Each fingerprint's smallest key, then the ones not visited, in key order: this level's states here.
    order = np.lexsort((keys, fps))
    first = np.ones(len(order), dtype=bool)
    first[1:] = fps[order][1:] != fps[order][:-1]
    chosen = order[first]
    chosen = chosen[~visited.contains(fps[chosen])]
    chosen = chosen[np.argsort(keys[chosen], kind="stable")]
    level_fps, level_keys = fps[chosen], keys[chosen].astype(np.int64)
    visited = visited.add(level_fps, parents[chosen], level.level)
    frontier_rows = rows[chosen]
    del rows, fps, parents, keys, blocks

    out: list[tuple] = [(partition, visited)]
    out += [(d, LevelKeys(partition, level_keys)) for d in range(level.partitions)]
    discoveries: list[tuple] = []
    transitions, bounds_hit, candidate_bytes, candidates = 0, frozenset(), 0, 0
    count = _StateCounter(backend) if level.count_states else None
    try:
        if len(level_fps):
            batch = as_batch(backend, frontier_rows)
            state_props = [props[n] for n in level.state_props]
            for name, (position, finding) in backend.check_states(batch, state_props).items():
                discoveries.append((name, int(level_keys[position]), -1, int(level_fps[position]), None, finding))
            if level.expand:
                expansion = backend.expand(batch)
                sources = expansion.parents
                transitions = len(sources)
                bounds_hit = frozenset(expansion.bounds_hit)
                # A transition's position among its source's (sources are non-decreasing).
                steps = np.arange(transitions, dtype=np.int64) - np.searchsorted(sources, sources)
                step_props = [props[n] for n in level.step_props]
                if step_props:
                    found = backend.check_steps(batch, expansion, step_props)
                    for name, (t, finding) in found.items():
                        s = sources[t]
                        discoveries.append((name, int(level_keys[s]), int(steps[t]),
                                            int(expansion.fingerprints[t]), int(level_fps[s]), finding))
                out += _send(backend, expansion, level_fps, level_keys, steps, level.partitions)
                candidate_bytes = sum(r.nbytes for _, r in out if isinstance(r, Candidates))
                candidates = sum(len(r.fps) for _, r in out if isinstance(r, Candidates))
    finally:
        built = count.stop() if count is not None else 0
    record_bytes = candidate_bytes + visited.nbytes + level.partitions * level_keys.nbytes
    return out, Summary(partition, len(level_fps), transitions, bounds_hit, tuple(discoveries), candidate_bytes,
                        record_bytes, visited.nbytes, len(visited.fps), time.perf_counter() - started, built,
                        os.getpid(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, candidates,
                        time.process_time() - cpu_started)


def _send(backend, expansion, level_fps, level_keys, steps, partitions: int) -> list[tuple]:
    """The expansion's successors as one block per destination partition, each fingerprint once.

    Transitions are in key order (sources by key, then position), so a fingerprint's first
    occurrence here has its smallest key: the repeats need not travel.
    """
    fps = expansion.fingerprints
    _, first = np.unique(fps, return_index=True)
    first.sort()
    destinations = (fps[first] % np.uint64(partitions)).astype(np.int64)
    rows = as_rows(backend, backend.take(expansion.successors, first))
    sources = expansion.parents[first]
    out = []
    for d in range(partitions):
        mine = np.flatnonzero(destinations == d)
        if len(mine):
            at = first[mine]
            out.append((d, Candidates(rows[mine], fps[at], level_fps[sources[mine]], level_keys[sources[mine]],
                                      steps[at])))
    return out


class _StateCounter:
    """Counts the model's state objects built while it is on (the test of a batch-only hot path)."""

    def __init__(self, backend):
        self.types = {type(backend.model.initial_state())}
        self.count = 0
        self.saved = {}
        for cls in self.types:
            self.saved[cls] = (cls.__new__, cls.__dict__.get("_make"))
            original_new, original_make = self.saved[cls]

            def new(kind, *args, _original=original_new, **kwargs):
                self.count += 1
                return _original(kind, *args, **kwargs)

            cls.__new__ = new
            if original_make is not None:
                make = original_make.__func__

                def counted_make(kind, iterable, _make=make):
                    self.count += 1
                    return _make(kind, iterable)

                cls._make = classmethod(counted_make)

    def stop(self) -> int:
        for cls, (new, make) in self.saved.items():
            cls.__new__ = new
            if make is not None:
                cls._make = make
        return self.count
