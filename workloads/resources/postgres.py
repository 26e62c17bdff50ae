"""The protected resource on PostgreSQL: a row, a log table and SQL that fences.

One row of ``resources`` per lock (``id`` = the lock's name; ``--keys N``: N rows) is the
protected data. Every write is one transaction (or part of the lock's own transaction, when a
lock hands its session over: ``via``)::

    INSERT INTO resources (id) VALUES (:lock) ON CONFLICT DO NOTHING  -- the lock's row
    SELECT ... FROM resources WHERE id = :lock FOR UPDATE  -- the writes' order: the row lock
    SELECT nextval('resource_seq')                         -- numbered by the server, in order
    UPDATE resources SET ... WHERE id = :lock AND <mode's condition>  -- accepted iff changed
    INSERT INTO resource_log (seq, lock, ...)              -- accepted or not, same commit

The mode's condition is the SQL an application would write:

- ``plain``: none;
- ``fenced``: the seed's ``last_fencing_token < :token`` for a grant's first write, and
  ``last_fencing_token = :token`` for its later ones (nobody newer came in between);
- ``version``: ``version = :read_version`` (each accepted write sets ``version + 1``);
- ``cas``: ``owner IS NOT DISTINCT FROM :read_owner``, setting ``owner`` to the writer's lock
  value (antirez's check-and-set on the lock's random value).

An idempotency key is inserted into ``idempotency_keys`` in the same transaction (``ON
CONFLICT DO NOTHING``): a key already there is logged as a duplicate and changes nothing.
A read at the start of a critical section (``version``, ``cas`` modes, the counter and job
reads) is logged the same way, under the row lock, so its place among the writes is exact.
A transaction that aborts (a session the server ended) takes its log entries with it: the log
holds what the data went through, nothing else.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, ClassVar

import psycopg

from harness.core.resource import Observed, ResourceRole, Write, Written
from workloads.locks.pg_conn import close_quietly, connect, deadline

SCHEMA = """
SELECT pg_advisory_xact_lock(hashtext('lock-harness-schema'));
CREATE TABLE IF NOT EXISTS resources (
    id text PRIMARY KEY,
    data text,
    last_fencing_token bigint NOT NULL DEFAULT 0,
    version bigint NOT NULL DEFAULT 0,
    owner text,
    counter bigint NOT NULL DEFAULT 0,
    balance bigint NOT NULL DEFAULT 0,
    next_job bigint NOT NULL DEFAULT 1
);
CREATE SEQUENCE IF NOT EXISTS resource_seq;
CREATE TABLE IF NOT EXISTS resource_log (
    seq bigint PRIMARY KEY,
    lock text NOT NULL,
    process integer NOT NULL,
    session integer NOT NULL,
    kind text NOT NULL,
    accepted boolean NOT NULL,
    token bigint,
    expect text,
    observed text,
    from_value bigint,
    to_value bigint,
    key text,
    amount bigint,
    job bigint,
    duplicate boolean,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS idempotency_keys (
    key text PRIMARY KEY,
    seq bigint NOT NULL,
    amount bigint NOT NULL
);
"""

ENSURE_ROW = "INSERT INTO resources (id) VALUES (%(lock)s) ON CONFLICT DO NOTHING"
LOCK_ROW = ("SELECT version, owner, counter, next_job FROM resources WHERE id = %(lock)s "
            "FOR UPDATE")
NEXT_SEQ = "SELECT nextval('resource_seq')"
# The mode's condition, in the UPDATE's WHERE: accepted iff the row changed.
CONDITIONS: dict[str, str] = {
    "plain": "",
    "fenced-first": " AND last_fencing_token < %(token)s",
    "fenced-next": " AND last_fencing_token = %(token)s",
    "version": " AND version = %(expect)s",
    "cas": " AND owner IS NOT DISTINCT FROM %(expect)s",
}
SETS: dict[str, str] = {
    "plain": "",
    "fenced": ", last_fencing_token = %(token)s",
    "version": ", version = version + 1",
    "cas": ", owner = %(claim)s",
}
LOG = """
INSERT INTO resource_log (seq, lock, process, session, kind, accepted, token, expect,
                          observed, from_value, to_value, key, amount, job, duplicate)
VALUES (%(seq)s, %(lock)s, %(process)s, %(session)s, %(kind)s, %(accepted)s, %(token)s,
        %(expect)s, %(observed)s, %(from)s, %(to)s, %(key)s, %(amount)s, %(job)s,
        %(duplicate)s)
"""
LOG_FIELDS = ("seq", "lock", "process", "session", "kind", "accepted", "token", "expect",
              "observed", "from_value", "to_value", "key", "amount", "job", "duplicate")


def condition(w: Write, mode: str) -> str:
    if mode == "fenced":
        return CONDITIONS["fenced-first" if w.first else "fenced-next"]
    return CONDITIONS[mode]


def update_sql(w: Write, mode: str) -> str:
    sets = "data = %(data)s" + SETS[mode]
    if w.counter is not None:
        sets += ", counter = %(to)s"
    if w.key is not None:
        sets += ", balance = balance + %(amount)s, next_job = GREATEST(next_job, %(job)s + 1)"
    return (f"UPDATE resources SET {sets} WHERE id = %(lock)s{condition(w, mode)} "
            "RETURNING version, owner")


def as_text(value: Any) -> str | None:
    return None if value is None else str(value)


class PostgresResource(ResourceRole):
    """A client of the protected resource on PostgreSQL."""

    name: ClassVar[str] = "postgres"
    summary: ClassVar[str] = ("a PostgreSQL table and log: SQL fencing (token, version, "
                              "check-and-set), idempotency keys")
    db: ClassVar[str] = "postgres"
    modes: ClassVar[tuple[str, ...]] = ("plain", "fenced", "version", "cas")
    accepts_session: ClassVar[bool] = True

    def __init__(self, host: str, port: int, *, mode: str = "plain",
                 timeout: float = 2.0) -> None:
        self.host, self.port = host, port
        self.mode = mode
        self.timeout = timeout
        self._conn: psycopg.Connection[Any] | None = None

    # connections -------------------------------------------------------------------------------
    def _own(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            close_quietly(self._conn)
            self._conn = connect(self.host, self.port, self.timeout)
        return self._conn

    @contextlib.contextmanager
    def _tx(self, via: Any) -> Iterator[psycopg.Connection[Any]]:
        """Our own transaction, or the lock's (``via``: it commits at release)."""
        conn = via if via is not None else self._own()
        with deadline(conn, self.timeout):
            if via is not None:
                yield conn
            else:
                with conn.transaction():
                    yield conn

    # the protocol ------------------------------------------------------------------------------
    def setup(self) -> None:
        with self._tx(None) as conn:
            conn.execute(SCHEMA)  # type: ignore[arg-type]

    def read(self, process: int, session: int, via: Any = None, lock: str = "lock"
             ) -> Observed:
        with self._tx(via) as conn:
            conn.execute(ENSURE_ROW, {"lock": lock})
            version, owner, counter, next_job = conn.execute(  # type: ignore[misc]
                LOCK_ROW, {"lock": lock}).fetchone()
            seq = conn.execute(NEXT_SEQ).fetchone()[0]  # type: ignore[index]
            expect = {"version": version, "cas": owner}.get(self.mode)
            conn.execute(LOG, {  # type: ignore[arg-type]
                "seq": seq, "lock": lock, "process": process, "session": session,
                "kind": "read",
                "accepted": True, "token": None, "expect": None, "observed": as_text(expect),
                "from": None, "to": None, "key": None, "amount": None, "job": None,
                "duplicate": None})
        return Observed(int(seq), int(counter), expect, int(next_job))

    def write(self, w: Write, via: Any = None) -> Written:
        """Raises Indeterminate (unknown outcome) or NotDone (certainly not applied)."""
        params: dict[str, Any] = {
            "lock": w.lock, "process": w.process, "session": w.session, "kind": w.kind,
            "token": w.token,
            "expect": w.expect, "claim": w.claim, "data": f"{w.process}:{w.session}:{w.kind}",
            "from": None if w.counter is None else w.counter[0],
            "to": None if w.counter is None else w.counter[1],
            "key": w.key, "amount": w.amount if w.key is not None else None, "job": w.job,
        }
        duplicate = False
        with self._tx(via) as conn:
            conn.execute(ENSURE_ROW, params)
            conn.execute(LOCK_ROW, params)
            seq = conn.execute(NEXT_SEQ).fetchone()[0]  # type: ignore[index]
            params["seq"] = seq
            if w.key is not None:
                fresh = conn.execute(
                    "INSERT INTO idempotency_keys (key, seq, amount) VALUES (%s, %s, %s) "
                    "ON CONFLICT (key) DO NOTHING RETURNING key", (w.key, seq, w.amount)
                ).fetchone()
                duplicate = fresh is None
            row = None
            if not duplicate:
                row = conn.execute(update_sql(w, self.mode), params).fetchone()  # type: ignore[arg-type]
            accepted = row is not None
            expect = {"version": row and row[0], "cas": row and row[1]}.get(self.mode)
            conn.execute(LOG, {**params, "accepted": accepted,  # type: ignore[arg-type]
                               "expect": as_text(w.expect), "observed": as_text(expect),
                               "duplicate": duplicate if w.key is not None else None})
        return Written(int(seq), accepted, expect if accepted else None, duplicate)

    def read_counter(self, lock: str = "lock") -> int:
        with self._tx(None) as conn:
            row = conn.execute("SELECT counter FROM resources WHERE id = %s", (lock,)).fetchone()
        return int(row[0]) if row else 0

    def read_log(self) -> list[dict[str, Any]]:
        with self._tx(None) as conn:
            rows = conn.execute(f"SELECT {', '.join(LOG_FIELDS)} FROM resource_log "  # type: ignore[arg-type]
                                "ORDER BY seq").fetchall()
        return [log_entry(dict(zip(LOG_FIELDS, r, strict=True))) for r in rows]

    def read_state(self) -> dict[str, Any]:
        with self._tx(None) as conn:
            cur = conn.execute("SELECT id, data, last_fencing_token, version, owner, counter, "
                               "balance, next_job FROM resources ORDER BY id")
            names = [d.name for d in cur.description or ()]
            rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
            keys = conn.execute("SELECT key, seq FROM idempotency_keys").fetchall()
        return {"locks": {r.pop("id"): r for r in rows}, "keys": {k: int(s) for k, s in keys}}

    def close(self) -> None:
        close_quietly(self._conn)
        self._conn = None


def log_entry(row: dict[str, Any]) -> dict[str, Any]:
    """A log row as the checkers read it (the Redis resource's field names)."""
    out: dict[str, Any] = {"seq": int(row["seq"]), "lock": row["lock"], "process": row["process"],
                           "session": row["session"], "kind": row["kind"],
                           "accepted": bool(row["accepted"])}
    for src, dst in (("token", "token"), ("expect", "expect"), ("observed", "observed"),
                     ("from_value", "from"), ("to_value", "to"), ("key", "key"),
                     ("amount", "amount"), ("job", "job"), ("duplicate", "duplicate")):
        if row[src] is not None:
            out[dst] = row[src]
    return out
