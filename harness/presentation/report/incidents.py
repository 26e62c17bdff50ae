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

An incident names the op that made it when the history shows one. An overlap whose earlier
lease had not certainly run out before the later client asked, and which another client's
release may have let in (sent before the later grant; landed after the earlier grant, else
while the earlier acquire was in flight, else never answered; never while a fault still kept
its client cut off), was let in by that release, when the lock declares that its release can
remove another client's hold (``release_frees_others``: a bare DEL deletes whoever's key is
there); when the run does not say (a foreign history), it may have been, and the words say only
that; a lock whose release removes only its own hold lets no overlap in that way. It is named
with the fault it was *sent* under (aimed at its client, else at no client: a fault on other
clients is none of its story) and how late it landed; one release lets one overlap in. An
overlap let in by the release of a client of an earlier overlap continues that one's incident:
a chain of such overlaps is one incident. Else the incident names the fault that opened it: of
the faults on while the holder asked for or held the lock, before the first overlap (one that
healed while its acquire waited says so), the one aimed at the holder itself, else at another
client of its overlaps, else at the DB nodes; the latest to start (never one on other clients
only: the incident says so). Two stale holders are two incidents even under one fault (each
lost its lease on its own), and so are two grants of one process.

Pure: a function of the history, the checkers' results and the schedule (the violations are
called in their checkers' words, :mod:`harness.presentation.report.words`).
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.core.cluster import client_name, client_of
from harness.core.errors import HarnessError
from harness.core.history import INFO, OK, Op, seconds
from harness.core.history_parts import nemesis_ops
from harness.core.schedule import Schedule
from harness.presentation.report.model import Explained, Places, explained_items, locate, places_of
from harness.presentation.report.narrative import FaultRun, describe, fault_runs
from harness.presentation.report.words import violation_words

AFTERMATH_S = 5.0  # a violation this long after a fault healed may still be its doing
LATE_S = 0.1  # a release answered this long after it was sent came late
SLACK_S = 0.01  # checkers round the times they report to the millisecond
RELEASED = {"fail": "its release refused",  # a holder's release, by its outcome (a failed
            "info": "its release of unknown outcome"}  # one certainly did not release)


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


@dataclass(frozen=True)
class Release:
    """The op that let an overlap happen: a release of another client that landed while the
    holder held the lock (seconds; ``landed`` None: it never answered, so any time later;
    ``granted``: it landed while the holder's acquire was in flight, answered at this time,
    so it may have come after the holder's key was set)."""

    process: int
    sent: float
    landed: float | None
    answered: float  # when its client stopped waiting (its completion)
    fault: FaultRun | None  # on when it was sent
    granted: float | None = None
    certain: bool = True  # False: the run does not say whether a release can free another's

    def words(self, holder: int) -> str:
        if self.landed is None:
            late = (f"had no reply (timed out at {self.answered:.2f} s), so it may have landed "
                    "at any time later")
        else:
            late = f"landed at {self.landed:.2f} s"
            if self.landed - self.sent >= LATE_S:
                late += f", {self.landed - self.sent:.2f} s after it was sent"
            if self.fault is not None and self.fault.stop is not None and (
                    self.fault.stop < self.landed):
                late += f" ({self.landed - self.fault.stop:.2f} s after the heal)"
        under = ("with no fault on its client" if self.fault is None else
                 f"during {describe(self.fault)}"
                 + ("" if self.fault.step is None else f" (step {self.fault.step + 1})"))
        when = (f"while process {holder} held the lock" if self.granted is None else
                f"while process {holder}'s acquire was in flight (answered at "
                f"{self.granted:.2f} s): it may have come after its key was set")
        return (f"{'' if self.certain else 'perhaps '}let in by process {self.process}'s "
                f"release, sent at {self.sent:.2f} s {under}, which {late}, {when}"
                + ("" if self.certain else " (if this lock's release can remove another "
                   "client's hold, which the run does not record)"))


@dataclass
class Incident:
    kind: str  # "stale-holder" | "fault" | "unexplained"
    holder: dict[str, Any] | None = None  # process, acquired, released (stale holders)
    fault: FaultRun | None = None
    violations: list[Violation] = field(default_factory=list)
    planned: str | None = None  # the schedule's step, as planned
    by: Release | None = None  # the op that made it, when the history shows one
    grants: list[dict[str, Any]] = field(default_factory=list)  # whose violations fold here
    chained: int = 0  # overlaps let in by the release of a client of an earlier one
    perhaps: bool = False  # ... or so it may be: the run does not say a release can do that
    elsewhere: bool = False  # no fault opened it, but one was on other clients
    asking: bool = False  # the fault that opened it healed while the holder's acquire waited

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
                        else f"{RELEASED.get(h.get('release'), 'released')} at "
                             f"{h['released']:.2f} s" + (f": {h['release-error']}" if
                                                          h.get("release-error") else ""))
            if isinstance(h.get("crashed"), int | float):
                released = f"crashed at {h['crashed']:.2f} s"
            lock = "the lock" if h.get("lock", "lock") == "lock" else f"lock {h['lock']!r}"
            what = (f"process {h['process']} held {lock} from {h['acquired']:.2f} s "
                    f"({released}) while others acquired it, from {self.start:.2f} s")
            if self.chained:
                what += (f", then {self.chained} more lock overlap(s) to {self.end:.2f} s, "
                         f"each {'perhaps ' if self.perhaps else ''}let in by the release of a "
                         "client of an earlier one: one chain")
        elif self.kind == "fault":
            what = f"violations from {self.start:.2f} s to {self.end:.2f} s"
        else:
            v = self.violations[0]
            when = "" if v.t0 is None else f" at {v.t0:.2f} s"
            what = f"a {violation_words(v.check, v.kind)}{when}"
        return f"{what}; {self.cause()}"

    def cause(self) -> str:
        if self.by is not None:
            return self.by.words(int((self.holder or {}).get("process", -1)))
        if self.fault is None:
            return ("no fault was on its clients or the DB nodes (only on other clients): the "
                    "lock let it happen on its own" if self.elsewhere else
                    "no fault was on: the lock let it happen on its own")
        step = "" if self.fault.step is None else f" (step {self.fault.step + 1}"
        if step:
            step += f", planned {self.planned})" if self.planned else ")"
        early = (f", begun at {self.fault.since:.2f} s, before it was recorded as on"
                 if self.start < self.fault.start else "")
        return f"opened by {describe(self.fault)}{step}{early}" + (
            ", while the holder's acquire was in flight" if self.asking else "")

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
                "by": None if self.by is None else {
                    "process": self.by.process, "f": "release", "sent": self.by.sent,
                    "landed": self.by.landed, "answered": self.by.answered,
                    "certain": self.by.certain},
                "violations": [v.n for v in self.violations], "counts": self.counts()}


def frees_of(spec: Mapping[str, Any] | None) -> bool | None:
    """Whether a run's lock declared that its release can remove another client's hold: its
    recorded spec's ``release_frees_others``, else (a run recorded before locks declared it)
    its registered lock class's; None: the run does not say (a foreign history)."""
    said, lock = (spec or {}).get("release_frees_others"), (spec or {}).get("lock")
    if isinstance(said, bool) or not isinstance(lock, str):
        return said if isinstance(said, bool) else None
    from harness.controller.registry import default_registry

    reg = default_registry()
    try:
        return bool(getattr(reg.load("locks", lock), "release_frees_others", False))
    except HarnessError:  # not registered here (or it no longer loads)
        return None


def incidents(history: Sequence[Op], results: Mapping[str, Any],
              schedule: Schedule | None = None, places: Places | None = None, *,
              frees: bool | None = None) -> list[Incident]:
    """The violations of the checks that failed, grouped by cause, in time order (``places``:
    the history's, when the caller has them already; ``frees``: can the lock's release remove
    another client's hold (:func:`frees_of`), None when unknown: then a release is named as a
    possible cause only)."""
    items = [x for x in explained_items(dict(results)) if not x.info and x.check_valid is False]
    if not items:  # nothing to place: no pass over the history (a valid run's summary)
        return []
    listed = Counter((x.check, x.kind) for x in items)
    places = places or places_of(history)
    faults = fault_runs(history)
    out: list[Incident] = []
    holders: dict[tuple[str, int, float], Incident] = {}  # by the grant that was overlapped
    home: dict[tuple[str, int, float], Incident] = {}  # every grant of an overlap: its incident
    rest: list[tuple[Explained, Violation]] = []
    releases = Releases(places, faults, history, frees is not None)
    overlaps: list[tuple[Explained, Violation, Mapping[str, Any], Mapping[str, Any]]] = []
    for x in items:
        v = violation(x, places)
        v.listed = listed[x.check, x.kind]
        first, second = x.item.get("first"), x.item.get("second")
        if x.kind == "lock-overlaps" and grant_like(first):
            overlaps.append((x, v, first, second if grant_like(second) else {}))
        else:
            rest.append((x, v))
    overlaps.sort(key=lambda o: (o[1].t0 is None, o[1].t0 or 0.0, o[1].n))
    releases.entered = {(str(x.item.get("lock", "lock")), int(b["process"]), float(b["acquired"]))
                        for x, _, _, b in overlaps if b}
    for x, v, first, second in overlaps:
        lock = str(x.item.get("lock", "lock"))
        key = (lock, first["process"], float(first["acquired"]))
        by = releases.cause(x.item, lock) if second and frees is not False else None
        inc = home.get(by[0]) if by is not None else None  # a chain goes on
        if inc is not None:
            inc.chained += 1
            inc.perhaps = frees is None
        else:
            inc = holders.get(key)
        if inc is None:
            inc = holders[key] = Incident("stale-holder", holder={
                "process": first["process"], "acquired": float(first["acquired"]),
                "released": first.get("released"), "crashed": first.get("crashed"),
                "lock": lock, "release": first.get("release") or releases.outcome(key),
                "release-error": first.get("release-error")},
                by=None if by is None else by[1], grants=[dict(first)])
            out.append(inc)
        inc.violations.append(v)
        for g in (first, second):
            if g and home.setdefault((lock, g["process"], float(g["acquired"])), inc) is inc \
                    and (inc.by is not None or inc.chained) and g not in inc.grants:
                inc.grants.append(dict(g))
    for inc in out:
        inc.fault = inc.by.fault if inc.by is not None else opener(inc, faults, releases)
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


def opener(inc: Incident, faults: Sequence[FaultRun], releases: Releases | None = None
           ) -> FaultRun | None:
    """The fault that made this holder stale: on at some moment between its acquire (asked,
    when ``releases`` know it, else granted) and the first overlap; the one aimed at the
    holder's own client first, else at another client of its overlaps, else at no client (the
    DB nodes'); the latest. A fault on other clients only opens nothing here
    (``inc.elsewhere`` says one was on)."""
    h = inc.holder or {}
    acquired, first = float(h.get("acquired") or 0.0), inc.start
    granted = acquired
    if releases is not None:
        releases.all()  # the grants, by their keys
        g = releases.grants.get((str(h.get("lock", "lock")), int(h.get("process", -1)), acquired))
        acquired = acquired if g is None else min(acquired, seconds(g.invoke))
    on = [f for f in faults if f.since <= first and (f.stop is None or f.stop >= acquired)]
    own = client_name(int(h.get("process", -1)))
    theirs = {client_name(p) for v in inc.violations for p in v.procs}
    for aimed in ([f for f in on if own in f.targets],
                  [f for f in on if theirs & set(f.targets)],
                  [f for f in on if not any(client_of(t) is not None for t in f.targets)]):
        if aimed:
            f = max(aimed, key=lambda f: f.start)
            inc.asking = f.stop is not None and f.stop < granted
            return f
    inc.elsewhere = bool(on)
    return None


def grant_like(g: Any) -> bool:
    """A grant as the mutex checker records it (process, acquired)."""
    return isinstance(g, Mapping) and isinstance(g.get("process"), int) and isinstance(
        g.get("acquired"), int | float)


class Releases:
    """The releases of a history that may have taken effect, to find the one that let an
    overlap happen (:meth:`cause`)."""

    def __init__(self, places: Any, faults: Sequence[FaultRun], history: Sequence[Op],
                 certain: bool = True) -> None:
        self.places, self.faults, self.certain = places, faults, certain
        self._all: list[tuple[Any, float, float | None, float]] | None = None
        self.sents: list[float] = []  # of the answered ones, in order
        self.span = 0.0  # the longest an answered one took
        self.unanswered: list[tuple[Any, float, float | None, float]] = []
        self.grants: dict[tuple[str, int, float], Any] = {}
        self.used: set[int] = set()  # releases named already
        self.entered: set[tuple[str, int, float]] = set()  # grants let in over another's hold
        self.cut: dict[tuple[str, Any], set[Any]] = {}  # fault -> the clients it cut off
        for op in nemesis_ops(history):
            expect = op.get("expect")
            if op.get("value") == "start" and isinstance(expect, Mapping) and isinstance(
                    expect.get("cut-off"), list):
                self.cut[str(op.get("f")), op.get("step")] = set(expect["cut-off"])

    def all(self) -> list[tuple[Any, float, float | None, float]]:
        """Each answered release (ok), by the time it was sent: (grant, sent, landed,
        answered), seconds; the unanswered ones (info: they may land any time later) apart."""
        if self._all is None:
            self._all = []
            for g, answered in self.places.granted():
                self.grants[g.lock, g.process, seconds(g.start)] = g
                if answered is not None and g.release in (OK, INFO) and not g.crashed:
                    ok = g.release == OK
                    (self._all if ok else self.unanswered).append(  # sent: to the ns, not
                        (g, g.end / 1e9, answered / 1e6 if ok else None, answered / 1e6))  # ms
            self._all.sort(key=lambda r: r[1])
            self.sents = [r[1] for r in self._all]
            self.span = max((r[3] - r[1] for r in self._all), default=0.0)
        return self._all

    def outcome(self, key: tuple[str, int, float]) -> str | None:
        """How the release of a grant ended (ok, fail, info; None: not released)."""
        self.all()
        return getattr(self.grants.get(key), "release", None)

    def sent_under(self, process: int, sent: float) -> FaultRun | None:
        """The fault a release was sent under: of those on then, one aimed at its client,
        else one aimed at no client (the DB nodes': everyone's); the latest to start (a fault
        on other clients is none of its story)."""
        on = [f for f in self.faults if f.on(sent)]
        aimed = [f for f in on if client_name(process) in f.targets] or [
            f for f in on if not any(client_of(t) is not None for t in f.targets)]
        return max(aimed, key=lambda f: f.start) if aimed else None

    def cause(self, item: Mapping[str, Any], lock: str
              ) -> tuple[tuple[str, int, float], Release] | None:
        """The release that let the later grant of an overlap in while the earlier lease was
        in force: another client's, sent before that grant, that landed after the earlier
        grant; else one that landed while the earlier acquire was in flight (it may have
        come after the key was set); else one never answered. Never one whose client a
        fault kept cut off until the later grant, nor one named for another overlap (one
        release deletes one key). The latest sent of the first kind found. With the key of
        the grant it let go of."""
        a, b = item["first"], item["second"]
        answered = self.all()
        ga = self.grants.get((lock, a["process"], a["acquired"]))
        gb = self.grants.get((lock, b["process"], b["acquired"]))
        if ga is None or gb is None or expired(ga, gb):
            return None  # the lease had run out: no release needed
        least = 0  # the lease may have run out: then only a release certainly after the grant
        if not in_force(ga, gb):
            own = client_name(ga.process)
            if any(own in f.targets for f in self.faults if f.since <= b["acquired"] and (
                    f.stop is None or f.stop >= a["acquired"])):
                return None  # ... and a fault on the holder explains that
            least = 2
        # to the ns, not the checkers' ms: a DEL sent in the millisecond of the grant it let in
        # (seen: both at 9.694 s) was sent before it, and the chain went on as a second incident
        asked, a_at, b_at = ga.invoke / 1e9, ga.start / 1e9, gb.start / 1e9
        ranked: list[tuple[int, float, Any, float | None, float, FaultRun | None]] = []
        # the answered ones that may have landed after ``asked``, sent before the later grant
        found = answered[bisect.bisect_left(self.sents, asked - self.span):
                         bisect.bisect_left(self.sents, b_at)]
        handover = self.handover(ga, lock, found)
        for g, sent, landed, done in [*found, *self.unanswered]:
            if g.process == a["process"] or g.lock != lock or id(g) in self.used \
                    or g is handover:
                continue
            fault = self.sent_under(g.process, sent)
            earliest = sent  # it reached the service no sooner, nor before its cut healed
            if fault is not None and g.process in self.cut.get((fault.f, fault.step), ()):
                earliest = math.inf if fault.stop is None else max(sent, fault.stop)
            if earliest >= b_at:
                continue
            if landed is not None and landed > asked:
                ranked.append((2 if landed > a_at else 1, sent, g, landed, done, fault))
            elif landed is None:
                ranked.append((0, sent, g, landed, done, fault))
        ranked = [r for r in ranked if r[0] >= least]
        if not ranked:
            return None
        rank, sent, g, landed, done, fault = max(ranked, key=lambda r: r[:2])
        self.used.add(id(g))  # one release deletes one key: it lets one overlap in
        return ((lock, g.process, seconds(g.start)),
                Release(g.process, sent, landed, done, fault,
                        None if rank != 1 else float(a["acquired"]), self.certain))

    def handover(self, ga: Any, lock: str, found: Sequence[tuple[Any, float, float | None,
                                                                 float]]) -> Any:
        """The grant whose release let ``ga`` in, when ``ga`` was no overlap's later grant: the
        latest sent before ``ga``'s grant, of an earlier grant whose lease was still in force
        then. That release deleted its own key (``ga`` could not be granted over it), so it
        deleted no later one (seen: a bare DEL sent 50 ms before the next grant, answered 5 ms
        after it, named instead of the cut-off holder's DEL that landed 6 s late)."""
        if (lock, ga.process, seconds(ga.start)) in self.entered:
            return None  # let in by another release: this one may have deleted its key
        before = [r for r in found if r[0].lock == lock and r[0].process != ga.process
                  and r[1] <= ga.start / 1e9 and r[0].start < ga.start and in_force(r[0], ga)]
        return max(before, key=lambda r: r[1])[0] if before else None


def in_force(a: Any, b: Any) -> bool:
    """Was grant ``a``'s lease certainly still in force when ``b`` was granted (or has ``a``
    no lease to tell)?"""
    v = getattr(a, "validity", None)
    return not isinstance(v, int | float) or isinstance(v, bool) or b.start < a.invoke + v * 1e9


def expired(a: Any, b: Any) -> bool:
    """Had grant ``a``'s lease certainly run out before ``b`` asked (its service set the lease
    by ``a``'s grant at the latest)?"""
    v = getattr(a, "validity", None)
    return (isinstance(v, int | float) and not isinstance(v, bool) and b is not None
            and b.invoke >= a.start + v * 1e9)


def holder_of(v: Violation, holders: Sequence[Incident]) -> Incident | None:
    """The stale holder a violation belongs to: its process is among the violation's (the
    holder's, or a client's of its chain), and the violation happened while it held the lock
    (up to its release, or the last overlap); failing that, the ops it involves ran then. The
    closest match wins."""
    if v.t0 is None:
        return None
    spans = [(v.t0 - SLACK_S, (v.t1 if v.t1 is not None else v.t0) + SLACK_S)]
    if v.c0 is not None and v.c1 is not None:
        spans.append((v.c0, v.c1))
    for a, b in spans:
        best, best_overlap = None, -1.0
        for inc in holders:
            for h in inc.grants or [inc.holder or {}]:
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
    on = [f for f in faults if f.on(v.t0, AFTERMATH_S) or f.since <= v.t0 <= f.start]
    return max(on, key=lambda f: f.start) if on else None
