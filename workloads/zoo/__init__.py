"""The lock zoo (issue 46): popular lock libraries, each used the way its README shows.

One file a library; each lock class declares, beside what every lock declares, ``library``
(the distribution it wraps, whose installed version test.json and the zoo's page record) and
``promise`` (what the library's README promises, in one line, set against what the runs
showed). The libraries come with the optional extra ``pip install 'lock-harness[zoo]'``; a
class loads without its library, and a run of it is refused in one line naming the extra.
Every adapter passes the run's ``--ttl`` as the library's lease, the one setting a user must
choose; every other setting is the library's default unless its entry says otherwise.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from typing import Any, ClassVar

from harness.core.locks import Grant, LockConfig, LockRole
from workloads.locks.redis_conn import attempt, client_for

EXTRA = "pip install 'lock-harness[zoo]'"


class ZooLock(LockRole):
    """A lock of the zoo: a library's lock, its README's promise, its import name."""

    library: ClassVar[str] = ""  # the distribution (PyPI name)
    module: ClassVar[str] = ""  # what it imports as, when that is not its name
    promise: ClassVar[str] = ""

    @classmethod
    def unavailable(cls) -> str | None:
        if importlib.util.find_spec(cls.module or cls.library) is None:
            return f"{cls.library} is not installed here: {EXTRA}"
        return None


class RedisZooLock(ZooLock):
    """A zoo lock on one Redis: its library imported, a client of the lock's Redis (built as
    every Redis client of the harness is), its key, and a release that is refused when the
    library raises ``not_held`` (the name of its exception for a lock no longer held). An
    acquire that raises ``timed_out`` (its exception when the wait ran out) was refused."""

    dbs = ("redis",)
    not_held: ClassVar[str] = ""
    timed_out: ClassVar[str] = ""

    def __init__(self, config: LockConfig) -> None:
        self.lib: Any = importlib.import_module(self.module or self.library)
        self.config = config
        self.client = client_for(config)
        self.key = f"lock:{config.name}"

    def refused(self, name: str) -> tuple[type[BaseException], ...]:
        return (getattr(self.lib, name),) if name else ()

    def take(self, acquire: Callable[[], Any]) -> bool:
        """Whether the library's ``acquire`` took the lock (a timeout of its own: it did not)."""
        try:
            return bool(attempt(acquire))
        except self.refused(self.timed_out):
            return False

    def release(self, grant: Grant) -> bool:
        try:
            attempt(grant.handle.release)
        except self.refused(self.not_held):
            return False
        return True

    def close(self) -> None:
        self.client.close()
