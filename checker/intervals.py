"""Unions and differences of half-open time intervals ``(start, end)``, in ns. Pure."""

from __future__ import annotations

from collections.abc import Iterable

Interval = tuple[int, int]


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint, non-empty intervals covering the same time."""
    out: list[Interval] = []
    for a, b in sorted(i for i in intervals if i[1] > i[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def subtract(these: Iterable[Interval], those: Iterable[Interval]) -> list[Interval]:
    """The time in ``these`` and not in ``those`` (one merge of two sorted lists: linear)."""
    cuts = union(those)
    out: list[Interval] = []
    j = 0
    for a, b in union(these):
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


def total(intervals: Iterable[Interval]) -> int:
    return sum(b - a for a, b in union(intervals))
