"""The report's charts and what keeps a long run's report small: the figures (pure, exact from
every op), which ops the page embeds and the density it draws for the rest, the charts drawn in
headless Chromium on the timeline's time axis (screenshots in tests/artifacts/, not committed),
and a real busy run's report under 2 MB that opens in under a second (slow)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from harness.controller.checking import check_history
from harness.controller.store import RunDir
from harness.presentation.report import charts, pair_arrays, sampling, write_report
from harness.presentation.report import model as report_model
from tests import synth_history
from tests.harness_runs import run
from tests.test_report import ARTIFACTS, body_attrs, browse, png_pixels, stored_run
from tests.test_run_history import pairs

S = 1_000_000_000  # ns


def op(t: float, p: int, type_: str, f: str) -> dict[str, Any]:
    return {"time": round(t * S), "process": p, "type": type_, "f": f}


# the figures --------------------------------------------------------------------------------
def test_series_counts_every_outcome_and_quantiles_of_ok_ops() -> None:
    history = []
    for k in range(100):  # p0: 100 ok acquires in the first second, latency k+1 ms
        history += [op(k * 0.009, 0, "invoke", "acquire"),
                    op(k * 0.009 + (k + 1) / 1000, 0, "ok", "acquire")]
    history += [op(1.2, 1, "invoke", "acquire"), op(1.25, 1, "fail", "acquire"),
                op(1.3, 1, "invoke", "release"), op(1.9, 1, "info", "release"),
                op(1.95, 2, "invoke", "read"), op(1.96, 2, "ok", "read")]
    history.append(op(2.0, 3, "invoke", "acquire"))  # never completed: not counted
    s = charts.series(charts.workload_rows(pair_arrays.of(history)), round(2.0 * S))
    assert (s["n"], s["width"]) == (10, 200_000)  # 0.2 s buckets
    acq, rel = s["fs"]["acquire"], s["fs"]["release"]
    assert "read" not in s["fs"]  # the final read-back is the harness, not the workload
    assert sum(acq["ok"]) * 0.2 == pytest.approx(100) and acq["fail"][6] == 5.0  # 1 op / 0.2 s
    assert rel["info"][9] == 5.0 and sum(rel["ok"]) == 0 and rel["p50"] == [None] * 10
    # ok latencies invoked in the first bucket (0-0.2 s): k = 0..22, 1..23 ms
    assert (acq["p50"][0], acq["p95"][0], acq["p99"][0]) == (12.0, 22.0, 23.0)
    assert acq["p50"][6] is None  # the failed acquire has no ok latency


def test_latency_grid_counts_each_op_once_in_its_cell() -> None:
    history = [op(0.0, 0, "invoke", "acquire"), op(0.001, 0, "ok", "acquire"),
               op(0.0, 1, "invoke", "acquire"), op(0.001, 1, "fail", "acquire"),
               op(5.0, 0, "invoke", "write"), op(7.0, 0, "info", "write")]
    g = charts.latency_grid(charts.workload_rows(pair_arrays.of(history)), 10 * S)
    cells = [tuple(g["cells"][k:k + 5]) for k in range(0, len(g["cells"]), 5)]
    assert cells == [(0, charts.latency_row(0.001), 1, 1, 0),
                     (int(5.0 / 10 * g["cols"]), charts.latency_row(2.0), 0, 0, 1)]
    assert charts.latency_row(0.001) == 20 and charts.latency_row(1e-9) == 0  # 1 ms: 2 decades


# what the page embeds -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def big() -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    history = synth_history.generate(12_000, fault_every=25.0)
    spec = synth_history.spec_for(history)
    return history, spec, check_history(history, spec)


def test_a_long_history_embeds_what_is_near_violations_and_draws_the_rest(
        big: tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    history, spec, results = big
    monkeypatch.setattr(sampling, "MAX_PAIRS", 2000)
    m = report_model.build(spec, history, results)
    s, d = m["sampling"], m["density"]
    assert s["decimated"] and s["embedded"] <= 2000 < s["pairs"]
    radius = float(re.search(r"within ([\d.e-]+) s", s["rule"])[1]) * 1e6  # type: ignore[index]
    starts, acc = set(), 0
    for dt in m["ops"]["t"]:
        acc += dt
        starts.add(acc)
    client = list(pairs(history, clients=True))
    lanes = {p: k for k, p in enumerate(m["laneProcs"])}
    width = m["end"] / d["cols"]
    for v in (v for v in m["violations"] if v["t0"] is not None):
        for inv, done in client:  # every op overlapping a violation's story is embedded
            a, b = inv["time"] // 1000, (done or inv)["time"] // 1000
            if a <= v["c1"] + radius / 2 and b >= v["c0"] - radius / 2:
                assert a in starts, (v["n"], inv)
    for inv, done in client:  # every op not embedded is in its lane's density
        a = inv["time"] // 1000
        if a in starts:
            continue
        bit = 1 if done["type"] == "ok" else 2 if done["type"] == "fail" else 4  # type: ignore
        col = min(d["cols"] - 1, int(a / width))
        assert int(d["lanes"][lanes[inv["process"]]][col]) & bit, inv
    assert m["latencyGrid"]["cells"]  # the charts are computed from every op
    total = sum(sum(cs) for f in m["series"]["fs"].values() for o, cs in f.items()
                if o in ("ok", "fail", "info")) * m["series"]["width"] / 1e6
    assert total == pytest.approx(sum(1 for inv, done in client if done is not None
                                      and inv["f"] != "read"), rel=1e-3)


def test_short_lock_spans_far_from_violations_become_held_density() -> None:
    end = 24_000_000  # us: 2400 columns of 10 ms
    spans = {"lane": [0, 0, 1, 1], "s": [1_000_000, 10_000_000, 2_000_000, 20_000_000],
             "e": [1_005_000, 10_005_000, 2_500_000, -1], "tok": [1, 2, 3, 4]}
    kept, held = sampling.thin_spans(spans, [(10_010_000, 10_020_000)], 50_000, end, 2)
    # near the violation, long enough to see, held to the end: embedded; the other is density
    assert kept == {"lane": [0, 1, 1], "s": [10_000_000, 2_000_000, 20_000_000],
                    "e": [10_005_000, 2_500_000, -1], "tok": [2, 3, 4]}
    assert [c for c, x in enumerate(held[0]) if x == "1"] == [100] and "1" not in held[1]


def test_a_long_history_with_nothing_to_zoom_in_on_is_all_density(
        monkeypatch: pytest.MonkeyPatch) -> None:
    history = [o for o in synth_history.generate(3000, fault_every=1e9)
               if o["process"] != "nemesis"]
    client = pair_arrays.of(history)
    assert sampling.sample(pair_arrays.of(history[:400]), [], [], 10**9) == (
        None, "", float("inf"))
    monkeypatch.setattr(sampling, "MAX_PAIRS", 100)
    keep, rule, _ = sampling.sample(client, [], [], 10**9)
    assert len(keep) == len(client) > 100 and not keep.any() and rule.startswith("none")


# in a browser -------------------------------------------------------------------------------
PROBE = """<script>
(function () {  // the timeline's and each chart's geometry, once the page is drawn
  var tl = document.getElementById("timeline-canvas").getBoundingClientRect(), out = [];
  ["throughput-canvas", "latency-canvas"].forEach(function (id) {
    var c = document.getElementById(id), r = c.getBoundingClientRect();
    out.push({id: id, width: r.width, axis: c.dataset.axis || "", plot: c.dataset.plot,
              left: r.left});
  });
  var c = document.getElementById("throughput-canvas"), r = c.getBoundingClientRect();
  var mark = document.getElementById("vm-1");  // hover the chart where violation 1 is
  if (mark) {
    c.dispatchEvent(new MouseEvent("mousemove", {bubbles: true, clientY: r.top + 60,
      clientX: r.left + parseFloat(mark.style.left) + 2}));
  }
  document.body.dataset.charts = JSON.stringify({timeline: tl.width, tlLeft: tl.left,
    charts: out, tip: document.getElementById("tip").textContent});
})();
</script>"""


def charts_in_chromium(page: Path, tmp_path: Path, name: str) -> dict[str, Any]:
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    dom, _ = browse(probe.as_uri(), tmp_path / "profile", "--window-size=1400,1400",
                    "--virtual-time-budget=3000", "--dump-dom")
    attrs = body_attrs(dom)
    assert attrs.get("data-ready") == "1" and "data-error" not in attrs, attrs
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / f"report-charts-{name}.png"
    shot.unlink(missing_ok=True)
    browse(page.as_uri(), tmp_path / "profile", "--window-size=1400,1400",
           "--virtual-time-budget=3000", f"--screenshot={shot}")
    assert png_pixels(shot)[:2] == (1400, 1400)
    return {**json.loads(attrs["data-charts"]), "render-ms": int(attrs["data-render-ms"])}


def assert_on_the_timeline_axis(found: dict[str, Any], end_s: float) -> None:
    tl_plot = None
    for c in found["charts"]:
        labels = c["axis"].split(" | ")
        assert labels[0] == "0 s" and len(labels) >= 5, c  # time-axis labels under the chart
        assert all(re.fullmatch(r"[\d.]+ s", x) for x in labels)
        assert float(labels[-1][:-2]) <= end_s + 0.001
        assert c["width"] >= 0.8 * found["timeline"], (c, found["timeline"])
        assert tl_plot in (None, c["plot"])  # the same plot area in every chart
        tl_plot = c["plot"]
    left, width = map(float, tl_plot.split(","))  # type: ignore[union-attr]
    assert left == 104 and width >= 0.8 * found["timeline"] - 104


def test_charts_share_the_timeline_axis_in_chromium(tmp_path: Path) -> None:
    run_dir, spec, history, results = stored_run(tmp_path)
    page = write_report(RunDir(run_dir), spec, history, results)
    found = charts_in_chromium(page, tmp_path, "stored-run")
    assert_on_the_timeline_axis(found, history[-1]["time"] / 1e9)
    assert abs(found["charts"][0]["left"] - found["tlLeft"]) <= 2  # aligned under it
    # hovering the chart at violation 1 gives its bucket's figures and names the violation
    tip = found["tip"].split("\n")
    assert re.fullmatch(r"[\d.]+ – [\d.]+ s", tip[0]), tip
    assert any(re.match(r"acquire: [\d.]+/s ok, [\d.]+/s fail, [\d.]+/s info", x) for x in tip)
    explanation = results["checks"]["mutex"]["lock-overlaps"][0]["explanation"]
    assert f"violation 1: {explanation}" in tip and "during pause c2" in tip


@pytest.mark.servers
@pytest.mark.slow
def test_a_busy_10s_run_report_is_small_and_draws_on_the_timeline_axis(tmp_path: Path) -> None:
    """Its size and what it draws; how soon it draws is bench/bench_report_open.py's figure (a
    timed test would judge the machine, not the report)."""
    code, results, run_dir, out = run(tmp_path / "store", "--workload", "lock", "--hold", "0",
                                      "--think", "0", "--time-limit", "10", "--seed", "7",
                                      "--nemesis", "pause-node")  # a fault that always runs
    assert results["checks"]["faults"]["fault-count"] >= 1, out  # (pause finds no holder)
    assert code == {True: 0, False: 1}.get(results["valid"], 2), out
    size = (run_dir / "report.html").stat().st_size
    ops = sum(1 for _ in (run_dir / "history.jsonl").open())
    assert size <= 2_000_000, f"{size / 1e6:.2f} MB for {ops} ops"
    found = charts_in_chromium(run_dir / "report.html", tmp_path, "busy-run")
    last = json.loads((run_dir / "history.jsonl").read_text().rsplit("\n", 2)[-2])
    assert_on_the_timeline_axis(found, last["time"] / 1e9)
