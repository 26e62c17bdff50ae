"""Make every connection of this process to the test's nodes leave from the client's own address.

Each client process gets its own source address (127.s.1.N on the local backend, an address of
the run's bridge on the docker backend), so that iptables can cut one client off from the DB
nodes while the others, and the protected resource, stay reachable. Libraries (redis-py, kazoo,
...) open their sockets with ``socket.socket``; inside a client process we replace that class by
one that binds to the client's address before connecting to an address in the test's networks.

When the run has a link layer, the same class also *redirects*: a connection to a DB server's own
address (one a Sentinel answered with, say) goes to this client's listener for that server on
the link layer's proxy instead (``redirects``: ``host:port`` -> ``host:port``), so that every
connection of the client runs through its own links, whatever its library learnt at run time.
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


def _redirected(address: Any, redirects: dict[tuple[str, int], tuple[str, int]]) -> Any:
    try:
        return redirects.get((str(address[0]), int(address[1])), address)
    except (TypeError, ValueError, IndexError):
        return address


def parse_redirects(redirects: dict[str, str] | None) -> dict[tuple[str, int], tuple[str, int]]:
    out = {}
    for frm, to in (redirects or {}).items():
        fh, _, fp = frm.rpartition(":")
        th, _, tp = to.rpartition(":")
        out[(fh, int(fp))] = (th, int(tp))
    return out


def bind_source(source: str, networks: list[str] | None = None,
                redirects: dict[str, str] | None = None) -> None:
    """From now on, TCP connections of this process into ``networks`` come from ``source``,
    and connections to an address in ``redirects`` go where it says."""
    nets = [ipaddress.ip_network(n) for n in (networks or ["127.0.0.0/8"])]
    moved = parse_redirects(redirects)

    class BoundSocket(_original):
        def _bind_first(self, address: Any) -> None:
            if self.family == socket.AF_INET and _within(address, nets):
                try:
                    if self.getsockname()[1] == 0:
                        self.bind((source, 0))
                except OSError:
                    pass

        def connect(self, address: Any) -> None:
            address = _redirected(address, moved) if moved else address
            self._bind_first(address)
            super().connect(address)

        def connect_ex(self, address: Any) -> int:
            address = _redirected(address, moved) if moved else address
            self._bind_first(address)
            return super().connect_ex(address)

    socket.socket = BoundSocket  # type: ignore[misc]
