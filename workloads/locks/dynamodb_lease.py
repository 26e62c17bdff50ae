"""``dynamodb-lease``: the algorithm of Amazon's DynamoDB lock client, written from its
published description, on boto3.

The lock is one item of the table: the owner's name, the lease duration it asks for, a record
version number (RVN, a fresh UUID at every write of the holder) and whether it was released.

- **acquire**: read the item consistently. No item: ``PutItem`` if ``attribute_not_exists``; a
  released one: ``PutItem`` if its RVN is still the one read. Held by someone: remember its
  RVN and the moment (of this client's own clock) it was first seen; read again
  every refresh period; a changed RVN (a heartbeat) starts the watch again; an RVN unchanged
  for the whole lease duration the item names means its holder is gone, and the waiter takes
  the lock over with ``PutItem`` if the RVN is still that one. Every grant is a write whose
  condition names exactly the state it read, so grants are serialised by the server.
- **heartbeats**: a thread of the holder rewrites the RVN (``UpdateItem`` if the RVN is its
  last one and the owner is itself) every third of the lease. A refused heartbeat means the
  lock was taken over: the thread stops.
- **release**: ``UpdateItem`` marking the item released, on the same condition. Amazon's client
  can delete the item instead; marking keeps the item, and with it the token.

The watch is timed on the waiter's wall clock (``--lock-opt watch-clock=monotonic``: its
monotonic clock, as Amazon's Java client reads ``System.nanoTime``): the wall clock is the one
a fault can move in one client process alone without moving the history's own timestamps
(:mod:`nemesis.client_clock`); neither is stepped by NTP here.

Nothing on the server expires: safety rests on the holder's heartbeats reaching the server
within a lease, and on the waiter's clock not running fast. A holder paused past a lease (its
heartbeats stop with it) wakes up believing it holds the lock while a waiter has taken it.

Token: ``fence``, a number in the item that every grant's conditional write sets to one more
than the value it read (1 for a new item), kept by heartbeats and releases: it grows with grant
order. A request whose outcome is unknown (a read timeout) makes the next conditional write
accept either RVN, the last known one or the one that request would have written.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from harness.core.locks import LONG_CRITICAL_SECTIONS, Grant, Indeterminate, LockConfig, retried
from harness.core.options import Option
from workloads.locks.dynamodb_conn import (
    KEY,
    TABLE,
    ConditionFailed,
    DynamoLock,
    NotSent,
    call,
    get,
)


@dataclass
class Hold:
    """One grant's state, shared by the workload's thread and the heartbeat thread."""

    owner: str
    fence: int
    rvns: list[str]  # the RVNs the item may hold now: the last known, and an unknown write's
    lost: bool = False
    stop: threading.Event = field(default_factory=threading.Event)
    mu: threading.Lock = field(default_factory=threading.Lock)
    thread: threading.Thread | None = None


CLOCKS: dict[str, Callable[[], float]] = {"wall": time.time, "monotonic": time.monotonic}


def version_condition(rvns: list[str]) -> tuple[str, dict[str, Any]]:
    """``rvn IN (...) AND ownerName = :owner`` with its values (the owner's added later)."""
    names = [f":v{i}" for i in range(len(rvns))]
    return (f"recordVersionNumber IN ({', '.join(names)}) AND ownerName = :owner",
            {n: {"S": r} for n, r in zip(names, rvns, strict=True)})


class DynamoLeaseLock(DynamoLock):
    name = "dynamodb-lease"
    summary = ("Amazon's DynamoDB lock client: conditional PutItem on the record version, "
               "heartbeats; a waiter takes over after a lease on its own clock; token: fence")
    tokens = True
    workload_defaults: ClassVar[dict[str, float]] = LONG_CRITICAL_SECTIONS
    options: ClassVar[dict[str, Option]] = {
        "watch-clock": Option(str, "wall", "the waiter's clock that times its watch of the "
                              "holder's record: wall or monotonic", choices=tuple(CLOCKS)),
    }

    def __init__(self, config: LockConfig) -> None:
        super().__init__(config)
        self.lease_ms = max(1, int(config.ttl * 1000))
        self.heartbeat = config.ttl / 3
        self.refresh = min(0.1, config.ttl / 10)
        self.clock = CLOCKS[str(config.options.get("watch-clock") or "wall")]

    # acquire ----------------------------------------------------------------------------------
    def acquire(self, timeout: float) -> Grant | None:
        watched: tuple[str, float] | None = None  # (RVN, when this client first saw it)

        def once() -> Grant | None:
            nonlocal watched
            grant, watched = self.attempt(watched)
            return grant
        return retried(once, timeout, lambda: self.refresh, (NotSent,))

    def attempt(self, watched: tuple[str, float] | None
                ) -> tuple[Grant | None, tuple[str, float] | None]:
        """One look at the item and, where the algorithm says so, one conditional write."""
        item = get(self.client, self.key)
        if item is None:
            return self.put(None, 1), None
        rvn = item["recordVersionNumber"]["S"]
        fence = int(item.get("fence", {"N": "0"})["N"]) + 1
        if item.get("isReleased", {}).get("BOOL", False):
            return self.put(rvn, fence), None
        now = self.clock()
        if watched is None or watched[0] != rvn:
            return None, (rvn, now)
        lease = int(item.get("leaseDuration", {"N": str(self.lease_ms)})["N"]) / 1000
        if now - watched[1] < lease:
            return None, watched
        return self.put(rvn, fence), None  # unchanged for a whole lease: its holder is gone

    def put(self, seen: str | None, fence: int) -> Grant | None:
        """Write the item as ours if it is still as read (``seen``: its RVN; None: absent)."""
        owner = f"c{self.config.process}-{uuid.uuid4().hex}"
        rvn = uuid.uuid4().hex
        item = {KEY: {"S": self.key}, "ownerName": {"S": owner},
                "recordVersionNumber": {"S": rvn}, "leaseDuration": {"N": str(self.lease_ms)},
                "fence": {"N": str(fence)}, "isReleased": {"BOOL": False}}
        if seen is None:
            cond: dict[str, Any] = {"ConditionExpression": f"attribute_not_exists({KEY})"}
        else:
            cond = {"ConditionExpression": "recordVersionNumber = :seen",
                    "ExpressionAttributeValues": {":seen": {"S": seen}}}
        try:
            call(lambda: self.client.put_item(TableName=TABLE, Item=item, **cond))
        except ConditionFailed:
            return None
        hold = Hold(owner, fence, [rvn])
        hold.thread = threading.Thread(target=self.beat, args=(hold,), daemon=True,
                                       name=f"dynamodb-heartbeat-{fence}")
        hold.thread.start()
        return Grant(token=fence, validity=self.config.ttl, handle=hold)

    # heartbeats and release -----------------------------------------------------------------
    def update(self, hold: Hold, expression: str, values: dict[str, Any]) -> None:
        """One ``UpdateItem`` of the item if it is still this grant's (any RVN it may hold)."""
        with hold.mu:
            expr, known = version_condition(hold.rvns)
        request = {"TableName": TABLE, "Key": {KEY: {"S": self.key}},
                   "UpdateExpression": expression, "ConditionExpression": expr,
                   "ExpressionAttributeValues": {**known, **values,
                                                 ":owner": {"S": hold.owner}}}
        call(lambda: self.client.update_item(**request))

    def beat(self, hold: Hold) -> None:
        while not hold.stop.wait(self.heartbeat):
            new = uuid.uuid4().hex
            try:
                self.update(hold, "SET recordVersionNumber = :new, leaseDuration = :lease",
                            {":new": {"S": new}, ":lease": {"N": str(self.lease_ms)}})
            except ConditionFailed:
                hold.lost = True  # taken over: this client's lease had run out on its waiter
                return
            except NotSent:
                continue
            except Indeterminate:
                with hold.mu:  # any RVN known, or the one just sent
                    hold.rvns = [*hold.rvns, new][-8:]
                continue
            with hold.mu:
                hold.rvns = [new]

    def release(self, grant: Grant) -> bool:
        hold: Hold = grant.handle
        hold.stop.set()
        if hold.thread is not None:
            hold.thread.join(self.config.op_timeout + 1.0)
        if hold.lost:
            return False
        try:
            self.update(hold, "SET isReleased = :true, recordVersionNumber = :new",
                        {":true": {"BOOL": True}, ":new": {"S": uuid.uuid4().hex}})
        except ConditionFailed:
            return False
        return True
