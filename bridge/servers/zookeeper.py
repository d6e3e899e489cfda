"""ZooKeeper 3.8 (Debian's zookeeper) as an ensemble of real members, with kazoo as the client.

Member i runs QuorumPeerMain from Debian's jar with a zoo.cfg that `prepare` writes in its data
directory beside its myid: Debian's example settings (tickTime 2000, initLimit 10, syncLimit 5),
the member's own address for clients (2181) and for the quorum (2888, 3888), the admin server off
and the `srvr` four-letter word allowed (the status probe). The log workload appends with a
sequential znode under /log (ZooKeeper numbers the children of a node itself: offset k is child
k - 1) and reads one; a linearizable read is a sync, then the read (ZooKeeper's own recipe), a
serializable one the member's copy. lin-kv's key k is /kv/<k>; a cas syncs, reads the value and
its version and sets only that version (without the sync a stale copy would refuse a cas the
register allows). A client is opened for each operation (a session of its own): one that cannot
connect sent nothing (definite); a connection lost after the request, or a timeout, is
indeterminate.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket

from hwm.bridge.servers.adapter import Client, Definite, Indefinite, Member, Server, ServerError, Status

JAR = "/usr/share/java/zookeeper.jar"
CONF = "/etc/zookeeper/conf"
# A logger binding, where one is installed, so that a member's log says why it did not start.
LOGGERS = ("/usr/share/java/slf4j-simple.jar", "/usr/share/java/maven3-slf4j-provider.jar")
SEQUENCE_PREFIX = "/log/e-"


def _kazoo():
    try:
        import kazoo.client
        import kazoo.exceptions
        # Its reconnection warnings are the run's business, told in the history, not on stderr.
        logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    except ImportError:
        raise ServerError("the zookeeper adapter needs the kazoo client: pip install 'hwm[servers]'") from None
    return kazoo.client, kazoo.exceptions


class ZooKeeperClient(Client):
    def __init__(self, member: Member, timeout: float = 2.0):
        self.member, self.timeout = member, timeout
        self.hosts = f"{member.address}:{member.ports['client']}"

    def _session(self, writes: bool, action):
        client_module, errors = _kazoo()
        zk = client_module.KazooClient(hosts=self.hosts, timeout=max(self.timeout, 1.0), connection_retry=None,
                                       command_retry=None)
        try:
            try:
                zk.start(timeout=self.timeout)
            except Exception as e:  # kazoo's timeout and socket errors alike: no request was sent
                raise Definite(f"{self.member.name}: no session ({type(e).__name__})") from None
            try:
                return action(zk, errors)
            except (errors.ConnectionLoss, errors.OperationTimeoutError, errors.SessionExpiredError) as e:
                raise (Indefinite if writes else Definite)(f"{self.member.name}: {type(e).__name__}") from None
            except errors.KazooException as e:
                raise Definite(f"{self.member.name}: {type(e).__name__}") from None
        finally:
            try:
                zk.stop()
                zk.close()
            except Exception:
                pass

    @staticmethod
    def _parent(zk, errors, path: str) -> None:
        try:
            zk.create(path)
        except errors.NodeExistsError:
            pass

    def append(self, value: int) -> int:
        def act(zk, errors):
            self._parent(zk, errors, "/log")
            path = zk.create(SEQUENCE_PREFIX, str(value).encode(), sequence=True)
            return int(path[len(SEQUENCE_PREFIX):]) + 1
        return self._session(True, act)

    def _value(self, path: str, serializable: bool) -> int | None:
        """The value at `path` (None: no such node), after a sync unless `serializable`."""
        def act(zk, errors):
            if not serializable:
                zk.sync("/")
            try:
                data, _ = zk.get(path)
            except errors.NoNodeError:
                return None
            return int(data.decode())
        return self._session(False, act)

    def read(self, offset: int, serializable: bool = False) -> int | None:
        return None if offset < 1 else self._value(f"{SEQUENCE_PREFIX}{offset - 1:010d}", serializable)

    def get(self, key: int, serializable: bool = False) -> int | None:
        return self._value(f"/kv/{key}", serializable)

    def put(self, key: int, value: int) -> None:
        def act(zk, errors):
            self._parent(zk, errors, "/kv")
            try:
                zk.set(f"/kv/{key}", str(value).encode())
            except errors.NoNodeError:
                try:
                    zk.create(f"/kv/{key}", str(value).encode())
                except errors.NodeExistsError:  # created meanwhile: write over it
                    zk.set(f"/kv/{key}", str(value).encode())
        self._session(True, act)

    def cas(self, key: int, source: int, target: int, create: bool = False) -> bool:
        def act(zk, errors):
            self._parent(zk, errors, "/kv")
            path = f"/kv/{key}"
            zk.sync("/")  # else a follower's stale copy would refuse a cas the register allows
            try:
                data, stat = zk.get(path)
            except errors.NoNodeError:
                if not create:
                    return False
                try:
                    zk.create(path, str(target).encode())
                    return True
                except errors.NodeExistsError:
                    data, stat = zk.get(path)
            if int(data.decode()) != source:
                return False
            try:
                zk.set(path, str(target).encode(), version=stat.version)
                return True
            except errors.BadVersionError:  # written since the read: it held another value then
                return False
        return self._session(True, act)

    def serving(self) -> bool:
        try:
            self.get(0)  # a session, a sync and a read: the ensemble has a leader this member follows
            return True
        except (Definite, Indefinite):
            return False

    def status(self) -> Status:
        """The `srvr` four-letter word: the last zxid the member processed (epoch << 32 | counter)."""
        try:
            with socket.create_connection((self.member.address, self.member.ports["client"]), self.timeout) as s:
                s.sendall(b"srvr")
                text = b""
                while chunk := s.recv(4096):
                    text += chunk
        except OSError as e:
            raise Definite(f"{self.member.name}: srvr: {e}") from None
        return srvr_status(self.member.name, text.decode(errors="replace"))


def srvr_status(member: str, text: str) -> Status:
    """What `srvr` says: the epoch, the mode, and the last zxid as the commit index, except a zxid
    whose counter is 0. That is a new epoch's first (its NEWLEADER's): nothing of that epoch is
    committed yet, and the last transaction that is belongs to an earlier epoch, which srvr does not
    name. A member that showed one and comes back from a power failure at the old epoch's last
    zxid has lost no transaction (read as an index, it would look like a truncated HWM)."""
    fields = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    if "Zxid" not in fields:  # not serving yet: it says so instead
        raise Definite(f"{member}: not serving")
    zxid = int(fields["Zxid"], 16)
    return Status(term=zxid >> 32, leader=fields.get("Mode") == "leader",
                  committed_index=zxid if zxid & 0xFFFFFFFF else None, extra={"mode": fields.get("Mode")})


class ZooKeeper(Server):
    name = "zookeeper"
    binary = "java"
    package = "zookeeper"
    port_names = ("client", "quorum", "election")
    default_ports = {"client": 2181, "quorum": 2888, "election": 3888}
    start_seconds = 60.0

    def __init__(self, settings: dict[str, str] | None = None):
        # zoo.cfg lines beyond the stock ones: `forceSync=no` acknowledges a write before its
        # transaction log is fsynced (a planted weakness, found by power failures).
        self.settings = dict(settings or {})
        if self.settings:
            self.name = "zookeeper:" + ",".join(f"{k}={v}" for k, v in self.settings.items())

    def missing(self) -> str | None:
        if not os.path.exists(JAR):
            return f"{JAR} not found: install the Debian package zookeeper (apt-get install zookeeper)"
        if shutil.which("java") is None:
            return "java not found on PATH: install the Debian package default-jre-headless"
        _kazoo()
        return None

    def prepare(self, member: Member, members: list[Member]) -> None:
        config = [f"dataDir={member.data_dir}", "tickTime=2000", "initLimit=10", "syncLimit=5",
                  f"clientPort={member.ports['client']}", f"clientPortAddress={member.address}",
                  "admin.enableServer=false", "4lw.commands.whitelist=srvr"]
        config += [f"{k}={v}" for k, v in self.settings.items()]
        config += [f"server.{m.index}={m.address}:{m.ports['quorum']}:{m.ports['election']}" for m in members]
        (member.data_dir / "zoo.cfg").write_text("\n".join(config) + "\n")
        (member.data_dir / "myid").write_text(f"{member.index}\n")

    def command(self, member: Member, members: list[Member]) -> list[str]:
        classpath = ":".join([CONF, JAR, *(p for p in LOGGERS if os.path.exists(p))])
        return ["java", "-cp", classpath, "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                str(member.data_dir / "zoo.cfg")]

    def client(self, member: Member, timeout: float = 2.0) -> ZooKeeperClient:
        return ZooKeeperClient(member, timeout)
