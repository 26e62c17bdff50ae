"""checker.lockorder (lock histories by the order of their critical sections) against the brute
force and against the search (checker.wgl), on valid and invalid histories, ties included.

The brute force and the generators are test_linearizable's; the search is run alone by giving
it a model it does not recognise (the same step, wrapped).
"""

from __future__ import annotations

import contextlib
import itertools
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tests.test_linearizable as lin
from checker import lockorder
from checker.linearizable import check
from checker.models import MODELS, Model
from tests.test_linearizable import (
    Picker,
    assert_agrees,
    assert_witness_sound,
    brute_force,
    hist,
    load_bench,
    mutate,
    random_ops,
    simulated_ops,
)

LOCK_MODELS = ["mutex", "fenced-mutex"]
SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
Op = dict[str, Any]


@pytest.fixture(autouse=True)
def strict(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the sections decide is never second-guessed by their own safety nets here: a
    certification that fails, or a search that contradicts them, is an error."""
    monkeypatch.setattr(lockorder, "STRICT", True)


def search_only(name: str) -> Model:
    """The same model, which checker.lockorder does not recognise: the search decides."""
    m = MODELS[name]
    step = m.step
    return m.replace(step=lambda *args: step(*args))


def spread(history: list[Op]) -> list[Op]:
    """The same history with every time distinct (as real ns clocks give): no ties."""
    return [{**op, "time": op["time"] * 100 + k} for k, op in enumerate(history)]


@st.composite
def lock_history(draw: st.DrawFn, model_name: str) -> list[Op]:
    pick = Picker(draw=draw)
    h = (simulated_ops if pick.int(0, 2) else random_ops)(model_name, pick)
    if pick.int(0, 1):
        h = mutate(h, random.Random(pick.int(0, 2**31)))
    return spread(h) if pick.int(0, 3) else h  # a quarter keep their ties


@pytest.mark.parametrize("model_name", LOCK_MODELS)
@SETTINGS
@given(data=st.data())
def test_agrees_with_brute_force(model_name: str, data: st.DataObject) -> None:
    assert_agrees(data.draw(lock_history(model_name)), model_name)


def test_it_decides_most_lock_histories_itself() -> None:
    """Not vacuous: on histories without ties it decides nearly all, valid and invalid alike."""
    rnd = random.Random(11)
    decided = {True: 0, False: 0}
    total = 0
    for i in range(600):
        name = LOCK_MODELS[i % 2]
        h = spread(mutate(simulated_ops(name, Picker(rnd=rnd)), rnd))
        result = check(h, name)
        if result["valid"] == "unknown":
            continue
        total += 1
        if result["methods"] == {"sections": 1}:
            decided[result["valid"]] += 1
    assert decided[True] + decided[False] >= 0.9 * total
    assert min(decided.values()) >= 0.2 * total


def test_agrees_with_the_search_on_longer_histories() -> None:
    """Up to 30 invocations, or a simulated lock service of up to 150 ops with crashes,
    timeouts and an injected grant to a second holder: the same verdict as the search, and the
    same blocked op and words when the violation is the injected one."""
    bench = load_bench()
    rnd = random.Random(5)
    checked = 0
    for i in range(300):
        name = LOCK_MODELS[i % 2]
        if i % 3 == 0:
            h = bench.mutex_history(rnd.randint(5, 150), rnd.randint(1, 6), rnd.randint(0, 10**6),
                                    crash_rate=rnd.random() * 0.3,
                                    timeout_rate=rnd.random() * 0.6, info_rate=rnd.random())
            if rnd.random() < 0.5:
                with contextlib.suppress(ValueError):  # no place to inject one
                    h = bench.inject_violation(h, rnd.random())
        else:
            old = lin.MAX_INVOKES
            lin.MAX_INVOKES = rnd.randint(8, 30)
            try:
                h = simulated_ops(name, Picker(rnd=rnd))
            finally:
                lin.MAX_INVOKES = old
            h = spread(mutate(h, rnd)) if rnd.random() < 0.7 else h
        fast = check(h, name)
        slow = check(h, search_only(name), time_limit=20)
        if slow["valid"] == "unknown":
            continue
        checked += 1
        assert fast["valid"] == slow["valid"], h
    assert checked >= 250


def test_the_witness_of_an_injected_violation_is_the_searchs() -> None:
    bench = load_bench()
    for seed in range(10):
        h = bench.inject_violation(bench.mutex_history(1500, 8, seed, crash_rate=0.02,
                                                       timeout_rate=0.2))
        fast, slow = check(h, "mutex"), check(h, search_only("mutex"))
        assert fast["methods"] == {"sections": 1} and slow["methods"] == {"search": 1}
        assert fast["witness"]["blocked"] == slow["witness"]["blocked"]
        words = fast["witness"]["explanation"]
        assert words.split(". No order")[0] == slow["witness"]["explanation"].split(". No order")[0]
        assert words.count("acquired at") >= 2  # both holders named
        assert_witness_sound(h, fast, "mutex")


# ---------------------------------------------------------------------------------------------
# Hand-written: the shapes the sections must get right, and those left to the search


def decided_by(history: list[Op], name: str = "mutex") -> tuple[Any, str]:
    result = check(history, name)
    assert result["valid"] == brute_force(history, name)
    return result["valid"], "+".join(result["methods"])


def test_an_unknown_acquire_grants_a_later_release() -> None:
    """Process 1's acquire timed out; it released later, ok: the acquire took effect."""
    h = hist((1.0, 1, "invoke", "acquire"), (2.0, 1, "info", "acquire"),
             (3.0, 2, "invoke", "acquire"), (3.1, 2, "fail", "acquire"),
             (5.0, 1, "invoke", "release"), (5.1, 1, "ok", "release"))
    assert decided_by(h) == (True, "sections")


def test_an_unknown_release_frees_the_lock_for_the_next_grant() -> None:
    h = hist((1.0, 1, "invoke", "acquire"), (1.1, 1, "ok", "acquire"),
             (2.0, 1, "invoke", "release"), (3.0, 1, "info", "release"),
             (4.0, 2, "invoke", "acquire"), (4.1, 2, "ok", "acquire"),
             (5.0, 1, "invoke", "acquire"), (5.1, 1, "fail", "acquire"))
    assert decided_by(h) == (True, "sections")


def test_an_unknown_release_frees_the_lock_for_the_holders_next_grant() -> None:
    h = hist((1.0, 1, "invoke", "acquire"), (1.1, 1, "ok", "acquire"),
             (2.0, 1, "invoke", "release"), (3.0, 1, "info", "release"),
             (4.0, 2, "invoke", "acquire"), (4.1, 2, "ok", "acquire"),
             (4.5, 2, "invoke", "release"), (4.6, 2, "ok", "release"),
             (5.0, 1, "invoke", "acquire"), (5.1, 1, "ok", "acquire"))
    assert decided_by(h) == (True, "sections")
    held = h[:4] + h[8:]  # nobody else: the holder's own next grant needs the release too
    assert decided_by([{**op, "index": i} for i, op in enumerate(held)]) == (True, "sections")


def test_a_release_with_nothing_to_grant_it_is_invalid_and_says_so() -> None:
    h = hist((1.0, 1, "invoke", "acquire"), (1.1, 1, "ok", "acquire"),
             (2.0, 2, "invoke", "release"), (2.1, 2, "ok", "release"),
             (3.0, 1, "invoke", "release"), (3.1, 1, "ok", "release"))
    valid, how = decided_by(h)
    assert (valid, how) == (False, "sections")
    words = check(h, "mutex")["witness"]["explanation"]
    assert "process 2 released the lock at 2.100 s" in words


def test_stale_fencing_token_is_found_by_the_order() -> None:
    h = hist((1.0, 1, "invoke", "acquire"), (1.1, 1, "ok", "acquire", None, {"token": 7}),
             (2.0, 1, "invoke", "release"), (2.1, 1, "ok", "release"),
             (3.0, 2, "invoke", "acquire"), (3.1, 2, "ok", "acquire", None, {"token": 5}))
    assert decided_by(h, "fenced-mutex") == (False, "sections")
    assert "fencing tokens must increase" in check(h, "fenced-mutex")["witness"]["explanation"]
    assert decided_by(h, "mutex") == (True, "sections")


def test_overlapping_unknown_grants_are_ordered_exactly() -> None:
    """Two processes' acquires time out; each releases later, ok, the windows of the releases
    overlapping: the sections' deadlines come after their ends, and only one order works."""
    h = hist((0.0, 1, "invoke", "acquire"), (0.5, 1, "info", "acquire"),
             (0.1, 2, "invoke", "acquire"), (0.6, 2, "info", "acquire"),
             (1.0, 2, "invoke", "release"), (3.0, 1, "invoke", "release"),
             (2.0, 2, "ok", "release"), (4.0, 1, "ok", "release"))
    h = [{**op, "index": i} for i, op in enumerate(sorted(h, key=lambda op: op["time"]))]
    assert decided_by(h) == (True, "sections")


def test_a_release_and_the_next_acquire_at_the_same_instant() -> None:
    """Real clocks rarely tie, simulated ones do: a release completing at the very time the
    same process invokes its next acquire leaves nothing to choose."""
    h = hist((1.0, 1, "invoke", "acquire"), (1.1, 1, "ok", "acquire"),
             (2.0, 1, "invoke", "release"), (2.1, 1, "ok", "release"),
             (2.1, 1, "invoke", "acquire"), (2.2, 1, "ok", "acquire"))
    assert decided_by(h) == (True, "sections")


def test_ties_that_leave_a_choice_go_to_the_search() -> None:
    """A refused release completing the instant the process acquires again: the acquire may be
    first (and the refusal then ends it), which makes the second acquire possible."""
    h = hist((1.0, 1, "invoke", "release"), (2.0, 1, "fail", "release", None,
                                               {"error": "not-held"}),
             (2.0, 1, "invoke", "acquire"), (2.5, 1, "ok", "acquire"),
             (3.0, 1, "invoke", "acquire"), (3.5, 1, "ok", "acquire"))
    assert decided_by(h) == (True, "search")


def test_an_early_release_that_may_or_may_not_have_happened_goes_to_the_search() -> None:
    """Holding, a release times out, an acquire times out, then an extend completes ok: the
    lock may have been freed and granted again in between, or held all along."""
    h = hist((1.0, 1, "invoke", "acquire"), (1.1, 1, "ok", "acquire"),
             (2.0, 1, "invoke", "release"), (2.5, 1, "info", "release"),
             (3.0, 1, "invoke", "acquire"), (3.5, 1, "info", "acquire"),
             (4.0, 1, "invoke", "extend"), (4.1, 1, "ok", "extend"))
    assert decided_by(h) == (True, "search")


def test_an_order_that_fails_to_replay_goes_to_the_search(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """Certification: a valid verdict stands only on an order the model replays; should one
    ever fail, the search decides."""
    monkeypatch.setattr(lockorder, "STRICT", False)
    monkeypatch.setattr(lockorder, "certified", lambda *args: False)
    h = hist((1.0, 1, "invoke", "acquire"), (1.1, 1, "ok", "acquire"),
             (2.0, 1, "invoke", "release"), (2.1, 1, "ok", "release"))
    result = check(h, "mutex")
    assert result["valid"] is True and result["methods"] == {"search": 1}


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9) | st.none(),
                          st.integers(0, 4) | st.none(), st.booleans()), max_size=8))
def test_the_scan_for_a_last_section_is_the_peels_first_step(
        raw: list[tuple[int, int | None, int | None, bool]]) -> None:
    """Whether anything can go last, by scans, is what the heaps find; and an order built from
    the end really is one (every section after the ends before it, tokens rising)."""
    acquire = object()
    sections = []
    for d, e, token, possible in raw:
        s = lockorder.Section(0, acquire if possible else None, 0, d)  # type: ignore[arg-type]
        s.e = float("inf") if e is None else e
        s.token = token
        sections.append(s)
    taken, left = lockorder.peel(sections)
    assert lockorder.any_can_go_last(sections) == bool(taken)
    if not left:
        order = taken[::-1]
        assert lockorder.first_misfit(order) == len(order)
    if len(sections) <= 6:  # and the peel is exact: stuck only when no order exists at all
        feasible = any(lockorder.first_misfit(list(order)) == len(order)
                       for order in itertools.permutations(sections))
        assert feasible == (not left)
