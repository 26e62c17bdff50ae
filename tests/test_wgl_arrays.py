"""The search's entry lists made by array operations (checker.wgl_arrays, for a big part)
against those the walk of the sorted events makes (checker.wgl.Part._build_lists): the same
lists, call for call, on generated lock histories with equal times, unknown outcomes and
refused ops; the same verdict, witness and counts from check(), each way those captured at
fc2df38 (an oracle for whoever makes the two ways one); and calls the arrays cannot hold (a
completion before its invocation, a seq twice, a time no int64) left to the walk."""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checker import lockorder, wgl
from checker.calls import Call, prepare
from checker.linearizable import check
from checker.models import get_model
from checker.wgl_arrays import entry_lists
from tests.test_linearizable import Picker, generated_service, load_bench, mutate, simulated_ops

LISTS = ("tail", "entry_op", "is_call", "entry_pos", "call_entry", "return_entry", "known",
         "unknown", "info_pos", "twin_after", "next_info", "prev_info", "next_entry",
         "prev_entry", "info_head", "info_tail")


def both_ways(calls: list[Call], model: Any, monkeypatch: pytest.MonkeyPatch
              ) -> tuple[wgl.Part, wgl.Part]:
    monkeypatch.setattr(wgl, "ARRAYS_FROM", 10**9)
    walked = wgl.Part("k", calls, model)
    monkeypatch.setattr(wgl, "ARRAYS_FROM", 0)
    arrays = wgl.Part("k", calls, model)
    return walked, arrays


def assert_same_lists(walked: wgl.Part, arrays: wgl.Part) -> None:
    for name in LISTS:
        a, b = getattr(walked, name), getattr(arrays, name)
        if name in ("known", "unknown"):
            assert [id(c) for c in a] == [id(c) for c in b], name
        else:
            assert a == b, name
            assert type(a) is type(b), name


def parts(history: list[dict[str, Any]], model: str) -> list[list[Call]]:
    return [list(calls) for calls in prepare(history, get_model(model)).parts.values()]


@pytest.mark.parametrize("model", ["mutex", "fenced-mutex"])
def test_generated_lock_histories_give_the_same_lists(model: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(5)
    for i in range(30):
        h = generated_service(rnd, 400, 6, least=1, invalid=bool(i % 2))
        if i % 3 == 0:  # equal times: the order of (time, call before return, seq) decides
            for op in h:
                op["time"] = op["time"] // 3_000_000
        for calls in parts(h, model):
            assert_same_lists(*both_ways(calls, get_model(model), monkeypatch))


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_simulated_and_mutated_histories_check_the_same(data: st.DataObject) -> None:
    """check() with every part's lists made by arrays: the verdict, witness and counts of the
    walk's (lockorder made strict: the search decides what it cannot)."""
    pick = Picker(draw=data.draw)
    model = ("mutex", "fenced-mutex")[pick.int(0, 1)]
    h = simulated_ops(model, pick)
    h = mutate(h, random.Random(pick.int(0, 2**31)))
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(lockorder, "applies", lambda m: False)  # every part to the search
        mp.setattr(wgl, "ARRAYS_FROM", 10**9)
        walked = check(h, model)
        mp.setattr(wgl, "ARRAYS_FROM", 0)
        arrays = check(h, model)
    finally:
        mp.undo()
    assert arrays == walked


def oracle_histories() -> Any:
    """Simulated histories of both models (two in three mutated), then the benchmark's lock
    service of up to 400 ops (a grant injected in every other one, one in three with times so
    coarse that many are equal)."""
    for seed in range(300):
        rnd = random.Random(seed)
        model = ("mutex", "fenced-mutex")[seed % 2]
        h = simulated_ops(model, Picker(rnd=rnd))
        yield model, (mutate(h, rnd) if seed % 3 else h)
    for seed in range(40):
        rnd = random.Random(1000 + seed)
        h = generated_service(rnd, 400, 6, least=1, invalid=bool(seed % 2))
        if seed % 3 == 0:
            for op in h:
                op["time"] = op["time"] // 3_000_000
        yield ("mutex", "fenced-mutex")[seed % 2], h


def digest(result: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(result, sort_keys=True, default=repr).encode()).hexdigest()


# check() of oracle_histories() at fc2df38, every part to the search: each verdict (V valid,
# I invalid, U unknown: nothing to check), and the digest of every result in turn.
ORACLE_VERDICTS = (
    "VVUVIVVIIVVVVVIUIIVVVVVUVUVVVIVVVVVVVIVVVVUVVVVUVVIVVIVIVVVVVVVVIIVVIVVIVVVVVIVVIVVIVV"
    "IVVVUIIVVIVVIVVIVVIVUVUIIVVVVUUVIIVIVVVIVIVUVVVIVVVUVVVVIUVIUVVVVVIUIVVVVVVIVIIVVVVIVV"
    "VIVIVVVIVUIVUIVVVVVIUVIUVVVVIVIVUIUVVVUUIVIVVIIVUVVVVVUIVIVUIIVVIVVVUVUVVIVIIVVIVVIUIV"
    "UVVVVIVIVUVUVVIVVIVIIVVIVIVUVIVVVVIVVVVVIVVIVIVIVIVVVIVIVIVIVIVIVIVVVVVIVIVIVIVIVI")
ORACLE_DIGEST = "b2c7172919cbf2343ddb78be1e8fc0214bbfa3cc43f56dcc7639e9c48d1495dc"


@pytest.mark.parametrize("arrays_from", [0, 10**9])
def test_the_search_gives_the_oracles_verdicts_and_witnesses(
        arrays_from: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lockorder, "applies", lambda m: False)  # every part to the search
    monkeypatch.setattr(wgl, "ARRAYS_FROM", arrays_from)
    total = hashlib.sha256()
    verdicts = []
    for model, h in oracle_histories():
        result = check(h, model)
        total.update(json.dumps(result, sort_keys=True, default=repr).encode())
        verdicts.append({True: "V", False: "I"}.get(result["valid"], "U"))
    assert "".join(verdicts) == ORACLE_VERDICTS
    assert total.hexdigest() == ORACLE_DIGEST


def test_the_big_invalid_core_is_built_by_arrays_and_found_invalid(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A part above ARRAYS_FROM calls (the default) takes the arrays' way, and the verdict
    and witness are the walk's."""
    bench = load_bench()
    h = bench.inject_violation(bench.mutex_history(30_000, 6, seed=4), 0.5)
    built = []
    make = wgl.Part._entries_by_arrays

    def counted(self: wgl.Part, calls: list[Call]) -> bool:
        built.append(len(calls))
        return make(self, calls)

    monkeypatch.setattr(wgl.Part, "_entries_by_arrays", counted)
    monkeypatch.setattr(lockorder, "applies", lambda m: False)
    arrays = check(h, "mutex")
    assert built and max(built) >= wgl.ARRAYS_FROM
    monkeypatch.setattr(wgl, "ARRAYS_FROM", 10**9)
    walked = check(h, "mutex")
    assert arrays["valid"] is False
    assert arrays == walked
    assert (arrays["states"], digest(arrays)) == (  # (as at fc2df38)
        76099, "2883b814f4229e7f1a5dd4f3c24bb2b350d1a43fb6f1318497de077457c9cc81")


def call(start: Any, end: Any, seq: int, known: bool = True, process: int = 1,
         f: str = "acquire") -> Call:
    c = Call({"f": f, "process": process}, f, start, seq, process)
    if known:
        c.known, c.end = True, end
    else:
        c.unknown_outcome()
    return c


def test_calls_the_arrays_cannot_hold_are_left_to_the_walk() -> None:
    ok = [call(0, 5, 0), call(1, None, 1, known=False, process=2), call(6, 9, 2, f="release")]
    assert entry_lists(ok) is not None
    before = [call(0, 5, 0), call(7, 6, 1, f="release")]  # completed before it was invoked
    assert entry_lists(before) is None
    twice = [call(0, 5, 3), call(6, 9, 3, f="release")]  # seq twice
    assert entry_lists(twice) is None
    huge = [call(0, 2**70, 0)]  # no int64
    assert entry_lists(huge) is None
    odd = [call("0", 5, 0)]  # a time no int
    assert entry_lists(odd) is None
    half = [call(0, 5.5, 0)]  # a float: the walk compares it as it is, int64 would cut it
    assert entry_lists(half) is None
    flag = [call(0, True, 0)]  # a bool
    assert entry_lists(flag) is None
    big_seq = [call(0, 5, 2**64)]
    assert entry_lists(big_seq) is None


def test_refused_calls_fall_back_to_the_same_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    """A part the arrays refuse gets the walk's lists, as it always did (here: a seq twice,
    which the walk numbers as it always has)."""
    calls = [call(0, 5, 0), call(1, 4, 1, process=2), call(6, 9, 1, f="release")]
    walked, arrays = both_ways(calls, get_model("mutex"), monkeypatch)
    assert_same_lists(walked, arrays)
