"""``harness serve`` over real HTTP on 127.0.0.1: the list of runs with verdicts and filters, a
report, a log, a zip of a run, the JSON list, and nothing outside the store."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.controller.store import RunDir, Store
from harness.core.history_file import read_history
from harness.presentation.report import write_report
from harness.presentation.serve import make_server
from tests.harness_runs import bounded

DATA = Path(__file__).parent / "data" / "runs" / "redis-setnx-pause"
INVALID = "redis_redis-setnx_mutex_pause/20261122T043130"
VALID = "redis_redis-fenced_fenced_none/20261122T050000"


def make_store(root: Path) -> Path:
    """Two runs: the stored invalid one, and a copy relabelled as a valid fenced run."""
    store = root / "results"
    shutil.copytree(DATA, store / INVALID)
    shutil.copytree(DATA, store / VALID)
    test = json.loads((store / VALID / "test.json").read_text())
    test["spec"].update(lock="redis-fenced", workload="fenced", nemesis=[])
    (store / VALID / "test.json").write_text(json.dumps(test))
    (store / VALID / "results.json").write_text(json.dumps(
        {"valid": True, "checks": {"mutex": {"valid": True}}}))
    (store / "latest").symlink_to(VALID)
    run = store / INVALID
    spec = json.loads((run / "test.json").read_text())["spec"]
    write_report(RunDir(run), spec, read_history(run / "history.jsonl"),
                 json.loads((run / "results.json").read_text()))
    (root / "secret.txt").write_text("outside the store")
    suite = store / "_suites" / "nightly" / "20261122T060000"
    suite.mkdir(parents=True)
    (suite / "summary.json").write_text(json.dumps(
        {"name": "nightly", "total": 2, "as_expected": 1, "differ": 1}))
    (suite / "index.html").write_text("<title>suite nightly</title>")
    return store


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    srv = make_server(make_store(tmp_path), "127.0.0.1", 0, quiet=True)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    host, port = srv.server_address[:2]
    yield f"http://{host}:{port}"
    srv.shutdown()
    srv.server_close()
    thread.join(10)


def get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def test_lists_runs_with_verdicts_and_filters(server: str) -> None:
    assert server.startswith("http://127.0.0.1:")
    status, ctype, body = get(server + "/")
    page = body.decode()
    assert status == 200 and ctype.startswith("text/html")
    assert "2 of 2 runs" in page
    assert '<span class="chip v-false">INVALID</span>' in page
    assert '<span class="chip v-true">VALID</span>' in page
    assert f'href="/runs/{INVALID}/report.html"' in page
    assert f'href="/zip/{INVALID}.zip"' in page
    overlaps = json.loads((DATA / "results.json").read_text())["checks"]["mutex"][
        "lock-overlap-count"]  # the stored invalid run's, as the store was made
    assert f"{overlaps} lock-overlap" in page
    assert "1 of 2 as expected" in page  # the suites harness suite ran
    assert 'href="/runs/_suites/nightly/20261122T060000/index.html"' in page
    status, _, body = get(server + "/runs/_suites/nightly/20261122T060000/index.html")
    assert status == 200 and b"suite nightly" in body
    _, _, body = get(server + "/?verdict=invalid")
    page = body.decode()
    assert "1 of 2 runs" in page and INVALID in page and VALID not in page
    _, _, body = get(server + "/?lock=redis-fenced&nemesis=none")
    page = body.decode()
    assert "1 of 2 runs" in page and VALID in page and INVALID not in page


def test_compare_refuses_anything_but_two_runs_of_the_store(server: str) -> None:
    status, _, body = get(f"{server}/compare?run={INVALID}")
    assert status == 200 and "Tick exactly two runs to compare (got 1)" in body.decode()
    status, _, body = get(f"{server}/compare?run={INVALID}&run=../secret.txt")
    assert status == 200 and "Not a run in the store: ../secret.txt" in body.decode()
    status, _, body = get(f"{server}/compare?run={INVALID}&run={VALID}")
    page = body.decode()
    assert '<tr class="differs" data-field="verdict">' in page
    assert '<tr class="same" data-field="seed">' in page


COMPARE_PROBE = """<!doctype html><body><iframe id="cmp" style="width:1200px;height:4000px;border:0"
 src="/compare?run=%s&run=%s"></iframe><script>
(function () {  // each run's timeline in the compare page: where it is, its time labels' x
  var tries = 0;
  function frames() {
    var d = document.getElementById("cmp").contentDocument;
    return d ? [d.getElementById("timeline-A"), d.getElementById("timeline-B")] : [];
  }
  function ready(f) {
    var b = f && f.contentDocument && f.contentDocument.body;
    return b && b.dataset.ready === "1" && f.style.height;  // drawn, and sized to it
  }
  function geometry(f) {
    var d = f.contentDocument, cv = d.getElementById("timeline-canvas");
    var fr = f.getBoundingClientRect(), r = cv.getBoundingClientRect();
    return {top: fr.top, height: fr.height, canvas: r.height,
            window: d.getElementById("window").textContent,
            chart: d.getElementById("throughput-canvas").dataset.axis,
            ticks: cv.dataset.ticks.split("|").map(function (t) {
              var p = t.split("@");
              return [p[0], fr.left + r.left + Number(p[1])];
            })};
  }
  function wait() {
    var fs = frames();
    if (fs.length === 2 && fs.every(ready)) {
      var before = fs.map(geometry);
      fs[1].contentDocument.getElementById("zoom-in").click();  // B's: A follows
      setTimeout(function () {
        document.body.dataset.out = JSON.stringify({before: before, after: fs.map(geometry)});
      }, 1500);
    } else if (tries++ < 300) setTimeout(wait, 100);
    else document.body.dataset.out = "the timelines did not draw";
  }
  wait();
})();
</script></body>"""


def test_compare_draws_both_timelines_on_one_time_scale_in_chromium(server: str,
                                                                    tmp_path: Path) -> None:
    """The compare page shows each run's timeline and charts (the report's own), A above B,
    a second at the same x in both though B's history is half as long as A's; zooming B
    zooms A."""
    from tests.test_report import body_attrs, browse

    store = tmp_path / "results"
    history = (store / VALID / "history.jsonl").read_text().splitlines(keepends=True)
    (store / VALID / "history.jsonl").write_text("".join(history[:len(history) // 2]))
    (store / "probe.html").write_text(COMPARE_PROBE % (INVALID, VALID))
    dom, _ = browse(f"{server}/runs/probe.html", tmp_path / "profile", "--window-size=1300,1000",
                    "--virtual-time-budget=20000", "--dump-dom", timeout=120)
    out = body_attrs(dom).get("data-out", "")
    assert out.startswith("{"), out or dom[-2000:]
    found = json.loads(out)
    for a, b in (found["before"], found["after"]):
        assert a["top"] + a["height"] <= b["top"]  # A above B, each its full height
        assert a["height"] > a["canvas"] > 100 and b["height"] > b["canvas"] > 100
        assert a["window"] == b["window"] and a["chart"] == b["chart"]
        assert len(a["ticks"]) >= 4 and [t[0] for t in a["ticks"]] == [t[0] for t in b["ticks"]]
        assert all(abs(x - y) <= 1 for (_, x), (_, y) in zip(a["ticks"], b["ticks"], strict=True))
    last = json.loads(history[-1])["time"] / 1e9  # A's end: the scale of both
    assert found["before"][1]["window"].startswith(f"0.000 – {last:.3f} s"), found["before"][1]
    assert found["after"][0]["window"] != found["before"][0]["window"]  # A followed B's zoom


INDEX_PROBE = """<!doctype html><body><iframe id="ix" src="/" style="width:1400px;height:2000px">
</iframe><script>
var f = document.getElementById("ix");
f.onload = function () {  // each row of the list: its class, its run, its height (0: folded)
  var d = f.contentDocument;
  function rows() {
    return Array.from(d.querySelectorAll("#runs tbody tr")).map(function (r) {
      return [r.className, r.dataset.run || "", r.getBoundingClientRect().height];
    });
  }
  var before = rows();
  d.querySelector("button.unfold").click();
  document.body.dataset.out = JSON.stringify({before: before, after: rows()});
};
</script></body>"""


def test_an_explores_runs_fold_under_its_search_in_the_list(server: str,
                                                            tmp_path: Path) -> None:
    """The runs a `harness explore` made (its runs.jsonl, as the search writes it) are one row
    of their search, counted by verdict, folded until it is unfolded; the other runs are rows
    of their own as before."""
    from tests.test_report import body_attrs, browse

    store = tmp_path / "results"
    search = Store(store).explore_dir("redis_redis-setnx_mutex_pause")
    made = []
    for n in range(3):
        made.append(f"redis_redis-setnx_mutex_pause/20261123T00000{n}")
        shutil.copytree(store / INVALID, store / made[-1])
        search.add_run({"n": n + 1, "phase": "search", "run": str(store / made[-1]),
                        "verdict": "INVALID"})
    page = get(server + "/")[2].decode()
    assert "5 of 5 runs" in page and page.count('class="search-row"') == 1
    assert "harness explore: 3 runs" in page and "(no summary yet)" in page
    assert '3× <span class="chip v-false">INVALID</span>' in page
    (store / "probe.html").write_text(INDEX_PROBE)
    dom, _ = browse(f"{server}/runs/probe.html", tmp_path / "profile", "--window-size=1500,1000",
                    "--virtual-time-budget=5000", "--dump-dom")
    found = json.loads(body_attrs(dom)["data-out"])
    for when, rows in found.items():
        assert [(c, run) for c, run, _ in rows] == [
            ("search-row", ""), *(("in-search", r) for r in reversed(made)), ("", VALID),
            ("", INVALID)], rows
        heights = [h for c, _, h in rows if c == "in-search"]
        assert all(h > 0 for c, _, h in rows if c != "in-search")
        assert all(h == 0 for h in heights) if when == "before" else all(h > 0 for h in heights)


def test_serves_a_report_its_logs_and_a_zip(server: str) -> None:
    status, ctype, body = get(f"{server}/runs/{INVALID}/report.html")
    assert status == 200 and ctype.startswith("text/html")
    assert b"INVALID" in body and b'id="timeline-canvas"' in body
    status, ctype, body = get(f"{server}/runs/{INVALID}/logs/n1.log")  # the report's log link
    assert status == 200 and ctype.startswith("text/plain") and b"Redis" in body
    status, ctype, body = get(f"{server}/runs/{INVALID}/")
    assert status == 200 and b"history.jsonl" in body
    status, ctype, body = get(f"{server}/zip/{INVALID}.zip")
    assert status == 200 and ctype == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(body)).namelist()
    assert f"{INVALID}/history.jsonl" in names and f"{INVALID}/logs/n1.log" in names
    status, ctype, body = get(server + "/api/runs.json")
    runs = json.loads(body)
    assert {r["path"] for r in runs} == {INVALID, VALID}
    assert {r["valid"] for r in runs} == {True, False}


def test_nothing_outside_the_store(server: str) -> None:
    for path in ("/runs/../secret.txt", "/runs/%2e%2e/secret.txt", "/runs/..%2fsecret.txt",
                 "/zip/../results.zip", "/runs/" + INVALID + "/../../../secret.txt",
                 "/render/../secret.txt", "/render/_suites", "/nothing-here"):
        status, _, body = get(server + path)
        assert status == 404, (path, body)
        assert b"outside the store" not in body


def test_the_command_listens_on_loopback(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "serve", "--store",
                             str(store), "--port", "0", "--quiet"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "serving ... at http://127.0.0.1:PORT/ (Ctrl-C stops)"
        assert " at http://127.0.0.1:" in line, (line, proc.poll())
        url = line.split(" at ", 1)[1].split()[0]
        status, _, body = get(url)
        assert status == 200 and INVALID.encode() in body
        status, _, body = get(f"{url}runs/{INVALID}/report.html")
        assert status == 200 and b"lock-overlaps" in body
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


def test_a_missing_store_is_one_line(tmp_path: Path) -> None:
    proc = bounded([sys.executable, "-m", "harness.cli", "serve", "--store",
                    str(tmp_path / "nope"), "--port", "0"], timeout=30)
    assert proc.returncode == 3
    assert proc.stderr.count("\n") == 1 and "no results store" in proc.stderr


def test_sorting_puts_runs_without_a_value_last_either_way() -> None:
    from harness.presentation.serve import RunInfo, sorted_runs

    def run(stamp: str, duration: float | None, exit: int | None) -> RunInfo:
        return RunInfo(path=f"t/{stamp}", stamp=stamp, spec={"seed": 1}, valid=True,
                       status="complete", facts="", has_report=False, mtime=0.0,
                       duration=duration, exit=exit)

    runs = [run("a", 5.0, 1), run("b", None, None), run("c", 2.0, 0)]
    order = lambda q: [r.stamp for r in sorted_runs(runs, q)[0]]  # noqa: E731
    assert order({"sort": "duration"}) == ["c", "a", "b"]
    assert order({"sort": "duration", "order": "desc"}) == ["a", "c", "b"]
    assert order({"sort": "exit", "order": "desc"}) == ["a", "c", "b"]
    assert order({}) == ["c", "b", "a"]  # newest first
    assert order({"sort": "nonsense"}) == ["c", "b", "a"]
