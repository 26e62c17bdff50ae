"""Leases in the linearizability checker: a grant with a ``validity`` may end silently once
it may have run out, and nowhere the history shows it still in force (checker.calls.lease_ends).

Checked against an oracle written here, independently: a brute force whose state names the
grant that holds the lock, and in which each lease may run out at any time from its acquire's
invocation plus its validity (a grant to a process that held the lock: once it completed),
freeing the lock only if that very grant still holds it.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, event, given
from hypothesis import strategies as st

from checker.linearizable import check
from checker.models import MODELS
from harness.core.history import HistoryError, dumps, parse_lines
from tests.test_linearizable import (
    SETTINGS,
    Picker,
    any_order,
    brute_force,
    hist,
    ops_for_brute,
    random_ops,
)

SECOND = 1_000_000_000
NOT_HELD = {"error": "not-held: the lock had expired or was taken"}
NOT_SENT = {"error": "timeout: NotSent: no answer before the commit: nothing committed"}


def lease(v: float, **fields: Any) -> tuple[Any, dict[str, Any]]:
    """An ok acquire's value and fields: a lease of ``v`` seconds."""
    return {"session": 1, "validity": v}, fields


def lease_oracle(history: list[dict[str, Any]]) -> bool | str:
    """The ``mutex`` model with leases, by brute force over every order and subset."""
    ops = ops_for_brute(history, "mutex")
    last: dict[Any, Any] = {}  # each process's last grant or release (by completion)
    for i, o in enumerate(list(ops)):
        out = o["completion"].get("value")
        v = out.get("validity") if isinstance(out, dict) else None
        p, ok = o["completion"]["process"], o["end"] is not None
        start = o["start"] + int(v * SECOND) if isinstance(v, int | float) \
            and not isinstance(v, bool) and 0 <= v < 1e12 else None
        o["grant"] = i  # (the acquire's: each grant told apart)
        if o["f"] == "acquire" and ok and start is not None:
            if last.get(p) == "acquire":  # granted while it held the lock: ends once heard of
                start = max(start, o["end"] + 1)
            ops.append({"f": "lease-end", "grant": i, "start": start, "end": None,
                        "completion": {}})
        if o["f"] == "release" or (o["f"] == "acquire" and ok) or o["completion"].get("error"):
            last[p] = o["f"]

    def step(state: tuple[Any, Any], o: dict[str, Any]) -> tuple[Any, Any] | None:
        holder, grant = state
        if o["f"] == "lease-end":
            return (None, None) if grant == o["grant"] else state
        if o["f"] == "acquire":
            return (o["completion"]["process"], o["grant"]) if holder is None else None
        got = MODELS["mutex"].step((holder,), o["f"], o["value"], o["completion"])
        return None if got is None else (got[0], grant if got[0] is not None else None)

    return any_order(ops, (None, None), step)


@st.composite
def lease_history(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Any lock history (tests.test_linearizable.random_ops), each grant a lease or not; its
    ops 0.1 s apart (no op of a process invoked the instant its last one completed: the
    oracle, by windows alone, would let them change places, as a process never does)."""
    h = random_ops("mutex", Picker(draw=draw))
    for i, op in enumerate(h):
        op["time"] = i * SECOND // 10
        if op["f"] == "acquire" and op["type"] == "ok":
            v = draw(st.sampled_from([None, 0, 0.1, 0.3, 0.5, 100]))
            op["value"] = None if v is None else {"validity": v}
        if op["f"] == "release" and op["type"] == "fail" and "error" not in op:
            op["error"] = draw(st.sampled_from([NOT_SENT["error"], "timeout: lock busy"]))
    return h


def late_release(history: list[dict[str, Any]]) -> bool:
    """Is a release of unknown outcome followed by an ok acquire of its process? (The model
    lets such a release take effect after that grant, and free it; the checker holds the
    lease's end before the release to the grant it ends, the oracle does not: it would find
    more histories valid.)"""
    unknown, open_ = set(), {}
    for op in history:
        p = op["process"]
        if op["type"] == "invoke":
            if p in open_ and open_[p]["f"] == "release":
                unknown.add(p)  # (it never completed)
            open_[p] = op
        elif p in open_:
            inv = open_.pop(p)
            if inv["f"] == "release" and op["type"] == "info":
                unknown.add(p)
            elif inv["f"] == "acquire" and op["type"] == "ok" and p in unknown:
                return True
    return False


@SETTINGS
@given(h=lease_history())
def test_agrees_with_the_lease_oracle(h: list[dict[str, Any]]) -> None:
    assume(not late_release(h))
    expected = lease_oracle(h)
    result = check(h, "mutex")
    event(f"valid={expected}, lease ends={result.get('lease_ends', 0)}")
    assert result["valid"] == expected
    if all(op["value"] in (None, {"validity": 100}) for op in h if op["f"] == "acquire"):
        assert expected == brute_force(h, "mutex")  # never certainly over: nothing excused


# ---------------------------------------------------------------------------------------------
# The history of the false witness, and what must still be caught


def failed_release_then_again(again_ok: float, v: float = 2.0) -> list[dict[str, Any]]:
    """Spanner pause-node, seed 7 (history lines 12, 20-21, 68): process 2's lease of ``v`` s,
    its release not sent ("nothing committed"), its acquire again, granted at ``again_ok``."""
    return hist(
        (0.66, 2, "invoke", "acquire"), (1.68, 2, "ok", "acquire", *lease(v, token=2)),
        (5.08, 2, "invoke", "release"), (6.77, 2, "fail", "release", None, NOT_SENT),
        (6.80, 2, "invoke", "acquire"), (again_ok, 2, "ok", "acquire", *lease(v, token=6)),
        (again_ok + 0.1, 2, "invoke", "release"), (again_ok + 0.2, 2, "ok", "release"),
        lock="lock")


@pytest.mark.parametrize("model", ["mutex", "fenced-mutex"])
def test_a_release_not_sent_leaves_the_lease_to_run_out(model: str) -> None:
    """The release did nothing, so the grant ended when its lease ran out: granted again to
    the same process after that is no violation (it read as 'acquired while it already held
    the lock', the run INVALID with no overlap)."""
    result = check(failed_release_then_again(16.16), model)
    assert result["valid"] is True and result["lease_ends"] == 1
    assert result["ops"] == 3 and result["failed"] == 1  # (the lease's end is no op)


@pytest.mark.parametrize("model", ["mutex", "fenced-mutex"])
def test_granted_again_while_the_lease_was_certainly_in_force(model: str) -> None:
    """Invoked at 0.66 s, a lease of 10 s is in force until 10.66 s at least."""
    result = check(failed_release_then_again(7.5, v=10.0), model)
    assert result["valid"] is False
    assert "already held the lock" in result["witness"]["explanation"]


def takeover(granted: float, v: float | None, release: tuple[str, dict[str, Any]]
             ) -> list[dict[str, Any]]:
    """Process 1's lease of ``v`` s from 1.0 s; process 2 granted at ``granted``; then process
    1's release ends as ``release``."""
    first = lease(v) if v is not None else (None, {})
    ty, fields = release
    return hist(
        (1.0, 1, "invoke", "acquire"), (1.1, 1, "ok", "acquire", *first),
        (2.0, 2, "invoke", "acquire"), (granted, 2, "ok", "acquire", *lease(2.0)),
        (granted + 1, 1, "invoke", "release"), (granted + 1.1, 1, ty, "release", None, fields),
        (granted + 2, 2, "invoke", "release"), (granted + 2.1, 2, "ok", "release"))


@pytest.mark.parametrize("model", ["mutex", "fenced-mutex"])
@pytest.mark.parametrize(("granted", "v", "release", "valid"), [
    (5.0, 2.0, ("fail", NOT_HELD), True),  # ran out (3.0 s), then taken; the refusal says so
    (5.0, 2.0, ("info", {}), True),  # ran out; whether the release happened is unknown
    (5.0, 2.0, ("fail", NOT_SENT), True),  # ran out; the release did nothing
    (2.5, 2.0, ("fail", NOT_HELD), False),  # taken while certainly in force: a lease broken
    (2.5, 2.0, ("info", {}), False),
    (5.0, None, ("fail", NOT_HELD), False),  # no lease: nothing ends a grant silently
    (5.0, 2.0, ("ok", {}), False),  # a stale holder's release accepted
])
def test_two_holders(model: str, granted: float, v: float | None,
                     release: tuple[str, dict[str, Any]], valid: bool) -> None:
    assert check(takeover(granted, v, release), model)["valid"] is valid


def test_a_renewal_keeps_the_lease_in_force() -> None:
    """An ok extend invoked at 2.5 s renews a 2 s lease to 4.5 s at least; a refused one says
    it was lost by 2.6 s."""
    def h(granted: float, extended: str) -> list[dict[str, Any]]:
        return hist(
            (1.0, 1, "invoke", "acquire"), (1.1, 1, "ok", "acquire", *lease(2.0)),
            (2.0, 2, "invoke", "acquire"),
            (2.5, 1, "invoke", "extend"),
            (2.6, 1, extended, "extend", None, NOT_HELD if extended == "fail" else {}),
            (granted, 2, "ok", "acquire", *lease(2.0)),
            (granted + 1, 1, "invoke", "release"),
            (granted + 1.1, 1, "fail", "release", None, NOT_HELD))
    assert check(h(4.0, "ok"), "mutex")["valid"] is False  # granted at 4.0 s < 4.5 s
    assert check(h(5.0, "ok"), "mutex")["valid"] is True
    assert check(h(4.0, "fail"), "mutex")["valid"] is True


def test_a_stale_holders_extend_accepted() -> None:
    """Process 1's lease ran out and process 2 holds the lock: an extend of process 1's that
    the lock accepts is a violation, as a release would be."""
    h = hist(
        (1.0, 1, "invoke", "acquire"), (1.1, 1, "ok", "acquire", *lease(1.0)),
        (2.0, 2, "invoke", "acquire"), (3.0, 2, "ok", "acquire", *lease(2.0)),
        (3.5, 1, "invoke", "extend"), (3.6, 1, "ok", "extend"),
        (4.0, 1, "invoke", "release"), (4.1, 1, "fail", "release", None, NOT_HELD))
    assert check(h, "mutex")["valid"] is False


def test_a_lease_end_never_frees_a_later_grant() -> None:
    """Process 1's first lease may run out from 3.0 s; its second (100 s, from 3.5 s) is in
    force when process 2 is granted at 6 s, whatever the first's end."""
    h = hist(
        (1.0, 1, "invoke", "acquire"), (1.1, 1, "ok", "acquire", *lease(2.0)),
        (1.5, 1, "invoke", "release"), (1.6, 1, "fail", "release", None, NOT_SENT),
        (3.5, 1, "invoke", "acquire"), (3.6, 1, "ok", "acquire", *lease(100.0)),
        (4.0, 2, "invoke", "acquire"), (6.0, 2, "ok", "acquire", *lease(2.0)),
        (7.0, 1, "invoke", "release"), (7.1, 1, "fail", "release", None, NOT_HELD))
    assert check(h, "mutex")["valid"] is False


@pytest.mark.parametrize("validity", [True, -1.0, "2s", float("nan"), float("inf")])
def test_a_validity_that_is_no_number_of_seconds_excuses_nothing(validity: Any) -> None:
    h = takeover(5.0, 2.0, ("fail", NOT_HELD))
    h[1]["value"] = {"session": 1, "validity": validity}
    assert check(h, "mutex")["valid"] is False
    if validity != -1.0:  # (a history read from a file or a run refuses it before)
        with pytest.raises(HistoryError):
            list(parse_lines([dumps(op) for op in h], "h"))
