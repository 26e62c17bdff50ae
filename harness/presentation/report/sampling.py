"""Which op pairs report.html embeds one by one, and the density it draws for the rest (pure).

A page that embeds every op of a long run is many megabytes and slow to open, though at the
width of a screen a second of a busy run is a few pixels holding thousands of ops. So past
``MAX_PAIRS`` op pairs the page keeps, one by one, the pairs nearest to what a person zooms in
on (every listed violation's span and every fault boundary, out to a radius the budget allows,
at most ``CONTEXT_US``), and draws every other pair as density: per lane, one column of
``DENSITY_COLS`` across the run saying which outcomes happened in it. Violations and fault
windows are not ops: they are always drawn exactly, whatever is embedded. The lock-held spans
are thinned the same way, at most ``MAX_SPANS`` of them (:func:`thin_spans`).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.core.history import Op
from harness.presentation.report import pair_arrays

MAX_PAIRS = 32_000  # embedded op pairs: about 1.2 MB of page
CONTEXT_US = 2_000_000  # at most 2 s around a violation or a fault boundary
MAX_SPANS = 16_000  # embedded lock-held spans when the pairs are sampled: about 0.35 MB
DENSITY_COLS = 2400  # columns of the lanes' density (about one a pixel on a 2400 px screen)

Pair = tuple[Op, Op | None]


def focus(violations: Sequence[dict[str, Any]], faults: Sequence[dict[str, Any]]
          ) -> list[tuple[int, int]]:
    """What a person zooms in on, as disjoint sorted spans (us): each violation's story
    (``c0``-``c1``) and each fault window's two edges."""
    spans = [(v["c0"], v["c1"]) for v in violations if v.get("c0") is not None]
    for f in faults:
        spans.extend((edge, edge) for edge in (f["start"], f["stop"]) if edge is not None)
    merged: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def distances(client_pairs: Sequence[Pair], spans: Sequence[tuple[int, int]], end_us: int
              ) -> list[float]:
    """Each pair's gap (us) from its invoke..completion to the nearest span (0: overlaps one;
    infinite when there is none)."""
    starts = [a for a, _ in spans]
    ends = [b for _, b in spans]
    last, find = len(spans) - 1, bisect_right  # this runs once per op: locals only
    out: list[float] = []
    for inv, done in client_pairs:
        a = inv["time"] // 1000
        b = end_us if done is None else done["time"] // 1000
        j = find(starts, b) - 1  # the last span that starts before the pair ends
        d = math.inf if j < 0 else max(0, a - ends[j])
        if j < last and starts[j + 1] - b < d:
            d = starts[j + 1] - b
        out.append(d)
    return out


def sample(client_pairs: Sequence[Pair], violations: Sequence[dict[str, Any]],
           faults: Sequence[dict[str, Any]], end_us: int, max_pairs: int | None = None
           ) -> tuple[list[bool] | None, str, float]:
    """Which pairs to embed (None: all of them), the rule in words for the page, and the
    radius (us) around the focus within which things are embedded: at most ``max_pairs``
    (default :data:`MAX_PAIRS`)."""
    max_pairs = MAX_PAIRS if max_pairs is None else max_pairs
    n = len(client_pairs)
    if n <= max_pairs:
        return None, "", math.inf
    spans = focus(violations, faults)
    if not spans:
        return (np.zeros(n, dtype=bool), "none: no listed violation and no fault to zoom in on",
                0.0)
    return _sample_arrays(pair_arrays.distances(client_pairs, spans, end_us), max_pairs)


def _sample_arrays(dist: Any, max_pairs: int) -> tuple[Any, str, float]:
    """:func:`sample`'s rule on the distances of pair arrays (float64: ints or inf): the
    same radius, of the same Python type, the same mask."""
    kth = np.partition(dist, max_pairs)[max_pairs]
    radius = min(float(CONTEXT_US), math.inf if math.isinf(kth) else int(kth))
    if radius > 0:
        return dist < radius, (f"every op pair within {radius / 1e6:.3g} s of a "
                               "listed violation or a fault boundary"), radius
    zero = dist == 0
    inside = int(zero.sum())  # more pairs inside violations than the budget
    step = math.ceil(inside / max(1, max_pairs))
    keep = np.zeros(len(dist), dtype=bool)
    at = np.flatnonzero(zero)
    keep[at[::step]] = True
    return keep, f"1 in {step} of the op pairs inside listed violations", 1e-9


def lane_density(client_pairs: Sequence[Pair], lane_of: dict[int, int], keep: Sequence[bool],
                 end_us: int) -> dict[str, Any]:
    """Per lane, one digit per column of the run: the outcomes of the pairs not embedded that
    overlap the column (bit 1 ok, 2 fail, 4 info or never completed); and per lane where its
    first unknown outcome is (us; -1: none), from which on its ops may take effect any time."""
    return pair_arrays.lane_density(client_pairs, lane_of, np.asarray(keep), end_us,
                                    DENSITY_COLS)


def thin_spans(spans: dict[str, list[Any]], around: Sequence[tuple[int, int]], radius: float,
               end_us: int, lanes: int) -> tuple[dict[str, list[Any]], list[str]]:
    """The lock-held spans to embed (those held to the end, those long enough to see at full
    width, and those within ``radius`` of the focus, at most :data:`MAX_SPANS` in that order
    of preference, the nearest first), and per lane one digit per column of the run: 1 where
    a span not embedded held the lock. By array operations (a grant a span: a long run's are
    many); each kept span's fields as given (a token past 64 bits too). A span that starts
    before 0 (no op does) counts from the first column."""
    end = max(end_us, 1)
    cols = DENSITY_COLS
    width = end / cols
    lane, a, b = (np.array(spans[key], dtype=np.int64) for key in ("lane", "s", "e"))
    open_ = b < 0
    bb = np.where(open_, end, b)
    starts = np.array([x for x, _ in around], dtype=np.int64)
    stops = np.array([y for _, y in around], dtype=np.int64)
    j = np.searchsorted(starts, bb, "right") - 1
    if len(around):
        d = np.where(j >= 0, np.maximum(0, a - stops[np.maximum(j, 0)]).astype(np.float64),
                     np.inf)
        nxt = np.minimum(j + 1, len(around) - 1)
        d = np.where(j + 1 < len(around), np.minimum(d, starts[nxt] - b), d)  # b as it is
    else:
        d = np.full(len(a), np.inf)
    long_ = (b - a) >= 2 * width
    wanted = open_ | long_ | (d < radius)
    if int(wanted.sum()) > MAX_SPANS:
        pref = np.where(open_, -2.0, np.where(long_, -1.0, d))
        ks = np.flatnonzero(wanted)
        order = np.lexsort((ks, pref[ks]))
        chosen = np.zeros(len(a), dtype=bool)
        chosen[ks[order[:MAX_SPANS]]] = True
    else:
        chosen = wanted
    kept = np.flatnonzero(chosen).tolist()
    out = {key: [values[k] for k in kept] for key, values in spans.items()}
    rest = ~chosen
    ca = np.clip((a[rest] / width).astype(np.int64), 0, cols - 1)
    cb = np.minimum(cols - 1, (bb[rest] / width).astype(np.int64)) + 1
    base = lane[rest] * (cols + 1)
    size = lanes * (cols + 1)
    diff = np.bincount(base + ca, minlength=size) - np.bincount(base + cb, minlength=size)
    running = np.cumsum(diff.reshape(lanes, cols + 1)[:, :cols], axis=1) != 0
    digits = np.where(running, ord("1"), ord("0")).astype(np.uint8)
    return out, [row.tobytes().decode() for row in digits]
