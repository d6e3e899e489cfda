"""The real servers `hwm test --server NAME` knows, each the adapter that starts and speaks to it."""

from __future__ import annotations

import importlib

# name -> (module, adapter class, its configuration), imported when named: kazoo is an extra.
_ADAPTERS = {
    "etcd": ("hwm.bridge.servers.etcd", "Etcd", None),
    "zookeeper": ("hwm.bridge.servers.zookeeper", "ZooKeeper", None),
    # Planted: it acknowledges before its log is fsynced.
    "zookeeper:forceSync=no": ("hwm.bridge.servers.zookeeper", "ZooKeeper", {"forceSync": "no"}),
}
SERVERS = tuple(_ADAPTERS)


def server_named(name: str):
    """The adapter for `name` (one of SERVERS)."""
    if name not in _ADAPTERS:
        raise ValueError(f"unknown server {name!r}; servers are {', '.join(SERVERS)}")
    module, adapter, options = _ADAPTERS[name]
    kind = getattr(importlib.import_module(module), adapter)
    return kind() if options is None else kind(options)


__all__ = ["SERVERS", "server_named"]
