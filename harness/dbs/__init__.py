"""DB definitions: what a server is and how to run one node of it (not where: backends)."""

from __future__ import annotations

from harness.dbs.base import DB, Node
from harness.dbs.etcd import EtcdDB
from harness.dbs.redis import RedisDB
from harness.dbs.redis_masters import RedisMastersDB
from harness.dbs.redis_sentinel import RedisSentinelDB
from harness.dbs.zookeeper import ZooKeeperDB
from harness.errors import UsageError

DBS: dict[str, type[DB]] = {"redis": RedisDB, "zookeeper": ZooKeeperDB, "etcd": EtcdDB}
DBS.update({"redis-masters": RedisMastersDB, "redis-sentinel": RedisSentinelDB})


def lookup(name: str) -> type[DB]:
    try:
        return DBS[name]
    except KeyError:
        raise UsageError(
            f"unknown db {name!r}: use one of {', '.join(sorted(DBS))}"
        ) from None


def make(name: str, persistence: str = "none") -> DB:
    """An instance of the named DB; ``persistence`` other than none only where it is known."""
    cls = lookup(name)
    if persistence == "none":
        return cls()
    return cls(persistence=persistence)  # type: ignore[call-arg]


__all__ = ["DB", "DBS", "Node", "lookup", "make"]
