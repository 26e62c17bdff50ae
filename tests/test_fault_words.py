"""Each nemesis words its own faults (``describe``), and the report asks it by the fault's
name: the sentences are the ones the report always had, and a fault whose nemesis is not
installed here (a history from elsewhere) gets the generic words, never a crash."""

from __future__ import annotations

from typing import Any

import pytest

from harness.core.fault_run import FaultRun
from harness.presentation.report.narrative import describe
from nemesis.clock import GO_STALL


def run(f: str, targets: list[str], role: str | None = None, stop: float | None = 5.5,
        detail: dict[str, Any] | None = None) -> FaultRun:
    return FaultRun(f, 0, role, tuple(targets), 1.25, stop, detail)


@pytest.mark.parametrize(("fault", "words"), [
    (run("clock", ["n1", "n2"], detail={"pattern": "jump", "offset": 60.0}),
     "a +60 s clock jump on n1,n2 at 1.2 s for 4.2 s"),
    (run("clock", ["n1"], detail={"pattern": "jump"}), "a clock jump on n1 at 1.2 s for 4.2 s"),
    (run("clock-back", ["n1", "n2"], detail={"pattern": "back", "offset": -60.0}),
     "a -60 s clock jump on n1,n2 at 1.2 s for 4.2 s"),
    (run("clock", ["n3"], detail={"pattern": "rate", "rate": 2.5}),
     "a clock rate x2.5 on n3 at 1.2 s for 4.2 s"),
    (run("clock", ["n3"], detail={"pattern": "rate"}), "a clock rate on n3 at 1.2 s for 4.2 s"),
    (run("clock-strobe", ["n1"], detail={"offset": 60.0, "period": 0.2}),
     "a clock strobe (+60 s every 0.2 s) on n1 at 1.2 s for 4.2 s"),
    (run("clock-strobe", ["n1"], stop=None), "a clock strobe (offset) on n1 at 1.2 s"),
    (run("clock", ["n1"], detail={"pattern": "strobe", "period": 0.5}),
     "a clock strobe (offset every 0.5 s) on n1 at 1.2 s for 4.2 s"),
    (run("pause", ["c0"], role="holder"),
     "a pause (SIGSTOP) of c0 (the holder) at 1.2 s for 4.2 s"),
    (run("pause-node", ["n2"]), "a pause (SIGSTOP) of n2 at 1.2 s for 4.2 s"),
    (run("pause-leader", ["n1"], role="leader"), "a pause (SIGSTOP) of n1 at 1.2 s for 4.2 s"),
    (run("kill", ["n2"]), "a kill (SIGKILL) of n2 at 1.2 s, restarted after 4.2 s"),
    (run("kill", ["n2"], stop=None), "a kill (SIGKILL) of n2 at 1.2 s"),
    (run("kill-majority", ["n1", "n2"]),
     "a kill (SIGKILL) of n1,n2 at 1.2 s, restarted after 4.2 s"),
    (run("kill-majority-delayed", ["n1", "n3"]),
     "a kill (SIGKILL) of n1,n3 at 1.2 s, restarted after 4.2 s"),
    (run("crash-client", ["c2"], role="waiter"), "a crash of c2 (the waiter) at 1.2 s for 4.2 s"),
    (run("partition", ["c1"], role="holder"),
     "a partition cutting c1 (the holder) off from the DB nodes at 1.2 s for 4.2 s"),
    (run("partition", [], role="holder"),
     "a partition cutting nothing (the holder) off from the DB nodes at 1.2 s for 4.2 s"),
    (run("partition-minority", ["n3"]), "a partition cutting n3 off at 1.2 s for 4.2 s"),
    (run("partition-leader", ["n1"]), "a partition cutting n1 off at 1.2 s for 4.2 s"),
    (run("partition-halves", ["n1|n2", "n3|n4|n5"]),
     "a partition (n1,n2 | n3,n4,n5) at 1.2 s for 4.2 s"),
    (run("partition-one", ["n1", "n2|n3"]), "a partition (n1 | n2,n3) at 1.2 s for 4.2 s"),
    (run("partition-ring", []), "a partition (?) at 1.2 s for 4.2 s"),
    (run("partition-bridge", ["n1|n2|n3"], stop=None), "a partition (n1,n2,n3) at 1.2 s"),
    (run("partition-oneway", ["c0"], role="holder"), "a partition (c0) at 1.2 s for 4.2 s"),
    (run("delay", ["c0"], role="holder"), "delay on c0 (the holder) at 1.2 s for 4.2 s"),
    (run("loss", ["n1", "n2"]), "loss on n1,n2 at 1.2 s for 4.2 s"),
    (run("stall-grant", ["c1"]), "stall-grant on c1 at 1.2 s for 4.2 s"),
    (run("failover", ["n1"]), "failover on n1 at 1.2 s for 4.2 s"),
    (run("lag-replication", ["n2"]), "lag-replication on n2 at 1.2 s for 4.2 s"),
])
def test_a_built_in_fault_in_its_nemesis_s_words(fault: FaultRun, words: str) -> None:
    assert describe(fault) == words


@pytest.mark.parametrize(("clock", "mechanism", "said"), [
    ("monotonic", "vdso", True), ("both", "vdso", True), ("wall", "vdso", False),
    ("monotonic", None, False),  # ZooKeeper's: libfaketime, not a Go runtime's vDSO
])
def test_a_go_servers_monotonic_clock_move_says_why_it_is_never_set_back(
        clock: str, mechanism: str | None, said: bool) -> None:
    """etcd (a Go server, its vDSO patched): setting its monotonic clock back stalls its
    scheduler for as long as the move, which is why the fault keeps that clock moved."""
    detail = {"pattern": "jump", "offset": 60.0, "clock": clock, "mechanism": mechanism}
    words = describe(run("clock", ["n1"], detail=detail))
    base = "a +60 s clock jump on n1 at 1.2 s for 4.2 s"
    assert words == (base + GO_STALL if said else base)
    rate = describe(run("clock", ["n1"], detail={**detail, "pattern": "rate", "rate": 2.0}))
    assert rate.endswith(GO_STALL) is said


def test_the_partition_family_under_a_shape_option_words_it_as_that_shape() -> None:
    """``--nemesis partition --nemesis-opt partition-shape=halves`` records the shape with
    the cuts (its f stays ``partition``)."""
    fault = run("partition", ["n1|n2", "n3"], detail={"shape": "halves", "cut": []})
    assert describe(fault) == "a partition (n1,n2 | n3) at 1.2 s for 4.2 s"


@pytest.mark.parametrize("f", ["someone-elses", "clock-from-elsewhere", "partition-x", "pkg:X",
                               "nemesis.process_faults:PauseHolder"])
def test_a_fault_whose_nemesis_is_not_here_gets_the_generic_words(f: str) -> None:
    """Only a registered name is looked up: a history's ``module:Class`` is never imported."""
    assert describe(run(f, ["x"])) == f"{f} on x at 1.2 s for 4.2 s"


def test_a_fault_s_bars_on_the_timeline_take_its_nemesis_s_colour() -> None:
    """The family's colour for every member (an alias too); grey (None) for a nemesis with
    none or one not installed here."""
    from harness.presentation.report.model import fault_windows

    faults = ["clock", "partition-halves", "pause-leader", "kill-majority-delayed", "delay",
              "someone-elses"]
    history = [{"index": i, "process": "nemesis", "type": kind, "f": f, "value": value,
                "time": 1000 * i, "targets": ["n1"]}
               for i, (f, kind, value) in enumerate(
                   (f, kind, value) for f in faults for kind, value in
                   (("invoke", "start"), ("info", "start"), ("info", "stop")))]
    windows = fault_windows(history, 10**6)
    assert [(w["f"], w["colour"]) for w in windows] == [
        ("clock", "#8250df"), ("partition-halves", "#0969da"), ("pause-leader", "#9a6700"),
        ("kill-majority-delayed", "#a40e26"), ("delay", None), ("someone-elses", None)]


def test_a_fault_s_parameters_are_those_its_pattern_uses_as_its_nemesis_declares() -> None:
    """The fault table shows what a window used: a clock jump not the clock-rate and
    clock-period its options default to, a strobe its period, a rate its rate (the options
    declare their patterns); a nemesis with no patterns, or not installed here, all of them."""
    from harness.presentation.report.model import fault_windows

    every = {"clock-nodes": "majority", "clock-id": "wall", "clock-rate": 2.0,
             "clock-period": 0.2, "clock-offset": 60.0}
    client = {"client-clock-pattern": "jump", "client-clock-rate": 5.0,
              "client-clock-offset": 4.0}
    faults = [("clock", every), ("clock", {**every, "clock-pattern": "rate"}),
              ("clock-strobe", every), ("clock-back", every), ("clock-client", client),
              ("clock-client", {**client, "client-clock-pattern": "rate"}),
              ("pause", {"signal": "STOP"}), ("someone-elses", {"clock-rate": 2.0})]
    history = [{"index": 2 * i + k, "process": "nemesis", "type": "info", "f": f,
                "value": value, "time": 1000 * (2 * i + k), "targets": ["n1"], "params": params}
               for i, (f, params) in enumerate(faults)
               for k, value in enumerate(("start", "stop"))]
    shown = [sorted(w["params"]) for w in fault_windows(history, 10**6)]
    assert shown == [["clock-id", "clock-nodes", "clock-offset"],
                     ["clock-id", "clock-nodes", "clock-pattern", "clock-rate"],
                     ["clock-id", "clock-nodes", "clock-offset", "clock-period"],
                     ["clock-id", "clock-nodes", "clock-offset"],
                     ["client-clock-offset", "client-clock-pattern"],
                     ["client-clock-pattern", "client-clock-rate"],
                     ["signal"], ["clock-rate"]]


def test_what_a_kill_repaired_at_its_restart_joins_its_words_and_nothing_else_of_the_stop() -> None:
    from harness.presentation.report.narrative import fault_runs

    def op(t: float, type_: str, f: str, value: str, **kw: Any) -> dict[str, Any]:
        return {"time": int(t * 1e9), "process": "nemesis", "type": type_, "f": f,
                "value": value, "step": 0, "targets": ["n1"], **kw}

    repaired = {"repaired": {"n1": ["ZOOKEEPER-2332: empty tail log version-2/log.2 moved "
                                    "aside (log.2 in repaired-aside/n1)"]}}
    kill = fault_runs([op(1, "invoke", "kill", "start"), op(1.1, "info", "kill", "start"),
                       op(3, "invoke", "kill", "stop"),
                       op(3.5, "info", "kill", "stop", detail=repaired)])
    assert [r.detail for r in kill] == [repaired]
    assert describe(kill[0]).endswith(", repaired before the restart: n1 ZOOKEEPER-2332: empty "
                                      "tail log version-2/log.2 moved aside (log.2 in "
                                      "repaired-aside/n1)")
    clock = fault_runs([op(1, "info", "clock", "start", detail={"offset": 60.0}),
                        op(3, "info", "clock", "stop", detail={"offset": 0})])
    assert [r.detail for r in clock] == [{"offset": 60.0}]  # the stop's offset is no fault's
    plain = fault_runs([op(1, "info", "kill", "start"), op(3, "info", "kill", "stop")])
    assert [r.detail for r in plain] == [None]


def test_a_partition_s_lane_names_its_sides_by_what_each_holds() -> None:
    """A partition among the nodes records its components as its targets: its lane on the
    timeline names each side and whether it holds a quorum of the DB nodes (two halves of
    two nodes: neither does); one component (a ring) has no side cut off; a partition of
    clients or of picked nodes (minority, leader: no components) names its targets as before."""
    from harness.presentation.report.model import fault_windows

    faults = [("partition-halves", ["n1|n2", "n3|n4|n5"], None),
              ("partition-one", ["n4", "n1|n2|n3|n5"], {"cut": [["n1", "n4"]]}),
              ("partition", ["n1", "n2"], {"shape": "halves", "cut": [["n1", "n2"]]}),
              ("partition-ring", ["n1|n2|n3|n4|n5"], None),
              ("partition-minority", ["n1", "n3"], {"cut-off": ["n1", "n3"]}),
              ("partition", ["c2"], None)]
    history = [{"index": 2 * i + k, "process": "nemesis", "type": "info", "f": f,
                "value": value, "time": 1000 * (2 * i + k), "targets": targets,
                "detail": detail}
               for i, (f, targets, detail) in enumerate(faults)
               for k, value in enumerate(("start", "stop"))]
    assert [w["label"] for w in fault_windows(history, 10**6)] == [
        "partition-halves n1,n2 | n3,n4,n5 (minority | majority)",
        "partition-one n4 | n1,n2,n3,n5 (minority | majority)",
        "partition n1 | n2 (minority | minority)",
        "partition-ring n1,n2,n3,n4,n5",
        "partition-minority n1,n3",
        "partition c2"]
