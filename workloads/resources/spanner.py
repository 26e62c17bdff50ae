"""The protected resource in Spanner, beside the lock's row (``--db spanner --resource
spanner``): a row per lock (``resource_rows``) and a log (``resource_log``), in the database
the DB makes at start (:data:`dbs.spanner.DDL`).

Every write is one read-write transaction that reads the lock's row (``locks``), the data's
row and the log's last number, then logs the write (accepted or not) and, if accepted, updates
the data, and commits: all or nothing, in Spanner's commit order, which is the log's order.
Mode ``fenced``: accepted only if the write's token is the lock row's version *now* (no grant
came after it, read in the same transaction) and not below the highest token accepted; the
Spanner way to fence, external consistency guarding the data. Mode ``plain``: every write is
accepted. Aborts are retried as the locks retry them (:mod:`workloads.locks.spanner_conn`).

The emulator keeps nothing on a kill: a run that kills it with this resource loses the log as
the locks lose their rows (the kill says so). Idempotency keys are PostgreSQL's and Redis's.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

from harness.core.resource import Observed, ResourceRole, Write, Written
from workloads.locks.spanner_conn import Spanner, Tx

LOG_FIELDS = ("seq", "lock", "process", "session", "kind", "accepted", "token", "from_value",
              "to_value")
INT = "INT64"
STATE = ("SELECT (SELECT version FROM locks WHERE name = @lock), "
         "(SELECT last_token FROM resource_rows WHERE lock = @lock), "
         "(SELECT counter FROM resource_rows WHERE lock = @lock), "
         "(SELECT COALESCE(MAX(seq), 0) + 1 FROM resource_log)")


def number(value: Any) -> int | None:
    return None if value is None else int(value)


class SpannerResource(ResourceRole):
    """A client of the protected resource in Spanner."""

    name: ClassVar[str] = "spanner"
    summary: ClassVar[str] = ("Spanner tables beside the lock's row: each write and its token "
                              "check against the lock row in one read-write transaction")
    db: ClassVar[str] = "spanner"
    modes: ClassVar[tuple[str, ...]] = ("plain", "fenced")

    def __init__(self, host: str, port: int, *, mode: str = "plain",
                 timeout: float = 2.0) -> None:
        self.conn = Spanner(host, port, timeout)
        self.mode, self.timeout = mode, timeout

    def run(self, body: Any) -> Any:
        """``body`` in a read-write transaction (NotSent: certainly not applied; the workload
        records any error of a write as unknown)."""
        return self.conn.transaction(body, time.monotonic() + self.timeout)

    def setup(self) -> None:
        """Nothing: the DB made the tables; this checks they answer."""
        self.read_log()

    def read(self, process: int, session: int, via: Any = None, lock: str = "lock"
             ) -> Observed:
        rows = self.query("SELECT counter FROM resource_rows WHERE lock = @lock", lock=lock)
        return Observed(None, int(rows[0][0]) if rows else 0)

    def write(self, w: Write, via: Any = None) -> Written:
        """Raises Indeterminate when the outcome is unknown, NotSent when it was not done."""
        if via is not None or w.key is not None:
            raise ValueError("the Spanner resource takes no lock session and no idempotency key")

        def body(tx: Tx) -> Written:
            version, last, counter, seq = tx.query(STATE, {"lock": w.lock})["rows"][0]
            last = number(last)
            accepted = self.mode == "plain" or (
                w.token is not None and number(version) == w.token
                and (last is None or w.token >= last))
            params = {"seq": str(seq), "lock": w.lock, "process": str(w.process),
                      "session": str(w.session), "kind": w.kind, "accepted": accepted,
                      "token": number(w.token), "from": w.counter and w.counter[0],
                      "to": w.counter and w.counter[1]}
            tx.changed("INSERT INTO resource_log (seq, lock, process, session, kind, "
                       "accepted, token, from_value, to_value) VALUES (@seq, @lock, @process, "
                       "@session, @kind, @accepted, @token, @from, @to)",
                       {k: None if v is None else v if isinstance(v, bool) else str(v)
                        for k, v in params.items()},
                       {"seq": INT, "process": INT, "session": INT, "token": INT,
                        "from": INT, "to": INT, "accepted": "BOOL"})
            if accepted:
                token = w.token if self.mode == "fenced" else last
                to = w.counter[1] if w.counter else number(counter) or 0
                sql = ("UPDATE resource_rows SET last_token = @token, counter = @to "
                       "WHERE lock = @lock") if counter is not None else \
                    "INSERT INTO resource_rows (lock, last_token, counter) VALUES " \
                    "(@lock, @token, @to)"
                tx.changed(sql, {"lock": w.lock, "token": number(token) and str(token),
                                 "to": str(to)}, {"token": INT, "to": INT})
            tx.commit()
            return Written(int(seq), accepted)
        return self.run(body)

    def query(self, sql: str, **params: str) -> list[list[Any]]:
        """One read in a read-write transaction (the emulator's reads see every commit)."""
        def body(tx: Tx) -> list[list[Any]]:
            return list(tx.query(sql, params).get("rows", []))
        return self.run(body)

    def read_counter(self, lock: str = "lock") -> int:
        return self.read(0, 0, lock=lock).counter

    def read_log(self) -> list[dict[str, Any]]:
        rows = self.query(f"SELECT {', '.join(LOG_FIELDS)} FROM resource_log ORDER BY seq")
        out = []
        for row in rows:
            entry = dict(zip(LOG_FIELDS, row, strict=True))
            e: dict[str, Any] = {k: entry[k] for k in ("lock", "kind", "accepted")}
            e.update({k: int(entry[k]) for k in ("seq", "process", "session")})
            for src, dst in (("token", "token"), ("from_value", "from"), ("to_value", "to")):
                if entry[src] is not None:
                    e[dst] = int(entry[src])
            out.append(e)
        return out

    def read_state(self) -> dict[str, Any]:
        rows = self.query("SELECT lock, last_token, counter FROM resource_rows ORDER BY lock")
        return {"locks": {lock: {"counter": int(c), "balance": 0, "next_job": 1,
                                 "last_fencing_token": number(t)} for lock, t, c in rows},
                "keys": {}}

    def close(self) -> None:
        self.conn.close()
