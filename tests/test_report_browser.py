"""report.html and ``harness serve`` as a person sees them, in headless Chromium (driven with
--dump-dom and --screenshot; no browser download, no driver library): the linearizability
witness flagged at the overlap it explains, the linearization view's rows, the writes a fenced
resource rejected drawn on their lanes, serve's sort by duration and its compare view.

Screenshots are kept in $TMPDIR/lock-harness-artifacts (not in the tree).

The runs are real ``harness run``s kept in tests/data/runs: redis-setnx-pause (seed
492975486) and redis-setnx-pause-seed9 (the same test, seed 9), both INVALID; redis-fenced-pause
(redis-fenced, fenced workload, pause, seed 7: the resource rejected two stale writes).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from checker.linearizable import LinearizableChecker
from harness.controller.store import RunDir
from harness.core.history_file import read_history
from harness.core.schedule import from_dict
from harness.presentation.report import model as report_model
from harness.presentation.report import write_report
from harness.presentation.report.incidents import incidents
from harness.presentation.serve import make_server
from tests.test_report import body_attrs, browse, count_colour, png_pixels

RUNS = Path(__file__).parent / "data" / "runs"
ARTIFACTS = Path(tempfile.gettempdir()) / "lock-harness-artifacts"
WINDOW = ("--window-size=1400,1000", "--virtual-time-budget=3000")


def copy_run(tmp_path: Path, name: str) -> tuple[Path, dict[str, Any], list[dict[str, Any]],
                                                  dict[str, Any]]:
    test = json.loads((RUNS / name / "test.json").read_text())
    run_dir = tmp_path / "store" / str(test["run_id"])
    shutil.copytree(RUNS / name, run_dir)
    return (run_dir, test["spec"], read_history(run_dir / "history.jsonl"),
            json.loads((run_dir / "results.json").read_text()))


def shot(url: str, tmp_path: Path, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    path.unlink(missing_ok=True)
    browse(url, tmp_path / "profile", *WINDOW, f"--screenshot={path}")
    assert path.stat().st_size > 10_000
    return path


FLAG_PROBE = """<script>
(function () {  // where the selected flag points, in seconds, from its place on the page
  var sel = document.querySelector(".vmark.sel"), cv = document.getElementById("timeline-canvas");
  var win = /([\\d.]+) – ([\\d.]+) s/.exec(document.getElementById("window").textContent);
  var plot = cv.dataset.plot.split(" "), x0 = +plot[0], pw = +plot[1], a = +win[1], b = +win[2];
  document.body.dataset.flagT = String(a + (parseFloat(sel.style.left) + 1 - x0) / pw * (b - a));
  document.body.dataset.flagPx = String((b - a) / pw);
  document.body.dataset.flagVisible = sel.dataset.visible;
})();
</script>"""


def test_witness_flag_at_the_overlap_and_the_linearization_view(tmp_path: Path) -> None:
    run_dir, spec, history, results = copy_run(tmp_path, "redis-setnx-pause-seed9")
    results["checks"]["linearizable"] = LinearizableChecker.check(history)  # today's checker
    w = results["checks"]["linearizable"]["witness"]
    n = next(v["n"] for v in report_model.build(spec, history, results)["violations"]
             if v["kind"] == "witness")
    page = write_report(RunDir(run_dir), spec, history, results)
    probe = run_dir / "probe.html"
    probe.write_text(page.read_text().replace("</body>", FLAG_PROBE + "</body>"))
    dom, _ = browse(probe.as_uri() + f"#v-{n}", tmp_path / "profile", *WINDOW, "--dump-dom")
    attrs = body_attrs(dom)
    assert attrs.get("data-ready") == "1" and "data-error" not in attrs, attrs
    assert attrs["data-flag-visible"] == "1"
    t, px = float(attrs["data-flag-t"]), float(attrs["data-flag-px"])
    # the flag is where the two grants overlapped, inside an overlap the mutex checker found
    # between the same two processes (not at the acquire where the search got stuck)
    assert w["from"] - 2 * px <= t <= w["until"] + 2 * px, (t, w["from"], w["until"])
    overlaps = [o for o in results["checks"]["mutex"]["lock-overlaps"]
                if sorted(o["processes"]) == sorted(w["processes"])]
    assert any(o["from"] - 0.01 <= t <= o["until"] + 0.01 for o in overlaps), (t, overlaps)
    assert t > w["blocked_op"]["completed_s"] + 1.0, (t, w["blocked_op"])

    # the linearization view: the prefix in the search's order with the state after each op,
    # then the op that cannot be placed, then the ops concurrent with it
    rows = re.findall(r'<tr class="(lin-[a-z]+)" data-index="(\d+)">(.*?)</tr>', dom, re.S)
    prefix = [(int(i), body) for cls, i, body in rows if cls == "lin-prefix"]
    assert [i for i, _ in prefix] == w["prefix"][-40:]
    assert html.unescape(prefix[-1][1]).endswith(f"<td>{w['prefix_state']}</td>")
    assert [int(i) for cls, i, _ in rows if cls == "lin-blocked"] == w["blocked"]
    assert [int(i) for cls, i, _ in rows if cls == "lin-concurrent"] == w["concurrent"][:20]
    assert [cls for cls, _, _ in rows] == sorted((cls for cls, _, _ in rows), key=[
        "lin-prefix", "lin-blocked", "lin-concurrent"].index)
    # the resource's order beside the clients': every write of an interleaving is a row
    named = {int(x) for x in re.findall(r'<tr class="named" data-seq="(\d+)">', dom)}
    interleaved = {s for i in results["checks"]["mutex"]["resource-interleavings"]
                   for s in i["seqs"]}
    assert interleaved and interleaved <= named
    shot(page.as_uri() + f"#v-{n}", tmp_path, "report-witness.png")


PIXEL_PROBE = """<script>
(function () {  // the colour drawn in the middle of an op bar (lane k, from t0 to t1 in us)
  var cv = document.getElementById("timeline-canvas"), g = cv.getContext("2d");
  var win = /([\\d.]+) – ([\\d.]+) s/.exec(document.getElementById("window").textContent);
  var plot = cv.dataset.plot.split(" "), lanes = cv.dataset.lanes.split(" ");
  var a = win[1] * 1e6, b = win[2] * 1e6, X = function (t) {
    return +plot[0] + (t - a) / (b - a) * plot[1];
  };
  var x = Math.round(X((OP_T0 + OP_T1) / 2));
  var y = Math.round(+lanes[0] + (OP_LANE + 0.525) * lanes[1]);
  var d = g.getImageData(x * devicePixelRatio, y * devicePixelRatio, 1, 1).data;
  document.body.dataset.pixel = d[0] + "," + d[1] + "," + d[2];
})();
</script>"""


def test_a_fenced_run_draws_the_writes_the_resource_rejected(tmp_path: Path) -> None:
    run_dir, spec, history, results = copy_run(tmp_path, "redis-fenced-pause")
    # from the history alone: the writes whose completion says the resource refused them
    refused = sorted(op["value"]["seq"] for op in history if op["f"] == "write"
                     and op["type"] == "fail" and str(op.get("error", "")).startswith("rejected"))
    assert len(refused) == results["checks"]["fencing"]["stale-rejected"] == 2
    model = report_model.build(spec, history, results)
    assert model["rejected"]["seq"] == refused
    page = write_report(RunDir(run_dir), spec, history, results)
    # the longest wait for the lock, drawn hollow (white inside), not solid like a held lock
    invoked: dict[int, int] = {}
    waits = []
    for op in history:
        if op["f"] == "acquire" and isinstance(op["process"], int):
            if op["type"] == "invoke":
                invoked[op["process"]] = op["time"]
            elif op["type"] == "ok":
                waits.append((op["time"] - invoked[op["process"]], op["process"],
                              invoked[op["process"]], op["time"]))
    _, proc, t0, t1 = max(waits)
    lane = sorted({op["process"] for op in history if isinstance(op["process"], int)}).index(proc)
    probe = run_dir / "probe.html"
    probe.write_text(page.read_text().replace("</body>", PIXEL_PROBE.replace(
        "OP_T0", str(t0 // 1000)).replace("OP_T1", str(t1 // 1000)).replace(
        "OP_LANE", str(lane)) + "</body>"))
    dom, _ = browse(probe.as_uri(), tmp_path / "profile", *WINDOW, "--dump-dom")
    attrs = body_attrs(dom)
    assert attrs.get("data-ready") == "1" and "data-error" not in attrs, attrs
    assert (t1 - t0) / 1e9 > 1.0 and min(map(int, attrs["data-pixel"].split(","))) > 225, (
        attrs["data-pixel"], t0, t1, proc)
    assert attrs["data-rejected-drawn"] == "2"
    rows = re.findall(r'<tr class="rejected" data-seq="(\d+)">(.*?)</tr>', dom, re.S)
    assert [int(seq) for seq, _ in rows] == refused
    assert all("rejected: stale token" in row for _, row in rows)
    chip = re.search(r'<a class="chip v-true" href="#check-fencing">(.*?)</a>', dom, re.S)
    assert chip and "2 rejected (stale), 108 accepted" in chip[1], chip
    _, _, pixels = png_pixels(shot(page.as_uri(), tmp_path, "report-fenced.png"))
    assert count_colour(pixels, (0x82, 0x07, 0x1E), 250, 600) > 30  # the two crosses


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    for name in ("redis-setnx-none", "redis-setnx-pause", "redis-setnx-pause-seed9",
                 "redis-fenced-pause"):
        copy_run(tmp_path, name)
    store = tmp_path / "store"
    srv = make_server(store, "127.0.0.1", 0, quiet=True)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    host, port = srv.server_address[:2]
    yield f"http://{host}:{port}", store
    srv.shutdown()
    srv.server_close()
    thread.join(10)


def listed(dom: str) -> list[tuple[str, str]]:
    """(run, duration) of each row of serve's list, top to bottom."""
    return re.findall(r'<tr data-run="([^"]+)">.*?<td class="duration">([^<]*)</td>', dom, re.S)


def test_serve_sorts_by_duration_and_compares_two_runs(served: tuple[str, Path],
                                                       tmp_path: Path) -> None:
    url, store = served
    spans = {}
    for h in store.glob("*/*/history.jsonl"):
        spans[h.parent.relative_to(store).as_posix()] = read_history(h)[-1]["time"] / 1e9
    dom, _ = browse(url + "/", tmp_path / "profile", *WINDOW, "--dump-dom")
    assert len(listed(dom)) == 4
    link = re.search(r'<a class="sort" data-sort="duration" href="([^"]+)">', dom)
    assert link, dom[:2000]
    dom, _ = browse(url + html.unescape(link[1]), tmp_path / "profile", *WINDOW, "--dump-dom")
    rows = listed(dom)
    assert [r for r, _ in rows] == sorted(spans, key=spans.__getitem__), rows
    assert [d for _, d in rows] == [f"{spans[r]:.1f} s" for r, _ in rows]
    again = re.search(r'<a class="sort" data-sort="duration" href="([^"]+)">duration ▲', dom)
    assert again, "the sorted column is marked and sorts the other way when clicked again"
    dom, _ = browse(url + html.unescape(again[1]), tmp_path / "profile", *WINDOW, "--dump-dom")
    assert [r for r, _ in listed(dom)] == sorted(spans, key=spans.__getitem__, reverse=True)
    shot(url + html.unescape(again[1]), tmp_path, "serve-by-duration.png")

    # the same test under two seeds, side by side
    a, b = sorted(r for r in spans if r.startswith("redis_redis-setnx_mutex_pause/"))
    compare = f"{url}/compare?run={a}&run={b}"
    dom, _ = browse(compare, tmp_path / "profile", *WINDOW, "--dump-dom")
    fields = {f: (cls, cells) for cls, f, cells in re.findall(
        r'<tr class="(\w+)" data-field="([^"]+)"><th>[^<]*</th>(.*?)</tr>', dom, re.S)}
    assert fields["verdict"][0] == "same" and fields["verdict"][1].count("INVALID") == 2
    assert fields["exit"] == ("same", "<td>1</td><td>1</td>")
    assert fields["seed"][0] == "differs" and "<td>9</td>" in fields["seed"][1]
    assert fields["lock"] == ("same", "<td>redis-setnx</td><td>redis-setnx</td>")
    counts = []
    for rel in (a, b):
        test = json.loads((store / rel / "test.json").read_text())
        found = incidents(read_history(store / rel / "history.jsonl"),
                          json.loads((store / rel / "results.json").read_text()),
                          from_dict(test["schedule"]) if test.get("schedule") else None)
        counts.append(len(found))
    assert min(counts) >= 1
    assert fields["incidents"][1] == f"<td>{counts[0]}</td><td>{counts[1]}</td>"
    shot(compare, tmp_path, "serve-compare.png")


def test_every_violation_of_a_crowded_timeline_is_flagged_or_counted_and_reachable(
        tmp_path: Path) -> None:
    """Three pauses, 119 lock overlaps and their interleavings: at the fitted view most flags
    have no room; each violation in view is flagged or counted under the timeline, and the
    last one is one #v-N away (the callout's next › walks the same numbers)."""
    from harness.presentation.report.html import render
    from tests.test_incidents import judged, three_pauses

    history, results = judged(three_pauses())
    page = tmp_path / "report.html"
    page.write_text(render({"clients": 5}, history, results, []))
    shown = [v for v in report_model.build({"clients": 5}, history, results)["violations"]
             if v["t0"] is not None and not v["info"]]
    dom, _ = browse(page.as_uri(), tmp_path / "profile", *WINDOW, "--dump-dom")
    attrs = body_attrs(dom)
    assert attrs.get("data-ready") == "1" and "data-error" not in attrs, attrs
    flagged = len(re.findall(r'class="vmark[^"]*"[^>]*data-visible="1"', dom))
    unflagged = int(attrs["data-unflagged"])
    assert unflagged > 0 and flagged + unflagged == len(shown)
    assert f"{unflagged} of the violations in view are outlined without a flag" in dom
    last = shown[-1]["n"]
    dom, _ = browse(page.as_uri() + f"#v-{last}", tmp_path / "profile", *WINDOW, "--dump-dom")
    assert f"Violation {last} of {last} " in dom
    assert re.search(rf'class="vmark sel" id="vm-{last}"[^>]*data-visible="1"', dom)
