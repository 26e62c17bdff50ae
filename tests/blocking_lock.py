"""A plugin lock whose acquire hangs (issue 24, case 2): it grants the lock once in the whole
run (a Redis ``SET NX`` of a key nobody deletes), and from then on every acquire blocks
forever, whatever its timeout, as a library can after its servers were killed and restarted.
Run as ``--lock tests.blocking_lock:BlockingLock`` (tests/test_lives.py)."""

from __future__ import annotations

import threading

import redis

from harness.core.locks import Grant, LockConfig


class BlockingLock:
    name = "blocking"
    summary = "grants once, then every acquire hangs for good (a test's broken library)"
    dbs = ("redis",)
    tokens = False

    def __init__(self, config: LockConfig) -> None:
        node = config.nodes[0]
        self.r = redis.Redis(node.host, node.port, socket_timeout=config.op_timeout)
        self.key = f"blocking:{config.name}"
        self.process = config.process

    def acquire(self, timeout: float) -> Grant | None:
        if self.r.set(self.key, self.process, nx=True):
            return Grant(token=None, validity=None, handle=None)
        threading.Event().wait()  # never set: the acquire never returns
        return None

    def release(self, grant: Grant) -> bool:
        return True

    def close(self) -> None:
        self.r.close()
