"""The one place a protocol picks its simulated cluster, from a table of the systems' clusters (as
`model.registry.build_model` picks its model): raft's `SimCluster`, and the subclass of each system
whose replicas need more of it (actions, storage, views)."""

from __future__ import annotations

from hwm.bridge.simcluster.bookkeeper import BookKeeperSimCluster
from hwm.bridge.simcluster.cluster import SimCluster
from hwm.bridge.simcluster.kafka import KafkaSimCluster
from hwm.bridge.simcluster.zab import ZabSimCluster
from hwm.model.state import Config
from hwm.properties.protocol import Protocol

# Each system's simulated cluster, and so its replica class.
CLUSTERS: dict[str, type[SimCluster]] = {"raft": SimCluster, "zab": ZabSimCluster, "kafka": KafkaSimCluster,
                                         "bookkeeper": BookKeeperSimCluster}


def build_cluster(protocol: Protocol, config: Config, **options) -> SimCluster:
    """The simulated cluster of `protocol`'s system under `config`; `options` go to its class
    (`replica_factory`, `storages`, `record`, the replicas' options)."""
    if not isinstance(protocol, Protocol):
        raise TypeError(f"protocol: expected a properties.protocol.Protocol, got {type(protocol).__name__}")
    return CLUSTERS[protocol.system](protocol, config, **options)
