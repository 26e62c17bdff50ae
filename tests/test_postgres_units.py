"""The pure parts of the PostgreSQL work: the idempotent checker (hypothesis: histories made by
a correct idempotent resource are valid, and every way of breaking one is caught), the mutex
checker's reads (antirez's check-and-set hole), fencing with logged reads, lock overlaps
inside the lock's own transaction, and how a spec picks the resource; and the resource's SQL,
run on one real PostgreSQL node (marked servers) and held to each mode's rule."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checker import fencing, idempotent, mutex
from dbs.postgres import PostgresDB
from harness.controller.spec import TestSpec
from harness.core.errors import UsageError
from harness.core.resource import Write
from tests.one_node import one_node
from workloads.idempotent import amount
from workloads.resources.postgres import PostgresResource

MS = 1_000_000


class Sim:
    """A correct idempotent resource and the clients' journal of what they sent it."""

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []
        self.log: list[dict[str, Any]] = []
        self.keys: dict[str, int] = {}
        self.balance = 0
        self.next_job = 1
        self.t = 0

    def op(self, p: int, type_: str, f: str, value: Any = None, **kw: Any) -> None:
        self.t += MS
        self.ops.append({"time": self.t, "process": p, "type": type_, "f": f, "value": value,
                         **kw})

    def apply(self, p: int, session: int, job: int, attempt: int, outcome: str,
              in_tx: bool = False) -> None:
        key = f"job-{job}"
        value = {"kind": "apply", "session": session, "key": key, "job": job,
                 "amount": amount(job), "attempt": attempt}
        if in_tx:
            value["in_lock_tx"] = True
        self.op(p, "invoke", "write", value)
        seq = len(self.log) + 1
        duplicate = key in self.keys
        entry = {"seq": seq, "process": p, "session": session, "kind": "apply",
                 "accepted": not duplicate, "key": key, "amount": amount(job), "job": job,
                 "duplicate": duplicate}
        if outcome != "lost":  # "lost": the request never reached the resource
            self.log.append(entry)
            if not duplicate:
                self.keys[key] = seq
                self.balance += amount(job)
                self.next_job = max(self.next_job, job + 1)
        if outcome == "ok":
            self.op(p, "ok", "write", {**value, "seq": seq, **({"duplicate": True}
                                                               if duplicate else {})})
        else:
            self.op(p, "info", "write", value, error="timeout")

    def history(self) -> list[dict[str, Any]]:
        final = len({o["process"] for o in self.ops}) + 10
        ops = [*self.ops,
               {"time": self.t + MS, "process": final, "type": "invoke", "f": "read"},
               {"time": self.t + 2 * MS, "process": final, "type": "ok", "f": "read",
                "value": copy.deepcopy(self.log)},
               {"time": self.t + 3 * MS, "process": final, "type": "invoke", "f": "read"},
               {"time": self.t + 4 * MS, "process": final, "type": "ok", "f": "read",
                "value": {"state": {"locks": {"lock": {"balance": self.balance,
                                                       "next_job": self.next_job}},
                                    "keys": dict(self.keys)}}}]
        return [{"index": i, **o} for i, o in enumerate(ops)]


@st.composite
def idempotent_runs(draw: st.DrawFn) -> Sim:
    """Holders take jobs, sometimes two at once (a broken lock) and sometimes retry."""
    sim = Sim()
    sessions: dict[int, int] = {}
    for _ in range(draw(st.integers(1, 12))):
        procs = draw(st.lists(st.integers(0, 3), min_size=1, max_size=2, unique=True))
        job = sim.next_job  # every holder read the same cursor: an overlap when two
        for p in procs:
            sessions[p] = sessions.get(p, 0) + 1
            sim.op(p, "invoke", "acquire", lock="lock")
            sim.op(p, "ok", "acquire", {"session": sessions[p]}, lock="lock")
        for p in procs:
            for attempt in range(1, 4):
                outcome = draw(st.sampled_from(["ok", "ok", "info", "lost"]))
                sim.apply(p, sessions[p], job, attempt, outcome)
                if outcome == "ok":
                    break
            sim.op(p, "invoke", "release", {"session": sessions[p]}, lock="lock")
            sim.op(p, "ok", "release", {"session": sessions[p]}, lock="lock")
    return sim


@settings(max_examples=150, deadline=None)
@given(idempotent_runs())
def test_a_correct_idempotent_resource_is_valid(sim: Sim) -> None:
    result = idempotent.IdempotentChecker.check(sim.history())
    assert result["valid"] is True, result["violations"]
    assert result["keys-applied-count"] == len(sim.keys)
    assert result["final-balance"] == sum(amount(int(k[4:])) for k in sim.keys)


def applied_entries(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    log = next(o["value"] for o in history if o["f"] == "read" and isinstance(o.get("value"),
                                                                              list))
    return [e for e in log if e.get("accepted")]


BREAKS = ["apply-twice", "duplicate-first", "drop-applied", "balance", "stored-key",
          "amount"]


@settings(max_examples=150, deadline=None)
@given(idempotent_runs(), st.sampled_from(BREAKS), st.randoms(use_true_random=False))
def test_every_way_of_breaking_it_is_caught(sim: Sim, how: str, rnd: Any) -> None:
    history = sim.history()
    log = next(o["value"] for o in history if o["f"] == "read" and isinstance(o.get("value"),
                                                                              list))
    state = history[-1]["value"]["state"]
    applied = [e for e in log if e["accepted"]]
    if not applied:
        return
    victim = rnd.choice(applied)
    if how == "apply-twice":  # a non-idempotent resource: the key applied again, later
        log.append({**victim, "seq": len(log) + 1})
        state["locks"]["lock"]["balance"] += victim["amount"]
    elif how == "duplicate-first":  # refused as a duplicate before it was ever applied
        log.insert(0, {**victim, "seq": 0, "accepted": False, "duplicate": True})
    elif how == "drop-applied":  # the resource lost an applied key: state and log agree
        log.remove(victim)
        state["locks"]["lock"]["balance"] -= victim["amount"]
        del state["keys"][victim["key"]]
        acked = any(o["type"] == "ok" and isinstance(o.get("value"), dict)
                    and o["value"].get("key") == victim["key"] for o in history)
        if not acked:
            return  # nobody was told: nothing the history can hold against it
    elif how == "balance":
        state["locks"]["lock"]["balance"] += rnd.choice([-1, 1]) * rnd.randint(1, 9)
    elif how == "stored-key":
        state["keys"]["job-999999"] = 1
    elif how == "amount":
        victim["amount"] += 1
    result = idempotent.IdempotentChecker.check(history)
    assert result["valid"] is False, (how, result)


def test_acknowledged_in_an_aborted_lock_transaction_is_not_owed() -> None:
    sim = Sim()
    sim.op(0, "invoke", "acquire", lock="lock")
    sim.op(0, "ok", "acquire", {"session": 1}, lock="lock")
    sim.apply(0, 1, 1, 1, "ok", in_tx=True)
    sim.log.clear()  # the transaction was rolled back: its entry and effect vanished
    sim.keys.clear()
    sim.balance = 0
    sim.op(0, "invoke", "release", {"session": 1}, lock="lock")
    sim.op(0, "fail", "release", {"session": 1}, lock="lock")
    assert idempotent.IdempotentChecker.check(sim.history())["valid"] is True
    committed = Sim()
    committed.op(0, "invoke", "acquire", lock="lock")
    committed.op(0, "ok", "acquire", {"session": 1}, lock="lock")
    committed.apply(0, 1, 1, 1, "ok", in_tx=True)
    committed.log.clear()
    committed.keys.clear()
    committed.balance = 0
    committed.op(0, "invoke", "release", {"session": 1}, lock="lock")
    committed.op(0, "ok", "release", {"session": 1}, lock="lock")  # committed, yet missing
    result = idempotent.IdempotentChecker.check(committed.history())
    assert result["valid"] is False
    assert result["violations"][0]["kind"] == "acknowledged-not-applied"


def test_without_the_final_read_the_verdict_is_unknown() -> None:
    sim = Sim()
    sim.apply(0, 1, 1, 1, "ok")
    assert idempotent.IdempotentChecker.check(sim.ops)["valid"] == "unknown"


# the mutex checker with logged reads ------------------------------------------------------
def entry(seq: int, p: int, kind: str, accepted: bool = True) -> dict[str, Any]:
    return {"seq": seq, "process": p, "session": 1, "kind": kind, "accepted": accepted}


def with_log(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"index": 0, "time": 1, "process": 9, "type": "invoke", "f": "read"},
            {"index": 1, "time": 2, "process": 9, "type": "ok", "f": "read", "value": log}]


def test_check_and_set_hole_a_read_inside_another_section_then_accepted_writes() -> None:
    # A enters (owner := A), B reads owner A, A's exit (owner stays A) and B's enter both pass
    log = [entry(1, 0, "read"), entry(2, 0, "enter"), entry(3, 1, "read"),
           entry(4, 0, "exit"), entry(5, 1, "enter"), entry(6, 1, "exit")]
    result = mutex.MutexChecker.check(with_log(log), overlaps_informational=True)
    assert result["valid"] is False
    assert "read the data (seq 3)" in result["resource-interleavings"][0]["explanation"]


def test_version_check_a_stale_reader_whose_writes_were_rejected_did_nothing() -> None:
    log = [entry(1, 0, "read"), entry(2, 0, "enter"), entry(3, 1, "read"),
           entry(4, 0, "exit"), entry(5, 1, "enter", accepted=False)]
    assert mutex.MutexChecker.check(with_log(log), overlaps_informational=True)["valid"] is True


def test_fencing_leaves_logged_reads_aside() -> None:
    log = [{**entry(1, 0, "read")}, {**entry(2, 0, "enter"), "token": 3},
           {**entry(3, 1, "read")}, {**entry(4, 1, "enter", accepted=False), "token": 2}]
    result = fencing.FencingChecker.check(with_log(log))
    assert result["stale-accepted-count"] == 0 and result["stale-rejected"] == 1
    assert result["writes-accepted"] == 1


def test_overlaps_of_a_lock_whose_writes_are_in_its_transaction_are_informational() -> None:
    ops = []
    t = 0
    for p, (a, r) in enumerate([(1, 10), (5, 12)]):  # p1 acquired while p0 still believed
        ops += [{"time": a * MS - MS, "process": p, "type": "invoke", "f": "acquire"},
                {"time": a * MS, "process": p, "type": "ok", "f": "acquire",
                 "value": {"session": 1}},
                {"time": a * MS + 1, "process": p, "type": "invoke", "f": "write",
                 "value": {"kind": "enter", "session": 1, "in_lock_tx": True}},
                {"time": a * MS + 2, "process": p, "type": "ok", "f": "write",
                 "value": {"kind": "enter", "session": 1, "in_lock_tx": True, "seq": p + 1}},
                {"time": r * MS, "process": p, "type": "invoke", "f": "release",
                 "value": {"session": 1}}]
        t = max(t, r)
    ops.sort(key=lambda o: o["time"])
    history = [{"index": i, **o} for i, o in enumerate(ops)]
    history += with_log([entry(2, 1, "enter")])  # p0's transaction was rolled back
    result = mutex.MutexChecker.check(history)
    assert result["lock-overlap-count"] == 1 and result["valid"] is True
    assert "own transaction" in result["note"]


# the resource's SQL -------------------------------------------------------------------------
# each mode's writes, in order, with what an application's condition says of each: the model
# (the expected verdicts) is the module docstring's rule, not the SQL it is checked against
FENCED = [  # (token, first write of its grant)
    (5, True), (5, False), (3, True), (3, False), (7, True), (5, False), (7, False), (7, True)]
VERSIONS = [0, 0, 1, 5, 2]  # the version each writer read
CLAIMS = [(None, "a"), (None, "b"), ("a", "b"), ("a", "c"), ("b", None)]  # (read owner, claim)


def fenced_model(writes: list[tuple[int, bool]]) -> list[bool]:
    """A grant's first write needs a token above the row's last; later ones the same token."""
    last, out = 0, []
    for token, first in writes:
        ok = token > last if first else token == last
        last = token if ok else last
        out.append(ok)
    return out


@pytest.mark.servers
@pytest.mark.skipif(not Path("/usr/lib/postgresql/15/bin/initdb").exists(),
                    reason="PostgreSQL 15 missing: run `bash setup.sh`")
def test_each_modes_sql_accepts_exactly_what_its_condition_says(tmp_path: Path) -> None:
    """The resource's UPDATEs run on a real PostgreSQL, their verdicts held to the rule each
    mode states (fencing tokens, versions, check-and-set, idempotency keys)."""
    with one_node(PostgresDB(), tmp_path) as (node,):
        def resource(mode: str) -> PostgresResource:
            r = PostgresResource(node.host, node.port, mode=mode)
            r.setup()
            return r

        fenced = resource("fenced")
        got = [fenced.write(Write(0, i, "enter", lock="f", token=t, first=first)).accepted
               for i, (t, first) in enumerate(FENCED)]
        assert got == fenced_model(FENCED) == [True, True, False, False, True, False, True,
                                               False]
        version, current, expected = resource("version"), 0, []
        got = []
        for i, read in enumerate(VERSIONS):
            w = version.write(Write(0, i, "enter", lock="v", expect=read))
            got.append((w.accepted, w.expect))
            expected.append((read == current, read + 1 if read == current else None))
            current += read == current
        assert got == expected
        cas, owner, expected, got = resource("cas"), None, [], []
        for i, (read, claim) in enumerate(CLAIMS):
            w = cas.write(Write(0, i, "enter", lock="c", expect=read, claim=claim))
            got.append(w.accepted)
            expected.append(read == owner)
            owner = claim if read == owner else owner
        assert got == expected
        plain = resource("plain")
        jobs = [("job-1", 2, 1), ("job-2", 3, 2), ("job-1", 2, 1)]  # the last one a retry
        done = [plain.write(Write(0, i, "apply", lock="p", key=k, amount=a, job=j))
                for i, (k, a, j) in enumerate(jobs)]
        assert [(w.accepted, w.duplicate) for w in done] == [(True, False), (True, False),
                                                              (False, True)]
        state = plain.read_state()
        assert state["locks"]["p"]["balance"] == 2 + 3 and state["locks"]["p"]["next_job"] == 3
        assert state["locks"]["f"]["last_fencing_token"] == 7
        assert state["locks"]["v"]["version"] == current
        assert state["locks"]["c"]["owner"] == owner
        for r in (fenced, version, cas, plain):
            r.close()


# how a spec picks the resource ------------------------------------------------------------
def test_locks_that_write_in_their_transaction_get_the_resource_in_their_database() -> None:
    spec = TestSpec.from_dict({"db": "postgres", "lock": "pg-row"}).validate()
    assert (spec.resource, spec.resource_mode) == ("postgres", "plain")
    spec = TestSpec.from_dict({"db": "postgres", "lock": "pg-advisory"}).validate()
    assert spec.resource == "postgres"
    spec = TestSpec.from_dict({"db": "postgres", "lock": "pg-advisory",
                               "resource": "redis"}).validate()
    assert spec.resource == "redis"
    with pytest.raises(UsageError, match="own transaction"):
        TestSpec.from_dict({"db": "postgres", "lock": "pg-row", "resource": "redis"}).validate()


def test_modes_are_checked_against_the_resource_and_the_workload() -> None:
    spec = TestSpec.from_dict({"lock": "redis-fenced", "workload": "fenced",
                               "resource": "postgres"}).validate()
    assert spec.resource_mode == "fenced"
    assert "postgres-fenced" in spec.test_name
    spec = TestSpec.from_dict({"workload": "idempotent"}).validate()
    assert (spec.resource, spec.resource_mode) == ("postgres", "plain")
    with pytest.raises(UsageError, match="--resource redis has plain, fenced"):
        TestSpec.from_dict({"resource-mode": "cas"}).validate()
    with pytest.raises(UsageError, match="resource-mode fenced, not cas"):
        TestSpec.from_dict({"lock": "redis-fenced", "workload": "fenced",
                            "resource": "postgres", "resource-mode": "cas"}).validate()
    with pytest.raises(UsageError, match="needs a lock with fencing tokens"):
        TestSpec.from_dict({"resource": "postgres", "resource-mode": "fenced"}).validate()
    spec = TestSpec.from_dict({"resource": "postgres", "resource-mode": "cas"}).validate()
    assert spec.test_name.endswith("postgres-cas")
