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
from collections.abc import Iterable, Sequence
from typing import Any

from harness.core.history import FAIL, OK, Op
from harness.presentation.report import pair_arrays

BUCKETS = 400  # throughput / quantile buckets over the whole run...
MIN_BUCKET_US = 200_000  # ...each at least 0.2 s, so a rate is a rate, not a spike
GRID_COLS = 480  # latency cells across the run (about 2.6 px each on a 1400 px page)
ROWS_PER_DECADE = 10  # latency cells per factor of ten
MIN_LATENCY_S = 1e-5  # the grid's floor: 10 µs (anything quicker sits on it)
QUANTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))
OUTCOMES = ("ok", "fail", "info")  # by the rows' outcome code

Pair = tuple[Op, Op | None]
Row = tuple[str, int, int, int]  # f, invoked (ns), completed (ns), outcome (0 ok, 1 fail, 2 info)


def us(ns: int) -> int:
    return ns // 1000


def workload_rows(client_pairs: Iterable[Pair]) -> Any:
    """The completed pairs the charts count (not the final read, not the never completed), as
    plain tuples: read once, counted twice (of pair arrays: arrays, :class:`.pair_arrays.Rows`)."""
    if pair_arrays.is_arrays(client_pairs):
        return pair_arrays.Rows(client_pairs)  # type: ignore[arg-type]
    code = {OK: 0, FAIL: 1}
    return [(inv["f"], inv["time"], done["time"], code.get(done["type"], 2))
            for inv, done in client_pairs if done is not None and inv["f"] != "read"]


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The nearest-rank quantile of values already sorted (non-empty)."""
    return sorted_values[min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))]


def series(rows: Sequence[Row], end_ns: int) -> dict[str, Any]:
    """Per time bucket: completions per second per f and outcome (by completion time), and the
    p50 / p95 / p99 latency in ms of each f's ok ops (by invocation time)."""
    if isinstance(rows, pair_arrays.Rows):
        return pair_arrays.series(rows, end_ns, BUCKETS, MIN_BUCKET_US, OUTCOMES, QUANTILES,
                                  quantile)
    end = max(us(end_ns), 1)
    n = max(1, min(BUCKETS, end // MIN_BUCKET_US))
    width = end / n
    counts: dict[str, dict[str, list[int]]] = {}
    lat: dict[str, list[list[float]]] = {}
    per_ns = 1 / (width * 1000)
    for f, a, b, outcome in rows:
        per_f = counts.get(f)
        if per_f is None:
            per_f = counts[f] = {name: [0] * n for name in OUTCOMES}
        per_f[OUTCOMES[outcome]][min(n - 1, int(b * per_ns))] += 1
        if outcome == 0:
            buckets = lat.get(f)
            if buckets is None:
                buckets = lat[f] = [[] for _ in range(n)]
            buckets[min(n - 1, int(a * per_ns))].append((b - a) / 1e6)
    secs = width / 1e6
    fs: dict[str, Any] = {}
    for f in sorted(counts):
        entry: dict[str, Any] = {name: [round(c / secs, 2) for c in counts[f][name]]
                                 for name in OUTCOMES}
        quant: dict[str, list[float | None]] = {name: [] for name, _ in QUANTILES}
        for values in lat.get(f) or [[] for _ in range(n)]:
            values.sort()
            for name, q in QUANTILES:
                quant[name].append(round(quantile(values, q), 3) if values else None)
        entry.update(quant)
        fs[f] = entry
    return {"width": round(width), "n": n, "fs": fs}


def latency_row(seconds: float) -> int:
    """The grid row of a latency: tenths of a decade above the 10 µs floor."""
    return max(0, math.floor(math.log10(max(seconds, MIN_LATENCY_S) / MIN_LATENCY_S)
                             * ROWS_PER_DECADE))


def latency_grid(rows: Sequence[Row], end_ns: int) -> dict[str, Any]:
    """Every completed op counted into a (time, log latency) cell per outcome: the latency
    scatter of a run too long to embed op by op. ``cells`` is flat: col, row, ok, fail, info,
    col, row, ... for the cells that have any op (sparse); ``f`` lists each cell's fs."""
    if isinstance(rows, pair_arrays.Rows):
        return pair_arrays.latency_grid(rows, end_ns, GRID_COLS, ROWS_PER_DECADE,
                                        MIN_LATENCY_S)
    end = max(us(end_ns), 1)
    width = end / GRID_COLS
    cells: dict[tuple[int, int], list[int]] = {}
    per_ns, log10, floor_ns = 1 / (width * 1000), math.log10, MIN_LATENCY_S * 1e9
    for _f, a, b, outcome in rows:  # latency_row, inline: this runs once per op
        key = (min(GRID_COLS - 1, int(a * per_ns)),
               int(log10(max(b - a, floor_ns) / floor_ns) * ROWS_PER_DECADE))
        cell = cells.get(key)
        if cell is None:
            cell = cells[key] = [0, 0, 0]
        cell[outcome] += 1
    flat: list[int] = []
    for (col, row), (ok, fail, info) in sorted(cells.items()):
        flat.extend((col, row, ok, fail, info))
    return {"cols": GRID_COLS, "width": width, "perDecade": ROWS_PER_DECADE,
            "floor": MIN_LATENCY_S, "cells": flat}

