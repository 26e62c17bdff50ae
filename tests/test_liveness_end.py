"""The end of a run is judged (issue 40, item 1): demand still pending when the load stops
(acquires past their timeouts, or in flight when the clients were stopped and had to be killed:
the controller's ``stop-clients`` record) is unmet demand to the end. Too short a stretch of it
is "not judged" with its length and makes liveness unknown; a long one is a stuck lock;
satisfied demand is valid; a malformed end is refused. A history in columns says the same."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checker.liveness import LivenessChecker
from harness.controller.checking import check_history
from harness.core.checks import Shared
from harness.core.history import Op
from harness.core.run_history import merged_columns

S = 1_000_000_000
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KILLS = [(3.0, 8.0), (9.0, 14.0), (15.0, 20.0), (21.0, 26.0), (27.0, 32.2)]  # kill:all steps


def stranded(free_for: float, *, killed: tuple[int, ...] = (1, 2, 3),
             timeout: float | None = 5.0, granted: bool = False) -> list[Op]:
    """The shape of the ZooKeeper kill:all run: every server killed and restarted five times
    from 3.0 s to 32.2 s; processes 1-3 invoke 5 s acquires at about 3 s that never return;
    process 0 is granted at 34.3 s and lets go at 34.5 s; the clients are stopped (the ones in
    ``killed`` killed) ``free_for`` seconds later, then the resource is read back.
    ``granted``: process 1's acquire is answered after the release instead."""
    value = None if timeout is None else {"timeout": timeout}
    ops: list[dict[str, Any]] = []

    def op(t: float, p: Any, type_: str, f: str, v: Any = None, **extra: Any) -> None:
        ops.append({"time": round(t * S), "process": p, "type": type_, "f": f, "value": v,
                    **extra})

    for step, (a, b) in enumerate(KILLS):
        op(a - 0.01, "nemesis", "invoke", "kill", "start", step=step)
        op(a, "nemesis", "info", "kill", "start", step=step, targets=["n1", "n2", "n3"])
        op(b, "nemesis", "invoke", "kill", "stop", step=step)
        op(b + 0.01, "nemesis", "info", "kill", "stop", step=step)
    for p, t in ((1, 2.95), (2, 3.01), (3, 3.02)):
        op(t, p, "invoke", "acquire", value, lock="lock")
    op(34.0, 0, "invoke", "acquire", value, lock="lock")
    op(34.3, 0, "ok", "acquire", {"session": 1, "validity": None}, lock="lock")
    op(34.5, 0, "invoke", "release", lock="lock")
    op(34.51, 0, "ok", "release", lock="lock")
    if granted:
        op(34.6, 1, "ok", "acquire", {"session": 2, "validity": None}, lock="lock")
        op(34.7, 1, "invoke", "release", lock="lock")
        op(34.71, 1, "ok", "release", lock="lock")
    end = 34.5 + free_for if not granted else 34.7 + free_for
    op(end, "nemesis", "info", "stop-clients", "end", detail={"killed": list(killed)})
    op(end + 1.0, 4, "invoke", "read")
    op(end + 1.01, 4, "ok", "read", [])
    ops.sort(key=lambda o: o["time"])
    return [{"index": i, **o} for i, o in enumerate(ops)]


def checked(history: list[Op], ttl: float = 2.0) -> dict[str, Any]:
    """Liveness of the history as dicts, held to say what it says of the same in columns."""
    as_dicts = LivenessChecker.check(Shared(copy.deepcopy(history)), ttl=ttl)
    columns = merged_columns(copy.deepcopy(history))
    assert columns is not None
    assert LivenessChecker.check(columns, ttl=ttl) == as_dicts
    return as_dicts


def test_demand_pending_at_the_end_too_short_to_judge_is_unknown_and_says_so() -> None:
    """The run of issue 40 that exited 0: free and wanted for 8.97 s at the end."""
    result = checked(stranded(8.97))
    assert result["valid"] == "unknown" and result["stuck-lock-count"] == 0
    (item,) = result["not-judged"]
    assert item["cut-short"] is True and item["length-s"] == 8.97
    assert item["free-since"] == 34.5 and item["processes"] == [1, 2, 3]
    assert item["blocked-in-acquire"] == [1, 2, 3]
    assert "not-judged-informational" not in result
    words = item["explanation"]
    assert words.startswith("not judged: lock 'lock' was free and wanted by processes 1, 2, 3 "
                            "from 34.50 s"), words
    assert "8.97 s" in words and "too short" in words and "killed" in words
    assert check_history(stranded(8.97), {"workload": "mutex", "ttl": 2.0})["valid"] == (
        "unknown")


def test_demand_pending_at_the_end_longer_than_the_threshold_is_a_stuck_lock() -> None:
    result = checked(stranded(12.0))
    assert result["valid"] is False and result["stuck-lock-count"] == 1
    (item,) = result["stuck-locks"]
    assert item["length-s"] == 12.0 and item["processes"] == [1, 2, 3]
    assert item["explanation"].startswith("stuck: lock 'lock' was free and wanted by")


def test_a_stretch_names_the_fault_it_began_in() -> None:
    """Nobody was granted after the first kill: the stretch began as it struck (at 3.0 s),
    not in "no fault"."""
    history = [o for o in stranded(30.0) if o["process"] != 0]
    (item,) = checked(history)["stuck-locks"]
    assert item["free-since"] == 2.95
    assert item["fault"] == {"f": "kill", "step": 0, "start": 3.0, "stop": 8.0,
                             "targets": ["n1", "n2", "n3"], "how": "inside"}
    assert item["explanation"].endswith(
        "; the first fault in it: kill of n1, n2, n3 (step 1) from 3.00 s to 8.00 s")


def test_a_stretch_after_a_fault_names_it_or_the_fault_that_stranded_its_acquires() -> None:
    """Free from 34.5 s, after the last kill (27-32.2 s): within its lease (a 4 s TTL), the
    stretch began in it; past it (2 s), the acquires left pending were stranded by the first
    kill, at 3.0 s, and that is named."""
    (item,) = checked(stranded(8.97), ttl=4.0)["not-judged"]
    assert (item["fault"]["step"], item["fault"]["how"]) == (4, "on")
    assert "; it began in kill of n1, n2, n3 (step 5) from 27.00 s" in item["explanation"]
    (item,) = checked(stranded(8.97))["not-judged"]
    assert (item["fault"]["step"], item["fault"]["how"]) == (0, "pending")
    assert item["explanation"].endswith("; the acquires left pending were in flight through "
                                        "kill of n1, n2, n3 (step 1) from 3.00 s to 8.00 s")


def test_the_stuck_incident_names_the_fault_its_stretch_began_in() -> None:
    from harness.presentation.report.incidents import incidents

    history = [o for o in stranded(30.0) if o["process"] != 0]
    results = check_history(copy.deepcopy(history), {"workload": "mutex", "ttl": 2.0})
    (inc,) = incidents(history, results)
    assert inc.fault is not None and (inc.fault.f, inc.fault.step) == ("kill", 0)
    assert "no fault was on" not in inc.title()


def test_a_lock_that_never_granted_and_never_answered_is_stuck_not_untested() -> None:
    """No acquire succeeded, none came back, none failed: no failed request to withdraw the
    finding from (a run whose every request failed has one: tests/test_honest_verdicts.py):
    the stuck lock stands."""
    history = [o for o in stranded(30.0) if o["process"] != 0]
    results = check_history(copy.deepcopy(history), {"workload": "mutex", "ttl": 2.0})
    assert results["valid"] is False and results["checks"]["liveness"]["valid"] is False
    assert "withdrawn" not in results["checks"]["liveness"]
    assert "tested nothing" not in results["could-not-test"]


def test_an_acquire_killed_at_the_end_is_unmet_demand_whatever_its_timeout() -> None:
    """No timeout recorded (or a long one): the stop record says the client was killed in
    the middle of its acquire, so its demand is pending to the end all the same."""
    for timeout in (None, 600.0):
        assert checked(stranded(8.97, timeout=timeout))["valid"] == "unknown"
        assert checked(stranded(12.0, timeout=timeout))["valid"] is False
        # not killed, not past its timeout: nothing known of it yet (as before)
        assert checked(stranded(8.97, timeout=timeout, killed=()))["valid"] is True


def test_satisfied_demand_is_valid() -> None:
    result = checked(stranded(8.97, granted=True, killed=(2, 3)))
    # 2 and 3 still blocked: only 1 was answered
    assert result["valid"] == "unknown"
    history = [o for o in stranded(8.97, granted=True, killed=())
               if o["process"] not in (2, 3)]
    assert checked(history)["valid"] is True


@SETTINGS
@given(st.integers(1, 40_000), st.sets(st.integers(1, 3), min_size=1),
       st.sampled_from([None, 5.0, 600.0]))
def test_pending_demand_at_the_end_is_judged_by_its_length(
        ms: int, killed: set[int], timeout: float | None) -> None:
    """Shorter than the 10 s threshold: unknown, not judged, with its length; as long or
    longer: stuck. Never valid, never silent; the same of the history in columns."""
    free_for = ms / 1000
    result = checked(stranded(free_for, killed=tuple(sorted(killed)), timeout=timeout))
    wanting = [1, 2, 3] if timeout == 5.0 else sorted(killed)  # past its timeout, or killed
    if free_for < 10.0:
        assert result["valid"] == "unknown", result
        (item,) = result["not-judged"]
        assert item["cut-short"] is True
    else:
        assert result["valid"] is False, result
        (item,) = result["stuck-locks"]
    assert item["length-s"] == round(free_for, 3)
    assert item["processes"] == wanting


def mangled(detail: Any = None, twice: bool = False, late: bool = False) -> list[Op]:
    h = stranded(8.97)
    stop = next(o for o in h if o["f"] == "stop-clients")
    if detail is not None:
        stop["detail"] = detail
    extra = []
    if twice:
        extra.append({**stop, "time": stop["time"] + 1})
    if late:
        extra.append({"time": stop["time"] + 2, "process": 2, "type": "ok", "f": "acquire",
                      "value": None, "lock": "lock"})
    h = sorted(h + extra, key=lambda o: o["time"])
    return [{**o, "index": i} for i, o in enumerate(h)]


@pytest.mark.parametrize(("history", "words"), [
    (mangled(detail={"killed": "1,2"}), "names no list of killed client processes"),
    (mangled(detail={"killed": [1, -2]}), "names no list of killed client processes"),
    (mangled(detail=["killed"]), "names no list of killed client processes"),
    (mangled(twice=True), "two stop-clients records"),
    (mangled(late=True), "comes after the clients were stopped and it was killed"),
])
def test_a_malformed_end_is_refused(history: list[Op], words: str) -> None:
    for h in (Shared(copy.deepcopy(history)), merged_columns(copy.deepcopy(history))):
        with pytest.raises(ValueError, match=words):
            LivenessChecker.check(h, ttl=2.0)
