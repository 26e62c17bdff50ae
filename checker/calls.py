"""A history as the linearizability checker sees it: each operation paired with its outcome
(:class:`Call`), the ops a model describes, split by the independent object they work on.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from checker.models import Model, OpView, freeze
from harness.core.history import FAIL, INVOKE, NEMESIS, OK, Op, indexed_pairs


class Call:
    """One operation as the search sees it: invocation, outcome and real-time window (ns)."""

    __slots__ = ("ckey", "comp", "completion", "end", "f", "inv", "known", "process", "seq",
                 "start", "value")

    def __init__(self, inv: Op, comp: Op | None, known: bool, f: str, value: Any,
                 completion: dict[str, Any], start: int, end: int | None, seq: int,
                 process: Any) -> None:
        self.inv = inv
        self.comp = comp
        self.known = known  # completed ok (or failed as the model understands); else unknown
        self.f = f
        self.value = value
        self.completion = completion
        self.start = start
        self.end = end
        self.seq = seq  # position of the invocation in the history, to break ties
        self.process = process
        self.ckey: tuple[Any, ...]  # set by the search (checker.wgl.Part) for its own calls

    def __repr__(self) -> str:
        return f"Call({self.process!r} {self.f} {self.value!r} {self.start}..{self.end})"

    @property
    def index(self) -> int:
        idx = self.inv.get("index")
        return idx if isinstance(idx, int) and not isinstance(idx, bool) else self.seq

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
            if op.get(name) is not None:
                return freeze(op[name])
    return None


def prepare(history: Sequence[Op], model: Model) -> Prepared:
    """Pair invocations with completions and split them by lock; drop fails and nemesis ops."""
    prepared = Prepared(parts={})
    for seq, inv, comp in indexed_pairs(op for op in history if op.get("process") != NEMESIS):
        if inv.get("type") != INVOKE:
            prepared.unmatched += 1
            continue
        f = inv["f"]
        failed = comp is not None and comp.get("type") == FAIL
        if failed and (model.understood_failure is None
                       or not model.understood_failure({**comp, "f": f})):
            prepared.failed += 1  # it certainly did not happen: nothing to place
            continue
        if f not in model.fs:
            prepared.ignored[f] = prepared.ignored.get(f, 0) + 1
            continue
        # A failure the model understands (a release refused: "not the holder") happened,
        # with that outcome, within its window: it is placed like an ok op.
        known = comp is not None and comp.get("type") in (OK, FAIL)
        process = inv["process"]
        start = int(inv["time"])
        call = Call(
            inv=inv,
            comp=comp,
            known=known,
            f=f,
            value=inv.get("value"),
            completion=comp if (known and comp is not None)
            else {"type": "info", "process": process, "f": f},
            start=start,
            end=max(int(comp["time"]), start) if (known and comp is not None) else None,
            seq=seq,
            process=process,
        )
        prepared.parts.setdefault(partition_key(inv, comp), []).append(call)
    return prepared
