"""The messages replicas exchange, and the client protocol: frozen dataclasses, validated on construction.

Peer messages carry the sender's server id so the receiver knows whose vote or acknowledgement it
is. Every message checks its fields when it is built (a negative index, a server id that is not a
non-empty string, an entry newer than the generation that sends it ...) and raises ``ValueError``
naming the message and the field, so a decoded message is a well-formed one (``impl.codec`` turns the
``ValueError`` into a ``CodecError``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Union

# Roles a replica reports in a StatusReply; the snapshot shows a candidate as a follower.
ROLES = ("leader", "follower", "candidate")

# A server id is at most this many bytes of UTF-8 (the codec writes its length in one byte).
MAX_SERVER_ID_BYTES = 255

MAX_U64 = 2**64 - 1


def _fail(message: object, field: str, text: str) -> None:
    raise ValueError(f"{type(message).__name__}.{field}: {text}")


def _count(message: object, field: str, *, positive: bool = False) -> None:
    value = getattr(message, field)
    if type(value) is not int:
        _fail(message, field, f"expected an int, got {type(value).__name__}")
    low = 1 if positive else 0
    if not low <= value <= MAX_U64:
        _fail(message, field, f"{value} is out of range {low}..2**64-1")


def _optional_count(message: object, field: str) -> None:
    if getattr(message, field) is not None:
        _count(message, field)


def _flag(message: object, field: str) -> None:
    value = getattr(message, field)
    if type(value) is not bool:
        _fail(message, field, f"expected a bool, got {type(value).__name__}")


def check_server_id(value: object, where: str = "server id") -> None:
    """A server id: a non-empty str of at most MAX_SERVER_ID_BYTES bytes of UTF-8."""
    if type(value) is not str:
        raise ValueError(f"{where}: expected a str, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{where}: a server id cannot be empty")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(f"{where}: {value!r} cannot be encoded as UTF-8") from None
    if size > MAX_SERVER_ID_BYTES:
        raise ValueError(f"{where}: {size} bytes of UTF-8, at most {MAX_SERVER_ID_BYTES} allowed")


def _server(message: object, field: str, *, optional: bool = False) -> None:
    value = getattr(message, field)
    if optional and value is None:
        return
    check_server_id(value, f"{type(message).__name__}.{field}")


def _text(message: object, field: str, *, optional: bool = False) -> None:
    value = getattr(message, field)
    if optional and value is None:
        return
    if type(value) is not str:
        _fail(message, field, f"expected a str, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        _fail(message, field, "cannot be encoded as UTF-8")


def _bytes(message: object, field: str, *, optional: bool = False) -> None:
    value = getattr(message, field)
    if optional and value is None:
        return
    if type(value) is not bytes:
        _fail(message, field, f"expected bytes, got {type(value).__name__}")


# ------------------------------------------------------------------ peer messages
@dataclass(frozen=True)
class AppendRequest:
    """Leader -> follower: the entries after `prev_index`, and the leader's high-water mark.

    An append with no entries is the heartbeat that carries the HWM ("The leader propagates the
    high-water mark to the followers either as part of the regular HeartBeat").
    `entries` holds (generation, payload) of indexes prev_index+1, prev_index+2, ...
    """

    generation: int
    leader: str
    prev_index: int
    prev_generation: int
    entries: tuple[tuple[int, bytes], ...]
    leader_hwm: int

    def __post_init__(self) -> None:
        _count(self, "generation")
        _server(self, "leader")
        _count(self, "prev_index")
        _count(self, "prev_generation")
        _count(self, "leader_hwm")
        if self.prev_generation > self.generation:
            _fail(self, "prev_generation", f"{self.prev_generation} is newer than the sender's "
                  f"generation {self.generation}")
        if self.prev_index == 0 and self.prev_generation != 0:
            _fail(self, "prev_generation", "must be 0 when prev_index is 0 (there is no entry 0)")
        if type(self.entries) is not tuple:
            _fail(self, "entries", f"expected a tuple, got {type(self.entries).__name__}")
        for k, entry in enumerate(self.entries):
            where = f"entries[{k}]"
            if type(entry) is not tuple or len(entry) != 2:
                _fail(self, where, "expected a (generation, payload) tuple")
            generation, payload = entry
            if type(generation) is not int or not 0 <= generation <= self.generation:
                _fail(self, where, f"generation {generation!r} is not an int in 0..{self.generation} "
                      "(a leader sends no entry newer than its own generation)")
            if type(payload) is not bytes:
                _fail(self, where, f"payload must be bytes, got {type(payload).__name__}")
        if self.prev_index + len(self.entries) > MAX_U64:
            _fail(self, "entries", "the last index would exceed 2**64-1")


@dataclass(frozen=True)
class AppendReply:
    """Follower -> leader. On success `index` is what the follower acknowledges (prev_index +
    len(entries) under `previous-entry`, its last log index under `generation-mismatch`); on
    failure it is the request's prev_index, so the leader backs off below it.

    A refusal also carries a conflict hint (etcd's RejectHint and LogTerm): `hint_index` is the
    last index at or below min(prev_index, the follower's last index) whose generation is at most
    the request's prev_generation, and `hint_generation` the generation there (0, 0 for none).
    The leader skips every index in between, so catching up a diverged follower takes one round
    trip per differing generation, not one per entry."""

    generation: int
    follower: str
    success: bool
    index: int
    hint_index: int = 0
    hint_generation: int = 0

    def __post_init__(self) -> None:
        _count(self, "generation")
        _server(self, "follower")
        _flag(self, "success")
        _count(self, "index")
        _count(self, "hint_index")
        _count(self, "hint_generation")
        if self.hint_index > self.index:
            _fail(self, "hint_index", f"{self.hint_index} is above the refused index {self.index}")
        if self.hint_generation > self.generation:
            _fail(self, "hint_generation", f"{self.hint_generation} is newer than the sender's "
                  f"generation {self.generation}")


@dataclass(frozen=True)
class VoteRequest:
    """A candidate asks for a vote in `generation`. A pre-vote (`pre_vote`) asks whether the voter
    would vote in that generation, without anyone changing state: a server that cannot win (its
    peers hear from a healthy leader) never raises its generation and deposes nobody."""

    generation: int
    candidate: str
    last_index: int
    last_generation: int
    pre_vote: bool = False

    def __post_init__(self) -> None:
        _count(self, "generation")
        _server(self, "candidate")
        _count(self, "last_index")
        _count(self, "last_generation")
        _flag(self, "pre_vote")
        if self.last_generation > self.generation:
            _fail(self, "last_generation", f"{self.last_generation} is newer than the candidate's "
                  f"generation {self.generation}")
        if self.last_index == 0 and self.last_generation != 0:
            _fail(self, "last_generation", "must be 0 when last_index is 0 (an empty log)")


@dataclass(frozen=True)
class VoteReply:
    """The answer to a VoteRequest; a pre-vote's answer has `pre_vote` and the requested generation."""

    generation: int
    voter: str
    granted: bool
    pre_vote: bool = False

    def __post_init__(self) -> None:
        _count(self, "generation")
        _server(self, "voter")
        _flag(self, "granted")
        _flag(self, "pre_vote")


@dataclass(frozen=True)
class HwmQuery:
    """A restarting server asks its peers for the leader's high-water mark (restart
    `truncate-to-leader-hwm`): "It then explicitly asks for the current high-water mark"."""

    generation: int
    server: str

    def __post_init__(self) -> None:
        _count(self, "generation")
        _server(self, "server")


@dataclass(frozen=True)
class HwmReply:
    """A peer's answer: its generation, whether it leads, and its high-water mark."""

    generation: int
    server: str
    leader: bool
    hwm: int

    def __post_init__(self) -> None:
        _count(self, "generation")
        _server(self, "server")
        _flag(self, "leader")
        _count(self, "hwm")


# ------------------------------------------------------------- ZAB's peer messages
@dataclass(frozen=True)
class ZabVoteRequest(VoteRequest):
    """A ZAB candidate's vote request: also its currentEpoch, the epoch of the last history it
    accepted (fast leader election orders candidates by it, then by the last zxid)."""

    current_epoch: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        _count(self, "current_epoch")
        if self.current_epoch > self.generation:
            _fail(self, "current_epoch", f"{self.current_epoch} is newer than the candidate's "
                  f"generation {self.generation}")


@dataclass(frozen=True)
class NewLeader:
    """ZAB's synchronisation (phase 2) as one message: the prospective leader of epoch `generation`
    sends its whole history (a SNAP; the follower keeps the prefix it shares, so it acts as DIFF or
    TRUNC) and its high-water mark, then NEWLEADER. `entries` holds (generation, payload) of
    indexes 1, 2, ..."""

    generation: int
    leader: str
    entries: tuple[tuple[int, bytes], ...]
    leader_hwm: int

    def __post_init__(self) -> None:
        _count(self, "generation")
        _server(self, "leader")
        _count(self, "leader_hwm")
        if type(self.entries) is not tuple:
            _fail(self, "entries", f"expected a tuple, got {type(self.entries).__name__}")
        for k, entry in enumerate(self.entries):
            where = f"entries[{k}]"
            if type(entry) is not tuple or len(entry) != 2:
                _fail(self, where, "expected a (generation, payload) tuple")
            generation, payload = entry
            if type(generation) is not int or not 0 <= generation <= self.generation:
                _fail(self, where, f"generation {generation!r} is not an int in 0..{self.generation} "
                      "(a history holds no entry newer than the epoch that sends it)")
            if type(payload) is not bytes:
                _fail(self, where, f"payload must be bytes, got {type(payload).__name__}")


@dataclass(frozen=True)
class NewLeaderAck:
    """The follower's ACK of NEWLEADER: it adopted epoch `generation` and holds the leader's history,
    `index` entries, of which `logged` are on disk (ZooKeeper logs all of them before the ACK;
    ZOOKEEPER-3911's follower did not)."""

    generation: int
    follower: str
    index: int
    logged: int

    def __post_init__(self) -> None:
        _count(self, "generation")
        _server(self, "follower")
        _count(self, "index")
        _count(self, "logged")
        if self.logged > self.index:
            _fail(self, "logged", f"{self.logged} entries on disk, but the history holds only {self.index}")


# ---------------------------------------------------------------- client messages
# Error codes of PutReply and GetReply: what a client may do next depends on the code, never on
# the text (which is for people). 0 is no error.
OK = 0
NOT_LEADER = 1  # nothing was written; ask `leader` if given
NOT_WRITTEN = 2  # nothing was written (overwritten by another leader): try again
REFUSED = 3  # nothing was written, and trying again will not help (a value too big)
OUTCOME_UNKNOWN = 4  # accepted, not committed in time: it may still commit; retry with the same request id
NOT_COMMITTED = 5  # a get above the server's high-water mark
SESSION_EXPIRED = 6  # the client has no session (evicted) or the request is older than its latest:
#                     nothing was written; whether the request ever was cannot be told
ERROR_CODES = {NOT_LEADER: "not the leader", NOT_WRITTEN: "not written", REFUSED: "refused",
               OUTCOME_UNKNOWN: "outcome unknown", NOT_COMMITTED: "not committed",
               SESSION_EXPIRED: "session expired"}


def _error_code(message: object, has_error: bool) -> None:
    code = getattr(message, "code")
    if type(code) is not int:
        _fail(message, "code", f"expected an int, got {type(code).__name__}")
    if has_error and code not in ERROR_CODES:
        _fail(message, "code", f"{code} is not an error code ({', '.join(map(str, ERROR_CODES))})")
    if not has_error and code != OK:
        _fail(message, "code", f"must be {OK} without an error, got {code}")


@dataclass(frozen=True)
class PutRequest:
    """A value to append. A client that may retry names the request: `client` (its id) and
    `request` (> 0, new for each value); a leader that finds the same pair in its log answers with
    that entry instead of writing the value again, so a retried put is applied once."""

    value: bytes
    client: str | None = None
    request: int = 0

    def __post_init__(self) -> None:
        _bytes(self, "value")
        _server(self, "client", optional=True)
        _count(self, "request")
        if (self.client is None) != (self.request == 0):
            _fail(self, "request", "a request id (> 0) goes with a client id, and only with one")


@dataclass(frozen=True)
class RegisterClient:
    """Open a session for `client` (Raft dissertation §6.3): the leader writes a registration
    entry and answers with a PutReply carrying its index once committed. The client's puts are
    deduplicated within its session; opening one again is harmless."""

    client: str

    def __post_init__(self) -> None:
        _server(self, "client")


@dataclass(frozen=True)
class PutReply:
    """The index the value was committed at, or an error code and text (with a leader hint when known)."""

    index: int | None
    error: str | None = None
    leader: str | None = None
    code: int = OK

    def __post_init__(self) -> None:
        _optional_count(self, "index")
        _text(self, "error", optional=True)
        _server(self, "leader", optional=True)
        if (self.index is None) == (self.error is None):
            _fail(self, "index", "exactly one of index and error must be given")
        _error_code(self, self.error is not None)


@dataclass(frozen=True)
class GetRequest:
    index: int

    def __post_init__(self) -> None:
        _count(self, "index", positive=True)


@dataclass(frozen=True)
class GetReply:
    """The entry at `index` (its generation and value), or an error such as "not yet committed"."""

    index: int
    generation: int | None
    value: bytes | None
    error: str | None = None
    code: int = OK

    def __post_init__(self) -> None:
        _count(self, "index")
        _optional_count(self, "generation")
        _bytes(self, "value", optional=True)
        _text(self, "error", optional=True)
        _error_code(self, self.error is not None)
        has_entry = self.generation is not None and self.value is not None
        no_entry = self.generation is None and self.value is None
        if not (has_entry and self.error is None or no_entry and self.error is not None):
            _fail(self, "error", "either generation and value, or error, must be given")


@dataclass(frozen=True)
class StatusRequest:
    pass


@dataclass(frozen=True)
class StatusReply:
    server: str
    role: str
    generation: int
    last_index: int
    hwm: int
    leader: str | None

    def __post_init__(self) -> None:
        _server(self, "server")
        if self.role not in ROLES:
            _fail(self, "role", f"{self.role!r} is not one of {', '.join(ROLES)}")
        _count(self, "generation")
        _count(self, "last_index")
        _count(self, "hwm")
        _server(self, "leader", optional=True)


@dataclass(frozen=True)
class ErrorReply:
    """A request that could not be served (malformed, unknown, refused)."""

    text: str

    def __post_init__(self) -> None:
        _text(self, "text")


PeerMessage = Union[AppendRequest, AppendReply, VoteRequest, VoteReply, HwmQuery, HwmReply, NewLeader,
                    NewLeaderAck]
PEER_MESSAGES = (AppendRequest, AppendReply, VoteRequest, VoteReply, HwmQuery, HwmReply, ZabVoteRequest, NewLeader,
                 NewLeaderAck)
CLIENT_REQUESTS = (PutRequest, GetRequest, StatusRequest, RegisterClient)
CLIENT_REPLIES = (PutReply, GetReply, StatusReply, ErrorReply)
ALL_MESSAGES = PEER_MESSAGES + CLIENT_REQUESTS + CLIENT_REPLIES
Message = Union[PeerMessage, PutRequest, GetRequest, StatusRequest, RegisterClient, PutReply, GetReply, StatusReply,
                ErrorReply]


def sender(message: PeerMessage) -> str:
    """The server that sent a peer message."""
    if isinstance(message, AppendRequest):
        return message.leader
    if isinstance(message, AppendReply):
        return message.follower
    if isinstance(message, VoteRequest):
        return message.candidate
    if isinstance(message, VoteReply):
        return message.voter
    if isinstance(message, (HwmQuery, HwmReply)):
        return message.server
    if isinstance(message, NewLeader):
        return message.leader
    if isinstance(message, NewLeaderAck):
        return message.follower
    raise TypeError(f"{type(message).__name__} is not a peer message")


def field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))
