"""Redis: a single ``redis-server`` per node, no replication, no persistence by default."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import ClassVar

import redis

from harness.dbs.base import Node
from harness.errors import HarnessError


class RedisDB:
    name: ClassVar[str] = "redis"
    summary: ClassVar[str] = "independent redis-server nodes (single-instance locks use n1)"
    default_nodes: ClassVar[int] = 1
    port: ClassVar[int] = 16379

    def __init__(self, binary: str | None = None, persistence: str = "none") -> None:
        self.binary = binary or shutil.which("redis-server") or "redis-server"
        self.persistence = persistence

    def check_environment(self) -> None:
        if shutil.which(self.binary) is None:
            raise HarnessError(
                f"redis-server not found ({self.binary}): run the set-up command `bash setup.sh`"
            )

    def files(self, node: Node, cluster: list[Node], node_dir: Path) -> dict[str, str]:
        lines = [
            f"bind {node.host}",
            f"port {node.port}",
            f"dir {node_dir}",
            'logfile ""',
            "daemonize no",
            "protected-mode no",
            'save ""',
            f"appendonly {'yes' if self.persistence == 'appendonly' else 'no'}",
            "appendfsync always",
            "hz 100",
        ]
        return {"redis.conf": "\n".join(lines) + "\n"}

    def argv(self, node: Node, node_dir: Path) -> list[str]:
        return [self.binary, str(node_dir / "redis.conf")]

    def ready(self, node: Node) -> bool:
        client = redis.Redis(host=node.host, port=node.port, socket_timeout=0.5,
                             socket_connect_timeout=0.5)
        try:
            return bool(client.ping())
        except redis.exceptions.RedisError:
            return False
        finally:
            client.close()

    def clock_fault_support(self) -> str | None:
        return "clock faults on Redis come with the clock nemesis (not in this build)"
