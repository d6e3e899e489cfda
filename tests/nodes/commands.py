"""The node commands the tests run: the two examples and the protocol breakers."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NODES = ROOT / "examples" / "nodes"
SCHEDULES = NODES / "schedules"
# The preset log_node.py implements: raft whose new leader appends an entry of its generation, and
# whose high-water mark is in state.json with the log (`--protocol raft-noop,hwm_durable=true`).
LOG_NODE_PROTOCOL = {"preset": "raft-noop", "flags": {"hwm_durable": True}}


def log_node() -> list[str]:
    return [sys.executable, str(NODES / "log_node.py")]


def own_node(protocol: str) -> list[str]:
    """hwm's own replica behind the node protocol."""
    return [sys.executable, "-m", "hwm.cli", "node", "--stdio", "--protocol", protocol]


def naive_node(mistake: str) -> list[str]:
    return [sys.executable, str(NODES / "naive_node.py"), "--mistakes", mistake]


def bad_node(mode: str) -> list[str]:
    return [sys.executable, str(Path(__file__).parent / "bad_node.py"), mode]


