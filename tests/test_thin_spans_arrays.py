"""The lock-held spans thinned by arrays are those the lists thin: the same spans kept in the
same order (held to the end first, then the long ones, then the nearest the focus, past the
cap), the same density digits; spans numpy would read otherwise go the list way."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.presentation.report import pair_arrays, sampling


@st.composite
def cases(draw: Any) -> tuple[Any, ...]:
    lanes = draw(st.integers(1, 4))
    end = draw(st.integers(0, 5000))
    n = draw(st.integers(0, 60))
    spans: dict[str, list[int]] = {"lane": [], "s": [], "e": [], "tok": []}
    for _ in range(n):
        a = draw(st.integers(0, max(end, 1)))
        spans["lane"].append(draw(st.integers(0, lanes - 1)))
        spans["s"].append(a)
        spans["e"].append(draw(st.one_of(st.just(-1), st.integers(a, a + 400))))
        spans["tok"].append(draw(st.integers(-1, 50)))
    edges = sorted(draw(st.lists(st.integers(0, end + 500), max_size=8)))
    around = [(x, x + draw(st.integers(0, 300))) for x in edges]
    merged: list[tuple[int, int]] = []
    for x, y in around:  # disjoint and sorted, as sampling.focus gives them
        if merged and x <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], y))
        else:
            merged.append((x, y))
    radius = draw(st.sampled_from([0.0, 1e-9, 50, 333.0, float("inf")]))
    return spans, merged, radius, end, lanes, draw(st.sampled_from([0, 3, 16_000]))


@settings(max_examples=600, deadline=None)
@given(cases())
def test_thinned_by_arrays_as_by_lists(case: tuple[Any, ...]) -> None:
    spans, around, radius, end, lanes, cap = case
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sampling, "MAX_SPANS", cap)
        mp.setattr(sampling, "DENSITY_COLS", 50)  # columns a few us wide: edges matter
        want = sampling.thin_spans(spans, around, radius, end, lanes, by_arrays=False)
        got = sampling.thin_spans(spans, around, radius, end, lanes, by_arrays=True)
    assert got == want


def test_spans_numpy_would_misread_go_the_list_way() -> None:
    spans = {"lane": [0, 0], "s": [-5, 3], "e": [4, -1], "tok": [1, 2]}
    assert pair_arrays.thin_spans(spans, [], 0.0, 10, 1, 10, 20) is None
    big = {"lane": [0], "s": [1], "e": [2], "tok": [2**70]}
    assert pair_arrays.thin_spans(big, [], 0.0, 10, 1, 10, 20) is None
    assert sampling.thin_spans(spans, [], 0.0, 10, 1, by_arrays=True) == \
        sampling.thin_spans(spans, [], 0.0, 10, 1, by_arrays=False)
