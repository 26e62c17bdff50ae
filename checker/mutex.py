"""The mutex checker: were two clients ever in the critical section at once?

Two views, both from the history alone:

- **lock overlaps** (the clients' view, in real time): client A got the lock (its acquire
  returned ok) and had not yet started to release it (nor crashed: a dead process holds
  nothing, see :mod:`checker.lives`) when client B's acquire returned ok. All client processes
  share one monotonic clock, so "at once" is a fact, not an inference.
- **resource interleavings** (ground truth, in the resource's own order): the resource accepted
  a write of session B between two accepted writes of session A. That is damage done.

Where the resource protects itself (the ``fenced`` workload asks for
``overlaps_informational``), lock overlaps are reported but informational: only interleavings
decide the verdict there. So they are when every write went through the lock's own transaction
(``pg-row``): the writes of a holder whose session was ended were rolled back with it.

An overlap says two clients believed they held the lock; it does not say who was wrong. When
the earlier grant came with a validity (a lease: ``SET PX``, Redlock's), the overlap is also
classed: **lease broken** when the service certainly granted the later lock while the earlier
lease was in force: the later acquire was invoked after the earlier one completed (so its
grant came after) and completed before the earlier lease could have run out (the earlier
acquire's invocation plus its validity: the server set that lease no earlier). A failover that
lost the lock, a forgetful restart. Otherwise a holder outlived its lease (a pause), or heard
of its grant late (a stalled reply), or the history cannot tell. The count of broken leases is
how often the *service* certainly lost the lock.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from itertools import accumulate
from operator import attrgetter
from typing import Any

from checker.base import MAX_LISTED, Checker
from checker.intervals import overlapping
from checker.lives import Lives
from checker.sessions import (
    Entry,
    Grant,
    entries_by_lock,
    resource_log,
    writes_in_lock_transaction,
)
from harness.core.heap import gc_paused
from harness.core.history import FAIL, Op, seconds
from harness.core.text import line


def lock_overlaps(gs: list[Grant], limit: int = MAX_LISTED
                  ) -> tuple[int, list[tuple[Grant, Grant]]]:
    """How many pairs (earlier, later) of grants have intersecting believed-held intervals, and
    the first ``limit`` of them by the later grant's start."""
    ordered = sorted(gs, key=_START_PROCESS)
    return overlapping(ordered, _START, lambda g: math.inf if g.end is None else g.end, limit)


_START_PROCESS, _START = attrgetter("start", "process"), attrgetter("start")


def describe_overlap(a: Grant, b: Grant, end: int) -> str:
    if a.end is None:
        until = "and never released"
    elif a.crashed:
        until = f"and crashed at {seconds(a.end):.2f} s"
    else:
        until = f"and only began to release at {seconds(a.end):.2f} s"
    return (f"process {b.process} acquired at {seconds(b.start):.2f} s while process "
            f"{a.process}, which acquired at {seconds(a.start):.2f} s, had not released "
            f"({until})")


def lease_broken(a: Grant, b: Grant) -> bool | None:
    """Was ``b`` certainly granted after ``a`` and while ``a``'s lease was still in force?
    (None: ``a`` had no validity to tell.)"""
    if a.validity is None or isinstance(a.validity, bool) or not isinstance(
            a.validity, int | float) or not math.isfinite(a.validity):
        return None
    return b.invoke > a.start and b.start < a.invoke + int(a.validity * 1_000_000_000)


LIVE_LEASES = 512  # leases in force at once past which the count takes the Fenwick tree


def lease_broken_count(gs: list[Grant]) -> int:
    """How many overlapping pairs (a, b) have :func:`lease_broken` true, without listing the
    pairs: b asked after a was granted (a.start < b.invoke) and was granted before a let go
    and before a's lease ran out (b.start < min(a.end, a.invoke + validity)). Offline, by b's
    invocation: with the ends of the leases that may still count in a sorted list (a few at
    any time: a lease ends when its holder lets go), else (:data:`LIVE_LEASES` of them) with
    a Fenwick tree over the lease ends: O(n log n)."""
    leases = sorted((g.start, min(math.inf if g.end is None else g.end,
                                  g.invoke + int(g.validity * 1_000_000_000)))
                    for g in gs if isinstance(g.validity, int | float)
                    and not isinstance(g.validity, bool) and math.isfinite(g.validity))
    if not leases:
        return 0
    bs = sorted(gs, key=attrgetter("invoke"))
    # A lease that ended at or before every grant from b on counts for none of them
    gone = list(accumulate(reversed([b.start for b in bs]), min))[::-1]
    live: list[float] = []  # the ends of the leases granted before b asked, not yet gone
    count = i = 0
    for b, floor in zip(bs, gone, strict=True):
        while i < len(leases) and leases[i][0] < b.invoke:
            bisect.insort(live, leases[i][1])
            i += 1
        cut = bisect.bisect_right(live, floor)
        if cut:
            del live[:cut]
        if len(live) > LIVE_LEASES:
            return _fenwick_count(leases, bs)
        count += len(live) - bisect.bisect_right(live, b.start)
    return count


def _fenwick_count(leases: list[tuple[int, float]], bs: list[Grant]) -> int:
    """:func:`lease_broken_count` with a Fenwick tree over the lease ends (``leases``: (grant,
    lease end) in order; ``bs``: the grants by invocation)."""
    ends = sorted({e for _, e in leases})
    tree = [0] * (len(ends) + 1)
    inserted = count = i = 0
    for b in bs:
        while i < len(leases) and leases[i][0] < b.invoke:
            k = bisect.bisect_left(ends, leases[i][1]) + 1
            while k <= len(ends):
                tree[k] += 1
                k += k & -k
            inserted += 1
            i += 1
        k = bisect.bisect_right(ends, b.start)  # leases ending at or before b's grant
        at_or_before = 0
        while k > 0:
            at_or_before += tree[k]
            k -= k & -k
        count += inserted - at_or_before
    return count


def refusals(paired: Any, gs: list[Grant]) -> dict[tuple[int, int], Any]:
    """Why the lock refused the releases of ``gs`` that failed: (process, release invoked)
    -> the release's ``error`` (the pairs are read only when one of them failed)."""
    wanted = {(g.process, g.end) for g in gs if g.release == FAIL}
    if not wanted:
        return {}
    return {(inv["process"], inv["time"]): done.get("error")
            for inv, done in paired.select("release")
            if done is not None and done["type"] == FAIL and inv["f"] == "release"
            and (inv["process"], inv["time"]) in wanted}


def overlap_record(a: Grant, b: Grant, end: int, why: Any = None) -> dict[str, Any]:
    stop = min(a.end_or(end), b.end_or(end))
    broken = lease_broken(a, b)
    return {
        "lease-broken": broken,
        "lock": a.lock,
        "processes": [a.process, b.process],
        "first": grant_record(a, why),
        "second": grant_record(b),
        "from": seconds(b.start),
        "until": seconds(stop),
        "explanation": describe_overlap(a, b, end),
    }


def grant_record(g: Grant, why: Any = None) -> dict[str, Any]:
    """``why``: the lock's reason for refusing its release (its ``error``), if it did."""
    out = {"process": g.process, "session": g.session, "acquired": seconds(g.start),
           "released": None if g.end is None or g.crashed else seconds(g.end),
           "token": g.token}
    if g.crashed:
        out["crashed"] = seconds(g.end) if g.end is not None else None
    elif g.release is not None:
        out["release"] = g.release  # how its release ended: ok, fail (refused), info
        if why is not None:
            out["release-error"] = str(why)
    return out


def interleavings(entries: list[Entry], limit: int = MAX_LISTED
                  ) -> tuple[int, list[tuple[tuple[Entry, Entry], Entry]]]:
    """Accepted writes of one session that sandwich an accepted write of another session.

    A session's span runs from its first entry to its last accepted write; where the resource
    logs reads (``version``, ``cas``, counter reads on PostgreSQL), a session that read before
    it wrote starts at its read: reading the data while another session is still changing it
    is the interleaving that matters for a read-modify-write. A session with no accepted
    write did nothing to the data and has no span.

    Returns how many, and the first ``limit`` of them by the intruding entry's seq: ((first,
    last) entries of the interrupted session, the intruding entry), one per pair of sessions.
    """
    reads: dict[tuple[int, Any], Entry] = {}
    spans: dict[tuple[int, Any], tuple[Entry, Entry]] = {}
    for e in entries:
        if not e.accepted:
            continue
        k = (e.process, e.session)
        if e.kind == "read":
            if k not in spans:
                reads.setdefault(k, e)
            continue
        first, _ = spans.get(k, (reads.get(k, e), e))
        spans[k] = (first, e)
    ordered = sorted(spans.values(), key=lambda span: span[0].seq)
    count, found = overlapping(ordered, lambda span: span[0].seq, lambda span: span[1].seq,
                               limit)
    return count, [(span, later[0]) for span, later in found]


def describe_interleaving(span: tuple[Entry, Entry], intruder: Entry) -> str:
    a0, a1 = span
    k, k0, k1 = line(intruder.kind, 40), line(a0.kind, 40), line(a1.kind, 40)
    what = "read the data" if intruder.kind == "read" else f"had its {k} accepted"
    then = (", and its own writes were accepted after: it acted on data that changed after it "
            "read it" if intruder.kind == "read" else "")
    return (f"process {intruder.process} {what} (seq {intruder.seq}) between process "
            f"{a0.process}'s {k0} (seq {a0.seq}) and its {k1} (seq {a1.seq})"
            f"{then}: two critical sections interleaved on the data")


class MutexChecker(Checker):
    name = "mutex"
    summary = ("two clients in the critical section at once: lock overlaps in "
               "real time, interleavings in the resource's log")
    figures = {"lock-overlap-count": "lock-overlap", "lease-broken-count": "lease-broken",
               "resource-interleaving-count": "resource-interleaving"}
    violations = {"lock-overlaps": ("lock overlap", "lock overlaps"),
                  "resource-interleavings": ("resource interleaving", "resource interleavings")}

    @staticmethod
    @gc_paused
    def check(history: Sequence[Op], *, overlaps_informational: bool = False) -> dict[str, Any]:
        """``overlaps_informational``: the resource checks tokens (the fenced workload), so lock
        overlaps are reported but only interleavings on the data decide the verdict."""
        transactional = writes_in_lock_transaction(history)
        informational = overlaps_informational or transactional
        lives = Lives.of(history)
        paired = lives.paired
        n_overlaps = n_broken = 0
        overlaps: list[tuple[Grant, Grant]] = []
        for gs in lives.by_lock().values():
            n, listed = lock_overlaps(gs)
            n_overlaps += n
            overlaps.extend(listed)
            if n:
                n_broken += lease_broken_count(gs)
        overlaps.sort(key=lambda ab: ab[1].start)
        end = lives.horizon
        entries, unknown_writes = resource_log(history)
        n_inter = 0
        inter: list[tuple[tuple[Entry, Entry], Entry]] = []
        for keyed in entries_by_lock(entries):
            n, listed_inter = interleavings(keyed)
            n_inter += n
            inter.extend(listed_inter)
        inter.sort(key=lambda x: x[1].seq)

        if n_inter or (n_overlaps and not informational):
            valid: bool | str = False
        elif unknown_writes:
            valid = "unknown"
        else:
            valid = True
        why = refusals(paired, [a for a, _ in overlaps[:MAX_LISTED]])
        first = None
        if overlaps and not informational:
            first = seconds(overlaps[0][1].start)
        result: dict[str, Any] = {
            "valid": valid,
            "lock-overlap-count": n_overlaps,
            "lock-overlaps-informational": informational,
            "lock-overlaps": [overlap_record(a, b, end, why.get((a.process, a.end)))
                              for a, b in overlaps[:MAX_LISTED]],
            "lease-broken-count": n_broken,
            "resource-interleaving-count": n_inter,
            "resource-interleavings": [
                {"processes": [s[0].process, x.process], "seqs": [s[0].seq, x.seq, s[1].seq],
                 "explanation": describe_interleaving(s, x)}
                for s, x in inter[:MAX_LISTED]
            ],
            "indeterminate-writes": unknown_writes,
            "first-violation-at": first,
        }
        if transactional and overlaps:
            result["note"] = ("lock-level overlaps are informational: every write went through the "
                              "lock's own transaction, so a holder that lost its session lost its "
                              "writes with it; the resource's log decides")
        elif informational and overlaps:
            result["note"] = ("lock-level overlaps are informational: the resource guards itself "
                              "(fencing tokens, versions, check-and-set, idempotency keys)")
        if unknown_writes and valid == "unknown":
            result["note"] = (f"{unknown_writes} writes have unknown outcomes and the resource log "
                              "was never read back (the run was cut short)")
        return result
