"""etcd locks with python-etcd3 (0.12), as people write them.

- ``etcd``: python-etcd3's ``client.lock(name, ttl)``: a lease with a TTL, then one transaction
  "if the key does not exist, put it on the lease". Nothing refreshes the lease, so the lock
  is a lease in the plain sense: it ends ``ttl`` after the grant whether or not the holder is
  done (a holder paused past it wakes up believing it holds the lock).
- ``etcd-keepalive``: Go's ``concurrency.Mutex`` over a ``concurrency.Session``: the session is
  a lease that a background thread keeps alive (every TTL/3); each waiter puts a key
  ``<prefix><lease id>`` on it and the waiter with the oldest key holds the lock; the others wait
  for the deletion of every older key. Safe as long as the process runs: a pause freezes the
  keepalive thread with the rest, and the lease expires under the paused holder (what Jepsen
  found with etcd 3.4.3's lock API). One departure from Go: a key left behind by a release
  that failed is deleted before queueing again, where Go would reuse it and its revision (two
  grants, one token).

The fencing token is the lock key's create revision: etcd's revision is global and increases
with every write, and a holder's key is always created after the previous holder's key was
created (Mutex: older keys hold first; lock(): after the previous key was deleted).

The lease TTL is the lock's ``ttl`` rounded up to whole seconds (etcd grants at least 2 s with
its default timings). grpc's sockets cannot be bound to the client's address, so every client
talks to etcd through a :class:`~workloads.relay.Relay` in its own process.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import etcd3
import grpc
from etcd3 import etcdrpc
from etcd3.events import DeleteEvent

from harness.core.locks import (
    LONG_CRITICAL_SECTIONS,
    Grant,
    Indeterminate,
    LockConfig,
    LockRole,
)
from workloads.relay import Relay

T = TypeVar("T")
ERRORS = (etcd3.exceptions.Etcd3Exception, grpc.RpcError)


def lease_ttl(ttl: float) -> int:
    """etcd leases are whole seconds: round up, so the lease is never shorter than asked."""
    return max(1, math.ceil(ttl))


def prefix_end(prefix: bytes) -> bytes:
    """The end of the key range holding every key that starts with ``prefix``."""
    return etcd3.utils.increment_last_byte(prefix)


def connect(config: LockConfig) -> tuple[Any, Relay]:
    """An etcd3 client whose connections go through a relay bound to the client's address."""
    relay = Relay([(n.host, n.port) for n in config.nodes], connect_timeout=config.op_timeout,
                  first=config.process)
    host, port = relay.address
    client = etcd3.client(host=host, port=port, timeout=config.op_timeout,
                          grpc_options=[("grpc.enable_http_proxy", 0)])
    return client, relay


def call(fn: Callable[[], T]) -> T:
    """One request: any transport error leaves its outcome unknown."""
    try:
        return fn()
    except ERRORS as e:
        raise Indeterminate(describe(e)) from e


def describe(e: BaseException) -> str:
    """One short line: grpc's own errors by their status code, etcd3's by name."""
    code = getattr(e, "code", None)
    if isinstance(e, grpc.RpcError) and callable(code):
        return f"grpc {code().name}"
    return f"{type(e).__name__}: {e}".strip(": ")


class Etcd3Lock(LockRole):
    """python-etcd3's ``lock()``: a key on a lease that nobody refreshes."""

    name = "etcd"
    library = "etcd3"
    promise = "a distributed lock on an etcd lease of ttl seconds"
    summary = "python-etcd3 lock(): a key on a lease TTL, never refreshed; token: revision"
    dbs = ("etcd",)
    tokens = True

    workload_defaults: ClassVar[dict[str, float]] = {}  # short holds: well inside the lease

    def __init__(self, config: LockConfig) -> None:
        self.config = config
        self.client, self.relay = connect(config)
        self.ttl = lease_ttl(config.ttl)

    def acquire(self, timeout: float) -> Grant | None:
        lock = self.client.lock(self.config.name, ttl=self.ttl)
        if not call(lambda: lock.acquire(timeout=timeout)):
            return None
        # How a user gets the token: the key's create revision, if the key is still ours.
        value, meta = call(lambda: self.client.get(lock.key))
        token = meta.create_revision if meta is not None and value == lock.uuid else None
        return Grant(token=token, validity=float(lock.lease.ttl), handle=lock)

    def release(self, grant: Grant) -> bool:
        return bool(call(grant.handle.release))

    def close(self) -> None:
        self.client.close()
        self.relay.close()


class Session:
    """A lease kept alive by a background thread, like Go's ``concurrency.Session``.

    ``done`` is set once the lease is known to be gone: the server said so, or no keepalive
    succeeded for a whole TTL (for instance because this process was paused)."""

    def __init__(self, client: Any, ttl: int) -> None:
        self.client = client
        lease = call(lambda: client.lease(ttl))
        self.id: int = lease.id
        self.ttl: int = lease.ttl
        self.done = threading.Event()
        self._closed = threading.Event()
        self._last_ok = time.monotonic()
        threading.Thread(target=self._keepalive, name="etcd-keepalive", daemon=True).start()

    def _keepalive(self) -> None:
        while not self._closed.wait(self.ttl / 3):
            try:
                replies = list(self.client.refresh_lease(self.id))
            except ERRORS:
                replies = []
            if replies and replies[0].TTL > 0:
                self._last_ok = time.monotonic()
            elif replies or time.monotonic() - self._last_ok > self.ttl:
                self.done.set()
                return

    @property
    def alive(self) -> bool:
        return not self.done.is_set() and time.monotonic() - self._last_ok <= self.ttl

    def close(self) -> None:
        self._closed.set()


class EtcdMutex(LockRole):
    """Go's ``concurrency.Mutex`` (etcd 3.4), on a session kept alive by a thread."""

    name = "etcd-keepalive"
    summary = "Go's concurrency.Mutex: lease kept alive by a thread; token: revision"
    dbs = ("etcd",)
    tokens = True

    workload_defaults: ClassVar[dict[str, float]] = LONG_CRITICAL_SECTIONS

    def __init__(self, config: LockConfig) -> None:
        self.config = config
        self.client, self.relay = connect(config)
        self.ttl = lease_ttl(config.ttl)
        self.prefix = f"/mutex/{config.name}/".encode()
        self.session: Session | None = None

    def _session(self) -> Session:
        if self.session is None or not self.session.alive:
            if self.session is not None:
                self.session.close()
            self.session = Session(self.client, self.ttl)
        return self.session

    def acquire(self, timeout: float) -> Grant | None:
        deadline = time.monotonic() + timeout
        session = self._session()
        key = self.prefix + f"{session.id:x}".encode()
        resp = call(lambda: self._try_acquire(key, session.id))
        if not resp.succeeded:
            # Our key is still there: a release that failed. Go would hand it back with its old
            # revision (its reentrancy path), so two grants would share a token; instead finish
            # that release (as a Go user retries Unlock) and queue afresh.
            self._unlock(key)
            resp = call(lambda: self._try_acquire(key, session.id))
            if not resp.succeeded:
                raise Indeterminate("our queue key is back: another acquire in this session?")
        rev = resp.header.revision
        owner = resp.responses[1].response_range.kvs
        if owner and owner[0].create_revision != rev:
            try:
                self._wait_deletes(rev - 1, deadline)
            except (Indeterminate, TimeoutError):
                self._unlock(key)  # leave the queue, as Go's Lock does when its wait fails
                return None
        # Make sure the session did not expire meanwhile: the key must still be there.
        _, meta = call(lambda: self.client.get(key))
        if meta is None:
            session.done.set()
            return None
        return Grant(token=rev, validity=float(session.ttl), handle=key)

    def _try_acquire(self, key: bytes, lease: int) -> Any:
        """One transaction: queue our key (or find it queued) and read the oldest key."""
        created = etcdrpc.Compare(result=etcdrpc.Compare.EQUAL, target=etcdrpc.Compare.CREATE,
                                  key=key, create_revision=0)
        put = etcdrpc.RequestOp(request_put=etcdrpc.PutRequest(key=key, value=b"", lease=lease))
        mine = etcdrpc.RequestOp(request_range=etcdrpc.RangeRequest(key=key))
        owner = etcdrpc.RequestOp(request_range=etcdrpc.RangeRequest(
            key=self.prefix, range_end=prefix_end(self.prefix), limit=1,
            sort_order=etcdrpc.RangeRequest.ASCEND, sort_target=etcdrpc.RangeRequest.CREATE))
        request = etcdrpc.TxnRequest(compare=[created], success=[put, owner],
                                     failure=[mine, owner])
        return self.client.kvstub.Txn(request, self.config.op_timeout)

    def _wait_deletes(self, max_create_rev: int, deadline: float) -> None:
        """Wait until no key older than ours is left (Go's waitDeletes)."""
        while True:
            request = etcdrpc.RangeRequest(
                key=self.prefix, range_end=prefix_end(self.prefix), limit=1,
                sort_order=etcdrpc.RangeRequest.DESCEND, sort_target=etcdrpc.RangeRequest.CREATE,
                max_create_revision=max_create_rev)
            resp = call(lambda r=request: self.client.kvstub.Range(r, self.config.op_timeout))
            if not resp.kvs:
                return
            self._wait_delete(resp.kvs[0].key, resp.header.revision + 1, deadline)

    def _wait_delete(self, key: bytes, start: int, deadline: float) -> None:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("lock busy")
            try:
                reply = call(lambda s=start, t=left: self.client.watch_once_response(
                    key, timeout=t, start_revision=s))
            except Indeterminate as e:
                if isinstance(e.__cause__, etcd3.exceptions.WatchTimedOut):
                    raise TimeoutError("lock busy") from e
                raise
            if isinstance(reply, Exception):  # the watch stream broke
                raise Indeterminate(f"watch failed: {type(reply).__name__}")
            if any(isinstance(ev, DeleteEvent) for ev in reply.events):
                return
            start = reply.header.revision + 1

    def _unlock(self, key: bytes) -> bool:
        return bool(call(lambda: self.client.delete(key)))

    def release(self, grant: Grant) -> bool:
        return self._unlock(grant.handle)

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
        self.client.close()
        self.relay.close()
