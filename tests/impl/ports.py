"""Loopback ports for tests that start real servers."""

import random
import socket


def free_ports(count: int) -> list[int]:
    """Ports free now, below Linux's ephemeral range (32768-60999): the outgoing connections of
    other tests cannot take them between this check and a node's bind."""
    rng = random.Random()
    ports: list[int] = []
    while len(ports) < count:
        port = rng.randrange(20000, 32000)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        if port not in ports:
            ports.append(port)
    return ports
