"""One node process: started in its own process group, in its own data directory.

The node's current directory is its data directory, also given as HWM_DATA_DIR (with HWM_NODE_ID,
and HWM_CLOCK: `virtual` or `wall`, for a node that follows hwm's clock); the directory outlives a
SIGKILL and the restart that follows. Nothing of this reaches the node's stdin: its `init` is
Maelstrom's.
stdout lines go to one queue shared by the cluster (a reader thread per process); stderr is the
node's log, appended to `<data dir>/../<node>.log`. Every signal goes to the whole process group,
so a node started through a shell script or `go run` is stopped whole.
"""

from __future__ import annotations

import atexit
import os
import queue
import re
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from hwm.bridge.maelstrom.protocol import MAX_LINE_BYTES

# A frame of a stack trace: Ruby's "from FILE:LINE:in ...", Java's and JavaScript's "at ...", and
# Java's "... 4 more".
STACK_FRAME = re.compile(r"^\s+(from |at |\.\.\. \d+ more)")
STACK_FRAMES_LOOKED_AT = 200  # how far up a log's tail the message of its trace is looked for

EOF_LINE = None  # what a reader thread queues when the node's stdout closes
_STARTED: "set[NodeProcess]" = set()  # every node process not yet killed, for kill_all


def kill_all() -> None:
    """SIGKILL every node process group still running (Ctrl-C, an exception, interpreter exit)."""
    for proc in list(_STARTED):
        proc.kill()


atexit.register(kill_all)


def _group_running(pgid: int) -> bool:
    """Whether a process of group `pgid` exists that is not a zombie (Linux /proc; elsewhere: no)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return False
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


@contextmanager
def _ctrl_c_held():
    """Hold a Ctrl-C (or the SIGTERM of a cancelled CI job) that comes while a node starts until the
    start is recorded in _STARTED: raised between the fork and the record, it would leave a process
    group that kill_all never kills."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list = []
    previous = {sig: signal.signal(sig, lambda signum, frame: held.append((signum, frame)))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for signum, frame in held[:1]:
            if callable(previous[signum]):
                previous[signum](signum, frame)
            else:  # SIG_DFL or SIG_IGN: what it would have done, now that the start is recorded
                signal.raise_signal(signum)


class NodeProcess:
    def __init__(self, node: str, command: list[str], data_dir: Path, out: "queue.Queue"):
        self.node, self.command, self.data_dir, self.out = node, list(command), Path(data_dir), out
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.data_dir.parent / f"{node}.log"
        self.proc: subprocess.Popen | None = None
        self.incarnation = 0  # bumped by every start: lines of a killed incarnation are stale
        self.paused = False

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, clock: str = "wall") -> None:
        self.incarnation += 1
        env = dict(os.environ, HWM_DATA_DIR=str(self.data_dir.resolve()), HWM_NODE_ID=self.node, HWM_CLOCK=clock)
        with open(self.log_path, "ab") as log, _ctrl_c_held():
            try:
                self.proc = subprocess.Popen(self.command, cwd=self.data_dir, env=env, stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=log, start_new_session=True)
            except OSError as e:
                from hwm.bridge.maelstrom.protocol import NodeProtocolError
                raise NodeProtocolError(self.node, f"could not start {' '.join(self.command)!r}: {e.strerror}")
            self.paused = False
            _STARTED.add(self)
        threading.Thread(target=self._read, args=(self.proc, self.incarnation), daemon=True,
                         name=f"hwm-{self.node}-stdout").start()

    def _read(self, proc: subprocess.Popen, incarnation: int) -> None:
        stream = proc.stdout
        while True:
            try:
                line = stream.readline(MAX_LINE_BYTES + 1)
            except (ValueError, OSError):  # `kill` closed the pipe under this read: the node is gone
                line = b""
            if not line:
                self.out.put((self.node, incarnation, EOF_LINE))
                return
            self.out.put((self.node, incarnation, line))

    def write(self, line: str) -> bool:
        """Send one line; False when the node is gone (a dead node's pipe swallows nothing)."""
        if not self.alive:
            return False
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def signal_group(self, sig: int) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def kill(self) -> None:
        """SIGKILL the node's whole process group and reap it; its data directory stays."""
        if self.proc is None:
            _STARTED.discard(self)
            return
        self.signal_group(signal.SIGKILL)
        if self.paused:
            self.signal_group(signal.SIGCONT)  # a stopped process dies of SIGKILL only once continued
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        # SIGKILL is delivered asynchronously: wait (briefly) until no member of the group still runs,
        # so that "the run is over" means its processes are gone, children of the node included.
        deadline = time.monotonic() + 5
        while _group_running(self.proc.pid) and time.monotonic() < deadline:
            self.signal_group(signal.SIGKILL)
            time.sleep(0.005)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:  # None for a process whose output goes to a file (bridge/servers)
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        self.paused = False
        _STARTED.discard(self)  # last: a Ctrl-C during the kill leaves it to kill_all

    def pause(self) -> None:
        if self.alive and not self.paused:
            self.signal_group(signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        if self.paused:
            self.signal_group(signal.SIGCONT)
            self.paused = False

    def exit_description(self) -> str:
        code = self.proc.poll() if self.proc else None
        if code is None:
            return "is still running"
        if code < 0:
            return f"was killed by signal {signal.Signals(-code).name}"
        return f"exited with status {code}"

    def log_tail(self, lines: int = 5) -> str:
        """The log's last `lines` lines; where they begin inside a stack trace printed message first
        (Ruby's, Java's, JavaScript's: Python prints its message last), the line above its frames that
        says what went wrong too."""
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        start = max(0, len(text) - lines)
        tail = text[start:]
        head = start
        while head > 0 and start - head < STACK_FRAMES_LOOKED_AT and tail and STACK_FRAME.match(text[head]):
            head -= 1
        if head < start and not STACK_FRAME.match(text[head]):
            tail = [text[head], *(["..."] if head < start - 1 else []), *tail]
        return "\n".join(f"    {t}" for t in tail)
