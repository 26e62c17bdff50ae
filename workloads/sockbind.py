"""Make every connection of this process to the test's nodes leave from the client's own address.

Each client process gets its own source address (127.s.1.N on the local backend, an address of
the run's bridge on the docker backend), so that iptables can cut one client off from the DB
nodes while the others, and the protected resource, stay reachable. Libraries (redis-py, kazoo,
...) open their sockets with ``socket.socket``; inside a client process we replace that class by
one that binds to the client's address before connecting to an address in the test's networks.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

_original = socket.socket


def _within(address: Any, networks: list[ipaddress.IPv4Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address[0])
    except (ValueError, TypeError, IndexError):
        return False
    return any(ip in net for net in networks)


def bind_source(source: str, networks: list[str] | None = None) -> None:
    """From now on, TCP connections of this process into ``networks`` come from ``source``."""
    nets = [ipaddress.ip_network(n) for n in (networks or ["127.0.0.0/8"])]

    class BoundSocket(_original):
        def _bind_first(self, address: Any) -> None:
            if self.family == socket.AF_INET and _within(address, nets):
                try:
                    if self.getsockname()[1] == 0:
                        self.bind((source, 0))
                except OSError:
                    pass

        def connect(self, address: Any) -> None:
            self._bind_first(address)
            super().connect(address)

        def connect_ex(self, address: Any) -> int:
            self._bind_first(address)
            return super().connect_ex(address)

    socket.socket = BoundSocket  # type: ignore[misc]
