"""The wire codec: every message round-trips; anything malformed is a CodecError, never a crash."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwm.impl import messages as m
from hwm.impl.codec import (
    MAX_FRAME_BYTES,
    MESSAGE_TYPES,
    SCHEMA,
    VERSION,
    CodecError,
    FrameReader,
    decode,
    decode_frame,
    encode,
    encode_payload,
)

counts = st.integers(0, 2**64 - 1)
small_counts = st.integers(0, 1000)
server_ids = st.text(min_size=1, max_size=20).filter(lambda s: _utf8(s) and len(s.encode("utf-8")) <= 255)
texts = st.text(max_size=50).filter(lambda s: _utf8(s))
payloads = st.binary(max_size=64)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


@st.composite
def append_requests(draw):
    generation = draw(counts)
    entries = tuple(draw(st.lists(st.tuples(st.integers(0, generation), payloads), max_size=5)))
    prev_index = draw(st.integers(0, 2**64 - 1 - len(entries)))
    prev_generation = draw(st.integers(0, generation)) if prev_index else 0
    return m.AppendRequest(generation, draw(server_ids), prev_index, prev_generation, entries, draw(counts))


@st.composite
def vote_requests(draw):
    generation = draw(counts)
    last_index = draw(counts)
    last_generation = draw(st.integers(0, generation)) if last_index else 0
    return m.VoteRequest(generation, draw(server_ids), last_index, last_generation)


@st.composite
def zab_vote_requests(draw):
    request = draw(vote_requests())
    return m.ZabVoteRequest(request.generation, request.candidate, request.last_index, request.last_generation,
                            draw(st.booleans()), draw(st.integers(0, request.generation)))


@st.composite
def new_leaders(draw):
    generation = draw(counts)
    entries = tuple(draw(st.lists(st.tuples(st.integers(0, generation), payloads), max_size=5)))
    return m.NewLeader(generation, draw(server_ids), entries, draw(counts))


@st.composite
def new_leader_acks(draw):
    index = draw(counts)
    return m.NewLeaderAck(draw(counts), draw(server_ids), index, draw(st.integers(0, index)))


def optional(strategy):
    return st.none() | strategy


get_replies = st.one_of(
    st.builds(m.GetReply, st.integers(0, 2**64 - 1), counts, payloads, st.none()),
    st.builds(m.GetReply, st.integers(0, 2**64 - 1), st.none(), st.none(), texts, st.sampled_from(sorted(m.ERROR_CODES))),
)
put_replies = st.one_of(
    st.builds(m.PutReply, counts, st.none(), optional(server_ids)),
    st.builds(m.PutReply, st.none(), texts, optional(server_ids), st.sampled_from(sorted(m.ERROR_CODES))),
)

MESSAGES = {
    m.AppendRequest: append_requests(),
    m.AppendReply: st.builds(m.AppendReply, counts, server_ids, st.booleans(), counts),
    m.VoteRequest: vote_requests(),
    m.VoteReply: st.builds(m.VoteReply, counts, server_ids, st.booleans()),
    m.HwmQuery: st.builds(m.HwmQuery, counts, server_ids),
    m.HwmReply: st.builds(m.HwmReply, counts, server_ids, st.booleans(), counts),
    m.ZabVoteRequest: zab_vote_requests(),
    m.NewLeader: new_leaders(),
    m.NewLeaderAck: new_leader_acks(),
    m.PutRequest: st.one_of(st.builds(m.PutRequest, payloads),
                            st.builds(m.PutRequest, payloads, server_ids, st.integers(1, 2**64 - 1))),
    m.PutReply: put_replies,
    m.GetRequest: st.builds(m.GetRequest, st.integers(1, 2**64 - 1)),
    m.GetReply: get_replies,
    m.StatusRequest: st.just(m.StatusRequest()),
    m.RegisterClient: st.builds(m.RegisterClient, server_ids),
    m.StatusReply: st.builds(m.StatusReply, server_ids, st.sampled_from(m.ROLES), counts, counts, counts,
                             optional(server_ids)),
    m.ErrorReply: st.builds(m.ErrorReply, texts),
}

# Kafka's messages (impl.kafka).
server_sets = st.lists(server_ids, unique=True, max_size=5).map(tuple)
kafka_errors = st.sampled_from(sorted(m.KAFKA_ERRORS))


@st.composite
def fetch_replies(draw):
    if draw(st.booleans()):
        epochs = draw(st.lists(counts, max_size=5))
        entries = tuple((epoch, draw(payloads)) for epoch in epochs)
        end = draw(st.integers(len(entries), 2**64 - 1))
        return m.FetchReply(draw(server_ids), m.KAFKA_NONE, draw(st.integers(0, end)), end, entries)
    end = draw(counts)
    return m.FetchReply(draw(server_ids), draw(kafka_errors), draw(st.integers(0, end)), end, ())


@st.composite
def alter_isrs(draw):
    leader = draw(server_ids)
    return m.AlterIsr(leader, draw(counts), tuple(sorted(set(draw(server_sets)) | {leader})))


MESSAGES.update({
    m.LeaderAndIsr: st.builds(m.LeaderAndIsr, counts, optional(server_ids), server_sets),
    m.UpdateMetadata: st.builds(m.UpdateMetadata, counts, optional(server_ids), server_sets, server_sets),
    m.AlterIsr: alter_isrs(),
    m.AlterIsrReply: st.builds(m.AlterIsrReply, counts, st.booleans(), server_sets),
    m.OffsetsForLeaderEpoch: st.builds(m.OffsetsForLeaderEpoch, server_ids, counts, optional(counts)),
    m.OffsetsForLeaderEpochReply: st.one_of(
        st.builds(m.OffsetsForLeaderEpochReply, server_ids, st.just(m.KAFKA_NONE), optional(counts), optional(counts)),
        st.builds(m.OffsetsForLeaderEpochReply, server_ids, kafka_errors, st.none(), st.none())),
    m.FetchRequest: st.builds(m.FetchRequest, server_ids, counts, optional(counts)),
    m.FetchReply: fetch_replies(),
})

# BookKeeper's messages (impl.bookkeeper).
bk_entries = st.lists(st.tuples(counts, payloads), max_size=4).map(tuple)


@st.composite
def add_entries(draw):
    generation = draw(counts)
    entries = tuple((draw(st.integers(0, generation)), draw(payloads)) for _ in range(draw(st.integers(0, 3))))
    first = draw(st.integers(1, 2**40))
    return m.AddEntries(draw(server_ids), generation, first, entries,
                        draw(st.integers(0, first - 1 + len(entries))))


@st.composite
def read_entry_replies(draw):
    code = draw(st.sampled_from((m.BK_OK, m.BK_NO_SUCH_ENTRY)))
    entries = ((draw(counts), draw(payloads)),) if code == m.BK_OK else ()
    return m.ReadEntryReply(draw(server_ids), code, draw(st.integers(1, 2**64 - 1)), entries)


MESSAGES.update({
    m.AddEntries: add_entries(),
    m.AddReply: st.builds(m.AddReply, server_ids, st.sampled_from((m.BK_OK, m.BK_MISSING_ENTRIES, m.BK_FENCED)),
                          counts),
    m.ReadLac: st.builds(m.ReadLac, server_ids, st.booleans()),
    m.ReadLacReply: bk_entries.flatmap(lambda e: st.builds(m.ReadLacReply, server_ids, st.just(len(e)), st.just(e))),
    m.ReadEntry: st.builds(m.ReadEntry, server_ids, st.integers(1, 2**64 - 1), st.booleans()),
    m.ReadEntryReply: read_entry_replies(),
    m.CloseLedger: st.builds(m.CloseLedger, server_ids, bk_entries),
    m.RecoveryAdd: st.builds(m.RecoveryAdd, server_ids, bk_entries),
})
any_message = st.one_of(*MESSAGES.values())


def test_every_message_type_has_a_schema_and_a_strategy():
    assert set(SCHEMA) == set(m.ALL_MESSAGES) == set(MESSAGES)
    for cls, (code, layout) in SCHEMA.items():
        assert tuple(name for name, _ in layout) == m.field_names(cls), cls
        assert MESSAGE_TYPES[code] is cls


@pytest.mark.parametrize("cls", list(MESSAGES), ids=lambda cls: cls.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_round_trip(cls, data):
    message = data.draw(MESSAGES[cls])
    frame = encode(message)
    (length,) = struct.unpack(">I", frame[:4])
    assert length == len(frame) - 4
    assert frame[4] == VERSION
    assert decode(frame[4:]) == message
    assert decode_frame(frame) == message


@settings(max_examples=50, deadline=None)
@given(st.lists(any_message, max_size=6), st.data())
def test_frame_reader_reassembles_a_stream_cut_anywhere(messages, data):
    stream = b"".join(encode(msg) for msg in messages)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    reader = FrameReader()
    decoded = []
    for start, end in zip([0] + cuts, cuts + [len(stream)]):
        decoded += list(reader.messages(stream[start:end]))
    assert decoded == messages
    assert reader.buffered == 0


def expect_codec_error(payload: bytes) -> str:
    with pytest.raises(CodecError) as error:
        decode(payload)
    return str(error.value)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_garbage_is_a_codec_error_or_a_valid_message(garbage):
    try:
        message = decode(garbage)
    except CodecError:
        return
    assert encode_payload(message) == garbage  # the only bytes that decode are a message's encoding


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(MESSAGE_TYPES)), st.binary(max_size=120))
def test_garbage_after_a_valid_header_is_a_codec_error_or_a_valid_message(code, body):
    payload = bytes((VERSION, code)) + body
    try:
        message = decode(payload)
    except CodecError:
        return
    assert encode_payload(message) == payload


@settings(max_examples=100, deadline=None)
@given(any_message, st.data())
def test_every_truncation_and_every_extension_is_refused(message, data):
    payload = encode_payload(message)
    cut = data.draw(st.integers(0, len(payload) - 1))
    expect_codec_error(payload[:cut])
    extra = data.draw(st.binary(min_size=1, max_size=8))
    assert "trailing bytes" in expect_codec_error(payload + extra)


@settings(max_examples=100, deadline=None)
@given(any_message, st.data())
def test_a_flipped_byte_never_raises_anything_but_codec_error(message, data):
    payload = bytearray(encode_payload(message))
    position = data.draw(st.integers(0, len(payload) - 1))
    payload[position] ^= data.draw(st.integers(1, 255))
    try:
        decode(bytes(payload))
    except CodecError:
        pass


# Frames written by the version 1 codec (impl/codec.py as first committed, before client ids,
# error codes and conflict hints): PutRequest(b"hello") and AppendReply(3, "S2", False, 7).
VERSION_1_PUT = bytes.fromhex("0000000b01100000000568656c6c6f")
VERSION_1_APPEND_REPLY = bytes.fromhex("0000001601020000000000000003025332000000000000000007")


@pytest.mark.parametrize("frame", [VERSION_1_PUT, VERSION_1_APPEND_REPLY])
def test_a_version_1_frame_is_refused_naming_both_versions(frame):
    assert VERSION == 2
    with pytest.raises(CodecError) as caught:
        decode_frame(frame)
    text = str(caught.value)
    assert "unsupported codec version 1" in text and "speaks version 2" in text
    assert "client ids" in text  # what the old format lacks
    # Streamed, the same: the runtime answers it with an ErrorReply naming it.
    payload, = FrameReader().feed(frame)
    with pytest.raises(CodecError, match="version 1.*version 2"):
        decode(payload)


def test_errors_name_what_was_wrong():
    vote = encode_payload(m.VoteReply(3, "S1", True))
    assert "version 9" in expect_codec_error(bytes((9,)) + vote[1:])
    assert "unknown message type 99" in expect_codec_error(bytes((VERSION, 99)))
    assert "too short" in expect_codec_error(b"")
    assert "VoteReply.granted" in expect_codec_error(vote[:-2])
    assert "VoteReply.granted: bool byte is 2" in expect_codec_error(vote[:-2] + b"\x02\x00")
    assert "2 trailing bytes" in expect_codec_error(vote + b"\x00\x00")
    # A server id that is not UTF-8.
    bad_id = bytes((VERSION, 4)) + struct.pack(">Q", 3) + b"\x02\xff\xfe" + b"\x01"
    assert "VoteReply.voter: server id is not valid UTF-8" in expect_codec_error(bad_id)
    empty_id = bytes((VERSION, 4)) + struct.pack(">Q", 3) + b"\x00" + b"\x01" + b"\x00"
    assert "VoteReply.voter: a server id cannot be empty" in expect_codec_error(empty_id)
    # Lengths larger than what is left, and absurd entry counts, are refused before allocating.
    put = bytes((VERSION, 16)) + struct.pack(">I", 2**32 - 1)
    assert "PutRequest.value: length 4294967295 exceeds the 0 bytes left" in expect_codec_error(put)
    append = encode_payload(m.AppendRequest(2, "S1", 0, 0, (), 0))
    count_at = 2 + 8 + 3 + 8 + 8
    huge = append[:count_at] + struct.pack(">I", 10**9) + append[count_at + 4:]
    assert "1000000000 entries cannot fit" in expect_codec_error(huge)
    # Field invariants of the message itself.
    newer = encode_payload(m.AppendRequest(2, "S1", 0, 0, ((2, b""),), 0)).replace(
        struct.pack(">Q", 2) + struct.pack(">I", 0), struct.pack(">Q", 7) + struct.pack(">I", 0))
    assert "AppendRequest.entries[0]" in expect_codec_error(newer)
    get = bytes((VERSION, 18)) + struct.pack(">Q", 0)
    assert "GetRequest.index: 0 is out of range" in expect_codec_error(get)
    both = bytes((VERSION, 17)) + b"\x01" + struct.pack(">Q", 1) + b"\x01" + struct.pack(">I", 1) + b"x" + b"\x00" + struct.pack(">Q", 0)
    assert "exactly one of index and error" in expect_codec_error(both)
    role = bytes((VERSION, 21)) + b"\x02S1" + b"\x04king" + struct.pack(">QQQ", 1, 1, 1) + b"\x00"
    assert "StatusReply.role: 'king'" in expect_codec_error(role)


def test_decode_refuses_what_is_not_bytes():
    with pytest.raises(CodecError, match="bytes"):
        decode("hello")  # type: ignore[arg-type]


def test_encode_refuses_what_is_not_a_message_or_too_big():
    with pytest.raises(CodecError, match="not a message type"):
        encode(object())  # type: ignore[arg-type]
    with pytest.raises(CodecError, match="maximum frame"):
        encode(m.PutRequest(bytes(MAX_FRAME_BYTES)))


def test_messages_validate_their_fields_on_construction():
    with pytest.raises(ValueError, match="AppendReply.index: -1 is out of range"):
        m.AppendReply(1, "S1", True, -1)
    with pytest.raises(ValueError, match="VoteReply.granted: expected a bool"):
        m.VoteReply(1, "S1", 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at most 255"):
        m.HwmQuery(1, "S" * 256)
    with pytest.raises(ValueError, match="prev_generation"):
        m.AppendRequest(1, "S1", 0, 1, (), 0)


def test_frame_reader_refuses_an_oversized_length_before_buffering():
    reader = FrameReader(max_frame=1024)
    with pytest.raises(CodecError, match="frame length 1025 exceeds the maximum of 1024"):
        reader.feed(struct.pack(">I", 1025) + b"x" * 10)
    assert reader.buffered == 0
    with pytest.raises(CodecError):
        reader.feed(encode(m.StatusRequest()))  # the stream cannot be resynchronised


def test_frame_reader_default_limit_is_16_mib():
    reader = FrameReader()
    assert reader.feed(struct.pack(">I", MAX_FRAME_BYTES)) == []
    with pytest.raises(CodecError):
        FrameReader().feed(struct.pack(">I", MAX_FRAME_BYTES + 1))
    with pytest.raises(CodecError, match="exceeds"):
        decode_frame(struct.pack(">I", MAX_FRAME_BYTES + 1))
    with pytest.raises(CodecError, match="says its payload is 5 bytes but 1 follow"):
        decode_frame(struct.pack(">I", 5) + b"x")


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_frame_reader_on_garbage_yields_payloads_or_codec_error(garbage):
    reader = FrameReader(max_frame=256)
    try:
        for payload in reader.feed(garbage):
            try:
                decode(payload)
            except CodecError:
                pass
    except CodecError:
        pass


def test_kafka_messages_validate_their_fields():
    with pytest.raises(ValueError, match=r"LeaderAndIsr.isr: \['S1', 'S1'\] names a server twice"):
        m.LeaderAndIsr(1, "S1", ("S1", "S1"))
    with pytest.raises(ValueError, match="AlterIsr.isr: .* leaves out the leader S1"):
        m.AlterIsr("S1", 2, ("S2", "S3"))
    with pytest.raises(ValueError, match="FetchReply.error: 3 is not one of Kafka's error codes"):
        m.FetchReply("S1", 3, 0, 0, ())
    with pytest.raises(ValueError, match=r"FetchReply.entries\[1\]: epoch -1 is not an int"):
        m.FetchReply("S1", m.KAFKA_NONE, 0, 2, ((2, b"a"), (-1, b"b")))
    with pytest.raises(ValueError, match="FetchReply.high_watermark: 3 is past the log end offset 2"):
        m.FetchReply("S1", m.KAFKA_NONE, 3, 2, ())
    with pytest.raises(ValueError, match="an error reply carries no entries"):
        m.FetchReply("S1", m.OFFSET_OUT_OF_RANGE, 0, 1, ((1, b"a"),))
    with pytest.raises(ValueError, match="an error reply carries no epoch"):
        m.OffsetsForLeaderEpochReply("S1", m.FENCED_LEADER_EPOCH, 1, 3)
    # On the wire: a duplicated ISR member and an unknown error code are CodecErrors naming the field.
    payload = encode_payload(m.LeaderAndIsr(1, None, ("S1", "S2")))
    assert "LeaderAndIsr.isr" in expect_codec_error(payload.replace(b"\x02S2", b"\x02S1"))
    fetch = encode_payload(m.FetchReply("S1", m.KAFKA_NONE, 0, 0, ()))
    assert "FetchReply.error: 9 is not one of Kafka's error codes" in expect_codec_error(
        fetch.replace(struct.pack(">Q", 0), struct.pack(">Q", 9), 1))
    assert "LeaderAndIsr.isr[1]: length 2 exceeds the 0 bytes left" in expect_codec_error(payload[:-2])


def test_bookkeeper_messages_validate_their_fields():
    with pytest.raises(ValueError, match="AddEntries.lac: 3 is past the last entry the writer has \\(2\\)"):
        m.AddEntries("S4", 1, 2, ((1, b"a"),), 3)
    with pytest.raises(ValueError, match=r"AddEntries.entries\[0\]: generation 2 is not an int in 0..1"):
        m.AddEntries("S4", 1, 1, ((2, b"a"),), 0)
    with pytest.raises(ValueError, match="AddEntries.first_entry: 0 is out of range 1..2"):
        m.AddEntries("S4", 1, 0, (), 0)
    with pytest.raises(ValueError, match="AddReply.code: 13 is not one of 0 EOK, 1 EMISSINGENTRIES, 101 EFENCED"):
        m.AddReply("S1", m.BK_NO_SUCH_ENTRY, 0)
    with pytest.raises(ValueError, match="ReadLacReply.entries: 1 entries, but the LAC is 2"):
        m.ReadLacReply("S1", 2, ((1, b"a"),))
    with pytest.raises(ValueError, match="ReadEntryReply.entries: 0 entries with code EOK"):
        m.ReadEntryReply("S1", m.BK_OK, 1, ())
    # On the wire: a code out of the protocol's and a LAC the entries do not fill are CodecErrors.
    reply = encode_payload(m.AddReply("S1", m.BK_FENCED, 4))
    assert "AddReply.code: 2 is not one of" in expect_codec_error(
        reply.replace(struct.pack(">Q", m.BK_FENCED), struct.pack(">Q", 2)))
    lac = encode_payload(m.ReadLacReply("S1", 0, ()))
    assert "ReadLacReply.entries: 0 entries, but the LAC is 7" in expect_codec_error(
        lac.replace(struct.pack(">Q", 0), struct.pack(">Q", 7), 1))
