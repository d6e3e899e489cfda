"""Arguments the implementation checks at its edges, each where a mutant that dropped the check
passed the suite (docs/mutation.md): a client's own id is a server id's shape (it travels in the
same field of the wire format), and `makedirs` of a directory that exists is no error on either
file system (a restarted node makes its data directory again); a ZAB vote request checks the fields
it shares with raft's as well as its own; an append whose last index would pass 2**64-1 and a get
reply with a generation that is no count are refused; every message is an immutable value (the
sender, the network's queues and the receiver hold the same object)."""

from __future__ import annotations

import dataclasses
import os
import random

import pytest

from hwm.bridge.dst.disk import SimDisk
from hwm.impl.client import Client
from hwm.impl.fs import OS_FILESYSTEM
from hwm.impl import messages
from hwm.impl.messages import MAX_SERVER_ID_BYTES, AppendRequest, GetReply, ZabVoteRequest


@pytest.mark.parametrize("client_id, message", [("", "cannot be empty"), (7, "expected a str"),
                                                ("c" * (MAX_SERVER_ID_BYTES + 1), "at most")])
def test_a_client_refuses_an_id_the_wire_cannot_carry(client_id, message):
    with pytest.raises(ValueError, match=f"client_id: .*{message}"):
        Client({"S1": ("127.0.0.1", 1)}, client_id=client_id)


def test_a_client_keeps_the_id_it_is_given_and_draws_one_otherwise():
    assert Client({"S1": ("127.0.0.1", 1)}, client_id="c" * MAX_SERVER_ID_BYTES).client_id == "c" * MAX_SERVER_ID_BYTES
    drawn = {Client({"S1": ("127.0.0.1", 1)}).client_id for _ in range(3)}
    assert len(drawn) == 3


@pytest.mark.parametrize("index", [0, -1, True, 1.0, "1"])
def test_a_client_refuses_an_index_that_names_no_entry_before_it_asks_anyone(index):
    """Index 0 and the ints that are not ints (a bool) fail alike: before any connection (the port is
    one nobody listens on, which would be an error of another kind)."""
    client = Client({"S1": ("127.0.0.1", 1)}, timeout=0.2, connect_timeout=0.1)
    with pytest.raises(ValueError, match=r"^get: index must be an int >= 1"):
        client.get(index)


@pytest.mark.parametrize("make", [lambda entry: messages.ReadEntry("C1", entry, False),
                                  lambda entry: messages.ReadEntryReply("B1", messages.BK_NO_SUCH_ENTRY, entry, ())],
                         ids=["ReadEntry", "ReadEntryReply"])
def test_a_bookkeeper_entry_id_starts_at_1(make):
    assert make(1).entry == 1
    with pytest.raises(ValueError, match=r"\.entry: 0 is out of range 1\.\.2\*\*64-1"):
        make(0)


def test_makedirs_of_an_existing_directory_is_no_error(tmp_path):
    path = os.path.join(tmp_path, "data", "S1")
    OS_FILESYSTEM.makedirs(path)
    OS_FILESYSTEM.makedirs(path)
    assert os.path.isdir(path)
    disk = SimDisk(random.Random(0), ("/data",))
    disk.makedirs("/data/S1")
    disk.makedirs("/data/S1")
    assert disk.isdir("/data/S1")


@pytest.mark.parametrize("fields, message", [
    ((-1, "S1", 0, 0), r"ZabVoteRequest\.generation: -1 is out of range"),
    ((1, "", 0, 0), r"candidate: a server id cannot be empty"),
    ((1, "S1", 0, 2**64), r"ZabVoteRequest\.last_generation: .* is out of range"),
])
def test_a_zab_vote_request_checks_the_fields_it_shares_with_raft(fields, message):
    with pytest.raises(ValueError, match=message):
        ZabVoteRequest(*fields, current_epoch=0)
    with pytest.raises(ValueError, match=r"ZabVoteRequest\.current_epoch: 2 is newer"):
        ZabVoteRequest(1, "S1", 0, 0, current_epoch=2)


def test_an_append_request_whose_last_index_would_not_fit_a_u64_is_refused():
    AppendRequest(1, "S1", 2**64 - 2, 1, ((1, b"x"),), 0)  # the last index is 2**64-1: fits
    with pytest.raises(ValueError, match=r"AppendRequest\.entries: the last index would exceed 2\*\*64-1"):
        AppendRequest(1, "S1", 2**64 - 1, 1, ((1, b"x"),), 0)


@pytest.mark.parametrize("generation", [-1, 2**64, "1"])
def test_a_get_reply_refuses_a_generation_that_is_no_count(generation):
    with pytest.raises(ValueError, match=r"GetReply\.generation"):
        GetReply(1, generation, b"v")


def test_every_message_is_frozen():
    classes = [c for c in vars(messages).values() if isinstance(c, type) and dataclasses.is_dataclass(c)
               and c.__module__ == messages.__name__]
    assert len(classes) > 20 and messages.GetReply in classes
    assert [c.__name__ for c in classes if not c.__dataclass_params__.frozen] == []
    with pytest.raises(dataclasses.FrozenInstanceError):
        GetReply(1, 1, b"v").value = b"w"


@pytest.mark.parametrize("fields", [(None, None, None), (1, None, None), (None, b"v", None),
                                    (None, b"", "not committed", 5), (1, b"", "not committed", 5)])
def test_a_get_reply_holds_a_whole_entry_or_an_error_never_both(fields):  # b"": a no-op's value
    with pytest.raises(ValueError, match=r"GetReply\.error: either generation and value, or error"):
        GetReply(1, *fields)
