"""What hwm sees inside nodes that answer `hwm_state`, and the property catalogue checked on it.

After each input it delivers, hwm asks the node `hwm_state {}`; the node answers
`hwm_state_ok {generation, role, log: [[index, generation], ...], hwm, isr?}` (or error 10, and is
then not asked again). Each answer that differs from the node's previous one is an **observation**,
a plain dict, in the order they happened:

    {"step": 7, "cause": "deliver(n1→n2)", "node": "n2", "alive": true, "generation": 1,
     "role": "follower", "log": [[1, 1], [2, 1]], "hwm": 1, "isr": null}

(a kill is an observation with "alive": false and the node's last known state). That list is the
trace a validator steps against the model. Here every observation also updates the cluster's
snapshot (properties/snapshot.py: node k is server S(k)), and the whole catalogue's `always`
properties are checked on each observed change; a finding names the node (n2, not S2) and the step.
With the log workload, where an index is a log index, a node's answer after it acknowledged
`log_append` must show its high-water mark at or past that index (`AckedAtOrBelowHwm`); so must a
node's answer after a `send`, on the kafka workload, where the node says its offsets are log indexes
(`"kafka_offsets": "log-index"` in `hwm_state_ok`, as hwm's own node does). The answer judged is the
node's next one in the same incarnation: a node killed before it gives none (its HWM only grows until
the kill, and a restarted one shows what its disk kept, 0 where the HWM is volatile). With a preset named
(`--protocol`), validation.py also steps each observation, and each acknowledgement or read, against
the preset's model (`ModelStep`).
"""

from __future__ import annotations

import re

from hwm.bridge.maelstrom.history import Finding
from hwm.properties.catalogue import ALWAYS, violations
from hwm.properties.snapshot import ServerSnapshot, Snapshot

ROLES = ("leader", "follower", "candidate")


class ObservationError(ValueError):
    pass


def parse_state(body: dict) -> dict:
    """The fields of one hwm_state_ok body; ObservationError naming the field that is malformed."""
    out = {}
    for name in ("generation", "hwm"):
        value = body.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ObservationError(f"hwm_state_ok needs a non-negative integer {name!r}, got {value!r}")
        out[name] = value
    if body.get("role") not in ROLES:
        raise ObservationError(f"hwm_state_ok's role must be one of {', '.join(ROLES)}, got {body.get('role')!r}")
    out["role"] = body["role"]
    log = body.get("log")
    if not isinstance(log, list) or any(not (isinstance(e, list) and len(e) == 2) for e in log) or \
            [e[0] for e in log] != list(range(1, len(log) + 1)):
        raise ObservationError("hwm_state_ok's log must be [[index, generation], ...] with indexes 1, 2, 3, ... in order")
    out["log"] = [[int(i), int(g)] for i, g in log]
    isr = body.get("isr")
    out["isr"] = list(isr) if isinstance(isr, list) else None
    return out


def _node_names(text: str) -> str:
    # The catalogue names servers S1..Sn; a node run names them n1..nN.
    return re.sub(r"\bS(\d+)\b", r"n\1", text)


def describe_observation(seen: dict) -> str:
    """`n2 follower  g1 log=[1,1] hwm=1` (log by generation, as in hwm's step tables), or `n2 down`."""
    if not seen["alive"]:
        return f"{seen['node']} down"
    log = ",".join(str(g) for _, g in seen["log"])
    isr = f" isr={','.join(seen['isr'])}" if seen.get("isr") else ""
    return f"{seen['node']} {seen['role']:<9} g{seen['generation']} log=[{log}] hwm={seen['hwm']}{isr}"


class Observer:
    def __init__(self, node_ids: list[str], always=ALWAYS):
        self.node_ids = node_ids
        self.always = always  # the `always` properties checked on each change (a variant's: ModelSteps.always)
        self.observations: list[dict] = []
        self.latest: dict[str, dict] = {}
        self.findings: list[Finding] = []
        self.reads: set[tuple[int, int]] = set()  # (index, generation) clients were served
        self.snapshot: Snapshot | None = None
        self.reported: set[str] = set()  # one finding per property is enough to act on
        self.acknowledged: dict[str, list[tuple[int, str]]] = {}  # node -> (index, op) awaiting its state
        # With --protocol: each change stepped against the preset's model (validation.py's ModelSteps).
        self.model_steps = None
        # node -> ("ack"|"read", index, the operation's type) awaiting its state
        self.client_events: dict[str, list[tuple[str, int, str]]] = {}

    def _snapshot(self) -> Snapshot | None:
        if len(self.latest) != len(self.node_ids):
            return None  # the catalogue needs every server's state
        servers = []
        for node in self.node_ids:
            seen = self.latest[node]
            servers.append(ServerSnapshot(seen["generation"], seen["role"], tuple(g for _, g in seen["log"]),
                                          seen["hwm"], seen["alive"]))
        return Snapshot(tuple(servers), frozenset(self.reads))

    def observe(self, node: str, step, cause: str, state: dict | None, alive: bool = True) -> None:
        """Record `node`'s answer (or, with state None, its death) and check the catalogue on the change."""
        if state is None:
            # Killed before its next answer: an acknowledgement it gave is judged on no answer of a
            # later incarnation, whose HWM starts again from what its disk kept (a volatile one from 0).
            self.acknowledged.pop(node, None)
        self._observe_state(node, step, cause, state, alive)
        waiting = self.client_events.pop(node, [])
        if state is not None and self.model_steps is not None:
            for kind, index, op_type in waiting:  # judged on the state the answer shows, right after them
                self._stepped(self.model_steps.client(node, kind, index, self.latest[node], step, cause, op_type))

    def finish(self) -> None:
        """The run is over: the model's steps must all have been shown (ModelSteps.finish)."""
        if self.model_steps is not None:
            self._stepped(self.model_steps.finish())

    def _stepped(self, finding) -> None:
        if finding is not None:
            self.findings.append(finding)

    def _observe_state(self, node: str, step, cause: str, state: dict | None, alive: bool) -> None:
        previous = self.latest.get(node)
        if state is not None:
            self._check_acknowledged(node, state, step)
        if state is None:
            if previous is None or not previous["alive"]:
                return
            state = {k: previous[k] for k in ("generation", "role", "log", "hwm", "isr")}
        current = dict(state, alive=alive)
        if previous is not None and all(previous[k] == current[k] for k in current):
            return
        self.latest[node] = current
        self.observations.append(dict(current, step=step, cause=cause, node=node))
        self._check(step, f"{cause}, seen at {node}")
        if self.model_steps is not None:
            self._stepped(self.model_steps.observed(self.observations[-1]))

    def acknowledge(self, node: str, index: int, op: str, op_type: str = "log_append") -> None:
        """`node` acknowledged a log_append (or a send whose offset is an index) at `index`; its next
        answer must show a HWM at or past it."""
        self.acknowledged.setdefault(node, []).append((index, op))
        self.client_events.setdefault(node, []).append(("ack", index, op_type))

    def _check_acknowledged(self, node: str, state: dict, step) -> None:
        for index, op in self.acknowledged.pop(node, []):
            if state["hwm"] < index and "AckedAtOrBelowHwm" not in self.reported:
                self.reported.add("AckedAtOrBelowHwm")
                self.findings.append(Finding("AckedAtOrBelowHwm", f"{op} was acknowledged at index {index}, but "
                                                                  f"{node}'s high-water mark was {state['hwm']}", step))

    def read_served(self, node: str, index: int, step, cause: str, op_type: str = "log_read") -> None:
        """A client read `index` from `node` (a log_read, or a poll's message whose offset is an index):
        the entry, as that node last showed its log, is read."""
        self.client_events.setdefault(node, []).append(("read", index, op_type))
        seen = self.latest.get(node)
        if seen and 1 <= index <= len(seen["log"]):
            self.reads.add((index, seen["log"][index - 1][1]))
            self._check(step, cause)

    def _check(self, step, cause: str) -> None:
        after = self._snapshot()
        if after is None:
            return
        before, self.snapshot = self.snapshot, after
        for name, finding in violations(before, after, self.always).items():
            if name not in self.reported:
                self.reported.add(name)
                self.findings.append(Finding(name, f"{_node_names(finding)} (observed after {cause})", step))
