"""The checkers on generated histories: valid ones pass, broken ones are caught."""

from __future__ import annotations

import copy
import gc
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from checker import fencing, mutex, stats
from checker.intervals import overlapping
from checker.sessions import Grant
from harness.controller.checking import check_history as check_all
from harness.core.checks import merge_valid
from harness.core.heap import gc_paused
from harness.core.run_history import merged_columns
from tests.histories import (
    MS,
    Built,
    acquires,
    later_session,
    valid_histories,
    with_interleaving,
    with_overlap,
    with_stale_acceptance,
)

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(valid_histories())
def test_valid_mutex_histories_pass(built: Built) -> None:
    result = mutex.MutexChecker.check(built.history)
    assert result["valid"] is True, result
    assert result["lock-overlap-count"] == 0
    assert check_all(built.history, {"workload": "mutex"})["valid"] is True


@SETTINGS
@given(valid_histories(fenced=True))
def test_valid_fenced_histories_pass(built: Built) -> None:
    result = fencing.FencingChecker.check(built.history)
    assert result["valid"] is True, result
    assert check_all(built.history, {"workload": "fenced"})["valid"] is True


@SETTINGS
@given(valid_histories(), st.data())
def test_overlaps_are_caught(built: Built, data: st.DataObject) -> None:
    k = later_session(built, data)
    assume(built.sessions[k]["process"] != built.sessions[k - 1]["process"])
    result = mutex.MutexChecker.check(with_overlap(built, k))
    assert result["valid"] is False
    first = result["lock-overlaps"][0]
    assert set(first["processes"]) == {built.sessions[k - 1]["process"],
                                        built.sessions[k]["process"]}
    assert "acquired at" in first["explanation"]


@SETTINGS
@given(valid_histories(fenced=True), st.data())
def test_overlaps_are_informational_when_fenced(built: Built, data: st.DataObject) -> None:
    k = later_session(built, data)
    assume(built.sessions[k]["process"] != built.sessions[k - 1]["process"])
    result = mutex.MutexChecker.check(with_overlap(built, k), overlaps_informational=True)
    assert result["lock-overlap-count"] >= 1
    assert result["valid"] is True


@SETTINGS
@given(valid_histories(), st.data())
def test_resource_interleavings_are_caught(built: Built, data: st.DataObject) -> None:
    k = later_session(built, data)
    result = mutex.MutexChecker.check(with_interleaving(built, k))
    assert result["valid"] is False
    assert result["resource-interleaving-count"] >= 1


@SETTINGS
@given(valid_histories(), st.data())
def test_info_writes_are_not_dropped(built: Built, data: st.DataObject) -> None:
    """Writes whose outcome the clients never learnt still count: the resource log has them."""
    k = later_session(built, data)
    h = with_interleaving(built, k)
    for op in h:
        if op["f"] == "write" and op["type"] == "ok":
            op["type"] = "info"
            op["value"] = {k2: v for k2, v in op["value"].items() if k2 != "seq"}
    assert mutex.MutexChecker.check(h)["valid"] is False


@SETTINGS
@given(valid_histories(final_read=False))
def test_unknown_writes_without_the_final_read_are_unknown(built: Built) -> None:
    has_info = any(o["f"] == "write" and o["type"] == "info" for o in built.history)
    result = mutex.MutexChecker.check(built.history)
    assert result["valid"] == ("unknown" if has_info else True)


@SETTINGS
@given(valid_histories(fenced=True), st.data())
def test_stale_token_acceptance_is_caught(built: Built, data: st.DataObject) -> None:
    k = later_session(built, data)
    result = fencing.FencingChecker.check(with_stale_acceptance(built, k))
    assert result["valid"] is False
    assert result["stale-accepted-count"] >= 1
    assert "after accepting token" in result["stale-accepted"][0]["explanation"]


@SETTINGS
@given(valid_histories(fenced=True), st.data())
def test_tokens_out_of_order_are_caught(built: Built, data: st.DataObject) -> None:
    k = later_session(built, data)
    h = copy.deepcopy(built.history)
    lower = built.sessions[k - 1]["token"]  # equal to an earlier grant's: never right
    cur = built.sessions[k]
    for op in h:
        if (op["f"] == "acquire" and op["type"] == "ok" and op["process"] == cur["process"]
                and op["value"]["session"] == cur["session"]):
            op["token"] = lower
    result = fencing.FencingChecker.check(h)
    assert result["valid"] is False
    assert result["token-order-violation-count"] >= 1


GRANTS = st.lists(st.tuples(st.integers(0, 30), st.integers(1, 10), st.integers(1, 9)),
                  min_size=3, max_size=7)


@settings(max_examples=300, deadline=None)
@given(GRANTS)
@example([(0, 2, 7), (1, 2, 5), (4, 1, 6)])  # 7; 5 concurrently; 6 after both: 6 < 7
def test_token_order_agrees_with_every_pair(grant_list: list[tuple[int, int, int]]) -> None:
    """Three or more grants (process k: acquire invoked at a, ok at a + d with token t) judged
    on dicts and on columns against every pair: a grant whose acquire began after another's
    was granted needs a greater token than it, and no two grants share one. The highest token
    granted before, not the latest grant's, is what a grant is held to."""
    ops = sorted([(a * MS, k, "invoke", None) for k, (a, _, _) in enumerate(grant_list)]
                 + [((a + d) * MS, k, "ok", t) for k, (a, d, t) in enumerate(grant_list)])
    h = [{"index": i, "time": at, "process": k, "type": kind, "f": "acquire",
          **({"value": {"session": 1}, "token": t} if kind == "ok" else {})}
         for i, (at, k, kind, t) in enumerate(ops)]
    want = []
    for k, (a, _, t) in enumerate(grant_list):
        before = [u for j, (b, e, u) in enumerate(grant_list) if j != k and b + e < a]
        if before and max(before) > t:
            want.append((k, max(before), t))
    tokens = [t for _, _, t in grant_list]
    repeats = len(tokens) - len(set(tokens))
    cols = merged_columns(h)
    assert cols is not None
    for history in (h, cols):
        result = fencing.FencingChecker.check(history)
        found = result["token-order-violations"]
        assert sorted((v["processes"][1], *v["tokens"]) for v in found if "tokens" in v) == want
        assert len([v for v in found if "token" in v]) == repeats
        assert result["valid"] == (False if want or repeats else "unknown")  # (no writes)


def test_rejected_stale_writes_are_counted_not_failed() -> None:
    h = [
        {"index": 0, "time": 1 * MS, "process": 0, "type": "invoke", "f": "acquire"},
        {"index": 1, "time": 2 * MS, "process": 0, "type": "ok", "f": "acquire",
         "value": {"session": 1}, "token": 1},
        {"index": 2, "time": 3 * MS, "process": 1, "type": "invoke", "f": "acquire"},
        {"index": 3, "time": 9 * MS, "process": 1, "type": "ok", "f": "acquire",
         "value": {"session": 1}, "token": 2},
        {"index": 4, "time": 10 * MS, "process": 0, "type": "invoke", "f": "write",
         "value": {"kind": "exit", "session": 1}, "token": 1},
        {"index": 5, "time": 11 * MS, "process": 0, "type": "fail", "f": "write",
         "value": {"kind": "exit", "session": 1, "seq": 3}, "token": 1},
        {"index": 6, "time": 20 * MS, "process": 2, "type": "invoke", "f": "read"},
        {"index": 7, "time": 21 * MS, "process": 2, "type": "ok", "f": "read", "value": [
            {"seq": 1, "process": 0, "session": 1, "kind": "enter", "token": 1,
             "accepted": True},
            {"seq": 2, "process": 1, "session": 1, "kind": "enter", "token": 2,
             "accepted": True},
            {"seq": 3, "process": 0, "session": 1, "kind": "exit", "token": 1,
             "accepted": False},
        ]},
    ]
    f = fencing.FencingChecker.check(h)
    assert f["valid"] is True
    assert f["stale-rejected"] == 1
    assert f["late-writes"]["rejected"] == 1
    m = mutex.MutexChecker.check(h, overlaps_informational=True)
    assert m["valid"] is True and m["lock-overlap-count"] == 1
    assert m["lock-overlaps-informational"] is True
    assert mutex.MutexChecker.check(h)["valid"] is False


def test_a_holder_that_never_releases_overlaps_to_the_end() -> None:
    result = mutex.MutexChecker.check(acquires(1, 2, 3, 4))
    assert result["valid"] is False
    assert "never released" in result["lock-overlaps"][0]["explanation"]


def test_stats_counts_and_unknown_when_nothing_acquired() -> None:
    h = [
        {"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "acquire"},
        {"index": 1, "time": 2, "process": 0, "type": "fail", "f": "acquire"},
    ]
    s = stats.StatsChecker.check(h)
    assert s["valid"] == "unknown"
    assert s["counts"]["acquire"]["fail"] == 1


S = 1_000_000_000


def lease_session(release: str, released_at: float, error: str | None = None,
                  validity: float | None = 2.0) -> list[dict[str, Any]]:
    """Process 0 acquires (invoked at 1 s, granted at 1.1 s with ``validity``) and releases,
    invoked 0.01 s before ``released_at``, completing ``release`` (ok / fail) then."""
    done: dict[str, Any] = {"index": 3, "time": int(released_at * S), "process": 0,
                            "type": release, "f": "release", "value": {"session": 1}}
    if error is not None:
        done["error"] = error
    return [
        {"index": 0, "time": 1 * S, "process": 0, "type": "invoke", "f": "acquire",
         "value": {"timeout": 5.0}},
        {"index": 1, "time": int(1.1 * S), "process": 0, "type": "ok", "f": "acquire",
         "value": {"session": 1, "validity": validity}},
        {"index": 2, "time": int((released_at - 0.01) * S), "process": 0, "type": "invoke",
         "f": "release", "value": {"session": 1}},
        done,
    ]


NOT_HELD = "not-held: the lock had expired or was taken"


def test_a_release_refused_within_its_lease_is_a_lease_lost_early() -> None:
    """The service dropped a lease it had promised (a failover, a forgetful restart): counted
    and described, informational (nobody else got in: the verdict stands)."""
    s = stats.StatsChecker.check(lease_session("fail", 2.5, NOT_HELD))
    assert s["valid"] is True
    assert s["lease-lost-early-count"] == 1
    assert s["leases-lost-early"][0]["explanation"] == (
        "process 0's lease was dropped early: its release was refused (not held) at 2.500 s, "
        "0.500 s before the lease could have run out (acquire invoked at 1.000 s, validity 2 s)")


@pytest.mark.parametrize("release, at, error, validity", [
    ("fail", 3.5, NOT_HELD, 2.0),  # refused after the lease could have run out: expired
    ("fail", 3.0, NOT_HELD, 2.0),  # at the very moment it could have: not certainly early
    ("ok", 2.5, None, 2.0),  # released
    ("fail", 2.5, "timeout: certainly not sent", 2.0),  # refused for another reason
    ("fail", 2.5, NOT_HELD, None),  # no lease to tell (a lock without validity)
    ("fail", 2.5, NOT_HELD, float("inf")),
])
def test_what_is_not_a_lease_lost_early(release: str, at: float, error: str | None,
                                        validity: float | None) -> None:
    s = stats.StatsChecker.check(lease_session(release, at, error, validity))
    assert s["lease-lost-early-count"] == 0
    assert "leases-lost-early" not in s


def test_merge_valid_prefers_false_then_unknown() -> None:
    assert merge_valid([True, "unknown", False]) is False
    assert merge_valid([True, "unknown"]) == "unknown"
    assert merge_valid([True, True]) is True


def test_independent_keys_are_checked_each_on_its_own() -> None:
    """Two locks, each with its own holder: sessions of different keys interleave on the
    resource freely; the same interleaving within one key is two holders."""
    def session_ops(p: int, lock: str, t: int, seqs: tuple[int, int]) -> list[dict[str, Any]]:
        return [
            {"time": t, "process": p, "type": "invoke", "f": "acquire", "lock": lock},
            {"time": t + 1, "process": p, "type": "ok", "f": "acquire", "lock": lock,
             "value": {"session": 1}},
            {"time": t + 2, "process": p, "type": "invoke", "f": "write", "lock": lock,
             "value": {"kind": "enter", "session": 1}},
            {"time": t + 3, "process": p, "type": "ok", "f": "write", "lock": lock,
             "value": {"kind": "enter", "session": 1, "seq": seqs[0]}},
            {"time": t + 20, "process": p, "type": "invoke", "f": "write", "lock": lock,
             "value": {"kind": "exit", "session": 1}},
            {"time": t + 21, "process": p, "type": "ok", "f": "write", "lock": lock,
             "value": {"kind": "exit", "session": 1, "seq": seqs[1]}},
            {"time": t + 30, "process": p, "type": "invoke", "f": "release", "lock": lock},
            {"time": t + 31, "process": p, "type": "ok", "f": "release", "lock": lock}]

    def history(lock_b: str) -> list[dict[str, Any]]:
        ops = session_ops(0, "lock-0", 0, (1, 3)) + session_ops(1, lock_b, 5, (2, 4))
        log = [{"seq": s, "process": p, "session": 1, "kind": k, "accepted": True, "lock": lk}
               for s, p, k, lk in ((1, 0, "enter", "lock-0"), (2, 1, "enter", lock_b),
                                   (3, 0, "exit", "lock-0"), (4, 1, "exit", lock_b))]
        ops += [{"time": 100, "process": 2, "type": "invoke", "f": "read"},
                {"time": 101, "process": 2, "type": "ok", "f": "read", "value": log}]
        ops.sort(key=lambda op: op["time"])
        return [{"index": i, "value": None, **op} for i, op in enumerate(ops)]

    apart = mutex.MutexChecker.check(history("lock-1"))
    assert apart["valid"] is True and apart["resource-interleaving-count"] == 0
    together = mutex.MutexChecker.check(history("lock-0"))
    assert together["valid"] is False
    assert together["lock-overlap-count"] == 1 and together["resource-interleaving-count"] == 1


def grant_pair(second_at_ms: int, validity: float | None, second_invoked_ms: int = 120
               ) -> list[dict[str, object]]:
    """Process 0 acquires (invoked at 100 ms, ok at 110 ms, lease ``validity``) and holds on;
    process 1's acquire, invoked at ``second_invoked_ms``, completes at ``second_at_ms``."""
    value = {"session": 1} if validity is None else {"session": 1, "validity": validity}
    return sorted([
        {"index": 0, "time": 100 * MS, "process": 0, "type": "invoke", "f": "acquire"},
        {"index": 1, "time": 110 * MS, "process": 0, "type": "ok", "f": "acquire",
         "value": value},
        {"index": 2, "time": second_invoked_ms * MS, "process": 1, "type": "invoke",
         "f": "acquire"},
        {"index": 3, "time": second_at_ms * MS, "process": 1, "type": "ok", "f": "acquire",
         "value": {"session": 1, "validity": validity}},
    ], key=lambda op: op["time"])  # type: ignore[arg-type, return-value]


def test_a_grant_inside_the_previous_lease_is_a_broken_lease() -> None:
    m = mutex.MutexChecker.check(grant_pair(1500, 2.0))  # 1.5 s < 0.1 s + 2 s: the lease still ran
    assert m["lock-overlap-count"] == 1 and m["lease-broken-count"] == 1
    assert m["lock-overlaps"][0]["lease-broken"] is True


def test_a_holder_that_outlived_its_lease_is_no_broken_lease() -> None:
    m = mutex.MutexChecker.check(grant_pair(2200, 2.0))  # past 0.1 s + 2 s: the holder outlived it
    assert m["lock-overlap-count"] == 1 and m["lease-broken-count"] == 0
    assert m["lock-overlaps"][0]["lease-broken"] is False
    unknown = mutex.MutexChecker.check(grant_pair(1500, None))  # no validity: no way to tell
    assert unknown["lease-broken-count"] == 0
    assert unknown["lock-overlaps"][0]["lease-broken"] is None
    # asked before the first grant, heard of after it: granted when? (a stalled reply, say)
    late = mutex.MutexChecker.check(grant_pair(1500, 2.0, second_invoked_ms=50))
    assert late["lock-overlap-count"] == 1 and late["lease-broken-count"] == 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 8) | st.none()), max_size=30),
       st.integers(0, 6))
def test_overlapping_sweep_agrees_with_every_pair(raw: list[tuple[int, int | None]],
                                                  limit: int) -> None:
    """The heap sweep counts and lists exactly the pairs a quadratic scan finds, in order."""
    items = sorted(((s, None if d is None else s + d) for s, d in raw), key=lambda i: i[0])
    end = lambda i: math.inf if i[1] is None else i[1]  # noqa: E731
    pairs = [(a, b) for j, b in enumerate(items) for a in items[:j] if end(a) > b[0]]
    count, listed = overlapping(items, lambda i: i[0], end, limit)
    assert count == len(pairs)
    assert listed == pairs[:limit]


def test_many_holders_that_never_release_are_counted_not_listed() -> None:
    """2,000 grants never released: ~2M overlapping pairs, counted; 50 listed; no pair list."""
    h = []
    for p in range(2000):
        h.append({"index": 2 * p, "time": 10 * p, "process": p, "type": "invoke",
                  "f": "acquire"})
        h.append({"index": 2 * p + 1, "time": 10 * p + 1, "process": p, "type": "ok",
                  "f": "acquire"})
    result = mutex.MutexChecker.check(h)
    assert result["lock-overlap-count"] == 2000 * 1999 // 2
    assert len(result["lock-overlaps"]) == mutex.MAX_LISTED
    assert result["lock-overlaps"][0]["processes"] == [0, 1]


def test_the_collector_is_paused_during_a_check_and_restored_after() -> None:
    seen = []

    @gc_paused
    def checker(history: list[Any]) -> dict[str, Any]:
        seen.append(gc.isenabled())
        if history:
            raise ValueError("boom")
        return {"valid": True}

    assert gc.isenabled()
    checker([])
    with pytest.raises(ValueError):
        checker([1])
    assert seen == [False, False] and gc.isenabled()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 5), st.integers(0, 20) | st.none(),
                          st.sampled_from([None, 0.0, 0.005, 0.012, float("nan")])),
                max_size=25))
def test_lease_broken_count_is_the_pairs_lease_broken_calls_true(
        raw: list[tuple[int, int, int | None, float | None]]) -> None:
    """The Fenwick count agrees with lease_broken over every overlapping pair."""
    gs = [Grant(p, 1, "lock", t * MS, (t + wait) * MS,
                None if hold is None else (t + wait + hold) * MS, None, v)
          for p, (t, wait, hold, v) in enumerate(raw)]
    ordered = sorted(gs, key=lambda g: (g.start, g.process))
    pairs = [(a, b) for j, b in enumerate(ordered) for a in ordered[:j]
             if (math.inf if a.end is None else a.end) > b.start]
    want = sum(1 for a, b in pairs if mutex.lease_broken(a, b))
    assert mutex.lease_broken_count(gs) == want
    leases = sorted((g.start, min(math.inf if g.end is None else g.end,
                                  g.invoke + int(g.validity * 1_000_000_000)))
                    for g in gs if g.validity is not None and math.isfinite(g.validity))
    # the Fenwick tree, which the count takes when many leases are in force at once
    assert mutex._fenwick_count(leases, sorted(gs, key=lambda g: g.invoke)) == want


def test_lease_broken_count_with_many_leases_in_force_takes_the_fenwick_tree() -> None:
    """Grants that never let go, each asked before the earlier ones' leases ran out: every
    pair (a, b) with b asked after a's grant is a broken lease, more leases in force at once
    than the sorted list keeps."""
    n = mutex.LIVE_LEASES + 100
    gs = [Grant(p, 1, "lock", p * MS, p * MS + MS // 2, None, None, 10.0) for p in range(n)]
    assert mutex.lease_broken_count(gs) == n * (n - 1) // 2


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(1, 10)), max_size=12),
       st.lists(st.tuples(st.integers(0, 60), st.integers(1, 10),
                          st.sampled_from(["ok", "fail", "info"])), max_size=15),
       st.booleans())
def test_late_writes_agree_with_brute_force(grant_list: list[tuple[int, int]],
                                            writes: list[tuple[int, int, str]],
                                            in_order: bool) -> None:
    """A write is late when some grant with a higher token had completed before the write was
    invoked; the checker walks the grants once for writes in time order and searches for the
    others (a history out of time order must be judged the same)."""
    gs = [Grant(process=9, session=k, lock="lock", invoke=t - 1, start=t, end=None, token=tok,
                validity=None)
          for k, (t, tok) in enumerate(grant_list)]
    if in_order:
        writes = sorted(writes)
    paired = []
    for k, (t, tok, outcome) in enumerate(writes):
        inv = {"index": 2 * k, "time": t, "process": 0, "type": "invoke", "f": "write",
               "token": tok}
        paired.append((inv, {**inv, "index": 2 * k + 1, "type": outcome}))
    want = {"accepted": 0, "rejected": 0, "unknown": 0}
    for inv, done in paired:
        if any(g.start < inv["time"] and g.token > inv["token"] for g in gs):
            key = {"ok": "accepted", "fail": "rejected", "info": "unknown"}[done["type"]]
            want[key] += 1
    assert fencing.late_writes([op for pair in paired for op in pair], gs) == want
