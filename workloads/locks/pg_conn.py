"""How every PostgreSQL client of the project connects, times out and reads errors.

- :func:`connect`: psycopg 3 connections that fail fast. libpq's own timeouts cover a dead
  network (``tcp_user_timeout``, keepalives); :func:`deadline` covers a server that is alive
  but does not answer (a paused postmaster and backends: the kernel still acknowledges every
  byte, so no TCP timeout fires): it shuts the socket down when an operation overruns, and the
  operation fails at once instead of hanging with the server.
- :func:`classify`: which errors certainly did nothing (the server said so: a lock that was
  not available, a session the server had already ended) and which leave the outcome unknown
  (the connection broke mid-request).

libpq opens its sockets in C, so :mod:`workloads.sockbind` cannot bind them to the client's
address: the controller gives a client process a group id of its own and rewrites the source
of its connections with iptables (:mod:`harness.controller.netfilter`), as for servers.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from harness.core.locks import Indeterminate

USER = "postgres"
DBNAME = "postgres"
CONNECT_TIMEOUT = 2  # libpq's least (it rounds anything shorter up to 2 s)

# SQLSTATEs after which the statement certainly did not take effect.
NOT_DONE = {
    "55P03",  # lock_not_available (NOWAIT, lock_timeout)
    "57014",  # query_canceled (statement_timeout)
    "25P03",  # idle_in_transaction_session_timeout: the server ended the session first
    "57P05",  # idle_session_timeout
    "57P01",  # admin_shutdown
    "40001",  # serialization_failure
    "40P01",  # deadlock_detected
    "25P02",  # in_failed_sql_transaction
    "57P03",  # cannot_connect_now (starting up, shutting down)
}


class Timeout(Indeterminate):
    """No answer in time (:func:`deadline`): the outcome is unknown."""


class NotDone(Exception):
    """The statement certainly did nothing (the server refused or had ended the session)."""


def conninfo(host: str, port: int, timeout: float, options: dict[str, Any] | None = None
             ) -> dict[str, Any]:
    """libpq parameters: fail fast on a dead network; ``options`` are session settings."""
    ms = max(100, int(timeout * 1000))
    params: dict[str, Any] = {
        "host": host, "port": port, "user": USER, "dbname": DBNAME,
        "connect_timeout": CONNECT_TIMEOUT, "application_name": "lock-harness",
        "tcp_user_timeout": ms, "keepalives": 1, "keepalives_idle": 1,
        "keepalives_interval": 1, "keepalives_count": 2,
    }
    if options:
        params["options"] = " ".join(f"-c {k}={v}" for k, v in options.items())
    return params


def connect(host: str, port: int, timeout: float, *, autocommit: bool = True,
            options: dict[str, Any] | None = None) -> psycopg.Connection[Any]:
    """A connection, or NotDone (refused, the server not ready) / Indeterminate."""
    try:
        return psycopg.connect(autocommit=autocommit,
                               **conninfo(host, port, timeout, options))
    except psycopg.Error as e:
        raise NotDone(f"cannot connect to {host}:{port}: {one_line(e)}") from e


def probe(host: str, port: int) -> bool:
    """Does the server answer ``SELECT 1`` now? (The readiness probe.)"""
    try:
        with psycopg.connect(**conninfo(host, port, 1.0)) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)
    except psycopg.Error:
        return False


def one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:200] or type(e).__name__


def classify(e: psycopg.Error) -> Exception:
    """NotDone when the server certainly did nothing, else Indeterminate."""
    if getattr(e, "sqlstate", None) in NOT_DONE or isinstance(
            e, pg_errors.ProgrammingError | pg_errors.DataError | pg_errors.IntegrityError):
        return NotDone(f"{type(e).__name__}: {one_line(e)}")
    return Indeterminate(f"{type(e).__name__}: {one_line(e)}")


@contextlib.contextmanager
def deadline(conn: psycopg.Connection[Any], seconds: float) -> Iterator[None]:
    """Bound what runs inside to ``seconds``: past it the socket is shut down, so a request
    to a server that never answers fails (and the connection is done for). Errors come out
    classified (:func:`classify`)."""
    try:
        fd = conn.pgconn.socket
    except psycopg.Error as e:
        raise NotDone(f"connection closed: {one_line(e)}") from e
    mu = threading.Lock()
    finished = False
    fired = threading.Event()

    def cut() -> None:
        with mu:
            if finished:
                return
            fired.set()
            with contextlib.suppress(OSError):
                s = socket.socket(fileno=os.dup(fd))
                try:
                    s.shutdown(socket.SHUT_RDWR)
                finally:
                    s.close()

    timer = threading.Timer(seconds, cut)
    timer.daemon = True
    timer.start()
    try:
        yield
    except psycopg.Error as e:
        if fired.is_set():
            raise Timeout(f"timeout: no answer in {seconds:.1f} s") from e
        raise classify(e) from e
    finally:
        with mu:
            finished = True
        timer.cancel()


def close_quietly(conn: psycopg.Connection[Any] | None) -> None:
    if conn is not None:
        with contextlib.suppress(Exception):
            conn.close()
