"""Violations grouped into incidents by cause.

One paused holder makes dozens of near-identical violations: every client that acquires while
it sleeps overlaps it, each overlap interleaves on the resource, and the linearizability
checker names one of them as its witness. They are one incident. An incident is

- a **stale holder**: a grant that others overlapped (the mutex checker's ``first`` of a lock
  overlap), with every violation that involves its process while it held the lock folded
  beneath it (the overlaps, the interleavings, the witness, stale writes);
- else a **fault window**: violations that involve no stale holder, grouped by the fault that
  was on (or had just healed) when they happened;
- else **unexplained**: a violation with no fault anywhere near it, one incident each (nothing
  says two of them share a cause).

Each incident names the fault that opened it: of the faults on while the holder held the lock,
before the first overlap, the one aimed at the holder itself, else the latest to start. Two
stale holders are two incidents even under one fault (each lost its lease on its own), and so
are two grants of one process.

Pure: a function of the history, the checkers' results and the schedule (the violations are
called in their checkers' words, :mod:`harness.presentation.report.words`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.core.cluster import client_name
from harness.core.history import Op
from harness.core.schedule import Schedule
from harness.presentation.report.model import Explained, Places, explained_items, locate, places_of
from harness.presentation.report.narrative import FaultRun, describe, fault_runs
from harness.presentation.report.words import violation_words

AFTERMATH_S = 5.0  # a violation this long after a fault healed may still be its doing
SLACK_S = 0.01  # checkers round the times they report to the millisecond


@dataclass
class Violation:
    n: int  # its number in the report's list of violations
    check: str
    kind: str
    explanation: str
    t0: float | None  # seconds: when it happened
    t1: float | None
    procs: list[int]
    c0: float | None = None  # seconds: the whole story (the ops it involves)
    c1: float | None = None
    total: int = 1  # how many of its kind the checker found
    listed: int = 1  # how many of its kind the report lists (the first ones)

    @property
    def label(self) -> str:
        return f"{self.check}/{self.kind}"


@dataclass
class Incident:
    kind: str  # "stale-holder" | "fault" | "unexplained"
    holder: dict[str, Any] | None = None  # process, acquired, released (stale holders)
    fault: FaultRun | None = None
    violations: list[Violation] = field(default_factory=list)
    planned: str | None = None  # the schedule's step, as planned

    @property
    def start(self) -> float:
        """The first overlap of a stale holder; the first violation of the others."""
        vs = [v for v in self.violations if v.t0 is not None]
        if self.kind == "stale-holder":
            vs = [v for v in vs if v.kind == "lock-overlaps"] or vs
        times = [v.t0 for v in vs if v.t0 is not None]
        return min(times) if times else (self.holder or {}).get("acquired") or 0.0

    @property
    def end(self) -> float:
        times = [v.t1 for v in self.violations if v.t1 is not None]
        return max(times) if times else self.start

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for v in self.violations:
            out[v.kind] = out.get(v.kind, 0) + 1
        return out

    def title(self) -> str:
        if self.kind == "stale-holder" and self.holder is not None:
            h = self.holder
            released = ("never released" if h.get("released") is None
                        else f"released at {h['released']:.2f} s")
            if isinstance(h.get("crashed"), int | float):
                released = f"crashed at {h['crashed']:.2f} s"
            lock = "the lock" if h.get("lock", "lock") == "lock" else f"lock {h['lock']!r}"
            what = (f"process {h['process']} held {lock} from {h['acquired']:.2f} s "
                    f"({released}) while others acquired it, from {self.start:.2f} s")
        elif self.kind == "fault":
            what = f"violations from {self.start:.2f} s to {self.end:.2f} s"
        else:
            v = self.violations[0]
            when = "" if v.t0 is None else f" at {v.t0:.2f} s"
            what = f"a {violation_words(v.check, v.kind)}{when}"
        return f"{what}; {self.cause()}"

    def cause(self) -> str:
        if self.fault is None:
            return "no fault was on: the lock let it happen on its own"
        step = "" if self.fault.step is None else f" (step {self.fault.step + 1}"
        if step:
            step += f", planned {self.planned})" if self.planned else ")"
        return f"opened by {describe(self.fault)}{step}"

    def folded(self) -> str:
        """``33 lock overlaps, 33 resource interleavings, 1 linearizability witness``, in the
        words of the checkers that found them; a kind the checker found more of than it (or
        the report) lists says so: ``50 lock overlaps (listed; 5,151 in the run)``."""
        check = {v.kind: v.check for v in self.violations}
        more = {v.kind: v.total for v in self.violations if v.total > v.listed}
        return ", ".join(f"{n} {violation_words(check[kind], kind, n)}"
                         + (f" (listed; {more[kind]:,} in the run)" if kind in more else "")
                         for kind, n in self.counts().items())

    def to_dict(self) -> dict[str, Any]:
        f = self.fault
        return {"kind": self.kind, "title": self.title(), "folded": self.folded(),
                "holder": self.holder, "from": self.start, "until": self.end,
                "fault": None if f is None else {
                    "f": f.f, "step": f.step, "target": f.role, "targets": list(f.targets),
                    "start": f.start, "stop": f.stop, "description": describe(f)},
                "violations": [v.n for v in self.violations], "counts": self.counts()}


def incidents(history: Sequence[Op], results: Mapping[str, Any],
              schedule: Schedule | None = None, places: Places | None = None
              ) -> list[Incident]:
    """The violations of the checks that failed, grouped by cause, in time order (``places``:
    the history's, when the caller has them already)."""
    items = [x for x in explained_items(dict(results)) if not x.info and x.check_valid is False]
    if not items:  # nothing to place: no pass over the history (a valid run's summary)
        return []
    listed = Counter((x.check, x.kind) for x in items)
    places = places or places_of(history)
    faults = fault_runs(history)
    out: list[Incident] = []
    holders: dict[tuple[str, int, float], Incident] = {}
    rest: list[tuple[Explained, Violation]] = []
    for x in items:
        v = violation(x, places)
        v.listed = listed[x.check, x.kind]
        first = x.item.get("first")
        if x.kind == "lock-overlaps" and isinstance(first, Mapping) and isinstance(
                first.get("process"), int) and isinstance(first.get("acquired"), int | float):
            lock = str(x.item.get("lock", "lock"))
            key = (lock, first["process"], float(first["acquired"]))
            if key not in holders:
                holders[key] = Incident("stale-holder", holder={
                    "process": first["process"], "acquired": float(first["acquired"]),
                    "released": first.get("released"), "crashed": first.get("crashed"),
                    "lock": lock})
                out.append(holders[key])
            holders[key].violations.append(v)
        else:
            rest.append((x, v))
    for inc in out:
        inc.fault = opener(inc, faults)
    by_fault: dict[int, Incident] = {}
    for x, v in rest:
        home = holder_of(v, out)
        if home is not None:
            home.violations.append(v)
            continue
        f = named_fault(x.item, faults) or fault_at(v, faults)
        if f is None:
            out.append(Incident("unexplained", violations=[v]))
        elif id(f) in by_fault:
            by_fault[id(f)].violations.append(v)
        else:
            by_fault[id(f)] = Incident("fault", fault=f, violations=[v])
            out.append(by_fault[id(f)])
    if schedule is not None:
        for inc in out:
            if inc.fault is not None and inc.fault.step is not None and (
                    0 <= inc.fault.step < len(schedule.steps)):
                inc.planned = schedule.steps[inc.fault.step].describe()
    for inc in out:
        inc.violations.sort(key=lambda v: v.n)
    out.sort(key=lambda i: (i.start, i.kind))
    return out


def violation(x: Explained, places: Any) -> Violation:
    loc = locate(x.item, places)
    t0, t1, c0, c1 = (None if loc[k] is None else loc[k] / 1e6 for k in ("t0", "t1", "c0", "c1"))
    return Violation(x.n, x.check, x.kind, str(x.item.get("explanation", "")), t0, t1,
                     list(loc["procs"]), c0, c1, x.total)


def opener(inc: Incident, faults: Sequence[FaultRun]) -> FaultRun | None:
    """The fault that made this holder stale: on at some moment between its grant and the
    first overlap; the one aimed at the holder's own client first, else the latest."""
    h = inc.holder or {}
    acquired, first = float(h.get("acquired") or 0.0), inc.start
    on = [f for f in faults if f.start <= first and (f.stop is None or f.stop >= acquired)]
    if not on:
        return None
    own = client_name(int(h.get("process", -1)))
    aimed = [f for f in on if own in f.targets]
    return max(aimed or on, key=lambda f: f.start)


def holder_of(v: Violation, holders: Sequence[Incident]) -> Incident | None:
    """The stale holder a violation belongs to: its process is among the violation's, and
    the violation happened while it held the lock (up to its release, or the last overlap);
    failing that, the ops it involves ran then. The closest match wins."""
    if v.t0 is None:
        return None
    spans = [(v.t0 - SLACK_S, (v.t1 if v.t1 is not None else v.t0) + SLACK_S)]
    if v.c0 is not None and v.c1 is not None:
        spans.append((v.c0, v.c1))
    for a, b in spans:
        best, best_overlap = None, -1.0
        for inc in holders:
            h = inc.holder or {}
            if h.get("process") not in v.procs:
                continue
            lo = float(h["acquired"])
            until = h.get("released") if h.get("crashed") is None else h["crashed"]
            hi = max(inc.end, float(until) if until is not None else inc.end)
            overlap = min(hi, b) - max(lo, a)
            if overlap >= 0 and overlap > best_overlap:
                best, best_overlap = inc, overlap
        if best is not None:
            return best
    return None


def named_fault(item: Mapping[str, Any], faults: Sequence[FaultRun]) -> FaultRun | None:
    """The fault the checker names as the violation's own (``fault``: liveness names the one
    its stretch began in), the run of that fault and step that started nearest its time."""
    named = item.get("fault")
    if not isinstance(named, Mapping) or not isinstance(named.get("start"), int | float):
        return None
    same = [f for f in faults if f.f == named.get("f") and f.step == named.get("step")]
    return min(same, key=lambda f: abs(f.start - named["start"]), default=None)


def fault_at(v: Violation, faults: Sequence[FaultRun]) -> FaultRun | None:
    """The fault on when the violation happened (or healed just before), the latest one."""
    if v.t0 is None:
        return None
    on = [f for f in faults if f.on(v.t0, AFTERMATH_S)]
    return max(on, key=lambda f: f.start) if on else None
