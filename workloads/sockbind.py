"""Make every loopback connection of this process leave from the client's own address.

Each client process gets its own source address (127.0.1.N), so that iptables can cut one client
off from the DB nodes while the others, and the protected resource, stay reachable. Libraries
(redis-py, kazoo, ...) open their sockets with ``socket.socket``; inside a client process we
replace that class by one that binds to the client's address before connecting to 127.0.0.0/8.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

_original = socket.socket
_LOOPBACK = ipaddress.ip_network("127.0.0.0/8")


def _is_loopback(address: Any) -> bool:
    try:
        return ipaddress.ip_address(address[0]) in _LOOPBACK
    except (ValueError, TypeError, IndexError):
        return False


def bind_source(source: str) -> None:
    """From now on, TCP connections of this process to loopback come from ``source``."""

    class BoundSocket(_original):
        def _bind_first(self, address: Any) -> None:
            if self.family == socket.AF_INET and _is_loopback(address):
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
