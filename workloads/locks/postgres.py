"""Locks in PostgreSQL, as applications take them (node 1 of ``--db postgres``).

- ``pg-row``: ``SELECT ... FOR UPDATE NOWAIT`` on the lock's row, in a transaction that the
  critical section's writes join (the lock hands its session to the resource, which is then a
  table of the same database); release is COMMIT. The seeds' ground truth for banking cores.
- ``pg-advisory``: a session-level ``pg_advisory_lock``; the critical section writes on
  another connection (how it is usually used: a pool) to the same database, so nothing ties
  the writes to the lock.

The protected resource of these locks is, by default, a table in the lock's own database
(``resource_in_lock_db``); ``--resource redis`` puts it on a Redis of its own instead, except
for the two that write in their transaction.
- ``pg-advisory-xact``: ``pg_try_advisory_xact_lock`` in the writing transaction; the lock
  ends with it.

The server ends a frozen holder's session: each lock connection sets
``idle_in_transaction_session_timeout`` and ``idle_session_timeout`` to the run's TTL
(``--lock-opt session-timeouts=false`` leaves them off), so a
paused (or cut-off) holder loses its session, its transaction and its locks after the TTL, as
a lease would. What that means for the data differs: a transaction that was ended takes its
writes with it; writes on another connection stay.

``pg-row`` and ``pg-advisory-xact`` give fencing tokens: ``nextval`` of a sequence taken once
the lock is held (sequences are not transactional: a token is never handed out twice).
"""

from __future__ import annotations

import random
import time
from typing import Any, ClassVar

import psycopg

from harness.core.locks import Grant, Indeterminate, LockConfig, LockRole
from harness.core.options import Option
from workloads.locks.pg_conn import NotDone, Timeout, close_quietly, connect, deadline

LOCK_SCHEMA = """
SELECT pg_advisory_xact_lock(hashtext('lock-harness-schema'));
CREATE TABLE IF NOT EXISTS harness_locks (name text PRIMARY KEY, holder text);
CREATE SEQUENCE IF NOT EXISTS harness_lock_tokens;
"""
BACKOFF = (0.01, 0.05)  # seconds between two tries of a lock that is taken


class PostgresLock(LockRole):
    """One connection to node 1, with the session timeouts; subclasses take the lock."""

    dbs: ClassVar[tuple[str, ...]] = ("postgres",)
    autocommit: ClassVar[bool] = True
    resource_in_lock_db: ClassVar[bool] = True  # the protected table next to the lock
    options: ClassVar[dict[str, Option]] = {
        "session-timeouts": Option(bool, True, "the server ends a frozen holder's session "
                                   "after the TTL (idle_in_transaction_session_timeout, "
                                   "idle_session_timeout); false: it waits for it forever"),
    }

    def __init__(self, config: LockConfig) -> None:
        self.config = config
        self.node = config.nodes[0]
        self.ttl_ms = max(1, int(config.ttl * 1000))
        self.timeout = config.op_timeout
        self.rng = random.Random(config.harness.get("seed", 0) * 1000 + config.process)
        self.key = f"lock:{config.name}"
        self.owner = f"p{config.process}"
        self._conn: psycopg.Connection[Any] | None = None
        self._schema = False

    # the connection ---------------------------------------------------------------------------
    def session_options(self) -> dict[str, Any]:
        if not self.config.options.get("session-timeouts", True):
            return {}
        return {"idle_in_transaction_session_timeout": self.ttl_ms,
                "idle_session_timeout": self.ttl_ms}

    def conn(self) -> psycopg.Connection[Any]:
        """The lock's connection, made again once the old one is gone."""
        if self._conn is None or self._conn.closed or self._conn.broken:
            close_quietly(self._conn)
            self._conn = connect(self.node.host, self.node.port, self.timeout,
                                 autocommit=self.autocommit, options=self.session_options())
            if not self._schema:
                with deadline(self._conn, self.timeout * 5):
                    with self._conn.transaction():
                        self._conn.execute(LOCK_SCHEMA)  # type: ignore[arg-type]
                        self._conn.execute("INSERT INTO harness_locks (name) VALUES (%s) "
                                           "ON CONFLICT DO NOTHING", (self.key,))
                    if not self.autocommit:
                        self._conn.commit()
                self._schema = True
        return self._conn

    def drop(self) -> None:
        """Forget the connection (after an error it may be in any state)."""
        close_quietly(self._conn)
        self._conn = None

    # acquire: try until the deadline ----------------------------------------------------------
    def try_acquire(self, left: float) -> Grant | None:
        """One attempt; None: the lock is taken. Raise NotDone / Indeterminate otherwise."""
        raise NotImplementedError

    def acquire(self, timeout: float) -> Grant | None:
        deadline_at = time.monotonic() + timeout
        while True:
            left = deadline_at - time.monotonic()
            try:
                grant = self.try_acquire(max(0.05, left))
            except NotDone:
                self.drop()  # refused, or a session the server ended: certainly not ours
                grant = None
            except Timeout:
                self.drop()  # no answer: it may have been granted (history: info)
                raise
            except Indeterminate:
                # The connection broke (the server crashed, the socket was reset): the lock
                # lives in the session, and the session is gone for us: we do not hold it.
                self.drop()
                grant = None
            if grant is not None:
                return grant
            if time.monotonic() >= deadline_at:
                return None
            time.sleep(self.rng.uniform(*BACKOFF))

    def close(self) -> None:
        self.drop()


class TransactionLock(PostgresLock):
    """A lock that lives in an open transaction; the critical section writes in it
    (``session(grant)``) and release commits it."""

    autocommit = False
    tokens = True

    def lock_sql(self) -> tuple[str, tuple[Any, ...]]:
        """The statement that takes the lock in the transaction; it returns a row if taken."""
        raise NotImplementedError

    def try_acquire(self, left: float) -> Grant | None:
        conn = self.conn()
        with deadline(conn, self.timeout):
            sql, args = self.lock_sql()
            try:
                row = conn.execute(sql, args).fetchone()  # type: ignore[arg-type]
            except psycopg.errors.LockNotAvailable:
                conn.rollback()
                return None
            if not row or row[0] is False:
                conn.rollback()
                return None
            token = conn.execute("SELECT nextval('harness_lock_tokens')").fetchone()[0]  # type: ignore[index]
        return Grant(token=int(token), validity=None, handle=conn)

    def session(self, grant: Grant) -> Any:
        """The session the critical section's writes must use: the lock's transaction."""
        return grant.handle

    def release(self, grant: Grant) -> bool:
        conn = grant.handle
        if conn is not self._conn or conn.closed or conn.broken:
            # The connection broke (a write timed out, the server ended the session): COMMIT
            # was never sent, and the server rolls back a transaction whose client is gone.
            self.drop()
            return False
        try:
            with deadline(conn, self.timeout):
                conn.commit()
        except NotDone:
            self.drop()
            return False  # the server had ended the session: the transaction rolled back
        except Indeterminate:
            self.drop()
            raise
        return True


class RowLock(TransactionLock):
    name = "pg-row"
    summary = ("SELECT ... FOR UPDATE NOWAIT in a transaction; the writes in the same "
               "transaction; release = COMMIT")

    def lock_sql(self) -> tuple[str, tuple[Any, ...]]:
        return ("SELECT name FROM harness_locks WHERE name = %s FOR UPDATE NOWAIT", (self.key,))


class AdvisoryXactLock(TransactionLock):
    name = "pg-advisory-xact"
    summary = ("pg_try_advisory_xact_lock in the writing transaction; release = COMMIT")

    def lock_sql(self) -> tuple[str, tuple[Any, ...]]:
        return ("SELECT pg_try_advisory_xact_lock(hashtext(%s))", (self.key,))


class AdvisoryLock(PostgresLock):
    """Session-level advisory lock; the writes go elsewhere (the resource's own connection)."""

    name = "pg-advisory"
    summary = ("session pg_advisory_lock (blocking, lock_timeout); the writes on another "
               "connection")

    def try_acquire(self, left: float) -> Grant | None:
        conn = self.conn()
        with deadline(conn, left + self.timeout):
            conn.execute("SELECT set_config('lock_timeout', %s, false)",
                         (f"{max(1, int(left * 1000))}ms",))
            try:
                conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (self.key,))
            except psycopg.errors.LockNotAvailable:
                return None
        return Grant(token=None, validity=None, handle=conn)

    def release(self, grant: Grant) -> bool:
        conn = grant.handle
        if conn is not self._conn or conn.closed or conn.broken:
            self.drop()
            return False  # the session that held it is gone, and the lock with it
        try:
            with deadline(conn, self.timeout):
                row = conn.execute("SELECT pg_advisory_unlock(hashtext(%s))",
                                   (self.key,)).fetchone()
        except NotDone:
            self.drop()
            return False
        except Indeterminate:
            self.drop()
            raise
        return bool(row and row[0])
