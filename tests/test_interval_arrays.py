"""Availability by arrays gives the figures the list functions give, interval for interval:
unions with touching and nested intervals, empty ones, gaps between and inside holdings,
outages joined across moments nobody asked; and what the arrays cannot hold goes the list
way."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from checker import interval_arrays as ia
from checker.availability import ARRAYS_FROM, lock_availability, stretches
from checker.intervals import subtract_unions, union

SPANS = st.lists(st.tuples(st.integers(0, 60), st.integers(-3, 15)).map(
    lambda x: (x[0], x[0] + x[1])), max_size=40)


def listed(x: tuple[np.ndarray, np.ndarray]) -> list[tuple[int, int]]:
    return list(zip(x[0].tolist(), x[1].tolist(), strict=True))


@settings(max_examples=500, deadline=None)
@given(SPANS, SPANS, st.integers(1, 20))
def test_the_figures_by_arrays_are_the_lists(wanted: list[Any], grants: list[Any],
                                             outage: int) -> None:
    held = union(grants)  # as Lives.held gives them
    want = lock_availability(wanted, held, outage, by_arrays=False)
    assert lock_availability(wanted, held, outage, by_arrays=True) == want
    a, b = ia.arrays(wanted)  # type: ignore[misc]
    u = ia.union(a, b)
    assert listed(u) == union(wanted)
    h = ia.arrays(held)
    assert h is not None
    short = ia.subtract(*u, *h)
    assert listed(short) == subtract_unions(union(wanted), held)
    assert listed(ia.stretches(*short, *h)) == stretches(subtract_unions(union(wanted), held),
                                                         held)


def test_a_long_run_goes_by_arrays_and_an_outage_is_found() -> None:
    """1,000 acquires of 1 ms each, each granted as it ends, but for 5 s in which nobody
    held it: one outage, from the first acquire not granted to the next grant, either way."""
    ms = 1_000_000
    wanted = [(t * 10 * ms, t * 10 * ms + ms) for t in range(1000)]
    held = [(t * 10 * ms + ms, t * 10 * ms + 9 * ms) for t in range(1000) if not 300 <= t < 800]
    assert len(wanted) + len(held) >= ARRAYS_FROM
    got = lock_availability(wanted, union(held), 1000 * ms)
    assert got == lock_availability(wanted, union(held), 1000 * ms, by_arrays=False)
    assert got["outage-count"] == 1
    longest = got["longest-unavailable"]
    assert (longest["from"], longest["until"]) == (3.0, 8.001)  # asked at 3 s, held 8.001 s


def test_what_arrays_cannot_hold_goes_the_list_way() -> None:
    assert ia.arrays([(0, 1.5)]) is None  # a float: numpy would cut it
    assert ia.arrays([(0, 2**70)]) is None
    floats = [(0.0, 1.5), (2.0, 3.0)]
    assert lock_availability(floats, [(1.0, 2.5)], 1, by_arrays=True) == \
        lock_availability(floats, [(1.0, 2.5)], 1, by_arrays=False)
    not_a_union = [(5, 9), (0, 6)]  # unsorted and overlapping: the lists judge it
    assert lock_availability([(0, 10)], not_a_union, 1, by_arrays=True) == \
        lock_availability([(0, 10)], not_a_union, 1, by_arrays=False)
