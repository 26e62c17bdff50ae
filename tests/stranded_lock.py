"""A plugin lock whose acquire hangs once its ZooKeeper servers were all killed (issue 40, item
1): kazoo's Lock recipe, except that an acquire in flight when the connection is lost never
returns (the library drops its session and loses the wait it was in, whatever its timeout), as
a library's can; the clients not in an acquire then go on and take the lock after the restart,
to the end of the run. Run as
``--lock tests.stranded_lock:StrandedKazooLock --db zookeeper --nemesis kill:all``
(tests/test_zookeeper.py)."""

from __future__ import annotations

import threading
from typing import Any

from kazoo.client import KazooState

from harness.core.locks import Grant, LockConfig
from workloads.locks.zookeeper import KazooLock


class StrandedKazooLock(KazooLock):
    name = "zookeeper-stranded"
    summary = "kazoo's Lock; an acquire in flight when the connection drops never returns"

    def __init__(self, config: LockConfig) -> None:
        self._acquiring = threading.Event()
        self._stranded = threading.Event()
        super().__init__(config)
        self.zk.add_listener(self._on_state)

    def _on_state(self, state: Any) -> bool:
        if state != KazooState.CONNECTED and self._acquiring.is_set():
            self._stranded.set()
        return False  # stay registered

    def acquire(self, timeout: float) -> Grant | None:
        self._acquiring.set()
        try:
            return super().acquire(timeout)
        finally:
            self._acquiring.clear()
            if self._stranded.is_set():  # its session dropped: it holds and blocks nothing
                self.zk.stop()
                threading.Event().wait()  # never set: the acquire never returns
