"""The ``mutex`` workload: acquire, write enter/exit to the resource, release.

One session: ``acquire`` -> ``write enter`` -> hold a random time -> ``write exit`` ->
``release``. Every op is journaled before it is sent (invoke) and after it returns (ok / fail /
info). The ``fenced`` workload (:mod:`workloads.fenced`) is the same loop with tokens on every
write.

The resource's mode (:mod:`harness.core.resource`) shapes the writes: ``fenced`` sends the
grant's token; ``version`` and ``cas`` start the critical section with a ``read`` of the
resource and hold half the time before the first write (read, work, write, as applications
do), each write expecting what the read (or the previous write) left. A lock that lives in a
transaction (``session(grant)``) has every read and write of the critical section go through
that transaction.
"""

from __future__ import annotations

import math
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from time import monotonic_ns
from typing import Any, ClassVar

from harness.core import defaults
from harness.core.history import FAIL, INFO, INVOKE, OK
from harness.core.journal import JournalWriter, encode, literal, token_json
from harness.core.locks import Grant, Indeterminate, Lock, LockContractError, Refused
from harness.core.resource import READ_MODES, Observed, Resource, Write, Written
from harness.core.text import show
from workloads import crash

HOLD_POLL = 0.02  # seconds between two held() checks while working under a lock (default)
RELEASE_TIMEOUT = 10.0  # seconds a release may take before it is info and the client goes on
_UNSEEN = object()  # no grant's validity is this
REJECTED = {"fenced": "rejected: stale token",
            "version": "rejected: the version moved since it was read",
            "cas": "rejected: another holder's value since it was read"}


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
    release_timeout: float = RELEASE_TIMEOUT  # then the release is info, the client goes on
    held_poll: float = HOLD_POLL  # seconds between two held(grant) questions while holding
    # every line on record as it happens: a fault finds the holder in the journal (False, a
    # run without faults: the loop of empty sessions may write an ok with the next invoke)
    holds_seen: bool = True


class LimitedCall:
    """``fn()`` on a thread of its own, to be waited for a limited time; its result or the
    exception it raised once it returns."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.result: Any = None
        self.error: Exception | None = None
        self.done = threading.Event()
        threading.Thread(target=self._run, daemon=True, name="release").start()

    def _run(self) -> None:
        try:
            self.result = self.fn()
        except Exception as e:
            self.error = e
        finally:
            self.done.set()

    def wait(self, seconds: float) -> bool:
        """True when the call returned within ``seconds``."""
        return self.done.wait(seconds)


class Stop(threading.Event):
    """The event that stops a client's workload (its SIGTERM handler sets it), which also
    says so in a plain attribute, ``stopped``: a loop that checks it each session makes no
    call (``is_set()`` is a frame of Python's, 0.4k instructions)."""

    stopped = False

    def set(self) -> None:
        self.stopped = True
        super().set()


@dataclass
class Section:
    """One critical section's view of the resource: what its next write must expect."""

    grant: Grant
    via: Any = None  # the lock's own session, when it has one
    expect: Any = None  # version / cas
    claim: str | None = None  # cas: this holder's lock value
    first: bool = True  # no write of this grant accepted yet


def resource_mode(spec: Mapping[str, Any], fenced: bool) -> str:
    """The resource's mode of a run: the spec's, else the workload's default."""
    return defaults.resource_mode(spec.get("resource_mode"), fenced)


def lock_checks(spec: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """What every lock workload gets besides its own checks: liveness (a stuck lock is
    invalid), availability (figures) and faults (every fault bit)."""
    ttl = float(spec.get("ttl") or defaults.TTL)
    return [("liveness", {"ttl": ttl}), ("availability", {"ttl": ttl}),
            ("faults", {"release_waits": spec.get("release_waits", True),
                        "asked": asked_faults(spec)})]


def asked_faults(spec: Mapping[str, Any]) -> list[str]:
    """The faults a run was asked for: its nemeses, else its schedule's steps' faults."""
    given = spec.get("nemesis") or []
    if isinstance(given, str):
        given = given.split(",")
    names = [str(n) for n in given if n and n != "none"]
    schedule = spec.get("schedule")
    if not names and isinstance(schedule, Mapping):
        names = sorted({str(s.get("fault")) for s in schedule.get("steps") or []
                        if isinstance(s, Mapping) and s.get("fault")})
    return names


class MutexWorkload:
    name: ClassVar[str] = "mutex"
    summary: ClassVar[str] = "acquire, write enter/exit to the resource, hold a while, release"
    needs_tokens: ClassVar[bool] = False
    fenced: ClassVar[bool] = False  # the resource checks the writes' tokens
    resource_modes: ClassVar[tuple[str, ...] | None] = None  # the modes it can use (None: all)

    @classmethod
    def checkers(cls, spec: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        mode = resource_mode(spec, cls.fenced)
        if mode == "plain":
            return [("mutex", {}), ("linearizable", {"model": "mutex"}), ("stats", {}),
                    *lock_checks(spec)]
        # The resource guards itself: lock overlaps are informational, the data decides.
        extra = [("fencing", {})] if mode == "fenced" else []
        return [("mutex", {"overlaps_informational": True}), *extra,
                ("linearizable", {"model": "fenced-mutex" if mode == "fenced" else "mutex",
                                  "informational": True}),
                ("stats", {}), *lock_checks(spec)]

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
        self.mode = getattr(resource, "mode", "plain")
        self.section: Section | None = None
        self.outcome = OK  # of the last write: ok / fail / info
        # A lock whose release returns on its own within release_timeout is called on this
        # thread: no thread started for each release (most of a fast lock's CPU per session).
        bound = getattr(lock, "release_bound", None)
        seconds = bound() if callable(bound) else None
        if seconds is not None and (isinstance(seconds, bool)
                                    or not isinstance(seconds, int | float)):
            raise LockContractError(f"{type(lock).__name__}.release_bound() returned "
                                    f"{show(seconds, 60)}, not seconds or None")
        self.release_inline = seconds is not None and seconds <= params.release_timeout
        # What the invoke of an acquire shows as its timeout when the run's end is not near.
        self.timeout_shown = round(params.acquire_timeout, 3)
        # The lines of a session's ops that go well, prepared: each written from its format
        # with the time, the value's parts and the token put in (no op built or encoded).
        name, line_format = params.lock_name, journal.line_format
        self.acquiring = line_format(INVOKE, "acquire", name, b"%b", b"")
        self.acquired = line_format(OK, "acquire", name, b'{"session":%d,"validity":%b}')
        self.releasing, self.released = (line_format(t, "release", name, b'{"session":%d}')
                                         for t in (INVOKE, OK))
        self.timeout_json = encode({"timeout": self.timeout_shown})
        # The same lines with what is the same in most sessions put in once (a part less to
        # fill in each line): the acquire's whole timeout (while the run's end is not near),
        # no token, and (see acquired_form) the grant's validity.
        self.acquiring_far = line_format(INVOKE, "acquire", name, literal(self.timeout_json))
        self.releasing_plain, self.released_plain = (
            line_format(t, "release", name, b'{"session":%d}', b"") for t in (INVOKE, OK))
        # The JSON of the last grant's validity (a lock's grants share theirs, mostly): the
        # same object, the same bytes; its own line once a second grant in a row has it.
        self.validity: Any = None
        self.validity_json = b"null"
        self.acquired_plain: bytes | None = None
        # run_paired's: an acquire's invoke with the whole timeout, no token (the time to put
        # in only), and after a release's ok
        self.acquiring_whole = line_format(INVOKE, "acquire", name, literal(self.timeout_json),
                                           b"")
        self.released_acquiring = self.released_plain + self.acquiring_whole
        self.released_acquiring_near = self.released_plain + self.acquiring  # a timeout given
        # Until this monotonic time an acquire is given its whole acquire_timeout: the run's
        # end is further away (and the timeout is no shorter than the 0.1 s an acquire gets
        # at least); after it, the time left (see acquire).
        limit, end_ns = params.acquire_timeout, params.end_ns
        self.far_until_ns = (math.inf if end_ns is None
                             else end_ns - limit * 1e9 if limit >= 0.1 else -math.inf)

    def run(self) -> None:
        is_set, wait = self.stop.is_set, self.stop.wait
        acquire, release = self.acquire, self.release
        critical_section = None if self.holds_nothing() else self.critical_section
        low, high = self.p.think_min, self.p.think_max
        if (critical_section is None and self.release_inline and max(low, high) <= 0
                and isinstance(self.stop, Stop) and not self.p.holds_seen):
            self.run_paired()
            return
        while not is_set():
            self.session += 1
            grant = acquire()
            if grant is not None:
                if critical_section is not None:
                    critical_section(grant)
                release(grant)
            think = low if low == high else self.rng.uniform(low, high)  # draw(low, high)
            if think > 0:
                wait(think)

    def run_paired(self) -> None:
        """:meth:`run` of empty sessions (hold 0, think 0) whose release runs on this thread:
        the lines that follow one another with no request between them are written in one
        copy, at one clock read: an acquire's ok with its release's invoke, and a release's ok
        with the next acquire's invoke (two copies a session, not four). Each invoke is on
        record before its request is sent, as in :meth:`run`; a release's ok waits for the
        next invoke (or the loop's end), with nothing but the stop check between them. A
        session whose grant is not the usual one (a token, a validity of its own) is recorded
        and released the general way (:meth:`granted`, :meth:`release`), an error as
        :meth:`acquire` and :meth:`release` record it.

        Only in a run without faults (``holds_seen`` False): a hold written with its release's
        invoke is never seen by the controller's live view, which the faults aimed at a holder
        read (with it under ``--nemesis pause``, 2 of 4 runs had no fault: UNKNOWN).

        The invoke of such a pair is put 1 ns after the completion before it: the request is
        sent after the copy, so that is still no later than the invocation, and a process's
        op never begins at the very ns its last one ended (the premise of the linearizability
        check's order of sections, :mod:`checker.lockorder`; equal times send every part to
        the search: a 10 s run's check took 5.9 s instead of 2.1 s)."""
        j, stop, session = self.journal, self.stop, self.session
        t0, put_at = j.t0_ns, j.put_at
        write, copy = j.mapped_write(), j.copy
        take, let_go = self.lock.acquire, self.lock.release
        whole, far_until = self.p.acquire_timeout, self.far_until_ns
        usual, both = self.paired_form()
        done = 0  # the session whose release's ok is still to be written
        try:
            while not stop.stopped:
                now = monotonic_ns()
                self.session = session = session + 1
                t = now - t0 if now > t0 else 0
                if now <= far_until:  # the whole timeout, put in the format once
                    timeout = whole
                    line = (self.released_acquiring % (t, done, t + 1) if done
                            else self.acquiring_whole % t)
                else:  # the run's end is near: the time left, 0.1 s at least
                    timeout, shown = self.timeout_near(now)
                    line = (self.released_acquiring_near % (t, done, t + 1, shown) if done
                            else self.acquiring % (t, shown))
                done = 0
                try:
                    write(line)
                except ValueError:  # the mapping is full: the file grows
                    copy(line)
                try:
                    grant = take(timeout)
                except Exception as e:
                    self.acquire_raised(e)
                    continue
                if (grant.__class__ is not Grant or grant.validity is not usual
                        or grant.token is not None):
                    grant = self.granted(grant)
                    if grant is not None:
                        self.release(grant)
                    usual, both = self.paired_form()
                    continue
                now = monotonic_ns()
                t = now - t0 if now > t0 else 0
                line = both % (t, session, t + 1, session)
                try:
                    write(line)
                except ValueError:
                    copy(line)
                try:
                    released = let_go(grant)
                except Exception as e:
                    self.release_failed(e, session, None)
                    continue
                if released:
                    done = session
                else:
                    self.not_released(session, None)
        finally:
            if done:
                put_at(monotonic_ns(), self.released_plain, done)

    def paired_form(self) -> tuple[Any, bytes]:
        """The validity of the usual grant and run_paired's line of its ok with its release's
        invoke (a session's number and the time to put in, twice each); none before the
        lock's grants have shown a validity twice (no grant is then the usual one)."""
        if self.acquired_plain is None:
            return _UNSEEN, b""
        return self.validity, self.acquired_plain + self.releasing_plain

    def holds_nothing(self) -> bool:
        """Is every critical section empty (nothing done, nothing drawn), so the loop need not
        call it? Not here: the mutex workload always writes."""
        return False

    def draw(self, low: float, high: float) -> float:
        """A time between ``low`` and ``high`` (the RNG's uniform draw); one of a range of a
        single value is that value, drawn without the RNG. (The loop's think time and the lock
        workload's hold are drawn the same way inline: a frame less each, twice a session.)"""
        return low if low == high else self.rng.uniform(low, high)

    def acquire(self) -> Grant | None:
        j = self.journal
        now = monotonic_ns()  # the invoke's time, and what tells how near the run's end is
        if now <= self.far_until_ns:
            timeout = self.p.acquire_timeout
            j.put_at(now, self.acquiring_far, b"")  # no token
        else:
            timeout, shown = self.timeout_near(now)
            j.put_at(now, self.acquiring, shown)
        try:
            grant = self.lock.acquire(timeout)
        except Exception as e:
            return self.acquire_raised(e)
        if grant.__class__ is Grant and grant.validity is self.validity and grant.token is None:
            j.put_at(monotonic_ns(), self.acquired_plain or self.acquired_form(), self.session)
            return grant
        return self.granted(grant)

    def timeout_near(self, now: int) -> tuple[float, bytes]:
        """The timeout of an acquire invoked at ``now`` once the run's end is near: max(0.1,
        min(timeout, left)), without the two calls; and its JSON as the invoke shows it (its
        own timeout in the history: an acquire pending past it is unmet demand)."""
        timeout = limit = self.p.acquire_timeout
        end_ns = self.p.end_ns
        if end_ns is not None:
            left = (end_ns - now) / 1e9
            if left < timeout:
                timeout = left
            if timeout < 0.1:
                timeout = 0.1
        return timeout, (self.timeout_json if timeout == limit
                         else encode({"timeout": round(timeout, 3)}))

    def acquire_raised(self, e: Exception) -> None:
        """The lock's acquire raised ``e``: recorded as its outcome (none is a grant)."""
        j, name = self.journal, self.p.lock_name
        if isinstance(e, Indeterminate):
            j.record(INFO, "acquire", None, lock=name, error=str(e)[:200])
        elif isinstance(e, Refused):  # a None that says why
            j.record(FAIL, "acquire", None, lock=name, error=prefixed("timeout: ", str(e)))
        elif isinstance(e, self.timeout_errors):  # the lock says: not acquired, certainly
            j.record(FAIL, "acquire", None, lock=name,
                     error=f"timeout: {type(e).__name__}: {e}"[:200])
        else:  # a crash in the lock is an unknown outcome, never a fail
            j.record(INFO, "acquire", None, lock=name, error=f"{type(e).__name__}: {e}"[:200])

    def granted(self, grant: Any) -> Grant | None:
        """What the lock's acquire returned, recorded: none (a fail), a grant (its ok), or
        anything else (the lock broke the protocol)."""
        j, name = self.journal, self.p.lock_name
        if grant is None:
            j.record(FAIL, "acquire", None, lock=name, error="timeout: lock busy")
            return None
        if not isinstance(grant, Grant):
            j.record(INFO, "acquire", None, lock=name, error="not a Grant")
            raise LockContractError(
                f"{type(self.lock).__name__}.acquire returned {show(grant, 60)} "
                f"({type(grant).__name__}), not a Grant or None")
        validity, token = grant.validity, grant.token
        if validity is self.validity:
            if token is None:
                j.put_at(monotonic_ns(), self.acquired_plain or self.acquired_form(),
                         self.session)
                return grant
        else:
            self.validity, self.validity_json = validity, encode(validity)
            self.acquired_plain = None
        j.put(self.acquired, self.session, self.validity_json,
              b"" if token is None else token_json(token))
        return grant

    def acquired_form(self) -> bytes:
        """The line of an acquire's ok without a token, the last grant's validity put in."""
        self.acquired_plain = self.journal.line_format(
            OK, "acquire", self.p.lock_name,
            b'{"session":%d,"validity":' + literal(self.validity_json) + b"}", b"")
        return self.acquired_plain

    def begin(self, grant: Grant) -> Section:
        """The critical section starts: note the lock's session, if it has one."""
        session = getattr(self.lock, "session", None)
        via = session(grant) if callable(session) else None
        claim = None
        if self.mode == "cas":  # antirez: the lock's own random value, else one of ours
            claim = grant.handle if isinstance(grant.handle, str) else uuid.uuid4().hex
        self.section = Section(grant, via, claim=claim)
        return self.section

    def critical_section(self, grant: Grant) -> None:
        hold = self.draw(self.p.hold_min, self.p.hold_max)
        section = self.begin(grant)
        if self.mode in READ_MODES:  # read, work, then write what the read allows
            if self.read(section) is None:
                return
            hold /= 2
            if not self.hold(grant, hold):
                return
        if not self.write("enter", grant):
            return
        crash.point(crash.HOLDING)
        if getattr(self.lock, "reentrant", False):
            self.reenter()
        if self.hold(grant, hold):
            self.write("exit", grant)

    def read(self, section: Section) -> Observed | None:
        """A logged read of the resource (its state, what the writes must expect)."""
        j, name = self.journal, self.p.lock_name
        value: dict[str, Any] = {"session": self.session}
        j.record(INVOKE, "read", value, lock=name)
        try:
            seen = self.resource.read(self.p.process, self.session, section.via,
                                      self.p.lock_name)
        except Exception as e:
            j.record(INFO, "read", value, lock=name, error=f"{type(e).__name__}: {e}"[:200])
            return None
        section.expect = seen.expect
        j.record(OK, "read", {**value, "seq": seen.seq, "counter": seen.counter,
                              "expect": seen.expect, "job": seen.job}, lock=name)
        return seen

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
            if self.stop.wait(min(self.p.held_poll, left)):
                return True
            if not held(grant):
                return False
        return True

    def write(self, kind: str, grant: Grant) -> bool:
        """Returns True when the write was accepted."""
        return self.write_value(kind, {"kind": kind, "session": self.session}, grant)

    def write_value(self, kind: str, value: dict[str, Any], grant: Grant,
                    counter: tuple[int, int] | None = None, **extra: Any) -> bool:
        """Journal and send one write to the resource; True when it was accepted."""
        return self.send(value, grant, Write(self.p.process, self.session, kind,
                                             counter=counter, **extra)) is not None

    def send(self, value: dict[str, Any], grant: Grant, w: Write) -> Written | None:
        """Journal and send ``w`` in the current critical section; the resource's answer
        when the write was accepted (or was a duplicate of an applied key), else None."""
        j = self.journal
        section = self.section if self.section is not None and self.section.grant is grant \
            else self.begin(grant)
        token = grant.token if self.mode == "fenced" else None
        w = Write(w.process, w.session, w.kind, self.p.lock_name, token, section.first,
                  section.expect, section.claim, w.counter, w.key, w.amount, w.job)
        if section.via is not None:
            value = {**value, "in_lock_tx": True}
        j.record(INVOKE, "write", value, lock=self.p.lock_name, token=token)
        try:
            done = self.resource.write(w, section.via)
        except Exception as e:
            self.outcome = INFO
            j.record(INFO, "write", value, lock=self.p.lock_name, token=token,
                     error=f"{type(e).__name__}: {e}"[:200])
            return None
        self.outcome = OK if done.accepted or done.duplicate else FAIL
        out = {**value, "seq": done.seq}
        if done.duplicate:
            j.record(OK, "write", {**out, "duplicate": True}, lock=self.p.lock_name,
                     token=token)
            return done
        if done.accepted:
            section.first = False
            section.expect = done.expect
            j.record(OK, "write", out, lock=self.p.lock_name, token=token)
            return done
        j.record(FAIL, "write", out, lock=self.p.lock_name, token=token,
                 error=REJECTED.get(self.mode, "rejected"))
        return None

    def release(self, grant: Grant) -> None:
        """Release ``grant``, waiting ``release_timeout`` seconds at most: a release that
        takes longer is recorded ``info`` (its outcome unknown) and left to finish on its
        thread while this client goes on to its next session, rather than stalling it. A lock
        whose ``release_bound()`` (seconds its release takes at most, on its own) is within
        ``release_timeout`` is released on this thread instead."""
        j = self.journal
        session, token = self.session, grant.token
        if token is None:
            j.put_at(monotonic_ns(), self.releasing_plain, session)
        else:
            rest = token_json(token)
            j.put(self.releasing, session, rest)
        if self.release_inline:
            try:
                released = self.lock.release(grant)
            except Exception as e:
                self.release_failed(e, session, token)
                return
        else:
            call = LimitedCall(lambda: self.lock.release(grant))
            if not call.wait(self.p.release_timeout):
                j.record(INFO, "release", {"session": session}, lock=self.p.lock_name,
                         token=token,
                         error=f"release_timeout: no answer within {self.p.release_timeout:g} "
                               "s; the client went on")
                return
            if call.error is not None:
                self.release_failed(call.error, session, token)
                return
            released = call.result
        if released:
            if token is None:
                j.put_at(monotonic_ns(), self.released_plain, session)
            else:
                j.put(self.released, session, rest)
        else:
            self.not_released(session, token)

    def not_released(self, session: int, token: Any, why: str = "") -> None:
        """A release returned False (or raised :class:`Refused`, saying ``why``): the lock was
        no longer this client's."""
        why = why or "the lock had expired or was taken"
        self.journal.record(FAIL, "release", {"session": session}, lock=self.p.lock_name,
                            token=token, error=prefixed("not-held: ", why))

    def release_failed(self, error: Exception, session: int, token: Any) -> None:
        """A release raised ``error``: a fail when the lock says it certainly did not release
        (its ``timeout_errors``), else info; :class:`Refused` is a False that says why."""
        if isinstance(error, Refused):
            self.not_released(session, token, str(error))
            return
        timeout = isinstance(error, self.timeout_errors)
        self.journal.record(FAIL if timeout else INFO, "release", {"session": session},
                            lock=self.p.lock_name, token=token,
                            error=f"{'timeout: ' if timeout else ''}{type(error).__name__}: "
                                  f"{error}"[:200])


def prefixed(prefix: str, why: str) -> str:
    """``why`` as a history's error, after ``prefix`` unless it begins with it already (a
    program that answers "timeout: lock busy"); 200 characters at most."""
    return (why if why.startswith(prefix) else prefix + why)[:200]
