"""The process that mounts a :class:`~harness.controller.syncfs.SyncFS` over a directory and
takes its orders: ``python -m harness.controller.syncfs_runner DIR RECORD [SOCKET]``.

It changes into ``DIR`` before mounting over it, so the directory's own contents stay its
backing store (reached by relative paths, under the mount). It takes the orders of
:mod:`harness.controller.syncfs_orders` on the directory's abstract socket (or on the path
``SOCKET``): ``drop`` forgets every
unsynced byte, appends what it dropped to ``RECORD`` (one JSON line: time, files, bytes) and
answers that line; ``sync`` writes every unsynced byte back and answers what it wrote, the same
way; ``ping`` answers ``ok``. It runs until unmounted (``fusermount3 -u DIR``), syncing
everything then. It needs Python, mfusepy and this package's syncfs modules alone (a node's
container runs it too).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time

from mfusepy import FUSE

from harness.controller.syncfs import SyncFS
from harness.controller.syncfs_orders import address


class BackedHere(SyncFS):
    """The filesystem over the directory it is mounted on: reached through a descriptor of the
    directory opened before the mount (the process's working directory, set once mounted:
    libfuse moves it to / on the way), by relative paths."""

    def __init__(self, fd: int) -> None:
        super().__init__(".")
        self.fd = fd

    def init(self, path: str) -> None:
        os.fchdir(self.fd)


def serve(fs: SyncFS, server: socket.socket, record: str) -> None:
    server.listen(4)
    while True:
        conn, _ = server.accept()
        with conn:
            command = conn.makefile().readline().strip()
            if command in ("drop", "sync"):
                files = fs.drop() if command == "drop" else fs.sync_all()
                line = json.dumps({"time": time.time(), "files": files,
                                   "bytes": sum(files.values())})
                if command == "drop":
                    with open(record, "a") as fh:
                        fh.write(line + "\n")
                conn.sendall(line.encode() + b"\n")
            else:
                conn.sendall(b"ok\n")


def main(argv: list[str]) -> int:
    directory, record, *path = argv
    fs = BackedHere(os.open(directory, os.O_RDONLY | os.O_DIRECTORY))
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if path and os.path.exists(path[0]):
        os.unlink(path[0])
    server.bind(path[0] if path else address(directory))
    threading.Thread(target=serve, args=(fs, server, record), daemon=True).start()
    FUSE(fs, directory, foreground=True, allow_other=True, default_permissions=True,
         hard_remove=True, attr_timeout=0, entry_timeout=0,
         negative_timeout=0, fsname="lock-harness-syncfs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
