"""`hwm node --stdio` on the real clock answers `hwm_state` with its state after everything before the
request, as `hwm test` reads the answer: the lines of one read are handled before one flush, and
the flush changes the state (Kafka's embedded controller answers its own broker's AlterIsr there)."""

from __future__ import annotations

import base64
import json

from hwm.impl import codec
from hwm.impl import messages as m
from hwm.impl.stdio import PEER_TYPE, StdioNode
from hwm.properties.protocol import PRESETS

NODE_IDS = ["n1", "n2", "n3"]


def line(src: str, body: dict) -> bytes:
    return json.dumps({"src": src, "dest": "n1", "body": body}).encode()


def fetch_from(replica: str, offset: int, n: int) -> bytes:
    frame = base64.b64encode(codec.encode_payload(m.FetchRequest(replica, offset, None))).decode("ascii")
    return line(replica, {"type": PEER_TYPE, "message": "FetchRequest", "frame": frame, "link": [1, n, 0]})


def state(out: list[bytes]) -> dict:
    answers = [json.loads(raw)["body"] for raw in out if b'"hwm_state_ok"' in raw]
    assert len(answers) == 1, out
    return answers[0]


def test_a_state_answer_read_with_the_input_before_it_shows_what_that_input_did(tmp_path):
    node = StdioNode(PRESETS["kafka"].protocol, clock="real", data_dir=str(tmp_path), log=open(tmp_path / "log", "w"))
    node.handle_line(line("c0", {"type": "init", "msg_id": 1, "node_id": "n1", "node_ids": NODE_IDS}))
    for _ in range(120):  # the controller in n1 waits for the other brokers, then elects n1 with ISR {n1}
        node.tick()
    node._handle(line("c0", {"type": "hwm_state", "msg_id": 2}))
    before = state(node.flush())
    assert (before["role"], before["isr"]) == ("leader", ["n1"])
    # n3 fetches from offset 0, the HW: n1 asks its own controller to add n3, answered in the flush. The
    # request and hwm's state request come in one read, as on the real clock they usually do.
    node._handle(fetch_from("n3", 0, 1))
    node._handle(line("c0", {"type": "hwm_state", "msg_id": 3}))
    after = state(node.flush())
    assert after["isr"] == ["n1", "n3"], after  # before the fix: ["n1"], the ISR of the request before
