"""The faults checker: did every fault bite? A fault that did nothing is never a pass.

Each nemesis records, with a fault's start, what the history must show while it is on
(``expect``): ``frozen`` clients record nothing (a pause), ``cut-off`` clients complete no lock
operation (a partition of the client from the DB nodes: its lock requests cannot reach them),
``slowed`` clients complete no lock op faster than the delay on their links allows
(``{"processes": [...], "at-least": seconds}``), ``stalled`` clients complete no lock op for
the first ``seconds`` of the fault (``{"processes": [...], "seconds": s}``: their replies are
held).
A power loss claims what it dropped (``{"dropped": bytes}``): one that dropped nothing while no
client had a lock op in flight was a plain crash (the expected outcome of a DB that syncs each
write), listed as losing nothing, never as a power loss that bit; it does not change the verdict.
A clock fault on clients claims to have moved their clocks (``clock-moved``), and what it read
back from each process is its detail: a clock not seen to move as asked did not bite. A
failover claims the primary it replaces (``promotes``): one whose detail names no replica
promoted did not bite.
A stall whose held grants were all dropped unheard (its detail's ``late-grants``) tested
unavailability only, as below.
A fault whose start failed (``error``) could not be injected at all. Either makes this check
``unknown``, with the reason in words: the run then proves nothing about that fault, whatever
the other checkers say. It is never ``False``: a fault that did not bite is the harness's (or
the plugin's) problem, not the lock's.

Evidence is only what waited for a reply: an acquire (extend, reacquire), and a release only
when the lock's release waits for one (``release_waits``, the lock's declaration, given by the
workload from the spec). A release that sends and closes its connection "completes" as fast as
it likes under any fault: it shows nothing about the network.

Beside "did it bite", a fault that means the lock to go on working under it (``completes``:
the clients whose lock ops are to complete, slowly, while it is on: a delay, a lossy link)
must show one such op of those clients completing inside its window. A window without one
"tested unavailability only": the lock was not tested under the fault, only without the
service. (A window some client held the lock through is not judged: the others waited for the
holder.) Each is reported; a run whose faults *all* tested unavailability only is ``unknown``.

Pure function of the history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from checker.base import Checker
from checker.lives import Lives
from checker.process_ops import ProcessOps, between, inside, last_at
from checker.process_ops import by_process as column_processes
from harness.core.history import INFO, INVOKE, OK, Op, seconds
from harness.core.history_parts import last_time, nemesis_ops
from harness.core.text import show

LOCK_FS = frozenset({"acquire", "release", "extend", "reacquire", "rerelease"})
RELEASES = frozenset({"release", "rerelease"})
GRACE_NS = 5_000_000  # a signal lands within microseconds; 5 ms covers the journal's clock
NS = 1_000_000_000
MAX_LISTED = 20
CLOCK_TOLERANCE = 1.0  # seconds between a clock's asked offset and the one read back (the nodes')
RATE_GAIN = 0.05  # the least speed-up (x1.05) a rate must be read back with to have moved


@dataclass
class Window:
    f: str
    step: Any
    start: int
    stop: int
    targets: list[Any]
    expect: dict[str, Any] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)  # the nemesis's last word on it


def windows(history: Sequence[Op]) -> tuple[list[Window], list[dict[str, Any]]]:
    """Each fault that started (from its start ``info`` to its stop ``invoke``, or the end of
    the history) and each fault start that failed."""
    return windows_of(nemesis_ops(history), last_time(history))


def windows_of(nemesis: Sequence[Op], end: int) -> tuple[list[Window], list[dict[str, Any]]]:
    """:func:`windows` from the nemesis's ops and the history's last time."""
    open_: dict[tuple[str, Any], Window] = {}
    healed: dict[tuple[str, Any], Window] = {}
    out: list[Window] = []
    failed: list[dict[str, Any]] = []
    for op in nemesis:
        key = (op["f"], op.get("step"))
        detail = op.get("detail") if isinstance(op.get("detail"), dict) else {}
        if op["value"] == "start" and op["type"] == INFO:
            if op.get("error"):
                failed.append({"fault": op["f"], "at": seconds(op["time"]),
                               "error": show(op["error"], 300)})
                continue
            expect = op.get("expect") if isinstance(op.get("expect"), dict) else {}
            w = Window(op["f"], op.get("step"), op["time"], end, list(op.get("targets") or []),
                       expect, detail)
            open_[key] = w
            out.append(w)
        elif op["value"] == "stop" and op["type"] == INVOKE and key in open_:
            healed[key] = open_.pop(key)
            healed[key].stop = op["time"]
        elif op["value"] == "stop" and op["type"] == INFO and key in healed and detail:
            healed.pop(key).detail = detail
    return out, failed


def _claim(w: Window, key: str, number: str) -> tuple[list[int], float] | None:
    """A claim of the form ``{"processes": [...], number: seconds}``, if well formed."""
    claim = w.expect.get(key)
    if not isinstance(claim, dict):
        return None
    value = claim.get(number)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return _processes(claim.get("processes")), float(value)



def _missed(w: Window, p: int, ops: int, words: str) -> dict[str, Any]:
    """The record of a fault window that missed client ``p``: ``ops`` of its ops say so."""
    return {"fault": w.f, "process": p, "from": seconds(w.start), "until": seconds(w.stop),
            "ops": ops, "explanation": f"{w.f} {words}"}

def _processes(claim: Any) -> list[int]:
    if not isinstance(claim, list):
        return []
    return [p for p in claim if isinstance(p, int) and not isinstance(p, bool)]


def _why_fast(fast: list[tuple[str, int]], slowed: int) -> str:
    """Why lock ops beat a delay: releases alone (the lock's release may wait for no reply:
    its declaration says), else its connections go around the link layer."""
    if any(f not in RELEASES for f, _ in fast):
        return "do its connections go around the link layer?"
    what = f"the only lock ops faster than the delay were {len(fast)} release(s)"
    if slowed:
        return (f"{what}, while {slowed} other lock op(s) were slowed: its releases did not "
                "wait for a reply; a lock whose release does not wait declares "
                "release_waits = False (then a release is no evidence either way)")
    return (f"{what}: if this lock's release waits for no reply, declare release_waits = False "
            "on the lock; if it waits, do its connections go around the link layer?")


def waiting_fs(release_waits: bool) -> frozenset[str]:
    """The lock ops that wait for a reply: every one, or all but releases."""
    if not isinstance(release_waits, bool):
        raise ValueError(f"release_waits must be true or false, got {show(release_waits)}")
    return LOCK_FS if release_waits else LOCK_FS - RELEASES


def unavailable_only(w: Window, by_process: dict[int, ProcessOps], fs: frozenset[str],
                     release_waits: bool, held: list[tuple[int, int]]
                     ) -> dict[str, Any] | None:
    """The window of a fault that means lock ops to complete under it (``completes``), if
    none of those clients' ops that wait for a reply completed inside it. A window some client
    held the lock through (``held``: every grant's span, from the one model of the processes'
    lives) is not judged: the others waited for the holder, not for the service (a long
    critical section, a short window)."""
    procs = _processes(w.expect.get("completes"))
    if not procs:
        return None
    lo, hi = w.start + GRACE_NS, w.stop
    if any(start <= lo and hi <= until for start, until in held):
        return None
    ends: dict[str, int] = {}
    for p in procs:
        if completed_lock_ops(by_process.get(p, []), lo, hi, fs=fs):
            return None
        for _, done in lock_calls(by_process.get(p, []), lo, hi, fs):
            ends[str(done["type"])] = ends.get(str(done["type"]), 0) + 1
    tried = sum(ends.values())
    how = ", ".join(f"{n} {t}" for t, n in sorted(ends.items()))
    which = "lock op" if release_waits else ("lock op (releases aside: this lock's wait for "
                                             "no reply)")
    return {
        "fault": w.f, "processes": procs, "from": seconds(w.start), "until": seconds(w.stop),
        "ops": tried,
        "explanation": (f"{w.f} tested unavailability only: no {which} of process(es) "
                        f"{', '.join(map(str, procs))} completed between "
                        f"{seconds(w.start):.2f} s and {seconds(w.stop):.2f} s "
                        + (f"({tried} ended inside it: {how})" if tried else
                           "(none even ended inside it)")
                        + ", so it tested the lock without its service, not under the fault")}


def unheard(w: Window) -> dict[str, Any] | None:
    """A stall (``stalled``) that delivered no grant late, as the link layer counted them (the
    detail's ``late-grants``: delivered, dropped; ``grant-held-s``): every held grant dropped
    unheard (its client had closed the connection, given up on that node, before the stall
    ended), or let go before the stall ran out (the run was ending). Either way the lock was
    tested without that reply at most, never with a grant heard late."""
    late, held, stalled = (w.detail.get("late-grants"), w.detail.get("grant-held-s"),
                           _claim(w, "stalled", "seconds"))
    if stalled is None or not isinstance(late, dict) or type(late.get("delivered")) is not int:
        return None
    procs, whom = stalled[0], ", ".join(map(str, stalled[0]))
    if late["delivered"] == 0:
        why = (f"no grant it held reached process(es) {whom} ({late.get('dropped')} dropped "
               "with a connection the client had closed, none delivered): the client had given "
               "up on that node before the stall ended")
    elif isinstance(held, int | float) and not isinstance(held, bool) \
            and held * NS < stalled[1] * NS - GRACE_NS:
        why = (f"its grant to process(es) {whom} was let go after {held:g} s, before its "
               f"{stalled[1]:g} s ran out (the run was ending): in time, not late")
    else:
        return None
    return {"fault": w.f, "processes": procs, "from": seconds(w.start),
            "until": seconds(w.stop), "ops": 0,
            "explanation": (f"{w.f} tested unavailability only: {why}, so the lock was tested "
                            "without its reply, never with a grant heard late")}


def unmoved(w: Window) -> list[dict[str, Any]]:
    """The processes a clock fault claims to have moved (``clock-moved``: ``{"processes":
    [...], "offset": s}`` for a jump, ``"rate": r`` for a rate) whose clock, as read back from
    the process itself (the detail's ``observed`` offsets, ``observed-rate`` rates), was not
    seen to move as asked: a jump must be read back within :data:`CLOCK_TOLERANCE` s of its
    offset, a rate must have gained at least half the asked speed-up; no read-back is no
    evidence."""
    claim = w.expect.get("clock-moved")
    if not isinstance(claim, dict):
        return []
    jump = "rate" not in claim
    asked = claim.get("offset" if jump else "rate")
    if isinstance(asked, bool) or not isinstance(asked, int | float):
        return []
    seen_by = w.detail.get("observed" if jump else "observed-rate")
    out = []
    for p in _processes(claim.get("processes")):
        seen = seen_by.get(str(p)) if isinstance(seen_by, dict) else None
        if isinstance(seen, bool) or not isinstance(seen, int | float):
            got = "no read-back (the process did not answer)"
        elif (abs(seen - asked) <= CLOCK_TOLERANCE < abs(seen) if jump
              else seen - 1 >= max((asked - 1) / 2, RATE_GAIN)):
            continue
        else:
            got = f"read back {seen:+.3f} s" if jump else f"read back running at x{seen:g}"
        want = f"{asked:+g} s" if jump else f"x{asked:g}"
        out.append(_missed(w, p, 0, f"did not move process {p}'s clock as asked ({want}): "
                           f"{got} between {seconds(w.start):.2f} s and {seconds(w.stop):.2f} s, "
                           "so the lock was not tested under it"))
    return out


def unpromoted(w: Window) -> list[dict[str, Any]]:
    """A failover (``promotes``: the primary it cut off) whose last word names no replica
    promoted in its place (``promoted`` null: the run ended first; absent: never read back):
    no failover happened, so the lock was not tested under one."""
    old = w.expect.get("promotes")
    if old is None or w.detail.get("promoted"):
        return []
    got = ("no replica was promoted before it was healed (the run was ending)"
           if "promoted" in w.detail else "no promotion was read back")
    return [{"fault": w.f, "from": seconds(w.start), "until": seconds(w.stop), "ops": 0,
             "explanation": f"{w.f} of {old} at {seconds(w.start):.2f} s did not fail over: "
                            f"{got}, so the lock was not tested under a failover"}]


def uncrashed(w: Window) -> list[dict[str, Any]]:
    """A crash (``crashes``: the step its clients were armed for) whose last word says nobody
    died (``crashed`` not true): no armed client reached the step in time, so the lock was not
    tested under a crash."""
    if "crashes" not in w.expect or w.detail.get("crashed") is True:
        return []
    step = w.expect.get("crashes")
    waited = w.detail.get("after-s")
    return [{"fault": w.f, "from": seconds(w.start), "until": seconds(w.stop), "ops": 0,
             "explanation": f"{w.f} at {seconds(w.start):.2f} s crashed nobody: no client armed "
                            f"for step {step!r} ({', '.join(map(str, w.targets)) or 'none'}) "
                            f"reached it"
                            + (f" within {waited:g} s" if isinstance(waited, int | float)
                               and not isinstance(waited, bool) else "")}]


def in_flight(ops: ProcessOps, at: int, fs: frozenset[str]) -> bool:
    """Had one process (its ``ops``) a lock op (of ``fs``) invoked and not ended at ``at``?"""
    last = last_at(ops, at)
    return last is not None and last["type"] == INVOKE and last["f"] in fs


def lock_calls(ops: ProcessOps, lo: int, hi: int, fs: frozenset[str], *,
               invoked_before: bool = False) -> list[tuple[Op, Op]]:
    """(invoke, completion) of one process's lock ops in ``fs`` invoked after ``lo`` and
    ended before ``hi``; with ``invoked_before``, those that ended between ``lo`` and ``hi``
    whenever invoked. Of a process in columns, only the ops around the window are read
    (:func:`checker.process_ops.between`)."""
    out: list[tuple[Op, Op]] = []
    pending: Op | None = None
    for op in between(ops, lo, hi):
        if op["type"] == INVOKE:
            pending = op
        elif pending is not None:
            began = pending["time"] > lo or (invoked_before and op["time"] > lo)
            if pending["f"] in fs and began and op["time"] < hi:
                out.append((pending, op))
            pending = None
    return out


def completed_lock_ops(ops: ProcessOps, lo: int, hi: int, *, invoked_before: bool = False,
                       fs: frozenset[str] = LOCK_FS) -> list[str]:
    """The fs of the lock ops (of ``fs``) invoked after ``lo`` that completed ok before
    ``hi``; with ``invoked_before``, those that completed ok between ``lo`` and ``hi``
    whenever invoked."""
    calls = lock_calls(ops, lo, hi, fs, invoked_before=invoked_before)
    return [call["f"] for call, done in calls if done["type"] == OK]


def completed_lock_ops_timed(ops: ProcessOps, lo: int, hi: int, *,
                             fs: frozenset[str] = LOCK_FS) -> list[tuple[str, int]]:
    """(f, duration ns) of the lock ops (of ``fs``) invoked after ``lo`` that completed ok
    before ``hi``."""
    return [(call["f"], done["time"] - call["time"])
            for call, done in lock_calls(ops, lo, hi, fs) if done["type"] == OK]


def _processes_and_nemesis(history: Sequence[Op]
                           ) -> tuple[dict[int, ProcessOps], list[Op], int | None]:
    """Each client process's ops (rows of the history's columns), the nemesis's ops and the
    last time (None: no op)."""
    by_process, nemesis = column_processes(history)
    return by_process, nemesis, last_time(history) if len(history) else None


class FaultsChecker(Checker):
    name = "faults"
    summary = ("every fault bit: a paused client recorded nothing, a cut-off "
               "client completed no lock op, a delayed one none faster than "
               "the delay, a stalled one none while held, a client's clock was "
               "read back moved; every start was injected; not every fault "
               "tested unavailability only")
    figures = {"fault-count": "fault", "ineffective-count": "ineffective",
               "not-injected-count": "not-injected", "unavailable-only-count": "unavailable-only"}
    caveats = ("ineffective", "not-injected", "unavailable-only")

    @staticmethod
    def check(history: Sequence[Op], release_waits: bool = True,
              asked: Sequence[str] = ()) -> dict[str, Any]:
        """``asked``: the faults the run was asked for (its nemeses); when none of them ran (every
        step skipped for want of a target), the run tested the lock without them: unknown."""
        fs = waiting_fs(release_waits)
        by_process, nemesis, end = _processes_and_nemesis(history)
        faults, failed = windows_of(nemesis, 0 if end is None else end)
        ineffective: list[dict[str, Any]] = []
        for w in faults:
            lo, hi = w.start + GRACE_NS, w.stop
            for p in _processes(w.expect.get("frozen")):
                ran, first = inside(by_process.get(p, []), lo, hi)
                if ran and first is not None:
                    ineffective.append(_missed(
                        w, p, ran, f"did not freeze process {p}: it recorded "
                        f"{ran} op(s) between {seconds(w.start):.2f} s and "
                        f"{seconds(w.stop):.2f} s, while it should have been stopped (first "
                        f"at {seconds(first['time']):.2f} s)"))
            for p in _processes(w.expect.get("cut-off")):
                done = completed_lock_ops(by_process.get(p, []), lo, hi, fs=fs)
                if done:
                    ineffective.append(_missed(
                        w, p, len(done), f"did not cut process {p} off: it completed "
                        f"{len(done)} lock op(s) ({', '.join(sorted(set(done)))}) between "
                        f"{seconds(w.start):.2f} s and {seconds(w.stop):.2f} s, while its links "
                        "to the DB nodes were cut (its connections do not come from its own "
                        "address?)"))
            slowed = _claim(w, "slowed", "at-least")
            if slowed is not None:
                for p in slowed[0]:
                    timed = completed_lock_ops_timed(by_process.get(p, []), lo, hi, fs=fs)
                    fast = [(f, d) for f, d in timed if d < slowed[1] * NS - GRACE_NS]
                    if fast:
                        f, d = min(fast, key=lambda x: x[1])
                        ineffective.append({
                            "fault": w.f, "process": p, "from": seconds(w.start),
                            "until": seconds(w.stop), "ops": len(fast),
                            "explanation": (
                                f"{w.f} did not slow process {p} down: {len(fast)} of its lock "
                                f"ops took less than the {slowed[1]:g} s its delayed links allow "
                                f"(the fastest, a {f}, took {d / NS * 1000:.1f} ms) between "
                                f"{seconds(w.start):.2f} s and {seconds(w.stop):.2f} s: "
                                + _why_fast(fast, len(timed) - len(fast)))})
            stalled = _claim(w, "stalled", "seconds")
            if stalled is not None:
                until = min(hi, w.start + int(stalled[1] * NS) - GRACE_NS)
                for p in stalled[0]:
                    done = completed_lock_ops(by_process.get(p, []), w.start - 1, until,
                                              invoked_before=True, fs=fs)
                    if done:
                        ineffective.append({
                            "fault": w.f, "process": p, "from": seconds(w.start),
                            "until": seconds(until), "ops": len(done),
                            "explanation": (f"{w.f} did not hold process {p}'s replies: it "
                                            f"completed {len(done)} lock op(s) "
                                            f"({', '.join(sorted(set(done)))}) within the "
                                            f"{stalled[1]:g} s its replies were to be held, from "
                                            f"{seconds(w.start):.2f} s")})
            ineffective.extend(unmoved(w) + unpromoted(w) + uncrashed(w))
        lost_nothing = [{"fault": w.f, "at": seconds(w.start),
                         "explanation": (f"{w.f} at {seconds(w.start):.2f} s dropped nothing "
                                         "unsynced and no lock op was in flight: a plain "
                                         "crash, not a loss")}
                        for w in faults if w.expect.get("dropped") == 0
                        and not any(in_flight(ops, w.start, fs) for ops in by_process.values())]
        held = ([(start, until) for _, _, start, until in Lives.of(history).holders()]
                if any(w.expect.get("completes") for w in faults) else [])
        idle = [u for w in faults
                if (u := unavailable_only(w, by_process, fs, release_waits, held)
                        or unheard(w))]
        only_idle = bool(faults) and len(idle) == len(faults)
        none_ran = bool(asked) and not faults and not failed
        valid: bool | str = ("unknown" if ineffective or failed or only_idle or none_ran
                             else True)
        result: dict[str, Any] = {
            "valid": valid,
            "fault-count": len(faults),
            "ineffective-count": len(ineffective),
            "ineffective": ineffective[:MAX_LISTED],
            "not-injected-count": len(failed),
            "not-injected": [{**f, "explanation": f"{f['fault']} could not be injected at "
                              f"{f['at']:.2f} s: {f['error']}"} for f in failed[:MAX_LISTED]],
            "unavailable-only-count": len(idle),
            "unavailable-only": idle[:MAX_LISTED],
            "release-waits": release_waits,
        }
        if lost_nothing:
            result["lost-nothing-count"] = len(lost_nothing)
            result["lost-nothing"] = lost_nothing[:MAX_LISTED]
        if none_ran:
            result["note"] = (f"the run was asked for {', '.join(map(str, asked))} and no fault "
                              "ran (every step was skipped: no target when it was due), so it "
                              "tested the lock without the faults it was meant to; the verdict can "
                              "only be unknown or invalid")
        elif only_idle:
            result["note"] = (f"every fault of this run ({len(faults)}) tested unavailability "
                              "only (each is listed with why: no lock op completed under it, or "
                              "no grant it held late was heard), so the run says nothing of the "
                              "lock under those faults; the verdict can only be unknown or "
                              "invalid")
        elif valid != True:  # noqa: E712 (valid is True or a string)
            result["note"] = ("a fault that did not bite (or was never injected) proves nothing: "
                              "the run's verdict can only be unknown or invalid")
        return result
