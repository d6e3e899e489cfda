"""Immutable model states and the bounds of a model configuration."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, NamedTuple

from hwm.properties.snapshot import FOLLOWER, LEADER, describe_server, server_name
from hwm.properties.trace import CONFIG_KEYS, full_config

__all__ = ["Config", "Server", "State", "LEADER", "FOLLOWER", "APPEND", "REPLY"]

# Message kinds on the async network. An append request is
# (APPEND, generation, prev_index, prev_generation, entries, leader_hwm);
# a reply is (REPLY, generation, success, index).
APPEND = 0
REPLY = 1


class Server(NamedTuple):
    """One server. `log[k]` is the generation of the entry at index k+1.

    `match` is the leader's match index per server (its own slot unused); it is
    empty for a follower, whose match indexes would be meaningless.
    """

    generation: int
    role: str
    log: tuple[int, ...]
    hwm: int
    alive: bool
    match: tuple[int, ...]


class State(NamedTuple):
    """A whole cluster. `reads` is the ghost set of (index, generation) clients were given.

    `channels[a * n + b]` is the FIFO from server a to server b (async network only).
    """

    servers: tuple[Server, ...]
    reads: frozenset
    crashes: int
    channels: tuple[tuple[tuple, ...], ...]

    def describe(self) -> str:
        lines = [f"{server_name(k)} {describe_server(s)}" for k, s in enumerate(self.servers)]
        if self.reads:
            lines.append("reads " + " ".join(f"{i}@g{g}" for i, g in sorted(self.reads)))
        return "\n".join(lines)


@dataclass(frozen=True)
class Config:
    """The bounds of one model: what the explorer may enumerate."""

    servers: int = CONFIG_KEYS["servers"][0]
    max_generation: int = CONFIG_KEYS["max_generation"][0]
    max_log: int = CONFIG_KEYS["max_log"][0]
    max_crashes: int = CONFIG_KEYS["max_crashes"][0]
    network: str = CONFIG_KEYS["network"][0]
    channel_capacity: int = CONFIG_KEYS["channel_capacity"][0]
    max_partitions: int = CONFIG_KEYS["max_partitions"][0]

    @classmethod
    def from_mapping(cls, mapping: dict[str, Any] | None, *, where: str | None = None) -> "Config":
        """Validated config from trace/CLI keys (TraceError on a bad key or value)."""
        return cls(**full_config(mapping, where=where))

    def to_mapping(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.network == "rpc":
            del out["channel_capacity"]
        if not self.max_partitions:  # no partitions: the mapping every trace had before them
            del out["max_partitions"]
        return out

    def describe(self) -> str:
        parts = [f"servers={self.servers}", f"max_generation={self.max_generation}",
                 f"max_log={self.max_log}", f"max_crashes={self.max_crashes}",
                 f"network={self.network}"]
        if self.network == "async":
            parts.append(f"channel_capacity={self.channel_capacity}")
        if self.max_partitions:
            parts.append(f"max_partitions={self.max_partitions}")
        return " ".join(parts)


def initial_state(config: Config) -> State:
    """Every server alive, a follower of generation 0 with an empty log."""
    server = Server(0, FOLLOWER, (), 0, True, ())
    channels = ((),) * (config.servers * config.servers) if config.network == "async" else ()
    return State((server,) * config.servers, frozenset(), 0, channels)
