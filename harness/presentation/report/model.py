"""The data behind report.html: a compact, JSON-able model of one run, built from its history
and results (pure: no I/O, no clock).

The page is drawn in the browser from this model, so the model is what decides whether a report
of a long run stays small and responsive:

- op pairs are stored column-wise, times in integer microseconds, invoke times delta-encoded,
  details as indexes into a table of distinct strings (about 36 bytes an op pair);
- a long history is not embedded op by op: :mod:`.sampling` keeps the pairs near violations and
  fault boundaries and draws the rest as density, so the page stays small for any run length;
- the charts' figures (:mod:`.charts`) are computed here from every op, so they stay exact
  whatever is embedded;
- every violation a checker lists is listed, numbered, placed and reachable (the checkers
  list up to :data:`checker.base.MAX_LISTED` of a kind, far more than a run's faults make;
  the count beside them stays the checker's): the drawing thins, never the list;
- what else grows with a run is bounded: the hover
  details of embedded ops share :data:`TEXT_CHARS` characters (those nearest a violation or a
  fault boundary first), at most :data:`MAX_REJECTED` rejected writes are drawn one by one;
  every fault window is kept exact.

Violations are found generically: any list of dicts with an ``"explanation"`` in a checker's
result, and any ``"witness"`` dict, so a new checker shows up in the report without changes here.
Their place on the timeline comes from the keys they carry (``from``/``until``, grants'
``acquired``/``released``, resource ``seq``/``seqs``, history indexes in ``ops``/``blocked``...).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from checker.base import MAX_LISTED
from checker.lives import Lives
from checker.sessions import Grant, resource_log
from harness.core.checks import derive
from harness.core.history import FAIL, INFO, OK, Op
from harness.core.history_parts import last_time, nemesis_ops
from harness.presentation.report import charts, pair_arrays, sampling
from harness.presentation.report.narrative import nemesis_of
from harness.presentation.report.words import inline

DETAIL_CHARS = 160
LISTED_PER_KIND = MAX_LISTED  # violations of one kind listed (of a plugin's too)
TEXT_CHARS = 150_000  # the embedded ops' distinct hover details, in all
MAX_REJECTED = 4000  # rejected writes drawn one by one (the first ones)
TYPE_CODES = {OK: 0, FAIL: 1, INFO: 2}  # 3: never completed
SECOND_KEYS = ("from", "until", "acquired", "released", "invoked_s", "completed_s", "at",
               "time_s")
INDEX_KEYS = ("ops", "blocked", "concurrent", "index")
SKIP_KEYS = frozenset({"prefix", "explanation", "linearization", "concurrent_ops"})


def us(ns: int) -> int:
    return ns // 1000


@dataclass(frozen=True)
class Grounds:
    """What the model and the incidents both stand on, worked out once from the history (the
    client op pairs and the grants cost a pass over every op each)."""

    client_pairs: pair_arrays.PairArrays
    grants: list[Grant]
    places: Places


def grounds(history: Sequence[Op]) -> Grounds:
    """The grounds of ``history``, worked out once for a shared history
    (:func:`harness.core.checks.derive`: the summary's incidents and the report read the
    same); the client op pairs and the grants are the checkers' own
    (:meth:`checker.lives.Lives.of`), built once for them and for the report."""
    return derive(history, grounds, lambda: _grounds(history))


def _grounds(history: Sequence[Op]) -> Grounds:
    lives = Lives.of(history)
    client_pairs = pair_arrays.of(history)  # its pairs as arrays: no dict of each op
    return Grounds(client_pairs, lives.grants, Places(client_pairs, lives.grants))


def build(spec: dict[str, Any], history: Sequence[Op], results: dict[str, Any],
          given: Grounds | None = None, max_pairs: int | None = None) -> dict[str, Any]:
    """Everything the page's script draws, JSON-able (at most ``max_pairs`` op pairs embedded
    one by one; default :data:`.sampling.MAX_PAIRS`)."""
    end_ns = last_time(history)
    clients = int(spec.get("clients") or 0)
    g = given or grounds(history)
    client_pairs, gs, places = g.client_pairs, g.grants, g.places
    lanes = client_pairs.lanes()
    lane_of = {p: i for i, p in enumerate(lanes)}
    writes = places.writes
    violations = list(find_violations(results, places))
    faults = fault_windows(history, end_ns)
    keep, rule, radius = sampling.sample(client_pairs, violations, faults, us(end_ns),
                                         max_pairs)
    ops, sampled = encode_ops(client_pairs, lane_of, keep, rule,
                              sampling.focus(violations, faults), us(end_ns))
    spans, density = lock_spans(gs, lane_of), None
    rows = charts.workload_rows(client_pairs)
    if keep is not None:
        density = sampling.lane_density(client_pairs, lane_of, keep, us(end_ns))
        spans, density["held"] = sampling.thin_spans(
            spans, sampling.focus(violations, faults), radius, us(end_ns), len(lanes))
    return {
        "end": us(end_ns),
        "lanes": [lane_label(p, clients) for p in lanes],
        "laneProcs": lanes,
        "ops": ops,
        "sampling": sampled,
        "density": density,
        "spans": spans,
        "rejected": rejected_writes(history, writes, lane_of),
        "faults": faults,
        "faultRows": max([1, *(w["row"] + 1 for w in faults)]),
        "violations": violations,
        "series": charts.series(rows, end_ns),
        "latencyGrid": None if keep is None else charts.latency_grid(rows, end_ns),
        "total": len(history),
    }


def believed_grants(history: Sequence[Op]) -> list[Grant]:
    """The grants as the checkers see them (:class:`checker.lives.Lives`): a crashed holder's
    bar ends at its crash, not at the end of the history."""
    return Lives.of(history).grants


def lane_label(process: int, clients: int) -> str:
    if clients and process >= clients:
        return f"p{process} (final read)"
    return f"p{process}"


# ops ----------------------------------------------------------------------------------------------
def detail(inv: Op, done: Op | None) -> str:
    """A short line for the hover: value, token, error. Long values (the final read) are cut."""
    src = done if done is not None else inv
    value = src.get("value")
    if value is None:
        value = inv.get("value")
    text = "" if value is None else inline(value, DETAIL_CHARS)
    parts = [text] if text else []
    token = src.get("token", inv.get("token"))
    if token is not None:
        parts.append(f"token {token}")
    if src.get("error"):
        parts.append(f"error: {str(src['error'])[:DETAIL_CHARS]}")
    return " · ".join(parts)


def encode_ops(client_pairs: pair_arrays.PairArrays, lane_of: dict[int, int],
               keep: list[bool] | None, rule: str,
               around: Sequence[tuple[int, int]] = (), end_us: int = 0
               ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The embedded pairs (all, or those ``keep`` says: see :mod:`.sampling`) column-wise;
    their hover details within :data:`TEXT_CHARS` (see :func:`detail_texts`)."""
    fs: list[str] = []
    f_idx: dict[str, int] = {}
    cols: dict[str, list[int]] = {"lane": [], "t": [], "d": [], "ty": [], "f": [], "x": [],
                                  "i": []}
    kept = client_pairs.pairs(keep)  # dicts of the embedded pairs only
    texts, cols["x"], cut = detail_texts(kept, around, end_us)
    last = last_index = 0
    for inv, done in kept:
        start = us(inv["time"])
        f = inv["f"]
        if f not in f_idx:
            f_idx[f] = len(fs)
            fs.append(f)
        cols["lane"].append(lane_of[inv["process"]])
        cols["t"].append(start - last)
        last = start
        cols["d"].append(-1 if done is None else us(done["time"]) - start)
        cols["ty"].append(3 if done is None else TYPE_CODES.get(done["type"], 2))
        cols["f"].append(f_idx[f])
        index = int(inv.get("index", -1))
        cols["i"].append(index - last_index)  # delta-encoded too
        last_index = index
    total = len(client_pairs)
    embedded = len(cols["t"])
    sampling = {"pairs": total, "embedded": embedded, "decimated": embedded < total,
                "rule": rule, "detailsCut": cut}
    return {**cols, "fs": fs, "texts": texts}, sampling


def detail_texts(kept: Sequence[tuple[Op, Op | None]], around: Sequence[tuple[int, int]],
                 end_us: int) -> tuple[list[str], list[int], int]:
    """The distinct hover details of the embedded pairs, each pair's index into them (-1: its
    detail is not embedded), and how many pairs lost theirs. Past :data:`TEXT_CHARS`
    characters in all (a long run's values are mostly distinct: sessions, tokens), the
    details nearest the focus (``around``, :func:`.sampling.focus`) are kept, then the
    earliest."""
    texts: list[str] = []
    t_idx: dict[str, int] = {}
    x: list[int] = []
    chars = 0
    for inv, done in kept:
        text = detail(inv, done)
        k = t_idx.get(text)
        if k is None:
            k = t_idx[text] = len(texts)
            texts.append(text)
            chars += len(text) + 3  # its quotes and comma in the page's JSON
        x.append(k)
    if chars <= TEXT_CHARS:
        return texts, x, 0
    dist = sampling.distances(kept, around, end_us) if around else [0.0] * len(kept)
    nearest = [float("inf")] * len(texts)
    for k, d in zip(x, dist, strict=True):
        if d < nearest[k]:
            nearest[k] = d
    budget, renumber = TEXT_CHARS, [-1] * len(texts)
    out: list[str] = []
    for k in sorted(range(len(texts)), key=lambda k: (nearest[k], k)):
        budget -= len(texts[k]) + 3
        if budget < 0:
            break
        renumber[k] = len(out)
        out.append(texts[k])
    xs = [renumber[k] for k in x]
    return out, xs, sum(1 for k in xs if k < 0)


# lock spans, faults ------------------------------------------------------------------------------
def lock_spans(gs: list[Grant], lane_of: dict[int, int]) -> dict[str, list[int]]:
    """From an acquire's ok to the same process's next release invoke (-1: held to the end);
    the grants are the checkers' own (``checker.sessions.grants``), so the page shows exactly
    what they judged."""
    rows = [(lane_of[g.process], g.start // 1000, -1 if g.end is None else g.end // 1000,
             -1 if g.token is None else int(g.token)) for g in gs if g.process in lane_of]
    lanes, s, e, tok = (list(x) for x in zip(*rows, strict=True)) if rows else ([], [], [], [])
    return {"lane": lanes, "s": s, "e": e, "tok": tok}


def rejected_writes(history: Sequence[Op], writes: dict[int, tuple[int, int, int]],
                    lane_of: dict[int, int]) -> dict[str, Any]:
    """The writes the resource refused (a stale token: what fencing is for), in the resource's
    own order (``checker.sessions.resource_log``, the fencing checker's), each placed on its
    client's lane when its write completed: the first :data:`MAX_REJECTED` of them (``total``:
    how many there are)."""
    out: dict[str, Any] = {"lane": [], "t": [], "seq": [], "tok": [], "total": 0}
    entries, _unknown = resource_log(history)
    for entry in entries:
        if entry.accepted or entry.kind == "read" or entry.seq not in writes:
            continue
        out["total"] += 1
        if out["total"] > MAX_REJECTED:
            continue
        _inv, done, process = writes[entry.seq]
        if process not in lane_of:
            continue
        out["lane"].append(lane_of[process])
        out["t"].append(done)
        out["seq"].append(entry.seq)
        out["tok"].append(-1 if not isinstance(entry.token, int) else entry.token)
    return out


def fault_label(f: str, targets: list[str], params: Any, detail: Any = None) -> str:
    """What a fault lane says of a window: what the fault did, in its own class's words when it
    has them (a clock's ``+60 s wall jump``), else what it was asked to do; and whom it hit,
    in its class's words when it has them (a partition's sides: ``n1,n2 | n3 (majority |
    minority)``)."""
    named = getattr(nemesis_of(f), "lane_targets", None)
    who = (named(targets, detail) if callable(named) else None) or (
        ",".join(targets) if len(targets) <= 4 else f"{targets[0]}…{targets[-1]} ({len(targets)})")
    words = getattr(nemesis_of(f), "label", None)
    asked = params if isinstance(params, dict) else {}
    if callable(words):
        return f"{words(asked, detail)} · {who}".strip(" ·")
    text = f"{f} {who}".strip()
    if asked:
        text += " (" + ", ".join(f"{k}={v}" for k, v in asked.items()) + ")"
    return text


def used_params(f: str, params: Any) -> Any:
    """The parameters a fault used, as its nemesis declares them (a clock jump's, not the
    clock-rate its options default to); all of them when it is not installed here."""
    used = getattr(nemesis_of(f), "used", None)
    return used(params) if callable(used) and isinstance(params, dict) else params


def fault_rows(windows: list[dict[str, Any]]) -> int:
    """Give each window a row of the fault lanes so that windows on at once (a background
    condition under other faults) never share one; the number of rows."""
    ends: list[int] = []
    for w in sorted(windows, key=lambda w: (not w.get("background"), w["start"])):
        row = next((i for i, e in enumerate(ends) if e <= w["start"]), len(ends))
        if row == len(ends):
            ends.append(0)
        ends[row] = max(w["stop"], w["start"] + 1)
        w["row"] = row
    return max(1, len(ends))


def fault_windows(history: Sequence[Op], end_ns: int) -> list[dict[str, Any]]:
    """Nemesis ops as windows: from when a fault took effect (its start's info, as in
    :func:`.narrative.fault_runs`) to its stop's info (or the heal, or the end).

    A start whose info carries an error is kept, marked failed: the fault was attempted. Each
    window says what the fault was asked to do (its parameters), which schedule step it was,
    whom it aimed at and missed before it struck (``missed``, from ``aimed`` us), and gets a
    lane row.
    """
    out: list[dict[str, Any]] = []
    open_: dict[str, dict[str, Any]] = {}
    begun: dict[str, int] = {}
    for op in nemesis_ops(history):
        f, value, t = str(op["f"]), op.get("value"), op["time"]
        if op["type"] == "invoke":
            if value == "start":
                begun[f] = t
            continue
        if value == "start":
            targets = [str(x) for x in op.get("targets") or []]
            detail = op.get("detail")
            missed = [str(x) for x in (detail.get("missed") or [])
                      ] if isinstance(detail, dict) else []
            w = {"f": f, "targets": targets, "start": us(t), "stop": None,
                 "error": op.get("error"), "detail": detail, "step": op.get("step"),
                 "params": used_params(f, op.get("params")),
                 "background": bool(op.get("background")),
                 "label": fault_label(f, targets, op.get("params"), detail)
                 + (f" (missed {','.join(missed)})" if missed else ""),
                 "colour": getattr(nemesis_of(f), "colour", None)}
            aimed = begun.pop(f, t)
            if missed:
                w.update(missed=missed, aimed=us(aimed))
            out.append(w)
            if op.get("error"):
                w["stop"] = w["start"]
            else:
                open_[f] = w
        elif value in ("stop", "heal") and f in open_:
            w = open_.pop(f)
            w["stop"] = us(t)
            if value == "heal":
                w["healed"] = True
    for w in out:
        if w["stop"] is None:
            w["stop"] = us(end_ns)
            w["open"] = True
    fault_rows(out)
    return out


# violations ---------------------------------------------------------------------------------------
def grant_times(gs: list[Grant]) -> dict[tuple[int, Any], list[tuple[int, int]]]:
    """(process, token) -> [(acquired us, released us)], to place token violations."""
    out: dict[tuple[int, Any], list[tuple[int, int]]] = {}
    for g in gs:
        if g.token is not None:
            end = g.start if g.end is None else g.end
            out.setdefault((g.process, g.token), []).append((us(g.start), us(end)))
    return out


class Places:
    """Where things are in time, by the names checkers use for them; each table is built from
    the client op pairs and the grants when first asked for (a run without violations never
    needs the table of every op)."""

    __slots__ = ("_grants", "_gs", "_ops", "_pairs", "_writes")

    def __init__(self, client_pairs: Any, gs: list[Grant]) -> None:
        self._pairs, self._gs = client_pairs, gs
        self._writes: dict[int, tuple[int, int, int]] | None = None
        self._ops: Any = None
        self._grants: dict[tuple[int, Any], list[tuple[int, int]]] | None = None

    @property
    def writes(self) -> dict[int, tuple[int, int, int]]:
        """Resource seq -> write (invoke, done, process)."""
        if self._writes is None:
            self._writes = pair_arrays.write_times(self._pairs)
        return self._writes

    @property
    def ops(self) -> Any:
        """History index -> op (invoke, done, process): a dict, or of pair arrays a lookup
        (:class:`.pair_arrays.IndexTimes`)."""
        if self._ops is None:
            self._ops = pair_arrays.IndexTimes(self._pairs)
        return self._ops

    @property
    def grants(self) -> dict[tuple[int, Any], list[tuple[int, int]]]:
        """(process, token) -> grants."""
        if self._grants is None:
            self._grants = grant_times(self._gs)
        return self._grants

    def granted(self) -> list[tuple[Grant, int | None]]:
        """Each grant, with when its release was answered (us; None: not released)."""
        return [(g, self.ops[g.ops[-1]][1] if g.release is not None and len(g.ops) > 1
                 else None) for g in self._gs]


@dataclass(frozen=True)
class Explained:
    """One explained item of a checker's result, numbered as the report lists it (from 1)."""

    n: int
    check: str
    kind: str
    item: dict[str, Any]
    rank: int
    total: int
    info: bool  # the checker says it does not break the property
    check_valid: Any  # the verdict of the check that listed it


def explained_items(results: dict[str, Any]) -> Iterator[Explained]:
    """Every explained item, in checker order, numbered. Items of a check that judged itself
    valid (or of a list it flags ``<kind>-informational``) are informational: the checker
    says they do not break the property (lock overlaps under fencing, say)."""
    n = 1  # the number the page shows, and its anchors' (#v-1, #violation-1)
    for check, result in (results.get("checks") or {}).items():
        if not isinstance(result, dict):
            continue
        for kind, item, rank, total in explained(result):
            info = (result.get("valid") is True or result.get("withdrawn") is True
                    or result.get(f"{kind}-informational") is True)
            yield Explained(n, check, kind, item, rank, total, info, result.get("valid"))
            n += 1


def find_violations(results: dict[str, Any], places: Places) -> Iterator[dict[str, Any]]:
    """Every explained item, in checker order, placed on the timeline."""
    for x in explained_items(results):
        yield {"n": x.n, "check": x.check, "kind": x.kind, "rank": x.rank, "total": x.total,
               "info": x.info, "explanation": str(x.item.get("explanation", "")),
               **locate(x.item, places)}


def places_of(history: Sequence[Op]) -> Places:
    """Where writes, ops and grants are in time (what :func:`locate` needs)."""
    return grounds(history).places


def explained(result: dict[str, Any], depth: int = 0) -> Iterator[tuple[str, dict[str, Any],
                                                                         int, int]]:
    """(kind, item, rank within kind, how many the checker counted) for every explained item."""
    for key, value in result.items():
        if key == "witness" and isinstance(value, dict):
            yield key, value, 0, 1
        elif isinstance(value, list):
            items = [i for i in value if isinstance(i, dict) and "explanation" in i]
            count = result.get(f"{key.rstrip('s')}-count")
            total = count if isinstance(count, int) and count >= len(items) else len(items)
            for rank, item in enumerate(items[:LISTED_PER_KIND]):  # the count stays exact
                yield key, item, rank, total
        elif isinstance(value, dict) and depth < 2:
            yield from explained(value, depth + 1)


def locate(item: dict[str, Any], places: Places) -> dict[str, Any]:
    """Where a violation is on the timeline: its core span (t0, t1), the wider context span that
    shows its whole story (c0, c1), and the processes involved. Times in microseconds."""
    writes, by_index = places.writes, places.ops
    times: list[int] = []
    procs: list[Any] = []
    times.extend(t for span in token_grants(item, places) for t in span)
    for key, value in walk(item):
        if key in SECOND_KEYS and isinstance(value, int | float) and not isinstance(value, bool):
            times.append(round(value * 1e6))
        elif key in ("seq", "seqs"):
            for s in value if isinstance(value, list) else [value]:
                if isinstance(s, int) and s in writes:
                    a, b, p = writes[s]
                    times.extend((a, b))
                    procs.append(p)
        elif key in INDEX_KEYS:
            for i in value if isinstance(value, list) else [value]:
                if isinstance(i, int) and i in by_index:
                    a, b, p = by_index[i]
                    times.extend((a, b))
                    procs.append(p)
        elif key in ("process", "processes"):
            procs.extend(value if isinstance(value, list) else [value])
    named = item.get("processes")
    if isinstance(named, list) and named:  # the item says whose story it is (a witness's
        procs = named  # conflict: not every process with an op concurrent to it)
    out: dict[str, Any] = {"procs": sorted({p for p in procs if isinstance(p, int)})}
    if not times:
        out.update(t0=None, t1=None, c0=None, c1=None)
        return out
    c0, c1 = min(times), max(times)
    t0, t1 = core(item, places) or (c0, c1)
    out.update(t0=t0, t1=max(t0, t1), c0=min(c0, t0), c1=max(c1, t1))
    return out


def token_grants(item: dict[str, Any], places: Places) -> list[tuple[int, int]]:
    """The grants a token violation names: ``processes`` with one ``token`` (the same token
    twice) or with ``tokens`` (pairwise: a later grant got a lower token)."""
    procs, token, tokens = item.get("processes"), item.get("token"), item.get("tokens")
    if not isinstance(procs, list) or (token is None and not isinstance(tokens, list)):
        return []
    pairs_ = zip(procs, tokens, strict=False) if isinstance(tokens, list) else (
        (p, token) for p in procs)
    out: list[tuple[int, int]] = []
    after = -1
    for p, t in pairs_:  # in the order named: each grant the first one after the previous
        spans = places.grants.get((p, t), [])
        later = [span for span in spans if span[0] > after]
        if later or spans:
            out.append((later or spans)[0])
            after = out[-1][0]
    return out


def core(item: dict[str, Any], places: Places) -> tuple[int, int] | None:
    """The moment the violation happened, when the item says which part of its story that is:
    ``from``/``until`` (overlaps), the middle of three ``seqs`` (the write that intruded between
    two others), the ``blocked`` op of a witness (the op no order can explain), the later of
    two grants a token violation names (when the wrong token was handed out)."""
    writes, by_index = places.writes, places.ops
    if isinstance(item.get("from"), int | float):
        until = item.get("until", item["from"])
        return round(item["from"] * 1e6), round((until if until is not None else 0) * 1e6)
    seqs = item.get("seqs")
    if isinstance(seqs, list) and len(seqs) == 3 and seqs[1] in writes:
        a, b, _p = writes[seqs[1]]
        return a, b
    blocked = item.get("blocked")
    if isinstance(blocked, list) and blocked and blocked[0] in by_index:
        a, b, _p = by_index[blocked[0]]
        return a, b
    spans = token_grants(item, places)
    if len(spans) >= 2:
        a = max(start for start, _ in spans)
        return a, a
    return None


def walk(value: Any, depth: int = 0) -> Iterator[tuple[str, Any]]:
    if depth > 3 or not isinstance(value, dict):
        return
    for k, v in value.items():
        if k in SKIP_KEYS:
            continue
        yield k, v
        if isinstance(v, dict):
            yield from walk(v, depth + 1)
