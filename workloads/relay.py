"""A TCP relay inside a client process, for client libraries whose sockets the socket patch of
:mod:`workloads.sockbind` cannot reach.

grpc (etcd3's transport) opens its sockets in C, so they are not bound to the client's own
address: every etcd client would come from the same address and iptables could not cut one of
them off. Other ways were weighed: grpc has no channel option for a source address (grpc/grpc
issues 17284, 24035); matching the client's uid or gid in an OUTPUT rule (``-m owner``) cuts
only the client-to-server direction on loopback (the replies come from the server's socket),
needs a user per client and is not how the docker backend cuts links.

So the client library connects to this relay, which listens on 127.0.0.1 in the client process
itself, and for each connection it accepts, the relay opens one to a DB node with Python's
``socket`` module: that leg leaves from the client's own address, like every other connection
of the client, and ``partition`` cuts it the same way on both backends, both directions. Being
part of the client process, the relay freezes with it under SIGSTOP and dies with it.

If a node cannot be reached, the relay tries the next one (the client library sees its
connection close and reconnects): one relay gives a single-endpoint client the failover of a
multi-endpoint one.
"""

from __future__ import annotations

import contextlib
import socket
import threading

BUFFER = 65536


class Relay:
    """Relay connections to ``127.0.0.1:<port>`` to the first reachable of ``upstreams``."""

    def __init__(self, upstreams: list[tuple[str, int]], connect_timeout: float = 1.0,
                 first: int = 0) -> None:
        if not upstreams:
            raise ValueError("a relay needs at least one upstream")
        self.upstreams = list(upstreams)
        self.connect_timeout = connect_timeout
        self._next = first % len(self.upstreams)
        self._mu = threading.Lock()
        self._closed = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.address: tuple[str, int] = self._listener.getsockname()
        self._thread = threading.Thread(target=self._serve, name="relay", daemon=True)
        self._thread.start()

    @property
    def target(self) -> str:
        """``host:port`` for the client library to connect to."""
        return f"{self.address[0]}:{self.address[1]}"

    def upstream_order(self) -> list[tuple[str, int]]:
        """The upstreams starting with the one that worked last."""
        with self._mu:
            i = self._next
        return self.upstreams[i:] + self.upstreams[:i]

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                down, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._bridge, args=(down,), name="relay-conn",
                             daemon=True).start()

    def _connect(self) -> socket.socket | None:
        for host, port in self.upstream_order():
            try:
                up = socket.create_connection((host, port), timeout=self.connect_timeout)
            except OSError:
                continue
            up.settimeout(None)
            with self._mu:
                self._next = self.upstreams.index((host, port))
            return up
        with self._mu:  # nobody answered: begin with the next one the next time
            self._next = (self._next + 1) % len(self.upstreams)
        return None

    def _bridge(self, down: socket.socket) -> None:
        up = self._connect()
        if up is None or self._closed.is_set():
            down.close()
            if up is not None:
                up.close()
            return
        for s in (up, down):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._mu:
            self._sockets |= {up, down}
        other = threading.Thread(target=pump, args=(up, down), name="relay-pump", daemon=True)
        other.start()
        pump(down, up)
        other.join()
        with self._mu:
            self._sockets -= {up, down}
        up.close()
        down.close()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._mu:
            sockets = list(self._sockets)
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until either ends; then end both, so the other pump stops too
    (HTTP/2 never half-closes, so a closed side means the connection is over)."""
    try:
        while data := src.recv(BUFFER):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
