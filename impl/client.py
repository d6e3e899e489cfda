"""The client of a running cluster: put, get, status over TCP, following the leader.

Blocking sockets, no threads inside: one `Client` is used by one thread (a benchmark with several
concurrent clients makes one `Client` per thread). One request is outstanding per connection.

Guarantees, in the protocol's words:

- `put(value)` returns the index once the entry is at or below the leader's high-water mark
  (committed). A client first opens a session (`RegisterClient`, once; `impl.sessions`). Every put
  carries the client's id and a request id of its own; a retry carries the same pair, and a leader
  whose log holds it (or whose session table records it as the client's latest) answers with that
  entry instead of writing the value again, so a put is applied at most once however often it is
  retried. If the servers evicted the session (they keep a bounded number), the client opens a new
  one and writes the value again when no server can have written it; otherwise the put raises
  `SessionExpiredError` (an `UnknownOutcomeError`): writing it again could apply it twice. A server that does not lead
  answers with a hint naming the leader, and the client follows it; a server that does not answer
  within `attempt_timeout` (stopped, paused, partitioned) is left for the next one. Only when no
  leader gave a definite answer before `timeout` does `put` raise: `UnknownOutcomeError` if some
  server may have accepted the value, `NoLeaderError` if none did.
- `get(index)` asks the leader (or one named server): an index above that server's high-water mark
  is refused with `NotCommittedError` ("not yet committed").
- `status()` asks every server for role, generation, last index, HWM and known leader.

Errors name the servers tried and what each answered, for people: `NoLeaderError` when no leader
can be reached within the timeout.
"""

from __future__ import annotations

import itertools
import os
import select
import socket
import time
from dataclasses import dataclass
from typing import Iterable, Mapping

from hwm.impl import codec
from hwm.impl import messages as m

__all__ = [
    "Client",
    "ClientError",
    "NoLeaderError",
    "NotCommittedError",
    "ServerStatus",
    "SessionExpiredError",
    "UnknownOutcomeError",
    "format_address",
    "parse_address",
    "parse_cluster",
    "NOT_LEADER",
    "NOT_WRITTEN",
    "REFUSED",
    "OUTCOME_UNKNOWN",
    "SESSION_EXPIRED",
]

# The error codes of PutReply and GetReply (impl.messages is their one home).
NOT_LEADER, NOT_WRITTEN, REFUSED, OUTCOME_UNKNOWN = m.NOT_LEADER, m.NOT_WRITTEN, m.REFUSED, m.OUTCOME_UNKNOWN
SESSION_EXPIRED = m.SESSION_EXPIRED

Address = tuple[str, int]



class ClientError(Exception):
    """A request that could not be served; the text says which server and why."""


class NoLeaderError(ClientError):
    """No server that leads could be reached; the text names every address tried."""


class NotCommittedError(ClientError):
    """A get of an index above the server's high-water mark (or not in its log)."""


class UnknownOutcomeError(ClientError):
    """A put the leader accepted but did not confirm: the value may or may not be committed."""


class SessionExpiredError(UnknownOutcomeError):
    """The servers no longer hold this client's session (evicted) while a put of it may have been
    written: whether it was cannot be told, and writing it again could apply it twice."""


class _SessionExpired(Exception):
    def __init__(self, text: str, maybe_written: bool):
        super().__init__(text)
        self.maybe_written = maybe_written


# ---------------------------------------------------------------------- addresses
def parse_address(text: str, where: str = "address") -> Address:
    """`HOST:PORT` (IPv6 as `[::1]:PORT`) -> (host, port); ValueError naming `where` otherwise."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host:
        raise ValueError(f"{where}: {text!r} is not HOST:PORT")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{where}: port {port!r} in {text!r} is not a number in 0..65535")
    return host, int(port)


def format_address(address: Address) -> str:
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_cluster(text: str, where: str = "--cluster") -> dict[str, Address]:
    """`S1=HOST:PORT,S2=HOST:PORT,...` -> {server id: address}, in the order given."""
    servers: dict[str, Address] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        server, sep, address = part.partition("=")
        server = server.strip()
        if not sep:
            raise ValueError(f"{where}: {part!r} is not ID=HOST:PORT")
        m.check_server_id(server, f"{where}: server id")
        if server in servers:
            raise ValueError(f"{where}: server {server} is given twice")
        servers[server] = parse_address(address, f"{where}: {server}")
    if not servers:
        raise ValueError(f"{where}: no servers given (expected ID=HOST:PORT,...)")
    return servers


@dataclass(frozen=True)
class ServerStatus:
    """One server's answer to a status request, or why there was none."""

    server: str
    address: Address
    reply: m.StatusReply | None
    error: str | None = None


class _Unreachable(Exception):
    """Could not connect or send: the server never saw the request."""


class _NoAnswer(Exception):
    """The request was sent but no valid answer came back (closed, timed out, garbage)."""


class _Connection:
    def __init__(self, address: Address, connect_timeout: float):
        try:
            self.sock = socket.create_connection(address, timeout=connect_timeout)
        except OSError as error:
            raise _Unreachable(_reason(error)) from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.frames = codec.FrameReader()
        self.pending: list[bytes] = []

    def stale(self) -> bool:
        """True if the server closed this (idle) connection since it was last used."""
        # Readable while idle: EOF, a reset, or something unsolicited (an ErrorReply); start over.
        readable, _, _ = select.select([self.sock], [], [], 0)
        return bool(readable)

    def call(self, request: m.Message, timeout: float) -> m.Message:
        try:
            self.sock.settimeout(max(timeout, 0.001))
            self.sock.sendall(codec.encode(request))
        except OSError as error:
            raise _Unreachable(_reason(error)) from None
        deadline = time.monotonic() + timeout
        while not self.pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _NoAnswer(f"no answer within {timeout:.1f} s")
            try:
                self.sock.settimeout(left)
                data = self.sock.recv(65536)
            except socket.timeout:
                raise _NoAnswer(f"no answer within {timeout:.1f} s") from None
            except OSError as error:
                raise _NoAnswer(_reason(error)) from None
            if not data:
                raise _NoAnswer("the server closed the connection before answering")
            try:
                self.pending += self.frames.feed(data)
            except codec.CodecError as error:
                raise _NoAnswer(f"garbled answer: {error}") from None
        try:
            return codec.decode(self.pending.pop(0))
        except codec.CodecError as error:
            raise _NoAnswer(f"garbled answer: {error}") from None

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def _reason(error: OSError) -> str:
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, socket.timeout):
        return "timed out"
    return error.strerror or str(error) or type(error).__name__


class _Rounds:
    """The servers a request tries in turn until the client's timeout: the known leader first,
    then the others; when a round is used up, a pause (an election may be under way) and another."""

    def __init__(self, client: "Client"):
        self.client = client
        self.deadline = time.monotonic() + client.timeout
        self.queue = client._order(client.leader)

    def next(self) -> tuple[str, float] | None:
        """The next server and the seconds left, or None when the time is up."""
        if not self.queue:
            if time.monotonic() + self.client.retry_pause >= self.deadline:
                return None
            time.sleep(self.client.retry_pause)
            self.queue = self.client._order(self.client.leader)
        server = self.queue.pop(0)
        left = self.deadline - time.monotonic()
        return (server, left) if left > 0 else None

    def prefer(self, server: str) -> None:
        """Try `server` next (a leader hint)."""
        self.queue = [server] + [s for s in self.queue if s != server]

class Client:
    """A client of one cluster. `servers` maps server ids to (host, port)."""

    def __init__(self, servers: Mapping[str, Address], *, timeout: float = 10.0,
                 connect_timeout: float = 1.0, retry_pause: float = 0.05, attempt_timeout: float = 2.0,
                 client_id: str | None = None):
        if not servers:
            raise ValueError("servers: at least one server is needed")
        for server in servers:
            m.check_server_id(server, "servers")
        if not timeout > 0 or not connect_timeout > 0:
            raise ValueError("timeout and connect_timeout must be > 0")
        self.servers = dict(servers)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.retry_pause = retry_pause
        self.attempt_timeout = attempt_timeout  # one server's time to answer before the next is tried
        self.client_id = client_id if client_id is not None else os.urandom(8).hex()
        m.check_server_id(self.client_id, "client_id")
        self._request_ids = itertools.count(1)
        self._session = False  # True once a registration of ours committed (until it expires)
        self.leader: str | None = None  # the last server known to lead
        self._connections: dict[str, _Connection] = {}

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    def describe(self, server: str) -> str:
        return f"{server}={format_address(self.servers[server])}"

    # ------------------------------------------------------------------ transport
    def _call(self, server: str, request: m.Message, timeout: float) -> m.Message:
        connection = self._connections.get(server)
        if connection is not None and connection.stale():
            connection.close()
            del self._connections[server]
            connection = None
        if connection is None:
            connection = _Connection(self.servers[server], min(self.connect_timeout, max(timeout, 0.001)))
            self._connections[server] = connection
        try:
            return connection.call(request, timeout)
        except (_Unreachable, _NoAnswer):
            connection.close()
            del self._connections[server]
            raise

    def _order(self, first: str | None) -> list[str]:
        names = list(self.servers)
        if first in self.servers:
            names.remove(first)
            names.insert(0, first)
        return names

    # ------------------------------------------------------------------ requests
    def put(self, value: bytes) -> int:
        """Write `value`; return its index once committed (NoLeaderError, UnknownOutcomeError)."""
        if type(value) is not bytes:
            raise TypeError(f"put: value must be bytes, got {type(value).__name__}")
        request = m.PutRequest(value, self.client_id, next(self._request_ids))
        for _ in range(2):
            if not self._session:
                try:
                    self.open_session()
                except UnknownOutcomeError as error:  # about the registration: the value was not sent
                    raise NoLeaderError(f"put: the value was not written: cannot open a session: {error}") from None
            try:
                return self._write("put", request)
            except _SessionExpired as expired:
                self._session = False
                if expired.maybe_written:
                    raise SessionExpiredError(f"put: {expired}; an earlier attempt may have written the "
                                              "value, so it is not written again") from None
                error = expired  # nothing was written: open a new session and write it there
        raise SessionExpiredError(f"put: {error}; twice in a row (are sessions evicted faster than a "
                                  "put commits?)")

    def open_session(self) -> int:
        """Open (or reopen) this client's session; returns the index of its registration entry."""
        index = self._write("open a session", m.RegisterClient(self.client_id))
        self._session = True
        return index

    def _write(self, what: str, request: m.PutRequest | m.RegisterClient) -> int:
        """Send `request` to the leader until an index comes back; errors as `put` describes."""
        tried: dict[str, str] = {}
        maybe_written = False  # some server may hold the value: only UnknownOutcomeError is honest
        rounds = _Rounds(self)
        while (attempt := rounds.next()) is not None:
            server, left = attempt
            try:
                reply = self._call(server, request, min(left, self.attempt_timeout))
            except _Unreachable as error:
                tried[server] = str(error)
                continue
            except _NoAnswer as error:
                # It may have written the value: the retry carries the same request id, so a
                # leader holding it answers with that entry instead of writing it twice.
                tried[server] = f"accepted the request but gave no answer ({error})"
                maybe_written = True
                if self.leader == server:
                    self.leader = None
                continue
            if not isinstance(reply, m.PutReply):
                raise ClientError(f"{what}: {self.describe(server)}: {_describe_reply(reply)}")
            if reply.index is not None:
                self.leader = server
                return reply.index
            text = f"{m.ERROR_CODES.get(reply.code, 'error')}: {reply.error}"
            if reply.code == m.NOT_LEADER:
                if self.leader == server:
                    self.leader = None
                hint = reply.leader
                if hint is not None and hint != server and hint in self.servers:
                    tried[server] = f"not the leader; it points to {hint}"
                    self.leader = hint
                    rounds.prefer(hint)
                elif hint is not None and hint not in self.servers:
                    tried[server] = f"not the leader; it points to {hint}, which is not in the cluster list"
                else:
                    tried[server] = "not the leader; no leader known (election under way?)"
                continue
            if reply.code in (m.NOT_WRITTEN, m.OUTCOME_UNKNOWN):
                tried[server] = text
                maybe_written = maybe_written or reply.code == m.OUTCOME_UNKNOWN
                continue  # safe to try again: the request id makes the retry apply once
            if reply.code == m.SESSION_EXPIRED:
                raise _SessionExpired(f"{self.describe(server)}: {text}", maybe_written)
            raise ClientError(f"{what}: {self.describe(server)}: {text}")
        if maybe_written:
            raise UnknownOutcomeError(self._no_leader(what, tried) + "; the value may or may not have been "
                                      "written (a later put with the same request id would tell)")
        raise NoLeaderError(self._no_leader(what, tried))

    def find_leader(self) -> str:
        """The id of a server that says it leads (NoLeaderError if none within the timeout)."""
        tried: dict[str, str] = {}
        rounds = _Rounds(self)
        while (attempt := rounds.next()) is not None:
            server, left = attempt
            try:
                reply = self._call(server, m.StatusRequest(), min(left, 2.0))
            except (_Unreachable, _NoAnswer) as error:
                tried[server] = str(error)
                continue
            if not isinstance(reply, m.StatusReply):
                tried[server] = _describe_reply(reply)
                continue
            if reply.role == "leader":
                self.leader = server
                return server
            if reply.leader is not None and reply.leader in self.servers and reply.leader != server:
                tried[server] = f"{reply.role}; it points to {reply.leader}"
                rounds.prefer(reply.leader)
            else:
                tried[server] = f"{reply.role} in generation {reply.generation}; no leader known"
        raise NoLeaderError(self._no_leader("find the leader", tried))

    def get(self, index: int, server: str | None = None) -> tuple[int, bytes]:
        """(generation, value) of entry `index`, read from the leader or from `server`.

        NotCommittedError when the index is above that server's high-water mark."""
        if type(index) is not int or index < 1:
            raise ValueError(f"get: index must be an int >= 1, got {index!r}")
        if server is not None and server not in self.servers:
            raise ValueError(f"get: server {server!r} is not one of {', '.join(self.servers)}")
        target = server if server is not None else self.find_leader()
        try:
            reply = self._call(target, m.GetRequest(index), self.timeout)
        except (_Unreachable, _NoAnswer) as error:
            raise ClientError(f"get: {self.describe(target)}: {error}") from None
        if isinstance(reply, m.GetReply):
            if reply.error is not None:
                raise NotCommittedError(f"get {index} from {target}: {reply.error}")
            return reply.generation, reply.value  # type: ignore[return-value]
        raise ClientError(f"get: {self.describe(target)}: {_describe_reply(reply)}")

    def status(self, servers: Iterable[str] | None = None, timeout: float = 2.0) -> list[ServerStatus]:
        """Every server's status (or why it did not answer), in cluster order."""
        answers = []
        for server in (self.servers if servers is None else servers):
            address = self.servers[server]
            try:
                reply = self._call(server, m.StatusRequest(), timeout)
            except (_Unreachable, _NoAnswer) as error:
                answers.append(ServerStatus(server, address, None, str(error)))
                continue
            if isinstance(reply, m.StatusReply):
                answers.append(ServerStatus(server, address, reply))
            else:
                answers.append(ServerStatus(server, address, None, _describe_reply(reply)))
        return answers

    def _no_leader(self, what: str, tried: Mapping[str, str]) -> str:
        parts = [f"{self.describe(s)} ({tried[s]})" for s in self.servers if s in tried]
        untried = [self.describe(s) for s in self.servers if s not in tried]
        text = f"{what}: no leader reachable within {self.timeout:g} s; tried " + (", ".join(parts) or "nothing")
        if untried:
            text += "; not tried: " + ", ".join(untried)
        return text


def _describe_reply(reply: m.Message) -> str:
    if isinstance(reply, m.ErrorReply):
        return f"error: {reply.text}"
    return f"unexpected answer {type(reply).__name__}"
