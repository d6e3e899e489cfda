"""The adapter contract: what hwm needs to know to run a real server, unchanged, as a cluster.

An adapter (`Server`) says, for member i of N (`Member`: its name n<i>, its own loopback address,
its ports and its data directory):

- `command(member, members)`: the argument list that starts it in the foreground, writing its
  state under `member.data_dir` and listening on `member.address` only; the same command restarts
  it on the same data directory after a SIGKILL;
- `client(member)`: a client of that member alone (`Client`), for the log workload's operations and
  an optional status probe;
- `binary` and `package`: the program that must be on PATH and the Debian package that installs it,
  so that a missing one is named in one line.

hwm does the rest the same way for every server (`lifecycle.py`): the processes, their own process
groups and data directories, the wait until the cluster serves, the faults and the cleanup.

Two workloads. The log workload is an append-only log: `append(value)` puts `value` at the next free offset
(1, 2, 3, ...), never over an existing one, and answers that offset; `read(offset)` answers the
value stored there (None when there is none yet). A read is linearizable by default; with
`serializable` it may be served from the member's own, possibly stale, copy. A client raises
`Definite` for an error that says the operation did not take effect, and `Indefinite` for one after
which it may or may not have (a timeout, a connection closed mid-request): Maelstrom's `fail` and
`info`. The lin-kv workload (Maelstrom's) is a register per integer key: `get`, `put`, `cas`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


class ServerError(Exception):
    """A server that cannot be run: a missing binary, a port in use, a cluster that does not serve."""


class Definite(Exception):
    """The operation did not take effect."""


class Indefinite(Exception):
    """The operation may or may not have taken effect."""


@dataclass(frozen=True)
class Member:
    name: str  # n1, n2, ...: the name a schedule uses
    index: int  # 1-based
    address: str  # its own loopback address, 127.0.x.i
    ports: dict[str, int]  # the adapter's port names -> numbers, all on `address`
    data_dir: Path


@dataclass
class Status:
    """What a member says of itself: the fields hwm's status checks read (None where not said)."""
    term: int | None = None
    leader: bool | None = None  # whether it believes it leads `term`
    committed_index: int | None = None  # its raft commit index (the high-water mark)
    applied_index: int | None = None
    extra: dict = field(default_factory=dict)


class Client:
    """A client of one member. Every call is bounded by `timeout` seconds."""

    def append(self, value: int) -> int:
        raise NotImplementedError

    def read(self, offset: int, serializable: bool = False) -> int | None:
        raise NotImplementedError

    # The lin-kv workload: one register per integer key.
    def get(self, key: int, serializable: bool = False) -> int | None:
        """The key's value (linearizable unless `serializable`); None when it was never written."""
        raise NotImplementedError

    def put(self, key: int, value: int) -> None:
        raise NotImplementedError

    def cas(self, key: int, source: int, target: int, create: bool = False) -> bool:
        """Write `target` if the key holds `source` (or, with `create`, holds nothing); whether it did."""
        raise NotImplementedError

    def status(self) -> Status | None:
        """The member's own status, or None when the server offers no probe."""
        return None

    def serving(self) -> bool:
        """Whether the member answers a linearizable read now (the cluster has a leader it knows)."""
        try:
            self.read(0)
            return True
        except (Definite, Indefinite):
            return False


class Server:
    name = ""
    binary = ""  # on PATH
    package = ""  # the Debian package that installs `binary`
    port_names: tuple[str, ...] = ()
    default_ports: dict[str, int] = {}
    start_seconds = 30.0  # the longest wait until a fresh cluster serves

    def missing(self) -> str | None:
        """What is not installed, in one line naming the Debian package; None when all is there."""
        import shutil
        if shutil.which(self.binary) is None:
            return (f"{self.binary} not found on PATH: install the Debian package {self.package} "
                    f"(apt-get install {self.package})")
        return None

    def command(self, member: Member, members: list[Member]) -> list[str]:
        raise NotImplementedError

    def client(self, member: Member, timeout: float = 2.0) -> Client:
        raise NotImplementedError

    def prepare(self, member: Member, members: list[Member]) -> None:
        """Write what the member needs in its data directory before its first start (default: nothing)."""
