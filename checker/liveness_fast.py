"""The liveness check on the compiled engine's graph (`--successors fast`), for graphs of millions of states.

The same check as `checker.liveness` (its docstring and docs/liveness.md say what it decides and why),
on the same concrete graph: the breadth-first search of the compiled backend without symmetry gives
the reference backend's states in the same order, with the same transitions in the same order, so
state numbers, breadth-first parents and distances are the reference graph's. Only the representation
differs: states stay packed rows, edges are arrays (CSR: `indptr`, `targets`, `action_ids`), and the
graph algorithms are compiled loops (Numba's JIT, cached on disk):

- obligations are the properties' own Python, asked once per distinct tuple of server slots: the
  documented properties read the servers alone (generation, role, alive, HWM, log), and a million
  states share a few thousand such tuples; a property of a variant is asked of every state;
- strongly connected components per obligation key: Tarjan's algorithm, iterative, refined for strong
  fairness as the reference refines them (the states that enable a strongly fair instance their
  component never takes leave, and Tarjan runs again on what is left, until nothing leaves);
- per component, the fair actions enabled in all of its states against those taken inside it, as
  bit sets (one bit per weakly fair action instance, one word; the strongly fair ones in another);
- the shortest fair cycle through a state: the reference's breadth-first search over (state, weak
  requirements met, strong instances taken, strong instances owed), cut off once it cannot beat the
  best lasso found so far.

Identities are kept (no symmetry reduction), as on the reference path: an obligation's key and a fair
action name servers, and an edge of the quotient graph does not carry the permutation that relates
its target to the class's representative.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.typed import Dict

from hwm.model.actions import Model, to_step
from hwm.properties.liveness import LIVENESS

__all__ = ["CompiledGraph", "check_on_compiled_graph"]


@njit(cache=True, nogil=True)
def strong_components(indptr, targets, member, label, work):
    """Tarjan's SCCs of the subgraph on `member` states, iteratively: `label` gets each state's
    component (-1 outside); returns their count. `work` is scratch space, 5 x states."""
    n = member.size
    order = work[0]
    low = work[1]
    stack = work[2]
    calls = work[3]
    edge = work[4]
    order[:] = -1
    label[:] = -1
    on_stack = np.zeros(n, np.bool_)
    sp = 0
    counter = 0
    count = 0
    for root in range(n):
        if not member[root] or order[root] >= 0:
            continue
        order[root] = counter
        low[root] = counter
        counter += 1
        stack[sp] = root
        sp += 1
        on_stack[root] = True
        calls[0] = root
        edge[0] = indptr[root]
        cp = 1
        while cp > 0:
            v = calls[cp - 1]
            e = edge[cp - 1]
            if e < indptr[v + 1]:
                edge[cp - 1] = e + 1
                w = targets[e]
                if not member[w]:
                    continue
                if order[w] < 0:
                    order[w] = counter
                    low[w] = counter
                    counter += 1
                    stack[sp] = w
                    sp += 1
                    on_stack[w] = True
                    calls[cp] = w
                    edge[cp] = indptr[w]
                    cp += 1
                elif on_stack[w] and order[w] < low[v]:
                    low[v] = order[w]
            else:
                cp -= 1
                if cp > 0:
                    u = calls[cp - 1]
                    if low[v] < low[u]:
                        low[u] = low[v]
                if low[v] == order[v]:
                    while True:
                        sp -= 1
                        w = stack[sp]
                        on_stack[w] = False
                        label[w] = count
                        if w == v:
                            break
                    count += 1
    return count


@njit(cache=True, nogil=True)
def _inner_edges(indptr, targets, bits, enabled, label, count):
    """Per component: its size, the instances (`enabled` bits) enabled somewhere in it, those (`bits` of
    the edges) taken on its inner edges, and whether it has a self-loop."""
    size = np.zeros(count, np.int64)
    anywhere = np.zeros(count, np.int64)
    taken = np.zeros(count, np.int64)
    self_loop = np.zeros(count, np.bool_)
    for v in range(label.size):
        c = label[v]
        if c < 0:
            continue
        size[c] += 1
        anywhere[c] |= enabled[v]
        for e in range(indptr[v], indptr[v + 1]):
            if label[targets[e]] == c:
                taken[c] |= bits[e]
                if targets[e] == v:
                    self_loop[c] = True
    return size, anywhere, taken, self_loop


@njit(cache=True, nogil=True)
def fair_components(indptr, targets, fair_bits, enabled, label, count):
    """Per component: whether it holds a fair cycle (it has two states or more, or a self-loop, and every
    fair action enabled in all its states is taken inside it), and the fair actions enabled somewhere in it."""
    size, anywhere, taken, self_loop = _inner_edges(indptr, targets, fair_bits, enabled, label, count)
    always = np.full(count, -1, np.int64)
    for v in range(label.size):
        if label[v] >= 0:
            always[label[v]] &= enabled[v]
    fair = np.zeros(count, np.bool_)
    for c in range(count):
        fair[c] = (size[c] > 1 or self_loop[c]) and (always[c] & ~taken[c]) == 0
    return fair, anywhere


@njit(cache=True, nogil=True)
def strong_refinement(indptr, targets, strong_bits, strong_enabled, label, count, member):
    """One round of the refinement for strong fairness: in each component with a cycle, the states that
    enable a strongly fair instance taken on none of the component's inner edges leave `member` (no fair
    cycle passes through them). Returns how many left; Tarjan runs again on what is left until none."""
    size, anywhere, taken, self_loop = _inner_edges(indptr, targets, strong_bits, strong_enabled, label, count)
    removed = 0
    for v in range(label.size):
        c = label[v]
        if c < 0 or not (size[c] > 1 or self_loop[c]):
            continue  # no cycle: fair_components passes it over
        if strong_enabled[v] & anywhere[c] & ~taken[c]:
            member[v] = False
            removed += 1
    return removed


def refined_components(indptr, targets, member, strong_bits, strong_enabled, label, work) -> int:
    """The strongly connected components of the subgraph on `member`, refined for strong fairness until
    stable (`member` loses the states refined away): `label` gets each state's component; returns their
    count. With no strongly fair instance (the rpc network) the first round removes nothing."""
    count = strong_components(indptr, targets, member, label, work)
    while count and strong_refinement(indptr, targets, strong_bits, strong_enabled, label, count, member):
        count = strong_components(indptr, targets, member, label, work)
    return count


_KEY = types.UniTuple(types.int64, 4)  # (state, weak requirements met, strong taken, strong owed)


@njit(cache=True, nogil=True)
def shortest_fair_cycle(indptr, targets, fair_bits, enabled, strong_bits, strong_enabled, label, start, full,
                        limit):
    """The edges of the fewest steps from `start` back to it inside its component that meet every
    fairness requirement (each weakly fair action enabled somewhere in the component, the bits of `full`,
    is taken or disabled in some visited state; each strongly fair one enabled in a visited state is
    taken), by breadth-first search over (state, requirements met, strong taken, strong owed); empty
    when there is none of at most `limit` steps."""
    c = label[start]
    seen = Dict.empty(key_type=_KEY, value_type=types.int64)
    states = [start]
    met_of = [full & ~enabled[start]]
    taken_of = [np.int64(0)]
    owed_of = [strong_enabled[start]]
    parent = [-1]
    via = [-1]
    depth = [0]
    seen[(start, met_of[0], taken_of[0], owed_of[0])] = 0
    head = 0
    while head < len(states):
        node = head
        head += 1
        if depth[node] + 1 > limit:
            break
        k = states[node]
        met = met_of[node]
        taken = taken_of[node]
        owed = owed_of[node]
        for e in range(indptr[k], indptr[k + 1]):
            j = targets[e]
            if label[j] != c:
                continue
            now = met | (fair_bits[e] & full) | (full & ~enabled[j])
            now_taken = taken | strong_bits[e]
            now_owed = (owed | strong_enabled[j]) & ~now_taken
            if j == start and now == full and now_owed == 0:
                cycle = [e]
                while parent[node] >= 0:
                    cycle.append(via[node])
                    node = parent[node]
                cycle.reverse()
                return np.array(cycle, dtype=np.int64)
            if (j, now, now_taken, now_owed) not in seen:
                seen[(j, now, now_taken, now_owed)] = len(states)
                states.append(j)
                met_of.append(now)
                taken_of.append(now_taken)
                owed_of.append(now_owed)
                parent.append(node)
                via.append(e)
                depth.append(depth[node] + 1)
    return np.zeros(0, dtype=np.int64)


@njit(cache=True, nogil=True)
def enabled_bits(indptr, fair_bits):
    """Per state, the fair action instances enabled in it (the bits of its outgoing edges)."""
    n = indptr.size - 1
    out = np.zeros(n, np.int64)
    for v in range(n):
        for e in range(indptr[v], indptr[v + 1]):
            out[v] |= fair_bits[e]
    return out




class CompiledGraph:
    """The concrete reachable graph as the compiled engine explores it: packed rows, CSR edges.

    A visitor of the one breadth-first search (`checker.engine`, `successors="fast"`, symmetry off):
    state k is the k-th discovered, its edges `targets[indptr[k]:indptr[k + 1]]` with `action_ids`
    in the model's action order, `parent[k]` and `parent_action[k]` the first transition into it.
    """

    def __init__(self, model: Model, max_states: int, refused):
        from hwm.checker.engine import CheckOptions, Search

        self.max_states = max_states
        self._refused = refused  # the exception a graph over the limit raises
        self._rows: list[np.ndarray] = []
        self._fps: list[np.ndarray] = []
        self._sources: list[np.ndarray] = []
        self._actions: list[np.ndarray] = []
        self._parent_actions: list[np.ndarray] = [np.full(1, -1, dtype=np.int32)]
        search = Search(model, CheckOptions(symmetry=False, properties=(), successors="fast"), [self])
        self.backend = search.backend
        self.layout = search.backend.layout
        search.run()
        if search.interrupted:
            raise KeyboardInterrupt
        visited = search.visited
        count = len(visited)
        self.rows = np.concatenate(self._rows)
        fps = np.concatenate(self._fps) if self._fps else np.zeros(0, dtype=np.uint64)
        sources = np.concatenate(self._sources) if self._sources else np.zeros(0, dtype=np.int64)
        self.action_ids = np.concatenate(self._actions) if self._actions else np.zeros(0, dtype=np.int32)
        self.parent = visited.parents[:count].astype(np.int64)
        self.parent_action = np.concatenate(self._parent_actions)
        del self._rows, self._fps, self._sources, self._actions, self._parent_actions
        # Every transition's target is a visited state: its number from its fingerprint.
        known = visited.fps[:count]
        order = np.argsort(known, kind="stable")
        self.targets = order[np.searchsorted(known[order], fps)].astype(np.int64)
        self.indptr = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(np.bincount(sources, minlength=count), out=self.indptr[1:])
        starts = np.asarray(search.level_starts + [count], dtype=np.int64)
        self.distance = np.repeat(np.arange(len(starts) - 1), np.diff(starts))

    def on_chunk(self, chunk, result) -> None:
        if chunk.first == 0 and chunk.depth == 0:
            self._rows.append(chunk.frontier.copy())
        if len(chunk.search.visited) > self.max_states:
            raise self._refused(
                f"the state graph has more than {self.max_states:,} states (the liveness state limit): "
                "choose smaller bounds or raise the limit")
        if not chunk.expanded:
            return
        kept = chunk.kept
        self._rows.append(chunk.new_states)
        self._fps.append(chunk.fingerprints[:kept])
        self._sources.append(chunk.parents[:kept].astype(np.int64) + chunk.first)
        self._actions.append(chunk.actions[:kept].astype(np.int32))
        self._parent_actions.append(chunk.actions[chunk.new].astype(np.int32))

    # The engine's other visitor hooks: nothing to do.
    def start(self, search) -> None:
        pass

    def worker_args(self):
        return None

    def in_worker(self, args, backend, frontier, expansion):
        return None

    def finish(self, search) -> None:
        pass

    @property
    def states(self) -> int:
        return len(self.indptr) - 1

    @property
    def transitions(self) -> int:
        return len(self.targets)

    def state(self, k: int):
        return self.layout.unpack(self.rows[k])

    def path_to(self, k: int) -> list[int]:
        """Action ids of the breadth-first path from the initial state to state k."""
        ids = []
        while self.parent[k] >= 0:
            ids.append(int(self.parent_action[k]))
            k = int(self.parent[k])
        ids.reverse()
        return ids


def _classes(graph: CompiledGraph, documented: bool) -> tuple[np.ndarray, np.ndarray]:
    """(a representative state per class, each state's class): states whose properties agree.

    The documented properties (properties/liveness.py) read each server's generation, role, alive
    flag, HWM and log alone, so states equal in those bytes are one class; any other property is
    asked of every state."""
    if not documented:
        return np.arange(len(graph.rows)), np.arange(len(graph.rows))
    layout = graph.layout
    read = 5 + layout.max_log  # GEN, ROLE, ALIVE, HWM, LEN, LOG[max_log]: checker.fast.fields
    columns = [layout.server_base(k) + j for k in range(layout.n) for j in range(read)]
    rows = np.ascontiguousarray(graph.rows[:, columns])
    keys = rows.view(np.dtype((np.void, rows.shape[1]))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return first, inverse.ravel()


def check_on_compiled_graph(model: Model, protocol_name: str, properties, fair: tuple[str, ...],
                            max_states: int, report_type, result_type, refused, strong: tuple[str, ...] = ()):
    """`checker.liveness.check_liveness` on the compiled graph: the same report."""
    from hwm.checker.backend import action_table

    actions = action_table(model)  # the backends' action ids
    bit_ofs = []
    for names, kind in ((fair, "weakly"), (strong, "strongly")):
        ids = [i for i, a in enumerate(actions) if a[0] in names]
        if len(ids) > 62:
            raise refused(f"{len(ids)} {kind} fair action instances: the compiled liveness check keeps "
                          f"them as bits of one 64-bit word")
        bit_of = np.zeros(len(actions), dtype=np.int64)
        for n, i in enumerate(ids):
            bit_of[i] = 1 << n
        bit_ofs.append(bit_of)
    graph = CompiledGraph(model, max_states, refused)
    fair_bits, strong_bits = (bit_of[graph.action_ids] for bit_of in bit_ofs)
    enabled = enabled_bits(graph.indptr, fair_bits)
    strong_enabled = enabled_bits(graph.indptr, strong_bits)
    terminal = np.diff(graph.indptr) == 0
    report = report_type(protocol_name, model.config.to_mapping(), graph.states, graph.transitions, tuple(fair),
                         tuple(strong), properties=tuple(properties))
    documented = all(p in LIVENESS for p in properties)
    representatives, class_of = _classes(graph, documented)
    # Each class's obligations, asked of its representative with the property's own code.
    class_states = [graph.state(int(k)) for k in representatives]
    for prop in properties:
        obligations = [prop.obligations(s) for s in class_states]
        report.results[prop.name] = _check_property(graph, prop, obligations, class_of, fair_bits, enabled,
                                                    strong_bits, strong_enabled, terminal, actions, result_type)
    # A class's representative is its breadth-first first state: the first representative that
    # reaches a witness is the first state that does.
    by_discovery = np.argsort(representatives, kind="stable").tolist()
    for prop in properties:
        witness = prop.witness
        k = next((int(representatives[c]) for c in by_discovery if witness.check(class_states[c])), None)
        if k is None:
            report.results[witness.name] = result_type(witness.name, "sometimes", False)
            continue
        path = [actions[i] for i in graph.path_to(k)]
        report.results[witness.name] = result_type(witness.name, "sometimes", True, witness.check(graph.state(k)),
                                                   [to_step(a) for a in path], path)
    return report


def _check_property(graph, prop, obligations, class_of, fair_bits, enabled, strong_bits, strong_enabled, terminal,
                    actions, result_type):
    has_any = np.array([bool(o) for o in obligations], dtype=bool)
    cut = int(np.count_nonzero(has_any[class_of] & terminal))
    open_in: dict = {}  # obligation key -> the classes where it is open
    for c, o in enumerate(obligations):
        for key in o:
            open_in.setdefault(key, []).append(c)
    best = None  # (length, stem, key rank, start, cycle edges, key)
    label = np.empty(graph.states, dtype=np.int64)
    work = np.empty((5, graph.states), dtype=np.int64)
    for rank, key in enumerate(sorted(open_in)):
        open_class = np.zeros(len(obligations), dtype=bool)
        open_class[open_in[key]] = True
        member = open_class[class_of]
        count = refined_components(graph.indptr, graph.targets, member, strong_bits, strong_enabled, label, work)
        if not count:
            continue
        fair, anywhere = fair_components(graph.indptr, graph.targets, fair_bits, enabled, label, count)
        if not fair.any():
            continue
        in_fair = np.flatnonzero((label >= 0) & fair[np.maximum(label, 0)])  # ascending: by distance, then number
        for start in in_fair.tolist():
            stem = int(graph.distance[start])
            if best is not None and stem > best[0]:
                break
            limit = best[0] - stem if best is not None else np.iinfo(np.int64).max
            cycle = shortest_fair_cycle(graph.indptr, graph.targets, fair_bits, enabled, strong_bits, strong_enabled,
                                        label, start, int(anywhere[label[start]]), limit)
            if not len(cycle):
                if best is None:  # cannot happen in a fair component; be loud if it does
                    raise RuntimeError(f"{prop.name}: no fair cycle through a fair component")
                continue
            candidate = (stem + len(cycle), stem, rank, start)
            if best is None or candidate < best[:4]:
                best = (*candidate, cycle, key)
    if best is None:
        return result_type(prop.name, "eventually", False, cut=cut)
    _, stem_length, _, start, cycle, key = best
    path = [actions[i] for i in graph.path_to(start)] + [actions[int(graph.action_ids[e])] for e in cycle]
    # The sentence of the cycle's own states (the obligation's key is constant along it).
    finding = prop.obligations(graph.state(start))[key] + ", and stays so forever along a fair cycle"
    return result_type(prop.name, "eventually", True, finding, [to_step(a) for a in path], path,
                       loop=stem_length + 1, cut=cut)
