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


def _entries(message, newest: int, kind: str, why: str) -> None:
    """`message.entries`: a tuple of (generation or epoch, payload) pairs, none newer than `newest`."""
    if type(message.entries) is not tuple:
        _fail(message, "entries", f"expected a tuple, got {type(message.entries).__name__}")
    for k, entry in enumerate(message.entries):
        where = f"entries[{k}]"
        if type(entry) is not tuple or len(entry) != 2:
            _fail(message, where, f"expected a ({kind}, payload) tuple")
        generation, payload = entry
        if type(generation) is not int or not 0 <= generation <= newest:
            _fail(message, where, f"{kind} {generation!r} is not an int in 0..{why}")
        if type(payload) is not bytes:
            _fail(message, where, f"payload must be bytes, got {type(payload).__name__}")


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
        _entries(self, self.generation, "generation",
                 f"{self.generation} (a leader sends no entry newer than its own generation)")
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
        _entries(self, self.generation, "generation",
                 f"{self.generation} (a history holds no entry newer than the epoch that sends it)")


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


# ------------------------------------------------------------------ Kafka's messages
# The replication of one Kafka partition (impl.kafka): the controller's LeaderAndIsr and
# UpdateMetadata requests, the leader's AlterIsr (KIP-497's name for the ISR update the
# ZooKeeper-era leader wrote itself), and the follower's OffsetsForLeaderEpoch (KIP-101) and Fetch.
# Offsets are Kafka's: 0-based, so a log end offset is the number of entries and the entry at
# offset o is the one at index o + 1.

# Kafka's error codes, as the protocol numbers them.
KAFKA_NONE = 0
OFFSET_OUT_OF_RANGE = 1
NOT_LEADER_OR_FOLLOWER = 6
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
KAFKA_ERRORS = {KAFKA_NONE: "NONE", OFFSET_OUT_OF_RANGE: "OFFSET_OUT_OF_RANGE",
                NOT_LEADER_OR_FOLLOWER: "NOT_LEADER_OR_FOLLOWER", FENCED_LEADER_EPOCH: "FENCED_LEADER_EPOCH",
                UNKNOWN_LEADER_EPOCH: "UNKNOWN_LEADER_EPOCH"}


def _servers(message: object, field: str) -> None:
    value = getattr(message, field)
    if type(value) is not tuple:
        _fail(message, field, f"expected a tuple of server ids, got {type(value).__name__}")
    for k, server in enumerate(value):
        check_server_id(server, f"{type(message).__name__}.{field}[{k}]")
    if len(set(value)) != len(value):
        _fail(message, field, f"{list(value)} names a server twice")
    if len(value) > 255:
        _fail(message, field, f"{len(value)} servers, at most 255 allowed")


def _kafka_error(message: object) -> None:
    code = getattr(message, "error")
    if type(code) is not int or code not in KAFKA_ERRORS:
        _fail(message, "error", f"{code!r} is not one of Kafka's error codes "
              f"({', '.join(f'{c} {n}' for c, n in KAFKA_ERRORS.items())})")


@dataclass(frozen=True)
class LeaderAndIsr:
    """Controller -> replica: `leader` leads `leader_epoch` with in-sync replicas `isr`
    (`leader` None: no live leader, the partition is offline)."""

    leader_epoch: int
    leader: str | None
    isr: tuple[str, ...]

    def __post_init__(self) -> None:
        _count(self, "leader_epoch")
        _server(self, "leader", optional=True)
        _servers(self, "isr")


@dataclass(frozen=True)
class UpdateMetadata:
    """Controller -> every live broker: the partition's latest leader epoch, leader and ISR, and
    the live brokers. It feeds a broker's metadata, not its replica state: no replica adopts the
    epoch from it (only LeaderAndIsr makes a leader or a follower)."""

    leader_epoch: int
    leader: str | None
    isr: tuple[str, ...]
    live: tuple[str, ...]

    def __post_init__(self) -> None:
        _count(self, "leader_epoch")
        _server(self, "leader", optional=True)
        _servers(self, "isr")
        _servers(self, "live")


@dataclass(frozen=True)
class AlterIsr:
    """Leader -> controller: make `isr` the ISR, if `leader` still leads `leader_epoch`."""

    leader: str
    leader_epoch: int
    isr: tuple[str, ...]

    def __post_init__(self) -> None:
        _server(self, "leader")
        _count(self, "leader_epoch")
        _servers(self, "isr")
        if self.leader not in self.isr:
            _fail(self, "isr", f"{list(self.isr)} leaves out the leader {self.leader}")


@dataclass(frozen=True)
class AlterIsrReply:
    """Controller -> leader: whether the update was made (the controller's conditional update:
    refused to a leader of an older epoch), the controller's epoch and its ISR after it."""

    leader_epoch: int
    accepted: bool
    isr: tuple[str, ...]

    def __post_init__(self) -> None:
        _count(self, "leader_epoch")
        _flag(self, "accepted")
        _servers(self, "isr")


@dataclass(frozen=True)
class OffsetsForLeaderEpoch:
    """Follower -> leader (KIP-101): the end offset of `leader_epoch`, the follower's latest.
    `current_leader_epoch` is the follower's current epoch, sent since KIP-320 (None before)."""

    replica: str
    leader_epoch: int
    current_leader_epoch: int | None

    def __post_init__(self) -> None:
        _server(self, "replica")
        _count(self, "leader_epoch")
        _optional_count(self, "current_leader_epoch")


@dataclass(frozen=True)
class OffsetsForLeaderEpochReply:
    """Leader -> follower: `end_offset` (None: UNDEFINED_EPOCH_OFFSET) and, since KIP-279, the
    epoch it is the end of (None: not sent, or UNDEFINED_EPOCH)."""

    leader: str
    error: int
    leader_epoch: int | None
    end_offset: int | None

    def __post_init__(self) -> None:
        _server(self, "leader")
        _kafka_error(self)
        _optional_count(self, "leader_epoch")
        _optional_count(self, "end_offset")
        if self.error != KAFKA_NONE and (self.leader_epoch, self.end_offset) != (None, None):
            _fail(self, "error", "an error reply carries no epoch and no end offset")


@dataclass(frozen=True)
class FetchRequest:
    """Follower -> leader: the entries from `fetch_offset` (the follower's log end offset), which
    also tells the leader how far the follower got. `current_leader_epoch` as in OffsetsForLeaderEpoch."""

    replica: str
    fetch_offset: int
    current_leader_epoch: int | None

    def __post_init__(self) -> None:
        _server(self, "replica")
        _count(self, "fetch_offset")
        _optional_count(self, "current_leader_epoch")


@dataclass(frozen=True)
class FetchReply:
    """Leader -> follower: the entries (epoch, payload) from the fetch offset, the leader's high
    watermark and log end offset; or an error (OFFSET_OUT_OF_RANGE: the fetch offset is past the
    log end offset, which the reply carries)."""

    leader: str
    error: int
    high_watermark: int
    log_end_offset: int
    entries: tuple[tuple[int, bytes], ...]

    def __post_init__(self) -> None:
        _server(self, "leader")
        _kafka_error(self)
        _count(self, "high_watermark")
        _count(self, "log_end_offset")
        if self.high_watermark > self.log_end_offset:
            _fail(self, "high_watermark", f"{self.high_watermark} is past the log end offset {self.log_end_offset}")
        # (Epochs may decrease along a log that a broken truncation rule let diverge.)
        _entries(self, MAX_U64, "epoch", "2**64-1")
        if self.error != KAFKA_NONE and self.entries:
            _fail(self, "entries", "an error reply carries no entries")
        if len(self.entries) > self.log_end_offset:
            _fail(self, "entries", f"{len(self.entries)} entries, more than the log end offset {self.log_end_offset}")


# Kafka's messages, and the field that names the sender of each (None: the controller).
KAFKA_MESSAGES = (LeaderAndIsr, UpdateMetadata, AlterIsr, AlterIsrReply, OffsetsForLeaderEpoch,
                  OffsetsForLeaderEpochReply, FetchRequest, FetchReply)
KAFKA_SENDER_FIELD: dict[type, str | None] = {
    LeaderAndIsr: None, UpdateMetadata: None, AlterIsrReply: None, AlterIsr: "leader",
    OffsetsForLeaderEpoch: "replica", FetchRequest: "replica", OffsetsForLeaderEpochReply: "leader",
    FetchReply: "leader",
}
KafkaMessage = Union[LeaderAndIsr, UpdateMetadata, AlterIsr, AlterIsrReply, OffsetsForLeaderEpoch,
                     OffsetsForLeaderEpochReply, FetchRequest, FetchReply]
ALL_MESSAGES = ALL_MESSAGES + KAFKA_MESSAGES


# ------------------------------------------------------------------ BookKeeper's messages
# One ledger (impl.bookkeeper): the writer's adds, the recovery client's fencing LAC reads and
# recovery reads, and its write-back of the closed ledger. Entry ids are indexes (1-based), as in
# the model; BookKeeper's own start at 0.

# BookKeeper's return codes, as BKException.Code numbers them (without the sign), and one of hwm's.
BK_OK = 0
BK_MISSING_ENTRIES = 1  # hwm's: the add starts past the bookie's journal end (the reply names the end)
BK_NO_SUCH_ENTRY = 13  # NoSuchEntryException (-13)
BK_FENCED = 101  # LedgerFencedException (-101)
BK_CODES = {BK_OK: "EOK", BK_MISSING_ENTRIES: "EMISSINGENTRIES", BK_NO_SUCH_ENTRY: "ENOENTRY",
            BK_FENCED: "EFENCED"}


def _bk_code(message: object, allowed: tuple[int, ...]) -> None:
    code = getattr(message, "code")
    if type(code) is not int or code not in allowed:
        _fail(message, "code", f"{code!r} is not one of {', '.join(f'{c} {BK_CODES[c]}' for c in allowed)}")


@dataclass(frozen=True)
class AddEntries:
    """Writer -> bookie: the entries `first_entry`, `first_entry`+1, ... of the writer's ledger, with
    its last-add-confirmed piggybacked. BookKeeper sends each entry as its own add; one request here
    carries a run of them, as the model's `send_add` is one exchange. With no entries it is the
    explicit LAC (WriteLac), and `first_entry` is the entry after the writer's last."""

    writer: str
    generation: int
    first_entry: int
    entries: tuple[tuple[int, bytes], ...]
    lac: int

    def __post_init__(self) -> None:
        _server(self, "writer")
        _count(self, "generation")
        _count(self, "first_entry", positive=True)
        _count(self, "lac")
        _entries(self, self.generation, "generation",
                 f"{self.generation} (a writer adds no entry newer than its own generation)")
        if self.first_entry - 1 + len(self.entries) > MAX_U64:
            _fail(self, "entries", "the last entry id would exceed 2**64-1")
        if self.lac >= self.first_entry + len(self.entries):
            _fail(self, "lac", f"{self.lac} is past the last entry the writer has "
                  f"({self.first_entry - 1 + len(self.entries)})")


@dataclass(frozen=True)
class AddReply:
    """Bookie -> writer: EOK (the journal now ends at `last_entry`, durably), EFENCED (the ledger is
    being recovered: the writer stops) or EMISSINGENTRIES (the journal ends at `last_entry`, before
    the add's first entry: send from there)."""

    bookie: str
    code: int
    last_entry: int

    def __post_init__(self) -> None:
        _server(self, "bookie")
        _bk_code(self, (BK_OK, BK_MISSING_ENTRIES, BK_FENCED))
        _count(self, "last_entry")


@dataclass(frozen=True)
class ReadLac:
    """Recovery client -> bookie: the bookie's last-add-confirmed; with `fence`, the fencing read of
    ledger recovery (the bookie is fenced before it answers)."""

    client: str
    fence: bool

    def __post_init__(self) -> None:
        _server(self, "client")
        _flag(self, "fence")


@dataclass(frozen=True)
class ReadLacReply:
    """Bookie -> recovery client: its LAC and its journal (`entries` holds entries 1..n, n >= lac; an
    entry of other bookies' write sets is a hole, generation 0), so the recovery client can write the
    closed ledger back."""

    bookie: str
    lac: int
    entries: tuple[tuple[int, bytes], ...]

    def __post_init__(self) -> None:
        _server(self, "bookie")
        _count(self, "lac")
        _entries(self, MAX_U64, "generation", "2**64-1")
        if len(self.entries) < self.lac:
            _fail(self, "entries", f"{len(self.entries)} entries, but the LAC is {self.lac} (entries 1..LAC at least)")


@dataclass(frozen=True)
class ReadEntry:
    """Recovery client -> bookie: entry `entry`; with `fence` (FLAG_DO_FENCING, apache/bookkeeper
    pull request 2616) the bookie is fenced before it answers."""

    client: str
    entry: int
    fence: bool

    def __post_init__(self) -> None:
        _server(self, "client")
        _count(self, "entry", positive=True)
        _flag(self, "fence")


@dataclass(frozen=True)
class ReadEntryReply:
    """Bookie -> recovery client: EOK with the entry (one (generation, payload) pair in `entries`),
    or ENOENTRY with none."""

    bookie: str
    code: int
    entry: int
    entries: tuple[tuple[int, bytes], ...]

    def __post_init__(self) -> None:
        _server(self, "bookie")
        _bk_code(self, (BK_OK, BK_NO_SUCH_ENTRY))
        _count(self, "entry", positive=True)
        _entries(self, MAX_U64, "generation", "2**64-1")
        if len(self.entries) != (1 if self.code == BK_OK else 0):
            _fail(self, "entries", f"{len(self.entries)} entries with code {BK_CODES[self.code]} "
                  f"(EOK carries the entry, ENOENTRY none)")


@dataclass(frozen=True)
class RecoveryAdd:
    """Recovery client -> bookie: BookKeeper's recovery adds (RECOVERY_ADD, which a fenced bookie
    takes) of the entries 1..len(entries) recovery will close the ledger with, before it closes it.
    An entry of the bookie's write sets in the last fragment is written; a hole (generation 0) is an
    entry not to write back there: the bookie keeps what it has. Nothing is truncated and the LAC
    does not move (the ledger is not closed yet). Answered with an AddReply once durable; recovery
    closes the ledger once an ack quorum of each entry's write set acknowledged it."""

    client: str
    entries: tuple[tuple[int, bytes], ...]

    def __post_init__(self) -> None:
        _server(self, "client")
        _entries(self, MAX_U64, "generation", "2**64-1")


@dataclass(frozen=True)
class CloseLedger:
    """Recovery client -> bookie: the closed ledger, entries 1..len(entries), once the ledger's
    metadata records its end (after the `RecoveryAdd`s reached an ack quorum). An entry of the bookie's write sets in the
    last fragment is written; a hole (generation 0) is an entry not to write back there (another
    write set's, or an earlier fragment's, which is immutable): the bookie keeps what it has. It
    keeps nothing beyond the last entry (never read again), takes the last as its LAC, and answers
    with an AddReply once that is durable."""

    client: str
    entries: tuple[tuple[int, bytes], ...]

    def __post_init__(self) -> None:
        _server(self, "client")
        _entries(self, MAX_U64, "generation", "2**64-1")


BOOKKEEPER_MESSAGES = (AddEntries, AddReply, ReadLac, ReadLacReply, ReadEntry, ReadEntryReply, RecoveryAdd,
                       CloseLedger)
BOOKKEEPER_SENDER_FIELD: dict[type, str] = {
    AddEntries: "writer", AddReply: "bookie", ReadLac: "client", ReadLacReply: "bookie", ReadEntry: "client",
    ReadEntryReply: "bookie", RecoveryAdd: "client", CloseLedger: "client",
}
BookKeeperMessage = Union[AddEntries, AddReply, ReadLac, ReadLacReply, ReadEntry, ReadEntryReply, RecoveryAdd,
                          CloseLedger]
ALL_MESSAGES = ALL_MESSAGES + BOOKKEEPER_MESSAGES
