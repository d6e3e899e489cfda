"""examples/nodes/log_node.py with a planted divergence from the model: on restart it forgets its
generation (Raft's currentTerm, which must be persisted), and its vote with it. Its log and
high-water mark are kept, so no property of the catalogue breaks when it restarts, and the next
append from the leader gives the generation back."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "nodes"))

import log_node  # noqa: E402

recover = log_node.Node.recover


def forgetful(self):
    recover(self)
    self.generation, self.voted_for = 0, None


log_node.Node.recover = forgetful
log_node.main()
