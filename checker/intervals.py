"""Unions and differences of half-open time intervals ``[start, end)``, in ns, and the pairs
of intervals that overlap. Worked out by array operations (a few passes in C, whether a lock
has ten acquires or the hundreds of thousands of a long run): the intervals as two arrays
(starts, ends), int64, or float64 where one is a float. Values are only compared, never
added, so the intervals given back are those a walk over the lists would give. Pure."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

Interval = tuple[int, int]
Arrays = tuple[Any, Any]  # (starts, ends): numpy arrays (numpy imported on first use)
T = TypeVar("T")


def arrays(intervals: Iterable[Interval]) -> Arrays:
    """(starts, ends) of intervals: int64 when all are ints that fit, else float64 (an int
    past int64 is no time: :data:`harness.core.history.MAX_TIME`)."""
    import numpy as np

    items = list(intervals)
    if not items:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    try:
        both = np.array(items)
    except OverflowError:
        both = np.array(items, dtype=np.float64)
    both = both.astype(np.int64 if both.dtype.kind in "ib" else np.float64)
    return both[:, 0].copy(), both[:, 1].copy()


def listed(x: Arrays) -> list[Interval]:
    return list(zip(x[0].tolist(), x[1].tolist(), strict=True))


def _bounds(a: Any) -> tuple[int | float, int | float]:
    """Before and after any value of ``a``'s kind."""
    import numpy as np

    if a.dtype.kind == "f":
        return -np.inf, np.inf
    return np.iinfo(np.int64).min, np.iinfo(np.int64).max


def union_of(a: Any, b: Any) -> Arrays:
    """Sorted, disjoint, non-empty intervals covering the same time (touching ones joined)."""
    import numpy as np

    keep = b > a
    a, b = a[keep], b[keep]
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    if not len(a):
        return a, b
    reach = np.maximum.accumulate(b)  # the end of everything up to here
    new = np.ones(len(a), dtype=bool)
    new[1:] = a[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(a)) - 1
    return a[first], reach[last]


def subtract_of(a: Any, b: Any, c: Any, d: Any) -> Arrays:
    """The unions (a, b) minus (c, d): each interval cut by the gaps between the cuts, the
    non-empty pieces in order."""
    import numpy as np

    if not len(a):
        return a, b
    if a.dtype != c.dtype:
        a, b, c, d = (x.astype(np.float64) for x in (a, b, c, d))
    small, big = _bounds(a)
    lo = np.searchsorted(d, a, "right")  # the gap an interval starts in: after lo cuts
    hi = np.searchsorted(c, b, "left")  # the last gap it reaches: before cut hi
    count = np.maximum(hi - lo + 1, 0)
    which = np.repeat(np.arange(len(a)), count)
    k = np.arange(len(which)) - np.repeat(np.cumsum(count) - count, count) + lo[which]
    gap_start = np.where(k > 0, d[np.maximum(k - 1, 0)] if len(d) else 0, small)
    gap_end = np.where(k < len(c), c[np.minimum(k, max(len(c) - 1, 0))] if len(c) else 0, big)
    start = np.maximum(a[which], gap_start)
    end = np.minimum(b[which], gap_end)
    keep = end > start
    return start[keep], end[keep]


def stretches_of(a: Any, b: Any, held_start: Any, held_end: Any
                 ) -> Arrays:
    """Gaps (a, b) joined where no holding separates them (``held_*``: a union): a gap
    joins the stretch before it unless a holding that ends after that stretch starts before
    the gap does."""
    import numpy as np

    if not len(a):
        return a, b
    i = np.searchsorted(held_end, b[:-1], "right")  # the first holding ending after each
    later = np.append(held_start, _bounds(held_start)[1])[i]
    join = np.zeros(len(a), dtype=bool)
    join[1:] = later >= a[1:]
    first = np.flatnonzero(~join)
    last = np.append(first[1:], len(a)) - 1
    return a[first], b[last]


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint, non-empty intervals covering the same time."""
    return listed(union_of(*arrays(intervals)))


def subtract(these: Iterable[Interval], those: Iterable[Interval]) -> list[Interval]:
    """The time in ``these`` and not in ``those``."""
    return listed(subtract_of(*union_of(*arrays(these)), *union_of(*arrays(those))))


def length(disjoint: Iterable[Interval]) -> int:
    """The time a :func:`union` result covers."""
    return sum(b - a for a, b in disjoint)


def total(intervals: Iterable[Interval]) -> int:
    return length(union(intervals))


def overlapping(items: Sequence[T], start: Callable[[T], float], end: Callable[[T], float],
                limit: int) -> tuple[int, list[tuple[T, T]]]:
    """Pairs (earlier, later) of ``items`` (sorted by ``start``) where the later one starts
    before the earlier one ends: how many, and the first ``limit`` of them (by the later one,
    then the earlier one, in ``items`` order). O(n log n + pairs counted), whatever the count:
    a sweep with a heap of the open intervals by end, never a list of every pair."""
    count = 0
    found: list[tuple[T, T]] = []
    active: list[tuple[float, int, T]] = []  # (end, position, item): open intervals
    for i, item in enumerate(items):
        s = start(item)
        while active and active[0][0] <= s:
            heapq.heappop(active)
        if active:
            count += len(active)
            if len(found) < limit:  # at most `limit` items ever get here with pairs to list
                earlier = sorted(active, key=lambda a: a[1])[: limit - len(found)]
                found.extend((a[2], item) for a in earlier)
        heapq.heappush(active, (end(item), i, item))
    return count, found
