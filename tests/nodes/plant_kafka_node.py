"""hwm's own Kafka broker (`hwm node --stdio`) with a planted divergence from Kafka's model, chosen by the
first argument; the rest are `hwm node`'s arguments.

- `forget-epoch`: on restart the broker forgets the leader epoch it checkpointed (it reads 0), as a
  broker that kept it in memory only would. Its log and HW are kept, and the controller's
  LeaderAndIsr gives the epoch back at once, so no property of the catalogue breaks.
- `hw-past-isr`: a leader moves its HW to the largest log end offset among its followers' fetches
  instead of the smallest over the ISR: an entry only one follower holds is committed.
- `poll-above-hwm`: the node serves polls (and log reads) up to its log end, not its HW.
"""

import sys

from hwm.impl import kafka
from hwm.impl.storage import Durable


def forget_epoch():
    init = kafka.KafkaReplica.__init__

    def forgetful(self, server_id, peers, protocol, durable, **options):
        durable = Durable(0, durable.vote, durable.hwm, tuple(durable.log))
        init(self, server_id, peers, protocol, durable, **options)
        self.generation = 0

    kafka.KafkaReplica.__init__ = forgetful


def hw_past_isr():
    def advance(self):
        if self.role != kafka.LEADER or self._pending_isr is not None:
            return
        fetched = [self.match[k] for k in self.isr if k != self.server_id]
        hwm = min(len(self._log), max(fetched, default=0))
        if hwm <= self.high_water_mark:
            return
        self._set_high_water_mark(hwm)
        covered = [i for i in self._waiting_acks if i <= hwm]
        self._waiting_acks = [i for i in self._waiting_acks if i > hwm]
        self._acknowledged += [(i, self._log[i - 1][0]) for i in covered]

    kafka.KafkaReplica._advance_high_water_mark = advance


def poll_above_hwm():
    from hwm.impl.stdio import StdioNode

    StdioNode._readable = lambda self: self.replica.last_index


PLANTS = {"forget-epoch": forget_epoch, "hw-past-isr": hw_past_isr, "poll-above-hwm": poll_above_hwm}

if __name__ == "__main__":
    PLANTS[sys.argv[1]]()
    from hwm.cli import main

    sys.argv = ["hwm", *sys.argv[2:]]
    main()
