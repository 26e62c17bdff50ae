"""Availability's figures against a brute-force model (the time as a set of points): unions
with touching and nested intervals, empty ones, gaps between and inside holdings, outages
joined across moments nobody asked; and intervals the int64 arrays cannot hold (floats, ints
past int64) held as floats, each value given back as it was."""

from __future__ import annotations

import bisect
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from checker.availability import lock_availability
from checker.intervals import arrays, listed, stretches_of, union

SPANS = st.lists(st.tuples(st.integers(0, 60), st.integers(-3, 15)).map(
    lambda x: (x[0], x[0] + x[1])), max_size=40)
NS = 1_000_000_000


def points(intervals: list[tuple[int, int]]) -> set[int]:
    return {t for a, b in intervals for t in range(a, b)}


def runs(ps: set[int]) -> list[tuple[int, int]]:
    """The points as sorted, disjoint, non-touching intervals."""
    out: list[tuple[int, int]] = []
    for t in sorted(ps):
        if out and out[-1][1] == t:
            out[-1] = (out[-1][0], t + 1)
        else:
            out.append((t, t + 1))
    return out


def searched(gaps: list[tuple[int, int]], held: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Gaps joined unless a holding ending after the stretch so far starts before the next
    gap, the holding found by searching afresh each time."""
    ends = [b for _, b in held]
    out: list[tuple[int, int]] = []
    for a, b in gaps:
        if out:
            i = bisect.bisect_right(ends, out[-1][1])
            if i == len(held) or held[i][0] >= a:
                out[-1] = (out[-1][0], b)
                continue
        out.append((a, b))
    return out


@settings(max_examples=500, deadline=None)
@given(SPANS, SPANS, st.integers(1, 20))
def test_the_figures_are_those_of_sets_of_points(wanted: list[Any], grants: list[Any],
                                                 outage: int) -> None:
    held = union(grants)  # as Lives.held gives them
    got = lock_availability(wanted, held, outage)
    want, have = points(wanted), points(held)
    short = runs(want - have)
    lost, span = len(want - have), len(want | have)
    assert got["unavailable-s"] == round(lost / NS, 3)
    assert got["availability"] == (round(1 - lost / span, 4) if span else 1.0)
    assert (got["wanted-s"], got["held-s"]) == (round(len(want) / NS, 3),
                                                round(len(have) / NS, 3))
    gaps = searched(short, held)
    assert got["outage-count"] == len([g for g in gaps if g[1] - g[0] >= outage])
    assert listed(stretches_of(*arrays(short), *arrays(held))) == gaps
    if gaps:
        longest = max(gaps, key=lambda g: g[1] - g[0])
        assert got["longest-unavailable"]["seconds"] == round((longest[1] - longest[0]) / NS, 3)
    else:
        assert got["longest-unavailable"] is None


def test_a_long_run_finds_its_outage() -> None:
    """1,000 acquires of 1 ms each, each granted as it ends, but for 5 s in which nobody
    held it: one outage, from the first acquire not granted to the next grant."""
    ms = 1_000_000
    wanted = [(t * 10 * ms, t * 10 * ms + ms) for t in range(1000)]
    held = [(t * 10 * ms + ms, t * 10 * ms + 9 * ms) for t in range(1000) if not 300 <= t < 800]
    got = lock_availability(wanted, union(held), 1000 * ms)
    assert got["outage-count"] == 1
    longest = got["longest-unavailable"]
    assert (longest["from"], longest["until"]) == (3.0, 8.001)  # asked at 3 s, held 8.001 s


def test_what_int64_cannot_hold_is_held_as_floats() -> None:
    a, b = arrays([(0, 1.5)])
    assert a.dtype.kind == "f" and listed((a, b)) == [(0.0, 1.5)]
    assert arrays([(0, 2**70)])[1].dtype.kind == "f"
    assert union([(2.0, 3.0), (0.0, 1.5), (1.5, 2.0)]) == [(0.0, 3.0)]
    floats = [(0.0, 1.5), (2.0, 3.0)]
    got = lock_availability(floats, [(1.0, 2.5)], 1)
    assert got["unavailable-s"] == round(1.5 / NS, 3)
    assert got["longest-unavailable"]["from"] == 0.0
    not_a_union = [(5, 9), (0, 6)]  # unsorted and overlapping: taken as their union
    assert lock_availability([(0, 10)], not_a_union, 1) == \
        lock_availability([(0, 10)], [(0, 9)], 1)
    assert lock_availability([(0, 10)], [(0, 9)], 1)["unavailable-s"] == round(1 / NS, 3)


@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=8),
       st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=8))
def test_stretches_join_the_gaps_no_holding_separates(gaps: list[tuple[int, int]],
                                                      held: list[tuple[int, int]]) -> None:
    """What searching afresh for each gap finds, gaps in order or not."""
    h = union(held)
    for g in (union(gaps), gaps):
        assert listed(stretches_of(*arrays(g), *arrays(h))) == searched(g, h)
