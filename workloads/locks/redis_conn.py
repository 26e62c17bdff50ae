"""How every Redis client of the project is built, and what the Redis locks share.

One place builds ``redis.Redis`` clients (:func:`connect`): no retries (a retried write can
apply twice, and the workload must see every failure), fail-fast timeouts, decoded replies.
:func:`client_for` reaches "the" Redis of a lock: node 1, or on ``--db redis-sentinel`` the
primary that the Sentinels name, exactly as an application using redis-py's
``Sentinel.master_for`` does (on each new connection, and again after the old primary answers
READONLY; nothing here re-checks the primary on its own: neither does redis-py, and that is
part of what is being tested).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import redis
from redis.sentinel import MasterNotFoundError, Sentinel

from harness.core.locks import Indeterminate, LockConfig

T = TypeVar("T")
SENTINEL_TIMEOUT = 0.5  # seconds per Sentinel asked: an unreachable one costs this much
SINGLE_REDIS = ("redis", "redis-sentinel")  # where single-instance locks run

CLIENT_KWARGS: dict[str, Any] = {
    "retry_on_timeout": False,
    "retry": None,
    "decode_responses": True,
    "health_check_interval": 0,
}

# Release only if the key still holds our value: the compare-and-delete every careful Redis
# lock uses (redis.io's single-instance recipe, Redlock's unlock).
COMPARE_AND_DELETE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
"""

# Take the lock (SET NX PX) and count it (INCR of a second key) in one step: the count is a
# fencing token (redis-fenced; redlock-fenced, per master).
SET_AND_INCR = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return redis.call('INCR', KEYS[2])
end
return false
"""


def connect(host: str, port: int, timeout: float) -> redis.Redis:
    """A redis-py client of one server that fails fast and never retries."""
    return redis.Redis(host=host, port=port, socket_timeout=timeout,
                       socket_connect_timeout=timeout, **CLIENT_KWARGS)


def uses_sentinel(config: LockConfig) -> bool:
    return bool(config.harness.get("sentinels"))


def client_for(config: LockConfig, timeout: float | None = None) -> redis.Redis:
    """A redis-py client of the lock's Redis: the primary through Sentinel, else node 1."""
    t = config.op_timeout if timeout is None else timeout
    if uses_sentinel(config):
        sentinels = [(e["host"], int(e["port"])) for e in config.harness["sentinels"]]
        manager = Sentinel(sentinels, sentinel_kwargs={
            "socket_timeout": SENTINEL_TIMEOUT, "socket_connect_timeout": SENTINEL_TIMEOUT,
            "decode_responses": True})
        return manager.master_for(str(config.harness.get("service", "mymaster")),
                                  socket_timeout=t, socket_connect_timeout=t, **CLIENT_KWARGS)
    node = config.nodes[0]
    return connect(node.host, node.port, t)


def recipe_client_for(config: LockConfig) -> Any:
    """The client of the project's own single-instance recipes (``redis-setnx`` and its
    broken variants): on ``--db redis-sentinel`` redis-py's ``Sentinel.master_for``, as above
    (its discovery of the primary is part of what is tested); on one node the lean client of
    :mod:`workloads.resp`, which sends the same requests for a third of the CPU."""
    if uses_sentinel(config):
        return client_for(config)
    from workloads.resp import LeanRedis

    node = config.nodes[0]
    return LeanRedis(node.host, node.port, config.op_timeout)


def certainly_not_sent(e: redis.exceptions.ConnectionError) -> bool:
    """Errors after which the request certainly did nothing: the connection was refused, no
    Sentinel named a primary, or the old primary refused the write (READONLY: redis-py turns
    that into "The previous master is now a slave")."""
    if isinstance(e, MasterNotFoundError):
        return True
    text = str(e)
    return (isinstance(e.__cause__, ConnectionRefusedError) or "refused" in text
            or "previous master is now a slave" in text)


def attempt(fn: Callable[[], T]) -> T:
    """Run one Redis request; a refused connection certainly did nothing, else indeterminate."""
    try:
        return fn()
    except redis.exceptions.ConnectionError as e:
        if certainly_not_sent(e):
            raise ConnectionRefusedError(str(e)) from e
        raise Indeterminate(f"{type(e).__name__}: {e}") from e
    except redis.exceptions.TimeoutError as e:
        raise Indeterminate(f"timeout: {e}") from e
