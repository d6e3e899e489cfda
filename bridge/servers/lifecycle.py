"""A cluster of real server processes: start, wait until it serves, faults, and cleanup on every path.

Member i (n<i>) listens on its own loopback address `<prefix>.<i>` (127.0.1.1, 127.0.1.2, ... by
default) on the adapter's ports, in its own process group, with its data directory under the run's
folder (`hwm-servers-<pid>-*` in the temporary directory, its log beside it as n<i>.log). Nothing
starts when the binary is missing (ServerError naming the Debian package) or a port is in use.

Faults on the processes themselves: `kill` (SIGKILL to the group) and `restart` on the same data
directory, `pause` / `resume` (SIGSTOP / SIGCONT), `partition` / `heal` (netfilter.py), and
`rollback`: the data directory replaced by the copy `keep_copy` took (an operator restoring an old
backup; a planted fault, never a finding of the server's), and, where the cluster was started with
`power`, `power_fail`: SIGKILL, then every write and directory entry the member did not fsync
dropped (each data directory is then a mount of powerfs.py's filesystem, its bytes in `.disk/n<i>`
beside it).

`close` kills every process, unmounts every data directory, removes the nftables table and the
run's folder; it runs on every way
out (a `with` block, and Ctrl-C and SIGTERM through the CLI's handler; process.py's `kill_all` at
exit too). A run killed with SIGKILL leaves them: the next run's `remove_stale_runs` kills what is
left of it, unmounts what it mounted, removes its folder and its table, and says so.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from hwm.bridge.maelstrom.process import _STARTED, NodeProcess, _ctrl_c_held, _group_running
from hwm.bridge.servers import netfilter, powerfs
from hwm.bridge.servers.adapter import Member, Server, ServerError

RUN_PREFIX = "hwm-servers-"
OWNER_FILE = "owner.json"
_OPEN: "set[ServerCluster]" = set()  # every cluster started and not yet closed, for close_all


def close_all() -> None:
    """Close every cluster still open (Ctrl-C, SIGTERM, an exception anywhere, interpreter exit)."""
    for cluster in list(_OPEN):
        cluster.close()


atexit.register(close_all)


def _start_time(pid: int) -> str | None:
    """The kernel's start time of `pid` (with the pid, it names one process, whatever reuses the pid)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _groups_naming(folder: Path, known: set[int]) -> list[int]:
    """The process groups not in `known` whose leader's command line names `folder`."""
    groups = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in known and str(folder) in _cmdline(int(entry)):
            try:
                if os.getpgid(int(entry)) == int(entry):
                    groups.append(int(entry))
            except ProcessLookupError:
                pass
    return groups


def remove_stale_runs() -> list[str]:
    """Clean up after runs killed with SIGKILL: their processes, folders and nftables tables. What was
    removed, one line each."""
    notes = []
    for folder in sorted(Path(tempfile.gettempdir()).glob(f"{RUN_PREFIX}*")):
        try:
            owner = json.loads((folder / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue
        pid = owner.get("pid")
        if not isinstance(pid, int) or (_start_time(pid) is not None and _start_time(pid) == owner.get("started")):
            continue  # its run is still going
        killed, filesystems = [], []
        # A member restarted just before its run was killed may be missing from the owner file (started,
        # not yet recorded): any process group whose leader names the run's folder is the run's too.
        recorded = set(owner.get("process_groups", [])) | set(owner.get("filesystems", []))
        found = {"process_groups": [*owner.get("process_groups", []), *_groups_naming(folder, recorded)],
                 "filesystems": owner.get("filesystems", [])}
        for groups, kind in ((killed, "process_groups"), (filesystems, "filesystems")):  # servers first
            for pgid in found[kind]:
                if str(folder) in _cmdline(pgid):  # still that run's, not a process that took the pid since
                    try:
                        os.killpg(pgid, 9)
                        groups.append(pgid)
                    except ProcessLookupError:
                        pass
        deadline = time.monotonic() + 5  # gone before this run probes the ports they held
        while any(_group_running(g) for g in killed + filesystems) and time.monotonic() < deadline:
            time.sleep(0.01)
        unmounted = [point for point in powerfs.mounts_under(folder) if powerfs.unmount(point)]
        shutil.rmtree(folder, ignore_errors=True)
        told = ([f"killed {len(killed)} of its server processes"] if killed else []) + \
               ([f"unmounted {', '.join(unmounted)}"] if unmounted else [])
        notes.append(f"removed {folder} left by hwm run {pid}, which is gone"
                     + (f" ({'; '.join(told)})" if told else ""))
    notes += [f"removed nftables table {name} left by a run that is gone" for name in netfilter.remove_stale_tables()]
    return notes


class ServerProcess(NodeProcess):
    """A server member: process.py's process group, kill and pause, with its output in its log and
    run under its own uid where partitions need it."""

    def __init__(self, member: Member, command: list[str], uid: int | None):
        super().__init__(member.name, command, member.data_dir, queue.Queue())
        self.uid = uid
        if uid is not None:
            os.chown(self.data_dir, uid, uid)

    def start(self, clock: str = "wall") -> None:
        self.incarnation += 1
        with open(self.log_path, "ab") as log, _ctrl_c_held():
            try:
                self.proc = subprocess.Popen(self.command, cwd=self.data_dir, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=log, start_new_session=True, user=self.uid, group=self.uid,
                                             extra_groups=[] if self.uid is not None else None)
            except OSError as e:
                raise ServerError(f"{self.node}: could not start {' '.join(self.command)!r}: {e.strerror}")
            self.paused = False
            _STARTED.add(self)


class ServerCluster:
    def __init__(self, server: Server, nodes: int = 3, prefix: str = "127.0.1", partitions: bool = True,
                 ports: dict[str, int] | None = None, power: bool = False, filesystem: str = "posix"):
        self.server, self.prefix = server, prefix
        self.root: Path | None = None
        self.ports = dict(server.default_ports, **(ports or {}))
        self.members = [Member(f"n{i}", i, f"{prefix}.{i}", self.ports, Path()) for i in range(1, nodes + 1)]
        self.procs: dict[str, ServerProcess] = {}
        self.partitions = netfilter.Partitions(self.members) if partitions else None
        self.notes: list[str] = []  # what start-up cleaned up after earlier runs
        self.copies: dict[str, Path] = {}
        self.power, self.filesystem = power, filesystem  # filesystem: powerfs.py's FILESYSTEMS
        self.mounts: dict[str, powerfs.PowerMount] = {}  # with power: each member's data directory

    # ---- before anything starts ------------------------------------------------------------
    def check(self) -> None:
        """ServerError, before anything starts, for a missing binary, a port in use, no nft."""
        missing = self.server.missing()
        if missing is not None:
            raise ServerError(missing)
        if self.partitions is not None and netfilter.available() is not None:
            raise ServerError(netfilter.available())
        if self.power and powerfs.unavailable() is not None:
            raise ServerError(powerfs.unavailable())
        for member in self.members:
            for name, port in member.ports.items():
                probe = socket.socket()
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no conflict
                try:
                    probe.bind((member.address, port))
                except OSError as e:
                    raise ServerError(f"{member.address}:{port} ({member.name}'s {name} port) is in use: "
                                      f"{e.strerror}; another run may hold it (give another loopback prefix)")
                finally:
                    probe.close()

    # ---- life cycle --------------------------------------------------------------------------
    def start(self) -> None:
        self.notes = remove_stale_runs()
        self.check()
        _OPEN.add(self)  # from here on, something may be left to remove
        self.root = Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{os.getpid()}-"))
        self.root.chmod(0o755)  # members run under their own uids
        self._record_owner()
        self.members = [Member(m.name, m.index, m.address, m.ports, self.root / m.name) for m in self.members]
        if self.partitions is not None:
            self.partitions.members = self.members
            self.partitions.create()  # before any connection: each is marked at its first packet
        if self.power:
            for member in self.members:
                mount = powerfs.PowerMount(self.root / ".disk" / member.name, member.data_dir,
                                           self.root / f"{member.name}.fs.sock", self.root / f"{member.name}.fs.log",
                                           self.filesystem)
                self.mounts[member.name] = mount
                try:
                    try:
                        mount.start()
                    except OSError as e:
                        raise ServerError(str(e)) from None
                finally:
                    self._record_owner()
        for member in self.members:
            uid = netfilter.member_uid(member.index) if self.partitions is not None else None
            self.procs[member.name] = ServerProcess(member, self.server.command(member, self.members), uid)
            self.server.prepare(member, self.members)
            if uid is not None:  # what prepare wrote is the member's own
                for path in member.data_dir.iterdir():
                    os.chown(path, uid, uid)
            if member.name in self.mounts:  # the member's configuration is on disk before it starts
                self.mounts[member.name].sync()
        for member in self.members:
            self._start(member.name)
        self.wait_serving(self.server.start_seconds)
        for mount in self.mounts.values():
            # What start-up wrote counts as on disk, as a machine's own writeback would have put it
            # there: without it, stock ZooKeeper's first snapshot (written without fsync) is lost,
            # and a member with a log and no snapshot refuses to start.
            mount.sync()

    def _start(self, name: str) -> None:
        self.procs[name].start()
        self._record_owner()

    def _record_owner(self) -> None:
        owner = {"pid": os.getpid(), "started": _start_time(os.getpid()),
                 "process_groups": [p.proc.pid for p in self.procs.values() if p.proc is not None],
                 "filesystems": [m.proc.pid for m in self.mounts.values() if m.proc is not None]}
        (self.root / OWNER_FILE).write_text(json.dumps(owner))

    def member(self, name: str) -> Member:
        return next(m for m in self.members if m.name == name)

    def client(self, name: str, timeout: float = 2.0):
        return self.server.client(self.member(name), timeout)

    def log_tail(self, name: str, lines: int = 5) -> str:
        return self.procs[name].log_tail(lines)

    def exit_reason(self, name: str) -> str:
        """Why a member that exited says it did: its log's first panic or fatal line (a Go or Java
        stack trace ends far below it), else the log's last lines."""
        try:
            text = self.procs[name].log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        said = [line.strip() for line in text if line.lower().startswith(("panic", "fatal", "exception"))
                or '"level":"panic"' in line or '"level":"fatal"' in line]
        return said[0][:300] if said else self.log_tail(name, 3)

    def wait_serving(self, seconds: float, names: list[str] | None = None) -> None:
        """Wait until every member named (all by default) answers a linearizable read; ServerError
        naming the first that does not, with its log's tail, after `seconds`."""
        waiting = list(names or [m.name for m in self.members])
        deadline = time.monotonic() + seconds
        while waiting:
            for name in list(waiting):
                proc = self.procs[name]
                if not proc.alive:
                    raise ServerError(f"{self.server.name} member {name} {proc.exit_description()} while starting; "
                                      f"its log ({proc.log_path}) ends:\n{self.log_tail(name)}")
                if self.client(name, timeout=1.0).serving():
                    waiting.remove(name)
            if waiting and time.monotonic() > deadline:
                name = waiting[0]
                raise ServerError(f"{self.server.name} member {name} did not serve within {seconds:g} s; "
                                  f"its log ({self.procs[name].log_path}) ends:\n{self.log_tail(name)}")
            if waiting:
                time.sleep(0.1)

    def close(self) -> None:
        for proc in self.procs.values():
            proc.kill()
        for mount in self.mounts.values():
            mount.unmount()
        if self.partitions is not None:
            self.partitions.remove()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
        _OPEN.discard(self)

    def __enter__(self) -> "ServerCluster":
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- faults ------------------------------------------------------------------------------
    def alive(self, name: str) -> bool:
        return self.procs[name].alive

    def paused(self, name: str) -> bool:
        return self.procs[name].paused

    def kill(self, name: str) -> None:
        self.procs[name].kill()

    def restart(self, name: str) -> None:
        if not self.procs[name].alive:
            self._start(name)

    def power_fail(self, name: str, keep_seed: int | None = None, reorder: bool = False) -> powerfs.Dropped:
        """The member loses power: SIGKILL, then every write and every directory entry it did not
        fsync is dropped (with `keep_seed`, what the disk does not keep of them, with `reorder` in any
        order: powerfs.py); what was. It stays down until `restart`."""
        if not self.power:
            raise ServerError("this cluster was started without power failures (its data directories are not hwm's mounts)")
        self.procs[name].kill()
        return self.mounts[name].lose_power(keep_seed, reorder)

    def pause(self, name: str) -> None:
        self.procs[name].pause()

    def resume(self, name: str) -> None:
        self.procs[name].resume()

    def partition(self, groups: list[list[str]]) -> None:
        if self.partitions is None:
            raise ServerError("this cluster was started without partitions")
        self.partitions.partition(groups)

    def heal(self) -> None:
        if self.partitions is not None:
            self.partitions.heal()

    def keep_copy(self, name: str) -> None:
        """Copy `name`'s data directory as it is now. A running member is paused (SIGSTOP) meanwhile:
        the copy is what a SIGKILL at that moment would leave, a state it must recover from."""
        copy = self.root / "copies" / name
        shutil.rmtree(copy, ignore_errors=True)
        copy.parent.mkdir(exist_ok=True)
        running = self.alive(name) and not self.paused(name)
        if running:
            self.pause(name)
        try:
            subprocess.run(["cp", "-a", str(self.member(name).data_dir), str(copy)], check=True)
        finally:
            if running:
                self.resume(name)
        self.copies[name] = copy

    def rollback(self, name: str) -> bool:
        """Replace the down member's data directory by its kept copy; False when there is none."""
        if name not in self.copies or self.procs[name].alive:
            return False
        data_dir = self.member(name).data_dir
        if name in self.mounts:  # a mount point stays: its contents are replaced, and synced
            for path in data_dir.iterdir():
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
            subprocess.run(["cp", "-a", f"{self.copies[name]}/.", str(data_dir)], check=True)
            self.mounts[name].sync()
            return True
        shutil.rmtree(data_dir)
        subprocess.run(["cp", "-a", str(self.copies[name]), str(data_dir)], check=True)
        return True

