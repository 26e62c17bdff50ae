"""The faults checker: a fault that did not bite, or was never injected, is never a pass."""

from __future__ import annotations

from typing import Any

import pytest

from checker import faults

S = 1_000_000_000


def op(t: float, p: Any, ty: str, f: str, value: Any = None, **kw: Any) -> dict[str, Any]:
    return {"time": int(t * S), "process": p, "type": ty, "f": f, "value": value, **kw}


def pause(t0: float, t1: float, p: int) -> list[dict[str, Any]]:
    return [op(t0, "nemesis", "invoke", "pause", "start", step=0, targets=[f"c{p}"]),
            op(t0 + 0.001, "nemesis", "info", "pause", "start", step=0, targets=[f"c{p}"],
               expect={"frozen": [p]}),
            op(t1, "nemesis", "invoke", "pause", "stop", step=0, targets=[f"c{p}"]),
            op(t1 + 0.001, "nemesis", "info", "pause", "stop", step=0, targets=[f"c{p}"])]


def partition(t0: float, t1: float, p: int) -> list[dict[str, Any]]:
    return [op(t0, "nemesis", "invoke", "partition", "start", step=0, targets=[f"c{p}"]),
            op(t0 + 0.001, "nemesis", "info", "partition", "start", step=0,
               targets=[f"c{p}"], expect={"cut-off": [p]}),
            op(t1, "nemesis", "invoke", "partition", "stop", step=0, targets=[f"c{p}"]),
            op(t1 + 0.001, "nemesis", "info", "partition", "stop", step=0, targets=[f"c{p}"])]


def ordered(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"index": i, **o} for i, o in enumerate(sorted(ops, key=lambda o: o["time"]))]


def test_a_pause_that_froze_the_client_passes() -> None:
    h = ordered([op(0.5, 1, "invoke", "acquire"), op(0.6, 1, "ok", "acquire"),
                 *pause(1.0, 4.0, 1),
                 op(4.2, 1, "invoke", "release"), op(4.3, 1, "fail", "release")])
    r = faults.FaultsChecker.check(h)
    assert r["valid"] is True and r["fault-count"] == 1


def test_a_client_that_kept_recording_while_paused_makes_it_unknown() -> None:
    h = ordered([op(0.5, 1, "invoke", "acquire"), op(0.6, 1, "ok", "acquire"),
                 *pause(1.0, 4.0, 1),
                 op(2.0, 1, "invoke", "release"), op(2.1, 1, "ok", "release")])
    r = faults.FaultsChecker.check(h)
    assert r["valid"] == "unknown"
    assert "pause did not freeze process 1: it recorded 2 op(s)" in \
        r["ineffective"][0]["explanation"]


def test_a_cut_client_completing_lock_ops_makes_it_unknown() -> None:
    h = ordered([*partition(1.0, 5.0, 2),
                 op(1.5, 2, "invoke", "acquire"), op(1.6, 2, "ok", "acquire"),
                 op(1.7, 2, "invoke", "write", {"kind": "enter"}),
                 op(1.8, 2, "ok", "write", {"kind": "enter", "seq": 1})])
    r = faults.FaultsChecker.check(h)
    assert r["valid"] == "unknown"
    assert "partition did not cut process 2 off" in r["ineffective"][0]["explanation"]


def test_a_cut_client_may_write_to_the_resource_and_time_out_on_the_lock() -> None:
    h = ordered([*partition(1.0, 5.0, 2),
                 op(1.7, 2, "invoke", "write", {"kind": "exit"}),
                 op(1.8, 2, "ok", "write", {"kind": "exit", "seq": 1}),
                 op(1.9, 2, "invoke", "release"), op(2.9, 2, "info", "release"),
                 op(0.5, 2, "invoke", "acquire"), op(1.2, 2, "ok", "acquire")])
    assert faults.FaultsChecker.check(h)["valid"] is True


def test_a_fault_that_could_not_be_injected_makes_it_unknown() -> None:
    h = ordered([op(1.0, "nemesis", "invoke", "clock", "start", step=0),
                 op(1.1, "nemesis", "info", "clock", "start", step=0,
                    error="n1: clock offset is +0.00 s, not +60 s")])
    r = faults.FaultsChecker.check(h)
    assert r["valid"] == "unknown" and r["not-injected-count"] == 1
    assert "could not be injected" in r["not-injected"][0]["explanation"]


def test_no_faults_is_valid() -> None:
    assert faults.FaultsChecker.check(ordered([op(0.1, 0, "invoke", "acquire")]))["valid"] is True


def window(f: str, t0: float, t1: float, targets: list[str], expect: dict[str, Any]
           ) -> list[dict[str, Any]]:
    return [op(t0, "nemesis", "invoke", f, "start", step=0, targets=targets),
            op(t0 + 0.001, "nemesis", "info", f, "start", step=0, targets=targets,
               expect=expect),
            op(t1, "nemesis", "invoke", f, "stop", step=0, targets=targets),
            op(t1 + 0.001, "nemesis", "info", f, "stop", step=0, targets=targets)]


SLOWED = {"slowed": {"processes": [1], "at-least": 0.2}}


def test_a_delay_that_slowed_every_lock_op_passes() -> None:
    h = ordered([*window("delay", 1.0, 5.0, ["c1"], SLOWED),
                 op(1.5, 1, "invoke", "acquire"), op(1.75, 1, "ok", "acquire"),
                 op(1.8, 1, "invoke", "write", {"kind": "enter"}),  # the resource: not delayed
                 op(1.801, 1, "ok", "write", {"kind": "enter", "seq": 1}),
                 op(2.0, 1, "invoke", "release"), op(2.21, 1, "ok", "release"),
                 op(0.1, 1, "invoke", "acquire"), op(0.15, 1, "fail", "acquire")])
    assert faults.FaultsChecker.check(h)["valid"] is True


def test_a_lock_op_faster_than_the_delay_allows_makes_it_unknown() -> None:
    h = ordered([*window("delay", 1.0, 5.0, ["c1"], SLOWED),
                 op(1.5, 1, "invoke", "acquire"), op(1.75, 1, "ok", "acquire"),
                 op(2.0, 1, "invoke", "release"), op(2.003, 1, "ok", "release")])
    r = faults.FaultsChecker.check(h)
    assert r["valid"] == "unknown" and r["ineffective-count"] == 1
    text = r["ineffective"][0]["explanation"]
    assert "delay did not slow process 1 down" in text and "a release, took 3.0 ms" in text


def test_a_fast_op_outside_the_delay_window_is_no_evidence() -> None:
    h = ordered([*window("delay", 1.0, 5.0, ["c1"], SLOWED),
                 op(0.9, 1, "invoke", "acquire"), op(1.01, 1, "ok", "acquire"),  # began before
                 op(5.1, 1, "invoke", "release"), op(5.101, 1, "ok", "release")])  # after
    assert faults.FaultsChecker.check(h)["valid"] is True


STALLED = {"stalled": {"processes": [2, 3], "seconds": 3.0}}


def test_a_stall_that_held_every_reply_passes() -> None:
    h = ordered([*window("stall-grant", 1.0, 6.0, ["c2", "c3"], STALLED),
                 op(0.5, 2, "invoke", "acquire"), op(4.2, 2, "ok", "acquire"),  # the late grant
                 op(0.6, 3, "invoke", "acquire"), op(4.3, 3, "info", "acquire")])
    assert faults.FaultsChecker.check(h)["valid"] is True


def test_a_stalled_client_that_completed_an_acquire_makes_it_unknown() -> None:
    h = ordered([*window("stall-grant", 1.0, 6.0, ["c2", "c3"], STALLED),
                 op(0.5, 2, "invoke", "acquire"), op(1.5, 2, "ok", "acquire")])
    r = faults.FaultsChecker.check(h)
    assert r["valid"] == "unknown"
    assert "did not hold process 2's replies" in r["ineffective"][0]["explanation"]


def test_malformed_claims_are_ignored_not_crashed_on() -> None:
    h = ordered([*window("delay", 1.0, 5.0, ["c1"], {"slowed": {"processes": [1],
                                                               "at-least": "slow"}}),
                 *window("stall-grant", 6.0, 9.0, ["c1"], {"stalled": [1]}),
                 op(1.5, 1, "invoke", "acquire"), op(1.501, 1, "ok", "acquire")])
    assert faults.FaultsChecker.check(h)["valid"] is True


# evidence is what waited for a reply; a fault must test the lock, not only its absence -------
DELAYED = {"slowed": {"processes": [1], "at-least": 0.2}, "completes": [1]}


def test_a_release_that_does_not_wait_is_no_evidence_the_delay_did_not_bite() -> None:
    h = ordered([*window("delay", 1.0, 5.0, ["c1"], DELAYED),
                 op(1.5, 1, "invoke", "acquire"), op(1.75, 1, "ok", "acquire"),
                 op(2.0, 1, "invoke", "release"), op(2.003, 1, "ok", "release")])
    waits = faults.FaultsChecker.check(h)
    assert waits["valid"] == "unknown" and waits["ineffective-count"] == 1  # it waited: fast
    r = faults.FaultsChecker.check(h, release_waits=False)
    assert r["valid"] is True and r["ineffective-count"] == 0
    assert r["unavailable-only-count"] == 0  # the slow acquire is the evidence
    assert r["release-waits"] is False


def test_a_delay_beaten_by_releases_alone_says_what_they_were_and_names_the_declaration(
        ) -> None:
    """Issue 40: the only ops faster than the delay were releases: the words say so and point
    at ``release_waits = False``, never only "around the link layer?"."""
    fast = [o for t in (2.0, 3.0) for o in (op(t, 1, "invoke", "release"),
                                            op(t + 0.003, 1, "ok", "release"))]
    slow = [op(1.5, 1, "invoke", "acquire"), op(1.75, 1, "ok", "acquire")]
    text = faults.FaultsChecker.check(ordered([*window("delay", 1.0, 5.0, ["c1"], DELAYED),
                                               *slow, *fast]))["ineffective"][0]["explanation"]
    assert ("the only lock ops faster than the delay were 2 release(s), while 1 other lock "
            "op(s) were slowed: its releases did not wait for a reply; a lock whose release "
            "does not wait declares release_waits = False") in text
    assert "link layer" not in text
    text = faults.FaultsChecker.check(ordered([*window("delay", 1.0, 5.0, ["c1"], DELAYED),
                                               *fast]))["ineffective"][0]["explanation"]
    assert text.endswith("the only lock ops faster than the delay were 2 release(s): if this "
                         "lock's release waits for no reply, declare release_waits = False on "
                         "the lock; if it waits, do its connections go around the link layer?")
    quick = [op(1.5, 1, "invoke", "acquire"), op(1.503, 1, "ok", "acquire")]
    text = faults.FaultsChecker.check(ordered([*window("delay", 1.0, 5.0, ["c1"], DELAYED),
                                               *quick, *fast]))["ineffective"][0]["explanation"]
    assert text.endswith(": do its connections go around the link layer?")


def test_a_partition_is_not_disproved_by_a_release_that_does_not_wait() -> None:
    h = ordered([*partition(1.0, 5.0, 2),
                 op(1.5, 2, "invoke", "release"), op(1.501, 2, "ok", "release")])
    assert faults.FaultsChecker.check(h)["valid"] == "unknown"
    assert faults.FaultsChecker.check(h, release_waits=False)["valid"] is True


def test_a_stall_is_not_disproved_by_a_release_that_does_not_wait() -> None:
    h = ordered([*window("stall-grant", 1.0, 6.0, ["c2"], {"stalled": {"processes": [2],
                                                                       "seconds": 3.0}}),
                 op(1.5, 2, "invoke", "rerelease"), op(1.6, 2, "ok", "rerelease")])
    assert faults.FaultsChecker.check(h)["valid"] == "unknown"
    assert faults.FaultsChecker.check(h, release_waits=False)["valid"] is True


def test_a_delay_under_which_no_lock_op_completed_tested_unavailability_only() -> None:
    h = ordered([*window("delay", 1.0, 5.0, ["c1", "c2"],
                         {**DELAYED, "completes": [1, 2]}),
                 op(1.5, 1, "invoke", "acquire"), op(3.5, 1, "fail", "acquire"),
                 op(1.6, 2, "invoke", "acquire"), op(2.6, 2, "info", "acquire"),
                 op(2.7, 2, "invoke", "acquire"), op(3.7, 2, "info", "acquire"),
                 op(3.6, 1, "invoke", "write", {"kind": "enter"}),  # not a lock op
                 op(3.61, 1, "ok", "write", {"kind": "enter", "seq": 1}),
                 op(5.5, 1, "invoke", "acquire"), op(5.6, 1, "ok", "acquire")])  # after it
    r = faults.FaultsChecker.check(h)
    assert r["valid"] == "unknown" and r["ineffective-count"] == 0
    assert r["unavailable-only-count"] == 1
    text = r["unavailable-only"][0]["explanation"]
    assert text.startswith("delay tested unavailability only: no lock op of process(es) 1, 2 "
                           "completed between 1.00 s and 5.00 s (3 ended inside it: 1 fail, "
                           "2 info)"), text
    assert "every fault of this run (1) tested unavailability only" in r["note"]


def test_one_window_without_completed_ops_is_reported_but_another_that_tested_counts() -> None:
    h = ordered([*window("delay", 1.0, 5.0, ["c1"], DELAYED),
                 op(1.5, 1, "invoke", "acquire"), op(2.5, 1, "info", "acquire"),
                 *[{**o, "step": 1} for o in window("delay", 6.0, 9.0, ["c1"], DELAYED)],
                 op(6.5, 1, "invoke", "acquire"), op(6.8, 1, "ok", "acquire")])
    r = faults.FaultsChecker.check(h)
    assert r["valid"] is True and r["fault-count"] == 2
    assert r["unavailable-only-count"] == 1 and r["unavailable-only"][0]["from"] == 1.001


def test_a_release_that_does_not_wait_does_not_show_a_lock_op_completed() -> None:
    h = ordered([*window("delay", 1.0, 5.0, ["c1"], DELAYED),
                 op(0.5, 1, "invoke", "acquire"), op(0.6, 1, "ok", "acquire"),
                 op(2.0, 1, "invoke", "release"), op(2.3, 1, "ok", "release"),
                 op(2.4, 1, "invoke", "acquire"), op(4.4, 1, "fail", "acquire")])
    assert faults.FaultsChecker.check(h)["valid"] is True  # its release waited, slowly: evidence
    r = faults.FaultsChecker.check(h, release_waits=False)
    assert r["valid"] == "unknown" and r["unavailable-only-count"] == 1
    assert "no lock op (releases aside: this lock's wait for no reply) of process(es) 1" in \
        r["unavailable-only"][0]["explanation"]


def test_faults_that_claim_nothing_of_completion_are_not_judged_unavailable() -> None:
    """A pause or a partition is meant to stop its clients: a window without completed ops is
    what it should show."""
    h = ordered([*pause(1.0, 4.0, 1), op(0.5, 1, "invoke", "acquire"),
                 op(4.5, 1, "ok", "acquire")])
    r = faults.FaultsChecker.check(h)
    assert r["valid"] is True and r["unavailable-only-count"] == 0


def test_a_window_in_which_nothing_ended_at_all_says_so() -> None:
    h = ordered([*window("loss", 1.0, 5.0, ["c3"], {"completes": [3]}),
                 op(0.5, 3, "invoke", "acquire"), op(5.5, 3, "info", "acquire")])
    r = faults.FaultsChecker.check(h)
    assert r["valid"] == "unknown"
    assert "(none even ended inside it)" in r["unavailable-only"][0]["explanation"]


@pytest.mark.parametrize("bad", [None, "false", 0, 1, [True]])
def test_release_waits_must_be_a_bool(bad: Any) -> None:
    with pytest.raises(ValueError, match="release_waits must be true or false"):
        faults.FaultsChecker.check(ordered([op(0.1, 0, "invoke", "acquire")]), release_waits=bad)


@pytest.mark.parametrize("claim", [3, "c1", {"processes": [1]}, [True, "1", None], []])
def test_malformed_completion_claims_are_ignored_not_crashed_on(claim: Any) -> None:
    h = ordered([*window("delay", 1.0, 5.0, ["c1"], {"completes": claim}),
                 op(1.5, 1, "invoke", "acquire"), op(2.5, 1, "info", "acquire")])
    r = faults.FaultsChecker.check(h)
    assert r["valid"] is True and r["unavailable-only-count"] == 0


def test_a_window_a_client_held_the_lock_through_is_not_judged() -> None:
    """ZooKeeper's long critical sections under a 2 s delay window at the end of a run: the
    holder held through it and the others waited for the holder, not for the service."""
    holder = [op(0.5, 0, "invoke", "acquire"), op(0.9, 0, "ok", "acquire", {"session": 1}),
              op(6.0, 0, "invoke", "release"), op(6.4, 0, "ok", "release")]
    waiter = [op(0.6, 1, "invoke", "acquire"), op(6.5, 1, "ok", "acquire", {"session": 1})]
    r = faults.FaultsChecker.check(ordered([*window("delay", 1.0, 5.0, ["c0", "c1"],
                                      {"completes": [0, 1]}), *holder, *waiter]))
    assert r["valid"] is True and r["unavailable-only-count"] == 0
    early = [{**o, "time": o["time"] - 4 * S} if o["f"] == "release" else o for o in holder]
    r = faults.FaultsChecker.check(ordered([*window("delay", 1.0, 5.0, ["c0", "c1"],
                                      {"completes": [0, 1]}), *early, *waiter]),
                     release_waits=False)
    assert r["valid"] == "unknown" and r["unavailable-only-count"] == 1  # released at 2.0 s


def test_a_run_asked_for_faults_none_of_which_ran_is_unknown() -> None:
    """Every step skipped (no target when it was due): the lock was tested without the faults
    the run was asked for, which is no pass (seen: partition-minority on a one-node DB)."""
    h = ordered([op(0.5, 1, "invoke", "acquire"), op(0.6, 1, "ok", "acquire"),
                 op(0.7, 1, "invoke", "release"), op(0.8, 1, "ok", "release")])
    r = faults.FaultsChecker.check(h, asked=["partition-minority"])
    assert r["valid"] == "unknown" and r["fault-count"] == 0
    assert "asked for partition-minority and no fault ran" in r["note"]
    assert faults.FaultsChecker.check(h)["valid"] is True  # a run asked for none: nothing to prove
    ran = ordered([*h, *pause(1.0, 2.0, 2)])
    assert faults.FaultsChecker.check(ran, asked=["pause"])["valid"] is True


def test_the_workload_passes_the_faults_it_was_asked_for() -> None:
    from workloads.mutex import asked_faults

    assert asked_faults({"nemesis": ["pause", "kill"]}) == ["pause", "kill"]
    assert asked_faults({"nemesis": "pause,kill"}) == ["pause", "kill"]
    assert asked_faults({"nemesis": []}) == []
    assert asked_faults({"nemesis": ["none"]}) == []
    assert asked_faults({"schedule": {"steps": [{"fault": "kill"}, {"fault": "pause"},
                                                {"fault": "kill"}]}}) == ["kill", "pause"]


def test_a_power_loss_that_dropped_nothing_with_nothing_in_flight_lost_nothing() -> None:
    h = ordered([op(0.5, 1, "invoke", "acquire"), op(0.6, 1, "ok", "acquire"),
                 *window("power-loss", 1.0, 1.2, ["n1", "n2", "n3"], {"dropped": 0}),
                 op(2.0, 1, "invoke", "release"), op(2.1, 1, "ok", "release")])
    result = faults.FaultsChecker.check(h)
    assert result["valid"] is True  # the expected outcome of a DB that syncs each write
    assert result["lost-nothing-count"] == 1
    assert "dropped nothing unsynced and no lock op was in flight" in (
        result["lost-nothing"][0]["explanation"])
    assert result["ineffective-count"] == 0


@pytest.mark.parametrize("history", [
    [op(0.9, 2, "invoke", "acquire"), *window("power-loss", 1.0, 1.2, ["n1"], {"dropped": 0}),
     op(1.5, 2, "ok", "acquire")],  # an acquire in flight when the power went
    [*window("power-loss", 1.0, 1.2, ["n1"], {"dropped": 312})],  # it dropped data
])
def test_a_power_loss_that_dropped_data_or_caught_an_op_in_flight_bit(
        history: list[dict[str, Any]]) -> None:
    result = faults.FaultsChecker.check(ordered(history))
    assert result["valid"] is True
    assert "lost-nothing-count" not in result


# exactly zero, one and two ops inside each kind of window: one op is as much a miss as two ----
def lock_op(t: float, p: int, took: float = 0.1, f: str = "acquire") -> list[dict[str, Any]]:
    return [op(t, p, "invoke", f), op(t + took, p, "ok", f)]


KINDS = {  # fault, its claim, the list its misses go to, n ops inside (of process 1) at 2.0 s
    "pause": ("pause", {"frozen": [1]}, "ineffective",
              lambda n: [op(2.0 + 0.1 * i, 1, ("invoke", "ok")[i % 2], "acquire")
                         for i in range(n)]),
    "cut-off": ("partition", {"cut-off": [1]}, "ineffective",
                lambda n: [o for i in range(n) for o in lock_op(2.0 + 0.3 * i, 1)]),
    "stall": ("stall-grant", {"stalled": {"processes": [1], "seconds": 3.0}}, "ineffective",
              lambda n: [o for i in range(n) for o in lock_op(2.0 + 0.3 * i, 1)]),
    "delay": ("delay", {"slowed": {"processes": [1], "at-least": 0.2}}, "ineffective",
              lambda n: [o for i in range(n) for o in lock_op(2.0 + 0.3 * i, 1, 0.01)]),
}


def in_both(h: list[dict[str, Any]]) -> list[Any]:
    from harness.core.run_history import merged_columns

    cols = merged_columns(h)
    assert cols is not None
    return [h, cols]


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("n", [0, 1, 2])
def test_one_op_inside_a_window_is_a_miss_as_two_are(kind: str, n: int) -> None:
    f, claim, listed, ops_inside = KINDS[kind]
    h = ordered([*window(f, 1.0, 5.0, ["c1"], claim), *ops_inside(n),
                 *lock_op(0.2, 1, 0.5), *lock_op(5.5, 1, 0.5)])  # outside: no evidence
    for history in in_both(h):
        r = faults.FaultsChecker.check(history)
        assert r[f"{listed}-count"] == (n > 0), (kind, n, r)
        assert r["valid"] == ("unknown" if n else True)
        if n:
            assert r[listed][0]["ops"] == n and r[listed][0]["process"] == 1


def invoked(t: float, done: float) -> list[dict[str, Any]]:
    return [op(t, 1, "invoke", "acquire"), op(done, 1, "ok", "acquire")]


EDGES = [  # (kind, process 1's ops, do they count): a window from 1.001 s to 5.0 s
    *[("pause", [op(t, 1, "invoke", "acquire")], counts)  # open 5 ms after its start
      for t, counts in [(1.005, False), (1.007, True), (4.999, True), (5.0, False)]],
    *[(kind, invoked(t, done), counts) for kind in ("cut-off", "delay")  # invoked inside it
      for t, done, counts in [(1.005, 1.0055, False), (1.007, 1.008, True),
                              (4.99, 4.999, True), (4.99, 5.0, False)]],
    *[("stall", invoked(0.5, done), counts)  # completed while held: 3 s from its start
      for done, counts in [(1.0005, False), (1.002, True), (3.995, True), (3.997, False)]],
]


@pytest.mark.parametrize(("kind", "ops", "counts"), EDGES)
def test_one_op_at_a_windows_edge(kind: str, ops: list[dict[str, Any]], counts: bool) -> None:
    f, claim, listed, _ = KINDS[kind]
    for history in in_both(ordered([*window(f, 1.0, 5.0, ["c1"], claim), *ops])):
        assert faults.FaultsChecker.check(history)[f"{listed}-count"] == counts


@pytest.mark.parametrize("n", [0, 1, 2])
def test_one_completed_op_inside_a_window_tested_the_lock(n: int) -> None:
    h = ordered([*window("delay", 1.0, 5.0, ["c1"], DELAYED),
                 *[o for i in range(n) for o in lock_op(2.0 + i, 1, 0.3)],
                 op(4.0, 1, "invoke", "acquire"), op(4.5, 1, "info", "acquire")])
    for history in in_both(h):
        r = faults.FaultsChecker.check(history)
        assert r["unavailable-only-count"] == (n == 0) and r["valid"] == (
            True if n else "unknown")
        if not n:
            assert r["unavailable-only"][0]["ops"] == 1


# a stall whose held grants were all dropped unheard tested unavailability only ---------------
def stall(t0: float, t1: float, late: Any, step: int = 0, held: Any = 3.2
          ) -> list[dict[str, Any]]:
    ops = window("stall-grant", t0, t1, ["c2"], {"stalled": {"processes": [2],
                                                             "seconds": 3.0}})
    ops[-1]["detail"] = {"late-grant": "?", "late-grants": late, "grant-held-s": held}
    return [{**o, "step": step} for o in ops]


def test_a_stall_whose_grants_were_all_dropped_unheard_tested_unavailability_only() -> None:
    """Redlock's per-node timeout (TTL/20) closed the connection before the stall let the
    grant go: the late grant was never heard, so the validity check was not tested."""
    dropped = {"delivered": 0, "dropped": 6}
    h = ordered([*stall(1.0, 5.0, dropped), op(0.5, 2, "invoke", "acquire"),
                 op(4.5, 2, "ok", "acquire")])
    for history in in_both(h):
        r = faults.FaultsChecker.check(history)
        assert r["valid"] == "unknown" and r["ineffective-count"] == 0
        assert r["unavailable-only-count"] == 1
        text = r["unavailable-only"][0]["explanation"]
        assert text.startswith("stall-grant tested unavailability only: no grant it held "
                               "reached process(es) 2 (6 dropped with a connection"), text
        assert "every fault of this run (1) tested unavailability only" in r["note"]


@pytest.mark.parametrize("held", [0.05, 2.99])
def test_a_stall_cut_short_delivered_its_grant_in_time_not_late(held: float) -> None:
    h = ordered(stall(1.0, 5.0, {"delivered": 1, "dropped": 0}, held=held))
    r = faults.FaultsChecker.check(h)
    assert r["valid"] == "unknown" and r["unavailable-only-count"] == 1
    assert (f"its grant to process(es) 2 was let go after {held:g} s, before its 3 s ran out"
            in r["unavailable-only"][0]["explanation"])


@pytest.mark.parametrize(("late", "held"), [
    ({"delivered": 1, "dropped": 5}, 3.2), ({"delivered": 2, "dropped": 0}, 3.0),
    ({"delivered": 1, "dropped": 0}, 2.996), ({"delivered": 1}, None), ({"delivered": 1}, "x"),
    (None, 3.2), ("dropped", 3.2), ({"dropped": 3}, 3.2), ({"delivered": False}, 3.2),
    ({"delivered": "0"}, 0.1)])
def test_a_stall_with_a_grant_heard_late_or_no_count_is_not_judged(late: Any, held: Any
                                                                   ) -> None:
    h = ordered([*stall(1.0, 5.0, late, held=held), op(0.5, 2, "invoke", "acquire"),
                 op(4.5, 2, "ok", "acquire")])
    r = faults.FaultsChecker.check(h)
    assert r["valid"] is True and r["unavailable-only-count"] == 0


def test_one_heard_stall_tests_the_run_beside_an_unheard_one() -> None:
    h = ordered([*stall(1.0, 5.0, {"delivered": 0, "dropped": 1}),
                 *stall(6.0, 10.0, {"delivered": 1, "dropped": 0}, step=1)])
    r = faults.FaultsChecker.check(h)
    assert r["valid"] is True and r["unavailable-only-count"] == 1
    assert r["unavailable-only"][0]["from"] == 1.001
    r = faults.FaultsChecker.check(ordered(stall(6.0, 10.0, {"delivered": 0, "dropped": 1})[:3]))
    assert r["valid"] is True, "a stop never recorded: its detail is no count"


# a client's clock fault is held to what it read back from the process ----------------------
def client_clock(asked: dict[str, Any], detail: dict[str, Any]) -> list[dict[str, Any]]:
    ops = window("clock-client", 1.0, 5.0, ["c2"], {"clock-moved": {"processes": [2],
                                                                    **asked}})
    ops[1]["detail"] = ops[3]["detail"] = {"pattern": "?", **detail}
    return ops


@pytest.mark.parametrize(("asked", "detail", "moved"), [
    ({"offset": 4.0}, {"observed": {"2": 3.999}}, True),
    ({"offset": 4.0}, {"observed": {"2": 3.2}}, True),  # within the nodes' tolerance (1 s)
    ({"offset": 4.0}, {"observed": {"2": 2.9}}, False),
    ({"offset": 4.0}, {"observed": {"2": 0.0}}, False),  # the fault did nothing
    ({"offset": 0.5}, {"observed": {"2": 0.5}}, False),  # not told from no move
    ({"offset": -4.0}, {"observed": {"2": -4.1}}, True),
    ({"offset": 4.0}, {"observed": {"3": 4.0}}, False),  # another process's
    ({"offset": 4.0}, {}, False),  # no read-back
    ({"offset": 4.0}, {"observed": {"2": None}}, False),
    ({"rate": 5.0}, {"observed-rate": {"2": 4.96}}, True),
    ({"rate": 5.0}, {"observed-rate": {"2": 3.0}}, True),  # half the speed-up
    ({"rate": 5.0}, {"observed-rate": {"2": 2.9}}, False),
    ({"rate": 5.0}, {"observed-rate": {"2": 1.0}}, False),  # the fault did nothing
    ({"rate": 1.0}, {"observed-rate": {"2": 1.0}}, False),  # asked for no move
    ({"rate": 5.0}, {"observed": {"2": 4.0}}, False),  # an offset is not a rate
])
def test_a_client_clock_fault_not_read_back_moved_did_not_bite(
        asked: dict[str, Any], detail: dict[str, Any], moved: bool) -> None:
    """A lock timed on the monotonic clock and a fault that did nothing both pass the other
    checks: only the read-back tells them apart."""
    h = ordered([*client_clock(asked, detail), *lock_op(2.0, 2)])
    for history in in_both(h):
        r = faults.FaultsChecker.check(history)
        assert r["valid"] == (True if moved else "unknown"), r
        assert r["ineffective-count"] == (not moved)
    if not moved:
        text = r["ineffective"][0]["explanation"]
        assert text.startswith("clock-client did not move process 2's clock as asked ("), text
        assert "so the lock was not tested under it" in text


def test_a_rate_read_back_at_its_stop_is_the_evidence() -> None:
    """A rate's read-backs end with it: the stop's detail is what counts."""
    ops = client_clock({"rate": 5.0}, {})
    ops[3]["detail"] = {"pattern": "rate", "observed-rate": {"2": 5.01}}
    assert faults.FaultsChecker.check(ordered(ops))["valid"] is True
    ops[3]["detail"] = {"pattern": "rate", "observed-rate": {"2": 1.0}}
    assert faults.FaultsChecker.check(ordered(ops))["valid"] == "unknown"


@pytest.mark.parametrize("claim", [3, {"processes": [2]}, {"processes": [2], "offset": "x"},
                                   {"processes": [2], "rate": True}, {"processes": "2",
                                                                      "offset": 4.0}])
def test_malformed_clock_claims_are_ignored_not_crashed_on(claim: Any) -> None:
    ops = window("clock-client", 1.0, 5.0, ["c2"], {"clock-moved": claim})
    assert faults.FaultsChecker.check(ordered(ops))["valid"] is True


# a failover is held to the promotion it read back ---------------------------------------------
@pytest.mark.parametrize(("detail", "bit"), [
    ({"old-primary": "n1", "promoted": "n2", "promoted-after-s": 4.1}, True),
    ({"old-primary": "n1", "promoted": None, "promoted-after-s": None}, False),  # the run ended
    ({}, False),  # no stop detail: no promotion read back
])
def test_a_failover_that_promoted_nobody_did_not_bite(detail: dict[str, Any], bit: bool
                                                     ) -> None:
    ops = window("failover", 1.0, 5.0, ["n1", "c0"], {"promotes": "n1"})
    ops[3]["detail"] = detail
    r = faults.FaultsChecker.check(ordered([op(0.5, 0, "invoke", "acquire"),
                                            op(0.6, 0, "ok", "acquire"), *ops]))
    assert (r["valid"] is True) is bit and r["ineffective-count"] == (0 if bit else 1)
    if not bit:
        assert r["valid"] == "unknown"
        assert r["ineffective"][0]["explanation"].startswith(
            "failover of n1 at 1.00 s did not fail over: ")
