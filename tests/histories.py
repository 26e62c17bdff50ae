"""Hypothesis strategies for lock histories: valid by construction, and the ways to break them.

A valid history is a run of sessions one after another on one lock: each holder acquires after
the previous holder began to release, writes ``enter`` and ``exit`` to the resource, releases.
Meanwhile other processes try to acquire and fail (``fail``) or time out (``info``). Fenced
histories give each grant a greater token. The history ends with the final read of the resource
log, as a real run does.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

MS = 1_000_000


@dataclass
class Built:
    history: list[dict[str, Any]]
    sessions: list[dict[str, Any]] = field(default_factory=list)
    fenced: bool = False


class Recorder:
    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []

    def op(self, t: int, p: int | str, type_: str, f: str, value: Any = None, **kw: Any
           ) -> dict[str, Any]:
        o = {"time": t, "process": p, "type": type_, "f": f, "value": value}
        o.update({k: v for k, v in kw.items() if v is not None})
        self.ops.append(o)
        return o

    def finish(self) -> list[dict[str, Any]]:
        ops = sorted(self.ops, key=lambda o: o["time"])
        return [{"index": i, **o} for i, o in enumerate(ops)]


@st.composite
def valid_histories(draw: st.DrawFn, *, fenced: bool = False, final_read: bool = True
                    ) -> Built:
    n_proc = draw(st.integers(2, 5))
    n_sessions = draw(st.integers(1, 8))
    rec = Recorder()
    log: list[dict[str, Any]] = []
    seq = 0
    t = 10 * MS
    token = draw(st.integers(0, 100))
    sessions = []
    counters = dict.fromkeys(range(n_proc), 0)
    for _ in range(n_sessions):
        p = draw(st.integers(0, n_proc - 1))
        counters[p] += 1
        sid = counters[p]
        token += draw(st.integers(1, 3))
        tok = token if fenced else None
        inv = t
        t += draw(st.integers(1, 50)) * MS
        rec.op(inv, p, "invoke", "acquire", lock="lock")
        rec.op(t, p, "ok", "acquire", {"session": sid, "validity": 2.0}, lock="lock", token=tok)
        start = t
        # other processes try meanwhile, and fail or time out
        for q in range(n_proc):
            if q != p and draw(st.booleans()):
                outcome = draw(st.sampled_from(["fail", "info"]))
                a = start + draw(st.integers(1, 5)) * MS
                rec.op(a, q, "invoke", "acquire", lock="lock")
                rec.op(a + MS, q, outcome, "acquire", lock="lock")
        for kind in ("enter", "exit"):
            t += draw(st.integers(10, 100)) * MS
            outcome = draw(st.sampled_from(["ok", "ok", "ok", "info"]))
            seq += 1
            value = {"kind": kind, "session": sid}
            rec.op(t, p, "invoke", "write", value, lock="lock", token=tok)
            t += MS
            if outcome == "ok":
                rec.op(t, p, "ok", "write", {**value, "seq": seq}, lock="lock", token=tok)
            else:
                rec.op(t, p, "info", "write", value, lock="lock", token=tok, error="timeout")
            entry = {"seq": seq, "process": p, "session": sid, "kind": kind, "accepted": True}
            if tok is not None:
                entry["token"] = tok
            log.append(entry)
        t += draw(st.integers(1, 50)) * MS
        rec.op(t, p, "invoke", "release", {"session": sid}, lock="lock", token=tok)
        end = t
        t += MS
        rec.op(t, p, draw(st.sampled_from(["ok", "ok", "info"])), "release", {"session": sid},
               lock="lock", token=tok)
        sessions.append({"process": p, "session": sid, "start": start, "end": end,
                         "token": tok})
        t += 10 * MS  # the next holder's acquire must complete after this release began
    if final_read:
        t += 100 * MS
        rec.op(t, n_proc, "invoke", "read")
        rec.op(t + MS, n_proc, "ok", "read", log)
    return Built(rec.finish(), sessions, fenced)


def final_log(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return next(o["value"] for o in reversed(history) if o["f"] == "read" and o["type"] == "ok")


def retime(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ops = sorted(history, key=lambda o: o["time"])
    return [{**o, "index": i} for i, o in enumerate(ops)]


def acquires(*times: int) -> list[dict[str, Any]]:
    """Grants never released: process ``i`` invokes its acquire at ``times[2 i]`` and is
    granted at ``times[2 i + 1]``."""
    return [{"index": i, "time": t, "process": i // 2, "type": ("invoke", "ok")[i % 2],
             "f": "acquire"} for i, t in enumerate(times)]


def later_session(built: Built, data: st.DataObject) -> int:
    """The index of a session of ``built`` after its first, drawn (fewer than two: no case)."""
    assume(len(built.sessions) >= 2)
    return data.draw(st.integers(1, len(built.sessions) - 1))


def with_overlap(built: Built, k: int) -> list[dict[str, Any]]:
    """Session k's holder gets the lock while session k-1's holder still believes it holds it."""
    h = copy.deepcopy(built.history)
    prev, cur = built.sessions[k - 1], built.sessions[k]
    new_ok = (prev["start"] + prev["end"]) // 2
    for o in h:
        if (o["process"] == cur["process"] and o["f"] == "acquire" and o["type"] == "ok"
                and (o.get("value") or {}).get("session") == cur["session"]):
            o["time"] = new_ok
        if (o["process"] == cur["process"] and o["f"] == "acquire" and o["type"] == "invoke"
                and o["time"] > new_ok - MS):
            o["time"] = new_ok - MS
    return retime(h)


def with_interleaving(built: Built, k: int) -> list[dict[str, Any]]:
    """In the resource's log, session k's enter lands between session k-1's enter and exit."""
    h = copy.deepcopy(built.history)
    log = final_log(h)
    prev, cur = built.sessions[k - 1], built.sessions[k]

    def entry(s: dict[str, Any], kind: str) -> dict[str, Any]:
        return next(e for e in log if e["process"] == s["process"]
                    and e["session"] == s["session"] and e["kind"] == kind)

    a_exit, b_enter = entry(prev, "exit"), entry(cur, "enter")
    a_exit["seq"], b_enter["seq"] = b_enter["seq"], a_exit["seq"]
    return h


def with_stale_acceptance(built: Built, k: int) -> list[dict[str, Any]]:
    """The resource accepts a write of session k with a token lower than one it accepted."""
    h = copy.deepcopy(built.history)
    log = final_log(h)
    cur = built.sessions[k]
    low = built.sessions[k - 1]["token"] - 1
    for e in log:
        if e["process"] == cur["process"] and e["session"] == cur["session"]:
            e["token"] = low
    return h
