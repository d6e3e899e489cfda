"""Recording the simulated cluster's run as hwm-events/1 (`build_cluster(..., record=FILE)`): after each
action, a crash, then each server's changes (the acting server first, the follower first in a round
trip), then the client reads."""

from __future__ import annotations

from hwm.checker.validate import ROUND_TRIPS
from hwm.impl.recorder import RunRecorder
from hwm.properties.protocol import PRESETS


def _protocol_name(protocol) -> str:
    return next((name for name, preset in PRESETS.items() if preset.protocol == protocol), "custom")


class SimRecording:
    def __init__(self, cluster, path: str):
        self.cluster = cluster
        self.recorder = RunRecorder(path, list(cluster.names), _protocol_name(cluster.protocol))
        self.down: set[str] = set()
        self._states(cluster.names)

    def _states(self, order) -> None:
        for name in order:
            replica = self.cluster.replicas[name]
            if replica is None:
                continue
            snapshot = replica.snapshot()
            self.recorder.state(name, snapshot.generation, snapshot.role, snapshot.log, snapshot.hwm,
                                replica.leader_id is not None)

    def step(self, kind: str, names: list[str], reads) -> None:
        for name in self.cluster.names:
            if self.cluster.replicas[name] is None and name not in self.down:
                self.recorder.crash(name)
                self.down.add(name)
        self.down = {n for n in self.down if self.cluster.replicas[n] is None}
        # The acting server first; in a round trip the follower (a server records its change before the
        # messages that announce it, so the leader's consequence is never recorded before its cause).
        first = list(reversed(names[:2])) if kind in ROUND_TRIPS else names[:1]
        self._states(first + [n for n in self.cluster.names if n not in first])
        for read in reads:
            self.recorder.read(read.server, read.index, read.generation)

    def close(self) -> None:
        self.recorder.close()


def start_recording(cluster, path: str) -> SimRecording:
    return SimRecording(cluster, path)
