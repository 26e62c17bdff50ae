"""``spanner-lease`` and ``spanner-lease-client-clock``: a lease in a row of a Spanner table,
taken and kept in read-write transactions, as teams write it on Spanner.

The row (table ``locks``, one per lock name) holds ``owner``, ``version`` and ``expires``.

- **acquire**: one read-write transaction reads the row and, if there is none, its owner is
  NULL (released) or its ``expires`` is past, writes itself as the owner with ``version + 1``
  and ``expires = now + ttl``; otherwise it rolls back and the client tries again a little
  later. The token is the version: every grant raises it, in commit order.
- **heartbeat**: a thread of the holder moves ``expires`` to ``now + ttl`` every third of the
  lease, in a transaction whose DML names its owner and version; no row changed means the
  lease was taken over: the thread stops and the release says so.
- **release**: a transaction clears the owner if the row is still this grant's (owner and
  version), keeping the version (the next grant's token is higher).

``now`` is what tells the two apart. ``spanner-lease`` judges and writes every expiry on
Spanner's own time, ``CURRENT_TIMESTAMP()`` inside the transaction (the commit order's
clock, TrueTime's on real Spanner): no client's clock is read. ``spanner-lease-client-clock``
passes the client's wall clock (``time.time()``) as ``@now``: a waiter whose clock runs fast
sees a live lease as past.

The emulator runs one read-write transaction at a time and aborts the others; an abort is
retried (:mod:`workloads.locks.spanner_conn`), never a lock error. A holder paused past its
lease (its heartbeats stop with it) wakes up believing it holds the lock while a waiter has
taken it: it is a lease, fenced only by its token.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from harness.core.locks import (
    LONG_CRITICAL_SECTIONS,
    Grant,
    Indeterminate,
    LockConfig,
    LockRole,
    retried,
)
from workloads.locks.spanner_conn import NotSent, Spanner, Tx

LIVE = "owner IS NOT NULL AND expires > {now}"
EXPIRES = "TIMESTAMP_ADD({now}, INTERVAL @ms MILLISECOND)"
MINE = "name = @name AND owner = @owner AND version = @version"


@dataclass
class Hold:
    """One grant, shared by the workload's thread and the heartbeat thread."""

    owner: str
    version: int
    lost: bool = False
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


def rfc3339(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class SpannerLeaseLock(LockRole):
    name = "spanner-lease"
    summary = ("a lease row taken in a Spanner read-write transaction if free or past its "
               "expiry on Spanner's time (CURRENT_TIMESTAMP()); heartbeats; token: version")
    dbs = ("spanner",)
    tokens = True
    timeout_errors = (NotSent,)
    workload_defaults: ClassVar[dict[str, float]] = LONG_CRITICAL_SECTIONS
    client_clock: ClassVar[bool] = False  # is "now" the client's wall clock?
    resource_in_lock_db: ClassVar[bool] = True  # --resource spanner: beside the lock's row

    def __init__(self, config: LockConfig) -> None:
        self.config = config
        node = config.nodes[0]
        seed = int(config.harness.get("seed", 0)) * 1000 + config.process
        self.conn = Spanner(node.host, node.port, config.op_timeout, seed)
        self.beats = Spanner(node.host, node.port, config.op_timeout, seed + 500)
        self.key = config.name
        self.ms = max(1, int(config.ttl * 1000))

    def statement(self, sql: str, **params: Any) -> tuple[str, dict[str, Any], dict[str, str]]:
        """``sql`` with ``{now}`` (Spanner's time or the client's) and its parameters."""
        types = {"ms": "INT64", "version": "INT64"}
        params = {"name": self.key, "ms": str(self.ms), **{k: str(v) for k, v in params.items()}}
        if self.client_clock:
            params["now"], types["now"] = rfc3339(time.time()), "TIMESTAMP"
        now = "@now" if self.client_clock else "CURRENT_TIMESTAMP()"
        return sql.format(now=now, live=LIVE.format(now=now), expires=EXPIRES.format(now=now),
                          mine=MINE), params, types

    def transaction(self, conn: Spanner, body: Callable[[Tx], Any]) -> Any:
        return conn.transaction(body, time.monotonic() + self.config.op_timeout)

    # acquire ----------------------------------------------------------------------------------
    def acquire(self, timeout: float) -> Grant | None:
        hold = retried(lambda: self.transaction(self.conn, self.take), timeout,
                       lambda: self.conn.rng.uniform(0.01, 0.05), (NotSent,))
        if hold is None:
            return None
        hold.thread = threading.Thread(target=self.beat, args=(hold,), daemon=True,
                                       name=f"spanner-heartbeat-{hold.version}")
        hold.thread.start()
        return Grant(token=hold.version, validity=self.config.ttl, handle=hold)

    def take(self, tx: Tx) -> Hold | None:
        """In one transaction: the row, and the grant if it is free or past its expiry."""
        rows = tx.query(*self.statement(
            "SELECT version, {live} FROM locks WHERE name = @name")).get("rows", [])
        if rows and rows[0][1]:
            return None  # held: rolled back
        hold = Hold(f"c{self.config.process}-{uuid.uuid4().hex}", int(rows[0][0]) + 1 if rows
                    else 1)
        write = ("UPDATE locks SET owner = @owner, version = @version, expires = {expires} "
                 "WHERE name = @name") if rows else \
            ("INSERT INTO locks (name, owner, version, expires) VALUES "
             "(@name, @owner, @version, {expires})")
        tx.changed(*self.statement(write, owner=hold.owner, version=hold.version))
        tx.commit()
        return hold

    # heartbeats and release -----------------------------------------------------------------
    def mine(self, conn: Spanner, hold: Hold, sets: str) -> bool:
        """Set ``sets`` on the row in one transaction if it is still this grant's."""
        def body(tx: Tx) -> bool:
            n = tx.changed(*self.statement(f"UPDATE locks SET {sets} WHERE {{mine}}",
                                           owner=hold.owner, version=hold.version))
            tx.commit()
            return n == 1
        return bool(self.transaction(conn, body))

    def beat(self, hold: Hold) -> None:
        while not hold.stop.wait(self.config.ttl / 3):
            try:
                if not self.mine(self.beats, hold, "expires = {expires}"):
                    hold.lost = True  # taken over: the lease had run out
                    return
            except (NotSent, Indeterminate):
                continue

    def release(self, grant: Grant) -> bool:
        hold: Hold = grant.handle
        hold.stop.set()
        if hold.thread is not None:
            hold.thread.join(self.config.op_timeout + 1.0)
        return not hold.lost and self.mine(self.conn, hold, "owner = NULL")

    def close(self) -> None:
        self.conn.close()
        self.beats.close()


class SpannerClientClockLock(SpannerLeaseLock):
    name = "spanner-lease-client-clock"
    summary = ("the same lease row, its expiry written and compared on the client's wall "
               "clock (@now) instead of Spanner's time")
    client_clock = True
