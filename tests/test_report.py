"""report.html: the model behind it (pure), the page (self-contained, every part present), and
the page in a real browser: headless Chromium renders a stored invalid run with its violation
marker and explanation visible (the screenshot is kept in tests/artifacts/), and a 100,000-op
report stays under 2 MB and is drawn (how fast: bench/bench_test_timings.py).

The stored run in tests/data/runs/redis-setnx-pause is a real `harness run --nemesis pause
--time-limit 10` of redis-setnx (340 ops, 14 lock overlaps), kept so that these tests need a
browser but no servers.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import struct
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from harness.controller.store import RunDir
from harness.core.history_file import read_history
from harness.presentation.report import html as html_report
from harness.presentation.report import model as report_model
from harness.presentation.report import sampling, write_report
from harness.presentation.report.html import render, replay_command
from harness.presentation.report.words import inline
from tests import synth_history
from tests.harness_runs import bounded
from tests.histories import acquires

DATA = Path(__file__).parent / "data" / "runs" / "redis-setnx-pause"
ARTIFACTS = Path(__file__).parent / "artifacts"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def stored_run(tmp_path: Path) -> tuple[Path, dict[str, Any], list[dict[str, Any]],
                                        dict[str, Any]]:
    run_dir = tmp_path / "redis_redis-setnx_mutex_pause" / "20261122T043130"
    shutil.copytree(DATA, run_dir)
    spec = json.loads((run_dir / "test.json").read_text())["spec"]
    return (run_dir, spec, read_history(run_dir / "history.jsonl"),
            json.loads((run_dir / "results.json").read_text()))


def first_overlap(history: list[dict[str, Any]]) -> tuple[int, int, int, list[int]]:
    """From the history alone (not the checker): the first grant made while another process
    still held the lock (its release not yet invoked), the earlier of the two holders' next
    release invokes, when the earlier holder was granted it (times in ns), the two processes."""
    def release_after(process: int, t: int) -> int:
        return next(op["time"] for op in history if op["process"] == process
                    and op["f"] == "release" and op["type"] == "invoke" and op["time"] > t)

    held: dict[int, int] = {}  # process -> when it was granted the lock
    for op in history:
        p = op["process"]
        if not isinstance(p, int):
            continue
        if op["f"] == "acquire" and op["type"] == "ok":
            other = next((q for q in held if q != p), None)
            if other is not None:
                return (op["time"], min(release_after(p, op["time"]),
                                        release_after(other, held[other])),
                        held[other], sorted([p, other]))
            held[p] = op["time"]
        elif op["f"] == "release" and op["type"] == "invoke":
            held.pop(p, None)
    raise AssertionError("no overlap in the history")


def violations(results: dict[str, Any]) -> int:
    mutex = results["checks"]["mutex"]
    return len(mutex["lock-overlaps"]) + len(mutex["resource-interleavings"])


# the model ----------------------------------------------------------------------------------
def test_model_of_a_stored_run(tmp_path: Path) -> None:
    _, spec, history, results = stored_run(tmp_path)
    m = report_model.build(spec, history, results)
    assert m["lanes"][:5] == ["p0", "p1", "p2", "p3", "p4"]
    assert m["lanes"][5] == "p5 (final read)"
    assert not m["sampling"]["decimated"]
    # lock-held spans: from an acquire's ok to the same process's next release invoke
    oks = [op for op in history if op["f"] == "acquire" and op["type"] == "ok"]
    assert len(m["spans"]["s"]) == len(oks)
    first = oks[0]
    k = m["spans"]["s"].index(first["time"] // 1000)
    release = next(op for op in history if op["process"] == first["process"]
                   and op["f"] == "release" and op["type"] == "invoke"
                   and op["time"] > first["time"])
    assert m["spans"]["e"][k] == release["time"] // 1000
    # fault windows: from when each took effect (its start's info) .. stop info, with targets
    assert [(f["f"], f["targets"]) for f in m["faults"]] == [("pause", ["c2"]),
                                                             ("pause", ["c4"])]
    nemesis = [op for op in history if op["process"] == "nemesis"]
    began = next(op for op in nemesis if op["type"] == "info" and op["value"] == "start")
    ended = next(op for op in nemesis if op["type"] == "info" and op["value"] == "stop")
    assert (m["faults"][0]["start"], m["faults"][0]["stop"]) == (began["time"] // 1000,
                                                                 ended["time"] // 1000)
    # every explained item of every checker is a violation with a place on the timeline
    mutex = results["checks"]["mutex"]
    assert len(m["violations"]) == len(mutex["lock-overlaps"]) + len(
        mutex["resource-interleavings"])
    v = m["violations"][0]
    assert v["explanation"] == mutex["lock-overlaps"][0]["explanation"]
    t0, t1, first, procs = first_overlap(history)  # from .. until, to the millisecond
    assert (v["t0"], v["t1"]) == (round(t0 / 1e6) * 1000, round(t1 / 1e6) * 1000)
    assert v["c0"] <= first // 1000 and v["procs"] == procs
    inter = next(x for x in m["violations"] if x["kind"] == "resource-interleavings")
    assert inter["t0"] is not None and inter["c0"] < inter["t0"] <= inter["t1"] <= inter["c1"]
    # ops are delta-encoded: decoding gives the history's invoke times back
    starts, acc = [], 0
    for d in m["ops"]["t"]:
        acc += d
        starts.append(acc)
    invokes = [op["time"] // 1000 for op in history
               if op["type"] == "invoke" and isinstance(op["process"], int)]
    assert starts == invokes


def test_violations_of_any_checker_are_found_and_placed() -> None:
    """A checker nobody told the report about: lists of explained dicts and a witness."""
    history = acquires(1_000_000, 2_000_000, 3_000_000, 9_000_000)
    results = {"valid": False, "checks": {"linearizable": {
        "valid": False,
        "witness": {"ops": [0, 2], "blocked": [2], "explanation": "no order explains it",
                    "prefix": list(range(1000))},
        "extra": {"nested": [{"explanation": "nested thing", "at": 0.005}]},
        "odd-things": [{"explanation": "no time at all"}, {"not": "explained"}],
    }}}
    vs = report_model.build({"clients": 2}, history, results)["violations"]
    assert [v["explanation"] for v in vs] == ["no order explains it", "nested thing",
                                             "no time at all"]
    w = vs[0]
    assert (w["t0"], w["t1"]) == (3_000, 9_000)  # the blocked op
    assert (w["c0"], w["c1"]) == (1_000, 9_000) and w["procs"] == [0, 1]
    assert vs[1]["t0"] == 5_000
    assert vs[2]["t0"] is None


def test_big_histories_are_decimated_and_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sampling, "MAX_PAIRS", 2000)
    history = synth_history.generate(12_000, fault_every=25.0)
    spec = synth_history.spec_for(history)
    from harness.controller.checking import check_history as check_all

    results = check_all(history, spec)
    m = report_model.build(spec, history, results)
    s = m["sampling"]
    assert s["decimated"] and s["embedded"] <= 2000 < s["pairs"] and "within" in s["rule"]
    starts, acc = set(), 0
    for d in m["ops"]["t"]:
        acc += d
        starts.add(acc)
    v = m["violations"][0]
    near = [op["time"] // 1000 for op in history if op["type"] == "invoke"
            and isinstance(op["process"], int) and v["c0"] <= op["time"] // 1000 <= v["c1"]]
    assert near and all(t in starts for t in near)  # the ops around a violation are all kept
    page = render(spec, history, results, [])
    assert f"embeds {s['embedded']:,} of them" in page


def test_each_kind_lists_its_first_ones_and_the_page_counts_them_all() -> None:
    """A plugin checker that lists 300 anomalies more than the bound, another that lists 50
    of 11,000 overlaps it counted: the first LISTED_PER_KIND of each are listed, the page
    names the true counts."""
    n = report_model.LISTED_PER_KIND
    many = [{"explanation": f"anomaly {i}", "from": i / 1000} for i in range(n + 300)]
    overlaps = [{"explanation": f"overlap {i}", "from": i / 1000} for i in range(50)]
    results = {"valid": False, "checks": {
        "someones": {"valid": False, "anomalies": many},
        "mutex": {"valid": False, "lock-overlaps": overlaps, "lock-overlap-count": 11_000}}}
    m = report_model.build({}, [], results)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for v in m["violations"]:
        by_kind.setdefault(v["kind"], []).append(v)
    assert [v["explanation"] for v in by_kind["anomalies"]] == [f"anomaly {i}"
                                                                for i in range(n)]
    assert {v["total"] for v in by_kind["anomalies"]} == {n + 300}
    assert len(by_kind["lock-overlaps"]) == min(n, 50)
    assert {v["total"] for v in by_kind["lock-overlaps"]} == {11_000}
    page = render({}, [], results, [])
    assert f"someones: anomalies ({n + 300}, the first {n} listed)" in page
    assert f"mutex: lock-overlaps (11000, the first {min(n, 50)} listed)" in page
    assert f"anomaly {n - 1}<" in page and f"anomaly {n}<" not in page


def test_a_checks_json_on_the_page_is_cut_short_and_says_where_the_rest_is() -> None:
    """A witness's prefix lists every op the search placed (53,955 in a 10 s run): the page
    shows its first items, says how many more results.json has, and stays small."""
    witness = {"explanation": "no order explains it", "prefix": list(range(60_000)),
               "linearization": []}
    results = {"valid": False, "checks": {"linearizable": {"valid": False, "witness": witness,
                                                           "ops": 60_000}}}
    page = render({}, [], results, [])
    checks = page[page.index('<section id="checks">'):page.index('<section id="faults">')]
    assert f"… {60_000 - html_report.JSON_ITEMS:,} more in results.json" in checks
    assert len(checks) < 2 * html_report.JSON_CHARS + 10_000, len(checks)
    assert "59999" not in checks


def test_hover_details_past_their_budget_keep_those_nearest_the_focus(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pair's value is its own (sessions): past TEXT_CHARS the details nearest the
    focus are kept, the far ones dropped (-1), and the page says how many."""
    monkeypatch.setattr(report_model, "TEXT_CHARS", 2_000)
    pairs = [({"time": k * 1_000_000, "process": 0, "f": "acquire", "type": "invoke"},
              {"time": k * 1_000_000 + 500_000, "process": 0, "f": "acquire", "type": "ok",
               "value": {"session": k}}) for k in range(1000)]
    focus = [(500_000, 500_000)]  # at 0.5 s: pair 500
    texts, x, cut = report_model.detail_texts(pairs, focus, 1_000_000)
    assert sum(len(t) + 3 for t in texts) <= 2_000 and cut == sum(1 for k in x if k < 0) > 800
    kept = [k for k, i in enumerate(x) if i >= 0]
    assert kept == list(range(kept[0], kept[-1] + 1)) and kept[0] <= 500 <= kept[-1]
    assert all(texts[x[k]] == f"session {k}" for k in kept)  # in words, not JSON
    assert report_model.detail_texts(pairs[:10], focus, 1_000_000)[2] == 0


def test_lock_spans_past_their_cap_keep_the_open_ones_then_the_nearest(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sampling, "MAX_SPANS", 10)
    end = 100_000_000  # 100 s in us: a density column is about 42 ms
    spans = {"lane": [0] * 100 + [1], "s": [k * 1_000_000 for k in range(100)] + [5],
             "e": [k * 1_000_000 + 1_000 for k in range(100)] + [-1],
             "tok": list(range(101))}
    kept, held = sampling.thin_spans(spans, [(50_000_000, 50_000_000)], 60_000_000, end, 2)
    assert sorted(kept["tok"]) == [*range(46, 55), 100]  # the one held to the end, the nearest
    assert held[0].count("1") == 91  # every span not embedded shows in the density


def test_rejected_writes_past_their_cap_are_counted_and_the_first_drawn(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report_model, "MAX_REJECTED", 3)
    log = [{"seq": s, "process": 0, "session": 1, "kind": "enter", "token": 1,
            "accepted": s == 1} for s in range(1, 11)]
    history = [{"index": 0, "time": 0, "process": 1, "type": "invoke", "f": "read"},
               {"index": 1, "time": 10**9, "process": 1, "type": "ok", "f": "read",
                "value": log}]
    writes = {s: (s * 1000, s * 1000 + 10, 0) for s in range(1, 11)}
    out = report_model.rejected_writes(history, writes, {0: 0})
    assert out["seq"] == [2, 3, 4] and out["total"] == 9
    model = {"sampling": {"decimated": False, "pairs": 0}, "rejected": out, "violations": []}
    assert "The resource rejected 9 writes; the first 3 are drawn." in html_report.timeline(
        model)


def test_the_page_stays_under_its_ceiling(monkeypatch: pytest.MonkeyPatch) -> None:
    """Should the page still come out over PAGE_BYTES, it is built again with fewer pairs
    embedded one by one: it ends under the ceiling and says what it embeds."""
    history = synth_history.generate(30_000, fault_every=25.0)
    spec = synth_history.spec_for(history)
    from harness.controller.checking import check_history as check_all

    results = check_all(history, spec)
    whole = render(spec, history, results, [])
    assert "All " in whole and "client op pairs are embedded" in whole
    ceiling = len(whole.encode()) * 2 // 3  # the charts, the script...: 0.35 MB of it
    monkeypatch.setattr(html_report, "PAGE_BYTES", ceiling)
    page = render(spec, history, results, [])
    assert len(page.encode()) <= ceiling
    embedded = int(re.search(r"the page embeds ([\d,]+) of them", page)[1].replace(",", ""))  # type: ignore[index]
    assert 0 < embedded < 10_000


# the page -----------------------------------------------------------------------------------
def test_a_run_that_recorded_nothing_still_has_a_page() -> None:
    page = render({"lock": "redis-setnx", "nemesis": []}, [], {"valid": "unknown"}, [])
    assert 'class="banner v-unknown"' in page and "UNKNOWN" in page
    assert "No faults were injected." in page and "None: no checker found" in page


def test_page_is_self_contained_and_complete(tmp_path: Path) -> None:
    run_dir, spec, history, results = stored_run(tmp_path)
    path = write_report(RunDir(run_dir), spec, history, results)
    page = path.read_text()
    assert 'class="banner v-false"' in page and "INVALID" in page
    assert 'href="#check-mutex"' in page and 'href="#check-stats"' in page
    first = results["checks"]["mutex"]["lock-overlaps"][0]["explanation"]
    assert f'id="violation-1"><span class="expl">{first}' in page
    assert 'id="vm-1" href="#v-1"' in page
    assert '<a href="logs/n1.log">n1.log</a>' in page
    assert '<a href="history.jsonl">history.jsonl</a>' in page
    assert replay_command(spec) in page and "--seed 492975486" in page
    assert "<td>pause</td><td>c2</td>" in page  # the fault schedule
    # nothing from the network: no external scripts, styles, fonts or images
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "@import" not in page and "url(" not in page


def test_harness_report_rebuilds_the_page(tmp_path: Path) -> None:
    run_dir, *_ = stored_run(tmp_path)
    (run_dir / "report.html").unlink(missing_ok=True)
    proc = bounded([sys.executable, "-m", "harness.cli", "report", str(run_dir)],
                   timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(run_dir / "report.html")
    assert "Timeline" in (run_dir / "report.html").read_text()


@pytest.mark.slow
def test_600k_op_report_with_11k_overlaps_is_small_names_them_all_and_opens(
        tmp_path: Path) -> None:
    """Short holds, a pause every 5 s: 600,000 ops, 205 faults, 11,365 lock overlaps (the
    mutex checker lists the first 1,000). The page stays under 2 MB, keeps every fault window,
    and never claims fewer overlaps than the checker found."""
    chromium()
    run_dir = tmp_path / "synthetic"
    page, results = synth_history.write_run(run_dir, 600_000, hold_ms=(2, 8), fault_every=5.0)
    mutex = results["checks"]["mutex"]
    count = mutex["lock-overlap-count"]
    assert results["valid"] is False and count > 10_000 and len(mutex["lock-overlaps"]) < count
    size = page.stat().st_size
    assert size <= 2_000_000, f"{size / 1e6:.2f} MB"
    text = page.read_text()
    listed = min(len(mutex["lock-overlaps"]), report_model.LISTED_PER_KIND)
    assert f"mutex: lock-overlaps ({count}, the first {listed} listed)" in text
    assert f"(listed; {count:,} in the run)" in text  # the incidents' counts too
    history = read_history(run_dir / "history.jsonl")
    starts = [op for op in history if op["process"] == "nemesis" and op["type"] == "info"
              and op["value"] == "start"]  # each fault from when it took effect
    data = json.loads(re.search(r'id="report-data">(.*?)</script>', text, re.S)[1])  # type: ignore[index]
    assert len(starts) == results["checks"]["faults"]["fault-count"] > 200
    assert [(f["start"], f["targets"]) for f in data["faults"]] == [
        (op["time"] // 1000, op["targets"]) for op in starts]  # every fault, exact
    dom, _ = browse(page.as_uri(), tmp_path / "profile", "--window-size=1400,1000",
                    "--virtual-time-budget=3000", "--dump-dom")
    attrs = body_attrs(dom)
    assert attrs.get("data-ready") == "1" and "data-error" not in attrs, attrs


# in a browser -------------------------------------------------------------------------------
def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("chromium is not installed (apt-get install chromium, or bash setup.sh)")


def browse(url: str, profile: Path, *extra: str, timeout: float = 60) -> tuple[str, float]:
    """Run headless Chromium on url; stdout (the DOM, with --dump-dom) and the wall time."""
    shutil.rmtree(profile, ignore_errors=True)
    argv = [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, url]
    started = time.monotonic()
    proc = bounded(argv, timeout=timeout)  # its renderers die with it, pipes or not
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, took


def body_attrs(dom: str) -> dict[str, str]:
    m = re.search(r"<body([^>]*)>", dom)
    assert m, dom[:500]
    return {k: html.unescape(v) for k, v in re.findall(r'([\w-]+)="([^"]*)"', m[1])}


def png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA PNG (what Chromium writes) into rows of pixels: enough to
    check colours without an imaging library."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    height = depth = ctype = 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", chunk[:10])
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + n
    assert depth == 8 and ctype in (2, 6), (depth, ctype)
    bpp = 4 if ctype == 6 else 3
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line) if bpp == 3 else bytes(
            x for i in range(0, stride, 4) for x in line[i:i + 3]))
        prev = line
    return width, height, rows


def count_colour(rows: list[bytes], rgb: tuple[int, int, int], y0: int, y1: int,
                 tol: int = 12) -> int:
    n = 0
    for row in rows[y0:y1]:
        for i in range(0, len(row), 3):
            if all(abs(row[i + k] - rgb[k]) <= tol for k in range(3)):
                n += 1
    return n


def test_stored_invalid_run_in_headless_chromium(tmp_path: Path) -> None:
    run_dir, spec, history, results = stored_run(tmp_path)
    page = write_report(RunDir(run_dir), spec, history, results)
    url = page.as_uri() + "#v-1"  # what a "show on timeline" link or a red flag opens
    dom, _ = browse(url, tmp_path / "profile", "--window-size=1400,1000",
                    "--virtual-time-budget=3000", "--dump-dom")
    attrs = body_attrs(dom)
    assert attrs.get("data-ready") == "1" and "data-error" not in attrs, attrs
    explanation = results["checks"]["mutex"]["lock-overlaps"][0]["explanation"]
    # the marker of violation 1 is placed, shown and selected ...
    marker = re.search(r'<a class="vmark sel" id="vm-1" href="#v-1" style="([^"]*)" '
                       r'title="[^"]*" data-visible="1">1</a>', dom)
    assert marker, re.findall(r'<a class="vmark[^>]*id="vm-1"[^>]*>', dom)
    left = float(re.search(r"left: ([\d.]+)px", marker[1])[1])  # type: ignore[index]
    assert 104 <= left <= 1400
    # ... and its explanation is in the callout under the timeline
    callout = re.search(r'<div id="callout">(.*?)</div>\s*<div class="legend">', dom, re.S)
    assert callout and explanation in callout[1], dom[:3000]
    assert f"Violation 1 of {violations(results)}" in callout[1]
    # the anchors are the numbers shown: the last one opens the last violation
    last = violations(results)
    dom, _ = browse(page.as_uri() + f"#v-{last}", tmp_path / "profile",
                    "--window-size=1400,1000", "--virtual-time-budget=3000", "--dump-dom")
    assert f"Violation {last} of {last} " in dom and f'id="vm-{last}"' in dom
    assert re.search(rf'class="violation sel" id="violation-{last}"', dom), dom[-3000:]

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report-invalid-run.png"
    shot.unlink(missing_ok=True)
    browse(url, tmp_path / "profile", "--window-size=1400,1000", "--virtual-time-budget=3000",
           f"--screenshot={shot}")
    width, height, rows = png_pixels(shot)
    assert (width, height) == (1400, 1000)
    # the top 560 px (banner, timeline, callout): violation red, the yellow outline of the
    # selected flag, the callout's pink background
    assert count_colour(rows, (0xCF, 0x22, 0x2E), 0, 560) > 500
    assert count_colour(rows, (0xFF, 0xD3, 0x3D), 0, 560, tol=20) > 30
    assert count_colour(rows, (0xFF, 0xEB, 0xE9), 0, 700, tol=4) > 5000


PROBE = """<script>
(function () {  // hover over violation 1 on process 1's lane, then wheel-zoom there
  var cv = document.getElementById("timeline-canvas"), r = cv.getBoundingClientRect();
  var x = r.left + parseFloat(document.getElementById("vm-1").style.left) + 3;
  var y = r.top + 22 + 22 + 30 * 1.5;  // axis, fault lane, then lane 1 (30 px lanes)
  var before = document.getElementById("window").textContent;
  cv.dispatchEvent(new MouseEvent("mousemove", {clientX: x, clientY: y, bubbles: true}));
  document.body.dataset.tip = document.getElementById("tip").textContent;
  document.body.dataset.tipHidden = String(document.getElementById("tip").hidden);
  cv.dispatchEvent(new WheelEvent("wheel", {clientX: x, clientY: y, deltaY: -800,
                                            bubbles: true, cancelable: true}));
  var tries = 0;
  (function wait() {  // the page redraws on the next frame (or within 100 ms)
    var now = document.getElementById("window").textContent;
    if (now === before && ++tries < 30) { setTimeout(wait, 100); return; }
    document.body.dataset.zoom = before + " => " + now;
  })();
})();
</script>"""


def test_hover_and_zoom_in_headless_chromium(tmp_path: Path) -> None:
    run_dir, spec, history, results = stored_run(tmp_path)
    page = write_report(RunDir(run_dir), spec, history, results)
    probe = run_dir / "probe.html"
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    dom, _ = browse(probe.as_uri(), tmp_path / "profile", "--window-size=1400,1000",
                    "--virtual-time-budget=3000", "--dump-dom")
    attrs = body_attrs(dom)
    assert "data-error" not in attrs, attrs
    tip = attrs["data-tip"]
    assert attrs["data-tip-hidden"] == "false"
    # the op under the pointer: process 1's first write once it held the lock alongside
    t0, *_ = first_overlap(history)
    write = next(op for op in history if op["process"] == 1 and op["f"] == "write"
                 and op["type"] == "invoke" and op["time"] > t0)
    done = next(op for op in history if op["process"] == 1 and op["f"] == "write"
                and op["type"] != "invoke" and op["time"] >= write["time"])
    assert tip.startswith(f"p1 · write · {done['type']}\ninvoked {write['time'] / 1e9:.3f}"), tip
    assert inline(done["value"]) in tip  # in words: "kind enter, session 1, seq 6"
    assert "holds the lock" in tip and "violation 1: process 1 acquired at 3.17 s" in tip
    assert "during pause on c2" in tip
    before, after = attrs["data-zoom"].split(" => ")
    span = [float(re.search(r"\(([\d.]+) s in view", w)[1]) for w in (before, after)]  # type: ignore[index]
    assert span[1] < span[0] / 2, attrs["data-zoom"]


def test_100k_op_report_is_small_and_opens(tmp_path: Path) -> None:
    """Its size and that Chromium draws it; how fast is bench/bench_test_timings.py report."""
    chromium()
    run_dir = tmp_path / "synthetic"
    page, results = synth_history.write_run(run_dir, 100_000)
    ops = sum(1 for _ in (run_dir / "history.jsonl").open())
    size = page.stat().st_size
    assert ops >= 100_000 and results["valid"] is False
    assert size < 2_000_000, f"{size / 1e6:.2f} MB"
    dom, _ = browse(page.as_uri(), tmp_path / "profile", "--window-size=1400,1000",
                    "--dump-dom")
    attrs = body_attrs(dom)
    assert attrs.get("data-ready") == "1" and "data-error" not in attrs, attrs


def test_a_clock_fault_is_labelled_by_what_it_did_in_its_own_classs_words() -> None:
    """The label comes from the nemesis class (Clock.label, ClientClock.label): the offset or
    rate the fault's detail says it moved the clock by, never the options it did not use."""
    params = {"clock-nodes": "majority", "clock-id": "wall", "clock-rate": 2.0,
              "clock-period": 0.2}
    label = report_model.fault_label
    assert label("clock", ["n1"], params, {"pattern": "jump", "clock": "wall", "offset": 60.0}
                 ) == "+60 s wall jump · n1"
    assert label("clock-back", ["n1", "n2"], params, {"offset": -60.0}) == \
        "-60 s wall jump · n1,n2"
    assert label("clock", ["n1"], {**params, "clock-pattern": "rate"},
                 {"pattern": "rate", "rate": 2.0, "clock": "wall"}) == "wall x2 · n1"
    assert label("clock-strobe", ["n1"], params, {"offset": 60.0, "period": 0.2}) == \
        "wall strobe +60 s / 0.2 s · n1"
    assert label("clock", ["n1"], {"clock-id": "both"}, None) == "both jump · n1"
    assert label("clock-client", ["c2"], {}, {"pattern": "jump", "offset": 4.0}) == \
        "+4 s client wall jump · c2"
    assert label("clock-client", ["c2"], {}, {"pattern": "rate", "rate": 5.0}) == \
        "client wall x5 · c2"
    assert label("pause", ["c3"], {"signal": "STOP"}, None) == "pause c3 (signal=STOP)"
