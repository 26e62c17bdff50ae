"""The linearizability checker against a brute force, on generated and hand-written histories.

The brute force here is written independently of ``checker.linearizable``: it pairs ops itself
and tries every subset of the indeterminate ops in every order that respects real time.
"""

from __future__ import annotations

import contextlib
import importlib.util
import random
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from checker import lockorder
from checker.linearizable import check
from checker.models import MODELS, freeze

SECOND = 1_000_000_000
MODEL_NAMES = sorted(MODELS)
MAX_INVOKES = 8  # ops per generated history: the brute force is exponential
SETTINGS = settings(max_examples=250, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

Op = dict[str, Any]


@pytest.fixture(autouse=True)
def strict_sections(monkeypatch: pytest.MonkeyPatch) -> None:
    """checker.lockorder's safety nets (a certification that fails, a search that contradicts
    it) are errors here, not quiet fallbacks."""
    monkeypatch.setattr(lockorder, "STRICT", True)


# ---------------------------------------------------------------------------------------------
# The brute force


def ops_for_brute(history: list[Op], model_name: str) -> list[dict[str, Any]]:
    """(f, value, completion, start, end or None) per op the model must consider."""
    model = MODELS[model_name]
    open_: dict[Any, Op] = {}
    out: list[dict[str, Any]] = []

    def add(inv: Op, comp: Op | None) -> None:
        failed = comp is not None and comp["type"] == "fail"
        understood = model.understood_failure
        if inv["f"] not in model.fs or (failed and not (
                understood is not None and understood({**comp, "f": inv["f"]}))):
            return
        known = comp is not None and comp["type"] in ("ok", "fail")
        out.append({
            "f": inv["f"], "value": inv.get("value"),
            "completion": comp if known else {"type": "info", "process": inv["process"],
                                               "f": inv["f"]},
            "start": inv["time"], "end": comp["time"] if known else None,
        })

    for op in history:
        p = op["process"]
        if p == "nemesis":
            continue
        if op["type"] == "invoke":
            if p in open_:
                add(open_.pop(p), None)
            open_[p] = op
        elif p in open_:
            add(open_.pop(p), op)
    for inv in open_.values():
        add(inv, None)
    return out


def brute_force(history: list[Op], model_name: str) -> bool | str:
    """Is there a subset of the indeterminate ops and an order of everything that works?
    ("unknown" when the model has nothing to check in the history.)"""
    model = MODELS[model_name]
    ops = ops_for_brute(history, model_name)
    n = len(ops)
    if n == 0:
        return "unknown"
    required = sum(1 << i for i, o in enumerate(ops) if o["end"] is not None)
    preds = [
        sum(1 << j for j, a in enumerate(ops) if a["end"] is not None and a["end"] < b["start"])
        for b in ops
    ]

    @cache
    def go(done: int, state: Any) -> bool:
        if done & required == required:
            return True
        for i in range(n):
            if done >> i & 1 or preds[i] & ~done:
                continue
            o = ops[i]
            nxt = model.step(state, o["f"], o["value"], o["completion"])
            if nxt is not None and go(done | 1 << i, nxt):
                return True
        return False

    return go(0, model.init)


# ---------------------------------------------------------------------------------------------
# Generators


class Picker:
    """Where a generator's choices come from: hypothesis (shrinks) or a seeded Random (sweeps)."""

    def __init__(self, draw: st.DrawFn | None = None, rnd: random.Random | None = None) -> None:
        self.draw = draw
        self.rnd = rnd

    def int(self, lo: int, hi: int) -> int:
        if self.draw is not None:
            return self.draw(st.integers(lo, hi))
        assert self.rnd is not None
        return self.rnd.randint(lo, hi)

    def one(self, options: list[Any]) -> Any:
        return options[self.int(0, len(options) - 1)]


def pick_op(model_name: str, pick: Picker) -> tuple[str, Any]:
    """An invocation (f, value) the model knows."""
    if model_name in ("mutex", "fenced-mutex"):
        return pick.one(["acquire", "release"]), None
    fs = ["read", "write"] if model_name == "register" else ["read", "write", "cas"]
    f = pick.one(fs)
    if f == "read":
        return f, None
    if f == "write":
        return f, pick.int(0, 2)
    return f, [pick.one([None, 0, 1, 2]), pick.one([None, 0, 1, 2])]


def finish(events: list[Op]) -> list[Op]:
    return [{"index": i, **e} for i, e in enumerate(events)]


def random_ops(model_name: str, pick: Picker, *, invokes_max: int = MAX_INVOKES,
               outcomes: tuple[str, ...] = ("ok", "ok", "ok", "fail", "info")) -> list[Op]:
    """Any shape at all: overlapping ops, info, fail, crashes (no completion), nemesis noise."""
    procs = pick.int(1, 4)
    t = 0
    events: list[Op] = []
    open_: dict[int, Op] = {}
    invokes = 0
    for _ in range(pick.int(0, 2 * invokes_max + 2)):
        t += pick.int(0, 2) * SECOND // 10
        p = pick.int(0, procs - 1)
        if pick.int(0, 15) == 0:
            events.append({"time": t, "process": "nemesis", "type": "info", "f": "partition",
                           "value": "start"})
            continue
        reinvoke = pick.int(0, 9) == 0  # the open op never completes (a crash)
        if p in open_ and not reinvoke:
            inv = open_.pop(p)
            ty = pick.one(list(outcomes))
            comp: Op = {"time": t, "process": p, "type": ty, "f": inv["f"],
                        "value": inv["value"]}
            if inv["f"] == "read":
                comp["value"] = pick.one([None, 0, 1, 2])
            if inv["f"] == "acquire" and ty == "ok":
                comp["token"] = pick.int(0, 3)
            if inv["f"] in ("release", "extend") and ty == "fail" and pick.int(0, 1):
                comp["error"] = "not-held"  # refused: the lock was not the caller's
            events.append(comp)
        elif invokes < invokes_max:
            f, value = pick_op(model_name, pick)
            inv = {"time": t, "process": p, "type": "invoke", "f": f, "value": value}
            events.append(inv)
            open_[p] = inv
            invokes += 1
    return finish(events)


class Sim:
    """A real sequential object, independent of checker.models, to generate valid histories."""

    def __init__(self) -> None:
        self.holder: Any = None
        self.value: Any = None
        self.token = 0

    def apply(self, p: int, f: str, value: Any) -> tuple[bool, dict[str, Any]]:
        """Take effect now if allowed; return (happened, fields for an ok completion)."""
        if f == "acquire":
            if self.holder is not None:
                return False, {}
            self.holder = p
            self.token += 1
            return True, {"token": self.token}
        if f == "release":
            if self.holder != p:
                return False, {}
            self.holder = None
            return True, {}
        if f == "write":
            self.value = value
            return True, {"value": value}
        if f == "read":
            return True, {"value": self.value}
        old, new = value
        if self.value != old:
            return False, {}
        self.value = new
        return True, {"value": value}


def simulated_ops(model_name: str, pick: Picker) -> list[Op]:
    """Valid by construction: every op takes effect (or not) at one instant inside its window;
    an info op may take effect after its completion, and a crashed one at any later time."""
    sim = Sim()
    procs = pick.int(1, 4)
    t = 0
    events: list[Op] = []
    pending: dict[int, dict[str, Any]] = {}
    loose: list[dict[str, Any]] = []  # indeterminate and not yet effected: may happen later
    dead: set[int] = set()
    invokes = 0

    def effect(op: dict[str, Any]) -> None:
        op["happened"], op["fields"] = sim.apply(op["p"], op["f"], op["value"])
        op["effected"] = True

    for _ in range(pick.int(0, 5 * MAX_INVOKES)):
        t += pick.int(0, 2) * SECOND // 10
        action = pick.one(["invoke", "invoke", "effect", "complete", "complete", "crash",
                           "late", "invoke", "effect", "complete"])
        live = [p for p in range(procs) if p not in dead]
        if action == "invoke" and invokes < MAX_INVOKES:
            idle = [p for p in live if p not in pending]
            if idle:
                p = pick.one(idle)
                f, value = pick_op(model_name, pick)
                events.append({"time": t, "process": p, "type": "invoke", "f": f,
                               "value": value})
                pending[p] = {"p": p, "f": f, "value": value, "effected": False}
                invokes += 1
        elif action == "effect" and pending:
            op = pending[pick.one(sorted(pending))]
            if not op["effected"]:
                effect(op)
        elif action == "complete" and pending:
            p = pick.one(sorted(pending))
            op = pending.pop(p)
            if not op["effected"] and pick.int(0, 1):
                effect(op)
            comp: Op = {"time": t, "process": p, "f": op["f"], "value": op["value"]}
            if pick.int(0, 4) == 0:
                comp["type"] = "info"
                if not op["effected"]:
                    loose.append(op)
            elif op["effected"] and op["happened"]:
                comp.update(type="ok", **op["fields"])
            else:
                comp["type"] = "fail"
            events.append(comp)
        elif action == "crash" and pending:
            p = pick.one(sorted(pending))
            op = pending.pop(p)
            dead.add(p)
            if not op["effected"]:
                loose.append(op)
        elif action == "late" and loose:
            op = loose.pop(pick.int(0, len(loose) - 1))
            if pick.int(0, 1):
                effect(op)
    return finish(events)


@st.composite
def random_history(draw: st.DrawFn, model_name: str) -> list[Op]:
    return random_ops(model_name, Picker(draw=draw))


@st.composite
def info_heavy_history(draw: st.DrawFn, model_name: str) -> list[Op]:
    """More ops, half of them indeterminate: where pruning by subsets of the linearized
    indeterminate ops, and twins across processes, do their work."""
    return random_ops(model_name, Picker(draw=draw), invokes_max=MAX_INVOKES + 3,
                      outcomes=("ok", "info", "info", "ok", "fail"))


@st.composite
def simulated_history(draw: st.DrawFn, model_name: str) -> list[Op]:
    return simulated_ops(model_name, Picker(draw=draw))


def mutate(history: list[Op], rnd: random.Random) -> list[Op]:
    """Change one completion: a read's value, a token, a fail into an ok or an ok into a fail."""
    h = [dict(op) for op in history]
    comps = [op for op in h if op["type"] in ("ok", "fail") and op["process"] != "nemesis"]
    changes: list[tuple[Op, str]] = []
    for op in comps:
        if op["type"] == "ok" and op["f"] == "read":
            changes += [(op, "read")] * 3
        if op["type"] == "ok" and op["f"] == "acquire":
            changes.append((op, "token"))
        changes.append((op, "flip"))
    if not changes:
        return h
    op, kind = rnd.choice(changes)
    if kind == "read":
        op["value"] = rnd.choice([v for v in (None, 0, 1, 2) if v != op.get("value")])
    elif kind == "token":
        op["token"] = rnd.randrange(0, 5)
    elif op["type"] == "fail":
        op["type"] = "ok"
        if op["f"] == "acquire":
            op["token"] = rnd.randrange(0, 5)
        if op["f"] == "read":
            op["value"] = rnd.choice([None, 0, 1, 2])
    else:
        op["type"] = "fail"
    return h


# ---------------------------------------------------------------------------------------------
# Properties


def assert_witness_sound(history: list[Op], result: dict[str, Any], model_name: str) -> None:
    """The witness's prefix really is a linearizable prefix ending in the reported state."""
    w = result["witness"]
    assert w["explanation"]
    assert w["blocked"] and w["blocked"][0] not in w["prefix"]
    model = MODELS[model_name]
    by_index = {op["index"]: op for op in history}
    comp_of: dict[int, Op | None] = {}
    open_: dict[Any, Op] = {}
    for op in history:
        if op["type"] == "invoke":
            if op["process"] in open_:
                comp_of[open_[op["process"]]["index"]] = None
            open_[op["process"]] = op
        elif op["process"] in open_:
            comp_of[open_.pop(op["process"])["index"]] = op
    state = model.init
    for idx in w["prefix"]:
        inv = by_index[idx]
        comp = comp_of.get(idx)
        if comp is None or comp["type"] not in ("ok", "fail"):
            comp = {"type": "info", "process": inv["process"], "f": inv["f"]}
        state = model.step(state, inv["f"], inv.get("value"), comp)
        assert state is not None
    assert list(state) == list(w["state"]) or freeze(list(state)) == freeze(w["state"])


def assert_agrees(history: list[Op], model_name: str) -> dict[str, Any]:
    """The checker's verdict is the brute force's, and an invalid one has a sound witness."""
    expected = brute_force(history, model_name)
    result = check(history, model_name)
    event(f"{'+'.join(result.get('methods', {}))}: valid={expected}")
    assert result["valid"] == expected
    if expected is False:
        assert_witness_sound(history, result, model_name)
    return result


@pytest.mark.parametrize("shape", [random_history, info_heavy_history])
@pytest.mark.parametrize("model_name", MODEL_NAMES)
@SETTINGS
@given(data=st.data())
def test_agrees_with_brute_force_on_random_histories(model_name: str, shape: Any,
                                                     data: st.DataObject) -> None:
    assert_agrees(data.draw(shape(model_name)), model_name)


@pytest.mark.parametrize("model_name", MODEL_NAMES)
@SETTINGS
@given(data=st.data())
def test_valid_by_construction_passes(model_name: str, data: st.DataObject) -> None:
    history = data.draw(simulated_history(model_name))
    expected = brute_force(history, model_name)
    assert expected in (True, "unknown")
    assert check(history, model_name)["valid"] == expected


@pytest.mark.parametrize("model_name", MODEL_NAMES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_mutations_agree_with_brute_force(model_name: str, data: st.DataObject,
                                          seed: int) -> None:
    history = mutate(data.draw(simulated_history(model_name)), random.Random(seed))
    expected = brute_force(history, model_name)
    event(f"valid={expected}")
    result = check(history, model_name)
    assert result["valid"] == expected
    if expected is False:
        assert_witness_sound(history, result, model_name)


def test_mutations_do_find_invalid_histories() -> None:
    """The mutation property is not vacuous: a fair share of mutants are invalid, all caught."""
    rnd = random.Random(7)
    invalid = 0
    for model_name in MODEL_NAMES:
        for _ in range(100):
            history = mutate(simulated_ops(model_name, Picker(rnd=rnd)), rnd)
            expected = brute_force(history, model_name)
            result = check(history, model_name)
            assert result["valid"] == expected
            if expected is False:
                assert_witness_sound(history, result, model_name)
            invalid += expected is False
    assert invalid >= 40


# ---------------------------------------------------------------------------------------------
# Hand-written histories


def hist(*rows: tuple[Any, ...], **extra: Any) -> list[Op]:
    """Rows of (seconds, process, type, f[, value[, fields]])."""
    out = []
    for i, row in enumerate(rows):
        t, p, ty, f, *rest = row
        op: Op = {"index": i, "time": round(t * SECOND), "process": p, "type": ty, "f": f,
                  "value": rest[0] if rest else None}
        if len(rest) > 1:
            op.update(rest[1])
        op.update(extra)
        out.append(op)
    return out


def test_invalid_mutex_witness_names_both_processes() -> None:
    h = hist(
        (11.0, 1, "invoke", "acquire"), (11.02, 1, "ok", "acquire"),
        (12.1, 3, "invoke", "acquire"), (12.4, 3, "ok", "acquire"),
        (13.0, 1, "invoke", "release"), (13.1, 1, "ok", "release"),
        (13.2, 3, "invoke", "release"), (13.3, 3, "ok", "release"),
    )
    r = check(h, "mutex")
    assert r["valid"] is False
    w = r["witness"]
    assert w["blocked"] == [2]
    assert w["prefix"] == [0]
    assert set(w["ops"]) >= {0, 2}
    text = w["explanation"]
    assert "process 3 acquired at 12.400 s" in text
    assert "process 1, which acquired at 11.020 s, had not released" in text
    assert "next release was invoked at 13.000 s" in text
    # the conflict: from the later grant until process 1 began to release
    assert (w["from"], w["until"], w["processes"]) == (12.4, 13.0, [1, 3])


def test_valid_mutex_with_overlapping_acquires() -> None:
    h = hist(
        (1.0, 1, "invoke", "acquire"), (1.1, 2, "invoke", "acquire"),
        (1.2, 1, "ok", "acquire"), (2.0, 1, "invoke", "release"),
        (2.5, 2, "ok", "acquire"), (2.6, 1, "ok", "release"),
    )
    assert check(h, "mutex")["valid"] is True


def test_info_acquire_that_never_happened_is_not_forced() -> None:
    """Process 1 timed out; process 2 then takes the lock and keeps it to the end."""
    h = hist(
        (1.0, 1, "invoke", "acquire"), (6.0, 1, "info", "acquire"),
        (7.0, 2, "invoke", "acquire"), (7.1, 2, "ok", "acquire"),
    )
    r = check(h, "mutex")
    assert r["valid"] is True and r["indeterminate"] == 1


def test_info_acquire_may_take_effect_late() -> None:
    """An acquire that timed out but was granted later explains a release by that process."""
    h = hist(
        (1.0, 1, "invoke", "acquire"), (2.0, 1, "info", "acquire"),
        (5.0, 1, "invoke", "release"), (5.1, 1, "ok", "release"),
    )
    assert check(h, "mutex")["valid"] is True


def test_crashed_acquire_without_completion() -> None:
    h = hist(
        (1.0, 1, "invoke", "acquire"),
        (2.0, 2, "invoke", "acquire"), (2.1, 2, "ok", "acquire"),
        (3.0, 3, "invoke", "acquire"), (3.2, 2, "invoke", "release"),
        (3.3, 2, "ok", "release"), (3.4, 3, "ok", "acquire"),
    )
    assert check(h, "mutex")["valid"] is True


def test_release_by_non_holder_is_invalid() -> None:
    h = hist(
        (1.0, 1, "invoke", "acquire"), (1.1, 1, "ok", "acquire"),
        (2.0, 2, "invoke", "release"), (2.1, 2, "ok", "release"),
    )
    r = check(h, "mutex")
    assert r["valid"] is False
    assert "process 2 released the lock at 2.100 s" in r["witness"]["explanation"]
    assert "process 1" in r["witness"]["explanation"]


def test_fail_and_nemesis_and_unmodelled_ops_are_left_out() -> None:
    h = hist(
        (0.5, "nemesis", "info", "partition", "start"),
        (1.0, 1, "invoke", "acquire"), (1.1, 1, "ok", "acquire"),
        (1.2, 1, "invoke", "write", {"kind": "enter"}), (1.3, 1, "ok", "write"),
        (2.0, 2, "invoke", "acquire"), (2.1, 2, "fail", "acquire"),
        (2.2, 2, "invoke", "release"), (2.3, 2, "fail", "release"),
    )
    r = check(h, "mutex")
    assert r["valid"] is True
    assert r["ops"] == 1 and r["failed"] == 2 and r["ignored"] == {"write": 1}


def test_a_refused_release_is_the_lease_lost_not_a_dropped_op() -> None:
    """python-redis-lock under pause: the holder's lease expires while it is frozen; its
    release is refused ("not the holder"); it acquires again. Nobody else held the lock in
    between: linearizable. (Dropping the refused release made the second acquire look like
    'acquired while it already held the lock'.)"""
    h = hist(
        (1.0, 1, "invoke", "acquire"), (1.1, 1, "ok", "acquire"),
        (6.0, 1, "invoke", "release"), (6.1, 1, "fail", "release", None,
                                                 {"error": "not-held: expired"}),
        (6.5, 1, "invoke", "acquire"), (6.6, 1, "ok", "acquire"),
        (7.0, 1, "invoke", "release"), (7.1, 1, "ok", "release"),
    )
    assert check(h, "mutex")["valid"] is True
    assert check(h, "fenced-mutex")["valid"] is True


def test_a_refused_release_after_another_grant_is_still_an_overlap() -> None:
    """Process 1 believed it held the lock until it tried to release at 6 s; process 2 was
    granted it at 3 s: two holders, whatever the refused release says afterwards."""
    h = hist(
        (1.0, 1, "invoke", "acquire"), (1.1, 1, "ok", "acquire"),
        (3.0, 2, "invoke", "acquire"), (3.1, 2, "ok", "acquire"),
        (6.0, 1, "invoke", "release"), (6.1, 1, "fail", "release", None,
                                                 {"error": "not-held: expired"}),
        (7.0, 2, "invoke", "release"), (7.1, 2, "ok", "release"),
    )
    r = check(h, "mutex")
    assert r["valid"] is False
    assert "process 2 acquired at 3.100 s" in r["witness"]["explanation"]


def test_fenced_mutex_tokens_must_increase() -> None:
    h = hist(
        (1.0, 1, "invoke", "acquire"), (1.1, 1, "ok", "acquire", None, {"token": 5}),
        (2.0, 1, "invoke", "release"), (2.1, 1, "ok", "release"),
        (3.0, 2, "invoke", "acquire"), (3.1, 2, "ok", "acquire", None, {"token": 5}),
    )
    assert check(h, "mutex")["valid"] is True
    r = check(h, "fenced-mutex")
    assert r["valid"] is False
    text = r["witness"]["explanation"]
    assert "granted token 5" in text and "process 1" in text


def test_register_stale_read_is_invalid() -> None:
    h = hist(
        (1.0, 1, "invoke", "write", 1), (1.1, 1, "ok", "write", 1),
        (2.0, 2, "invoke", "write", 2), (2.1, 2, "ok", "write", 2),
        (3.0, 3, "invoke", "read"), (3.1, 3, "ok", "read", 1),
    )
    r = check(h, "register")
    assert r["valid"] is False
    assert "process 3 read 1" in r["witness"]["explanation"]


def test_cas_register() -> None:
    ok = hist(
        (1.0, 1, "invoke", "write", 0), (1.1, 1, "ok", "write", 0),
        (2.0, 2, "invoke", "cas", [0, 3]), (2.5, 3, "invoke", "read"),
        (2.6, 3, "ok", "read", 3), (2.7, 2, "ok", "cas", [0, 3]),
    )
    assert check(ok, "cas-register")["valid"] is True
    bad = hist(
        (1.0, 1, "invoke", "write", 0), (1.1, 1, "ok", "write", 0),
        (2.0, 2, "invoke", "cas", [1, 3]), (2.7, 2, "ok", "cas", [1, 3]),
    )
    assert check(bad, "cas-register")["valid"] is False


def test_parts_are_checked_independently_and_the_smallest_failing_one_is_reported() -> None:
    a = hist((1.0, 1, "invoke", "acquire"), (1.1, 1, "ok", "acquire"),
             (2.0, 2, "invoke", "acquire"), (2.1, 2, "ok", "acquire"), lock="a")
    b = hist((1.0, 3, "invoke", "acquire"), (1.1, 3, "ok", "acquire"),
             (2.0, 4, "invoke", "acquire"), (2.1, 4, "ok", "acquire"),
             (3.0, 3, "invoke", "release"), (3.1, 3, "ok", "release"), lock="b")
    c = hist((1.0, 5, "invoke", "acquire"), (1.1, 5, "ok", "acquire"), lock="c")
    merged = sorted(a + b + c, key=lambda op: op["time"])
    h = [{**op, "index": i} for i, op in enumerate(merged)]
    r = check(h, "mutex")
    assert r["valid"] is False and r["parts"] == 3
    assert sorted(r["invalid_parts"]) == ["a", "b"]
    assert r["witness"]["lock"] == "a" and r["witness"]["part_ops"] == 2


def test_unknown_model_is_an_error() -> None:
    with pytest.raises(KeyError, match="known"):
        check([], "queue")


def test_a_history_with_nothing_to_check_is_unknown_not_valid() -> None:
    assert check([], "mutex")["valid"] == "unknown"
    writes = hist((1.0, 1, "invoke", "write", 1), (1.1, 1, "ok", "write", 1))
    r = check(writes, "mutex")
    assert r["valid"] == "unknown" and "1 write" in r["reason"]


def adversarial(n: int) -> list[Op]:
    """n concurrent writes of distinct values and a read of a value nobody wrote."""
    events: list[Op] = []
    for p in range(n):
        events.append({"time": p, "process": p, "type": "invoke", "f": "write", "value": p})
    events.append({"time": n, "process": n, "type": "invoke", "f": "read", "value": None})
    events.append({"time": 10 * SECOND, "process": n, "type": "ok", "f": "read", "value": -1})
    for p in range(n):
        events.append({"time": 10 * SECOND + p, "process": p, "type": "ok", "f": "write",
                       "value": p})
    return finish(events)


def test_budget_returns_unknown_on_an_adversarial_history() -> None:
    h = adversarial(40)
    r = check(h, "register", time_limit=0.5)
    assert r["valid"] == "unknown" and "time limit" in r["reason"]
    r = check(h, "register", max_states=2000)
    assert r["valid"] == "unknown" and "max_states" in r["reason"]
    assert check(adversarial(8), "register")["valid"] is False


def load_bench() -> Any:
    """The benchmark's history generator (bench/ is scripts, not a package)."""
    path = Path(__file__).resolve().parent.parent / "bench" / "bench_linearizable.py"
    spec = importlib.util.spec_from_file_location("bench_linearizable", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module



def generated_service(rnd: random.Random, most: int, procs: int, *, least: int = 5,
                      invalid: bool = False) -> list[dict[str, Any]]:
    """The benchmark's simulated lock service of ``least``..``most`` ops over 1..``procs``
    processes, crashing, timing out and ending unknown at rates drawn from ``rnd``; with
    ``invalid``, a grant put inside another's critical section where one fits."""
    bench = load_bench()
    h = bench.mutex_history(rnd.randint(least, most), rnd.randint(1, procs),
                            rnd.randint(0, 10**6), crash_rate=rnd.random() * 0.1,
                            timeout_rate=rnd.random() * 0.4, info_rate=rnd.random())
    if invalid:
        with contextlib.suppress(ValueError):  # no place to inject one
            h = bench.inject_violation(h, rnd.random())
    return h  # type: ignore[no-any-return]

def test_generated_mutex_histories_check_quickly_and_a_violation_is_found() -> None:
    bench = load_bench()
    h = bench.mutex_history(1500, 8, seed=3, crash_rate=0.02, timeout_rate=0.2)
    r = check(h, "mutex", time_limit=30)
    assert r["valid"] is True and r["indeterminate"] > 0
    bad = check(bench.inject_violation(h), "mutex", time_limit=30)
    assert bad["valid"] is False
    assert "had not released" in bad["witness"]["explanation"]


def test_generated_mutex_histories_agree_with_brute_force_when_small() -> None:
    bench = load_bench()
    for seed in range(30):
        h = bench.mutex_history(7, 3, seed=seed, crash_rate=0.2, timeout_rate=0.5)
        assert brute_force(h, "mutex") is True
        assert check(h, "mutex")["valid"] is True


def test_witness_places_the_conflict_not_where_the_search_stopped() -> None:
    """A slow acquire (p1, invoked 0.7 s, granted 3.2 s) and a quick one (p2, 1.1-1.15 s,
    held to 5.2 s): the search linearizes p1's grant first and gets stuck at p2's acquire,
    which completed at 1.15 s, before anything was wrong. The witness places the conflict
    where the two grants overlap: from p1's grant to p1's release invoke."""
    h = hist(
        (0.7, 1, "invoke", "acquire"), (1.1, 2, "invoke", "acquire"),
        (1.15, 2, "ok", "acquire"), (3.2, 1, "ok", "acquire"),
        (3.46, 1, "invoke", "release"), (3.47, 1, "ok", "release"),
        (5.2, 2, "invoke", "release"), (5.25, 2, "ok", "release"),
    )
    w = check(h, "mutex")["witness"]
    assert w["blocked"] == [1] and w["setter"] == 0
    assert (w["from"], w["until"], w["processes"]) == (3.2, 3.46, [1, 2])
    rows = w["linearization"]
    assert [(r["index"], r["f"], r["state"]) for r in rows] == [
        (0, "acquire", "the lock is held by process 1")]
    assert w["linearization_from"] == 0
    assert [c["index"] for c in w["concurrent_ops"]] == w["concurrent"]
