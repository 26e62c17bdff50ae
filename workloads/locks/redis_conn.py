"""How a Redis lock reaches "the" Redis: the first node, or the primary that Sentinel names.

On ``--db redis-sentinel`` the run gives every lock ``options["sentinels"]`` (endpoints) and
``options["service"]``; the client then asks the Sentinels for the primary exactly as an
application using redis-py's ``Sentinel.master_for`` does: on each new connection, and again
after the old primary answers READONLY. Nothing here re-checks the primary on its own: neither
does redis-py, and that is part of what is being tested.
"""

from __future__ import annotations

from typing import Any

import redis
from redis.sentinel import MasterNotFoundError, Sentinel

from workloads.locks.base import LockConfig

SENTINEL_TIMEOUT = 0.5  # seconds per Sentinel asked: an unreachable one costs this much

# No retries: a retried write can apply twice, and the workload must see every failure.
CLIENT_KWARGS: dict[str, Any] = {
    "retry_on_timeout": False,
    "retry": None,
    "decode_responses": True,
    "health_check_interval": 0,
}


def uses_sentinel(config: LockConfig) -> bool:
    return bool(config.options.get("sentinels"))


def client_for(config: LockConfig, timeout: float | None = None) -> redis.Redis:
    """A redis-py client of the lock's Redis: the primary through Sentinel, else node 1."""
    t = config.op_timeout if timeout is None else timeout
    if uses_sentinel(config):
        sentinels = [(e["host"], int(e["port"])) for e in config.options["sentinels"]]
        manager = Sentinel(sentinels, sentinel_kwargs={
            "socket_timeout": SENTINEL_TIMEOUT, "socket_connect_timeout": SENTINEL_TIMEOUT,
            "decode_responses": True})
        return manager.master_for(str(config.options.get("service", "mymaster")),
                                  socket_timeout=t, socket_connect_timeout=t, **CLIENT_KWARGS)
    node = config.nodes[0]
    return redis.Redis(host=node.host, port=node.port, socket_timeout=t,
                       socket_connect_timeout=t, **CLIENT_KWARGS)


def certainly_not_sent(e: redis.exceptions.ConnectionError) -> bool:
    """Errors after which the request certainly did nothing: the connection was refused, no
    Sentinel named a primary, or the old primary refused the write (READONLY: redis-py turns
    that into "The previous master is now a slave")."""
    if isinstance(e, MasterNotFoundError):
        return True
    text = str(e)
    return (isinstance(e.__cause__, ConnectionRefusedError) or "refused" in text
            or "previous master is now a slave" in text)
