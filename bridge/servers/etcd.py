"""etcd 3.4 (Debian's etcd-server) as a cluster of real members, and a client of its JSON gateway.

Member i listens on its own loopback address, clients on port 2379 and peers on 2380, with its
data directory given by --data-dir and nothing else changed from the stock configuration. The
client speaks etcd's v3 JSON gateway over HTTP (keys and values base64): the log workload keeps
offset k at key `log/<k, zero-padded>`, created by a transaction that fails if the key exists, so an
append never overwrites; reads are linearizable unless `serializable`. The lin-kv workload's key k
is `kv/<k>`: a read is a linearizable range, a write a put, a cas a transaction comparing the value. The status probe is the
maintenance API's: the member's raft term, commit index, applied index and the leader it knows.
"""

from __future__ import annotations

import base64
import json
import socket
import urllib.error
import urllib.request

from hwm.bridge.servers.adapter import Client, Definite, Indefinite, Member, Server, Status

LOG_PREFIX = "log/"
KV_PREFIX = "kv/"  # the lin-kv workload's key k is kv/<k>
OFFSET_DIGITS = 8
APPEND_TRIES = 5  # appends racing for the same next free offset: each retry takes the next one
# No proxy: every request goes straight to the member's loopback address.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _text(b64: str) -> str:
    return base64.b64decode(b64).decode()


def offset_key(offset: int) -> str:
    return f"{LOG_PREFIX}{offset:0{OFFSET_DIGITS}d}"


class EtcdClient(Client):
    def __init__(self, member: Member, timeout: float = 2.0):
        self.member, self.timeout = member, timeout
        self.base = f"http://{member.address}:{member.ports['client']}"

    def _call(self, path: str, body: dict, writes: bool) -> dict:
        request = urllib.request.Request(self.base + path, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with _OPENER.open(request, timeout=self.timeout) as answer:
                return json.loads(answer.read() or b"{}")
        except urllib.error.HTTPError as e:
            # The gateway's error: {"error": "etcdserver: ...", "code": N}. A write that reached the
            # server and failed may still have been proposed (a timeout, a leader lost): indefinite.
            try:
                message = json.loads(e.read() or b"{}").get("error", str(e))
            except ValueError:
                message = str(e)
            raise (Indefinite if writes else Definite)(f"{self.member.name}: {message}") from None
        except (urllib.error.URLError, ConnectionError, socket.timeout, TimeoutError, OSError) as e:
            reason = getattr(e, "reason", e)
            if isinstance(reason, ConnectionRefusedError):  # nothing was sent
                raise Definite(f"{self.member.name}: connection refused") from None
            raise (Indefinite if writes else Definite)(f"{self.member.name}: {reason}") from None

    def last_offset(self, serializable: bool = False) -> int:
        """The highest offset stored (0 for an empty log)."""
        answer = self._call("/v3/kv/range", {"key": _b64(LOG_PREFIX), "range_end": _b64(LOG_PREFIX[:-1] + "0"),
                                             "sort_order": "DESCEND", "sort_target": "KEY", "limit": 1,
                                             "keys_only": True, "serializable": serializable}, writes=False)
        kvs = answer.get("kvs") or []
        return int(_text(kvs[0]["key"])[len(LOG_PREFIX):]) if kvs else 0

    def append(self, value: int) -> int:
        offset = self.last_offset() + 1
        for _ in range(APPEND_TRIES):
            key = _b64(offset_key(offset))
            answer = self._call("/v3/kv/txn", {
                "compare": [{"key": key, "target": "CREATE", "result": "EQUAL", "create_revision": "0"}],
                "success": [{"request_put": {"key": key, "value": _b64(str(value))}}]}, writes=True)
            if answer.get("succeeded"):
                return offset
            offset += 1  # taken meanwhile: the next one
        raise Definite(f"{self.member.name}: {APPEND_TRIES} offsets taken by other appends in a row")

    def read(self, offset: int, serializable: bool = False) -> int | None:
        answer = self._call("/v3/kv/range", {"key": _b64(offset_key(offset)), "serializable": serializable},
                            writes=False)
        kvs = answer.get("kvs") or []
        return int(_text(kvs[0]["value"])) if kvs and "value" in kvs[0] else None

    def get(self, key: int, serializable: bool = False) -> int | None:
        answer = self._call("/v3/kv/range", {"key": _b64(f"{KV_PREFIX}{key}"), "serializable": serializable},
                            writes=False)
        kvs = answer.get("kvs") or []
        return int(_text(kvs[0]["value"])) if kvs and "value" in kvs[0] else None

    def put(self, key: int, value: int) -> None:
        self._call("/v3/kv/put", {"key": _b64(f"{KV_PREFIX}{key}"), "value": _b64(str(value))}, writes=True)

    def cas(self, key: int, source: int, target: int, create: bool = False) -> bool:
        # One transaction per condition (a txn's compares are all-of): each that succeeds or fails
        # does so at its own commit, so the cas takes effect, or is refused, at one moment.
        name = _b64(f"{KV_PREFIX}{key}")
        put = [{"request_put": {"key": name, "value": _b64(str(target))}}]
        if create and self._call("/v3/kv/txn", {"compare": [{"key": name, "target": "CREATE", "result": "EQUAL",
                                                             "create_revision": "0"}], "success": put},
                                 writes=True).get("succeeded"):
            return True
        return bool(self._call("/v3/kv/txn", {"compare": [{"key": name, "target": "VALUE", "result": "EQUAL",
                                                          "value": _b64(str(source))}], "success": put},
                               writes=True).get("succeeded"))

    def status(self) -> Status:
        answer = self._call("/v3/maintenance/status", {}, writes=False)
        member_id = answer.get("header", {}).get("member_id")

        def number(name):
            return int(answer[name]) if name in answer else 0  # the gateway leaves zeros out

        return Status(term=number("raftTerm"), leader=member_id is not None and answer.get("leader") == member_id,
                      committed_index=number("raftIndex"), applied_index=number("raftAppliedIndex"),
                      extra={"member_id": member_id, "leader_id": answer.get("leader")})


class Etcd(Server):
    name = "etcd"
    binary = "etcd"
    package = "etcd-server"
    port_names = ("client", "peer")
    default_ports = {"client": 2379, "peer": 2380}
    start_seconds = 30.0

    def command(self, member: Member, members: list[Member]) -> list[str]:
        def url(m: Member, port: str) -> str:
            return f"http://{m.address}:{m.ports[port]}"

        cluster = ",".join(f"{m.name}={url(m, 'peer')}" for m in members)
        return [self.binary, "--name", member.name, "--data-dir", str(member.data_dir),
                "--listen-client-urls", url(member, "client"), "--advertise-client-urls", url(member, "client"),
                "--listen-peer-urls", url(member, "peer"), "--initial-advertise-peer-urls", url(member, "peer"),
                "--initial-cluster", cluster, "--initial-cluster-state", "new",
                "--initial-cluster-token", f"hwm-{members[0].address}"]

    def client(self, member: Member, timeout: float = 2.0) -> EtcdClient:
        return EtcdClient(member, timeout)
