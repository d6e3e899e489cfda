"""What a put says when no server wrote it: `UnknownOutcomeError` only where some server may hold the
value, `NoLeaderError` where every answer says it was not written (impl/client.py's `_write`)."""

from __future__ import annotations

import pytest

from hwm.impl import messages as m
from hwm.impl.client import Client, NoLeaderError, UnknownOutcomeError


def client_answered(code: int) -> Client:
    """A client whose every request is answered with `code` (no network: its `_call` is replaced)."""
    client = Client({"S0": ("127.0.0.1", 9), "S1": ("127.0.0.1", 9)}, timeout=0.3, retry_pause=0.05)
    client._session = True  # the session is open: only the put's own answers count
    client._call = lambda server, request, timeout: m.PutReply(None, "refused", code=code)
    return client


def test_answers_that_nothing_was_written_give_no_leader_not_an_unknown_outcome():
    with pytest.raises(NoLeaderError) as caught:
        client_answered(m.NOT_WRITTEN).put(b"v")
    assert not isinstance(caught.value, UnknownOutcomeError)


def test_an_answer_that_the_outcome_is_unknown_says_the_value_may_be_written():
    with pytest.raises(UnknownOutcomeError, match="may or may not have been written"):
        client_answered(m.OUTCOME_UNKNOWN).put(b"v")
