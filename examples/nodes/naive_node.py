#!/usr/bin/env python3
"""log_node.py with the High-Water Mark pattern's three classic mistakes, to see hwm catch each.

    python3 examples/nodes/naive_node.py                               # all three mistakes
    python3 examples/nodes/naive_node.py --mistakes ack-on-write       # one of them
    NAIVE_MISTAKES=poll-above-hwm python3 examples/nodes/naive_node.py  # the same, by environment

- ack-on-write: acknowledge a send (an append) on the leader's own write, before a majority stores
  it; a new leader without the entry loses an acknowledged send.
- poll-above-hwm: serve polls (reads) from the whole log, above the high-water mark; a client sees
  an entry that a new leader then truncates.
- truncate-to-own-hwm: on restart, cut the log back to the node's own high-water mark (Kafka before
  KIP-101); entries a majority acknowledged can be lost when the restarted node becomes leader.
"""

import os
import sys

import log_node  # the sibling file: Python puts this script's folder on the import path

ALL = ("ack-on-write", "poll-above-hwm", "truncate-to-own-hwm")


def chosen_mistakes(argv, environ):
    text = environ.get("NAIVE_MISTAKES", ",".join(ALL))
    if len(argv) >= 2 and argv[0] == "--mistakes":
        text = argv[1]
    elif argv:
        sys.exit(f"naive_node.py: usage: naive_node.py [--mistakes {','.join(ALL)}] (got {' '.join(argv)!r})")
    chosen = {m for m in text.split(",") if m}
    unknown = chosen - set(ALL)
    if unknown:
        sys.exit(f"naive_node.py: unknown mistake {sorted(unknown)[0]!r}; choose from {', '.join(ALL)}")
    return chosen


if __name__ == "__main__":
    log_node.MISTAKES.update(chosen_mistakes(sys.argv[1:], os.environ))
    log_node.main()
