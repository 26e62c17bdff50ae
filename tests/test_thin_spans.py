"""The lock-held spans thinned by arrays are those a span-by-span reference keeps: the same
spans in the same order (held to the end first, then the long ones, then the nearest the
focus, past the cap), the same density digits; a token past 64 bits kept as it is, a start
before 0 counted from the first column."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.presentation.report import sampling


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


def reference(spans: dict[str, list[Any]], around: list[tuple[int, int]], radius: float,
              end_us: int, lanes: int, cap: int, cols: int) -> tuple[Any, list[str]]:
    """Span by span: its distance to the focus (the nearest interval of ``around``, after it
    or before it), its preference, the ``cap`` most preferred kept; then each column a span
    not kept covers, from its start's to its end's (the end of the run when held to it)."""
    end = max(end_us, 1)
    width = end / cols
    prefs = []
    for k, (a, b) in enumerate(zip(spans["s"], spans["e"], strict=True)):
        stop = end if b < 0 else b
        before = [y for x, y in around if x <= stop]
        after = [x for x, _ in around if x > stop]
        d = max(0, a - before[-1]) if before else math.inf
        if after:
            d = min(d, after[0] - b)
        if b < 0 or b - a >= 2 * width or d < radius:
            prefs.append((-2.0 if b < 0 else -1.0 if b - a >= 2 * width else d, k))
    kept = sorted(k for _, k in sorted(prefs)[:cap])
    out = {key: [values[k] for k in kept] for key, values in spans.items()}
    held = [["0"] * cols for _ in range(lanes)]
    for k, (lane, a, b) in enumerate(zip(spans["lane"], spans["s"], spans["e"], strict=True)):
        if k in kept:
            continue
        first = max(0, min(cols - 1, int(a / width)))
        last = min(cols - 1, int((end if b < 0 else b) / width))
        for c in range(first, last + 1):
            held[lane][c] = "1"
    return out, ["".join(row) for row in held]


@settings(max_examples=600, deadline=None)
@given(cases())
def test_thinned_as_span_by_span(case: tuple[Any, ...]) -> None:
    spans, around, radius, end, lanes, cap = case
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sampling, "MAX_SPANS", cap)
        mp.setattr(sampling, "DENSITY_COLS", 50)  # columns a few us wide: edges matter
        got = sampling.thin_spans(spans, around, radius, end, lanes)
    assert got == reference(spans, around, radius, end, lanes, cap, 50)


def test_a_token_past_64_bits_is_kept_as_it_is_and_a_start_before_0_counts_from_column_0(
        ) -> None:
    big = {"lane": [0], "s": [1], "e": [-1], "tok": [2**70]}
    kept, _ = sampling.thin_spans(big, [], 0.0, 10, 1)
    assert kept == big
    spans = {"lane": [0, 0], "s": [-5, 3], "e": [4, -1], "tok": [1, 2]}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sampling, "MAX_SPANS", 0)
        mp.setattr(sampling, "DENSITY_COLS", 20)
        kept, held = sampling.thin_spans(spans, [], 0.0, 10, 1)
    assert kept == {"lane": [], "s": [], "e": [], "tok": []}
    assert held == ["1" * 20]  # -5 us to 4 us, then 3 us to the end: every column
