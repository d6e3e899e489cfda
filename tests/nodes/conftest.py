import os
import sys

import pytest

from tests.console import workspace


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """A scratch current directory with a link to examples/, for a page's commands; `hwm node --stdio`
    in them is this checkout's hwm, found where this interpreter is."""
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    with workspace(tmp_path, links=("examples",)):
        yield tmp_path


@pytest.fixture
def alive():
    """alive(pid): whether a process with that id still exists (and is not a zombie)."""
    def check(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().split(")")[-1].split()[0] != "Z"
        except FileNotFoundError:
            return False
    return check
