"""The ``mutex`` and ``fenced`` workloads: acquire, write enter/exit to the resource, release.

One session: ``acquire`` -> ``write enter`` -> hold a random time -> ``write exit`` ->
``release``. In ``fenced`` mode every write carries the grant's token and the resource rejects
stale ones; a rejected write ends the session early (the holder has been fenced off).
Every op is journaled before it is sent (invoke) and after it returns (ok / fail / info).
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

from harness.history import FAIL, INFO, INVOKE, OK, JournalWriter
from workloads.locks.base import Grant, Indeterminate, Lock
from workloads.resource import Resource


@dataclass(frozen=True)
class MutexParams:
    process: int
    lock_name: str = "lock"
    fenced: bool = False
    acquire_timeout: float = 5.0
    hold_min: float = 0.05
    hold_max: float = 0.3
    think_min: float = 0.0
    think_max: float = 0.05
    seed: int = 0
    end_ns: int | None = None  # monotonic time the run's load ends: stop waiting for locks then


class MutexWorkload:
    def __init__(self, params: MutexParams, lock: Lock, resource: Resource,
                 journal: JournalWriter, stop: threading.Event) -> None:
        self.p = params
        self.lock = lock
        self.resource = resource
        self.journal = journal
        self.stop = stop
        self.rng = random.Random(params.seed * 7919 + params.process)
        self.session = 0

    def run(self) -> None:
        while not self.stop.is_set():
            self.session += 1
            grant = self.acquire()
            if grant is not None:
                self.critical_section(grant)
                self.release(grant)
            self.stop.wait(self.rng.uniform(self.p.think_min, self.p.think_max))

    def acquire(self) -> Grant | None:
        j, name = self.journal, self.p.lock_name
        j.record(INVOKE, "acquire", None, lock=name)
        timeout = self.p.acquire_timeout
        if self.p.end_ns is not None:
            timeout = max(0.1, min(timeout, (self.p.end_ns - time.monotonic_ns()) / 1e9))
        try:
            grant = self.lock.acquire(timeout)
        except Indeterminate as e:
            j.record(INFO, "acquire", None, lock=name, error=str(e)[:200])
            return None
        except Exception as e:  # a crash in the lock is an unknown outcome, never a fail
            j.record(INFO, "acquire", None, lock=name, error=f"{type(e).__name__}: {e}"[:200])
            return None
        if grant is None:
            j.record(FAIL, "acquire", None, lock=name, error="timeout: lock busy")
            return None
        j.record(OK, "acquire", {"session": self.session, "validity": grant.validity},
                 lock=name, token=grant.token)
        return grant

    def critical_section(self, grant: Grant) -> None:
        if not self.write("enter", grant):
            return
        self.stop.wait(self.rng.uniform(self.p.hold_min, self.p.hold_max))
        self.write("exit", grant)

    def write(self, kind: str, grant: Grant) -> bool:
        """Returns True when the write was accepted."""
        j = self.journal
        token = grant.token if self.p.fenced else None
        value = {"kind": kind, "session": self.session}
        j.record(INVOKE, "write", value, lock=self.p.lock_name, token=token)
        try:
            seq, accepted = self.resource.write(self.p.process, self.session, kind, token)
        except Exception as e:
            j.record(INFO, "write", value, lock=self.p.lock_name, token=token,
                     error=f"{type(e).__name__}: {e}"[:200])
            return False
        done = {**value, "seq": seq}
        if accepted:
            j.record(OK, "write", done, lock=self.p.lock_name, token=token)
            return True
        j.record(FAIL, "write", done, lock=self.p.lock_name, token=token,
                 error="rejected: stale token")
        return False

    def release(self, grant: Grant) -> None:
        j, name = self.journal, self.p.lock_name
        value = {"session": self.session}
        j.record(INVOKE, "release", value, lock=name, token=grant.token)
        try:
            released = self.lock.release(grant)
        except Exception as e:
            j.record(INFO, "release", value, lock=name, token=grant.token,
                     error=f"{type(e).__name__}: {e}"[:200])
            return
        if released:
            j.record(OK, "release", value, lock=name, token=grant.token)
        else:
            j.record(FAIL, "release", value, lock=name, token=grant.token,
                     error="not the holder (the lock had expired or was taken)")
