"""Unions and differences of half-open time intervals ``(start, end)``, in ns, and the pairs
of intervals that overlap. Pure."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

Interval = tuple[int, int]
T = TypeVar("T")


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint, non-empty intervals covering the same time."""
    out: list[Interval] = []
    add = out.append
    start = end = None
    items = [i for i in intervals if i[1] > i[0]]
    items.sort()
    for a, b in items:
        if end is not None and a <= end:
            if b > end:
                end = b
            continue
        if end is not None:
            add((start, end))
        start, end = a, b
    if end is not None:
        add((start, end))
    return out


def subtract(these: Iterable[Interval], those: Iterable[Interval]) -> list[Interval]:
    """The time in ``these`` and not in ``those`` (one merge of two sorted lists: linear)."""
    return subtract_unions(union(these), union(those))


def subtract_unions(these: list[Interval], cuts: list[Interval]) -> list[Interval]:
    """:func:`subtract` of two :func:`union` results (their union taken already)."""
    out: list[Interval] = []
    j = 0
    for a, b in these:
        while j < len(cuts) and cuts[j][1] <= a:  # cuts that end before this interval
            j += 1
        start = a
        k = j
        while k < len(cuts) and cuts[k][0] < b:
            c, d = cuts[k]
            if c > start:
                out.append((start, c))
            start = max(start, d)
            if start >= b:
                break
            k += 1
        if start < b:
            out.append((start, b))
    return out


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
