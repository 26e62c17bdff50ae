"""Incidents (issue 16): violations grouped by cause, one per stale holder or fault window,
and never two causes merged into one. Scripted histories, judged by the real checkers; pure
functions, no servers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from harness.controller.checking import check_history
from harness.core.schedule import Schedule, Step
from harness.presentation.report.incidents import incidents
from harness.presentation.report.narrative import FaultRun, describe, removed

NS = 1_000_000_000


@dataclass
class Script:
    """A history written by hand: sessions (acquire, enter, exit, release) and faults, times in
    seconds; the resource numbers writes in the order they arrive, as the real one does."""

    ops: list[dict[str, Any]] = field(default_factory=list)
    writes: list[dict[str, Any]] = field(default_factory=list)
    sessions: dict[int, int] = field(default_factory=dict)
    clients: int = 5

    def op(self, t: float, p: int | str, type_: str, f: str, value: Any = None,
           **kw: Any) -> dict[str, Any]:
        o = {"time": round(t * NS), "process": p, "type": type_, "f": f, "value": value,
             **{k: v for k, v in kw.items() if v is not None}}
        self.ops.append(o)
        return o

    def session(self, p: int, acquired: float, enter: float, exit_: float, release: float,
                token: int | None = None, accepted: tuple[bool, bool] = (True, True)) -> None:
        sid = self.sessions[p] = self.sessions.get(p, 0) + 1
        self.op(acquired - 0.002, p, "invoke", "acquire", lock="lock")
        self.op(acquired, p, "ok", "acquire", {"session": sid, "validity": 2.0}, lock="lock",
                token=token)
        for kind, t, ok in (("enter", enter, accepted[0]), ("exit", exit_, accepted[1])):
            value = {"kind": kind, "session": sid}
            self.op(t - 0.001, p, "invoke", "write", value, lock="lock", token=token)
            done = self.op(t, p, "ok" if ok else "fail", "write", dict(value), lock="lock",
                           token=token)
            self.writes.append({"t": t, "done": done, "process": p, "session": sid,
                                "kind": kind, "token": token, "accepted": ok})
        self.op(release, p, "invoke", "release", {"session": sid}, lock="lock", token=token)
        self.op(release + 0.001, p, "ok", "release", {"session": sid}, lock="lock", token=token)

    def fault(self, f: str, step: int, start: float, stop: float, targets: list[str],
              target: str | None = None, detail: dict[str, Any] | None = None) -> None:
        self.op(start, "nemesis", "invoke", f, "start", step=step, target=target,
                targets=targets)
        self.op(start + 0.001, "nemesis", "info", f, "start", step=step, target=target,
                targets=targets, detail=detail)
        self.op(stop, "nemesis", "invoke", f, "stop", step=step, targets=targets)
        self.op(stop + 0.001, "nemesis", "info", f, "stop", step=step, targets=targets)

    def history(self) -> list[dict[str, Any]]:
        log = []
        for seq, w in enumerate(sorted(self.writes, key=lambda w: w["t"]), start=1):
            w["done"]["value"]["seq"] = seq
            entry = {"seq": seq, "process": w["process"], "session": w["session"],
                     "kind": w["kind"], "accepted": w["accepted"]}
            if w["token"] is not None:
                entry["token"] = w["token"]
            log.append(entry)
        end = max(o["time"] for o in self.ops) / NS + 0.5
        self.op(end, self.clients, "invoke", "read")
        self.op(end + 0.001, self.clients, "ok", "read", log)
        ops = sorted(self.ops, key=lambda o: o["time"])
        return [{"index": i, **o} for i, o in enumerate(ops)]


def turns(s: Script, who: list[int], start: float, end: float) -> None:
    """Other clients take the lock in turns, each briefly, from ``start`` to ``end``."""
    n = len(who)
    slot = (end - start) / n
    for i, p in enumerate(who):
        t = start + i * slot
        s.session(p, t, t + 0.01, t + slot * 0.5, t + slot * 0.6)


def stale(s: Script, p: int, acquired: float, woke: float) -> None:
    """Process ``p`` gets the lock, enters, is frozen, and writes exit when it wakes."""
    s.session(p, acquired, acquired + 0.01, woke + 0.01, woke + 0.02)


def paused(s: Script, p: int, step: int, acquired: float, woke: float, others: list[int],
           first: float | None = None) -> None:
    """Process ``p`` is a :func:`stale` holder, paused (fault ``step``) from just after its
    grant until it wakes; ``others`` take the lock in turns from ``first`` (default: 0.9 s
    before it wakes) to 0.1 s before it wakes."""
    stale(s, p, acquired, woke)
    s.fault("pause", step, acquired + 0.05, woke, [f"c{p}"], "holder")
    turns(s, others, woke - 0.9 if first is None else first, woke - 0.1)


def judged(s: Script, workload: str = "mutex") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    history = s.history()
    return history, check_history(history, {"workload": workload, "ttl": 2.0})


def test_one_paused_holder_is_one_incident_with_its_overlaps_folded_beneath() -> None:
    s = Script()
    paused(s, 0, 0, 1.0, 6.0, [1, 2, 3, 4] * 10, 3.1)  # 40 sessions while process 0 sleeps
    history, results = judged(s)
    assert results["checks"]["mutex"]["lock-overlap-count"] == 40
    found = incidents(history, results)
    assert len(found) == 1
    inc = found[0]
    assert inc.kind == "stale-holder" and inc.holder is not None
    assert inc.holder["process"] == 0
    assert inc.fault is not None and inc.fault.f == "pause" and inc.fault.targets == ("c0",)
    counts = inc.counts()
    assert counts["lock-overlaps"] == 40  # every listed one (the checker lists 50 at most)
    assert counts["resource-interleavings"] >= 1
    assert counts.get("witness") == 1  # the linearizability witness is the same story
    assert "opened by a pause (SIGSTOP) of c0 (the holder) at 1.1 s for 5.0 s" in inc.title()


@pytest.mark.parametrize(("p", "acquired", "woke", "others"),
                         [(3, 5.0, 8.0, [4, 1]), (0, 6.0, 9.0, [3, 4])],
                         ids=["two-holders", "one-process-twice"])
def test_two_pauses_of_holders_are_two_incidents_each_with_its_own_fault(
        p: int, acquired: float, woke: float, others: list[int]) -> None:
    """Two holders paused, or one process paused in two of its grants: two incidents, each
    with its own fault and grant; no violation in both."""
    s = Script()
    paused(s, 0, 0, 1.0, 4.0, [1, 2])
    paused(s, p, 1, acquired, woke, others)
    found = incidents(*judged(s))
    assert [(i.holder or {}).get("process") for i in found] == [0, p]
    assert [(i.holder or {}).get("acquired") for i in found] == [1.0, acquired]
    assert [i.fault.step for i in found if i.fault] == [0, 1]
    for inc, mine in zip(found, (0, p), strict=True):
        for v in inc.violations:
            assert mine in v.procs, f"{v.explanation} filed under process {mine}"
    numbers = [n for inc in found for n in (v.n for v in inc.violations)]
    assert len(numbers) == len(set(numbers))  # no violation in two incidents


def test_two_stale_holders_under_one_fault_are_two_incidents() -> None:
    """A clock jump on every node expires two leases: two holders lost the lock, each on its
    own; both incidents name the one fault, neither swallows the other."""
    s = Script()
    s.fault("clock", 0, 1.5, 9.0, ["n1", "n2", "n3"], "all", {"offset": 60.0})
    stale(s, 0, 1.0, 5.0)  # holds 1.0-5.0
    s.session(1, 2.0, 2.05, 7.9, 8.0)  # acquires while 0 holds; holds to 8.0
    s.session(2, 4.0, 4.05, 4.4, 4.5)  # overlaps both
    s.session(3, 6.0, 6.05, 6.4, 6.5)  # overlaps 1 only
    history, results = judged(s)
    found = incidents(history, results)
    holders = sorted((i.holder or {}).get("process") for i in found if i.kind == "stale-holder")
    assert holders == [0, 1]
    assert all(i.fault is not None and i.fault.f == "clock" for i in found)
    assert "a +60 s clock jump on n1,n2,n3" in found[0].title()


def test_a_stale_holder_with_no_fault_says_so() -> None:
    s = Script()
    stale(s, 0, 1.0, 4.0)
    turns(s, [1, 2], 3.1, 3.9)
    history, results = judged(s)
    (inc,) = incidents(history, results)
    assert inc.fault is None
    assert "no fault was on" in inc.title()


def test_the_fault_aimed_at_the_holder_opens_it_not_a_later_one() -> None:
    s = Script()
    paused(s, 0, 0, 1.0, 5.0, [1, 2], 3.1)
    s.fault("pause-node", 1, 2.0, 2.5, ["n1"])  # later, elsewhere, before the overlaps
    history, results = judged(s)
    (inc,) = incidents(history, results)
    assert inc.fault is not None and inc.fault.f == "pause"


def test_stale_writes_under_fencing_group_by_fault_window() -> None:
    """The fenced workload: lock overlaps are informational, the violations are stale writes
    the resource accepted; with no stale holder to file them under, each fault window is
    one incident, and two windows are two."""
    s = Script()
    s.session(0, 1.0, 1.01, 4.01, 4.02, token=1)  # paused, then writes with token 1
    s.fault("pause", 0, 1.05, 4.0, ["c0"], "holder")
    s.session(1, 3.1, 3.11, 3.2, 3.3, token=2)
    s.session(2, 5.0, 5.01, 8.01, 8.02, token=3)
    s.fault("pause", 1, 5.05, 8.0, ["c2"], "holder")
    s.session(3, 7.1, 7.11, 7.2, 7.3, token=4)
    history, results = judged(s, "fenced")
    assert results["checks"]["fencing"]["valid"] is False
    found = incidents(history, results)
    assert [i.kind for i in found] == ["fault", "fault"]
    assert [i.fault.step for i in found if i.fault] == [0, 1]
    for inc, (stale_p, newer_p) in zip(found, ((0, 1), (2, 3)), strict=True):
        assert inc.counts() == {"resource-interleavings": 1, "stale-accepted": 1}
        assert all({stale_p, newer_p} >= set(v.procs) for v in inc.violations)


def test_schedule_context_names_the_planned_step() -> None:
    s = Script()
    paused(s, 0, 0, 1.0, 4.0, [1, 2])
    history, results = judged(s)
    schedule = Schedule((Step(1.0, "pause", "holder", 3.0),))
    (inc,) = incidents(history, results, schedule)
    assert "(step 1, planned pause on holder at 1 s for 3 s)" in inc.title()


def test_what_shrinking_removed_in_words() -> None:
    first = [FaultRun("kill", 0, "any", ("n2",), 1.0, 3.0),
             FaultRun("pause", 1, "holder", ("c3",), 4.0, 8.0),
             FaultRun("clock", 2, "majority", ("n1", "n2", "n3"), 9.0, 12.0, {"offset": 60.0}),
             FaultRun("partition-halves", 3, None, ("n1|n2", "n3|n4|n5"), 14.0, 29.0)]
    minimal = [FaultRun("clock", 0, "majority", ("n1", "n2", "n3"), 3.1, 5.6,
                        {"offset": 60.0})]
    assert removed(first, minimal) == (
        "the first failure had 4 faults over 28 s; this one has 1, a +60 s clock jump on "
        "n1,n2,n3 at 3.1 s for 2.5 s")
    assert describe(first[3]) == "a partition (n1,n2 | n3,n4,n5) at 14.0 s for 15.0 s"
    assert describe(first[0]) == "a kill (SIGKILL) of n2 at 1.0 s, restarted after 2.0 s"
    assert removed(first[:1], []).endswith("this one has none: the lock fails with no fault "
                                           "at all")


def test_the_report_shows_incidents_the_schedule_as_it_ran_and_what_was_removed() -> None:
    from harness.presentation.report.html import render

    s = Script()
    paused(s, 0, 0, 1.0, 4.0, [1, 2])
    history, results = judged(s)
    test = {"run_id": "t/1", "schedule": {"steps": [
                {"at": 1.0, "fault": "pause", "target": "holder", "duration": 3.0},
                {"at": 5.0, "fault": "pause", "target": "waiter", "duration": 1.0}]},
            "faults": [{"step": 0, "f": "pause", "target": "holder", "targets": ["c0"],
                        "start": 1.05, "stop": 4.0, "duration": 3.0}],
            "skipped-steps": [{"step": 1, "fault": "pause", "target": "waiter", "at": 8.0,
                               "why": "no waiter right now"}],
            "explore": {"role": "minimal", "reproduced": "9 of 10 replays", "first-failure": {
                "run": "/r/first", "skipped": 0, "faults": [
                    {"step": 0, "f": "kill", "targets": ["n1"], "start": 0.5, "stop": 2.5},
                    {"step": 1, "f": "pause", "target": "holder", "targets": ["c2"],
                     "start": 3.0, "stop": 9.0}]}}}
    spec = {"lock": "redis-setnx", "workload": "mutex", "nemesis": ["pause"], "clients": 5,
            "store": "results", "schedule": test["schedule"]}
    page = render(spec, history, results, [], test)
    assert 'id="incidents"><h2>Incidents (1)</h2>' in page
    assert "opened by a pause (SIGSTOP) of c0 (the holder) at 1.1 s for 3.0 s" in page
    assert "ran 1.05-4.00 s on c0" in page
    assert "skipped at 8.0 s: no waiter right now" in page
    assert ("the first failure had 2 faults over 8 s; this one has 1, a pause (SIGSTOP) of c0 "
            "(the holder) at 1.1 s for 3.0 s") in page
    assert "It failed again in 9 of 10 replays." in page
    assert "harness run --replay results/t/1" in page


def three_pauses() -> Script:
    """Three paused holders, 40, 40 and 39 overlaps: 119 lock overlaps, more than the 50 a
    report once listed of a kind, 39 of them in the third pause (the README run's shape)."""
    s = Script()
    for step, (holder, at, others, n) in enumerate(((0, 1.0, [1, 2], 40), (3, 8.0, [1, 2], 40),
                                                    (4, 15.0, [1, 2], 39))):
        paused(s, holder, step, at, at + 5.0, (others * n)[:n], at + 2.1)
    return s


def test_every_violation_past_the_first_fifty_is_listed_and_reachable_from_its_incident(
) -> None:
    from harness.presentation.report.html import LINKS, render
    from harness.presentation.report.model import build

    history, results = judged(three_pauses())
    mutex = results["checks"]["mutex"]
    assert mutex["lock-overlap-count"] == len(mutex["lock-overlaps"]) == 119
    found = incidents(history, results)
    assert [(i.holder or {}).get("process") for i in found] == [0, 3, 4]
    assert [i.counts()["lock-overlaps"] for i in found] == [40, 40, 39]
    assert [i.fault.step for i in found if i.fault] == [0, 1, 2]  # the third pause is named
    listed = [v["n"] for v in build({"clients": 5}, history, results)["violations"]
              if not v["info"]]
    filed = sorted(v.n for inc in found for v in inc.violations)
    assert filed == sorted(listed) and len(listed) >= 2 * 119  # each in exactly one incident
    page = render({"clients": 5}, history, results, [])
    section = page[page.index('<section id="incidents">'):page.index('<section id="violations">')]
    for n in listed:  # each one a link from its incident to its place in the list
        assert f'href="#violation-{n}">{n}</a>' in section and f'id="violation-{n}"' in page
    assert section.count("more</summary>") == 3
    assert f"and {len(found[2].violations) - LINKS} more</summary>" in section


def test_a_fault_that_missed_has_one_start_time_and_says_whom_it_missed() -> None:
    """A pause aimed at the holder c2 at 3.941 s, which had let go: the nemesis struck c3,
    the holder then, at 4.156 s. Every place says 4.156 s (when it took effect); the plan's
    3.9 s is labelled planned, and the miss is said."""
    from harness.presentation.report.html import render
    from harness.presentation.report.model import build

    s = Script()
    s.op(3.941, "nemesis", "invoke", "pause", "start", step=0, target="holder", targets=["c2"])
    s.op(4.156, "nemesis", "info", "pause", "start", step=0, target="holder", targets=["c3"],
         detail={"missed": ["c2"]})
    s.op(8.0, "nemesis", "invoke", "pause", "stop", step=0, targets=["c3"])
    s.op(8.001, "nemesis", "info", "pause", "stop", step=0, targets=["c3"])
    stale(s, 3, 4.0, 8.0)
    turns(s, [1, 2], 6.1, 7.9)
    history, results = judged(s)
    test = {"schedule": {"steps": [{"at": 3.9, "fault": "pause", "target": "holder",
                                    "duration": 3.8}]},
            "faults": [{"step": 0, "f": "pause", "target": "holder", "targets": ["c3"],
                        "start": 4.156, "began": 3.941, "stop": 8.001, "duration": 3.8,
                        "detail": {"missed": ["c2"]}}]}
    w = build({"clients": 5}, history, results)["faults"][0]
    assert (w["start"], w["missed"], w["aimed"]) == (4_156_000, ["c2"], 3_941_000)
    assert w["label"] == "pause c3 (missed c2)"
    [inc] = incidents(history, results)
    assert inc.fault is not None and inc.fault.start == 4.156
    assert "at 4.2 s" in inc.cause()
    page = render({"clients": 5}, history, results, [], test)
    assert "<td>3.9 s (step 1)</td><td>4.156 s</td><td>8.001 s</td>" in page  # fault table
    assert "missed c2 (aimed at 3.941 s)" in page
    assert "ran 4.16-8.00 s on c3 (missed c2)" in page  # the schedule: the same start
    assert "<th>planned at</th>" in page
    assert page.count("3.941") == page.count("aimed at 3.941 s") == 1  # never as its start


def test_a_holder_whose_release_was_refused_is_not_said_to_have_released() -> None:
    s = Script()
    stale(s, 0, 1.0, 6.19)
    s.fault("pause", 0, 1.05, 6.0, ["c0"], "holder")
    turns(s, [1, 2], 3.1, 5.9)
    history = s.history()
    refused = next(op for op in history if op["process"] == 0 and op["f"] == "release"
                   and op["type"] == "ok")
    refused.update(type="fail", error="not-held: the lock had expired or was taken")
    results = check_history(history, {"workload": "mutex", "ttl": 2.0})
    [inc] = incidents(history, results)
    first = results["checks"]["mutex"]["lock-overlaps"][0]["first"]
    assert (first["release"], first["release-error"]) == ("fail", refused["error"])
    from checker.mutex import MutexChecker
    from tests.test_columns_report import both

    assert [MutexChecker.check(x) for x in both(history)] == [results["checks"]["mutex"]] * 2
    assert ("(its release refused at 6.21 s: not-held: the lock had expired or was taken)"
            in inc.title())


def late_release_chain(answered: bool = True) -> Script:
    """Issue 40: a lock whose release deletes whoever's key is there. Process 4's release is
    sent at 4.367 s during its cut (4.34-8.36 s) and lands at 11.197 s, deleting process 2's
    key (granted at 10.0 s, its lease in force); process 3 gets in, then each holder's release
    deletes the next one's key: one chain of three overlaps. A cut of c2 at 8.4 s is on while
    process 2 held the lock and is in none of it."""
    s = Script()
    s.session(4, 3.0, 3.01, 4.3, 4.367)
    if answered:
        s.ops[-1]["time"] = round(11.197 * NS)
    else:  # no reply: the client gave up waiting at 5.367 s
        s.ops[-1].update(time=round(5.367 * NS), type="info", error="timeout")
    s.fault("partition", 0, 4.34, 8.36, ["c4"])
    s.fault("partition", 1, 8.4, 10.5, ["c2"])
    s.session(2, 10.0, 10.01, 11.9, 12.0)
    s.session(3, 11.3, 11.31, 12.4, 12.5)
    s.session(1, 12.1, 12.11, 12.9, 13.0)
    s.session(0, 12.6, 12.61, 13.2, 13.3)
    return s


def test_a_late_release_is_the_cause_and_its_chain_is_one_incident() -> None:
    history, results = judged(late_release_chain())
    assert results["checks"]["mutex"]["lock-overlap-count"] == 3
    (inc,) = incidents(history, results, frees=True)  # a bare DEL (redis-del)
    assert inc.counts()["lock-overlaps"] == 3 and inc.chained == 2
    assert inc.by is not None and inc.by.process == 4
    assert (inc.by.sent, inc.by.landed) == (4.367, 11.197)
    assert inc.fault is not None and inc.fault.targets == ("c4",) and inc.fault.step == 0
    title = inc.title()
    assert ("let in by process 4's release, sent at 4.37 s during a partition cutting c4 off "
            "from the DB nodes at 4.3 s for 4.0 s (step 1), which landed at 11.20 s, 6.83 s "
            "after it was sent (2.84 s after the heal), while process 2 held the lock") in title
    assert "then 2 more lock overlap(s) to " in title and "c2" not in title
    assert all(v.n in {w.n for w in inc.violations} for v in inc.violations)
    assert inc.to_dict()["by"] == {"process": 4, "f": "release", "sent": 4.367,
                                   "landed": 11.197, "answered": 11.197, "certain": True}


def test_a_lock_whose_release_removes_only_its_own_hold_is_never_said_to_be_let_in_by_one(
) -> None:
    """The same history, from a lock whose release deletes only its own key (a
    compare-and-delete, a ZooKeeper node): no release let anyone in, so no incident says one
    did; each overlap is its own holder's, opened by the fault on it (or by none)."""
    history, results = judged(late_release_chain())
    found = incidents(history, results, frees=False)
    assert [i.holder and i.holder["process"] for i in found] == [2, 3, 1]
    assert all(i.by is None and not i.chained for i in found)
    assert not any("let in" in i.title() for i in found), [i.title() for i in found]
    assert "opened by a partition cutting c2 off from the DB nodes at 8.4 s" in found[0].title()
    assert found[1].title().endswith("no fault was on: the lock let it happen on its own")


def test_when_the_run_does_not_say_what_a_release_can_remove_it_is_only_a_possibility(
) -> None:
    """A foreign history (``harness check FILE``): the release is named as what may have let
    the overlap in, and the words say it is not known that it could."""
    history, results = judged(late_release_chain())
    (inc,) = incidents(history, results)
    title = inc.title()
    assert "each perhaps let in by the release of a client of an earlier one: one chain" in title
    assert title.count("perhaps let in by") == 2 and title.endswith(
        "while process 2 held the lock (if this lock's release can remove another client's "
        "hold, which the run does not record)")
    assert inc.to_dict()["by"]["certain"] is False


def test_the_report_tells_the_story_of_the_lock_its_run_recorded() -> None:
    from harness.presentation.report.html import render

    history, results = judged(late_release_chain())
    spec = {"lock": "redis-del", "workload": "mutex", "clients": 5, "store": "results"}
    told = {frees: render({**spec, "release_frees_others": frees}, history, results, [])
            for frees in (True, False)}
    assert "let in by process 4&#x27;s release, sent at 4.37 s" in told[True]
    assert "let in" not in told[False] and "perhaps" not in told[False]


def test_only_the_locks_whose_release_does_not_check_the_owner_can_free_another_s_hold(
) -> None:
    """Each registered lock's declaration, read from its release: a bare DEL, or a GET then
    a DEL; every other one deletes only its own key, node, lease or row. The spec carries it
    (resolved, recorded in test.json)."""
    from harness.controller.registry import default_registry
    from harness.controller.spec import TestSpec

    reg = default_registry()
    frees = {n for n in reg.names("locks")
             if getattr(reg.load("locks", n), "release_frees_others", False)}
    assert frees == {"redis-del", "redis-get-del"}
    assert TestSpec(lock="redis-del").validate().to_dict()["release_frees_others"] is True
    assert TestSpec(lock="redis-setnx").validate().to_dict()["release_frees_others"] is False


def test_an_unanswered_release_may_have_landed_any_time_later() -> None:
    history, results = judged(late_release_chain(answered=False))
    (inc,) = incidents(history, results, frees=True)
    assert inc.by is not None and inc.by.landed is None
    assert ("process 4's release, sent at 4.37 s during a partition cutting c4 off from the DB "
            "nodes at 4.3 s for 4.0 s (step 1), which had no reply (timed out at 5.37 s), so it "
            "may have landed at any time later") in inc.title()


def test_a_release_before_the_grant_or_after_the_lease_ran_out_is_no_cause() -> None:
    """Process 4's release lands at 8.9 s, before process 2's grant: the overlap is the
    pause of process 2 (its lease ran out before process 3 asked), as before."""
    s = Script()
    s.session(4, 3.0, 3.01, 4.3, 4.367)
    s.ops[-1]["time"] = round(8.9 * NS)
    s.session(2, 9.0, 9.01, 14.0, 14.1)
    s.fault("pause", 0, 9.05, 14.0, ["c2"], "holder")
    s.session(3, 11.3, 11.31, 11.4, 11.5)
    history, results = judged(s)
    (inc,) = incidents(history, results)
    assert inc.by is None and inc.fault is not None and inc.fault.f == "pause"
    assert "opened by a pause (SIGSTOP) of c2 (the holder)" in inc.title()


def test_an_unanswered_release_of_a_client_still_cut_off_is_no_cause() -> None:
    """Its client was cut off (the partition's ``expect``) until after the overlap: the
    release could not have landed yet."""
    s = late_release_chain(answered=False)
    for o in s.ops:
        if o["process"] == "nemesis" and o.get("step") == 0:
            if o["value"] == "start" and o["type"] == "info":
                o["expect"] = {"cut-off": [4]}
            if o["value"] == "stop":
                o["time"] += round(3.0 * NS)  # healed at 11.36 s, after process 3's grant
    history, results = judged(s)
    first = incidents(history, results)[0]
    assert first.by is None or first.by.process != 4


def test_a_release_that_landed_while_the_acquire_was_in_flight_may_have_let_it_in() -> None:
    """Process 1's release is answered at 9.99 s, while process 2's acquire (answered at
    10.0 s) was in flight, and process 1's lease may have run out by then (granted at 7.5 s,
    2 s): process 2 may have set its key before the release landed, which then deleted it."""
    s = Script()
    s.session(1, 7.5, 7.51, 9.5, 9.99)
    s.session(2, 10.0, 10.01, 11.9, 12.0)
    s.session(3, 11.3, 11.31, 12.4, 12.5)
    s.ops[[o["f"] for o in s.ops].index("acquire", 6)]["time"] = round(9.5 * NS)
    history, results = judged(s)
    (inc,) = incidents(history, results, frees=True)
    assert inc.by is not None and inc.by.process == 1 and inc.by.granted == 10.0
    assert ("let in by process 1's release, sent at 9.99 s with no fault on its client, which "
            "landed at 9.99 s, while process 2's acquire was in flight (answered at 10.00 s): "
            "it may have come after its key was set") in inc.title()
    (inc,) = incidents(history, results, frees=False)  # a compare-and-delete: no such story
    assert inc.by is None and "let in" not in inc.title()


def late_release() -> Script:
    """Process 0 holds from 1.0 s (a 2 s lease) and is cut off from 1.2 s to 5.0 s; its
    release, sent at 1.5 s under the cut, is answered at 9.0 s."""
    s = Script()
    s.op(0.998, 0, "invoke", "acquire", lock="lock")
    s.op(1.0, 0, "ok", "acquire", {"session": 1, "validity": 2.0}, lock="lock")
    s.op(1.5, 0, "invoke", "release", {"session": 1}, lock="lock")
    s.op(9.0, 0, "ok", "release", {"session": 1}, lock="lock")
    s.fault("partition", 0, 1.2, 5.0, ["c0"], "holder")
    return s


def test_a_release_that_handed_the_lock_over_deleted_no_later_key() -> None:
    """The shape of a real run (redis-del, a cut of the holder, CI): process 3's release is
    sent at 7.95 s, process 2 is granted at 7.99 s and the release answered at 8.0 s. Process
    3's lease was in force (granted at 7.0 s, 2 s), so its key stood until its release deleted
    it: that release let process 2 in and deleted nothing later. Process 4 is granted over
    process 2 at 9.0 s, when process 0's release, sent at 1.5 s while a cut kept process 0 off
    the DB nodes, lands: that release is named, with its cut, not process 3's."""
    s = late_release()
    s.session(1, 3.5, 3.51, 4.0, 4.5)
    s.op(5.0, 2, "invoke", "acquire", lock="lock")
    s.session(3, 7.0, 7.01, 7.5, 7.95)
    s.ops[-1]["time"] = round(8.0 * NS)  # process 3's release answered at 8.0 s
    s.op(7.99, 2, "ok", "acquire", {"session": 1, "validity": 2.0}, lock="lock")
    s.op(9.5, 2, "invoke", "release", {"session": 1}, lock="lock")
    s.op(9.501, 2, "ok", "release", {"session": 1}, lock="lock")
    s.session(4, 9.0, 9.01, 9.6, 9.7)
    history, results = judged(s)
    assert results["checks"]["mutex"]["lock-overlap-count"] == 1
    (inc,) = incidents(history, results, frees=True)
    assert inc.by is not None and inc.by.process == 0, inc.title()
    assert inc.by.fault is not None and inc.by.fault.f == "partition"
    assert "let in by process 0's release, sent at 1.50 s during a partition" in inc.title()
    # were process 3's lease not certainly in force at process 2's grant, its release could
    # have landed after process 2's key was set: then the later-sent release is the story
    s.ops[[o["process"] for o in s.ops].index(3)]["time"] = round(5.5 * NS)
    s.ops[[o["process"] for o in s.ops].index(3) + 1]["time"] = round(5.51 * NS)
    history, results = judged(s)
    (inc,) = incidents(history, results, frees=True)
    assert inc.by is not None and inc.by.process == 3, inc.title()


def test_a_release_sent_in_the_millisecond_of_the_grant_it_let_in_continues_the_chain() -> None:
    """The chain of the test above goes on: process 2's own DEL, sent at 9.5000 s, deletes
    process 4's key and process 1 is granted at 9.5001 s, the same millisecond as the checkers
    count: that release (sent before the grant, to the ns) let process 1 in, and the overlap
    joins the chain, one incident (CI: the chain split into two, the second 'no fault was on')."""
    s = late_release()
    s.op(5.0, 2, "invoke", "acquire", lock="lock")
    s.op(7.99, 2, "ok", "acquire", {"session": 1, "validity": 2.0}, lock="lock")
    s.op(9.5, 2, "invoke", "release", {"session": 1}, lock="lock")
    s.op(9.501, 2, "ok", "release", {"session": 1}, lock="lock")
    s.session(4, 9.0, 9.01, 9.6, 9.7)
    s.op(9.2, 1, "invoke", "acquire", lock="lock")
    s.op(9.5001, 1, "ok", "acquire", {"session": 1, "validity": 2.0}, lock="lock")
    s.op(9.8, 1, "invoke", "release", {"session": 1}, lock="lock")
    s.op(9.801, 1, "ok", "release", {"session": 1}, lock="lock")
    history, results = judged(s)
    assert results["checks"]["mutex"]["lock-overlap-count"] == 2
    (inc,) = incidents(history, results, frees=True)
    assert inc.by is not None and inc.by.process == 0 and inc.chained == 1, inc.title()


def test_a_fault_being_injected_when_the_overlap_came_opened_it() -> None:
    """A kill of the DB node invoked at 3.13 s and recorded done at 3.20 s (the node seen
    down); the overlap comes at 3.165 s, in between: the kill opened it (it was being injected),
    not "no fault was on", and the words say it began before it was recorded as on."""
    s = Script()
    stale(s, 0, 1.0, 5.0)
    s.op(3.13, "nemesis", "invoke", "kill", "start", step=0, targets=["n1"])
    s.op(3.2, "nemesis", "info", "kill", "start", step=0, targets=["n1"])
    s.op(4.0, "nemesis", "invoke", "kill", "stop", step=0, targets=["n1"])
    s.op(4.001, "nemesis", "info", "kill", "stop", step=0, targets=["n1"])
    s.session(1, 3.165, 3.17, 3.5, 3.6)
    (inc,) = incidents(*judged(s))
    assert inc.fault is not None and inc.fault.f == "kill" and inc.fault.since == 3.13, inc
    assert "no fault was on" not in inc.title()
    assert "begun at 3.13 s, before it was recorded as on" in inc.title(), inc.title()


def test_a_fault_on_a_client_in_none_of_the_overlaps_opens_nothing() -> None:
    """Issue 40: a cut of c4 was on while process 0 held the lock, and process 4 is in none of
    its overlaps: it is not named; a fault on the DB nodes still is."""
    def one(node_fault: bool) -> Any:
        s = Script()
        stale(s, 0, 1.0, 5.0)
        s.fault("partition", 0, 1.5, 4.5, ["c4"])
        if node_fault:
            s.fault("pause-node", 1, 2.0, 2.5, ["n1"])
        turns(s, [1, 2], 3.1, 4.9)
        (inc,) = incidents(*judged(s))
        return inc

    inc = one(node_fault=False)
    assert inc.fault is None and "c4" not in inc.title()
    assert ("no fault was on its clients or the DB nodes (only on other clients): the lock let "
            "it happen on its own") in inc.title()
    inc = one(node_fault=True)
    assert inc.fault is not None and inc.fault.f == "pause-node"


def test_a_paused_holder_whose_lease_may_have_run_out_is_the_pause_not_a_release() -> None:
    """Process 4's release lands while process 0's acquire is in flight (the usual hand-over);
    process 0 is then paused and process 1, waiting since 4.5 s, gets in at 5.5 s, when
    process 0's lease may have run out: the pause opened it, not that release."""
    s = Script()
    s.session(4, 0.5, 0.51, 2.9, 2.995)
    s.session(0, 3.0, 3.01, 8.01, 8.02)
    s.ops[[o["f"] for o in s.ops].index("acquire", 8)]["time"] = round(2.0 * NS)
    s.fault("pause", 0, 3.05, 8.0, ["c0"], "holder")
    s.session(1, 5.5, 5.51, 5.6, 5.7)
    s.ops[[o["f"] for o in s.ops].index("acquire", 20)]["time"] = round(4.5 * NS)
    (inc,) = incidents(*judged(s))
    assert inc.by is None and inc.fault is not None and inc.fault.f == "pause"


def test_a_release_that_failed_is_never_called_released() -> None:
    """Issue 40: a stale holder whose release ended ``fail not-held`` is not titled
    "released at"."""
    s = Script()
    paused(s, 0, 0, 1.0, 4.0, [1, 2])
    done = next(o for o in reversed(s.ops) if o["process"] == 0 and o["f"] == "release")
    done.update(type="fail", error="not-held: the lock had expired or was taken")
    (inc,) = incidents(*judged(s))
    assert ("(its release refused at 4.02 s: not-held: the lock had expired or was taken)"
            in inc.title())
    assert "released at" not in inc.title()


def test_a_fault_that_healed_while_the_holder_s_acquire_waited_opened_it() -> None:
    """The Curator run under kill-majority: both acquires wait through a kill of the DB nodes
    majority, granted 2 s after it healed, 7 ms apart: the kill opened it, while the holder's
    acquire was in flight; never "no fault was on", nor a release (ZooKeeper nodes)."""
    s = Script()
    s.session(1, 20.66, 20.665, 21.0, 21.03)
    s.ops[[o["f"] for o in s.ops].index("acquire")]["time"] = round(11.4 * NS)
    s.session(0, 20.67, 20.671, 21.0, 21.02)
    s.ops[[o["f"] for o in s.ops].index("acquire", 8)]["time"] = round(12.4 * NS)
    s.fault("kill", 7, 17.49, 18.62, ["n1", "n3"])
    (inc,) = incidents(*judged(s), frees=False)
    assert inc.title().endswith(
        "; opened by a kill (SIGKILL) of n1,n3 at 17.5 s, restarted after 1.1 s (step 8), while "
        "the holder's acquire was in flight")
