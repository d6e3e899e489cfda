import pytest


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
