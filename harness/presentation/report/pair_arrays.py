"""The client op pairs of a :class:`harness.core.run_history.ColumnHistory` as arrays, for the
report and the summary: what they read of every pair (its process, f, times, outcome, history
indexes) in columns, in the order of :func:`checker.sessions.client_pairs`, and the pairs
themselves as dicts only where they are shown (:meth:`PairArrays.pairs`: the embedded ones).

Every figure computed from these arrays (:mod:`.sampling`, :mod:`.charts`, :mod:`.model`)
is the one the walk over the dict pairs computes, number for number: the same float
operations in the same order where a float is kept, Python's own ``math.log10`` wherever the
grid's row of a latency hangs on the last bit.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.core.history import FAIL, OK, Op, pairs

OUTCOME = {OK: 0, FAIL: 1}  # else 2 (info, anything else); 3: never completed


class PairArrays:
    """``n`` client op pairs: ``inv_time``/``done_time`` (ns; ``done_time`` = ``inv_time``
    where ``done`` is False: never completed), ``process``, ``f`` (codes into ``fs``),
    ``outcome`` (0 ok, 1 fail, 2 info, 3 never completed), ``inv_index``/``done_index``;
    ``inv_row``/``done_row``: the rows of ``cols`` (-1: a pair of ``extra``, dicts by their
    place)."""

    __slots__ = ("cols", "done", "done_index", "done_row", "done_time", "extra", "f", "fs",
                 "inv_index", "inv_row", "inv_time", "outcome", "process")

    def __init__(self, cols: Any, parts: dict[str, np.ndarray], fs: list[str],
                 extra: dict[int, tuple[Op, Op | None]]) -> None:
        self.cols, self.fs, self.extra = cols, fs, extra
        self.inv_time, self.done_time = parts["inv_time"], parts["done_time"]
        self.done, self.process, self.f = parts["done"], parts["process"], parts["f"]
        self.outcome = parts["outcome"]
        self.inv_index, self.done_index = parts["inv_index"], parts["done_index"]
        self.inv_row, self.done_row = parts["inv_row"], parts["done_row"]

    def __len__(self) -> int:
        return len(self.inv_time)

    def pair(self, k: int) -> tuple[Op, Op | None]:
        """Pair ``k`` as the dict walk has it."""
        got = self.extra.get(k)
        if got is not None:
            return got
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


def of(history: Any) -> PairArrays | None:
    """The client pairs of a ColumnHistory as arrays; None when they would not read as the
    dicts do (a process that is no int, a time below zero or not an int, an index not an
    int in ``others``): the caller walks the dict pairs then."""
    cols = history.clients
    inv_rows, done_rows = history.client_pairs()
    extra = list(pairs(history.others, clients=True))
    for inv, done in extra:
        for op in (inv, done):
            if op is not None and not (type(op.get("process")) is int
                                       and type(op.get("time")) is int and op["time"] >= 0
                                       and type(op.get("index")) is int):
                return None
    if len(cols) and int(cols.time.min()) < 0:
        return None
    has = done_rows >= 0
    safe = np.where(has, done_rows, inv_rows)
    fs = list(cols.fs)
    f_code = {f: i for i, f in enumerate(fs)}
    outcome_of = np.array([OUTCOME.get(t, 2) for t in ("invoke", "ok", "fail", "info")],
                          dtype=np.int8)  # by the columns' type codes (TYPE_NAMES)
    parts = {
        "inv_time": cols.time[inv_rows], "done_time": cols.time[safe], "done": has,
        "process": cols.process[inv_rows], "f": cols.f[inv_rows].astype(np.int32),
        "outcome": np.where(has, outcome_of[cols.type[safe]], 3).astype(np.int8),
        "inv_index": cols.index[inv_rows], "done_index": cols.index[safe],
        "inv_row": inv_rows.astype(np.int64), "done_row": done_rows.astype(np.int64),
    }
    placed: dict[int, tuple[Op, Op | None]] = {}
    if extra:
        for inv, _done in extra:
            if inv["f"] not in f_code:
                f_code[inv["f"]] = len(fs)
                fs.append(inv["f"])
        more = {
            "inv_time": [inv["time"] for inv, _ in extra],
            "done_time": [(d or inv)["time"] for inv, d in extra],
            "done": [d is not None for _, d in extra],
            "process": [inv["process"] for inv, _ in extra],
            "f": [f_code[inv["f"]] for inv, _ in extra],
            "outcome": [3 if d is None else OUTCOME.get(d["type"], 2) for _, d in extra],
            "inv_index": [inv["index"] for inv, _ in extra],
            "done_index": [(d or inv)["index"] for inv, d in extra],
            "inv_row": [-1] * len(extra), "done_row": [-1] * len(extra),
        }
        order = np.argsort(np.concatenate([parts["inv_index"],
                                           np.array(more["inv_index"], dtype=np.int64)]),
                           kind="stable")
        parts = {k: np.concatenate([v, np.array(more[k], dtype=v.dtype)])[order]
                 for k, v in parts.items()}
        n = len(inv_rows)
        where = np.flatnonzero(order >= n)
        placed = {k: extra[j - n] for k, j in zip(where.tolist(), order[where].tolist(),
                                                  strict=True)}
    return PairArrays(cols, parts, fs, placed)


def is_arrays(client_pairs: Any) -> bool:
    return isinstance(client_pairs, PairArrays)


def write_times(p: PairArrays, history: Any) -> dict[int, tuple[int, int, int]]:
    """:func:`.model.write_times` of the pairs: seq -> (invoke us, completion us, process) of
    each completed write whose completion's value holds an int ``seq`` (the last such write
    of a seq wins, as in the walk)."""
    from harness.core.run_history import BOOL, INT

    cols = history.clients
    write = p.fs.index("write") if "write" in p.fs else -1
    ks = np.flatnonzero((p.f == write) & p.done)
    if not len(ks):
        return {}
    found: list[tuple[int, Any]] = []  # (pair, seq)
    in_cols = ks[p.inv_row[ks] >= 0]
    rows = p.done_row[in_cols]
    for kind, cast in ((INT, int), (BOOL, bool)):
        seq, has = cols.value_of("seq", kind)
        mine = has[rows]
        found.extend(zip(in_cols[mine].tolist(), map(cast, seq[rows[mine]].tolist()),
                         strict=True))
    for k in ks.tolist():
        got = p.extra.get(k)
        if got is not None and got[1] is not None:
            value = got[1].get("value")
            if isinstance(value, dict) and isinstance(value.get("seq"), int):
                found.append((k, value["seq"]))
    found.sort(key=lambda x: x[0])
    out: dict[int, tuple[int, int, int]] = {}
    for k, seq in found:
        out[seq] = (p.inv_time.item(k) // 1000, p.done_time.item(k) // 1000,
                    p.process.item(k))
    return out


class IndexTimes:
    """:func:`.model.index_times` of the pairs as a lookup (no dict of every op): history
    index -> (invoke us, completion us, process) of the pair it belongs to."""

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
    """:func:`.sampling.lane_density` of the pairs."""
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
    ca = np.minimum(cols - 1, (a[drawn] / width).astype(np.int64))
    cb = np.minimum(cols - 1, (b[drawn] / width).astype(np.int64)) + 1
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

    @classmethod
    def of(cls, rows: list[tuple[str, int, int, int]]) -> Rows:
        """Rows of (f, invoked ns, completed ns, outcome) tuples (pairs of dicts)."""
        self = cls.__new__(cls)
        fs = list(dict.fromkeys(f for f, _, _, _ in rows))
        code = {f: i for i, f in enumerate(fs)}
        self.fs = fs
        self.f = np.array([code[f] for f, _, _, _ in rows], dtype=np.int64)
        self.a, self.b = (np.array([r[k] for r in rows] or np.zeros(0, np.int64))
                          for k in (1, 2))  # (ints as int64; a float time, float64)
        self.outcome = np.array([r[3] for r in rows], dtype=np.int64)
        return self

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
