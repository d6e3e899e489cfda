"""A server's recording (impl/recorder.py) read back: a truncation keeps the entries before it, and
an existing but empty recording file (a crash before the header reached it) is started anew with
its header, not continued as if it held one (each a mutant the suite missed: docs/mutation.md)."""

from __future__ import annotations

import json

from hwm.impl.recorder import Recorder, ServerChanges


def test_replaying_a_truncation_keeps_the_entries_before_it():
    changes = ServerChanges()
    changes.replay({"log": [[1, 1], [2, 1], [3, 2]]})
    changes.replay({"truncate_from": 3})
    assert changes.log == (1, 1)
    changes.replay({"truncate_from": 1})
    assert changes.log == ()


def test_an_empty_recording_file_gets_a_header(tmp_path):
    path = tmp_path / "S1.jsonl"
    path.write_bytes(b"")
    recorder = Recorder(str(path), "S1", ["S1", "S2", "S3"], "raft")
    recorder.close()
    first = json.loads(path.read_text().splitlines()[0])
    assert first["part"] == "S1" and first["servers"] == ["S1", "S2", "S3"] and "crash" not in first


def test_a_recording_read_back_skips_lines_that_are_no_event(tmp_path):
    """A part whose lines were damaged (a JSON number, list or string where an event was, a torn
    line) is read back from its events alone, and the restart is recorded after them."""
    path = tmp_path / "S1.jsonl"
    Recorder(str(path), "S1", ["S1", "S2", "S3"], "raft").close()
    with open(path, "a") as part:
        part.write('{"server": "S1", "generation": 2, "role": "leader", "log": [[1, 2]]}\n42\n[1, 2]\n"log"\n{"hwm"\n')
    recorder = Recorder(str(path), "S1", ["S1", "S2", "S3"], "raft")
    recorder.close()
    assert (recorder.last.generation, recorder.last.log, recorder.last.role) == (2, (2,), "follower")
    last = json.loads(path.read_text().splitlines()[-1])
    assert (last["server"], last["crash"]) == ("S1", True)
