"""The ``mutex`` workload: acquire, write enter/exit to the resource, release.

One session: ``acquire`` -> ``write enter`` -> hold a random time -> ``write exit`` ->
``release``. Every op is journaled before it is sent (invoke) and after it returns (ok / fail /
info). The ``fenced`` workload (:mod:`workloads.fenced`) is the same loop with tokens on every
write.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from harness.core.history import FAIL, INFO, INVOKE, OK
from harness.core.journal import JournalWriter
from harness.core.locks import Grant, Indeterminate, Lock, LockContractError
from harness.core.text import show
from workloads import crash
from workloads.resource import Resource

HOLD_POLL = 0.02  # seconds between two held() checks while working under a lock


@dataclass(frozen=True)
class MutexParams:
    process: int
    lock_name: str = "lock"
    acquire_timeout: float = 5.0
    hold_min: float = 0.05
    hold_max: float = 0.3
    think_min: float = 0.0
    think_max: float = 0.05
    seed: int = 0
    end_ns: int | None = None  # monotonic time the run's load ends: stop waiting for locks then


def lock_checks(spec: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """What every lock workload gets besides its own checks: liveness (a stuck lock is
    invalid), availability (figures) and faults (every fault bit)."""
    ttl = float(spec.get("ttl") or 2.0)
    return [("liveness", {"ttl": ttl}), ("availability", {"ttl": ttl}), ("faults", {})]


class MutexWorkload:
    name: ClassVar[str] = "mutex"
    summary: ClassVar[str] = "acquire, write enter/exit to the resource, hold a while, release"
    needs_tokens: ClassVar[bool] = False
    fenced: ClassVar[bool] = False  # the resource checks the writes' tokens

    @classmethod
    def checkers(cls, spec: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        return [("mutex", {}), ("linearizable", {"model": "mutex"}), ("stats", {}),
                *lock_checks(spec)]

    def __init__(self, params: MutexParams, lock: Lock, resource: Resource,
                 journal: JournalWriter, stop: threading.Event) -> None:
        self.p = params
        self.lock = lock
        self.resource = resource
        self.journal = journal
        self.stop = stop
        self.rng = random.Random(params.seed * 7919 + params.process)
        self.session = 0
        # Exceptions the lock's acquire raises when it certainly did not acquire (a library
        # that reports its own timeout by raising): a fail, not an unknown outcome.
        self.timeout_errors: tuple[type[BaseException], ...] = tuple(
            getattr(lock, "timeout_errors", ()) or ())

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
        except self.timeout_errors as e:  # the lock says: not acquired, certainly
            j.record(FAIL, "acquire", None, lock=name,
                     error=f"timeout: {type(e).__name__}: {e}"[:200])
            return None
        except Exception as e:  # a crash in the lock is an unknown outcome, never a fail
            j.record(INFO, "acquire", None, lock=name, error=f"{type(e).__name__}: {e}"[:200])
            return None
        if grant is None:
            j.record(FAIL, "acquire", None, lock=name, error="timeout: lock busy")
            return None
        if not isinstance(grant, Grant):
            j.record(INFO, "acquire", None, lock=name, error="not a Grant")
            raise LockContractError(
                f"{type(self.lock).__name__}.acquire returned {show(grant, 60)} "
                f"({type(grant).__name__}), not a Grant or None")
        j.record(OK, "acquire", {"session": self.session, "validity": grant.validity},
                 lock=name, token=grant.token)
        return grant

    def critical_section(self, grant: Grant) -> None:
        if not self.write("enter", grant):
            return
        crash.point(crash.HOLDING)
        if getattr(self.lock, "reentrant", False):
            self.reenter()
        if self.hold(grant, self.rng.uniform(self.p.hold_min, self.p.hold_max)):
            self.write("exit", grant)

    def reenter(self) -> None:
        """A reentrant lock (``reentrant = True``) is taken again by its holder, then let go
        once: it must stay held for the rest of the critical section. Recorded as
        ``reacquire`` / ``rerelease``, which the grant-based checkers leave aside, so the outer
        grant is judged from its acquire to its final release."""
        j, name = self.journal, self.p.lock_name
        value = {"session": self.session}
        j.record(INVOKE, "reacquire", value, lock=name)
        try:
            inner = self.lock.acquire(self.p.acquire_timeout)
        except Exception as e:
            j.record(INFO, "reacquire", value, lock=name, error=f"{type(e).__name__}: {e}"[:200])
            return
        if inner is None:
            j.record(FAIL, "reacquire", value, lock=name, error="the holder could not re-enter")
            return
        j.record(OK, "reacquire", value, lock=name, token=inner.token)
        self.stop.wait(self.rng.uniform(self.p.hold_min, self.p.hold_max) / 2)
        j.record(INVOKE, "rerelease", value, lock=name)
        try:
            released = self.lock.release(inner)
        except Exception as e:
            j.record(INFO, "rerelease", value, lock=name, error=f"{type(e).__name__}: {e}"[:200])
            return
        j.record(OK if released else FAIL, "rerelease", value, lock=name)

    def hold(self, grant: Grant, seconds: float) -> bool:
        """Work ``seconds`` under the lock. A lock that can tell it was lost (an optional
        ``held(grant)``, e.g. a session listener) is asked as the work goes on, and the work
        stops as soon as it says no: returns False then (the careful client writes no more)."""
        held = getattr(self.lock, "held", None)
        if held is None:
            self.stop.wait(seconds)
            return True
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if self.stop.wait(min(HOLD_POLL, left)):
                return True
            if not held(grant):
                return False
        return True

    def write(self, kind: str, grant: Grant) -> bool:
        """Returns True when the write was accepted."""
        token = grant.token if self.fenced else None
        return self.write_value(kind, {"kind": kind, "session": self.session}, token)

    def write_value(self, kind: str, value: dict[str, Any], token: int | None,
                    counter: tuple[int, int] | None = None) -> bool:
        """Journal and send one write to the resource; True when it was accepted."""
        j = self.journal
        j.record(INVOKE, "write", value, lock=self.p.lock_name, token=token)
        try:
            seq, accepted = self.resource.write(self.p.process, self.session, kind, token,
                                                counter, self.p.lock_name)
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
                     error="not-held: the lock had expired or was taken")
