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
import struct
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
from tests.harness_runs import harness, run
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


BOX_PROBE = """<script>
setTimeout(function () {  // every flag and label drawn, where it is and whether it fits
  function box(el) {
    var r = el.getBoundingClientRect();
    return {kind: el.className, text: el.textContent, title: el.title || "", l: r.left,
            r: r.right, t: r.top, b: r.bottom, sw: el.scrollWidth, cw: el.clientWidth,
            bar: el.dataset.bar || ""};
  }
  var out = {dom: [], charts: [], folds: []}, cv = document.getElementById("timeline-canvas");
  document.querySelectorAll(".vmark, .flabel").forEach(function (el) {
    if (el.dataset.visible === "1" || (el.classList.contains("flabel") && !el.hidden)) {
      out.dom.push(box(el));
    }
  });
  out.markers = box(document.getElementById("markers"));
  out.canvas = box(cv);
  document.querySelectorAll("#charts canvas").forEach(function (c) {
    out.charts.push({plot: c.dataset.plot, flags: c.dataset.flags, labels: c.dataset.labels});
  });
  document.querySelectorAll(".show-all").forEach(function (b) {
    var el = b.previousElementSibling;
    var n = el.tagName === "OL" ? el.children.length : el.tBodies[0].rows.length;
    out.folds.push([b.textContent, n]);
  });
  var main = document.querySelector("main").cloneNode(true);
  main.querySelectorAll("script").forEach(function (s) { s.remove(); });
  out.text = main.textContent;
  document.body.dataset.boxes = JSON.stringify(out);
}, 300);
</script>"""


def overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return min(a["r"], b["r"]) - max(a["l"], b["l"]) > 0.5 and \
        min(a["b"], b["b"]) - max(a["t"], b["t"]) > 0.5


def drawn_boxes(page: Path, tmp_path: Path) -> dict[str, Any]:
    """The boxes of every flag and fault label of ``page`` (and the charts' own, which they
    record as they draw them), after asserting none covers another and none is cut off."""
    probe = page.parent / "probe.html"
    probe.write_text(page.read_text().replace("</body>", BOX_PROBE + "</body>"))
    dom, _ = browse(probe.as_uri(), tmp_path / "profile", *WINDOW, "--dump-dom")
    attrs = body_attrs(dom)
    assert attrs.get("data-ready") == "1" and "data-error" not in attrs, attrs
    got = json.loads(attrs["data-boxes"])
    boxes, m, cv = got["dom"], got["markers"], got["canvas"]
    for i, a in enumerate(boxes):
        assert a["r"] > a["l"] and a["b"] > a["t"], a
        assert not any(overlap(a, b) for b in boxes[i + 1:]), (a, [b for b in boxes[i + 1:]
                                                                  if overlap(a, b)])
        if a["kind"].startswith("vmark"):  # inside the flags' strip, whole
            assert m["l"] - 0.5 <= a["l"] and a["r"] <= m["r"] + 0.5 and a["b"] <= m["b"], a
        else:  # inside its fault's window, its text whole (or shortened, the whole in title)
            x0, x1 = map(float, a["bar"].split())
            assert cv["l"] + x0 - 0.5 <= a["l"] and a["r"] <= cv["l"] + x1 + 0.5, a
            assert a["sw"] <= a["cw"], a
            assert a["text"] == a["title"] or (a["text"].endswith("…") and a["title"]
                                               .startswith(a["text"][:-1])), a
    for chart in got["charts"]:  # the charts' flags and fault names, as each was drawn
        left, width = map(float, chart["plot"].split(","))
        flags = [tuple(map(float, f.split(","))) for f in chart["flags"].split("|") if f]
        for i, (x, w, _) in enumerate(flags):
            assert left <= x and x + w <= left + width + 0.5, (x, w, chart)
            assert all(x + w <= y or y + v <= x for y, v, _ in flags[i + 1:]), (x, w, flags)
        names = [f.split(",", 3) for f in chart["labels"].split("|") if f]
        for x, w, end, _ in names:
            assert float(x) + float(w) <= float(end) + 0.5, (x, w, end, chart)
    for text, n in got["folds"]:  # a folded list says how long it is
        assert text == f"show all {n:,} (6 shown)", (text, n)
    # no value is shown raw: no JSON object or list, no Python repr
    assert not re.search(r"""[{\[]\s*['"]|['"]\s*:\s*[\[{'"\d]""", got["text"]), re.search(
        r""".{80}[{\[]\s*['"].{80}""", got["text"])
    return got


@pytest.mark.servers
@pytest.mark.parametrize("nemesis", ["pause", "clock"])
def test_no_flag_or_label_covers_another_on_real_runs(nemesis: str, store: Path,
                                                      tmp_path: Path) -> None:
    """README's default run (redis-setnx under pauses) and a clock jump, as a person opens
    them: no flag or fault label covers another or is cut off, a clock fault says what it did,
    and `harness report RUN --png FILE` writes its timeline and charts, about 1200 px wide."""
    code, _, run_dir, out = run(store, "--time-limit", "10", "--nemesis", nemesis)
    verdict = json.loads((run_dir / "results.json").read_text())["valid"]
    # pause: INVALID in 20 of 20 seeds (docs/detection.md); a clock jump's overlap is a race
    # (tests/test_fault_matrix.py): there the page, not the verdict, is this test's subject
    assert code == {True: 0, False: 1}[verdict] and (nemesis != "pause" or code == 1), \
        out[-2000:]
    got = drawn_boxes(run_dir / "report.html", tmp_path)
    labels = [b for b in got["dom"] if b["kind"] == "flabel"]
    assert labels, got["dom"]
    page = (run_dir / "report.html").read_text()
    for b in labels:  # the whole label is in the fault table too
        assert f"<td>{html.escape(b['title'])}</td>" in page, b
    if nemesis == "clock":
        assert all(re.fullmatch(r"\+\d+ s wall jump · n1( \(missed .+\))?", b["title"])
                   for b in labels), labels
        # each chart names the jump as the timeline does, whole, or shortened to end before
        # the next (two jumps close together; drawn_boxes holds it inside its room)
        titles = {b["title"] for b in labels}
        names = [n.split(",", 3)[3] for c in got["charts"] for n in c["labels"].split("|") if n]
        assert names and all(n in titles or (n.endswith("…") and len(n) > 1 and any(
            t.startswith(n[:-1]) for t in titles)) for n in names), (names, titles)
    png = tmp_path / "timeline.png"
    proc = harness("report", str(run_dir), "--png", str(png), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    width, height = struct.unpack(">II", png.read_bytes()[16:24])  # IHDR
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and width == 1200, width
    assert 700 <= height <= 2000, height  # the banner, the timeline and both charts
    _, _, pixels = png_pixels(png)  # the banner in the verdict's colour: INVALID red, VALID green
    banner = (0xCF, 0x22, 0x2E) if code == 1 else (0x1A, 0x7F, 0x37)
    assert count_colour(pixels, banner, 0, 40) > 10_000, code


PANEL_PROBE = """<script>
setTimeout(function () {  // click along lane p1 until an op's details are in the panel
  var cv = document.getElementById("timeline-canvas"), r = cv.getBoundingClientRect();
  var lanes = cv.dataset.lanes.split(" "), y = r.top + +lanes[0] + 1.5 * lanes[1];
  var panel = document.getElementById("op-panel");
  for (var x = r.left + 110; x < r.right && panel.hidden; x += 3) {
    cv.dispatchEvent(new MouseEvent("click", {clientX: x, clientY: y, bubbles: true}));
  }
  document.body.dataset.panel = panel.hidden ? "" : panel.querySelector(".lines").textContent;
  var png = window.ReportPng();
  document.body.dataset.png = png.width + "x" + png.height;
}, 300);
</script>"""


def test_a_clicked_op_stays_in_a_panel_and_the_page_saves_its_timeline_as_png(
        tmp_path: Path) -> None:
    """A screenshot keeps an op's details: a click puts them in a panel on the page (not only
    a hover tooltip); "save as PNG" draws the timeline, its flags and labels and the charts
    onto one canvas, as wide as the timeline; folded lists and tables say how long they are."""
    run_dir, spec, history, results = copy_run(tmp_path, "redis-setnx-pause-seed9")
    page = write_report(RunDir(run_dir), spec, history, results)
    drawn_boxes(page, tmp_path)
    probe = run_dir / "probe.html"
    probe.write_text(page.read_text().replace("</body>", PANEL_PROBE + "</body>"))
    dom, _ = browse(probe.as_uri(), tmp_path / "profile", *WINDOW, "--dump-dom")
    attrs = body_attrs(dom)
    assert "data-error" not in attrs, attrs
    assert re.match(r"p1 · (acquire|release|write|read) · (ok|fail|info)", attrs["data-panel"])
    assert "history index" in attrs["data-panel"]
    width, height = map(int, attrs["data-png"].split("x"))  # at the page's device pixel ratio
    assert 1300 <= width <= 1400 and 900 <= height <= 1600, (width, height)
