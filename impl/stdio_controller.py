"""Kafka's controller inside a node of Maelstrom's protocol (`impl.stdio`): the first node of
``node_ids`` runs it beside its broker, and the brokers' heartbeats are its ZooKeeper sessions. It
is one process, a single point of failure, as `hwm controller` is on the TCP runtime."""

from __future__ import annotations

import json
import os
from typing import Any

from hwm.impl import messages as m
from hwm.impl.controller import parse_partition_state, partition_state_bytes
from hwm.impl.fs import make_directories, replace_file
from hwm.impl.storage import StorageError

__all__ = ["EmbeddedController", "PARTITION_STATE_FILE"]

PARTITION_STATE_FILE = "partition-state.json"  # in the controller's node's data directory


class EmbeddedController:
    """Kafka's controller (`impl.kafka.Controller`) inside the first node: elects the leader from the
    ISR, makes the leaders' ISR changes, and keeps the partition state in PARTITION_STATE_FILE of
    that node's data directory, made durable before anything it decided is sent. A broker is live
    while its heartbeats arrive (its ZooKeeper session); a (re)started broker says so in its first
    heartbeat and is sent the current LeaderAndIsr."""

    def __init__(self, node: Any, directory: str):
        """`node`: the `impl.stdio.StdioNode` it runs in (its storage, peers, timers and log)."""
        from hwm.impl.kafka import Controller

        self.node = node
        self.path = os.path.join(directory, PARTITION_STATE_FILE)
        state = self._load()
        self.controller = Controller(node.node_ids, node.protocol, state=state, live=())
        self._saved = state
        if self.controller.leader == node.node_id:
            # The leader's broker went down with the controller: its epoch is over.
            self.controller.broker_failed(node.node_id)
        self._heard: dict[str, int] = {}
        self._offline: str | None = None

    def _load(self) -> tuple[int, str | None, tuple[str, ...]] | None:
        fs = self.node.fs
        try:
            data = fs.read_file(self.path)
        except FileNotFoundError:
            return None
        try:
            return parse_partition_state(json.loads(data), self.node.node_ids)
        except ValueError as error:
            raise StorageError(f"{self.path} is not a partition state: {error}") from None

    def _save(self) -> None:
        c = self.controller
        state = (c.leader_epoch, c.leader, c.isr)
        if state == self._saved:
            return
        make_directories(self.node.fs, os.path.dirname(self.path))
        replace_file(self.node.fs, self.path, partition_state_bytes(c))
        self._saved = state

    def _publish(self) -> None:
        self._save()
        for broker, message in self.controller.ready():
            self.node._send_peer(broker, message)

    def step(self, message) -> None:
        if type(message) is not m.AlterIsr:
            self.node.log(f"the controller dropped a {type(message).__name__}: it takes only AlterIsr")
            return
        self.controller.step(message)
        self._publish()

    def heard(self, broker: str, started: bool, epoch: int | None, now: int) -> None:
        """A heartbeat: `started` on the first one of a process, `epoch` the last LeaderAndIsr it took."""
        self._heard[broker] = now
        if started and broker in self.controller.live:
            # Restarted before its session expired: it lost what it led (a broker's bounce).
            self.node.log(f"controller: {broker} restarted")
            self.controller.broker_failed(broker)
        c = self.controller
        if started or broker not in c.live:
            self.node.log(f"controller: {broker} is live")
            c.broker_started(broker)
            self._publish()
        elif c.leader_epoch > 0 and (epoch is None or epoch < c.leader_epoch):
            # It missed the current LeaderAndIsr (lost on the way, as when a connection drops):
            # send it again, as the controller does to a broker whose connection comes back.
            c.broker_started(broker)
            self._publish()

    def tick(self, now: int) -> None:
        c, timing = self.controller, self.node.timing
        self._heard[self.node.node_id] = now  # our own broker is live while we run
        for broker in [b for b in c.replicas if b in c.live and now - self._heard.get(b, 0) > timing.broker_session]:
            self.node.log(f"controller: {broker} is down (no heartbeat for {timing.broker_session} ticks)")
            c.broker_failed(broker)
            self._publish()
        self._elect(now)

    def _elect(self, now: int) -> None:
        # As `hwm controller` elects (impl/controller.py): the first live replica of the ISR, or
        # under unclean_election any live one; the first election waits for every broker a while.
        c = self.controller
        if c.leader is not None and c.leader in c.live:
            return
        if now < self.node.timing.controller_startup and len(c.live) < len(c.replicas):
            return
        live = [s for s in c.replicas if s in c.live]
        candidates = [s for s in c.isr if s in c.live] or (live if self.node.protocol.unclean_election else [])
        if not candidates:
            why = (f"no replica of the ISR {{{','.join(c.isr)}}} is live (live: {{{','.join(live)}}}) and unclean "
                   "leader election is disabled: the partition is offline")
            if why != self._offline:
                self.node.log(f"controller: {why}")
                self._offline = why
            return
        refused = c.elect(candidates[0], live)
        if refused is not None:
            self.node.log(f"controller: cannot elect {candidates[0]}: {refused}")
            return
        self._offline = None
        self.node.log(f"controller: elected {c.leader} for leader epoch {c.leader_epoch}, ISR {{{','.join(c.isr)}}}")
        self._publish()
