"""Two rules of Kafka's high watermark as rule hooks: which replicas of the ISR count toward it
(`counts`) and how many of them it needs (`replication_quorum`, min.insync.replicas). The controller
still elects any live ISR replica (docs/variants.md, "Other systems")."""

from hwm.model.variant import Variant


class AllInSync(Variant):
    """min.insync.replicas = every replica: the high watermark waits for an ISR of all N."""

    base = "kafka"

    def replication_quorum(self):
        return self.servers


class UncountedReplica(Variant):
    """The last replica's log end offset does not count toward the high watermark, though it stays in
    the ISR and the controller may elect it: a leader it replaced had committed entries it lacks."""

    base = "kafka"

    def counts(self, server):
        return server != self.servers - 1
