"""The simulated cluster's network: every message crosses the wire (encoded into a frame by
`impl.codec` and decoded again), and the `async` network's FIFO channels of frames."""

from __future__ import annotations

from hwm.impl import codec
from hwm.impl.messages import AppendReply, AppendRequest, PeerMessage
from hwm.model.state import APPEND, REPLY


def over_the_wire(message: PeerMessage) -> PeerMessage:
    """What the receiver gets: the message encoded into a frame and decoded again."""
    return codec.decode_frame(codec.encode(message))


def to_model_message(message: PeerMessage) -> tuple:
    """An impl message as the model's channel tuple (the model's messages carry no payloads)."""
    if isinstance(message, AppendRequest):
        return (APPEND, message.generation, message.prev_index, message.prev_generation,
                tuple(g for g, _ in message.entries), message.leader_hwm)
    if isinstance(message, AppendReply):
        return (REPLY, message.generation, message.success, message.index)
    raise TypeError(f"the model's channels carry appends and their replies, not {type(message).__name__}")


class FrameChannels:
    """The async network of the model's actions: a FIFO channel of frames per ordered pair, bounded
    capacity, loss. (The deterministic simulation's network of streams is `bridge.dst.net.SimNetwork`.)"""

    def __init__(self, names: list[str], capacity: int):
        self.names, self.capacity = names, capacity
        self.channels: dict[tuple[str, str], list[bytes]] = {
            (a, b): [] for a in names for b in names if a != b}
        self.frames = 0  # frames queued
        self.lost = 0  # frames lost to a full channel

    def push(self, a: str, b: str, message: PeerMessage) -> None:
        """Queue `message` on a->b; a full channel loses it (as the model's channels do)."""
        channel = self.channels[a, b]
        if len(channel) < self.capacity:
            channel.append(codec.encode(message))
            self.frames += 1
        else:
            self.lost += 1

    def pop(self, a: str, b: str) -> PeerMessage:
        """The oldest message on a->b, decoded from its frame."""
        return codec.decode_frame(self.channels[a, b].pop(0))

    def crash(self, name: str) -> None:
        for (a, b), channel in self.channels.items():
            if name in (a, b):
                channel.clear()

    def model_channels(self) -> tuple:
        """The channels in the model's layout: `channels[a * n + b]`, messages as model tuples."""
        return tuple(tuple(to_model_message(codec.decode_frame(f)) for f in self.channels[a, b])
                     if a != b else () for a in self.names for b in self.names)
