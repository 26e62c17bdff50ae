"""A history as the linearizability checker sees it: each operation paired with its outcome
(:class:`Call`), the ops a model describes, split by the independent object they work on.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence

from checker.lives import crash_of, refuse_after_crash
from checker.models import Model, OpView, freeze, refused_not_held
from harness.core.history import FAIL, INFO, INVOKE, NEMESIS, OK, Op

TYPE_CHECKING = False  # see harness/core/history.py
if TYPE_CHECKING:
    from typing import Any

    from harness.core.columns import Columns

_NO_OUTCOME: dict[str, Any] = {"type": "info"}  # replaced before anyone reads it


class Call:
    """One operation as the search sees it: invocation, outcome and real-time window (ns).

    ``known``: it completed ok, or failed in a way the model counts as an event (``refused``:
    a release refused, "not the holder"); otherwise its outcome is unknown (``info``, or it
    never completed), ``end`` is None and ``completion`` a minimal ``{"type": "info",
    "process": p, "f": f}`` (see checker.models)."""

    __slots__ = ("ckey", "comp", "completion", "end", "f", "inv", "known", "process", "refused",
                 "seq", "start", "value")

    def __init__(self, inv: Op, f: str, start: int, seq: int, process: Any) -> None:
        self.inv = inv
        self.f = f
        self.value = inv.get("value")
        self.start = start
        self.seq = seq  # position of the invocation in the history, to break ties
        self.process = process
        self.comp: Op | None = None
        self.known = False
        self.refused = False
        self.end: int | None = None
        self.completion: dict[str, Any] = _NO_OUTCOME
        self.ckey: tuple[Any, ...]  # set by the search (checker.wgl.Part) for its own calls

    def unknown_outcome(self) -> None:
        self.completion = {"type": "info", "process": self.process, "f": self.f}

    def __repr__(self) -> str:
        return f"Call({self.process!r} {self.f} {self.value!r} {self.start}..{self.end})"

    @property
    def index(self) -> int:
        idx = self.inv.get("index")
        return idx if type(idx) is int else self.seq  # (not a bool, nor anything else)

    def view(self) -> OpView:
        done = self.comp
        token = (done or {}).get("token", self.inv.get("token"))
        return OpView(
            index=self.index,
            process=self.process,
            f=self.f,
            value=self.value,
            output=done.get("value") if (done is not None and self.known) else None,
            type=str(done["type"]) if (done is not None and self.known) else "info",
            invoked=self.start,
            completed=self.end,
            token=token,
        )


class Prepared:
    """The history split into parts, and what was left out of the check and why."""

    def __init__(self, parts: dict[Hashable, list[Call]]) -> None:
        self.parts = parts
        self.failed = 0
        self.ignored: dict[str, int] = {}
        self.unmatched = 0


def partition_key(inv: Op, comp: Op | None) -> Hashable:
    """The independent object an op works on: its ``lock``, else its ``key`` (None: one part)."""
    for op in (inv, comp):
        if op is None:
            continue
        for name in ("lock", "key"):
            value = op.get(name)
            if value is not None:
                return value if type(value) is str else freeze(value)
    return None


def prepare(history: Sequence[Op], model: Model) -> Prepared:
    """Pair invocations with completions and split them by lock; drop fails and nemesis ops.

    One pass: an op is added to its part when it completes (or when its process invokes
    another, or at the end, if it never does), so each process's ops are in its own order.

    A process that crashed (:func:`checker.lives.crash_of`) ends its life holding nothing: in
    every part it took part in, a release of unknown outcome is invoked at its crash, after
    its last op, so the model may free a lock it held, but no earlier than the crash.

    (A history in columns is paired as arrays instead: :class:`Paired`.)"""
    prepared = Prepared(parts={})
    parts = prepared.parts
    fs = model.fs
    understood = model.understood_failure
    ignored = prepared.ignored
    opened: dict[Any, Op] = {}  # each process's open invocation
    opened_at: dict[Any, int] = {}  # and its position

    def add(inv: Op, seq: int, comp: Op | None, known: bool) -> None:
        f = inv["f"]
        if f not in fs:
            ignored[f] = ignored.get(f, 0) + 1
            return
        t = inv["time"]
        c = Call(inv, f, t if type(t) is int else int(t), seq, inv["process"])
        c.comp = comp
        if known:
            assert comp is not None
            c.known = True
            c.refused = comp["type"] == FAIL
            c.completion = comp
            t = comp["time"]
            if type(t) is not int:
                t = int(t)
            c.end = t if t > c.start else c.start
        else:
            c.unknown_outcome()
        key = inv.get("lock")
        if type(key) is not str:  # the usual case is a lock name on the invocation
            key = partition_key(inv, comp)
        part = parts.get(key)
        if part is None:
            parts[key] = [c]
        else:
            part.append(c)

    crashes: dict[Any, int] = {}
    seq = -1
    for op in history:
        p = op.get("process")
        if p == NEMESIS:
            for q in crash_of(op):
                crashes.setdefault(q, op["time"])
            continue
        seq += 1
        ctype = op["type"]
        if ctype == INVOKE:
            prior = opened.get(p)
            if prior is not None:  # it never completed: its process went on
                add(prior, opened_at[p], None, False)
            opened[p] = op
            opened_at[p] = seq
            continue
        inv = opened.pop(p, None)
        if inv is None:
            prepared.unmatched += 1
            continue
        if ctype == FAIL:
            f = inv["f"]
            if understood is None or not understood(op if op.get("f") == f else {**op, "f": f}):
                prepared.failed += 1  # it certainly did not happen: nothing to place
                continue
        # A failure the model understands (a release refused: "not the holder") happened,
        # with that outcome, within its window: it is placed like an ok op.
        add(inv, opened_at[p], op, ctype in (OK, FAIL))
    for p, inv in opened.items():
        add(inv, opened_at[p], None, False)
    if crashes and "release" in fs:
        _release_at_crashes(parts, crashes, seq)
    return prepared


def _release_at_crashes(parts: dict[Hashable, list[Call]], crashes: dict[Any, int], seq: int
                        ) -> None:
    """Each crashed process's last word in each of its parts: a release of unknown outcome,
    invoked at its crash (checker.lives: a process has one life; its locks end with it)."""
    n = 0
    for key, calls in list(parts.items()):
        last: dict[Any, Call] = {}
        for c in calls:
            if c.process in crashes:
                last[c.process] = c
        for p, c in sorted(last.items(), key=lambda pc: pc[1].seq):
            crash = crashes[p]
            refuse_after_crash(c.inv, c.start, crash)
            if c.comp is not None:
                refuse_after_crash(c.comp, c.comp["time"], crash)
            seq += 1
            n += 1  # a negative index: no op of the history has it
            inv = {"index": -n, "process": p, "type": INVOKE, "f": "release", "time": crash,
                   "value": None, "crashed": True}
            if isinstance(key, str):
                inv["lock"] = key
            release = Call(inv, "release", int(crash), seq, p)
            release.unknown_outcome()
            calls.append(release)


# ---------------------------------------------------------------------------------------------
# A history in columns (harness.core.columns): the same pairing, by array operations, and
# calls that make their ops into dicts only when asked


class RowCall(Call):
    """A :class:`Call` of a history in columns: its invocation and completion are rows, read
    a field at a time (:class:`harness.core.columns.Row`) when read."""

    __slots__ = ("_cols", "_crow", "_irow")

    @property  # type: ignore[override]
    def inv(self) -> Op:
        return self._cols.row(self._irow)  # type: ignore[return-value]

    @property  # type: ignore[override]
    def comp(self) -> Op | None:
        return None if self._crow < 0 else self._cols.row(self._crow)  # type: ignore[return-value]

    @property  # type: ignore[override]
    def completion(self) -> dict[str, Any]:
        if self.known:
            return self._cols.row(self._crow)  # type: ignore[return-value]
        return {"type": "info", "process": self.process, "f": self.f}

    @property
    def index(self) -> int:
        return self._cols.index.item(self._irow)


class RunRowCall(RowCall):
    """A :class:`RowCall` of columns with every field
    (:class:`harness.core.columns.Columns` of a run's ops, whose rows read every field as
    the op has it): its value the invocation's, read when asked."""

    __slots__ = ()

    @property  # type: ignore[override]
    def value(self) -> Any:
        return self._cols.op(self._irow).get("value")


class Paired:
    """The calls of a well-formed history in columns, as arrays, in the order :func:`prepare`
    adds them (at their completion, then those never completed, by invocation): the rows of
    invocation and completion (-1: none), whether the outcome is known, refused, the window
    (``end``: the completion's time, not before ``start``; meaningless when not known), the f
    and lock codes and the process; and the counts :class:`Prepared` keeps."""

    def __init__(self, cols: Columns, model: Model, full: bool = False) -> None:
        """``full``: the columns hold every field of the ops
        (a run's ops, not only plain ones: a row's
        :meth:`~harness.core.columns.Columns.op` is the op, which the model's
        ``understood_failure`` reads, as :func:`prepare` gives it)."""
        import numpy as np

        from harness.core.columns import TYPE_CODES

        self.cols = cols
        self.full = full
        n = len(cols)
        order = cols.by_process(keep=False)  # (nothing after this needs it)
        p = cols.process[order]
        inv_k = np.flatnonzero(cols.type[order] == TYPE_CODES[INVOKE])
        completed = np.zeros(len(inv_k), dtype=bool)
        nxt = inv_k + 1
        inside = nxt < n
        completed[inside] = p[nxt[inside]] == p[inv_k[inside]]
        del p
        inv_rows = order[inv_k]
        comp_rows = np.full(len(inv_k), -1, dtype=np.int64)
        comp_rows[completed] = order[nxt[completed]]
        del order, inv_k, nxt, inside
        ctype = np.full(len(inv_rows), TYPE_CODES[INFO], dtype=np.uint8)
        ctype[completed] = cols.type[comp_rows[completed]]
        keep = np.ones(len(inv_rows), dtype=bool)
        fails = np.flatnonzero(ctype == TYPE_CODES[FAIL])
        self.failed = 0
        if len(fails):
            understood = model.understood_failure
            op = cols.op
            if understood is None or (not full and understood is refused_not_held):
                ok = np.zeros(len(fails), dtype=bool)  # (a row of columns has no error field)
            else:
                ok = np.fromiter((understood(op(r)) for r in comp_rows[fails].tolist()), bool,
                                 len(fails))
            keep[fails[~ok]] = False
            self.failed = int((~ok).sum())
        f_codes = cols.f[inv_rows]
        in_model = np.array([name in model.fs for name in cols.fs], dtype=bool)
        self.ignored: dict[str, int] = {}
        # (the codes present, in order: a count of each small code, not a sort)
        for code in np.flatnonzero(np.bincount(f_codes[keep & ~in_model[f_codes]])).tolist():
            self.ignored[cols.fs[code]] = int((f_codes[keep] == code).sum())
        wanted = keep & in_model[f_codes]
        del keep, f_codes
        at = np.where(completed, comp_rows, n + inv_rows)[wanted]
        # By ``at`` (each a different row, or n + one: told apart without a sort).
        rank = np.full(2 * n, -1, dtype=np.int32 if n < 1 << 30 else np.int64)
        rank[at] = np.arange(len(at), dtype=rank.dtype)
        sel = np.flatnonzero(wanted)[rank[rank >= 0]]
        del at, wanted, completed, rank
        self.irow = inv_rows[sel]
        self.crow = comp_rows[sel]
        ctype = ctype[sel]
        self.known = (ctype == TYPE_CODES[OK]) | (ctype == TYPE_CODES[FAIL])
        self.refused = ctype == TYPE_CODES[FAIL]
        self.start = cols.time[self.irow]
        self.end = np.maximum(cols.time[np.maximum(self.crow, 0)], self.start)
        self.f = cols.f[self.irow]
        self.process = cols.process[self.irow]
        self.lock = cols.lock[self.irow]

    def parts(self) -> dict[Hashable, Any]:
        """Each part's key (its lock; None: none) and its calls' positions here, in order."""
        import numpy as np

        from harness.core.columns import LOCK_NULL

        codes = np.where(self.lock > LOCK_NULL, self.lock, LOCK_NULL)
        out: dict[Hashable, Any] = {}
        present = np.flatnonzero(np.bincount(codes))  # (as np.unique: small codes, no sort)
        if len(present) == 1:
            out[self.cols.locks[int(present[0])]] = np.arange(len(codes))
            return out
        first = {int(c): int(np.argmax(codes == c)) for c in present}  # the dict's order:
        for c in sorted(first, key=first.__getitem__):  # by each part's first call
            out[self.cols.locks[c]] = np.flatnonzero(codes == c)
        return out

    def calls(self, rows: Any) -> list[Call]:
        """The calls at ``rows`` (positions here), as objects (:class:`RowCall`)."""
        full = self.full
        row_call = RunRowCall if full else RowCall  # (ops made of these columns: every field)
        cols = self.cols
        names = cols.fs
        ints: dict[int, int] = {}  # one int object per process
        share = ints.setdefault
        out: list[Call] = []
        add = out.append
        for i, c_row, f, t, e, k, refused, proc in zip(
                self.irow[rows].tolist(), self.crow[rows].tolist(), self.f[rows].tolist(),
                self.start[rows].tolist(), self.end[rows].tolist(), self.known[rows].tolist(),
                self.refused[rows].tolist(), self.process[rows].tolist(), strict=True):
            c = row_call.__new__(row_call)
            c._cols = cols
            c._irow = i
            c._crow = c_row
            c.f = names[f]
            if not full:
                c.value = None
            c.start = t
            c.seq = i
            c.process = share(proc, proc)
            c.known = k
            c.refused = refused
            c.end = e if k else None
            add(c)
        return out

    def index(self, rows: Any) -> Any:
        """The index of each call at ``rows`` (:attr:`Call.index`), as an array."""
        return self.cols.index[self.irow[rows]]


class CallRows(Sequence[Call]):
    """A part's calls held as positions in :class:`Paired`, each made an object when read
    (a valid part decided over the arrays needs none)."""

    def __init__(self, paired: Paired, rows: Any) -> None:
        self.paired = paired
        self.rows = rows
        self.unknown = int(len(rows) - paired.known[rows].sum())

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return self.paired.calls(self.rows[i])
        return self.paired.calls(self.rows[i:i + 1] if i >= 0 else self.rows[i:][:1])[0]

    def __iter__(self) -> Iterator[Call]:
        return iter(self.paired.calls(self.rows))
