"""What a run killed with SIGKILL left, removed by the next run (bridge/servers/lifecycle.py's
remove_stale_runs), without a server binary: its folder and the process groups of its members, those
its owner file records and one it started but had not recorded yet when it was killed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hwm.bridge.servers.lifecycle import OWNER_FILE, RUN_PREFIX, remove_stale_runs


def _member(folder) -> subprocess.Popen:
    # A stand-in member: a process group of its own whose command line names the run's folder.
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(folder / "n1")],
                            start_new_session=True)


def _gone(process: subprocess.Popen) -> bool:
    try:
        process.wait(timeout=5)
        return True
    except subprocess.TimeoutExpired:
        return False


def test_the_next_run_kills_recorded_and_unrecorded_members_of_a_dead_run_and_removes_its_folder():
    folder = Path(tempfile.mkdtemp(prefix=RUN_PREFIX, dir=tempfile.gettempdir()))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    recorded, unrecorded, stranger = _member(folder), _member(folder), subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        (folder / OWNER_FILE).write_text(json.dumps({"pid": dead.pid, "started": "0",
                                                     "process_groups": [recorded.pid], "filesystems": []}))
        time.sleep(0.2)  # both members have exec'd: their command lines name the folder
        notes = remove_stale_runs()
        assert any(str(folder) in note and "killed 2 of its server processes" in note for note in notes), notes
        assert _gone(recorded) and _gone(unrecorded)
        assert stranger.poll() is None  # a process that does not name the folder is left alone
        assert not folder.exists()
    finally:
        for process in (recorded, unrecorded, stranger):
            if process.poll() is None:
                os.killpg(process.pid, 9)
                process.wait()


def test_a_dead_run_whose_owner_file_has_no_start_time_is_removed_too():
    """An owner file without its process's start time (the start time could not be read) is a dead run
    once its process is gone: a missing start time never matches a missing process."""
    folder = Path(tempfile.mkdtemp(prefix=RUN_PREFIX, dir=tempfile.gettempdir()))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        (folder / OWNER_FILE).write_text(json.dumps({"pid": dead.pid, "started": None, "process_groups": [],
                                                     "filesystems": []}))
        remove_stale_runs()
        assert not folder.exists()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
