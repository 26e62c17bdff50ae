"""A merged history held in columns gives back the ops it was made from: equal key for key,
in the same order, of the same types; pairs as :func:`pairs` (the walk over dicts the
checkers read before the columns were their one path) pairs, a malformed history's too."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.history import INVOKE, Op
from harness.core.run_history import ColumnHistory, columns_of, merged_columns, pair_rows


def pairs(history: Iterable[Op], *, clients: bool = False) -> Iterator[tuple[Op, Op | None]]:
    """Each invocation with its completion (None when the process never completed it);
    ``clients``: of the client processes' ops only (an int ``process``).

    Handed a malformed history, it takes an invoke followed by a second as never completed,
    and a completion of nothing invoked as its own invocation and completion.
    """
    open_: dict[Any, int] = {}  # each process's open invocation, by its place in invs (a newer
    invs: list[Op] = []         # one replaces it: the earlier one stays uncompleted)
    comps: list[Op | None] = []
    add_inv, add_comp, close = invs.append, comps.append, open_.pop
    for op in history:
        if clients:
            p = op.get("process")
            if not isinstance(p, int):
                continue
        else:
            p = op["process"]
        if op["type"] == INVOKE:
            open_[p] = len(invs)
            add_inv(op)
            add_comp(None)
        else:
            where = close(p, None)
            if where is not None:
                comps[where] = op
                continue
            # A completion with no invocation (a nemesis info, say): pair it with itself.
            add_inv(op)
            add_comp(op)
    return zip(invs, comps, strict=True)


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=5))
VALUES = st.one_of(st.none(), st.dictionaries(st.sampled_from(["session", "timeout", "x"]),
                                              SCALARS, max_size=3))


@st.composite
def histories(draw: Any) -> list[dict[str, Any]]:
    """Well-formed client histories of 1-3 processes with flat values and extra fields, and
    now and then a nemesis op or a value no column holds (a list)."""
    ops: list[dict[str, Any]] = []
    t = 0
    open_: dict[int, str] = {}
    for _ in range(draw(st.integers(0, 30))):
        t += draw(st.integers(0, 3))
        if draw(st.integers(0, 9)) == 0:
            ops.append({"time": t, "process": "nemesis", "type": "info", "f": "pause",
                        "value": "start"})
            continue
        p = draw(st.integers(0, 2))
        op: dict[str, Any] = {"time": t, "process": p}
        if p in open_:
            op |= {"type": draw(st.sampled_from(["ok", "fail", "info"])), "f": open_.pop(p)}
        else:
            open_[p] = draw(st.sampled_from(["acquire", "release"]))
            op |= {"type": "invoke", "f": open_[p]}
        op["value"] = draw(st.one_of(VALUES, st.just([1]))) if p == 2 else draw(VALUES)
        if draw(st.booleans()):
            op["lock"] = draw(st.sampled_from(["lock", "other", None]))
        if draw(st.integers(0, 4)) == 0:
            op["error"] = draw(st.text(max_size=4))
        ops.append(op)
    return [{"index": i, **op} for i, op in enumerate(ops)]


@settings(max_examples=300, deadline=None)
@given(histories())
def test_a_history_in_columns_gives_back_its_ops_and_pairs(ops: list[dict[str, Any]]) -> None:
    h = merged_columns(ops)
    if h is None:  # no client process fits
        return
    assert isinstance(h, ColumnHistory) and len(h) == len(ops)
    assert [orjson.dumps(op) for op in h] == [orjson.dumps(op) for op in ops]
    for block in (1, 2, 5):  # made a block of client rows at a time, the others in place
        assert [orjson.dumps(op) for op in h.iterate(block)] == [orjson.dumps(op) for op in ops]
    assert [orjson.dumps(h[i]) for i in range(len(ops))] == [orjson.dumps(op) for op in ops]
    in_cols = [op for op in ops if type(op["process"]) is int
               and all(o["index"] != op["index"] for o in h.others)]
    inv, done = h.client_pairs()
    want = [(a["index"], None if b is None else b["index"])
            for a, b in pairs(in_cols, clients=True)]
    got = [(int(h.clients.index[i]), None if j < 0 else int(h.clients.index[j]))
           for i, j in zip(inv.tolist(), done.tolist(), strict=True)]
    assert got == want


def test_what_no_column_holds_is_refused() -> None:
    base = {"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "acquire"}
    assert columns_of([{**base, "value": [1]}]) is None
    assert columns_of([{**base, "value": {"state": {}}}]) is None
    assert columns_of([{**base, "token": 1}, {**base, "index": 1, "token": 1.5}]) is None
    assert columns_of([{**base, "value": {"x": 2**64}}]) is None
    assert columns_of([{**base, "value": {"x": 1}}]) is not None


@settings(max_examples=100, deadline=None)
@given(histories())
def test_a_row_reads_every_field_as_the_op_has_it(ops: list[dict[str, Any]]) -> None:
    """A row (what a call of the linearizability check reads) is the op: its value, its
    error, and a lock absent (KeyError) told from a lock null."""
    h = merged_columns(ops)
    if h is None:
        return
    by_index = {op["index"]: op for op in ops}
    for i in range(len(h.clients)):
        row, op = h.clients.row(i), by_index[int(h.clients.index[i])]
        assert dict(row) == op
        for key in ("value", "lock", "error", "time", "f"):
            assert row.get(key, "absent") == op.get(key, "absent")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["invoke", "ok", "info"]),
                          st.integers(0, 2)), max_size=30))
def test_the_rows_pair_a_malformed_history_as_the_walk_over_dicts(
        drawn: list[tuple[int, str, int]]) -> None:
    """Two invokes in a row, a completion of nothing, times that go back in a process."""
    ops = [{"index": i, "time": t, "process": p, "type": ty, "f": "acquire"}
           for i, (p, ty, t) in enumerate(drawn)]
    cols = columns_of(ops)
    assert cols is not None
    inv, done = pair_rows(cols)
    got = [(i, None if j < 0 else j) for i, j in zip(inv.tolist(), done.tolist(), strict=True)]
    assert got == [(a["index"], None if b is None else b["index"]) for a, b in pairs(ops)]
