"""One life per client process (checker.lives): every checker reads who held which lock when
from it. A generator that knows the truth it made (grants, releases, crashes, acquires left
pending) holds the model and each checker's view to it; hand-built histories pin the cases of
issue 24 (a crashed holder, an acquire blocked past its timeout) and the refusals."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checker import availability, fencing, linearizable, liveness, mutex, stats
from checker.lives import Lives
from harness.core.history import Op
from tests.harness_runs import harness, history, run

REPO = Path(__file__).resolve().parents[1]

MS = 1_000_000
S = 1000 * MS
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
Truth = list[tuple[str, int, int, int]]  # (lock, process, from, until): every grant


# a generator that knows the truth -------------------------------------------------------------
@st.composite
def lives_histories(draw: st.DrawFn) -> tuple[list[Op], Truth]:
    """Processes acquire and release locks (one or several), get ok, fail or info, crash (a
    nemesis record), or stay blocked in an acquire to the end. Returns the history and every
    grant with the end the generator gave it: the release's invocation, the crash, or the end
    of the history."""
    n_proc = draw(st.integers(2, 5))
    locks = ["lock", "other"][: draw(st.integers(1, 2))]
    ops: list[Op] = []
    state: dict[int, tuple[str, Any]] = dict.fromkeys(range(n_proc), ("idle", None))
    grants: list[list[Any]] = []  # [lock, process, from, until or None]
    holder: dict[str, int | None] = dict.fromkeys(locks, None)
    t = 0

    def op(p: int | str, type_: str, f: str, lock: str | None = None, value: Any = None,
           **extra: Any) -> None:
        o: Op = {"time": t, "process": p, "type": type_, "f": f, "value": value, **extra}
        if lock is not None:
            o["lock"] = lock
        ops.append(o)

    for _ in range(draw(st.integers(1, 40))):
        alive = [p for p, (s, _) in state.items() if s not in ("dead", "blocked")]
        if not alive:
            break
        p = draw(st.sampled_from(alive))
        t += draw(st.integers(1, 400)) * MS
        kind, arg = state[p]
        if draw(st.integers(0, 9)) == 0:  # a crash, whatever it was doing
            op("nemesis", "info", "crash-client", value="start", targets=[f"c{p}"],
               detail={"step": "holding", "crashed": True})
            if kind == "holding":
                grants[arg][3] = t
                if holder[grants[arg][0]] == p:
                    holder[grants[arg][0]] = None
            state[p] = ("dead", None)
        elif kind == "idle":
            lock = draw(st.sampled_from(locks))
            timeout = draw(st.sampled_from([None, 1.0, 5.0]))
            op(p, "invoke", "acquire", lock, None if timeout is None else {"timeout": timeout})
            state[p] = ("acquiring", lock)
        elif kind == "acquiring":
            busy = holder[arg] is not None
            outcome = draw(st.sampled_from(
                ["fail", "fail", "fail", "info", "ok", "never"] if busy else
                ["ok", "ok", "ok", "fail", "info", "never"]))
            if outcome == "never":
                state[p] = ("blocked", arg)  # in its acquire to the end
            elif outcome == "ok":
                op(p, "ok", "acquire", arg, {"session": len(grants), "validity": 2.0})
                grants.append([arg, p, t, None])
                holder[arg] = p
                state[p] = ("holding", len(grants) - 1)
            else:
                op(p, outcome, "acquire", arg)
                state[p] = ("idle", None)
        elif kind == "holding":
            lock = grants[arg][0]
            op(p, "invoke", "release", lock)
            grants[arg][3] = t
            if holder[lock] == p:
                holder[lock] = None
            state[p] = ("releasing", lock)
        elif kind == "releasing":
            op(p, draw(st.sampled_from(["ok", "ok", "info"])), "release", arg)
            state[p] = ("idle", None)
    history = [{"index": i, **o} for i, o in enumerate(ops)]
    end = max((o["time"] for o in history), default=0)
    truth = sorted((g[0], g[1], g[2], end if g[3] is None else g[3]) for g in grants)
    return history, truth


def overlapping_pairs(truth: Truth, end: int) -> int:
    """Pairs of grants of one lock that were believed held at once (brute force). A grant held
    to the ``end`` of the history is held past it: one granted at that instant overlaps it (each
    op of the generator has a time of its own, so nothing else ends at ``end``)."""
    rows = sorted(truth, key=lambda g: (g[0], g[2], g[1]))
    return sum(1 for i, a in enumerate(rows) for b in rows[i + 1:]
               if a[0] == b[0] and b[2] < (math.inf if a[3] == end else a[3]))


def held_seconds(truth: Truth, lock: str) -> float:
    """The union of one lock's grants, by merging (not checker.intervals)."""
    total, reach = 0, -1
    for a, b in sorted((g[2], g[3]) for g in truth if g[0] == lock):
        if b <= reach:
            continue
        total += b - max(a, reach)
        reach = b
    return round(total / S, 3)


@SETTINGS
@given(lives_histories())
def test_every_checker_sees_the_grants_the_history_made(case: tuple[list[Op], Truth]) -> None:
    history, truth = case
    lives = Lives(history)
    assert lives.holders() == truth
    pairs = overlapping_pairs(truth, lives.horizon)
    result = mutex.MutexChecker.check(history)
    assert result["lock-overlap-count"] == pairs
    assert result["valid"] is (pairs == 0)
    lin = linearizable.check(history, "mutex")
    if lin["ops"]:  # else nothing to check: unknown
        assert lin["valid"] is (pairs == 0), lin.get("witness")
    avail = availability.AvailabilityChecker.check(history)
    for lock in {g[0] for g in truth}:
        assert avail["locks"][lock]["held-s"] == held_seconds(truth, lock)
    crashed = {o["targets"][0] for o in history if o["process"] == "nemesis"}
    assert stats.StatsChecker.check(history)["crashed-processes"] == len(crashed)
    live = liveness.LivenessChecker.check(history)
    for stuck in live["stuck-locks"]:
        ends = [g[3] for g in truth if g[0] == stuck["lock"]]
        if ends:
            assert stuck["free-since"] == round(max(ends) / S, 3)
    fenced = fencing.FencingChecker.check(history)
    assert fenced["token-order-violation-count"] == 0  # no tokens: nothing to order


# hand-built histories: issue 24's cases --------------------------------------------------------
def hist(*rows: tuple[Any, ...]) -> list[Op]:
    """(seconds, process, type, f[, value[, extra]]) rows; a crash is (s, "crash", p)."""
    out: list[Op] = []
    for row in rows:
        t = round(row[0] * S)
        if row[1] == "crash":
            out.append({"time": t, "process": "nemesis", "type": "info", "f": "crash-client",
                        "value": "start", "targets": [f"c{row[2]}"],
                        "detail": {"step": "holding", "crashed": True}})
            continue
        o: Op = {"time": t, "process": row[1], "type": row[2], "f": row[3],
                 "value": row[4] if len(row) > 4 else None, "lock": "lock"}
        o.update(row[5] if len(row) > 5 else {})
        out.append(o)
    return [{"index": i, **o} for i, o in enumerate(out)]


GRANT = {"session": 1, "validity": 2.0}
CRASHED_HOLDER = hist(
    (4.300, 4, "invoke", "acquire", {"timeout": 5.0}), (4.353, 4, "ok", "acquire", GRANT),
    (4.373, "crash", 4),  # killed holding it (crash-client, crash-step=holding)
    (5.000, 1, "invoke", "acquire", {"timeout": 5.0}), (6.363, 1, "ok", "acquire", GRANT),
    (6.500, 1, "invoke", "release"), (6.510, 1, "ok", "release"),
)


def test_a_crashed_holder_then_another_grant_is_valid() -> None:
    """Issue 24 case 1: the dead holder's grant ends at its crash, for every checker."""
    result = mutex.MutexChecker.check(CRASHED_HOLDER)
    assert result["valid"] is True and result["lock-overlap-count"] == 0
    for model in ("mutex", "fenced-mutex"):
        assert linearizable.check(CRASHED_HOLDER, model)["valid"] is True
    assert linearizable.LinearizableChecker.check(CRASHED_HOLDER)["valid"] is True
    assert Lives(CRASHED_HOLDER).holders() == [("lock", 1, 6363 * MS, 6500 * MS),
                                                ("lock", 4, 4353 * MS, 4373 * MS)]
    assert liveness.LivenessChecker.check(CRASHED_HOLDER)["valid"] is True


def test_a_grant_before_the_crash_still_overlaps() -> None:
    """The same grant to process 1 while process 4 was still alive: INVALID for both."""
    h = hist(
        (4.300, 4, "invoke", "acquire"), (4.353, 4, "ok", "acquire", GRANT),
        (4.360, 1, "invoke", "acquire"), (4.365, 1, "ok", "acquire", GRANT),
        (4.373, "crash", 4),
    )
    result = mutex.MutexChecker.check(h)
    assert result["valid"] is False and result["lock-overlap-count"] == 1
    assert "crashed at 4.37 s" in result["lock-overlaps"][0]["explanation"]
    assert linearizable.check(h, "mutex")["valid"] is False


def test_a_holder_that_did_not_crash_overlapping_is_invalid() -> None:
    """The crash record names another process: process 4 held on, and 1 was granted."""
    h = [({**o, "targets": ["c2"]} if o["process"] == "nemesis" else o)
         for o in CRASHED_HOLDER]
    result = mutex.MutexChecker.check(h)
    assert result["valid"] is False and result["lock-overlap-count"] == 1
    assert result["lock-overlaps"][0]["processes"] == [4, 1]
    assert linearizable.check(h, "mutex")["valid"] is False
    assert linearizable.LinearizableChecker.check(h)["valid"] is False


def test_a_crash_that_ended_nothing_never_let_the_holder_re_acquire() -> None:
    """A crash frees a dead process's lock, not a live one's: process 4 crashed while 1 held
    the lock, and 2 was granted before 1 released: still an overlap."""
    h = hist(
        (1.0, 1, "invoke", "acquire"), (1.1, 1, "ok", "acquire", GRANT),
        (1.2, 4, "invoke", "acquire"), (1.3, "crash", 4),
        (1.4, 2, "invoke", "acquire"), (1.5, 2, "ok", "acquire", GRANT),
        (2.0, 1, "invoke", "release"), (2.1, 1, "ok", "release"),
    )
    assert mutex.MutexChecker.check(h)["lock-overlap-count"] == 1
    assert linearizable.check(h, "mutex")["valid"] is False


def blocked_forever(timeout: float | None) -> list[Op]:
    """Issue 24 case 2: one grant and release, then three clients in acquires that never
    return, to 41 s, with no fault at all."""
    value = None if timeout is None else {"timeout": timeout}
    return hist(
        (0.10, 0, "invoke", "acquire", value), (0.20, 0, "ok", "acquire", GRANT),
        (0.50, 0, "invoke", "release"), (0.51, 0, "ok", "release"),
        (0.62, 1, "invoke", "acquire", value), (0.89, 2, "invoke", "acquire", value),
        (1.10, 3, "invoke", "acquire", value),
        (41.0, 0, "invoke", "read"), (41.0, 0, "ok", "read", []),
    )


def test_an_acquire_blocked_past_its_timeout_is_a_stuck_lock() -> None:
    h = blocked_forever(5.0)
    result = liveness.LivenessChecker.check(h)
    assert result["valid"] is False and result["stuck-lock-count"] == 1
    stuck = result["stuck-locks"][0]
    assert stuck["free-since"] == 0.5 and stuck["until"] == 41.0
    assert stuck["blocked-in-acquire"] == [1, 2, 3]
    assert "process 1 has been in an acquire since 0.62 s" in stuck["explanation"]
    avail = availability.AvailabilityChecker.check(h)["locks"]["lock"]
    assert avail["blocked-in-acquire"] == 3
    assert avail["unavailable-s"] == 40.48  # wanted 0.1-0.2 s and 0.62-41 s, held 0.2-0.5 s
    assert avail["held-s"] == 0.3
    assert stats.StatsChecker.check(h)["blocked-in-acquire"] == 3


def test_an_acquire_inside_its_timeout_is_not_yet_unmet_demand() -> None:
    """The same history with a 60 s timeout (none has run out by 41 s): not stuck; nor is
    an old history that never recorded a timeout, unless the run's is given."""
    assert liveness.LivenessChecker.check(blocked_forever(60.0))["valid"] is True
    assert liveness.LivenessChecker.check(blocked_forever(None))["valid"] is True
    assert liveness.LivenessChecker.check(blocked_forever(None),
                                          acquire_timeout=5.0)["valid"] is False


def test_clients_blocked_under_a_fault_on_the_service_are_not_judged() -> None:
    """The same blocked acquires while a DB node is paused from 1 s to 40 s: the fault, and a
    lease after it, leave 0.5 s of fault-free time: not a stuck lock, but the run ended with
    that demand unmet, too soon to tell (issue 40): unknown, never valid."""
    h = blocked_forever(5.0)
    h += [{"index": 100, "time": 1 * S, "process": "nemesis", "type": "info",
           "f": "pause-node", "value": "start", "step": 1, "targets": ["n1"]},
          {"index": 101, "time": 40 * S, "process": "nemesis", "type": "info",
           "f": "pause-node", "value": "stop", "step": 1}]
    h.sort(key=lambda o: o["time"])
    result = liveness.LivenessChecker.check(h)
    assert result["valid"] == "unknown" and result["stuck-lock-count"] == 0
    unjudged = result["not-judged"][0]
    assert unjudged["fault-free-s"] == 0.5 and unjudged["cut-short"] is True  # 0.5 .. 1 s
    assert unjudged["fault"]["f"] == "pause-node" and "not-judged-informational" not in result


def test_a_crashed_client_blocked_in_acquire_wants_nothing() -> None:
    h = blocked_forever(5.0)
    h += [{"index": len(h) + i, "time": 2 * S + i, "process": "nemesis", "type": "info",
           "f": "crash-client", "value": "start", "targets": [f"c{p}"],
           "detail": {"crashed": True}} for i, p in enumerate((1, 2, 3))]
    h.sort(key=lambda o: o["time"])
    assert liveness.LivenessChecker.check(h)["valid"] is True
    unavailable = availability.AvailabilityChecker.check(h)["locks"]["lock"]["unavailable-s"]
    assert unavailable == 1.48  # to the crashes


# malformed: refused, never judged --------------------------------------------------------------
def test_an_op_after_its_process_crashed_is_refused() -> None:
    h = hist((1.0, 1, "invoke", "acquire"), (1.1, 1, "ok", "acquire", GRANT),
             (1.2, "crash", 1), (1.3, 1, "invoke", "release"))
    for check in (mutex.MutexChecker.check, availability.AvailabilityChecker.check,
                  liveness.LivenessChecker.check, stats.StatsChecker.check,
                  lambda h: linearizable.check(h, "mutex")):
        with pytest.raises(ValueError, match=r"after its crash at 1\.200 s: a process has one"):
            check(h)


@pytest.mark.parametrize("timeout", [0, -1.0, math.nan, math.inf, True, "5", [5]])
def test_a_timeout_that_is_not_a_duration_is_refused(timeout: Any) -> None:
    h = hist((1.0, 1, "invoke", "acquire", {"timeout": timeout}))
    with pytest.raises(ValueError, match="not a positive number of seconds"):
        Lives(h).attempts  # noqa: B018
    with pytest.raises(ValueError, match="not a positive number of seconds"):
        liveness.LivenessChecker.check(h)


def test_a_crash_of_a_process_that_never_ran_changes_nothing() -> None:
    h = [*CRASHED_HOLDER[:2], *CRASHED_HOLDER[3:]]
    h.insert(1, {"time": 1, "process": "nemesis", "type": "info", "f": "crash-client",
                 "targets": ["c9"], "detail": {"crashed": True}})
    assert Lives(h).crashes == {9: 1}
    assert mutex.MutexChecker.check(h)["lock-overlap-count"] == 1


# real runs -------------------------------------------------------------------------------------
needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None,
                                 reason="redis-server missing")


@pytest.mark.servers
@needs_redis
def test_crash_client_holding_on_a_lease_lock_is_valid(tmp_path: Path) -> None:
    """Issue 24 case 1 rebuilt: each crashed holder's lease runs out and the next client gets
    the lock. VALID, and the crashes are what made it so: the same history without the
    nemesis's records is INVALID (the dead holders would overlap every later grant)."""
    code, results, run_dir, out = run(
        tmp_path, "--lock", "redis-setnx", "--nemesis", "crash-client", "--nemesis-opt",
        "crash-step=holding", "--time-limit", "10", "--seed", "1")
    assert code == 0, out
    assert results["checks"]["mutex"]["lock-overlap-count"] == 0
    h = history(run_dir)
    lives = Lives(h)
    crashed = [g for g in lives.grants if g.crashed]
    assert crashed, "no holder crashed: the run tested nothing of case 1"
    assert any(g.start > lives.grant_end(c) for c in crashed for g in lives.grants)
    calm = [o for o in h if o["process"] != "nemesis"]
    assert mutex.MutexChecker.check(calm)["valid"] is False
    assert linearizable.check(calm, "mutex")["valid"] is False


@pytest.mark.servers
@pytest.mark.slow  # ~30 s: the blocked clients are killed at the end, then the final read
@needs_redis
def test_a_lock_whose_acquire_hangs_is_a_stuck_lock(tmp_path: Path) -> None:
    """Issue 24 case 2 rebuilt: a plugin grants once, then every acquire hangs; no fault.
    INVALID, by liveness: the clients were blocked in acquire far past their own timeouts."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get(
        "PYTHONPATH", "")])}
    proc = harness("run", "--store", str(tmp_path), "--quiet", "--lock",
                   "tests.blocking_lock:BlockingLock", "--nemesis", "none", "--time-limit",
                   "10", "--seed", "1", env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    results = json.loads(((tmp_path / "latest").resolve() / "results.json").read_text())
    live = results["checks"]["liveness"]
    assert live["valid"] is False and live["stuck-lock-count"] == 1
    assert sorted(live["stuck-locks"][0]["blocked-in-acquire"]) == list(range(5))
    assert results["checks"]["stats"]["counts"]["acquire"]["ok"] == 1


# one model for all the checkers of a history: shared, never changed ---------------------------
def shared_checks() -> list[tuple[str, Any, dict[str, Any]]]:
    """The fenced workload's checkers (every reader of the lives), then liveness with an
    acquire timeout of its own (the lives again, other attempts), then stats once more (the
    first lives, read after the other)."""
    from harness.controller.checking import plan

    checks = [(e.name, fn, params) for e, fn, params in plan({"workload": "fenced"})]
    return [*checks, ("liveness-timed", liveness.LivenessChecker.check,
                      {"ttl": 2.0, "acquire_timeout": 1.0}),
            ("stats-again", stats.StatsChecker.check, {})]


def alone_and_shared(history: list[Op]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each checker on the history alone (its own lives), and all of them composed (one
    lives, shared): JSON text, as results.json holds them."""
    from harness.core.checks import check_safe, compose

    checks = shared_checks()
    alone = {"checks": {name: check_safe(fn, list(history), params)
                        for name, fn, params in checks}}
    together = {"checks": compose(history, checks)["checks"]}
    return (json.loads(json.dumps(alone, default=str)),
            json.loads(json.dumps(together, default=str)))


@SETTINGS
@given(lives_histories())
def test_checkers_sharing_the_lives_say_what_each_says_alone(case: tuple[list[Op], Truth]
                                                             ) -> None:
    alone, together = alone_and_shared(case[0])
    assert together == alone


@pytest.mark.parametrize("timeout", [0, math.nan, "5"])
def test_a_refused_timeout_is_refused_by_every_checker_that_shares_the_lives(timeout: Any
                                                                             ) -> None:
    # stats reads the attempts first and is refused; the liveness checks after it must be
    # refused too (no attempts half built and kept), mutex (no attempts read) judges
    h = hist((0.5, 2, "invoke", "acquire", {"timeout": 5.0}), (0.6, 2, "ok", "acquire", GRANT),
             (1.0, 1, "invoke", "acquire", {"timeout": timeout}))
    alone, together = alone_and_shared(h)
    assert together == alone
    for name in ("stats", "liveness", "liveness-timed", "stats-again"):
        assert together["checks"][name]["crashed"] is True, name
        assert "not a positive number of seconds" in together["checks"][name]["error"], name
    assert together["checks"]["mutex"]["valid"] is True


def test_an_op_after_a_crash_is_refused_by_every_checker_that_shares_the_lives() -> None:
    h = hist((1.0, 1, "invoke", "acquire"), (1.1, 1, "ok", "acquire", GRANT),
             (1.2, "crash", 1), (1.3, 1, "invoke", "release"))
    alone, together = alone_and_shared(h)
    assert together == alone
    assert "after its crash at 1.200 s" in together["checks"]["mutex"]["error"]
