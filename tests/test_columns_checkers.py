"""Each checker, view and run-level rule says exactly the same of a history held in columns
(:func:`harness.core.run_history.merged_columns`) as of the same ops as dicts: equal results,
listed items in the same order, the same error on a history it refuses."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checker.column_pairs import ColumnPairs
from checker.linearizable import LinearizableChecker
from checker.lives import Lives
from checker.mutex import MutexChecker
from checker.sessions import (
    client_pairs,
    count_types,
    final_read,
    grants,
    horizon,
    resource_log,
    writes_in_lock_transaction,
)
from checker.stats import StatsChecker
from harness.controller.checking import _tested, _untested, check_history
from harness.core.checks import Shared
from harness.core.history import HistoryError
from harness.core.run_history import ColumnHistory, merged_columns

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(-1, 10),
                    st.sampled_from(["", "x", "timeout"]))


@st.composite
def histories(draw: Any, well_formed: bool = True) -> list[dict[str, Any]]:
    """Lock and mutex histories of 1-4 clients: acquires with sessions, validities and
    timeouts (some not durations), releases refused or lost, writes with seqs and kinds (in a
    transaction or not), errors (timeouts or not), tokens, several locks or none, pending
    calls, nemesis ops (crashes of clients among them), and now and then a final read (a
    list: the process after the clients), a client whose value no column holds, or (not
    ``well_formed``) an op out of place."""
    ops: list[dict[str, Any]] = []
    t = draw(st.integers(0, 5))
    n = draw(st.integers(1, 4))
    open_: dict[int, tuple[str, Any]] = {}
    crashed: set[int] = set()
    session = [0] * n
    seq = 0
    locks = draw(st.sampled_from([["lock"], ["a", "b"], [None], ["lock", None]]))
    for _ in range(draw(st.integers(0, 40))):
        t += draw(st.integers(0, 3))
        if draw(st.integers(0, 11)) == 0:
            op: dict[str, Any] = {"time": t, "process": "nemesis", "type": "info",
                                  "f": draw(st.sampled_from(["pause", "crash-client"]))}
            if draw(st.booleans()):
                victim = draw(st.integers(0, n - 1))
                op["targets"] = [f"c{victim}"]
                op["detail"] = {"crashed": True}
                if well_formed:
                    crashed.add(victim)
            ops.append(op)
            continue
        p = draw(st.integers(0, n - 1))
        if p in crashed:
            continue
        op = {"time": t, "process": p}
        if p in open_ and draw(st.integers(0, 6)):
            f, lock = open_.pop(p)
            kind = draw(st.sampled_from(["ok", "ok", "fail", "info"]))
            op |= {"type": kind, "f": f}
            if f == "acquire" and kind == "ok":
                session[p] += 1
                op["value"] = draw(st.one_of(
                    st.just(None), st.fixed_dictionaries(
                        {"session": st.just(session[p]),
                         "validity": st.one_of(st.none(), st.floats(0, 3), st.integers(0, 3),
                                               st.booleans())})))
                if draw(st.booleans()):
                    op["token"] = draw(st.integers(0, 100))
            elif f == "write":
                seq += 1
                op["value"] = draw(st.one_of(st.just(None), st.just({}), st.fixed_dictionaries(
                    {"seq": st.just(seq), "session": st.just(session[p]),
                     "kind": st.sampled_from(["set", "read", "incr"])})))
            else:
                op["value"] = draw(st.one_of(st.none(), st.fixed_dictionaries(
                    {"session": st.just(session[p])})))
            if kind != "ok" and draw(st.booleans()):
                op["error"] = draw(st.sampled_from(
                    ["timed out", "not held", "ConnectionError: refused", "", "Timeout x"]))
            if lock is not ...:
                op["lock"] = lock
        else:
            if p in open_:
                if well_formed:
                    continue
                open_.pop(p)  # an invoke before the last completed
            f = draw(st.sampled_from(["acquire", "acquire", "release", "write"]))
            lock = draw(st.sampled_from([*locks, ...]))
            open_[p] = (f, lock)
            op |= {"type": "invoke", "f": f}
            if f == "acquire":
                op["value"] = draw(st.one_of(st.none(), st.fixed_dictionaries(
                    {"timeout": st.one_of(st.floats(0.001, 5), st.integers(1, 3),
                                          st.just(0.5))})))
                if not well_formed and draw(st.integers(0, 9)) == 0:
                    op["value"] = {"timeout": draw(st.sampled_from([-1.0, "x", True]))}
            elif f == "write":
                op["value"] = draw(st.one_of(st.none(), st.fixed_dictionaries(
                    {"session": st.just(session[p]),
                     "in_lock_tx": st.one_of(st.booleans(), st.just(1))})))
                if draw(st.booleans()):
                    op["token"] = draw(st.integers(0, 100))
            else:
                op["value"] = draw(st.one_of(st.none(), st.fixed_dictionaries(
                    {"session": st.just(session[p])})))
            if lock is not ...:
                op["lock"] = lock
        if p == n - 1 and n > 1 and draw(st.integers(0, 19)) == 0:
            op["value"] = [1]  # no column holds it: this process's ops stay dicts
        ops.append(op)
    if not well_formed and ops and draw(st.booleans()):
        i = draw(st.integers(0, len(ops) - 1))
        bad = dict(ops[i])
        bad["time"] = ops[-1]["time"] + 1
        if type(bad["process"]) is int:
            bad["type"] = draw(st.sampled_from(["ok", "invoke"]))
        ops.append(bad)
    if draw(st.booleans()):  # the final read: the resource's log
        t = (ops[-1]["time"] if ops else 0) + 1
        log = [{"seq": i + 1, "process": draw(st.integers(0, n - 1)),
                "session": draw(st.integers(0, 3)), "kind": "set",
                "token": None, "accepted": draw(st.booleans()), "lock": "lock"}
               for i in range(draw(st.integers(0, 4)))]
        ops.append({"time": t, "process": n, "type": "invoke", "f": "read", "value": None})
        if draw(st.integers(0, 4)):
            ops.append({"time": t + 1, "process": n, "type": "ok", "f": "read", "value": log})
    return [{"index": i, **op} for i, op in enumerate(ops)]


def outcome(fn: Any, *args: Any) -> Any:
    """What ``fn`` returns, or the exception it raises (its type and words)."""
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001 (the same error both ways is what is compared)
        return ("raised", type(e).__name__, str(e))


def both(ops: list[dict[str, Any]]) -> tuple[Shared, ColumnHistory] | None:
    h = merged_columns(copy.deepcopy(ops))
    return None if h is None else (Shared(ops), h)


def grant_rows(gs: list[Any]) -> list[tuple[Any, ...]]:
    return [(g.process, g.session, g.lock, g.invoke, g.start, g.end, g.token, g.validity,
             g.release, g.ops, g.crashed, type(g.validity), type(g.session))
            for g in gs]


def lives_view(lives: Lives) -> Any:
    return (lives.horizon, lives.crashes, grant_rows(lives.grants),
            [repr(a) + repr(a.timeout) for a in lives.attempts], lives.pending,
            [lives.overdue(a) for a in lives.attempts], lives.locks(), lives.holders())


def views(h: Any) -> dict[str, Any]:
    return {
        "pairs": outcome(lambda: list(client_pairs(h))),
        "grants": outcome(lambda: grant_rows(grants(h))),
        "horizon": outcome(horizon, h),
        "counts": outcome(lambda: json.dumps(count_types(h))),
        "final": outcome(final_read, h),
        "tx": outcome(writes_in_lock_transaction, h),
        "log": outcome(lambda: resource_log(h)),
        "lives": outcome(lambda: lives_view(Lives.of(h))),
        "lives-timed": outcome(lambda: lives_view(Lives.of(h, acquire_timeout=1.0))),
        "tested": outcome(_tested, h),
        "untested": outcome(_untested, h),
    }


def checks(h: Any) -> dict[str, Any]:
    return {
        "mutex": outcome(lambda: json.dumps(MutexChecker.check(h), sort_keys=False)),
        "mutex-info": outcome(lambda: json.dumps(MutexChecker.check(
            h, overlaps_informational=True))),
        "stats": outcome(lambda: json.dumps(StatsChecker.check(h))),
        "linearizable": outcome(lambda: json.dumps(LinearizableChecker.check(h))),
        "linearizable-fenced": outcome(lambda: json.dumps(LinearizableChecker.check(
            h, model="fenced-mutex"))),
    }


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_views_and_checkers_on_columns_are_those_on_dicts(ops: list[dict[str, Any]]) -> None:
    got = both(ops)
    if got is None:
        return
    dicts, cols = got
    assert views(cols) == views(dicts)
    assert checks(cols) == checks(dicts)
