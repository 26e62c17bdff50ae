"""The client op pairs of a history (:func:`checker.column_pairs.as_columns`: a run's, a
file's, a test's) as arrays, for the report and the summary: what they read of every pair (its
process, f, times, outcome, history indexes) in columns, in the order of
:func:`checker.sessions.client_pairs`, and the pairs themselves as dicts only where they are
shown (:meth:`PairArrays.pairs`: the embedded ones).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.core.history import FAIL, OK, Op

OUTCOME = {OK: 0, FAIL: 1}  # else 2 (info, anything else); 3: never completed


class PairArrays:
    """``n`` client op pairs: ``inv_time``/``done_time`` (ns; ``done_time`` = ``inv_time``
    where ``done`` is False: never completed), ``process``, ``f`` (codes into ``fs``),
    ``outcome`` (0 ok, 1 fail, 2 info, 3 never completed), ``inv_index``/``done_index``;
    ``inv_row``/``done_row``: the rows of ``cols``."""

    __slots__ = ("cols", "done", "done_index", "done_row", "done_time", "f", "fs",
                 "inv_index", "inv_row", "inv_time", "outcome", "process")

    def __init__(self, cols: Any, parts: dict[str, np.ndarray], fs: list[str]) -> None:
        self.cols, self.fs = cols, fs
        self.inv_time, self.done_time = parts["inv_time"], parts["done_time"]
        self.done, self.process, self.f = parts["done"], parts["process"], parts["f"]
        self.outcome = parts["outcome"]
        self.inv_index, self.done_index = parts["inv_index"], parts["done_index"]
        self.inv_row, self.done_row = parts["inv_row"], parts["done_row"]

    def __len__(self) -> int:
        return len(self.inv_time)

    def pair(self, k: int) -> tuple[Op, Op | None]:
        """Pair ``k`` as dicts."""
        b = self.done_row.item(k)
        return self.cols.op(self.inv_row.item(k)), (None if b < 0 else self.cols.op(b))

    def pairs(self, keep: Any = None) -> list[tuple[Op, Op | None]]:
        """The pairs ``keep`` (a mask) says, as dicts: the few a page embeds."""
        ks = range(len(self)) if keep is None else np.flatnonzero(keep).tolist()
        return [self.pair(k) for k in ks]

    def lanes(self) -> list[int]:
        """The processes, sorted."""
        return [int(p) for p in np.unique(self.process)]

    def done_us(self, end_us: int) -> np.ndarray:
        """Each pair's completion (us), ``end_us`` where it never completed."""
        return np.where(self.done, self.done_time // 1000, end_us)


def of(history: Any) -> PairArrays:
    """The client pairs of ``history`` as arrays."""
    from checker.column_pairs import as_columns

    h = as_columns(history)
    cols = h.clients
    inv_rows, done_rows = h.client_pairs()
    has = done_rows >= 0
    safe = np.where(has, done_rows, inv_rows)
    outcome_of = np.array([OUTCOME.get(t, 2) for t in ("invoke", "ok", "fail", "info")],
                          dtype=np.int8)  # by the columns' type codes (TYPE_NAMES)
    parts = {
        "inv_time": cols.time[inv_rows], "done_time": cols.time[safe], "done": has,
        "process": cols.process[inv_rows], "f": cols.f[inv_rows].astype(np.int32),
        "outcome": np.where(has, outcome_of[cols.type[safe]], 3).astype(np.int8),
        "inv_index": cols.index[inv_rows], "done_index": cols.index[safe],
        "inv_row": inv_rows.astype(np.int64), "done_row": done_rows.astype(np.int64),
    }
    return PairArrays(cols, parts, list(cols.fs))


def write_times(p: PairArrays) -> dict[int, tuple[int, int, int]]:
    """Resource seq -> (invoke us, completion us, process) of each completed write whose
    completion's value holds an int ``seq`` (the last such write of a seq wins)."""
    from harness.core.columns import BOOL, INT, OBJ

    cols = p.cols
    write = p.fs.index("write") if "write" in p.fs else -1
    ks = np.flatnonzero((p.f == write) & p.done)
    if not len(ks):
        return {}
    found: list[tuple[int, Any]] = []  # (pair, seq)
    rows = p.done_row[ks]
    for kind, cast in ((INT, int), (BOOL, bool), (OBJ, None)):
        seq, has = cols.value_of("seq", kind)
        mine = has[rows]
        found.extend((k, x if cast is None else cast(x)) for k, x in zip(
            ks[mine].tolist(), seq[rows[mine]].tolist(), strict=True)
            if cast is not None or isinstance(x, int))
    found.sort(key=lambda x: x[0])
    out: dict[int, tuple[int, int, int]] = {}
    for k, seq in found:
        out[seq] = (p.inv_time.item(k) // 1000, p.done_time.item(k) // 1000,
                    p.process.item(k))
    return out


class IndexTimes:
    """History index -> (invoke us, completion us, process) of the pair it belongs to, for
    invokes and completions, as a lookup (no dict of every op)."""

    __slots__ = ("_keys", "_p", "_pair")

    def __init__(self, p: PairArrays) -> None:
        n = len(p)
        keys = np.empty(2 * n, dtype=np.int64)
        keys[0::2] = p.inv_index
        keys[1::2] = np.where(p.done, p.done_index, p.inv_index)  # (a duplicate: harmless)
        order = np.argsort(keys, kind="stable")
        self._keys = keys[order]
        self._pair = order // 2
        self._p = p

    def _find(self, i: Any) -> int:
        if not isinstance(i, int):
            return -1
        k = int(np.searchsorted(self._keys, i, "right")) - 1  # the last written wins
        return int(self._pair[k]) if k >= 0 and self._keys[k] == i else -1

    def __contains__(self, i: Any) -> bool:
        return self._find(i) >= 0

    def __getitem__(self, i: Any) -> tuple[int, int, Any]:
        k = self._find(i)
        if k < 0:
            raise KeyError(i)
        p = self._p
        a = p.inv_time.item(k) // 1000
        return a, (p.done_time.item(k) // 1000 if p.done[k] else a), p.process.item(k)


def distances(p: PairArrays, spans: Sequence[tuple[int, int]], end_us: int) -> np.ndarray:
    """:func:`.sampling.distances` of the pairs (float64: their ints exactly, or inf)."""
    a = p.inv_time // 1000
    b = p.done_us(end_us)
    if not spans:
        return np.full(len(p), np.inf)
    starts = np.array([s for s, _ in spans], dtype=np.int64)
    ends = np.array([e for _, e in spans], dtype=np.int64)
    j = np.searchsorted(starts, b, "right") - 1
    d = np.where(j < 0, np.inf, np.maximum(0, a - ends[np.maximum(j, 0)]).astype(np.float64))
    nxt = np.minimum(j + 1, len(spans) - 1)
    later = (j < len(spans) - 1) & ((starts[nxt] - b) < d)
    return np.where(later, (starts[nxt] - b).astype(np.float64), d)


def lane_density(p: PairArrays, lane_of: dict[int, int], keep: np.ndarray, end_us: int,
                 cols: int) -> dict[str, Any]:
    """:func:`.sampling.lane_density` of the pairs (a time before 0 in the first column)."""
    end = max(end_us, 1)
    width = end / cols
    lanes = len(lane_of)
    lane = np.array([lane_of[x] for x in p.process.tolist()], dtype=np.int64) if len(p) \
        else np.zeros(0, dtype=np.int64)
    bit = np.minimum(p.outcome, 2).astype(np.int64)
    a = p.inv_time // 1000
    b = np.where(p.done, p.done_time // 1000, a)
    tails = [-1] * lanes
    unknown = bit == 2
    for ln, t in zip(lane[unknown].tolist(), b[unknown].tolist(), strict=True):
        if tails[ln] < 0 or t < tails[ln]:
            tails[ln] = t
    drawn = ~keep.astype(bool)
    ca = np.clip((a[drawn] / width).astype(np.int64), 0, cols - 1)
    cb = np.clip((b[drawn] / width).astype(np.int64), 0, cols - 1) + 1
    base = (lane[drawn] * 3 + bit[drawn]) * (cols + 1)
    diff = np.bincount(base + ca, minlength=lanes * 3 * (cols + 1)) - \
        np.bincount(base + cb, minlength=lanes * 3 * (cols + 1))
    running = np.cumsum(diff.reshape(lanes, 3, cols + 1)[:, :, :cols], axis=2) != 0
    masks = (running * np.array([1, 2, 4]).reshape(1, 3, 1)).sum(axis=1)
    out = ["".join(map(str, row)) for row in masks.tolist()]
    return {"cols": cols, "lanes": out, "tails": tails}


class Rows:
    """:func:`.charts.workload_rows` of the pairs: the completed pairs but the final read's,
    as arrays (f codes into ``fs``, invoked and completed ns, outcome 0 ok, 1 fail, 2 info)."""

    __slots__ = ("a", "b", "f", "fs", "outcome")

    def __init__(self, p: PairArrays) -> None:
        read = p.fs.index("read") if "read" in p.fs else -1
        sel = p.done & (p.f != read)
        self.f, self.fs = p.f[sel], p.fs
        self.a, self.b, self.outcome = p.inv_time[sel], p.done_time[sel], p.outcome[sel]

    def __len__(self) -> int:
        return len(self.a)


def series(rows: Rows, end_ns: int, buckets: int, min_bucket_us: int, outcomes: Sequence[str],
           quantiles: Sequence[tuple[str, float]], quantile: Any) -> dict[str, Any]:
    """:func:`.charts.series` of the rows."""
    end = max(end_ns // 1000, 1)
    n = max(1, min(buckets, end // min_bucket_us))
    width = end / n
    per_ns = 1 / (width * 1000)
    secs = width / 1e6
    fs: dict[str, Any] = {}
    done_bucket = np.minimum(n - 1, (rows.b * per_ns).astype(np.int64))
    inv_bucket = np.minimum(n - 1, (rows.a * per_ns).astype(np.int64))
    latency = (rows.b - rows.a) / 1e6
    for code in sorted(set(rows.f.tolist()), key=lambda c: rows.fs[c]):
        mine = rows.f == code
        entry: dict[str, Any] = {}
        for o, name in enumerate(outcomes):
            counts = np.bincount(done_bucket[mine & (rows.outcome == o)], minlength=n)
            entry[name] = [round(c / secs, 2) for c in counts.tolist()]
        quant: dict[str, list[float | None]] = {name: [] for name, _ in quantiles}
        ok = mine & (rows.outcome == 0)
        if ok.any():
            bucket, lat = inv_bucket[ok], latency[ok]
            order = np.lexsort((lat, bucket))
            bucket, lat = bucket[order], lat[order]
            starts = np.searchsorted(bucket, np.arange(n), "left").tolist()
            stops = np.searchsorted(bucket, np.arange(n), "right").tolist()
            for a, b in zip(starts, stops, strict=True):
                values = lat[a:b].tolist()
                for name, q in quantiles:
                    quant[name].append(round(quantile(values, q), 3) if values else None)
        else:
            for name, _q in quantiles:
                quant[name].extend([None] * n)
        entry.update(quant)
        fs[rows.fs[code]] = entry
    return {"width": round(width), "n": n, "fs": fs}


def latency_grid(rows: Rows, end_ns: int, grid_cols: int, per_decade: int, floor_s: float
                 ) -> dict[str, Any]:
    """:func:`.charts.latency_grid` of the rows."""
    import math

    end = max(end_ns // 1000, 1)
    width = end / grid_cols
    per_ns, floor_ns = 1 / (width * 1000), floor_s * 1e9
    col = np.minimum(grid_cols - 1, (rows.a * per_ns).astype(np.int64))
    ratio = np.maximum((rows.b - rows.a).astype(np.float64), floor_ns) / floor_ns
    scaled = np.log10(ratio) * per_decade
    near = np.abs(scaled - np.round(scaled)) < 1e-6  # where numpy's last bit could matter
    if near.any():
        scaled[near] = [math.log10(x) * per_decade for x in ratio[near].tolist()]
    row = scaled.astype(np.int64)
    key = col * (1 << 20) + row
    uniq, inverse = np.unique(key, return_inverse=True)
    counts = [np.bincount(inverse[rows.outcome == o], minlength=len(uniq)) for o in range(3)]
    flat: list[int] = []
    for k, u in enumerate(uniq.tolist()):
        flat.extend((u >> 20, u & ((1 << 20) - 1), int(counts[0][k]), int(counts[1][k]),
                     int(counts[2][k])))
    return {"cols": grid_cols, "width": width, "perDecade": per_decade, "floor": floor_s,
            "cells": flat}
