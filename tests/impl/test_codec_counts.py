"""An append request with a negative previous index never crosses the wire.

`prev_index` is a count (u64 on the wire). A negative one is refused three times over: by the
message itself, by the codec when encoding (whatever slipped past the message's checks, named by
message and field, as a CodecError and not a struct error), and on decoding, where the largest u64
must come back as itself and never as -1.
"""

from __future__ import annotations

import pytest

from hwm.impl import codec
from hwm.impl import messages as m


def test_an_append_request_refuses_a_negative_previous_index():
    with pytest.raises(ValueError, match="prev_index"):
        m.AppendRequest(1, "S1", -1, 0, (), 0)


@pytest.mark.parametrize("field, value", [("prev_index", -1), ("leader_hwm", -5), ("generation", 2**64),
                                          ("prev_index", 1.5)])
def test_the_codec_refuses_to_encode_a_count_the_wire_cannot_carry(field, value):
    request = m.AppendRequest(1, "S1", 0, 0, (), 0)
    object.__setattr__(request, field, value)  # as a bug elsewhere could: past the message's checks
    with pytest.raises(codec.CodecError, match=rf"AppendRequest\.{field}: {value!r} is not a count"):
        codec.encode(request)


def test_the_codec_refuses_a_negative_entry_generation():
    request = m.AppendRequest(1, "S1", 0, 0, ((1, b"x"),), 0)
    object.__setattr__(request, "entries", ((-1, b"x"),))
    with pytest.raises(codec.CodecError, match=r"AppendRequest\.entries\[0\]\.generation: -1"):
        codec.encode(request)


def test_the_largest_previous_index_decodes_as_itself_never_as_negative():
    largest = m.AppendRequest(1, "S1", 2**64 - 1, 1, (), 0)
    frame = codec.encode(largest)
    assert frame[4 + 2 + 8 + 1 + 2:][:8] == b"\xff" * 8  # version, type, generation, "S1": then prev_index
    assert codec.decode_frame(frame) == largest
