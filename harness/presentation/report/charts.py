"""The figures behind the report's charts (pure: no I/O, no clock), computed from every op.

Three charts share the timeline's time axis (drawn by ``assets/charts.js``):

- throughput: completions per second, per ``f`` and per outcome (ok / fail / info);
- latency quantiles: p50, p95 and p99 of ok ops per ``f``, per time bucket;
- latency per op: a point per op at its invocation, its latency up, coloured by outcome. When
  the page embeds every op the script draws them from the embedded ops; when it does not (a
  long run), :func:`latency_grid` aggregates them here into cells a person could not tell apart
  anyway (a few pixels wide, a tenth of a decade high), counted per outcome.

``read`` (the final read-back of the resource) is left out: it is the harness, not the workload.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from harness.core.history import Op
from harness.presentation.report import pair_arrays

BUCKETS = 400  # throughput / quantile buckets over the whole run...
MIN_BUCKET_US = 200_000  # ...each at least 0.2 s, so a rate is a rate, not a spike
GRID_COLS = 480  # latency cells across the run (about 2.6 px each on a 1400 px page)
ROWS_PER_DECADE = 10  # latency cells per factor of ten
MIN_LATENCY_S = 1e-5  # the grid's floor: 10 µs (anything quicker sits on it)
QUANTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))
OUTCOMES = ("ok", "fail", "info")  # by the rows' outcome code

Pair = tuple[Op, Op | None]


def us(ns: int) -> int:
    return ns // 1000


def workload_rows(client_pairs: pair_arrays.PairArrays) -> pair_arrays.Rows:
    """The completed pairs the charts count (not the final read, not the never completed), as
    arrays (:class:`.pair_arrays.Rows`): read once, counted twice."""
    return pair_arrays.Rows(client_pairs)


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The nearest-rank quantile of values already sorted (non-empty)."""
    return sorted_values[min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))]


def series(rows: pair_arrays.Rows, end_ns: int) -> dict[str, Any]:
    """Per time bucket: completions per second per f and outcome (by completion time), and the
    p50 / p95 / p99 latency in ms of each f's ok ops (by invocation time)."""
    return pair_arrays.series(rows, end_ns, BUCKETS, MIN_BUCKET_US, OUTCOMES, QUANTILES,
                              quantile)


def latency_row(seconds: float) -> int:
    """The grid row of a latency: tenths of a decade above the 10 µs floor."""
    return max(0, math.floor(math.log10(max(seconds, MIN_LATENCY_S) / MIN_LATENCY_S)
                             * ROWS_PER_DECADE))


def latency_grid(rows: pair_arrays.Rows, end_ns: int) -> dict[str, Any]:
    """Every completed op counted into a (time, log latency) cell per outcome: the latency
    scatter of a run too long to embed op by op. ``cells`` is flat: col, row, ok, fail, info,
    col, row, ... for the cells that have any op (sparse)."""
    return pair_arrays.latency_grid(rows, end_ns, GRID_COLS, ROWS_PER_DECADE, MIN_LATENCY_S)
