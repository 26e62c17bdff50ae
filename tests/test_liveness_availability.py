"""Liveness (stuck locks) and availability on generated histories: valid ones pass, stuck ones
are caught; interval arithmetic against a brute-force model."""

from __future__ import annotations

import copy
import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checker import availability, liveness
from checker.intervals import length, subtract, total, union
from harness.controller.checking import check_history as check_all
from tests.histories import MS, Built, retime, valid_histories

SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
S = 1000 * MS
SPEC = {"workload": "mutex", "ttl": 2.0}  # threshold: max(10 s, 5 x 2 s) = 10 s


# interval arithmetic ---------------------------------------------------------------------------
small_intervals = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=8)


def points(intervals: list[tuple[int, int]]) -> set[int]:
    return {t for a, b in intervals for t in range(a, b)}


@given(small_intervals, small_intervals)
def test_union_and_subtract_match_sets_of_points(a: list[tuple[int, int]],
                                                 b: list[tuple[int, int]]) -> None:
    u = union(a)
    assert points(u) == points(a)
    assert all(x[1] < y[0] for x, y in itertools.pairwise(u)), "disjoint and sorted"
    assert points(subtract(a, b)) == points(a) - points(b)
    assert total(a) == len(points(a)) == length(u)


# history builders ------------------------------------------------------------------------------
def last_time(h: list[dict[str, Any]]) -> int:
    return max(op["time"] for op in h)


def processes(built: Built) -> list[int]:
    return sorted({op["process"] for op in built.history if isinstance(op["process"], int)})


def attempt(h: list[dict[str, Any]], p: int, t: int, dt: int, outcome: str) -> None:
    h.append({"time": t, "process": p, "type": "invoke", "f": "acquire", "value": None,
              "lock": "lock"})
    done: dict[str, Any] = {"time": t + dt, "process": p, "type": outcome, "f": "acquire",
                            "value": None, "lock": "lock"}
    if outcome == "ok":
        done["value"] = {"session": 10_000 + t, "validity": 2.0}
    h.append(done)


@st.composite
def stuck_histories(draw: st.DrawFn) -> tuple[list[dict[str, Any]], int, int, int]:
    """A valid history, then: a client crashes in the middle of an acquire (SETNX done, never
    EXPIREd) and the others try and fail for longer than the threshold, to the end.
    Returns (history, crashed process, start of the stuck stretch, its end)."""
    built = draw(valid_histories(final_read=False))
    h = copy.deepcopy(built.history)
    procs = processes(built)
    crashed = draw(st.sampled_from(procs))
    others = sorted({*procs, max(procs) + 1} - {crashed})  # at least one keeps trying
    t = last_time(h) + MS
    free_since = max((op["time"] for op in h if op["f"] == "release"
                      and op["type"] == "invoke"), default=t)
    h.append({"time": t, "process": crashed, "type": "invoke", "f": "acquire", "value": None,
              "lock": "lock"})
    h.append({"time": t + MS, "process": "nemesis", "type": "info", "f": "crash-client",
              "value": "start", "targets": [f"c{crashed}"],
              "detail": {"step": "auto", "crashed": True}})
    length = draw(st.integers(10_500, 30_000)) * MS
    clock = {p: t + draw(st.integers(1, 50)) * MS for p in others}
    end = t + length
    began = t
    while began <= end:  # until an attempt begins after the stuck threshold
        p = min(clock, key=clock.__getitem__)
        began = clock[p]
        dt = draw(st.integers(100, 5000)) * MS
        attempt(h, p, clock[p], dt, draw(st.sampled_from(["fail", "fail", "info"])))
        clock[p] += dt + draw(st.integers(0, 50)) * MS
    return retime(h), crashed, free_since, end


@st.composite
def recovering_histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A valid history, then an outage shorter than the threshold (nothing acquires, attempts
    fail), then the lock is acquired and released again: not stuck."""
    built = draw(valid_histories(final_read=False))
    h = copy.deepcopy(built.history)
    procs = processes(built)
    t = last_time(h) + MS
    outage_end = t + draw(st.integers(100, 9_000)) * MS
    while t < outage_end:
        p = draw(st.sampled_from(procs))
        dt = draw(st.integers(50, 2000)) * MS
        attempt(h, p, t, dt, draw(st.sampled_from(["fail", "info"])))
        t += dt + MS
    p = draw(st.sampled_from(procs))
    t = max(t, last_time(h)) + MS
    attempt(h, p, t, 5 * MS, "ok")
    h.append({"time": t + 50 * MS, "process": p, "type": "invoke", "f": "release",
              "value": None, "lock": "lock"})
    h.append({"time": t + 51 * MS, "process": p, "type": "ok", "f": "release", "value": None,
              "lock": "lock"})
    return retime(h)


# liveness --------------------------------------------------------------------------------------
def expected_availability(h: list[dict[str, Any]]) -> tuple[float, float]:
    """(availability, held seconds) of the one lock, by brute force over the elementary
    stretches between the history's times (not checker.intervals): wanted while an acquire
    is open, held from an ok acquire to its process's release invocation (or the end)."""
    end = last_time(h)
    wanted, held, opened, granted = [], [], {}, {}
    for op in h:
        p = op["process"]
        if op["f"] == "acquire" and op["type"] == "invoke":
            opened[p] = op["time"]
        elif op["f"] == "acquire":
            wanted.append((opened.pop(p), op["time"]))
            if op["type"] == "ok":
                granted[p] = op["time"]
        elif op["f"] == "release" and op["type"] == "invoke" and p in granted:
            held.append((granted.pop(p), op["time"]))
    wanted += [(t, end) for t in opened.values()]
    held += [(t, end) for t in granted.values()]
    cuts = sorted({t for a, b in wanted + held for t in (a, b)})
    lost = span = held_ns = 0
    for a, b in itertools.pairwise(cuts):
        w = any(x <= a and b <= y for x, y in wanted)
        k = any(x <= a and b <= y for x, y in held)
        span += (b - a) if w or k else 0
        lost += (b - a) if w and not k else 0
        held_ns += (b - a) if k else 0
    return (round(1 - lost / span, 4) if span else 1.0), round(held_ns / S, 3)


@SETTINGS
@given(valid_histories())
def test_valid_histories_are_live_and_available(built: Built) -> None:
    live = liveness.LivenessChecker.check(built.history, ttl=SPEC["ttl"])
    assert live["valid"] is True, live
    avail = availability.AvailabilityChecker.check(built.history, ttl=SPEC["ttl"])
    assert avail["valid"] is True  # informational, always
    figures = avail["locks"]["lock"]
    assert (figures["availability"], figures["held-s"]) == expected_availability(
        built.history)


@SETTINGS
@given(stuck_histories())
def test_stuck_locks_are_caught(case: tuple[list[dict[str, Any]], int, int, int]) -> None:
    history, crashed, free_since, end = case
    result = liveness.LivenessChecker.check(history, ttl=SPEC["ttl"])
    assert result["valid"] is False
    stuck = result["stuck-locks"][0]
    assert stuck["crashed-in-acquire"] == [crashed]
    assert stuck["free-since"] == round(free_since / 1e9, 3) < end / 1e9
    assert crashed not in stuck["processes"]
    assert "nothing acquired it" in stuck["explanation"]
    assert check_all(history, SPEC)["valid"] is False  # a stuck lock fails the whole run
    avail = availability.AvailabilityChecker.check(history, ttl=SPEC["ttl"])["locks"]["lock"]
    assert avail["longest-unavailable"]["seconds"] >= 10.0
    assert avail["outage-count"] >= 1


@SETTINGS
@given(recovering_histories())
def test_outages_that_end_are_not_stuck(history: list[dict[str, Any]]) -> None:
    assert liveness.LivenessChecker.check(history, ttl=SPEC["ttl"])["valid"] is True


@SETTINGS
@given(stuck_histories())
def test_a_longer_ttl_raises_the_threshold(case: tuple[list[dict[str, Any]], int, int, int]
                                           ) -> None:
    history, crashed, *_ = case
    # 300 s: not yet stuck; but a client crashed in the middle of an acquire and nobody got
    # the lock after it: too short to tell a stuck lock from a slow one, never valid
    result = liveness.LivenessChecker.check(history, ttl=60.0)
    assert result["valid"] == "unknown" and result["stuck-lock-count"] == 0, result
    (short,) = result["not-judged"]
    assert short["cut-short"] and short["crashed-in-acquire"] == [crashed], short
    assert "too short to tell a stuck lock (threshold 300 s)" in short["explanation"]
    assert f"process {crashed} crashed in the middle of an acquire" in short["explanation"]


def test_a_holder_to_the_end_is_not_stuck() -> None:
    h: list[dict[str, Any]] = []
    attempt(h, 0, 1 * MS, MS, "ok")
    for i in range(30):
        attempt(h, 1, (10 + i) * S // 1, S // 2, "fail")
    # process 0 holds it (a lease)
    assert liveness.LivenessChecker.check(retime(h), ttl=SPEC["ttl"])["valid"] is True


def test_a_crashed_holder_stops_holding_at_its_crash() -> None:
    h: list[dict[str, Any]] = []
    attempt(h, 0, 1 * MS, MS, "ok")
    h.append({"time": 5 * MS, "process": "nemesis", "type": "info", "f": "crash-client",
              "value": "start", "targets": ["c0"], "detail": {"crashed": True}})
    for i in range(30):
        attempt(h, 1, i * S + 10 * MS, S // 2, "fail")
    result = liveness.LivenessChecker.check(retime(h), ttl=SPEC["ttl"])
    assert result["valid"] is False
    assert result["stuck-locks"][0]["free-since"] == 0.005
    avail = availability.AvailabilityChecker.check(retime(h), ttl=SPEC["ttl"])["locks"]["lock"]
    assert avail["availability"] < 0.1


# faults on the lock service: their time is not evidence of a stuck lock -----------------------
def fault(h: list[dict[str, Any]], f: str, targets: list[str], start: int, stop: int) -> None:
    h.append({"time": start, "process": "nemesis", "type": "info", "f": f, "value": "start",
              "step": start, "targets": targets})
    h.append({"time": stop, "process": "nemesis", "type": "invoke", "f": f, "value": "stop",
              "step": start})


def stretch_end(history: list[dict[str, Any]], free_since: int, crashed: int) -> int:
    """The last acquire begun in the stuck stretch (by a client that did not crash)."""
    return max(op["time"] for op in history if op["f"] == "acquire" and op["type"] == "invoke"
               and op["time"] >= free_since and op["process"] != crashed)


@SETTINGS
@given(stuck_histories(), st.integers(0, 12_000), st.integers(0, 12_000),
       st.sampled_from([["n1"], ["n1", "n2"], ["c0-n1"]]))
def test_only_fault_free_time_makes_a_lock_stuck(
        case: tuple[list[dict[str, Any]], int, int, int], at: int, length: int,
        targets: list[str]) -> None:
    """A fault on a node or a link, somewhere in the stretch, for some time: the lock is stuck
    if and only if the stretch, less the fault and a lease after it, is still 10 s."""
    history, crashed, free_since, _ = case
    last = stretch_end(history, free_since, crashed)
    start = free_since + at * MS
    stop = start + length * MS
    h = copy.deepcopy(history)
    fault(h, "pause-node", targets, start, stop)
    lease = int(SPEC["ttl"] * S)
    covered = max(0, min(last, stop + lease) - max(free_since, start))
    fault_free = (last - free_since) - covered
    result = liveness.LivenessChecker.check(retime(h), ttl=SPEC["ttl"])
    # too little fault-free time to judge, after a crash in the middle of an acquire: the
    # crash may have left the lock taken, and the run cannot tell: unknown, never valid
    assert result["valid"] == ("unknown" if fault_free < 10 * S else False), (fault_free,
                                                                              result)
    listed = (result["stuck-locks"] or result["not-judged"])[0]
    assert listed["fault-free-s"] == round(fault_free / 1e9, 3)
    assert listed["crashed-in-acquire"] == [crashed], listed


@SETTINGS
@given(stuck_histories())
def test_a_fault_on_one_client_excuses_nothing(
        case: tuple[list[dict[str, Any]], int, int, int]) -> None:
    """A partition or a pause of one client, for the whole stretch: the others could still
    have taken the lock."""
    history, crashed, free_since, end = case
    trying = sorted({op["process"] for op in history if op["f"] == "acquire"
                     and op["time"] >= free_since and op["process"] != crashed})
    h = copy.deepcopy(history)
    fault(h, "partition", [f"c{trying[0]}"], free_since, end + 60 * S)
    result = liveness.LivenessChecker.check(retime(h), ttl=SPEC["ttl"])
    if len(trying) > 1:
        assert result["valid"] is False and "not-judged" not in result
    else:  # the one client trying was cut off: that is a fault on the service for it, and
        # after a client crashed in the middle of an acquire nothing can be told: unknown
        assert result["valid"] == "unknown" and result["not-judged-count"] == 1, result
        assert result["not-judged"][0]["crashed-in-acquire"] == [crashed]


def test_a_server_paused_again_and_again_is_an_outage_not_a_stuck_lock() -> None:
    """The shape of a real run (redis-fenced, pause-node, seed 1): every acquire times out in a
    pause, the ones given up on are served when it ends and take the lock for nobody, so no
    client gets it from 1.5 s to the end; only 0.7 s of that is free of faults."""
    h: list[dict[str, Any]] = []
    attempt(h, 3, 1_290 * MS, 4 * MS, "ok")
    h.append({"time": 1_500 * MS, "process": 3, "type": "invoke", "f": "release",
              "value": None, "lock": "lock"})
    for start, stop in ((1_900, 5_900), (7_975, 11_975), (14_230, 15_000)):
        fault(h, "pause-node", ["n1"], start * MS, stop * MS)
    for p in range(5):
        for t in range(1_560, 16_000, 1_030):
            attempt(h, p, (t + 7 * p) * MS, 1_000 * MS, "info" if t < 15_000 else "fail")
    result = liveness.LivenessChecker.check(retime(h), ttl=SPEC["ttl"])
    assert result["valid"] is True and result["stuck-lock-count"] == 0
    unjudged = result["not-judged"][0]
    assert unjudged["free-since"] == 1.5 and unjudged["fault-free-s"] < 1.0
    assert "an outage, not proof of a stuck lock" in unjudged["explanation"]
    assert result["not-judged-informational"] is True  # the report shows it, not as a violation
    # the same attempts with no fault: stuck
    calm = [op for op in h if op["process"] != "nemesis"]
    assert liveness.LivenessChecker.check(retime(calm), ttl=SPEC["ttl"])["valid"] is False


def test_a_stretch_not_judged_is_informational_next_to_a_stuck_lock() -> None:
    """Lock a is stuck (its clients meet no fault); lock b's only clients are cut off the whole
    time: a fails the run, b is an outage the report shows but does not flag."""
    from harness.presentation.report.model import explained_items

    h: list[dict[str, Any]] = []
    for lock, procs in (("a", (1, 2)), ("b", (3, 4))):
        for p in procs:
            for i in range(20):
                t = i * S + p * MS
                h.append({"time": t, "process": p, "type": "invoke", "f": "acquire",
                          "value": None, "lock": lock})
                h.append({"time": t + S // 2, "process": p, "type": "fail", "f": "acquire",
                          "value": None, "lock": lock})
    fault(h, "partition", ["c3", "c4"], 0, 20 * S)
    result = liveness.LivenessChecker.check(retime(h), ttl=SPEC["ttl"])
    assert result["valid"] is False
    assert [s["lock"] for s in result["stuck-locks"]] == ["a"]
    assert [s["lock"] for s in result["not-judged"]] == ["b"]
    shown = {x.kind: x.info for x in explained_items({"checks": {"liveness": result}})}
    assert shown == {"stuck-locks": False, "not-judged": True}
