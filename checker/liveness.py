"""The liveness checker: did a lock get stuck?

A lock is **stuck** when, from some moment to the end of the run, nobody held it (no client
believed it did, a crashed client's belief ending at its crash: :mod:`checker.lives`), nothing
acquired it, and clients kept wanting it for at least ``threshold`` after that moment: at least
two attempts began after it, the last of them ``threshold`` later, or an acquire is still
pending at the end past its own timeout (a client blocked in acquire starts no new attempt,
but it is unmet demand all the same, to the end of the run). The threshold is 5 TTLs and at
least 10 s: longer than any lease a lock promises and than the outages the nemeses cause and
heal (a failover, a restart), so what is left is a lock nobody can ever take again, the classic
one being ``SETNX`` by a client that died before its ``EXPIRE``. A stuck lock makes the
verdict invalid: safety is not everything.

Only fault-free time counts toward the threshold. Faults that recur can keep a lock from every
client for longer than any one of them lasts: a server paused again and again serves, each time
it resumes, the acquires its clients had given up on (a timeout shorter than the pause), and
one of them takes a lease for nobody (seen: ``redis-fenced`` under ``pause-node``, free from
1.5 s to the end of a 15 s run, although each pause ended). So a fault on the lock service,
from its start to a lease after its stop, does not count: one aimed at a DB node or link, or
at every client that was trying. A stretch that would be stuck but for such faults is listed
as ``not-judged``, with its fault-free seconds: it shows an outage, not a lock nobody can take.

The end of the run is judged too. Demand still pending when the load stops (an acquire past its
own timeout, or one in flight when the clients were stopped and had to be killed: the
controller's ``stop-clients`` record, :func:`checker.lives.stop_of`) is unmet demand to the
end. A stretch of it that the run is too short to judge (shorter than the threshold, or with
too little fault-free time in it) is ``not-judged`` with ``cut-short``, its length and who
wanted the lock, and makes the verdict ``unknown``: the run ended before it could tell a
stuck lock from a slow one; never silence, never valid. So is a stretch of refusals too short
to judge that began when a client crashed in the middle of an acquire (``crash-client`` between
``SETNX`` and ``EXPIRE``): the crash may have left the lock taken for good, and the run ended
before that could be told from an outage. Each stretch names the fault it began
in (``fault``: the one on at its start, else the first to start inside it).

Pure function of the history (and of the lock's ``ttl``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from checker.base import Checker
from checker.faults import Window, windows
from checker.intervals import Interval, subtract, total, union
from checker.lives import Attempt, Lives
from harness.core import defaults
from harness.core.cluster import client_of
from harness.core.history import Op, seconds

MIN_STUCK_S = 10.0
STUCK_TTLS = 5.0
NS = 1_000_000_000


def threshold_s(ttl: float) -> float:
    return max(MIN_STUCK_S, STUCK_TTLS * ttl)


def service_faults(faults: Sequence[Window], trying: set[int], lease_ns: int) -> list[Interval]:
    """When a fault was on the lock service for the clients in ``trying``, each followed by a
    lease: one aimed at anything but clients (a node, a link), at no one in particular, or at
    all of ``trying``."""
    out = []
    for w in faults:
        clients = [client_of(t) for t in w.targets]
        if not w.targets or None in clients or trying <= set(clients):
            out.append((w.start, w.stop + lease_ns))
    return union(out)


def began_in(faults: Sequence[Window], start: int, end: int, lease_ns: int,
             pending_since: int | None) -> dict[str, Any] | None:
    """The fault a stretch from ``start`` to ``end`` began in: the latest on at its start (or
    a lease before, as :func:`service_faults` counts it: ``"how": "on"``); else, when acquires
    left pending at the end were invoked before the stretch (``pending_since``: the first of
    them), the first fault begun while they waited (``"pending"``: they were stranded in it);
    else the first to start inside the stretch (``"inside"``)."""
    on = [w for w in faults if w.start <= start < w.stop + lease_ns]
    stranded = [] if pending_since is None else [
        w for w in faults if pending_since <= w.start < start]
    inside = [w for w in faults if start < w.start < end]
    for how, w in (("on", max(on, key=lambda w: w.start, default=None)),
                   ("pending", min(stranded, key=lambda w: w.start, default=None)),
                   ("inside", min(inside, key=lambda w: w.start, default=None))):
        if w is not None:
            return {"f": w.f, "step": w.step, "start": seconds(w.start),
                    "stop": seconds(w.stop), "targets": list(w.targets), "how": how}
    return None


def _fault_words(fault: dict[str, Any] | None) -> str:
    if fault is None:
        return "; no fault was on in it"
    step = f" (step {fault['step'] + 1})" if type(fault["step"]) is int else ""
    what = (f"{fault['f']} of {', '.join(map(str, fault['targets'])) or 'all'}{step} from "
            f"{fault['start']:.2f} s to {fault['stop']:.2f} s")
    return {"on": f"; it began in {what} (or the TTL after it)",
            "pending": f"; the acquires left pending were in flight through {what}",
            "inside": f"; the first fault in it: {what}"}[fault["how"]]


def stuck_lock(lock: str, tries: list[Attempt], ends: list[int], lives: Lives,
               threshold_ns: int, faults: Sequence[Window] = (), lease_ns: int = 0
               ) -> dict[str, Any] | None:
    """The stuck stretch of one lock, or None; a stretch long enough but for faults on the
    lock service is returned with ``"judged": False``, and so is one of demand still pending
    at the end of the load that the run is too short to judge (``"cut-short": True``)."""
    if not tries:
        return None
    crashes = lives.crashes
    free_since = max(ends) if ends else min(a.invoke for a in tries)
    later = [a for a in tries if a.invoke >= free_since and a.process not in crashes]
    blocked = [a for a in tries if lives.overdue(a)]
    if len(later) < 2 and not blocked:
        return None
    last = lives.load_end if blocked else max(a.invoke for a in later)
    # Who may have left the lock taken: a crashed client whose last acquire never completed.
    suspects = sorted({a.process for a in tries if a.end is None and a.process in crashes
                       and a.invoke <= crashes[a.process]})
    if last <= free_since or (last - free_since < threshold_ns and not blocked
                              and not suspects):
        return None  # held to the end, or a stretch of refusals too short to mean anything
    wanting = later + [a for a in blocked if a.invoke < free_since]
    excused = service_faults(faults, {a.process for a in wanting}, lease_ns)
    fault_free = total(subtract([(free_since, last)], excused))
    until = last if blocked else max(a.end if a.end is not None else a.invoke for a in later)
    processes = sorted({a.process for a in wanting})
    fault = began_in(faults, free_since, until, lease_ns,
                     min((a.invoke for a in blocked if a.invoke < free_since), default=None))
    cause = ""
    if blocked:
        killed = [a.process for a in blocked if a.process in lives.killed]
        cause = ("; " + ", ".join(f"process {a.process} has been in an acquire since "
                                  f"{seconds(a.invoke):.2f} s ("
                                  + ("no timeout recorded" if a.timeout is None
                                     else f"its timeout {a.timeout:g} s") + ")"
                                  for a in blocked[:5]) + ", never answered"
                 + (f" (killed when the clients were stopped: {', '.join(map(str, killed))})"
                    if killed else ""))
    if suspects:
        cause = ("; " + ", ".join(f"process {p}" for p in suspects)
                 + " crashed in the middle of an acquire at "
                 + ", ".join(f"{seconds(crashes[p]):.2f} s" for p in suspects)
                 + " and may hold it for good")
    head = {"lock": lock, "free-since": seconds(free_since), "from": seconds(free_since),
            "until": seconds(until), "length-s": round((until - free_since) / NS, 3),
            "fault-free-s": round(fault_free / NS, 3), "attempts": len(later),
            "processes": processes, "fault": fault}
    wanted = (f"lock {lock!r} was free and wanted by processes "
              f"{', '.join(map(str, processes))} from {seconds(free_since):.2f} s to the end "
              f"({seconds(until):.2f} s)")
    if (blocked or suspects) and fault_free < threshold_ns:
        return {"judged": False, "cut-short": True, **head,
                "blocked-in-acquire": [a.process for a in blocked],
                **({"crashed-in-acquire": suspects} if suspects else {}),
                "explanation": (f"not judged: {wanted}, {(until - free_since) / NS:.2f} s "
                                f"({fault_free / NS:.2f} s of it free of faults on the lock "
                                f"service), and the run ended with that demand unmet: too "
                                f"short to tell a stuck lock (threshold "
                                f"{threshold_ns / NS:g} s){cause}{_fault_words(fault)}")}
    if fault_free < threshold_ns:
        return {"judged": False, **head,
                "explanation": (f"nobody acquired lock {lock!r} from {seconds(free_since):.2f} s "
                                f"to the end ({seconds(until):.2f} s), but only "
                                f"{fault_free / NS:.2f} s of that was free of faults on the "
                                f"lock service (and a lease after each): an outage, not "
                                f"proof of a stuck lock")}
    return {
        **head,
        "blocked-in-acquire": [a.process for a in blocked],
        "crashed-in-acquire": suspects,
        "explanation": (f"stuck: {wanted}, {(until - free_since) / NS:.2f} s, and nobody held "
                        f"it and nothing acquired it ({len(later)} attempts begun in that time)"
                        f"{cause}{_fault_words(fault)}"),
    }


class LivenessChecker(Checker):
    name = "liveness"
    summary = "a stuck lock: free, wanted, and never acquired again"
    figures = {"stuck-lock-count": "stuck-lock", "not-judged-count": "not-judged"}
    violations = {"stuck-locks": ("stuck lock", "stuck locks")}
    caveats = ("not-judged",)

    @staticmethod
    def check(history: Sequence[Op], *, ttl: float = defaults.TTL,
              acquire_timeout: float | None = None) -> dict[str, Any]:
        """``acquire_timeout``: the run's, for acquires that do not record their own."""
        threshold = threshold_s(ttl)
        lives = Lives.of(history, acquire_timeout)
        crashes = lives.crashes
        all_attempts = lives.attempts
        gs = lives.by_lock()
        faults, _ = windows(history)
        stuck, unjudged = [], []
        for lock in sorted({a.lock for a in all_attempts}):
            tries = [a for a in all_attempts if a.lock == lock]
            ends = [lives.grant_end(g) for g in gs.get(lock, [])]
            found = stuck_lock(lock, tries, ends, lives, int(threshold * NS), faults,
                               int(ttl * NS))
            if found is not None:
                (stuck if found.pop("judged", True) else unjudged).append(found)
        cut_short = [u for u in unjudged if u.get("cut-short")]
        result: dict[str, Any] = {
            "valid": False if stuck else "unknown" if cut_short else True,
            "stuck-lock-count": len(stuck),
            "stuck-locks": stuck,
            "threshold-s": threshold,
            "crashed-processes": {str(p): seconds(t) for p, t in sorted(crashes.items())},
        }
        if unjudged:
            result["not-judged-count"] = len(unjudged)
            result["not-judged"] = unjudged
            if not cut_short:  # outages, not violations
                result["not-judged-informational"] = True
        if not all_attempts:
            result["note"] = "no acquire was attempted: nothing to be stuck"
        return result
