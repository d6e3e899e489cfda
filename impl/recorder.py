"""Recording a server's run as `hwm-events/1` events (properties/events.py), for `hwm validate`.

Each server records its own part of the run, one file per server: a header naming all the
servers and this part's server, then one event per atomic change of its state, written after
the change is persisted and before the messages that announce it are sent (so a peer never
logs a consequence before its cause), with the wall-clock time by which `hwm validate` merges
the parts of one run.

What is recorded, in the model's terms: the generation only where the server knows it as a
leader's (its own, or the leader it accepted entries from); a generation it took as a
candidate or voter is recorded as changed to an unlogged value (null), since the model's
atomic election has no candidates. A client read and an acknowledged write are recorded
after the state change that made them possible. A server that starts on an existing part
was stopped or killed: it records the crash, then its restart with what it recovered.
Writes go through impl/fs.py; nothing is fsynced (kill -9 keeps what `write` returned; a
power failure may lose the tail of a recording, not of the log).
"""

from __future__ import annotations

import json
import os
import time

from hwm.impl.fs import OS_FILESYSTEM, FileSystem, make_directories
from hwm.properties.events import FORMAT, log_edit

__all__ = ["Recorder", "RunRecorder", "ServerChanges"]


class ServerChanges:
    """The last recorded state of one server, and the event fields of what changed since."""

    def __init__(self) -> None:
        self.generation, self.role, self.log, self.hwm = 0, "follower", (), 0
        self.named = True  # whether the validator knows this server's current generation
        self.restarting = False

    def changes(self, generation: int, role: str, log: tuple[int, ...], hwm: int, knows_leader: bool) -> dict:
        event: dict = {}
        if self.restarting:
            event["restart"] = True
        # A generation is named where the server knows it as a leader's; else it changed to one the
        # model does not name (a candidate's, a voter's), recorded as null until it is known.
        named = knows_leader or role == "leader"
        if generation != self.generation:
            event["generation"] = generation if named else None
            self.generation, self.named = generation, named
        elif named and not self.named:
            event["generation"] = generation
            self.named = True
        if role != self.role:
            event["role"] = role
            self.role = role
        if log != self.log:
            edit = log_edit(self.log, log)
            event.update({k: [list(e) for e in v] if k == "append" else v for k, v in edit.items()})
            self.log = log
        if hwm != self.hwm or self.restarting:
            event["hwm"] = hwm
            self.hwm = hwm
        self.restarting = False
        return event

    def crashed(self) -> None:
        self.role = "follower"
        self.restarting = True

    def replay(self, event: dict) -> None:
        """Follow one recorded event (a restarted server reads its own part back)."""
        if "generation" in event:
            # null: changed to a generation the part does not name; a restart records it anew.
            self.generation = event["generation"] if isinstance(event["generation"], int) else -1
            self.named = isinstance(event["generation"], int)
        if event.get("role") in ("leader", "follower"):
            self.role = event["role"]
        if "log" in event:
            self.log = tuple(g for _, g in event["log"])
        if "truncate_from" in event:
            self.log = self.log[: event["truncate_from"] - 1]
        if "append" in event:
            first = event["append"][0][0]
            self.log = self.log[: first - 1] + tuple(g for _, g in event["append"])
        if "hwm" in event:
            self.hwm = event["hwm"]
        if event.get("crash"):
            self.role = "follower"


class Recorder:
    """One server's recording. `state(...)` after each persisted change; `read`/`ack` for clients."""

    def __init__(self, path: str, server_id: str, servers: list[str], protocol: str,
                 fs: FileSystem = OS_FILESYSTEM, clock=time.time):
        self.path, self.server_id, self.fs, self.clock = path, server_id, fs, clock
        directory = os.path.dirname(os.path.abspath(path))
        make_directories(fs, directory)
        existed = os.path.exists(path) and fs.getsize(path) > 0
        self.last = ServerChanges()
        self._buffered: list[dict] = []
        if existed:
            self._recover(fs.read_file(path))
        self._fd = fs.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if existed:
            self._write({"server": server_id, "crash": True})
            self.last.crashed()
        else:
            header = {"format": FORMAT, "servers": sorted(servers), "protocol": protocol, "part": server_id}
            self._write(header, stamp=False)

    def _recover(self, data: bytes) -> None:
        for line in data.decode("utf-8", errors="replace").splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line (a crash in mid-write): ignored
            if isinstance(event, dict) and "format" not in event:
                self.last.replay(event)

    def _write(self, event: dict, stamp: bool = True) -> None:
        if stamp:
            event["time"] = self.clock()
        self.fs.write(self._fd, (json.dumps(event) + "\n").encode())

    def state(self, generation: int, role: str, log: tuple[int, ...], hwm: int, knows_leader: bool) -> None:
        """Record what changed since the last call (role: "leader" or "follower"; a candidate is a
        follower), then the client reads and acknowledgements that waited for it."""
        event = self.last.changes(generation, role, log, hwm, knows_leader)
        if event:
            self._write({"server": self.server_id, **event})
        for client_event in self._buffered:
            self._write(client_event)
        self._buffered.clear()

    def read(self, index: int, generation: int) -> None:
        """A client read entry (index, generation) here; written after the state that allowed it."""
        self._buffered.append({"server": self.server_id, "read": [[index, generation]]})

    def ack(self, index: int, generation: int) -> None:
        """This server acknowledged a client's write of (index, generation)."""
        self._buffered.append({"server": self.server_id, "ack": [[index, generation]]})

    @property
    def waiting(self) -> bool:
        """Client reads or acknowledgements not yet written."""
        return bool(self._buffered)

    def close(self) -> None:
        if self._fd is not None:
            self.fs.close(self._fd)
            self._fd = None


class RunRecorder:
    """A whole cluster's run in one file, from one process that sees every server (the simulated
    cluster): `state(server, ...)` after each step, `crash`, `read`."""

    def __init__(self, path: str, servers: list[str], protocol: str, fs: FileSystem = OS_FILESYSTEM):
        self.fs = fs
        make_directories(fs, os.path.dirname(os.path.abspath(path)))
        self._fd = fs.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.servers = {name: ServerChanges() for name in servers}
        self._write({"format": FORMAT, "servers": list(servers), "protocol": protocol})

    def _write(self, event: dict) -> None:
        self.fs.write(self._fd, (json.dumps(event) + "\n").encode())

    def state(self, server: str, generation: int, role: str, log: tuple[int, ...], hwm: int,
              knows_leader: bool) -> None:
        event = self.servers[server].changes(generation, role, log, hwm, knows_leader)
        if event:
            self._write({"server": server, **event})

    def crash(self, server: str) -> None:
        self._write({"server": server, "crash": True})
        self.servers[server].crashed()

    def read(self, server: str, index: int, generation: int) -> None:
        self._write({"server": server, "read": [[index, generation]]})

    def close(self) -> None:
        if self._fd is not None:
            self.fs.close(self._fd)
            self._fd = None
