"""ZooKeeper locks with kazoo, as people write them.

- ``zookeeper``: kazoo's ``Lock`` recipe (the Curator recipe: an ephemeral sequential znode under
  the lock's path; the lowest sequence number holds the lock, each waiter watches the one before
  it). The lock lasts as long as the client's *session*: when the session expires (the client
  was paused or cut off for longer than the session timeout) ZooKeeper deletes the znode and the
  next waiter gets the lock, while the old holder, which is told nothing until it talks to
  ZooKeeper again, works on.
- ``zookeeper-listener``: the same recipe, used carefully: a connection-state listener treats
  SUSPENDED (the connection is lost, the session may still live) and LOST (it expired) as losing
  the lock, and the workload asks ``held()`` while it works and stops at once. kazoo notices a
  dead connection after 2/3 of the session timeout, before the server expires the session, so a
  holder cut off from ZooKeeper stops before anybody else can get the lock. A *paused* holder
  cannot notice anything: against pauses only fencing helps.

The fencing token is the lock znode's sequence number: per lock path, it increases with creation
order, and the recipe grants the lock in sequence order. The session timeout is the lock's
``ttl`` (``--ttl``, default 2 s), recorded in the spec.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, LockTimeout
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from harness.core.locks import (
    LONG_CRITICAL_SECTIONS,
    Grant,
    Indeterminate,
    LockConfig,
    LockRole,
)

LOCK_ROOT = "/locks"
START_TIMEOUT = 15.0


def sequence_of(node: str) -> int:
    """The sequence number ZooKeeper appended to a sequential znode's name (10 digits)."""
    digits = node[-10:]
    if len(digits) != 10 or not digits.isdigit():
        raise ValueError(f"{node!r} is not a sequential znode name")
    return int(digits)


class KazooLock(LockRole):
    """kazoo's Lock recipe; one client (one session) and one Lock object per client process."""

    name = "zookeeper"
    library = "kazoo"
    promise = "a distributed lock: one holder at a time, freed when its session ends"
    summary = "kazoo's Lock recipe (ephemeral sequential znode); token: its sequence number"
    dbs = ("zookeeper",)
    tokens = True
    workload_defaults: ClassVar[dict[str, float]] = LONG_CRITICAL_SECTIONS

    def __init__(self, config: LockConfig) -> None:
        self.config = config
        hosts = ",".join(f"{n.host}:{n.port}" for n in config.nodes)
        fast = {"max_tries": -1, "delay": 0.05, "backoff": 2, "max_delay": 0.5}
        self.zk = KazooClient(
            hosts=hosts,
            timeout=config.ttl,  # the session timeout we ask for (the server may clamp it)
            connection_retry=KazooRetry(**fast),
            # commands (the release's delete) give up after a while: an unknown outcome
            command_retry=KazooRetry(**fast, deadline=max(5.0, 2 * config.ttl)),
        )
        try:
            self.zk.start(timeout=START_TIMEOUT)
        except KazooTimeoutError as e:
            raise RuntimeError(f"could not connect to ZooKeeper at {hosts}: {e}") from e
        self.lock = self.zk.Lock(f"{LOCK_ROOT}/{config.name}", identifier=f"p{config.process}")

    def acquire(self, timeout: float) -> Grant | None:
        try:
            acquired = self.lock.acquire(timeout=timeout)
        except LockTimeout:
            return None
        except (KazooException, KazooTimeoutError) as e:
            raise Indeterminate(f"{type(e).__name__}: {e}") from e
        if not acquired:
            return None
        node = self.lock.node
        return Grant(token=sequence_of(node), validity=None, handle=node)

    def release(self, grant: Grant) -> bool:
        try:
            return bool(self.lock.release())
        except (KazooException, KazooTimeoutError) as e:
            raise Indeterminate(f"{type(e).__name__}: {e}") from e

    def close(self) -> None:
        try:
            self.zk.stop()
        finally:
            self.zk.close()


class KazooListenerLock(KazooLock):
    """kazoo's Lock plus a connection-state listener: SUSPENDED or LOST means the lock is lost."""

    name = "zookeeper-listener"
    summary = "kazoo's Lock plus a state listener: SUSPENDED/LOST = lost, stop working"

    def __init__(self, config: LockConfig) -> None:
        self._lost = threading.Event()
        self._session: Any = None
        super().__init__(config)
        self.zk.add_listener(self._on_state)

    def _on_state(self, state: Any) -> bool:
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            self._lost.set()
        return False  # stay registered

    def acquire(self, timeout: float) -> Grant | None:
        self._lost.clear()  # a wobble during the acquire counts: the grant is not trusted then
        grant = super().acquire(timeout)
        if grant is not None:
            self._session = self.zk.client_id
        return grant

    def held(self, grant: Grant) -> bool:
        """False once the connection was suspended or the session lost since the acquire."""
        return (not self._lost.is_set() and self.zk.state == KazooState.CONNECTED
                and self.zk.client_id == self._session)
