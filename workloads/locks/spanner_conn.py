"""How the Spanner locks and resource talk to the emulator: its REST/JSON gateway over HTTP
(the standard library's http.client, one connection kept alive), one session per connection,
read-write transactions retried on ``ABORTED`` as Spanner's own clients retry them: after an
exponential backoff with jitter.

Why REST and not ``google-cloud-spanner``: that client pulls protobuf >= 3.20 and grpcio of its
own choosing, while ``etcd3`` 0.12 pins protobuf < 4; REST keeps both locks in one environment
with no dependency at all, and its requests are plain HTTP on ``socket.socket``, so
:mod:`workloads.sockbind` binds them to the client's own address like any other lock's.

- :meth:`Spanner.transaction` runs ``body(tx)`` in a read-write transaction: the first
  statement begins it inline (``transaction.begin.readWrite``), :meth:`Tx.commit` ends it, and
  a body that returns without committing rolls it back (the emulator runs one read-write
  transaction at a time: one left open blocks every other client until the emulator drops it).
  An ``ABORTED`` answer at any point (the emulator aborts a transaction that meets another)
  runs the body again after a short random wait, until the deadline; the last abort then
  raises :class:`NotSent`: nothing was committed.
- What is certainly not done raises :class:`NotSent` (a refused connection, an error answer,
  anything before the commit was sent); a commit whose answer never came raises
  :class:`~harness.core.locks.Indeterminate`.
- A session that met an error other than an abort is made anew on the next transaction: the
  emulator may have been restarted and lost everything (its gateway then answers
  ``INTERNAL``, "failed to marshal error message", where Spanner says ``NOT_FOUND``).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from harness.core.locks import Indeterminate

T = TypeVar("T")
DATABASE = "projects/lock-harness/instances/lock-harness/databases/locks"  # dbs/spanner.py's
ABORTED = 10  # google.rpc.Code
STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)
BACKOFF = (0.005, 0.5)  # an abort's first wait and its cap (seconds): doubled every abort


class NotSent(Exception):
    """The request certainly did nothing (no connection, an error answer, aborted)."""


class Answer(Exception):
    """The server answered with an error: ``code`` (google.rpc.Code) and its message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code}: {message}"[:200])
        self.code = code


class Http:
    """One kept-alive HTTP connection to the gateway (as a Spanner client keeps its channel),
    opened again after any failure."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.conn: http.client.HTTPConnection | None = None

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """One POST of JSON; Answer (an error reply), NotSent (no connection) or
        Indeterminate. A kept connection the server has closed (a restart, an idle close)
        fails before any answer: the request goes once more on a new one, as HTTP clients
        do (Spanner drops a statement's repeat by its seqno, a commit's by its transaction)."""
        reused = self.conn is not None
        try:
            return self.send(path, body)
        except Indeterminate as e:
            if not (reused and isinstance(e.__cause__, STALE)):
                raise
        return self.send(path, body)

    def send(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self.conn.connect()
            except OSError as e:
                self.close()
                raise NotSent(f"{type(e).__name__}: {e}"[:200]) from e
        try:
            self.conn.request("POST", f"/v1/{path}", json.dumps(body),
                              {"Content-Type": "application/json"})
            resp = self.conn.getresponse()
            out = json.loads(resp.read() or b"{}")
        except (OSError, ValueError, http.client.HTTPException) as e:
            self.close()
            raise Indeterminate(f"{type(e).__name__}: {e}"[:200]) from e
        if resp.status != 200:
            raise Answer(int(out.get("code", 2)), str(out.get("message", resp.reason)))
        return dict(out)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.conn = None


class Tx:
    """One read-write transaction of a session."""

    def __init__(self, conn: Spanner) -> None:
        self.conn, self.id, self.seqno, self.done = conn, None, 0, False

    def query(self, sql: str, params: dict[str, Any] | None = None,
              types: dict[str, str] | None = None) -> dict[str, Any]:
        """One statement in the transaction (``rows``; a DML's ``stats.rowCountExact``)."""
        self.seqno += 1
        body: dict[str, Any] = {"sql": sql, "seqno": str(self.seqno),
                                "transaction": {"id": self.id} if self.id else
                                {"begin": {"readWrite": {}}}}
        if params:
            body["params"] = params
            body["paramTypes"] = {k: {"code": v} for k, v in (types or {}).items()}
        out = self.conn.call("executeSql", body)
        self.id = self.id or out.get("metadata", {}).get("transaction", {}).get("id")
        return out

    def changed(self, sql: str, params: dict[str, Any], types: dict[str, str] | None = None
                ) -> int:
        """A DML statement's count of changed rows."""
        return int(self.query(sql, params, types).get("stats", {}).get("rowCountExact", 0))

    def commit(self) -> None:
        self.done = True
        if self.id is None:
            return
        self.conn.call("commit", {"transactionId": self.id})

    def rollback(self) -> None:
        if self.id is not None and not self.done and self.conn.session is not None:
            self.done = True
            # the emulator drops an idle transaction in a few seconds anyway
            with contextlib.suppress(Answer, NotSent, Indeterminate):
                self.conn.call("rollback", {"transactionId": self.id})


class Spanner:
    """A connection: the gateway's address, the op timeout and a session of its own."""

    def __init__(self, host: str, port: int, timeout: float, seed: int = 0) -> None:
        self.http = Http(host, port, max(0.05, timeout))
        self.session: str | None = None
        self.rng = random.Random(seed)
        self.aborts = 0  # how many transactions the server aborted (retried)

    def call(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.session is None:
            self.session = str(self.http.post(f"{DATABASE}/sessions", {})["name"])
        try:
            return self.http.post(f"{self.session}:{method}", body)
        except Answer as e:
            if e.code != ABORTED:  # the emulator lost it (restarted)? A new one next time (its
                self.session = None  # gateway answers NOT_FOUND as INTERNAL: no marshaller)
            raise

    def transaction(self, body: Callable[[Tx], T], deadline: float) -> T:
        """``body`` in a read-write transaction, run again on every abort until ``deadline``
        (monotonic). Raises NotSent when it certainly committed nothing, Indeterminate when
        a commit's answer never came."""
        wait, renewed = BACKOFF[0], False
        while True:
            tx = Tx(self)
            try:
                try:
                    return body(tx)
                finally:
                    tx.rollback()
            except Answer as e:
                if e.code == ABORTED:
                    self.aborts += 1
                elif self.session is None and not renewed:  # dropped: once more on a new one
                    renewed = True
                else:
                    raise NotSent(str(e)) from e
                if time.monotonic() >= deadline:
                    raise NotSent(str(e)) from e
            except Indeterminate:
                if tx.done:
                    raise  # the commit was sent: it may have been applied
                raise NotSent("no answer before the commit: nothing committed") from None
            time.sleep(self.rng.uniform(wait / 2, wait))
            wait = min(BACKOFF[1], wait * 2)

    def close(self) -> None:
        self.http.close()
