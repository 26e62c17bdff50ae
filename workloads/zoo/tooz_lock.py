"""OpenStack tooz's locks, as its documentation shows: ``get_coordinator(URL, member_id)``,
``start(start_heart=True)`` (a thread heartbeats the coordinator and its locks),
``get_lock(name)``, ``acquire(blocking=timeout)``, ``release()``.

``tooz-redis``: its redis driver (redis-py's ``Lock`` of ``timeout`` seconds, refreshed by the
heartbeat); ``tooz-zookeeper``: its zookeeper driver (kazoo's ``Lock`` on a session of
``timeout`` seconds); ``tooz-etcd3gw``: its etcd3gw driver (``etcd3+http://``: a key put if
absent in a transaction, on a lease of ``timeout`` seconds the heartbeat refreshes, through
etcd's JSON gateway). The URL's ``timeout`` is the run's ``--ttl`` (whole seconds: tooz reads
an integer); every other option is the driver's default. A Redis or ZooKeeper error that
tooz wraps in ``ToozError`` is an unknown outcome.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from harness.core.locks import Grant, Indeterminate, LockConfig
from workloads.zoo import ZooLock


class ToozRedisLock(ZooLock):
    name = "tooz-redis"
    summary = ("tooz's redis driver: get_coordinator('redis://...?timeout=ttl'), "
               "start(start_heart=True), get_lock(name)")
    promise = "a distributed lock, kept by the coordinator's heartbeat while its member lives"
    library = "tooz"
    dbs = ("redis",)
    scheme: ClassVar[str] = "redis"
    timed_out: ClassVar[tuple[type[BaseException], ...]] = ()  # its acquire returns False

    def __init__(self, config: LockConfig) -> None:
        import tooz
        from tooz import coordination

        self.errors = (tooz.ToozError,)
        self.config = config
        hosts = ",".join(f"{n.host}:{n.port}" for n in self.nodes(config))
        lease = max(1, math.ceil(config.ttl))
        self.coord: Any = coordination.get_coordinator(
            f"{self.scheme}://{hosts}?timeout={lease}", f"client-{config.process}".encode())
        self.coord.start(start_heart=True)
        self.key = f"lock:{config.name}".encode()

    @staticmethod
    def nodes(config: LockConfig) -> tuple[Any, ...]:
        return config.nodes[:1]

    def acquire(self, timeout: float) -> Grant | None:
        lock = self.coord.get_lock(self.key)
        try:
            ok = lock.acquire(blocking=timeout)
        except self.timed_out:
            return None
        except self.errors as e:
            raise Indeterminate(f"{type(e).__name__}: {e}") from e
        return Grant(validity=self.config.ttl, handle=lock) if ok else None

    def release(self, grant: Grant) -> bool:
        try:
            return bool(grant.handle.release())
        except self.errors as e:
            raise Indeterminate(f"{type(e).__name__}: {e}") from e

    def close(self) -> None:
        self.coord.stop()


class ToozZookeeperLock(ToozRedisLock):
    name = "tooz-zookeeper"
    summary = "tooz's zookeeper driver, as tooz-redis: kazoo's Lock on a session of ttl"
    promise = "a distributed lock on a ZooKeeper session: freed when its member's session ends"
    dbs = ("zookeeper",)
    scheme = "zookeeper"

    def __init__(self, config: LockConfig) -> None:
        from kazoo.exceptions import LockTimeout

        self.timed_out = (LockTimeout,)
        super().__init__(config)

    @staticmethod
    def nodes(config: LockConfig) -> tuple[Any, ...]:
        return config.nodes


class ToozEtcd3gwLock(ToozRedisLock):
    name = "tooz-etcd3gw"
    summary = ("tooz's etcd3gw driver, as tooz-redis: a key on a lease of ttl through etcd's JSON "
               "gateway, refreshed by the heartbeat")
    promise = "a distributed lock on an etcd lease the coordinator's heartbeat keeps alive"
    dbs = ("etcd",)
    scheme = "etcd3+http"
