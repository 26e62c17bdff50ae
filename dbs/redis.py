"""Redis: a single ``redis-server`` per node, no replication, no persistence by default.

redis-py is imported by the probes that use it, not at the top: the DB classes load with the
standard library alone (:mod:`dbs.base`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from dbs.base import DB
from harness.core.cluster import Node
from harness.core.errors import HarnessError

if TYPE_CHECKING:
    import redis

LIBC_BUILD = Path(os.environ.get("LOCK_HARNESS_CACHE", "/var/cache/lock-harness")) / "redis-libc"


APPENDFSYNC = {"everysec": "everysec", "nofsync": "no"}  # persistence mode -> appendfsync


class RedisDB(DB):
    name: ClassVar[str] = "redis"
    summary: ClassVar[str] = "independent redis-server nodes (single-instance locks use n1)"
    default_nodes: ClassVar[int] = 1
    port: ClassVar[int] = 16379
    protocol: ClassVar[str] = "resp"  # the link layer tells grants in it (stall-grant)
    persistence_words: ClassVar[dict[str, str]] = {
        "none": "no append-only file: a restarted node comes back empty",
        "appendonly": "appendonly yes, appendfsync always: each write fsynced before its reply",
        "everysec": "appendonly yes, appendfsync everysec: fsynced once a second (a power "
                    "loss loses up to a second)",
        "nofsync": "appendonly yes, appendfsync no: never fsynced (the kernel writes it when "
                   "it likes)"}
    persistence_modes: ClassVar[tuple[str, ...]] = tuple(persistence_words)
    # what a host needs to run a node, and the Debian package that brings it (ssh backend)
    debian_packages: ClassVar[dict[str, str]] = {"redis-server": "redis-server"}
    # libfaketime moves the wall clock (TIME, key expiry) or both clocks by one offset
    clock_mechanism: ClassVar[str] = "libfaketime"
    clocks: ClassVar[tuple[str, ...]] = ("wall", "both")

    def __init__(self, binary: str | None = None, persistence: str = "none") -> None:
        self.binary = binary or "redis-server"  # found on PATH where the node runs
        self.persistence = persistence

    def check_environment(self) -> None:
        if shutil.which(self.binary) is None:
            raise HarnessError(
                f"redis-server not found ({self.binary}): run the set-up command `bash setup.sh`"
            )

    def files(self, node: Node, cluster: list[Node], node_dir: Path) -> dict[str, str]:
        lines = [
            *base_conf(node, node_dir),
            'save ""',
            f"appendonly {'no' if self.persistence == 'none' else 'yes'}",
            f"appendfsync {APPENDFSYNC.get(self.persistence, 'always')}",
            "hz 100",
        ]
        return {"redis.conf": "\n".join(lines) + "\n"}

    def argv(self, node: Node, node_dir: Path) -> list[str]:
        return [self.binary, str(node_dir / "redis.conf")]

    def ready(self, node: Node) -> bool:
        import redis

        client = connect(node.host, node.port, 0.5)
        try:
            return bool(client.ping())
        except redis.exceptions.RedisError:
            return False
        finally:
            client.close()

    def connected_from(self, node: Node) -> list[str] | None:
        """The source addresses of the clients connected now (this query's own left out)."""
        import redis

        client = connect(node.host, node.port, 1.0)
        try:
            me = client.client_id()
            return [str(c["addr"]).rsplit(":", 1)[0] for c in client.client_list()
                    if int(c.get("id", -1)) != me and c.get("addr")]
        except redis.exceptions.RedisError:
            return None
        finally:
            client.close()

    def clock_fault_support(self) -> str | None:
        return None  # libfaketime reaches redis-server, if it is not linked with jemalloc

    def host_faketime_dir(self) -> Path:
        """On this host, a directory whose redis-server works under libfaketime.

        Debian's redis-server is linked with jemalloc, which libfaketime cannot hook (it dies at
        start with "Unexpected recursive calls to clock_gettime()"); a build with MALLOC=libc
        works. (The docker image has such a build on its PATH already.)
        """
        if (LIBC_BUILD / "redis-server").exists():
            return LIBC_BUILD
        raise HarnessError("clock faults on Redis need a redis-server built with MALLOC=libc "
                           "(Debian's uses jemalloc, which libfaketime cannot hook): run "
                           "`harness setup --nemesis clock`, or use --backend docker")

    def read_clock(self, node: Node) -> float:
        """The node's own clock (Redis TIME), as seconds since the epoch."""
        client = connect(node.host, node.port, 2.0)
        try:
            sec, usec = client.time()
        finally:
            client.close()
        return sec + usec / 1e6


def connect(host: str, port: int, timeout: float) -> redis.Redis:
    """A client of the harness's probes: it fails fast and never retries (as the lock
    clients' own, :mod:`workloads.locks.redis_conn`), and decodes replies."""
    import redis

    return redis.Redis(host=host, port=port, socket_timeout=timeout,
                       socket_connect_timeout=timeout, retry_on_timeout=False, retry=None,
                       decode_responses=True, health_check_interval=0)


def base_conf(node: Node, node_dir: Path) -> list[str]:
    """What every redis-server of the harness (node or Sentinel) is told: its own address and
    port, its directory, logs to stdout, stay in the foreground, take clients from any address
    (protected mode would refuse the clients' own 127.x.y.z source addresses)."""
    return [f"bind {node.host}", f"port {node.port}", f"dir {node_dir}", 'logfile ""',
            "daemonize no", "protected-mode no"]
