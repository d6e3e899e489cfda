"""examples/nodes/log_node.py with a planted lie in its introspection answers: as leader it reports
its high-water mark as the end of its log, before a majority stores the last entry."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "nodes"))

import log_node  # noqa: E402

honest = log_node.Node.on_hwm_state


def lying(self, msg):
    if self.role == "leader" and len(self.log) > 1:
        saved, self.hwm = self.hwm, len(self.log)
        honest(self, msg)
        self.hwm = saved
    else:
        honest(self, msg)


log_node.Node.on_hwm_state = lying
log_node.main()
