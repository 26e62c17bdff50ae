"""ZooKeeper's four-letter-word commands (``srvr``, ``ruok``, ``mntr``): the probes the harness
uses for readiness and leader detection, because they need no client library and no session
(a probe must never be what keeps a session alive or creates one).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass


def four_letter(host: str, port: int, word: str, timeout: float = 0.5) -> str:
    """Send one four-letter word and read the reply to EOF ('' when the node does not answer)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
    except OSError:
        return ""
    return b"".join(chunks).decode(errors="replace")


@dataclass(frozen=True)
class ServerState:
    """What ``srvr`` says about one server."""

    mode: str | None  # leader, follower, observer, standalone; None: not serving
    zxid: int | None

    @property
    def serving(self) -> bool:
        return self.mode in ("leader", "follower", "observer", "standalone")

    @property
    def epoch(self) -> int:
        """The leader epoch: the high 32 bits of the last zxid."""
        return -1 if self.zxid is None else self.zxid >> 32


def parse_srvr(reply: str) -> ServerState:
    """Parse a ``srvr`` reply. A server without a quorum answers 'This ZooKeeper instance is not
    currently serving requests': that is mode None."""
    mode: str | None = None
    zxid: int | None = None
    for line in reply.splitlines():
        key, _, value = line.partition(":")
        value = value.strip()
        if key == "Mode":
            mode = value
        elif key == "Zxid":
            try:
                zxid = int(value, 16)
            except ValueError:
                zxid = None
    return ServerState(mode, zxid)


def server_state(host: str, port: int, timeout: float = 0.5) -> ServerState:
    return parse_srvr(four_letter(host, port, "srvr", timeout))


def pick_leader(states: dict[str, ServerState]) -> str | None:
    """The node that leads now. Right after a partition an old leader may still say 'leader' for
    a moment (until it misses syncLimit ticks): the one with the newest epoch wins."""
    leaders = [(s.epoch, name) for name, s in states.items()
               if s.mode in ("leader", "standalone")]
    return max(leaders)[1] if leaders else None
