"""``harness serve``: browse the results store from a web browser.

A page listing every run (newest first) with its duration, backend, verdict and exit code,
sortable by any column, filters by db, lock, workload, nemesis, backend and verdict, a link to
each report and a download of each run as a zip; the runs one ``harness explore`` made folded
under one row of their search; two runs ticked are compared, their timelines one above the
other (:mod:`harness.presentation.serve_compare`); the suites ``harness suite`` ran are listed
too.
Standard library only (``http.server``): nothing to install on a CI box or a laptop.

It binds 127.0.0.1 by default: the store holds logs and histories of the machine it runs on,
and the server has no authentication, so exposing it is an explicit ``--host`` choice.
Everything it serves is read from the store directory and nothing outside it (paths are resolved
and checked); it never writes.
"""

from __future__ import annotations

import contextlib
import html
import io
import json
import mimetypes
import os
import re
import sys
import threading
import time
import urllib.parse
import zipfile
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from harness.controller.checking import exit_code
from harness.controller.store import RunDir, Store
from harness.core.errors import HarnessError
from harness.presentation.report.html import verdict_class, verdict_word
from harness.presentation.report.words import figure_words
from harness.presentation.serve_compare import compare_body, report_page, side_of

DEFAULT_PORT = 8765
FILTERS = ("db", "lock", "workload", "nemesis", "backend", "verdict")
SORTS = ("when", "duration", "db", "lock", "workload", "nemesis", "backend", "seed", "verdict",
         "exit")
ZIP_LIMIT = 512 * 1024 * 1024  # a run bigger than this is not zipped in memory
TEXT_TYPES = {".log": "text/plain", ".jsonl": "text/plain", ".json": "application/json",
              ".xml": "application/xml", ".toml": "text/plain", ".conf": "text/plain"}

e = html.escape


# the store --------------------------------------------------------------------------------------
@dataclass
class RunInfo:
    """One run directory as the list shows it."""

    path: str  # relative to the store: <test>/<stamp>
    stamp: str
    spec: dict[str, Any]
    valid: Any
    status: str
    facts: str
    has_report: bool
    mtime: float
    duration: float | None = None  # seconds the history spans (None: nothing recorded)
    exit: int | None = None  # what `harness check` exits with for it (None: not checked)

    def field(self, name: str) -> str:
        if name == "verdict":
            return verdict_word(self.valid).lower() if self.status != "running" else "running"
        if name == "nemesis":
            return "+".join(self.spec.get("nemesis") or []) or "none"
        if name == "backend":
            return str(self.spec.get("backend") or "local")
        return str(self.spec.get(name, ""))

    def key(self, name: str) -> tuple[Any, ...]:
        """What the list sorts by for column ``name`` (missing values last)."""
        if name == "when":
            return (0, self.stamp, self.path)
        value: Any = {"duration": self.duration, "exit": self.exit}.get(
            name, self.field(name))
        if name == "seed":
            value = int(value) if str(value).lstrip("-").isdigit() else None
        return (value is None, value if value is not None else 0, self.stamp)


@dataclass(frozen=True)
class Search:
    """One ``harness explore``, as the list groups its runs under it."""

    path: str  # relative to the store: _explore/<test>/<stamp>
    done: bool  # its summary written


@dataclass
class Browser:
    """The store as the pages show it."""

    store: Store
    _cache: dict[Path, tuple[float, RunInfo | None]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def root(self) -> Path:
        return self.store.root

    def runs(self) -> list[RunInfo]:
        """Every run under the store, newest first; a run's files are re-read only when its
        directory changed, so listing thousands of runs stays cheap."""
        out = []
        for run in self.store.runs():
            info = self._read(run)
            if info is not None:
                out.append(info)
        out.sort(key=lambda r: (r.stamp, r.path), reverse=True)
        return out

    def _read(self, run: RunDir) -> RunInfo | None:
        try:
            mtime = max(p.stat().st_mtime for p in (run.path, run.test_json))
        except OSError:
            return None
        with self._lock:
            cached = self._cache.get(run.path)
            if cached is not None and cached[0] == mtime:
                return cached[1]
        info = read_run(self.store, run, mtime)
        with self._lock:
            self._cache[run.path] = (mtime, info)
        return info

    def searches(self) -> dict[str, Search]:
        """Each run a ``harness explore`` made -> that search."""
        out: dict[str, Search] = {}
        for d in self.store.explores():
            search = Search(d.path.relative_to(self.root).as_posix(), d.summary_json.exists())
            out.update(dict.fromkeys(d.run_ids(), search))
        return out

    def suites(self) -> list[dict[str, Any]]:
        out = []
        for summary in self.store.suite_summaries():
            try:
                data = json.loads(summary.read_text())
            except (OSError, ValueError):
                continue
            data["path"] = summary.parent.relative_to(self.root).as_posix()
            out.append(data)
        out.sort(key=lambda s: s["path"].rsplit("/", 1)[-1], reverse=True)
        return out

    def resolve(self, rel: str) -> Path | None:
        """A path inside the store, or None (outside it, or missing)."""
        root = self.root.resolve()
        try:
            p = (root / rel).resolve()
        except (OSError, RuntimeError):
            return None
        if p != root and root not in p.parents:
            return None
        return p if p.exists() else None


def read_run(store: Store, run: RunDir, mtime: float) -> RunInfo | None:
    try:
        test = run.load_test()
    except HarnessError:
        return None
    results: dict[str, Any] = {}
    with contextlib.suppress(HarnessError):
        results = run.load_results()
    status = str(test.get("status") or "")
    if status == "starting":
        status = "running" if not results else "did not finish"
    facts = [figure_words(name, check) for name, check in (results.get("checks") or {}).items()
             if isinstance(check, dict)]
    return RunInfo(path=store.relative(run), stamp=run.name,
                   spec=test["spec"], valid=results.get("valid", "unknown"), status=status,
                   facts=", ".join(filter(None, facts)), has_report=run.report.exists(),
                   mtime=mtime, duration=history_span(run.path / "history.jsonl"),
                   exit=exit_code(results) if results else None)


def history_span(path: Path) -> float | None:
    """Seconds from the run's start to its history's last op: read from the file's end, so a
    long history costs no more than a short one."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        with contextlib.suppress(ValueError, AttributeError):
            t = json.loads(line).get("time")
            if isinstance(t, int | float) and not isinstance(t, bool):
                return t / 1e9
    return None


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def zip_run(run_dir: Path) -> bytes:
    """The run directory as a zip (in memory: runs are small; bigger ones are refused)."""
    files = [p for p in sorted(run_dir.rglob("*")) if p.is_file() and not p.is_symlink()]
    if sum(p.stat().st_size for p in files) > ZIP_LIMIT:
        raise HarnessError(f"{run_dir} is larger than {ZIP_LIMIT >> 20} MB: copy it instead")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for p in files:
            z.write(p, f"{run_dir.parent.name}/{run_dir.name}/{p.relative_to(run_dir)}")
    return buf.getvalue()


# pages ------------------------------------------------------------------------------------------
STYLE = """body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1f2328}
header{background:#24292f;color:#fff;padding:.7em 1.5em;font-size:1.2em}
main{padding:.5em 1.5em 3em} a{color:#0969da}
form{display:flex;flex-wrap:wrap;gap:.6em;align-items:end;margin:.8em 0}
label{display:flex;flex-direction:column;font-size:.85em;color:#656d76}
select,button{font:inherit;padding:.15em .4em}
table{border-collapse:collapse;width:100%} td,th{padding:.25em .7em .25em 0;text-align:left}
th{border-bottom:1px solid #d0d7de} tbody tr:nth-child(even){background:#f6f8fa}
.chip{border-radius:2em;padding:.05em .7em;color:#fff;font-weight:600;font-size:.9em;
 white-space:nowrap}
.v-true{background:#1a7f37} .v-false{background:#cf222e} .v-unknown{background:#9a6700}
.v-running{background:#0969da} .muted{color:#656d76} h2{font-size:1.1em;margin-top:1.6em}
tbody.folded tr.in-search{display:none} tr.search-row{background:#ddf4ff!important}
tbody.folded .unfold{transform:rotate(0)} .unfold{transform:rotate(90deg);border:0;background:none}
tr.in-search td:nth-child(2){padding-left:1.2em}"""


def page(title: str, body: str) -> bytes:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{e(title)}'
            f"</title><style>{STYLE}</style></head><body><header>{e(title)}</header>"
            f"<main>{body}</main></body></html>").encode()


def when(stamp: str) -> str:
    m = re.match(r"(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)(.*)", stamp)
    return f"{m[1]}-{m[2]}-{m[3]} {m[4]}:{m[5]}:{m[6]}{m[7]}" if m else stamp


def suite_title(summary: dict[str, Any]) -> str:
    """A suite's name, and which shard (or that it is a merge of shards)."""
    name = str(summary.get("name"))
    if summary.get("shard"):
        return f"{name} shard {summary['shard']}"
    return f"{name} (merged)" if summary.get("merged") else name


def sorted_runs(runs: list[RunInfo], query: dict[str, str]) -> tuple[list[RunInfo], str, str]:
    """The runs in the order the query asks (``sort``: a column, ``order``: asc or desc;
    newest first by default), and that column and order."""
    column = query.get("sort") if query.get("sort") in SORTS else "when"
    order = query.get("order") if query.get("order") in ("asc", "desc") else (
        "desc" if column == "when" else "asc")
    present: list[RunInfo] = []
    missing: list[RunInfo] = []  # no value in that column: last, whichever the order
    for r in runs:
        (missing if r.key(column)[0] else present).append(r)
    present.sort(key=lambda r: r.key(column), reverse=order == "desc")
    return present + missing, column, order


def header(column: str, label: str, query: dict[str, str], current: str, order: str) -> str:
    """A column heading that sorts by it (again: the other way round)."""
    flip = "asc" if current == column and order == "desc" else (
        "desc" if current == column or column == "when" else "asc")
    q = urllib.parse.urlencode({**{k: v for k, v in query.items() if v}, "sort": column,
                                "order": flip})
    arrow = (" ▼" if order == "desc" else " ▲") if current == column else ""
    return f'<th><a class="sort" data-sort="{column}" href="/?{e(q)}">{e(label)}{arrow}</a></th>'


def index_page(store: Browser, query: dict[str, str]) -> bytes:
    runs = store.runs()
    choices = {f: sorted({r.field(f) for r in runs}) for f in FILTERS}
    shown = [r for r in runs if all(not query.get(f) or r.field(f) == query[f] for f in FILTERS)]
    shown, column, order = sorted_runs(shown, query)
    selects = []
    for f in FILTERS:
        opts = "".join(f'<option{" selected" if query.get(f) == v else ""}>{e(v)}</option>'
                       for v in choices[f])
        selects.append(f'<label>{f}<select name="{f}"><option value="">any</option>{opts}'
                       "</select></label>")
    rows = grouped(shown, store.searches())
    suites = store.suites()
    suite_rows = "".join(
        f'<tr><td>{e(when(s["path"].rsplit("/", 1)[-1]))}</td><td>{e(suite_title(s))}</td>'
        f'<td><span class="chip {"v-true" if s.get("differ") == 0 else "v-false"}">'
        f'{s.get("as_expected", 0)} of {s.get("total", 0)} as expected</span></td>'
        f'<td><a href="/runs/{urllib.parse.quote(s["path"])}/index.html">index</a></td></tr>'
        for s in suites)
    suite_html = (f"<h2>Suites</h2><table><thead><tr><th>when</th><th>suite</th><th>outcome"
                  f"</th><th></th></tr></thead><tbody>{suite_rows}</tbody></table>"
                  if suites else "")
    keep = "".join(f'<input type="hidden" name="{k}" value="{e(query[k])}">'
                   for k in ("sort", "order") if query.get(k))
    heads = "".join(header(c, c, query, column, order) for c in (
        "when", "duration", "db", "lock", "workload", "nemesis", "backend", "seed", "verdict",
        "exit"))
    body = (f'<form method="get">{"".join(selects)}{keep}<button>filter</button>'
            f'<a href="/">clear</a></form><form id="compare" method="get" action="/compare">'
            '<button>compare the two ticked runs</button></form>'
            f'<p class="muted">{len(shown)} of {len(runs)} runs in '
            f'{e(str(store.root))}</p><table id="runs"><thead><tr><th></th>{heads}'
            f"<th>found</th><th></th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
            f"{suite_html}")
    return page("lock-harness results", body)


def verdict_chip(r: RunInfo) -> str:
    verdict = ('<span class="chip v-running">RUNNING</span>' if r.status == "running" else
               f'<span class="chip {verdict_class(r.valid)}">{verdict_word(r.valid)}</span>')
    if r.status not in ("running", "complete", ""):
        verdict += f' <span class="muted">{e(r.status)}</span>'
    return verdict


def run_row(r: RunInfo) -> str:
    q = urllib.parse.quote
    report = (f'<a href="/runs/{q(r.path)}/report.html">report</a>' if r.has_report
              else '<span class="muted">no report</span>')
    return (f'<tr data-run="{e(r.path)}"><td><input type="checkbox" name="run" '
            f'value="{e(r.path)}" form="compare"></td><td>{e(when(r.stamp))}</td>'
            f'<td class="duration">{e(fmt_duration(r.duration))}</td><td>{e(r.field("db"))}</td>'
            f"<td>{e(r.field('lock'))}</td><td>{e(r.field('workload'))}</td>"
            f"<td>{e(r.field('nemesis'))}</td><td>{e(r.field('backend'))}</td>"
            f"<td>{e(r.field('seed'))}</td><td>{verdict_chip(r)}</td>"
            f'<td class="exit">{"" if r.exit is None else r.exit}</td>'
            f'<td class="muted">{e(r.facts)}</td><td>{report} · '
            f'<a href="/runs/{q(r.path)}/">files</a> · '
            f'<a href="/zip/{q(r.path)}.zip">zip</a></td></tr>')


def grouped(shown: list[RunInfo], searches: dict[str, Search]) -> list[str]:
    """The list's rows: a run of its own as it is; the runs of one ``harness explore`` folded
    under one row of their search (where its first run shown would be), which unfolds them."""
    rows: list[str] = []
    done: set[Search] = set()
    for r in shown:
        search = searches.get(r.path)
        if search is None:
            rows.append(run_row(r))
        elif search not in done:
            done.add(search)
            rows.append(search_rows([x for x in shown if searches.get(x.path) == search], search))
    return rows


def search_rows(runs: list[RunInfo], search: Search) -> str:
    """A search's row (its runs counted by verdict) over its runs, folded."""
    counts: dict[str, int] = {}
    for r in runs:
        counts[verdict_chip(r)] = counts.get(verdict_chip(r), 0) + 1
    verdicts = " ".join(f"{n}× {chip}" for chip, n in counts.items())
    q = urllib.parse.quote(search.path)
    links = (f'<a href="/runs/{q}/summary.txt">summary</a> · ' if search.done else "")
    state = "" if search.done else ' <span class="muted">(no summary yet)</span>'
    children = "".join(run_row(r).replace("<tr ", '<tr class="in-search" ', 1) for r in runs)
    unfold = "this.closest('tbody').classList.toggle('folded')"
    first = runs[0]
    return (f'</tbody><tbody class="search folded" data-search="{e(search.path)}">'
            f'<tr class="search-row"><td><button type="button" class="unfold" title="its runs" '
            f'onclick="{unfold}">▸</button></td>'
            f"<td>{e(when(search.path.rsplit('/', 1)[-1]))}</td><td></td>"
            f"<td>{e(first.field('db'))}</td><td>{e(first.field('lock'))}</td>"
            f"<td>{e(first.field('workload'))}</td><td colspan='3'>harness explore: {len(runs)} "
            f"run{'s' if len(runs) != 1 else ''}{state}</td><td colspan='3'>{verdicts}</td>"
            f'<td>{links}<a href="/runs/{q}/">files</a></td></tr>{children}</tbody><tbody>')


def compare_page(store: Browser, rels: list[str]) -> bytes:
    """Two runs side by side (:mod:`harness.presentation.serve_compare`), or why not."""
    if len(rels) != 2:
        return page("compare runs", f'<p>Tick exactly two runs to compare (got {len(rels)}). '
                    '<a href="/">all runs</a></p>')
    dirs = [store.resolve(r) for r in rels]
    bad = [r for r, d in zip(rels, dirs, strict=True) if d is None or not RunDir(d).is_run()]
    if bad:
        return page("compare runs", f"<p>Not a run in the store: {e(', '.join(bad))}. "
                    '<a href="/">all runs</a></p>')
    sides = [side_of(store.store, RunDir(d)) for d in dirs if d is not None]
    return page("compare runs", compare_body(sides))


def listing_page(store: Browser, rel: str, directory: Path) -> bytes:
    items = []
    for p in sorted(directory.iterdir()):
        name = p.name + ("/" if p.is_dir() else "")
        items.append(f'<li><a href="{urllib.parse.quote(name)}">{e(name)}</a></li>')
    return page(f"/{rel}", f'<p><a href="/">all runs</a></p><ul>{"".join(items)}</ul>')


def runs_json(store: Browser) -> bytes:
    return json.dumps([{"path": r.path, "spec": r.spec, "valid": r.valid, "status": r.status,
                        "facts": r.facts, "duration": r.duration, "exit": r.exit,
                        "report": f"/runs/{r.path}/report.html" if r.has_report else None}
                       for r in store.runs()], indent=1).encode()


# the server -------------------------------------------------------------------------------------
class Handler(BaseHTTPRequestHandler):
    store: Browser  # set on the subclass made by make_server
    server_version = "lock-harness"

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
        try:
            if path == "/":
                self.send(HTTPStatus.OK, "text/html; charset=utf-8", index_page(self.store, query))
            elif path == "/compare":
                runs = urllib.parse.parse_qs(url.query).get("run", [])
                self.send(HTTPStatus.OK, "text/html; charset=utf-8",
                          compare_page(self.store, runs))
            elif path == "/api/runs.json":
                self.send(HTTPStatus.OK, "application/json", runs_json(self.store))
            elif path.startswith("/render/"):
                run = self.run_dir(path.removeprefix("/render/"))
                if run is not None:
                    self.send(HTTPStatus.OK, "text/html; charset=utf-8", report_page(run))
            elif path.startswith("/zip/") and path.endswith(".zip"):
                self.zip(path.removeprefix("/zip/").removesuffix(".zip"))
            elif path.startswith("/runs/"):
                self.file(path.removeprefix("/runs/"))
            else:
                self.fail(HTTPStatus.NOT_FOUND, "no such page")
        except (BrokenPipeError, ConnectionResetError):
            pass
        except HarnessError as err:
            self.fail(HTTPStatus.INSUFFICIENT_STORAGE, str(err))

    def file(self, rel: str) -> None:
        p = self.store.resolve(rel)
        if p is None:
            self.fail(HTTPStatus.NOT_FOUND, f"{rel}: not in the store")
        elif p.is_dir():
            if not self.path.split("?")[0].endswith("/"):
                self.send_response(HTTPStatus.MOVED_PERMANENTLY)
                self.send_header("Location", self.path.split("?")[0] + "/")
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                self.send(HTTPStatus.OK, "text/html; charset=utf-8",
                          listing_page(self.store, rel, p))
        else:
            ctype = TEXT_TYPES.get(p.suffix) or mimetypes.guess_type(p.name)[0] or (
                "application/octet-stream")
            if ctype.startswith("text/") or ctype in ("application/json", "application/xml"):
                ctype += "; charset=utf-8"
            self.send(HTTPStatus.OK, ctype, p.read_bytes())

    def run_dir(self, rel: str) -> RunDir | None:
        """The run ``rel`` names in the store, else None (and a 404 sent)."""
        p = self.store.resolve(rel)
        if p is None or not p.is_dir() or not RunDir(p).is_run():
            self.fail(HTTPStatus.NOT_FOUND, f"{rel}: not a run in the store")
            return None
        return RunDir(p)

    def zip(self, rel: str) -> None:
        run = self.run_dir(rel)
        if run is None:
            return
        name = f"{run.path.parent.name}_{run.path.name}.zip"
        self.send(HTTPStatus.OK, "application/zip", zip_run(run.path),
                  {"Content-Disposition": f'attachment; filename="{name}"'})

    def send(self, status: HTTPStatus, ctype: str, body: bytes,
             headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def fail(self, status: HTTPStatus, message: str) -> None:
        self.send(status, "text/plain; charset=utf-8", f"{status.value} {message}\n".encode())

    def log_message(self, format: str, *args: Any) -> None:  # one short line a request
        if getattr(self.server, "quiet", False):
            return
        sys.stderr.write(f"{time.strftime('%H:%M:%S')} {self.address_string()} "
                         f"{format % args}\n")


def make_server(store_dir: Path, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                quiet: bool = False) -> ThreadingHTTPServer:
    """A server ready to ``serve_forever`` (port 0: any free port; see ``server_address``)."""
    handler = type("StoreHandler", (Handler,), {"store": Browser(Store(store_dir))})
    try:
        server = ThreadingHTTPServer((host, port), handler)
    except OSError as err:
        hint = " (pass --port N, or --port 0 for any free port)" if err.errno in (
            98, 48) else ""
        raise HarnessError(f"cannot listen on {host}:{port}: {err.strerror}{hint}") from None
    server.daemon_threads = True
    server.quiet = quiet  # type: ignore[attr-defined]
    return server


def serve(store_dir: Path, host: str, port: int, quiet: bool = False) -> int:
    if not store_dir.is_dir():
        raise HarnessError(f"no results store at {store_dir}: run `harness run` first, or pass "
                           "--store DIR")
    server = make_server(store_dir, host, port, quiet)
    bound_host, bound_port = server.server_address[:2]
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: serving {store_dir} on {host}, beyond this machine, with no "
              "authentication", file=sys.stderr)
    print(f"serving {os.path.abspath(store_dir)} at http://{bound_host}:{bound_port}/ "
          "(Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
