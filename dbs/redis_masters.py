"""``redis-masters``: N independent Redis masters (default 5), no replication: Redlock's setting.

Each node is a plain ``redis-server`` that knows nothing of the others; only the client
algorithm (a quorum of SET NX PX) makes them one lock. Persistence is a node option
(``--persistence none|appendonly``): without it a node that crashes and restarts comes back
empty, having forgotten every lock it granted, which is one of Redlock's known failure modes;
with ``appendonly`` (``appendfsync always``) it comes back with its keys, with ``everysec`` or
``nofsync`` too after a kill, but not after a power loss that drops what it had not fsynced.
"""

from __future__ import annotations

from typing import ClassVar

from dbs.redis import RedisDB


class RedisMastersDB(RedisDB):
    name: ClassVar[str] = "redis-masters"
    summary: ClassVar[str] = ("N independent redis-server masters, no replication (Redlock); "
                              "--persistence none|appendonly|everysec|nofsync")
    default_nodes: ClassVar[int] = 5
    default_lock: ClassVar[str] = "redlock"
