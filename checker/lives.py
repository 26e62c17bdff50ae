"""One life per client process, derived once from a history: what every checker reads of who
held which lock when, and who wanted it.

A client process's life, from the history alone:

- it *crashed* when a nemesis op says so (``detail.crashed`` with the client among its
  targets, as ``crash-client`` records it). That op is written after the nemesis saw the
  process dead, so the time is never earlier than the death; from then on the process holds
  nothing and wants nothing. A process with an op after its crash has two ends to its life:
  such a history is refused (ValueError), never judged.
- it is *inside a call* from an invocation to its completion; a call that never completed is
  *pending* from its invocation to its process's crash, else to the end of the history.
- the run *ended* when the controller stopped its clients (its ``stop-clients`` record, see
  :func:`stop_of`): a client it had to kill in the middle of an acquire wanted the lock to
  then (unmet demand, whatever the acquire's timeout), and has no op after it (refused).
- each *attempt* is one ``acquire``, with its own timeout: the ``timeout`` (seconds) the
  workload records in the invocation's value, else the run's acquire timeout when the caller
  gives one, else unknown (histories written before the timeout was recorded). An acquire
  still pending past its own timeout is **overdue**: the client is blocked waiting for a lock
  that nobody gets, which is unmet demand, not silence.
- each *grant* (an acquire that completed ok) is believed held from its completion until its
  process began to release it (or began another acquire), crashed, or the history ended.

Every checker reads this one model: mutex's overlaps, the linearizability check (a crashed
process's locks get a release of unknown outcome from its crash on, see :func:`crash_of` and
:mod:`checker.calls`), fencing's token order, liveness and availability.

Sound for a lease: a crashed holder's lease still stands on the server until its TTL runs out;
the model frees the lock no earlier than the crash (the release of unknown outcome may take
effect at any time from then on, the lease's expiry included). A grant to another client before
that lease ran out harms nothing a dead process could do; what the service did with the data
is the resource log's to say.

Pure. Imports nothing typing needs at run time: :mod:`checker.calls` reads :func:`crash_of`
on ``harness check FILE``'s way.
"""

from __future__ import annotations

import math

from harness.core.history import INFO, NEMESIS, STOP_CLIENTS

TYPE_CHECKING = False  # see harness/core/history.py
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from checker.intervals import Interval
    from checker.sessions import Grant
    from harness.core.history import Op

NS = 1_000_000_000


def crash_of(op: Op) -> list[int]:
    """The client processes a nemesis op says crashed (``[]`` for any other op)."""
    if op.get("process") != NEMESIS or op.get("type") != INFO:
        return []
    detail = op.get("detail")
    if not isinstance(detail, dict) or detail.get("crashed") is not True:
        return []
    from harness.core.cluster import client_of  # only for a crash: `harness check` pays nothing

    out = []
    for target in op.get("targets") or []:
        p = client_of(target)
        if p is not None:
            out.append(p)
    return out


def crash_times(history: Sequence[Op]) -> dict[int, int]:
    """Client processes a nemesis crashed on purpose, and when (ns): the first such record."""
    out: dict[int, int] = {}
    for op in history:
        if op.get("process") == NEMESIS:
            for p in crash_of(op):
                out.setdefault(p, int(op["time"]))
    return out


def stop_of(op: Op) -> tuple[int, list[int]] | None:
    """When the clients were stopped at the end of the load, and those that had to be killed
    in the middle of a call (the controller's ``stop-clients`` record), or None."""
    if op.get("process") != NEMESIS or op.get("f") != STOP_CLIENTS or op.get("type") != INFO:
        return None
    detail = op.get("detail")
    killed = detail.get("killed") if isinstance(detail, dict) else None
    if not isinstance(killed, list) or not all(
            type(p) is int and p >= 0 for p in killed):
        raise ValueError(f"the {STOP_CLIENTS} record at index {op.get('index')} names no "
                         f"list of killed client processes: {detail!r}")
    return int(op["time"]), killed


def _horizon_and_crashes(history: Sequence[Op]
                         ) -> tuple[int, dict[int, int], tuple[int, list[int]] | None]:
    """The history's last time, :func:`crash_times` and the clients' :func:`stop_of`, in one
    pass. Two records of the stop are refused (ValueError): a run ends once."""
    end = 0
    crashes: dict[int, int] = {}
    stopped = None
    for op in history:
        t = op["time"]
        if t > end:
            end = t
        if op["process"] == NEMESIS:
            for p in crash_of(op):
                crashes.setdefault(p, int(t))
            if (stop := stop_of(op)) is not None:
                if stopped is not None:
                    raise ValueError(f"two {STOP_CLIENTS} records (at {stopped[0] / NS:.3f} s "
                                     f"and {t / NS:.3f} s): a run ends once")
                stopped = stop
    return end, crashes, stopped


def timeout_of(inv: Op, default: float | None) -> float | None:
    """An acquire's own timeout (s): its invocation's ``value.timeout``, else ``default``."""
    value = inv.get("value")
    if not isinstance(value, dict) or value.get("timeout") is None:
        return default
    t = value["timeout"]
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t <= 0:
        raise ValueError(f"process {inv.get('process')}'s acquire at index {inv.get('index')} "
                         f"has timeout {t!r}: not a positive number of seconds")
    return float(t)


def refuse_after_crash(op: Op, t: int, crash: int) -> None:
    """Raise ValueError when ``op`` (of a crashed process, at ``t``) comes after the crash."""
    if t > crash:
        raise ValueError(
            f"process {op.get('process')}'s {op.get('f')} {op.get('type')} at {t / NS:.3f} s "
            f"(index {op.get('index')}) comes after its crash at {crash / NS:.3f} s: a process "
            "has one life")


class Attempt:
    """One acquire: from its invocation to its completion (None: never completed)."""

    __slots__ = ("end", "invoke", "lock", "outcome", "process", "timeout")

    def __init__(self, process: int, lock: str, invoke: int, end: int | None,
                 outcome: str | None, timeout: float | None) -> None:
        self.process = process
        self.lock = lock
        self.invoke = invoke
        self.end = end  # completion time; None: never completed
        self.outcome = outcome  # ok / fail / info / None
        self.timeout = timeout  # its own timeout (s); None: unknown

    def __repr__(self) -> str:
        return f"Attempt(p{self.process} {self.lock!r} {self.invoke}..{self.end} {self.outcome})"


class Lives:
    """Every client process's life in one history (see the module's docstring).

    ``grants``: every grant, its ``end`` the release's (or next acquire's) invocation, else
    its process's crash (``crashed`` true), else None (held to ``horizon``). ``attempts``:
    every acquire. ``crashes``: process -> time of its crash (ns). ``pending``: process -> its
    invocation that never completed (the last op of its life). ``paired``: the client ops'
    invocations with their completions, for checkers that read more than locks. An acquire's
    timeout that is not a duration is refused (ValueError) when the attempts are first read.
    """

    __slots__ = ("_attempts", "_own", "_pending", "acquire_timeout", "crashes", "grants",
                 "horizon", "killed", "paired", "stopped")

    def __init__(self, history: Sequence[Op], acquire_timeout: float | None = None) -> None:
        from checker.column_pairs import as_columns
        from checker.sessions import client_pairs, grants

        self.paired = client_pairs(history)
        # the columns' latest time; the crashes are the nemesis's, in ``others``
        self.horizon, self.crashes, stop = _horizon_and_crashes(as_columns(history).others)
        if len(self.paired.cols) and (last := int(self.paired.cols.time.max())) > self.horizon:
            self.horizon = last
        self.stopped, self.killed = (None, frozenset()) if stop is None else (
            stop[0], frozenset(stop[1]))
        self.grants = grants(history)
        self.acquire_timeout = acquire_timeout
        self._attempts: list[Attempt] | None = None  # built when first asked for (a mutex
        self._pending: dict[int, Op] = {}            # check of a million ops never asks)
        self._own: list[Any] = [None]  # (attempts with their own timeouts, pending), shared
        if self.crashes or self.killed:  # by the lives of every acquire timeout
            self._end_at_crashes()

    @classmethod
    def of(cls, history: Sequence[Op], acquire_timeout: float | None = None) -> Lives:
        """``Lives(history, acquire_timeout=...)``, built once for all the checkers of one
        history when it is shared (:class:`harness.core.checks.Shared`: its ``derived``);
        they read it and never change it. Each acquire timeout has its own attempts over the
        same grants."""
        derived = getattr(history, "derived", None)
        if type(derived) is not dict:
            return cls(history, acquire_timeout=acquire_timeout)
        key = (cls, acquire_timeout)
        lives = derived.get(key)
        if lives is None:
            base = derived.get((cls, None))
            lives = (cls(history, acquire_timeout=acquire_timeout) if base is None
                     else base._timed(acquire_timeout))
            derived[key] = lives
        return lives

    def _timed(self, acquire_timeout: float | None) -> Lives:
        """The same lives, acquires judged with another timeout (those without their own)."""
        out = object.__new__(type(self))
        out.paired, out.horizon, out.crashes = self.paired, self.horizon, self.crashes
        out.stopped, out.killed = self.stopped, self.killed
        out.grants, out.acquire_timeout = self.grants, acquire_timeout
        out._attempts, out._pending, out._own = None, {}, self._own
        return out

    @property
    def attempts(self) -> list[Attempt]:
        """Every acquire, in the order of their invocations."""
        if self._attempts is None:
            if self._own[0] is None:
                self._own[0] = self._own_attempts()
            own, pending, untimed = self._own[0]
            default = self.acquire_timeout
            if untimed and default is not None:  # the run's timeout where an acquire has none
                own = [a if a.timeout is not None else
                       Attempt(a.process, a.lock, a.invoke, a.end, a.outcome, default)
                       for a in own]
            self._pending = pending
            self._attempts = own
        return self._attempts

    def _own_attempts(self) -> tuple[list[Attempt], dict[int, Op], bool]:
        """Every acquire with its own timeout (None where it has none), the pending
        invocations, and whether some acquire has no timeout of its own. Kept only once
        whole: a timeout refused (ValueError) leaves nothing half built for the next reader."""
        from checker.column_pairs import attempts

        got, pending, untimed = attempts(self.paired, Attempt, timeout_of)
        return got, dict(pending), untimed

    def _end_at_crashes(self) -> None:
        from checker.column_pairs import last_ops

        ended = {p: self.load_end for p in self.killed if p not in self.crashes} | self.crashes
        last = last_ops(self.paired.cols, list(ended))
        for p, (t, op) in sorted(last.items()):
            if p in self.crashes:
                refuse_after_crash(op, t, self.crashes[p])
            elif t > ended[p]:
                raise ValueError(
                    f"process {p}'s {op.get('f')} {op.get('type')} at {t / NS:.3f} s (index "
                    f"{op.get('index')}) comes after the clients were stopped and it was "
                    f"killed at {ended[p] / NS:.3f} s: a process has one life")
        for g in self.grants:
            if g.end is None and g.process in self.crashes:
                g.end = self.crashes[g.process]
                g.crashed = True

    @property
    def pending(self) -> dict[int, Op]:
        """Each process's invocation that never completed (the last op of its life)."""
        self.attempts  # noqa: B018 (built with the attempts, in one pass)
        return self._pending

    def grant_end(self, g: Grant) -> int:
        """When ``g`` stopped being believed held (ns)."""
        return self.horizon if g.end is None else g.end

    def attempt_end(self, a: Attempt) -> int:
        """When ``a`` stopped wanting the lock: its completion, its crash, or the end."""
        if a.end is not None:
            return a.end
        return min(self.crashes.get(a.process, self.horizon), self.horizon)

    def overdue(self, a: Attempt) -> bool:
        """Is ``a`` an acquire still pending at the end, alive, and unmet demand: past its own
        timeout, or in flight when the load stopped and its client had to be killed?"""
        return (a.end is None and a.process not in self.crashes
                and (a.process in self.killed or (a.timeout is not None
                                                  and a.invoke + a.timeout * NS < self.horizon)))

    @property
    def load_end(self) -> int:
        """When the clients' demand ended: when they were stopped (the controller's record),
        else the end of the history."""
        return self.horizon if self.stopped is None else min(self.stopped, self.horizon)

    def locks(self) -> list[str]:
        """Every lock anybody acquired or tried to."""
        return sorted({a.lock for a in self.attempts} | {g.lock for g in self.grants})

    def by_lock(self) -> dict[str, list[Grant]]:
        out: dict[str, list[Grant]] = {}
        for g in self.grants:
            out.setdefault(g.lock, []).append(g)
        return out

    def held(self, gs: Sequence[Grant]) -> list[Interval]:
        """When one of ``gs`` (grants of one lock) was believed held: sorted, disjoint."""
        from checker.intervals import union

        horizon = self.horizon
        return union([(g.start, horizon if g.end is None else g.end) for g in gs])

    def wanted(self, lock: str) -> list[Interval]:
        """When some live client was inside an acquire of ``lock``."""
        crashes, horizon = self.crashes, self.horizon
        out: list[Interval] = []
        for a in self.attempts:
            if a.lock == lock:  # attempt_end, inline: once per acquire
                end = a.end
                out.append((a.invoke, end if end is not None
                            else min(crashes.get(a.process, horizon), horizon)))
        return out

    def holders(self) -> list[tuple[str, int, int, int]]:
        """(lock, process, from, until) of every grant, in the order of the grants' starts:
        who held which lock when, as every checker sees it."""
        return sorted((g.lock, g.process, g.start, self.grant_end(g)) for g in self.grants)
