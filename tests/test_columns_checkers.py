"""Each checker, view and run-level rule says exactly the same of a history held in columns
(:func:`harness.core.run_history.merged_columns`) as of the same ops as dicts: equal results,
listed items in the same order, the same error on a history it refuses."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checker.column_pairs import ColumnPairs
from checker.fencing import FencingChecker
from checker.idempotent import IdempotentChecker
from checker.linearizable import LinearizableChecker
from checker.liveness import LivenessChecker
from checker.lives import Lives
from checker.lost_updates import LostUpdatesChecker
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
from harness.controller.checking import _tested, _untested, check_history, exit_code
from harness.core.checks import Shared
from harness.core.history import HistoryError
from harness.core.history_file import read_history
from harness.core.run_history import ColumnHistory, merged_columns
from tests.harness_runs import run

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
    # (one kind of each field a history: a field of two kinds in a process keeps its ops
    # dicts, which the draws reach now and then all the same)
    validities = draw(st.sampled_from([st.none(), st.floats(0, 3), st.integers(0, 3),
                                       st.booleans(), SCALARS]))
    timeouts = draw(st.sampled_from([st.floats(0.001, 5), st.integers(1, 3), st.just(0.5)]))
    in_tx = draw(st.sampled_from([st.booleans(), st.just(1), st.just(True)]))
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
                         "validity": validities})))
                if draw(st.booleans()):
                    op["token"] = draw(st.integers(0, 100))
            elif f == "write":
                seq += 1
                op["value"] = draw(st.one_of(st.just(None), st.just({}), st.fixed_dictionaries(
                    {"seq": st.just(seq), "session": st.just(session[p]),
                     "kind": st.sampled_from(["set", "read", "increment"])})))
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
                    {"timeout": timeouts})))
                if not well_formed and draw(st.integers(0, 9)) == 0:
                    op["value"] = {"timeout": draw(st.sampled_from([-1.0, "x", True]))}
            elif f == "write":
                op["value"] = draw(st.one_of(st.none(), st.fixed_dictionaries(
                    {"session": st.just(session[p]), "in_lock_tx": in_tx,
                     "key": st.sampled_from(["k1", "k2"]), "amount": st.integers(1, 3),
                     "attempt": st.integers(1, 2),
                     "kind": st.sampled_from(["set", "increment"])})))
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
    if draw(st.integers(0, 3)) == 0:  # the clients stopped, those in a call killed
        killed: Any = sorted(p for p in open_ if p not in crashed)
        if not well_formed and draw(st.booleans()):
            killed = draw(st.sampled_from([[-1], "0", [True]]))
        ops.append({"time": (ops[-1]["time"] if ops else 0) + 1, "process": "nemesis",
                    "type": "info", "f": "stop-clients", "value": "end",
                    "detail": {"killed": killed}})
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
    except (ValueError, KeyError, TypeError, AttributeError, HistoryError) as e:  # (both ways)
        return ("raised", type(e).__name__, str(e))


def both(ops: list[dict[str, Any]]) -> tuple[Shared, ColumnHistory] | None:
    h = merged_columns(copy.deepcopy(ops))
    return None if h is None else (Shared(ops), h)


def grant_rows(gs: list[Any]) -> list[tuple[Any, ...]]:
    return [(g.process, g.session, g.lock, g.invoke, g.start, g.end, g.token, g.validity,
             g.release, g.ops, g.crashed, type(g.validity), type(g.session))
            for g in gs]


def lives_view(lives: Lives) -> Any:
    return (lives.horizon, lives.crashes, lives.stopped, lives.killed, grant_rows(lives.grants),
            [repr(a) + repr(a.timeout) for a in lives.attempts], lives.pending,
            [lives.overdue(a) for a in lives.attempts], lives.locks(), lives.holders())


def views(h: Any) -> dict[str, Any]:
    return {
        "pairs": outcome(lambda: list(client_pairs(h))),
        "pairs-indexed": outcome(lambda: [client_pairs(h)[i] for i in range(
            -len(client_pairs(h)), len(client_pairs(h)))]),
        "pairs-sliced": outcome(lambda: client_pairs(h)[1::2]),
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
        "fencing": outcome(lambda: json.dumps(FencingChecker.check(h))),
        "idempotent": outcome(lambda: json.dumps(IdempotentChecker.check(h))),
        "lost-updates": outcome(lambda: json.dumps(LostUpdatesChecker.check(h))),
        "liveness": outcome(lambda: json.dumps(LivenessChecker.check(h))),
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


class _Entry:
    def __init__(self, name: str) -> None:
        self.name = name


RUN_CHECKS = [(_Entry("mutex"), MutexChecker.check, {}),
              (_Entry("linearizable"), LinearizableChecker.check, {"model": "mutex"}),
              (_Entry("stats"), StatsChecker.check, {})]


def verdict(h: Any, status: str = "complete") -> Any:
    return outcome(lambda: json.dumps(check_history(h, {}, status=status, checks=RUN_CHECKS)))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(well_formed=False), st.sampled_from(["complete", "killed"]))
def test_the_run_level_rules_on_columns_are_those_on_dicts(ops: list[dict[str, Any]],
                                                           status: str) -> None:
    """Malformed histories refused with the same words, the rest judged alike (a tested
    run, a run that tested nothing, a client that never had an answer)."""
    got = both(ops)
    if got is None:
        return
    dicts, cols = got
    assert verdict(cols, status) == verdict(dicts, status)
    assert views(cols) == views(dicts)


def test_a_malformed_history_in_columns_is_refused_in_the_same_words() -> None:
    ops = [{"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "acquire",
            "lock": "lock"},
           {"index": 1, "time": 2, "process": 0, "type": "invoke", "f": "release",
            "lock": "lock"}]
    h = merged_columns(ops)
    assert isinstance(h, ColumnHistory)
    with pytest.raises(HistoryError) as want:
        check_history(Shared(ops), {}, checks=RUN_CHECKS)
    with pytest.raises(HistoryError) as got:
        check_history(h, {}, checks=RUN_CHECKS)
    assert str(got.value) == str(want.value)
    assert "invoke before the last completed" in str(got.value)


def test_a_client_that_never_had_an_answer_is_told_from_columns() -> None:
    ops: list[dict[str, Any]] = []
    for k in range(4):
        ops += [{"time": 10 * k, "process": 0, "type": "invoke", "f": "acquire"},
                {"time": 10 * k + 1, "process": 0, "type": "ok", "f": "acquire"},
                {"time": 10 * k + 2, "process": 0, "type": "invoke", "f": "release"},
                {"time": 10 * k + 3, "process": 0, "type": "ok", "f": "release"},
                {"time": 10 * k + 4, "process": 1, "type": "invoke", "f": "acquire"},
                {"time": 10 * k + 5, "process": 1, "type": "info", "f": "acquire",
                 "error": "ConnectionError: refused"}]
    ops = [{"index": i, **op} for i, op in enumerate(ops)]
    h = merged_columns(ops)
    assert isinstance(h, ColumnHistory) and not h.others
    result = check_history(h, {}, checks=RUN_CHECKS)
    assert result == check_history(Shared(ops), {}, checks=RUN_CHECKS)
    assert result["valid"] == "unknown"
    assert "client(s) 1 never had an answer: all 4 of their requests failed" in result[
        "could-not-test"]
    assert isinstance(client_pairs(h), ColumnPairs)


needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None,
                                 reason="needs redis-server (harness setup)")


@pytest.mark.servers
@needs_redis
@pytest.mark.parametrize(("workload", "nemesis"), [("lock", "none"), ("lock", "pause"),
                                                   ("mutex", "none"), ("mutex", "pause"),
                                                   ("mutex", "crash-client")])
def test_a_real_runs_history_is_judged_alike_in_columns(store: Path, workload: str,
                                                        nemesis: str) -> None:
    """A real run's history (the lock workload's acquires and releases, the mutex
    workload's writes and its final read; a pause: overlaps, a witness), read back and held
    in columns, gets the verdict, the views and every checker's result the dicts get."""
    code, results, run_dir, out = run(store, "--workload", workload, "--nemesis", nemesis,
                                "--hold", "0", "--think", "0", "--time-limit", "5")
    assert results and code == exit_code(results), out  # (the test is the comparison)
    ops = read_history(run_dir / "history.jsonl")
    got = both(ops)
    assert got is not None
    dicts, cols = got
    assert isinstance(client_pairs(cols), ColumnPairs)
    if workload == "mutex":
        assert final_read(cols) is not None and cols.others  # the final read: a dict
    if nemesis == "crash-client":  # the crash: a nemesis op, the crashed client's ops in columns
        assert Lives.of(cols).crashes and Lives.of(cols).crashes == Lives.of(dicts).crashes
    assert verdict(cols) == verdict(dicts)
    assert views(cols) == views(dicts)
    assert checks(cols) == checks(dicts)


CRASHES = ("AttributeError", "TypeError", "KeyError")  # a checker's crash: unknown, any words


def _normal(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _normal(v) for k, v in x.items()}
    if isinstance(x, tuple) and len(x) == 3 and x[0] == "raised" and x[1] in CRASHES:
        return ("raised", "a crash")
    return x


def _digest(x: Any) -> str:
    import hashlib

    return hashlib.sha256(repr(_normal(x)).encode()).hexdigest()[:16]


ORACLE = Path(__file__).parent / "data" / "columns_oracle.jsonl"


def test_the_one_path_gives_what_the_dict_path_gave() -> None:
    """The views, checkers and run-level rules on 238 histories drawn by :func:`histories`
    (seeds 42 and 43; as a list of dicts, and in a run's columns) give what the dict path gave
    them at fc2df38, before it went: the digests of its results, refusals' words included (a
    crash is a crash, whatever its words), are the oracle."""
    for n, line in enumerate(ORACLE.read_text().splitlines()):
        row = json.loads(line)
        for h in (Shared(copy.deepcopy(row["ops"])), merged_columns(copy.deepcopy(row["ops"]))):
            if "views" in row:
                assert (_digest(views(h)), _digest(checks(h))) == (row["views"], row["checks"]), n
            else:
                assert _digest(verdict(h, row["status"])) == row["verdict"], n


def test_any_history_is_put_in_columns_at_the_one_entry() -> None:
    """A list of dicts without indexes: its places, no index made up in an op; a value no
    scalar column holds, held as it is; an op no column can hold, refused in words."""
    from checker.column_pairs import as_columns

    ops: list[dict[str, Any]] = [
        {"time": 1, "process": 0, "type": "invoke", "f": "write", "value": {"seq": 1}},
        {"time": 2, "process": "nemesis", "type": "info", "f": "pause"},
        {"time": 3, "process": 0, "type": "ok", "f": "write", "value": [1, {"a": 2}]}]
    h = as_columns(ops)
    assert h.clients.index.tolist() == [0, 2] and h.others == [ops[1]]
    assert h.clients.ops() == [ops[0], ops[2]] and h.clients.op(1) == ops[2]
    assert list(client_pairs(ops)) == [(ops[0], ops[2])]
    with pytest.raises(HistoryError, match="lock no string nor null"):
        as_columns([{**ops[0], "lock": 3}])
