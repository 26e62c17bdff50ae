""":mod:`checker.intervals`' union and difference, and availability's stretches, by array
operations: the same intervals for the hundreds of thousands of acquires of a long run, in a
few passes in C rather than a Python loop an interval. Intervals are half-open ``[start,
end)`` in int ns, as two int64 arrays (starts, ends).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Arrays = tuple[np.ndarray, np.ndarray]


def arrays(intervals: Sequence[tuple[int, int]]) -> Arrays | None:
    """(starts, ends) of int intervals; None when one is not a pair of ints that fit int64
    (the caller keeps the list functions then)."""
    if not intervals:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    try:
        both = np.array(intervals)
    except (ValueError, OverflowError):
        return None
    if both.ndim != 2 or both.shape[1] != 2 or both.dtype.kind != "i":
        return None
    both = both.astype(np.int64)
    return both[:, 0].copy(), both[:, 1].copy()


def union(a: np.ndarray, b: np.ndarray) -> Arrays:
    """:func:`checker.intervals.union`: sorted, disjoint, non-empty (touching ones joined)."""
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


def subtract(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray) -> Arrays:
    """:func:`checker.intervals.subtract_unions` of unions (a, b) minus (c, d): each interval
    cut by the gaps between the cuts, the non-empty pieces in order."""
    if not len(a):
        return a, b
    lo = np.searchsorted(d, a, "right")  # the gap an interval starts in: after lo cuts
    hi = np.searchsorted(c, b, "left")  # the last gap it reaches: before cut hi
    count = np.maximum(hi - lo + 1, 0)
    which = np.repeat(np.arange(len(a)), count)
    k = np.arange(len(which)) - np.repeat(np.cumsum(count) - count, count) + lo[which]
    gap_start = np.where(k > 0, d[np.maximum(k - 1, 0)] if len(d) else 0, np.iinfo(np.int64).min)
    gap_end = np.where(k < len(c), c[np.minimum(k, max(len(c) - 1, 0))] if len(c) else 0,
                       np.iinfo(np.int64).max)
    start = np.maximum(a[which], gap_start)
    end = np.minimum(b[which], gap_end)
    keep = end > start
    return start[keep], end[keep]


def stretches(a: np.ndarray, b: np.ndarray, held_start: np.ndarray, held_end: np.ndarray
              ) -> Arrays:
    """:func:`checker.availability.stretches` of sorted gaps and a union of holdings: a gap
    joins the stretch before it unless a holding that ends after that stretch starts before
    the gap does."""
    if not len(a):
        return a, b
    i = np.searchsorted(held_end, b[:-1], "right")  # the first holding ending after each
    later = np.append(held_start, np.iinfo(np.int64).max)[i]
    join = np.zeros(len(a), dtype=bool)
    join[1:] = later >= a[1:]
    first = np.flatnonzero(~join)
    last = np.append(first[1:], len(a)) - 1
    return a[first], b[last]
