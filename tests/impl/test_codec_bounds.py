"""The codec's own bounds, checked where a mutant slipped past: a FrameReader's `max_frame` must be
an int in 1..MAX_FRAME_BYTES (each bound alone, not only both), and an entry count that cannot fit
in the bytes left after it is refused there, naming how many bytes are left (docs/mutation.md)."""

from __future__ import annotations

import struct

import pytest

from hwm.impl import codec
from hwm.impl import messages as m


@pytest.mark.parametrize("max_frame", [0, -1, codec.MAX_FRAME_BYTES + 1, 1.5, "64"])
def test_a_frame_reader_refuses_a_maximum_outside_one_to_the_codecs_own(max_frame):
    with pytest.raises(ValueError, match=rf"max_frame must be an int in 1\.\.{codec.MAX_FRAME_BYTES}"):
        codec.FrameReader(max_frame)


def test_a_frame_reader_takes_each_end_of_its_range():
    assert codec.FrameReader(1).max_frame == 1
    assert codec.FrameReader(codec.MAX_FRAME_BYTES).max_frame == codec.MAX_FRAME_BYTES


def test_an_entry_count_larger_than_the_bytes_left_is_refused_with_the_bytes_left():
    payload = bytearray(codec.encode(m.AppendRequest(1, "S1", 0, 0, ((1, b"x"),), 0))[4:])
    entry = struct.pack(">Q", 1) + struct.pack(">I", 1) + b"x"  # generation 1, 1 byte of payload
    count_at = payload.find(entry) - 4
    assert payload[count_at:count_at + 4] == struct.pack(">I", 1)
    left = len(payload) - (count_at + 4)
    payload[count_at:count_at + 4] = struct.pack(">I", 2)  # 2 entries need at least 24 bytes
    with pytest.raises(codec.CodecError, match=rf"AppendRequest\.entries: 2 entries cannot fit in the {left} bytes left"):
        codec.decode(bytes(payload))
