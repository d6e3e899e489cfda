"""The frame length limit at its boundary: a length prefix of exactly MAX_FRAME_BYTES is allowed (the
frame is then judged by what follows it), one more is refused as too long. (A mutant of impl/codec.py
that the suite missed: docs/mutation.md.)"""

from __future__ import annotations

import pytest

from hwm.impl.codec import LENGTH_PREFIX, MAX_FRAME_BYTES, CodecError, decode_frame


def test_a_length_prefix_of_exactly_the_maximum_is_not_too_long():
    with pytest.raises(CodecError, match=f"says its payload is {MAX_FRAME_BYTES} bytes but 0 follow"):
        decode_frame(LENGTH_PREFIX.pack(MAX_FRAME_BYTES))


def test_a_length_prefix_above_the_maximum_is_too_long():
    with pytest.raises(CodecError, match=f"frame length {MAX_FRAME_BYTES + 1} exceeds the maximum"):
        decode_frame(LENGTH_PREFIX.pack(MAX_FRAME_BYTES + 1))
