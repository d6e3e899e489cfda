"""The one breadth-first search: level by level, batch by batch, with visitors.

`Search(model, options, visitors).run()` explores the reachable states of a model
and returns a `Report`: the local engine behind `checker.run.run`, the one way to
run a search (a caller that reads the engine's own state as it goes, the liveness
graph on the compiled backend, holds a `Search`). Everything that differs between
uses is outside the loop:

- `CheckOptions` says how: symmetry, worker processes, state and depth limits,
  progress callback, successor backend ("reference" or "fast", `checker.backend`).
- Visitors say what to do with what the search sees. The property tracker is
  one (every check has it); the state graph (`checker.graph`), the sampler and the
  induction explorer (`proofs.induction`) are others. A visitor gets each
  expanded batch ("chunk") in canonical order, with the transitions, the parents
  and which successors were new.

The canonical order, which every worker count and backend reproduces: levels in
order; within a level, states in the order they were discovered; a state's
transitions in the model's action order. A state's parent is the first state in
that order with a transition to it, so the parent links, the depth of each state
and the shortest traces do not depend on how a level is cut into chunks or on
how many processes expand them.

Memory: the visited set is packed (`VisitedSet`: an open-addressing table of
64-bit fingerprints plus, per state, its fingerprint and its parent's index);
frontiers are packed batches (`Backend.take`), and a level is expanded chunk by
chunk, so only one chunk's transitions are ever held as model objects.

Parallel: with `workers > 1`, forked worker processes (`checker.workers`) expand
the chunks of a level (successors, fingerprints, the visitors' own per-chunk
work such as the property checks) and pass their results back through shared
memory; this process consumes the results in chunk order and keeps the one
visited set, so the result is the same as with one worker.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from hwm.model.actions import Model
from hwm.checker.backend import Backend, Batch, Expansion, make_backend
from hwm.checker.report import Discovery, Report, Tracker, finish_report, used_symmetry
from hwm.checker.workers import Workers
from hwm.model.variant import HookError
from hwm.properties.catalogue import CATALOGUE, Property

__all__ = ["CheckOptions", "Chunk", "Visitor", "PropertyTracker", "Sampler", "VisitedSet", "Search"]

ProgressFn = Callable[[dict], None]
CHUNK = 2048  # frontier states per chunk: big enough to amortise a round trip, small enough to stream
LEVEL_CHUNKS = 4  # per worker: the fewest chunks a level is cut into when workers expand it
SMALL_LEVEL = 256  # per worker: smaller levels are expanded in the search's own process


@dataclass(frozen=True)
class CheckOptions:
    """How to search (never what the model is): Stateright's checker builder options."""

    symmetry: bool = True
    workers: int = 1
    max_states: int | None = None
    max_depth: int | None = None
    progress: ProgressFn | None = None
    successors: str = "reference"
    properties: tuple[Property, ...] | None = None  # None: the model's own (`model.properties`)
    chunk: int = CHUNK

    def __post_init__(self):
        if not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"workers must be a whole number of processes, at least 1, not {self.workers!r}")
        if self.max_states is not None and self.max_states < 1:
            raise ValueError(f"max_states must be at least 1, not {self.max_states!r}")
        if self.max_depth is not None and self.max_depth < 0:
            raise ValueError(f"max_depth must be at least 0, not {self.max_depth!r}")
        if self.chunk < 1:
            raise ValueError(f"chunk must be at least 1, not {self.chunk!r}")


# ------------------------------------------------------------ the visited set
_KERNELS: list = []


def _table_kernels():
    """(contains, place): the probing loops of `checker.fast.probing`, compiled (`checker.fast.aot`: the
    module compiled ahead of time when one is built, else Numba's JIT); None without Numba."""
    if _KERNELS:
        return _KERNELS[0]
    try:
        from hwm.checker.fast.aot import kernels
        compiled = kernels(build=False)
    except ImportError:
        _KERNELS.append(None)
        return None
    # Compile (or load the disk cache) now, within the search's set-up time.
    compiled.contains(np.zeros(2, dtype=np.uint64), np.ones(1, dtype=np.uint64), np.zeros(1, dtype=np.bool_))
    compiled.place(np.zeros(2, dtype=np.uint64), np.ones(1, dtype=np.uint64))
    _KERNELS.append((compiled.contains, compiled.place))
    return _KERNELS[0]


class VisitedSet:
    """Fingerprints seen so far, each with its discovery index and its parent's index.

    `table` is open addressing with linear probing over the fingerprints (0 marks an
    empty slot; the fingerprint 0 itself is remembered by a flag), kept at most 70%
    full; `fps[i]` and `parents[i]` are the fingerprint and the parent's index of
    the i-th state discovered (-1 for the initial state). About 30 bytes per state.
    """

    LOAD = 0.7

    def __init__(self, capacity: int = 1 << 14, compiled: bool = True):
        # Compiled probing loops when Numba is there (a dependency); numpy's vectorised rounds otherwise.
        self.kernels = _table_kernels() if compiled else None
        self.table = np.zeros(capacity, dtype=np.uint64)
        self.fps = np.zeros(1024, dtype=np.uint64)
        self.parents = np.zeros(1024, dtype=np.int32)
        self.count = 0
        self._used = 0  # occupied table slots
        self._zero = False

    def __len__(self) -> int:
        return self.count

    @property
    def nbytes(self) -> int:
        return self.table.nbytes + self.fps.nbytes + self.parents.nbytes

    def add(self, fps: np.ndarray, parents: np.ndarray) -> np.ndarray:
        """Record the new fingerprints of `fps` (first occurrences); their positions, increasing."""
        _, first = np.unique(fps, return_index=True)
        first = np.sort(first)
        positions = first[~self.contains(fps[first])]
        self.add_new(fps[positions], parents[positions])
        return positions

    def contains(self, keys: np.ndarray) -> np.ndarray:
        """True where a fingerprint was visited."""
        result = np.zeros(keys.size, dtype=bool)
        zero = keys == 0
        result[zero] = self._zero
        where = np.flatnonzero(~zero)
        if self.kernels is not None:
            found = np.zeros(where.size, dtype=np.bool_)
            self.kernels[0](self.table, np.ascontiguousarray(keys[where]), found)
            result[where] = found
            return result
        keys = keys[where]
        table = self.table
        mask = np.uint64(table.size - 1)
        slots = keys & mask
        while keys.size:
            held = table[slots]
            found = held == keys
            result[where[found]] = True
            go_on = ~found & (held != 0)
            slots, keys, where = (slots[go_on] + np.uint64(1)) & mask, keys[go_on], where[go_on]
        return result

    def add_new(self, fps: np.ndarray, parents: np.ndarray) -> None:
        """Record distinct fingerprints known not to be visited yet, with their parents' indexes."""
        if not fps.size:
            return
        end = self.count + fps.size
        if end > np.iinfo(np.int32).max:
            raise OverflowError("more than 2**31 states: the visited set's parent links are 32-bit")
        if end > self.fps.size:
            size = max(end, 2 * self.fps.size)
            self.fps = np.resize(self.fps, size)
            self.parents = np.resize(self.parents, size)
        self.fps[self.count:end] = fps
        self.parents[self.count:end] = parents
        self.count = end
        zero = fps == 0
        if zero.any():
            self._zero = True
            fps = fps[~zero]
        if self._used + fps.size > self.LOAD * self.table.size:
            self._grow(self._used + fps.size)
        self._used += self._place(self.table, fps, self.kernels)

    @staticmethod
    def _place(table: np.ndarray, keys: np.ndarray, kernels=None) -> int:
        """Linear probing for many distinct keys that are not in `table`, at once."""
        if kernels is not None:
            return kernels[1](table, np.ascontiguousarray(keys))
        mask = np.uint64(table.size - 1)
        slots = keys & mask
        placed = keys.size
        while keys.size:
            empty = table[slots] == 0
            # Several keys may want one empty slot: the first of each slot takes it,
            # the others find it taken and probe on.
            candidates = np.flatnonzero(empty)
            _, first = np.unique(slots[candidates], return_index=True)
            winners = candidates[first]
            table[slots[winners]] = keys[winners]
            go_on = np.ones(keys.size, dtype=bool)
            go_on[winners] = False
            slots = np.where(empty, slots, (slots + np.uint64(1)) & mask)[go_on]
            keys = keys[go_on]
        return placed

    def _grow(self, needed: int) -> None:
        size = self.table.size
        while needed > self.LOAD * size:
            size *= 2
        table = np.zeros(size, dtype=np.uint64)
        keys = self.fps[:self.count]
        self._used = self._place(table, keys[keys != 0], self.kernels)
        self.table = table

    def index_of(self, fp: int) -> int:
        hits = np.flatnonzero(self.fps[:self.count] == np.uint64(fp))
        if not hits.size:
            raise KeyError(f"fingerprint {fp:#x} was never visited")
        return int(hits[0])

    def path(self, index: int) -> list[int]:
        """Fingerprints from the initial state to the state discovered `index`-th."""
        chain = [index]
        while self.parents[chain[-1]] >= 0:
            chain.append(int(self.parents[chain[-1]]))
        return [int(self.fps[i]) for i in reversed(chain)]


# ----------------------------------------------------------------- visitors
@dataclass
class Chunk:
    """One expanded batch of a level, as visitors see it (in canonical order).

    `frontier` holds states `first`, `first + 1`, ... of depth `depth`;
    `fingerprints`, `parents` (positions in `frontier`) and `actions` list its
    transitions, all of them or, when a state limit stopped the search inside
    this chunk, the first `kept`. `new` are the positions among the transitions
    that discovered a state, whose indexes are `new_first`, `new_first + 1`, ...
    and whose states are `new_states`. `expansion` is None for the deepest level
    of a depth-limited search: its states are visited, not expanded.
    """

    search: "Search"
    depth: int
    frontier: Batch
    first: int
    fingerprints: np.ndarray
    parents: np.ndarray
    actions: np.ndarray
    new: np.ndarray
    new_first: int
    new_states: Batch
    expanded: bool = True
    kept: int = 0

    def frontier_fingerprints(self) -> np.ndarray:
        v = self.search.visited
        return v.fps[self.first:self.first + len(self.frontier)]


class Visitor:
    """What a search does with what it sees. Every hook is optional.

    `worker_args()` is called once per level in the search's process; its result is
    sent with every chunk to `in_worker(args, backend, frontier, expansion)`, which
    runs where the chunk is expanded (a worker process when workers > 1) and sees
    every transition as a model object if it likes; its (picklable, small) result
    comes back to `on_chunk(chunk, result)`, called in the search's process in
    canonical order. `expansion` is None for states visited but not expanded.
    """

    def start(self, search: "Search") -> None:
        pass

    def worker_args(self) -> Any:
        return None

    def in_worker(self, args: Any, backend: Backend, frontier: Batch, expansion: Expansion | None) -> Any:
        return None

    def on_chunk(self, chunk: Chunk, result: Any) -> None:
        pass

    def finish(self, search: "Search") -> None:
        pass


class PropertyTracker(Tracker, Visitor):
    """The catalogue's verdicts as a visitor: per property its first finding in canonical order.

    State properties are checked on each state when it is expanded (or visited at
    the depth limit), step properties on every transition; both where the chunk is
    expanded (the workers). Each property is checked until first found.
    """

    def __init__(self, properties: Iterable[Property] = CATALOGUE):
        super().__init__(properties)
        self.by_name = {p.name: p for p in self.all}

    def worker_args(self):
        return [p.name for p in self.state_props], [p.name for p in self.step_props]

    def in_worker(self, args, backend, frontier, expansion):
        state_names, step_names = args
        states = backend.check_states(frontier, [self.by_name[n] for n in state_names])
        steps = {}
        if expansion is not None and step_names:
            steps = backend.check_steps(frontier, expansion, [self.by_name[n] for n in step_names])
        return states, steps

    def on_chunk(self, chunk: Chunk, result) -> None:
        states, steps = result
        fps = chunk.frontier_fingerprints()
        for name, (position, finding) in states.items():
            self.record(Discovery(self.by_name[name], int(fps[position]), None, finding))
        for name, (t, finding) in steps.items():
            if t < chunk.kept:
                self.record(Discovery(self.by_name[name], int(chunk.fingerprints[t]), int(fps[chunk.parents[t]]),
                                      finding))


class Sampler(Visitor):
    """Keeps the states discovered first, up to `limit` (breadth-first order), as model objects."""

    def __init__(self, limit: int):
        self.limit = limit
        self.states: list = []

    def on_chunk(self, chunk: Chunk, result) -> None:
        backend = chunk.search.backend
        if chunk.first == 0 and not self.states:
            self.states.append(backend.states(chunk.frontier)[0])  # the initial state
        if len(self.states) < self.limit and len(chunk.new):
            self.states += backend.states(chunk.new_states)[: self.limit - len(self.states)]


# ------------------------------------------------------------------ workers
def _expand_chunk(backend: Backend, visitors: Sequence[Visitor], frontier: Batch, args: list,
                  expand: bool) -> tuple:
    """A chunk's expansion as sent back to the search: flat arrays, packed first occurrences."""
    expansion = backend.expand(frontier) if expand else None
    results = [v.in_worker(a, backend, frontier, expansion) for v, a in zip(visitors, args)]
    if expansion is None:
        return None, results
    fps = expansion.fingerprints
    # A successor seen twice in the chunk can be new only the first time: ship only those.
    _, first = np.unique(fps, return_index=True)
    candidates = np.sort(first)
    return (fps, expansion.parents, expansion.actions, expansion.bounds_hit, candidates,
            backend.take(expansion.successors, candidates)), results


# ------------------------------------------------------------------- search
class Search:
    """One breadth-first search in progress; `run()` drives it, `steps()` lets a caller pause it."""

    def __init__(self, model: Model, options: CheckOptions = CheckOptions(), visitors: Sequence[Visitor] = (),
                 name: str = "model", engine: str = "local"):
        self.model = model
        self.options = options
        started = time.perf_counter()
        self.backend = make_backend(options.successors, model, options.symmetry)
        self.visited = VisitedSet()
        # Compiled code compiles (or loads its cache) here: reported apart from the search.
        self.setup_seconds = time.perf_counter() - started
        self.tracker = PropertyTracker(model.properties if options.properties is None else options.properties)
        self.visitors: list[Visitor] = [self.tracker, *visitors]
        # One engine name whatever the worker count: reports and saved traces do not depend on it.
        self.report = Report(name, model.config.to_mapping(), engine, used_symmetry(model, options.symmetry),
                             successors=options.successors, setup_seconds=self.setup_seconds)
        self.depth = 0
        self.transitions = 0
        self.bounds_hit: set[str] = set()
        self.level_starts = [0]  # index of the first state of each depth
        self.frontier_size = 1
        self.seconds = 0.0
        self.interrupted = False
        self.limit_reached = False
        self._pool = None

    # --------------------------------------------------------------- driving
    def run(self) -> Report:
        try:
            for _ in self.steps():
                pass
        except KeyboardInterrupt:
            self.interrupted = True
        except HookError as e:  # a variant's hook or property failed: stop, keep what was explored
            self.interrupted = True
            self.report.error = str(e)
        finally:
            self.close()
        return self.finish()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def finish(self) -> Report:
        report = self.report
        report.states = len(self.visited)
        report.transitions = self.transitions
        report.depth = self.depth
        report.bounds_hit = self.bounds_hit
        report.seconds = self.seconds
        if self.interrupted:
            report.complete = False
            report.interrupted = True
        for v in self.visitors:
            v.finish(self)
        visited = self.visited
        return finish_report(report, self.model, self.tracker, lambda fp: visited.path(visited.index_of(fp)),
                             self.options.symmetry)

    def depth_of(self, index: int) -> int:
        return int(np.searchsorted(np.asarray(self.level_starts), index, side="right")) - 1

    # ----------------------------------------------------------------- levels
    def _chunk_bounds(self, size: int) -> list[tuple[int, int]]:
        workers = self.options.workers if self._parallel(size) else 1
        # Enough chunks to keep every worker busy and results streaming, each at most `chunk` states;
        # with workers, a multiple of their number and at least LEVEL_CHUNKS each, so that no worker is
        # left alone with a level's last chunk for long.
        count = math.ceil(size / self.options.chunk)
        if workers > 1:
            count = min(size, workers * max(LEVEL_CHUNKS, math.ceil(count / workers)))
        bounds = np.linspace(0, size, count + 1).astype(np.int64).tolist()
        return [(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]

    def _parallel(self, size: int) -> bool:
        """Whether worker processes expand a batch of `size` (small levels cost more to ship than to expand)."""
        workers = self.options.workers
        return workers > 1 and size >= min(SMALL_LEVEL * workers, self.options.chunk * workers)

    def _results(self, frontier: Batch, bounds: list[tuple[int, int]], expand: bool) -> Iterator[tuple]:
        """(chunk, its expansion and visitor results) for each chunk, in order.

        Chunks are cut from the packed frontier as they are needed and dropped after
        use, so only one chunk at a time is ever decoded into model objects here.
        """
        args = [v.worker_args() for v in self.visitors]
        take = self.backend.take

        def chunk(a: int, b: int) -> Batch:
            return take(frontier, np.arange(a, b))

        if not self._parallel(len(frontier)):
            for a, b in bounds:
                piece = chunk(a, b)
                yield piece, _expand_chunk(self.backend, self.visitors, piece, args, expand)
            return
        if self._pool is None:
            # Forked: the workers inherit the backend and the visitors, only chunks cross.
            backend, visitors = self.backend, self.visitors
            self._pool = Workers(self.options.workers, lambda task: _expand_chunk(backend, visitors, *task))
        results = self._pool.imap((chunk(a, b), args, expand) for a, b in bounds)
        for (a, b), result in zip(bounds, results, strict=True):
            yield chunk(a, b), result

    def steps(self) -> Iterator[Chunk]:
        """Search, yielding after each chunk (so a caller may stop and resume)."""
        started = time.perf_counter() - self.seconds
        options, backend, visited = self.options, self.backend, self.visited
        for v in self.visitors:
            v.start(self)
        frontier = backend.take(backend.initial(), np.arange(1))
        visited.add(backend.fingerprints(frontier), np.full(1, -1, dtype=np.int32))
        last_progress = time.perf_counter()
        while True:
            expand = options.max_depth is None or self.depth < options.max_depth
            bounds = self._chunk_bounds(len(frontier))
            level_first = self.level_starts[-1]
            new_first = len(visited)
            new_parts: list[Batch] = []
            first = level_first
            for chunk, (expansion, results) in self._results(frontier, bounds, expand):
                if expansion is None:
                    empty = np.zeros(0, dtype=np.int64)
                    view = Chunk(self, self.depth, chunk, first, empty.astype(np.uint64), empty, empty, empty,
                                 len(visited), backend.take(chunk, empty), expanded=False)
                else:
                    view = self._absorb(chunk, first, expansion)
                    new_parts.append(view.new_states)
                for v, result in zip(self.visitors, results):
                    v.on_chunk(view, result)
                first += len(chunk)
                self.seconds = time.perf_counter() - started
                if options.progress is not None and time.perf_counter() - last_progress >= 0.5:
                    last_progress = time.perf_counter()
                    options.progress(self.progress_info(len(visited) - new_first, expanded=first))
                yield view
                if self.limit_reached:
                    break
            if self.limit_reached:
                # The rest of this level and the new states were discovered but will not
                # be expanded: visit them, as a depth limit visits its deepest level.
                self.report.complete = False
                rest = backend.take(frontier, np.arange(first - level_first, len(frontier)))
                self._visit_only(backend.concat([rest, *new_parts]), first)
                break
            if not expand:
                self.report.complete = False
                break
            frontier = backend.concat(new_parts)
            self.frontier_size = len(frontier)
            if not len(frontier):
                break
            self.depth += 1
            self.level_starts.append(new_first)
        self.seconds = time.perf_counter() - started
        if options.progress is not None:
            options.progress(self.progress_info(self.frontier_size))

    def _absorb(self, chunk: Batch, first: int, expansion: tuple) -> Chunk:
        """Merge one chunk's transitions into the visited set, in canonical order."""
        fps, parents, actions, bounds_hit, candidates, candidate_states = expansion
        visited = self.visited
        new_first = len(visited)
        kept = len(fps)
        positions = np.flatnonzero(~visited.contains(fps[candidates]))
        new = candidates[positions]
        limit = self.options.max_states
        if limit is not None and new_first + len(new) >= limit:
            # Stop after the state whose successors reach the limit (as a state-by-state search would).
            reached = limit - 1 - new_first  # the new state that reaches the limit (the initial one if < 0)
            last_parent = parents[new[reached]] if reached >= 0 else 0
            self.limit_reached = True
            kept = int(np.searchsorted(parents, last_parent, side="right"))
            keep = int(np.searchsorted(new, kept))
            new, positions = new[:keep], positions[:keep]
        visited.add_new(fps[new], (parents[new] + first).astype(np.int32))
        self.transitions += kept
        self.bounds_hit |= bounds_hit if kept == len(fps) else self._bounds_of(chunk, parents, kept)
        return Chunk(self, self.depth, chunk, first, fps, parents, actions, new, new_first,
                     self.backend.take(candidate_states, positions), True, kept)

    def _bounds_of(self, chunk: Batch, parents: np.ndarray, kept: int) -> set:
        """Bounds hit by the states of a chunk up to the one where the search stopped."""
        last = int(parents[kept - 1]) + 1 if kept else 0
        return self.backend.expand(self.backend.take(chunk, np.arange(last))).bounds_hit

    def _visit_only(self, batch: Batch, first: int) -> None:
        for chunk, (_, results) in self._results(batch, self._chunk_bounds(len(batch)), False):
            empty = np.zeros(0, dtype=np.int64)
            view = Chunk(self, self.depth, chunk, first, empty.astype(np.uint64), empty, empty, empty,
                         len(self.visited), self.backend.take(chunk, empty), expanded=False)
            for v, result in zip(self.visitors, results):
                v.on_chunk(view, result)
            first += len(chunk)

    def progress_info(self, frontier: int, expanded: int | None = None) -> dict:
        """`frontier`: states found so far in the level under way; `expanded`: states expanded so far
        (all of them when the search has ended)."""
        elapsed = self.seconds
        states = len(self.visited)
        # The finished levels' sizes, the one being expanded last (checker.estimate reads a remaining time off them).
        levels = ([b - a for a, b in zip(self.level_starts, self.level_starts[1:])]
                  + [states - self.level_starts[-1] - frontier])
        return {"depth": self.depth + 1, "states": states, "frontier": frontier,
                "states_per_second": states / elapsed if elapsed > 0 else float("inf"), "elapsed": elapsed,
                "levels": levels, "expanded": states if expanded is None else expanded}
