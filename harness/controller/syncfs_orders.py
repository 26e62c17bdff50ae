"""Orders to a mounted power-loss filesystem (:mod:`harness.controller.syncfs_runner`), over
the Unix socket its process listens on, one line each way: ``drop`` (forget every unsynced
byte: a power loss), ``sync`` (write every unsynced byte back: the kernel's writeback of a
server that has run a while), ``ping``. The answer to ``drop`` and ``sync`` is one JSON line:
``{"time": t, "files": {path: bytes}, "bytes": n}``.

The socket is an abstract one named for the directory (:func:`address`), or a path (in a
node's container: a file in a folder the host shares, reached from the host through the
container's root, ``/proc/PID/root/...``; an abstract socket would be in the container's
network namespace, out of the host's reach).
"""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path


def address(directory: Path | str) -> str:
    """The abstract socket of the filesystem mounted over ``directory``."""
    return "\0lock-harness-syncfs-" + hashlib.sha256(str(directory).encode()).hexdigest()[:20]


def ask(where: str, order: str, timeout: float = 10.0) -> str:
    """Send ``order`` to the filesystem listening at ``where``; its one-line answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(where)
        s.sendall(order.encode() + b"\n")
        return s.makefile().readline().strip()
