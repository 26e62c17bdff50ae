"""How the Spanner locks and resource talk to the emulator: its REST/JSON gateway over HTTP
(the standard library's urllib), one session per connection, read-write transactions retried
on ``ABORTED`` as Spanner's own clients retry them.

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
import json
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

from harness.core.locks import Indeterminate

T = TypeVar("T")
DATABASE = "projects/lock-harness/instances/lock-harness/databases/locks"  # dbs/spanner.py's
ABORTED = 10  # google.rpc.Code
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy


class NotSent(Exception):
    """The request certainly did nothing (no connection, an error answer, aborted)."""


class Answer(Exception):
    """The server answered with an error: ``code`` (google.rpc.Code) and its message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code}: {message}"[:200])
        self.code = code


def post(base: str, path: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One POST of JSON; Answer (an error reply), NotSent (no connection) or Indeterminate."""
    req = urllib.request.Request(f"{base}/v1/{path}", data=json.dumps(body).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            return dict(json.loads(resp.read() or b"{}"))
    except urllib.error.HTTPError as e:
        try:
            err = json.loads(e.read() or b"{}")
        except ValueError:
            err = {}
        raise Answer(int(err.get("code", 2)), str(err.get("message", e.reason))) from e
    except urllib.error.URLError as e:
        if isinstance(e.reason, ConnectionRefusedError):
            raise NotSent(str(e.reason)) from e
        raise Indeterminate(f"{type(e.reason).__name__}: {e.reason}"[:200]) from e
    except (OSError, ValueError) as e:
        raise Indeterminate(f"{type(e).__name__}: {e}"[:200]) from e


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
        if self.id is not None and not self.done:
            self.done = True
            # the emulator drops an idle transaction in a few seconds anyway
            with contextlib.suppress(Answer, NotSent, Indeterminate):
                self.conn.call("rollback", {"transactionId": self.id})


class Spanner:
    """A connection: the gateway's address, the op timeout and a session of its own."""

    def __init__(self, host: str, port: int, timeout: float, seed: int = 0) -> None:
        self.base = f"http://{host}:{port}"
        self.timeout = max(0.05, timeout)
        self.session: str | None = None
        self.rng = random.Random(seed)
        self.aborts = 0  # how many transactions the server aborted (retried)

    def call(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.session is None:
            self.session = str(post(self.base, f"{DATABASE}/sessions", {}, self.timeout)["name"])
        try:
            return post(self.base, f"{self.session}:{method}", body, self.timeout)
        except Answer as e:
            if e.code != ABORTED:  # the emulator lost it (restarted)? A new one next time (its
                self.session = None  # gateway answers NOT_FOUND as INTERNAL: no marshaller)
            raise

    def transaction(self, body: Callable[[Tx], T], deadline: float) -> T:
        """``body`` in a read-write transaction, run again on every abort until ``deadline``
        (monotonic). Raises NotSent when it certainly committed nothing, Indeterminate when
        a commit's answer never came."""
        while True:
            tx = Tx(self)
            try:
                try:
                    return body(tx)
                finally:
                    tx.rollback()
            except Answer as e:
                if e.code != ABORTED or time.monotonic() >= deadline:
                    raise NotSent(str(e)) from e
                self.aborts += 1
            except Indeterminate:
                if tx.done:
                    raise  # the commit was sent: it may have been applied
                raise NotSent("no answer before the commit: nothing committed") from None
            time.sleep(self.rng.uniform(0.002, 0.02))
