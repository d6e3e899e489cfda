"""The wire format: versioned, length-prefixed, validating.

Frame::

    length   4 bytes, big-endian, unsigned: the size of the payload (at most MAX_FRAME_BYTES)
    payload  version (1 byte, VERSION) | message type (1 byte, MESSAGE_TYPES) | fields

Fields, in the order the dataclass in ``impl.messages`` declares them, all integers big-endian:

    count     8 bytes, unsigned (generation, index, hwm ...)
    bool      1 byte, 0 or 1 (any other value is an error)
    server    1-byte length + that many bytes of UTF-8, non-empty
    text      4-byte length + UTF-8
    bytes     4-byte length + raw bytes
    optional  1 presence byte (0 absent, 1 present) + the field
    entries   4-byte count + per entry: count (generation) + bytes (payload)
    servers   1-byte count + that many servers (a set of replicas: Kafka's ISR, live brokers)

Versions: a frame of another version is refused with a CodecError naming both versions (servers and
clients of one cluster run the same version; there is no negotiation).

    1  the first format
    2  PutRequest gains client and request ids, PutReply and GetReply an error code, AppendReply a
       conflict hint (hint_index, hint_generation), VoteRequest and VoteReply the pre_vote flag;
       RegisterClient opens a client session, and error code 6 is "session expired"

Decoding checks everything and raises ``CodecError`` naming what was wrong (version, type, which
field of which message, how many bytes were missing or left over); it never raises anything else,
so a runtime can answer malformed input with an ``ErrorReply`` and carry on.
"""

from __future__ import annotations

import struct
from typing import Iterator

from hwm.impl import messages as m

VERSION = 2
# What each earlier version lacks, for the error that refuses its frames.
OLDER_VERSIONS = {1: "without client ids, request ids, error codes, conflict hints and pre-votes"}
MAX_FRAME_BYTES = 16 * 1024 * 1024  # 16 MiB: a bigger length prefix is refused before buffering
LENGTH_PREFIX = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_U32 = struct.Struct(">I")


class CodecError(ValueError):
    """A frame or payload that is not a valid message; the text names what was wrong."""


# Field kinds, per message class, in dataclass order.
COUNT, BOOL, SERVER, TEXT, BYTES, ENTRIES, ROLE = "count", "bool", "server", "text", "bytes", "entries", "role"
OPTIONAL = "optional "
SERVERS = "servers"

SCHEMA: dict[type, tuple[int, tuple[tuple[str, str], ...]]] = {
    m.AppendRequest: (1, (("generation", COUNT), ("leader", SERVER), ("prev_index", COUNT),
                          ("prev_generation", COUNT), ("entries", ENTRIES), ("leader_hwm", COUNT))),
    m.AppendReply: (2, (("generation", COUNT), ("follower", SERVER), ("success", BOOL), ("index", COUNT),
                        ("hint_index", COUNT), ("hint_generation", COUNT))),
    m.VoteRequest: (3, (("generation", COUNT), ("candidate", SERVER), ("last_index", COUNT),
                        ("last_generation", COUNT), ("pre_vote", BOOL))),
    m.VoteReply: (4, (("generation", COUNT), ("voter", SERVER), ("granted", BOOL), ("pre_vote", BOOL))),
    m.HwmQuery: (5, (("generation", COUNT), ("server", SERVER))),
    m.HwmReply: (6, (("generation", COUNT), ("server", SERVER), ("leader", BOOL), ("hwm", COUNT))),
    # ZAB (impl.zab): codes of their own, apart from the raft family's.
    m.ZabVoteRequest: (48, (("generation", COUNT), ("candidate", SERVER), ("last_index", COUNT),
                            ("last_generation", COUNT), ("pre_vote", BOOL), ("current_epoch", COUNT))),
    m.NewLeader: (49, (("generation", COUNT), ("leader", SERVER), ("entries", ENTRIES), ("leader_hwm", COUNT))),
    m.NewLeaderAck: (50, (("generation", COUNT), ("follower", SERVER), ("index", COUNT), ("logged", COUNT))),
    m.PutRequest: (16, (("value", BYTES), ("client", OPTIONAL + SERVER), ("request", COUNT))),
    m.PutReply: (17, (("index", OPTIONAL + COUNT), ("error", OPTIONAL + TEXT), ("leader", OPTIONAL + SERVER),
                      ("code", COUNT))),
    m.GetRequest: (18, (("index", COUNT),)),
    m.GetReply: (19, (("index", COUNT), ("generation", OPTIONAL + COUNT), ("value", OPTIONAL + BYTES),
                      ("error", OPTIONAL + TEXT), ("code", COUNT))),
    m.StatusRequest: (20, ()),
    m.RegisterClient: (22, (("client", SERVER),)),
    m.StatusReply: (21, (("server", SERVER), ("role", ROLE), ("generation", COUNT), ("last_index", COUNT),
                         ("hwm", COUNT), ("leader", OPTIONAL + SERVER))),
    m.ErrorReply: (31, (("text", TEXT),)),
}
# Kafka's replication (impl.kafka): type codes from 40 up.
SCHEMA.update({
    m.LeaderAndIsr: (40, (("leader_epoch", COUNT), ("leader", OPTIONAL + SERVER), ("isr", SERVERS))),
    m.UpdateMetadata: (41, (("leader_epoch", COUNT), ("leader", OPTIONAL + SERVER), ("isr", SERVERS),
                            ("live", SERVERS))),
    m.AlterIsr: (42, (("leader", SERVER), ("leader_epoch", COUNT), ("isr", SERVERS))),
    m.AlterIsrReply: (43, (("leader_epoch", COUNT), ("accepted", BOOL), ("isr", SERVERS))),
    m.OffsetsForLeaderEpoch: (44, (("replica", SERVER), ("leader_epoch", COUNT),
                                   ("current_leader_epoch", OPTIONAL + COUNT))),
    m.OffsetsForLeaderEpochReply: (45, (("leader", SERVER), ("error", COUNT), ("leader_epoch", OPTIONAL + COUNT),
                                        ("end_offset", OPTIONAL + COUNT))),
    m.FetchRequest: (46, (("replica", SERVER), ("fetch_offset", COUNT), ("current_leader_epoch", OPTIONAL + COUNT))),
    m.FetchReply: (47, (("leader", SERVER), ("error", COUNT), ("high_watermark", COUNT), ("log_end_offset", COUNT),
                        ("entries", ENTRIES))),
})
# BookKeeper's ledger (impl.bookkeeper): type codes from 56 up.
SCHEMA.update({
    m.AddEntries: (56, (("writer", SERVER), ("generation", COUNT), ("first_entry", COUNT), ("entries", ENTRIES),
                        ("lac", COUNT))),
    m.AddReply: (57, (("bookie", SERVER), ("code", COUNT), ("last_entry", COUNT))),
    m.ReadLac: (58, (("client", SERVER), ("fence", BOOL))),
    m.ReadLacReply: (59, (("bookie", SERVER), ("lac", COUNT), ("entries", ENTRIES))),
    m.ReadEntry: (60, (("client", SERVER), ("entry", COUNT), ("fence", BOOL))),
    m.ReadEntryReply: (61, (("bookie", SERVER), ("code", COUNT), ("entry", COUNT), ("entries", ENTRIES))),
    m.CloseLedger: (62, (("client", SERVER), ("entries", ENTRIES))),
    m.RecoveryAdd: (63, (("client", SERVER), ("entries", ENTRIES))),
})
MESSAGE_TYPES: dict[int, type] = {code: cls for cls, (code, _) in SCHEMA.items()}

# The smallest encoding of one entry (generation + empty payload): bounds an entry count.
_MIN_ENTRY_BYTES = 8 + 4


# ------------------------------------------------------------------------ encoding
def _put_count(out: bytearray, value: int) -> None:
    out += _U64.pack(value)


def _put_sized(out: bytearray, data: bytes, width: int) -> None:
    out += (bytes((len(data),)) if width == 1 else _U32.pack(len(data)))
    out += data


def _put(out: bytearray, kind: str, value: object) -> None:
    if kind.startswith(OPTIONAL):
        if value is None:
            out.append(0)
            return
        out.append(1)
        kind = kind[len(OPTIONAL):]
    if kind == COUNT:
        _put_count(out, value)  # type: ignore[arg-type]
    elif kind == BOOL:
        out.append(1 if value else 0)
    elif kind in (SERVER, ROLE):
        _put_sized(out, value.encode("utf-8"), 1)  # type: ignore[union-attr]
    elif kind == TEXT:
        _put_sized(out, value.encode("utf-8"), 4)  # type: ignore[union-attr]
    elif kind == BYTES:
        _put_sized(out, value, 4)  # type: ignore[arg-type]
    elif kind == ENTRIES:
        out += _U32.pack(len(value))  # type: ignore[arg-type]
        for generation, payload in value:  # type: ignore[union-attr]
            _put_count(out, generation)
            _put_sized(out, payload, 4)
    elif kind == SERVERS:
        out.append(len(value))  # type: ignore[arg-type]
        for server in value:  # type: ignore[union-attr]
            _put_sized(out, server.encode("utf-8"), 1)
    else:  # pragma: no cover - the schema only uses the kinds above
        raise AssertionError(kind)


def _check_counts(message: m.Message, name: str, kind: str, value: object) -> None:
    """Refuse a count the wire cannot carry (a negative prev_index, say) by message and field, whatever
    the message's own checks let through: the receiver must never decode something else than was meant."""
    if kind.startswith(OPTIONAL):
        if value is None:
            return
        kind = kind[len(OPTIONAL):]
    if kind == COUNT:
        counts = [(name, value)]
    elif kind == ENTRIES:
        counts = [(f"{name}[{k}].generation", entry[0]) for k, entry in enumerate(value)]  # type: ignore[union-attr]
    else:
        return
    for field, count in counts:
        if type(count) is not int or not 0 <= count <= m.MAX_U64:
            raise CodecError(f"cannot encode {type(message).__name__}.{field}: {count!r} is not a count "
                             f"0..2**64-1")


def encode_payload(message: m.Message) -> bytes:
    """The payload (version, type, fields) of a message, without the length prefix."""
    spec = SCHEMA.get(type(message))
    if spec is None:
        raise CodecError(f"cannot encode {type(message).__name__}: not a message type")
    code, layout = spec
    out = bytearray((VERSION, code))
    for name, kind in layout:
        value = getattr(message, name)
        _check_counts(message, name, kind, value)
        _put(out, kind, value)
    if len(out) > MAX_FRAME_BYTES:
        raise CodecError(f"{type(message).__name__} encodes to {len(out)} bytes, more than the "
                         f"maximum frame of {MAX_FRAME_BYTES} bytes")
    return bytes(out)


def encode(message: m.Message) -> bytes:
    """The full frame: 4-byte big-endian length, then the payload."""
    payload = encode_payload(message)
    return LENGTH_PREFIX.pack(len(payload)) + payload


# ------------------------------------------------------------------------ decoding
class _Reader:
    def __init__(self, data: bytes, message: str):
        self.data = memoryview(data)
        self.position = 0
        self.message = message

    def take(self, size: int, field: str, what: str) -> bytes:
        left = len(self.data) - self.position
        if size > left:
            raise CodecError(f"{self.message}.{field}: truncated: {what} needs {size} bytes, "
                             f"only {left} left")
        start = self.position
        self.position += size
        return bytes(self.data[start:self.position])

    def count(self, field: str) -> int:
        return _U64.unpack(self.take(8, field, "a count"))[0]

    def u32(self, field: str, what: str) -> int:
        return _U32.unpack(self.take(4, field, what))[0]

    def sized(self, field: str, width: int) -> bytes:
        raw = self.take(width, field, "a length")
        size = raw[0] if width == 1 else _U32.unpack(raw)[0]
        left = len(self.data) - self.position
        if size > left:
            raise CodecError(f"{self.message}.{field}: length {size} exceeds the {left} bytes left")
        return self.take(size, field, "the value")

    def text(self, field: str, width: int) -> str:
        raw = self.sized(field, width)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as error:
            what = "server id" if width == 1 else "text"
            raise CodecError(f"{self.message}.{field}: {what} is not valid UTF-8 "
                             f"(byte {error.start})") from None

    def flag(self, field: str) -> bool:
        byte = self.take(1, field, "a bool")[0]
        if byte > 1:
            raise CodecError(f"{self.message}.{field}: bool byte is {byte}, expected 0 or 1")
        return byte == 1

    def value(self, field: str, kind: str) -> object:
        if kind.startswith(OPTIONAL):
            present = self.take(1, field, "a presence byte")[0]
            if present > 1:
                raise CodecError(f"{self.message}.{field}: presence byte is {present}, expected 0 or 1")
            if not present:
                return None
            kind = kind[len(OPTIONAL):]
        if kind == COUNT:
            return self.count(field)
        if kind == BOOL:
            return self.flag(field)
        if kind in (SERVER, ROLE):
            return self.text(field, 1)
        if kind == TEXT:
            return self.text(field, 4)
        if kind == BYTES:
            return self.sized(field, 4)
        if kind == ENTRIES:
            number = self.u32(field, "an entry count")
            left = len(self.data) - self.position
            if number * _MIN_ENTRY_BYTES > left:
                raise CodecError(f"{self.message}.{field}: {number} entries cannot fit in the "
                                 f"{left} bytes left")
            return tuple((self.count(f"{field}[{k}].generation"), self.sized(f"{field}[{k}].payload", 4))
                         for k in range(number))
        if kind == SERVERS:
            number = self.take(1, field, "a server count")[0]
            return tuple(self.text(f"{field}[{k}]", 1) for k in range(number))
        raise AssertionError(kind)  # pragma: no cover


def decode(payload: bytes) -> m.Message:
    """The message in one payload (a frame without its length prefix); CodecError if invalid."""
    if not isinstance(payload, (bytes, bytearray, memoryview)):
        raise CodecError(f"a payload is bytes, not {type(payload).__name__}")
    if len(payload) > MAX_FRAME_BYTES:
        raise CodecError(f"payload of {len(payload)} bytes exceeds the maximum frame of {MAX_FRAME_BYTES} bytes")
    if len(payload) < 2:
        raise CodecError(f"payload of {len(payload)} bytes is too short: a message starts with a "
                         "version byte and a type byte")
    version, code = payload[0], payload[1]
    if version != VERSION:
        if version in OLDER_VERSIONS:
            why = f"an older format, {OLDER_VERSIONS[version]}"
        elif version > VERSION:
            why = "a newer format than this build knows"
        else:
            why = "not a version hwm ever used"
        raise CodecError(f"unsupported codec version {version}: this build speaks version {VERSION} only "
                         f"(version {version} is {why}; run the same hwm on every server and client)")
    cls = MESSAGE_TYPES.get(code)
    if cls is None:
        raise CodecError(f"unknown message type {code} (0x{code:02x})")
    name = cls.__name__
    reader = _Reader(bytes(payload), name)
    reader.position = 2
    values = {field: reader.value(field, kind) for field, kind in SCHEMA[cls][1]}
    trailing = len(reader.data) - reader.position
    if trailing:
        raise CodecError(f"{name}: {trailing} trailing bytes after the last field")
    try:
        return cls(**values)
    except ValueError as error:
        raise CodecError(str(error)) from None


def decode_frame(frame: bytes) -> m.Message:
    """The message in one whole frame (length prefix included); CodecError if invalid."""
    if len(frame) < LENGTH_PREFIX.size:
        raise CodecError(f"frame of {len(frame)} bytes is too short for its 4-byte length prefix")
    (length,) = LENGTH_PREFIX.unpack_from(frame)
    if length > MAX_FRAME_BYTES:
        raise CodecError(f"frame length {length} exceeds the maximum of {MAX_FRAME_BYTES} bytes")
    if len(frame) - LENGTH_PREFIX.size != length:
        raise CodecError(f"frame says its payload is {length} bytes but {len(frame) - LENGTH_PREFIX.size} follow")
    return decode(frame[LENGTH_PREFIX.size:])


class FrameReader:
    """Incremental deframing for a byte stream: feed what arrives, get complete payloads.

    A length prefix above `max_frame` raises CodecError as soon as its 4 bytes arrive, before any
    of the payload is buffered; the stream cannot be resynchronised after that, so every later
    `feed` raises too (close the connection).
    """

    def __init__(self, max_frame: int = MAX_FRAME_BYTES):
        if type(max_frame) is not int or not 0 < max_frame <= MAX_FRAME_BYTES:
            raise ValueError(f"max_frame must be an int in 1..{MAX_FRAME_BYTES}, got {max_frame!r}")
        self.max_frame = max_frame
        self._buffer = bytearray()
        self._broken: str | None = None

    @property
    def buffered(self) -> int:
        """Bytes received that do not yet make a whole frame."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        """Add received bytes; return the payloads of every frame now complete, in order."""
        if self._broken is not None:
            raise CodecError(self._broken)
        self._buffer += data
        payloads = []
        while len(self._buffer) >= LENGTH_PREFIX.size:
            (length,) = LENGTH_PREFIX.unpack_from(self._buffer)
            if length > self.max_frame:
                self._broken = f"frame length {length} exceeds the maximum of {self.max_frame} bytes"
                self._buffer.clear()
                raise CodecError(self._broken)
            end = LENGTH_PREFIX.size + length
            if len(self._buffer) < end:
                break
            payloads.append(bytes(self._buffer[LENGTH_PREFIX.size:end]))
            del self._buffer[:end]
        return payloads

    def messages(self, data: bytes) -> Iterator[m.Message]:
        """Like `feed`, decoding each payload (CodecError on the first invalid one)."""
        for payload in self.feed(data):
            yield decode(payload)

