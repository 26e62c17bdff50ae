"""DB definitions: what a server is and how to run one node of it (not where: backends)."""

from __future__ import annotations

from harness.dbs.base import DB, Node
from harness.dbs.redis import RedisDB
from harness.errors import UsageError

DBS: dict[str, type[DB]] = {"redis": RedisDB}


def lookup(name: str) -> type[DB]:
    try:
        return DBS[name]
    except KeyError:
        raise UsageError(
            f"unknown db {name!r}: use one of {', '.join(sorted(DBS))}"
        ) from None


__all__ = ["DB", "DBS", "Node", "lookup"]
