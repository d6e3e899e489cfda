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
