"""Orders to a mounted power-loss filesystem (:mod:`harness.controller.syncfs_runner`), over
the abstract Unix socket its process listens on, one line each way: ``drop`` (forget every
unsynced byte: a power loss), ``sync`` (write every unsynced byte back: the kernel's writeback
of a server that has run a while), ``ping``. The answer to ``drop`` and ``sync`` is one JSON
line: ``{"time": t, "files": {path: bytes}, "bytes": n}``.

Standard library alone: a node's container runs it too (``python3 -m
harness.controller.syncfs_orders DIR ORDER`` prints the answer), where the socket is in the
container's network namespace and the host cannot reach it.
"""

from __future__ import annotations

import hashlib
import socket
import sys
from pathlib import Path

ORDERS = ("drop", "sync", "ping")


def socket_name(directory: Path | str) -> str:
    """The abstract socket of the filesystem mounted over ``directory``."""
    return "lock-harness-syncfs-" + hashlib.sha256(str(directory).encode()).hexdigest()[:20]


def ask(directory: Path | str, order: str, timeout: float = 10.0) -> str:
    """Send ``order`` to the filesystem over ``directory``; its one-line answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect("\0" + socket_name(directory))
        s.sendall(order.encode() + b"\n")
        return s.makefile().readline().strip()


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in ORDERS:
        print(f"usage: python3 -m harness.controller.syncfs_orders DIR {'|'.join(ORDERS)}",
              file=sys.stderr)
        return 64
    print(ask(argv[0], argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
