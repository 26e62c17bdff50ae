"""``harness zoo``: lock libraries under one menu of faults per store, as a safety matrix.

The zoo file (default ``suites/zoo.toml``) names the libraries (registered locks) and the
faults, each fault ``harness run``'s options (``per-store``: a store's own). A cell is a
library under a fault, run under each of ``--seeds``: suite entries, run by the suite's own
runner (:func:`harness.presentation.suite.run_suite`, ``--jobs`` at once). A library's store is
the first DB its lock class declares. Every entry expects ``valid``: what a lock promises.

Resumable: a run is keyed (:func:`key`) by the settings the zoo file and the command line give
it (seed in, store out), the version of the library its lock wraps and the harness's package
version, not by the harness's code: a new spec key or default re-keys nothing (a run records no
version of its store's server, so none is in the key). As each run finishes,
``<store>/zoo/cells/<key>.json`` names it; a later call judges that run again from its own
results.json instead of running it. A run without a record (made before records were kept, or
when the disk filled) is found by its own test.json: the entry's whole spec, complete, with
the same versions. Only runs that reached a verdict are kept. ``--plan`` says, row by row, what
is due and what is reused, running nothing.

The page, ``<store>/zoo/index.html``, and its Markdown twin ``README.md`` (``--markdown
PATH``: also there, e.g. ``docs/zoo.md``, with the command and the date): a row per library
(its version and store; a lock that gives tokens once more under ``--workload fenced``, where
the file says ``fenced = true``), a column per fault, each cell its verdicts over the seeds
(each linking to its run's report), coloured by outcome, and the first incident's sentence
(the report's own, :func:`harness.presentation.report.incidents.incidents`); then what each
library's README promises (its lock class's ``promise``) against what the runs showed. Every
verdict is read from its run's results.json.
"""

from __future__ import annotations

import hashlib
import html
import importlib.metadata as md
import json
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.controller.registry import DISTRIBUTION, Registry, library_version, own_version
from harness.controller.store import ZOO, RunDir, Store
from harness.core.atomic import write_json, write_text
from harness.core.errors import HarnessError, UsageError
from harness.core.shipped import shipped
from harness.core.text import line
from harness.core.tomlfile import read_toml
from harness.presentation.runs import _schedule_of
from harness.presentation.suite import (
    RUN_KEYS,
    Entry,
    Outcome,
    Suite,
    judge,
    parse_seeds,
    run_suite,
    validate,
)

ZOO_FILE = shipped("suites") / "zoo.toml"  # the checkout's, or the installed package's
PER_STORE = "per-store"
KEPT = ("valid", "invalid", "unknown")  # verdicts a later call reuses
CELLS = "cells"  # <store>/zoo/cells/<key>.json: the run a key made
COLOURS = {"valid": "#1a7f37", "invalid": "#cf222e", "unknown": "#9a6700", "error": "#6e7781",
           "none": "#d0d7de"}
e = html.escape


@dataclass
class Zoo:
    name: str
    path: Path
    libraries: list[str]
    faults: dict[str, dict[str, Any]]  # fault -> options, or {per-store: {store: options}}
    defaults: dict[str, Any]
    fenced: bool = False  # a second row with --workload fenced for a lock that gives tokens

    def options(self, fault: str, store: str) -> dict[str, Any] | None:
        """``harness run``'s options of ``fault`` on ``store`` (None: not on its menu)."""
        table = self.faults[fault]
        if PER_STORE in table:
            return table[PER_STORE].get(store)
        return table


@dataclass
class Library:
    name: str
    store: str
    version: str  # "pottery 3.0.1", or the harness's for a lock of its own
    promise: str
    unavailable: str | None
    tokens: bool = False
    workload: str = "mutex"

    @property
    def row(self) -> str:
        return self.name if self.workload == "mutex" else f"{self.name} ({self.workload})"


@dataclass
class Cell:
    library: Library
    fault: str
    entries: list[Entry] = field(default_factory=list)
    note: str = ""  # why it does not run, in one line
    outcomes: list[Outcome] = field(default_factory=list)
    chosen: bool = True  # run by this call (else only its runs already made are shown)

    @property
    def outcome(self) -> str:
        """invalid over unknown over error over valid; none when nothing ran."""
        verdicts = {o.verdict for o in self.outcomes}
        for v in ("invalid", "unknown", "error", "valid"):
            if v in verdicts:
                return v
        return "none"

    def sentence(self) -> str:
        """The first incident of its first invalid run, else the first line that says why."""
        for o in self.outcomes:
            if o.verdict == "invalid":
                return incident_sentence(o)
        for o in self.outcomes:
            if o.verdict != "valid" and o.first_violation:
                return o.first_violation.splitlines()[0][:300]
        return self.note


def load(path: Path, registry: Registry) -> Zoo:
    data = read_toml(path, "zoo")
    unknown = sorted(set(data) - {"name", "libraries", "fenced", "defaults", "faults"})
    if unknown:
        raise UsageError(f"zoo {path}: unknown key {unknown[0]!r} (use name, libraries, "
                         "fenced, [defaults], [faults.NAME])")
    libraries, faults = data.get("libraries"), data.get("faults")
    if not isinstance(libraries, list) or not libraries or not all(
            isinstance(x, str) for x in libraries):
        raise UsageError(f"zoo {path}: libraries must be a list of lock names")
    if not isinstance(faults, dict) or not faults:
        raise UsageError(f"zoo {path}: no [faults.NAME] tables")
    for name in libraries:
        registry.entry("locks", name)  # an unknown name: one line, before anything runs
    for fault, table in faults.items():
        menus = table[PER_STORE].values() if PER_STORE in table else [table]
        for options in menus:
            nemesis = options.get("nemesis") if isinstance(options, dict) else None
            if not isinstance(nemesis, str):
                raise UsageError(f"zoo {path}: fault {fault!r} names no nemesis")
            for n in nemesis.split(","):
                if n != "none":  # no fault: harness run's own word, not a nemesis
                    registry.entry("nemeses", n)
    return Zoo(str(data.get("name") or path.stem), path, libraries, faults,
               dict(data.get("defaults") or {}), data.get("fenced") is True)


def library(registry: Registry, name: str) -> Library:
    cls = registry.load("locks", name)
    wraps = str(getattr(cls, "library", "") or "")
    version = (f"{wraps} {library_version(wraps) or 'not installed'}" if wraps
               else f"lock-harness {own_version()}")
    dbs = tuple(getattr(cls, "dbs", ()) or ("redis",))
    return Library(name, dbs[0], version, str(getattr(cls, "promise", "") or ""),
                   registry.lock_unavailable(name), bool(getattr(cls, "tokens", False)))


def needs(zoo: Zoo, registry: Registry) -> dict[str, list[str]]:
    """What ``harness setup --zoo`` sets up: the libraries' stores (``dbs``), their menus'
    fault families (``faults``), the external clients they run (``clients``) and the
    ``[zoo]`` extra's pinned packages (``python``)."""
    libs = [library(registry, name) for name in zoo.libraries]
    stores = list(dict.fromkeys(lib.store for lib in libs))
    menus = [o for f in zoo.faults for s in stores if (o := zoo.options(f, s)) is not None]
    nemeses = {n for o in menus for n in str(o["nemesis"]).split(",") if n != "none"}
    builds = {getattr(registry.load("locks", lib.name), "build", None) for lib in libs}
    try:
        extra = [r.split(";")[0].strip() for r in md.requires(DISTRIBUTION) or []
                 if 'extra == "zoo"' in r]
    except md.PackageNotFoundError:  # a checkout that was never installed
        extra = []
    return {"dbs": stores, "clients": sorted(b for b in builds if isinstance(b, str)),
            "faults": sorted(str(getattr(registry.load("nemeses", n), "name", n))
                             for n in nemeses), "python": extra}


def plan(zoo: Zoo, registry: Registry, seeds: list[int], *, libraries: list[str] | None = None,
         faults: list[str] | None = None, overrides: dict[str, Any] | None = None
         ) -> list[Cell]:
    """The cells of the whole matrix, each with an entry a seed, or a note saying why it cannot
    run here; those of ``libraries`` and ``faults`` (default: all) are ``chosen``. A lock that
    gives tokens has a second row with ``--workload fenced`` when the zoo file says
    ``fenced = true``."""
    for name, known, what in ((libraries, zoo.libraries, "libraries"),
                              (faults, list(zoo.faults), "faults")):
        for x in name or []:
            if x not in known:
                raise UsageError(f"--{what} {x!r} is not in {zoo.path}: use "
                                 + ", ".join(known))
    cells = []
    found = [library(registry, name) for name in zoo.libraries]
    for lib in [r for x in found for r in [x] + ([replace(x, workload="fenced")]
                                                 if x.tokens and zoo.fenced else [])]:
        for fault in zoo.faults:
            cell = Cell(lib, fault, chosen=lib.name in (libraries or [lib.name])
                        and fault in (faults or [fault]))
            cells.append(cell)
            options = zoo.options(fault, lib.store)
            if options is None:
                cell.note = f"not on the menu of {lib.store}"
                continue
            if lib.unavailable:
                cell.note = lib.unavailable
                continue
            base = {**zoo.defaults, **options, **(overrides or {}), "db": lib.store,
                    "lock": lib.name, "workload": lib.workload}
            try:
                for seed in seeds:
                    validate({**base, "seed": seed}, f"{lib.row} x {fault}")
                    cell.entries.append(Entry(0, {**base, "seed": seed}, "valid", 0))
            except UsageError as err:
                cell.entries, cell.note = [], str(err)
    return cells


def seeds_of(text: str) -> list[int]:
    """``--seeds``: N (N seeds a cell, 1 to N), or seeds and ranges of seeds (``1-3``, ``4,7``)."""
    return parse_seeds(f"1-{text.strip()}" if text.strip().isdigit() and int(text) else text)


def key(entry: Entry, lib: Library) -> str:
    """What a run is: the settings the zoo file and the command line give it (the seed in, the
    store out), the version of the library its lock wraps and the harness's package version;
    not the harness's code, so a new spec key or default re-keys nothing."""
    canonical = json.dumps({"settings": entry.options, "library": lib.version,
                            "harness": own_version()}, sort_keys=True, separators=(",", ":"),
                           default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def made_before(store: Path, entry: Entry, lib: Library) -> Outcome | None:
    """The run ``entry`` made before, judged again from its results.json: the one its cell
    record names (by :func:`key`), else the newest run of the store whose own test.json is
    ``entry``'s spec, complete, with this library's and harness's versions (a run whose record
    was never written: made before records were kept, or when the disk filled). None: no run
    with a verdict."""
    try:
        record = json.loads((store / ZOO / CELLS / f"{key(entry, lib)}.json").read_text())
        found, code = RunDir(store / record["run"]), record.get("exit_code")
    except (OSError, ValueError, KeyError, TypeError):
        found, code = None, None
    if found is None or not found.is_run():
        spec = entry.spec(store)
        runs, want = sorted((store / spec.test_name).glob("*/test.json"), reverse=True), (
            spec.to_dict())
        found = next((r for t in runs if same_run(r := RunDir(t.parent), want, lib)), None)
        if found is None:
            return None
        try:
            code = {True: 0, False: 1}.get(found.load_results().get("valid"), 2)  # its exit
        except HarnessError:
            return None
    verdict, first = judge(code, found)
    return Outcome(entry, verdict, code, 0.0, found, "", first) if verdict in KEPT else None


def same_run(run: RunDir, spec: dict[str, Any], lib: Library) -> bool:
    """Whether ``run``'s test.json says it is a complete run of ``spec`` (but its store) with
    ``lib``'s version and this harness's: every key it recorded as ``spec`` has it (a key added
    to the spec since, a lock's new declaration, was not recorded and is not compared)."""
    try:
        test = run.load_test()
        plugins = [p for p in test.get("plugins") or [] if isinstance(p, dict)]
        lock = next(p for p in plugins if p.get("kind") == "lock")
        wraps = lock.get("library")
        version = (f"{wraps['name']} {wraps['version'] or 'not installed'}" if wraps
                   else f"{lock['distribution']} {lock['version']}")
    except (HarnessError, StopIteration, KeyError, TypeError):
        return False
    made = {**test["spec"], "store": None}  # a key the harness added since is no setting of
    # that run (the harness's version stands for its code): the keys the run recorded decide
    return (test.get("status") == "complete" and version == lib.version
            and made == {k: v for k, v in {**spec, "store": None}.items() if k in made}
            and {p.get("version") for p in plugins if p.get("distribution") == DISTRIBUTION}
            == {own_version()})


def look(cells: list[Cell], store: Path) -> list[tuple[Cell, Entry]]:
    """Every cell's runs made before into its outcomes (the page shows the whole matrix as far
    as it has run); the chosen cells' entries left to run. Reads only."""
    todo = []
    for cell in cells:
        for entry in cell.entries:
            found = made_before(store, entry, cell.library)
            if found is not None:
                cell.outcomes.append(found)
            elif cell.chosen:
                todo.append((cell, entry))
    return todo


def plan_lines(cells: list[Cell], todo: list[tuple[Cell, Entry]]) -> list[str]:
    """``--plan``: a line a chosen row, its runs due (which, unless all) and reused."""
    lines = []
    for row in by_library([c for c in cells if c.chosen]):
        due = [(c.fault, str(e.options["seed"])) for c, e in todo if c in row]
        seeds = {f: [s for f2, s in due if f2 == f] for f, _ in due}
        which = ("all" if len(due) == sum(len(c.entries) for c in row)
                 else "; ".join(f"{f} seed {','.join(s)}" for f, s in seeds.items()))
        lines.append(f"  {row[0].library.row}: {len(due)} due{f' ({which})' if due else ''}, "
                     f"{sum(len(c.outcomes) for c in row)} reused")
    return lines


def run_zoo(zoo: Zoo, cells: list[Cell], store: Path, todo: list[tuple[Cell, Entry]], *,
            jobs: int = 1, echo: Any = print) -> None:
    """Run ``todo``: each run's cell record is written as it finishes (what a stopped call made
    is found by the next), its line in the zoo's words."""
    out = Store(store).zoo_dir()
    (out / CELLS).mkdir(exist_ok=True)
    cell_of = {}
    for number, (cell, entry) in enumerate(todo, 1):
        entry.number, cell_of[number] = number, cell

    def said(o: Outcome) -> str:
        cell = cell_of[o.entry.number]
        if o.verdict in KEPT and o.run_dir is not None:
            write_json(out / CELLS / f"{key(o.entry, cell.library)}.json", {
                "run": Store(store).relative(o.run_dir), "exit_code": o.exit_code,
                "seconds": round(o.seconds, 3), "settings": o.entry.options})
        why = (incident_sentence(o).split("; ")[0] if o.verdict == "invalid"
               else o.first_violation.splitlines()[0] if o.first_violation
               else f"{o.seconds:.0f} s")
        return (f"{cell.library.row} x {cell.fault} seed {o.entry.options['seed']}: "
                f"{o.verdict.upper()} ({line(why, 160)})")

    outcomes = run_suite(Suite(zoo.name, zoo.path, [e for _, e in todo]), store, out,
                         jobs=jobs, echo=echo, said=said)
    for (cell, _), o in zip(todo, outcomes, strict=True):
        cell.outcomes.append(o)
    for cell in cells:
        cell.outcomes.sort(key=lambda o: o.entry.options.get("seed", 0))


def incident_sentence(o: Outcome) -> str:
    """The clients of the report's first incident, then the incident in its own words (the
    fault is in them); else the first violation's words."""
    from harness.presentation.report.incidents import frees_of, incidents

    run = o.run_dir
    if run is not None:
        try:
            test = run.load_test()
            found = incidents(run.load_history(), run.load_results(), _schedule_of(test),
                              frees=frees_of(test.get("spec")))
        except (HarnessError, OSError, ValueError):
            found = []
        if found:
            return who(found[0].violations[0].procs if found[0].violations else []) + (
                found[0].title())
    return o.first_violation.splitlines()[0][:300] if o.first_violation else ""


def who(procs: list[int]) -> str:
    """``processes 0 and 3: ``, the clients of an incident's first violation (none: "")."""
    ps = sorted(set(procs))
    if len(ps) < 2:
        return f"process {ps[0]}: " if ps else ""
    return f"processes {', '.join(map(str, ps[:-1]))} and {ps[-1]}: "


# the page ---------------------------------------------------------------------------------------
def report_href(o: Outcome, out: Path | None) -> str | None:
    """The link from a page in ``out`` to a run's report (None: a page outside the store)."""
    return os.path.relpath(o.report, out) if o.report and out is not None else None


def showed(cells: list[Cell]) -> str:
    """What a library's runs showed, in one line."""
    ran = [c for c in cells if c.outcomes]
    broken = [c for c in ran if c.outcome == "invalid"]
    if broken:
        return "; ".join(f"{c.fault}: {c.sentence()}" for c in broken)
    if not ran:
        return "nothing ran"
    unsure = [c.fault for c in ran if c.outcome != "valid"]
    kept = [c.fault for c in ran if c.outcome == "valid"]
    return (f"valid under {', '.join(kept) or 'no fault'}"
            + (f"; not decided under {', '.join(unsure)}" if unsure else ""))


def page_html(zoo: Zoo, cells: list[Cell], out: Path, command: str) -> str:
    faults = list(dict.fromkeys(c.fault for c in cells))
    rows, promises = [], []
    for lib_cells in by_library(cells):
        lib = lib_cells[0].library
        tds = []
        for c in lib_cells:
            chips = " ".join(
                f'<a class="chip" style="background:{COLOURS.get(o.verdict, COLOURS["error"])}" '
                f'href="{e(href)}">{e(o.verdict.upper())}</a>' if (href := report_href(o, out))
                else f'<span class="chip" style="background:{COLOURS["error"]}">'
                     f"{e(o.verdict.upper())}</span>" for o in c.outcomes) or "not run"
            tds.append(f'<td style="border-left:6px solid {COLOURS[c.outcome]}">{chips}'
                       f'<div class="muted">{e(c.sentence())}</div></td>')
        rows.append(f"<tr><th>{e(lib.row)}<div class=\"muted\">{e(lib.version)} · "
                    f"{e(lib.store)}</div></th>{''.join(tds)}</tr>")
        promises.append(f"<tr><th>{e(lib.row)}</th><td>{e(lib.promise or '-')}</td>"
                        f"<td>{e(showed(lib_cells))}</td></tr>")
    head = "".join(f"<th>{e(f)}</th>" for f in faults)
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>lock zoo: {e(zoo.name)}</title><style>body{{font:14px/1.45 system-ui,sans-serif;
margin:1em 1.5em;color:#1f2328}} table{{border-collapse:collapse}} td,th{{padding:.4em .6em;
text-align:left;vertical-align:top;border-bottom:1px solid #d0d7de;max-width:22em}}
.chip{{border-radius:2em;padding:.05em .6em;color:#fff;font-weight:600;font-size:.85em;
text-decoration:none;margin-right:.2em}} .muted{{color:#656d76;font-size:.9em;font-weight:400}}
</style></head><body><h1>Lock zoo: {e(zoo.name)}</h1>
<p class="muted">{e(command)} · {e(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))} ·
each chip a seed's verdict from its run's results.json, linking to its report; each cell the
first incident of its first invalid run, in the report's words</p>
<table><thead><tr><th>library</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>
<h2>Promised and shown</h2><table><thead><tr><th>library</th><th>its README promises</th>
<th>the runs showed</th></tr></thead><tbody>{''.join(promises)}</tbody></table></body></html>
"""


def page_md(zoo: Zoo, cells: list[Cell], out: Path | None, command: str) -> str:
    """The Markdown twin; ``out``: the page's directory in the store (its links' base), None
    for a page elsewhere (``--markdown docs/zoo.md``: no links, the runs stay in the store)."""
    faults = list(dict.fromkeys(c.fault for c in cells))
    lines = [f"# Lock zoo: {zoo.name}", "", f"`{command}`, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Each seed's verdict is "
             "its run's results.json" + (", linking to its report." if out else
                                         " (the runs and their reports: in that store).")
             + " A cell 'not run' has no run with a verdict yet.", "",
             "| library | " + " | ".join(faults) + " |",
             "|---|" + "---|" * len(faults)]
    notes, promises = [], []
    for lib_cells in by_library(cells):
        lib = lib_cells[0].library
        tds = []
        for c in lib_cells:
            links = " ".join(f"[{o.verdict.upper()}]({href})" if (href := report_href(o, out))
                             else o.verdict.upper() for o in c.outcomes)
            tds.append(links or "not run")
        said = {c.fault: c.sentence() for c in lib_cells if c.sentence()}
        if len(said) == len(lib_cells) and len(set(said.values())) == 1:  # one reason: once
            notes.append(f"- **{lib.row}**: {next(iter(said.values()))}")
        else:
            notes += [f"- **{lib.row} × {fault}**: {text}" for fault, text in said.items()]
        lines.append(f"| {lib.row} ({lib.version}, {lib.store}) | " + " | ".join(tds) + " |")
        promises.append(f"| {lib.row} | {lib.promise or '-'} | {showed(lib_cells)} |")
    return "\n".join([*lines, "", *notes, "", "## Promised and shown", "",
                      "| library | its README promises | the runs showed |", "|---|---|---|",
                      *promises, ""])


def by_library(cells: list[Cell]) -> list[list[Cell]]:
    rows: dict[str, list[Cell]] = {}
    for c in cells:
        rows.setdefault(c.library.row, []).append(c)
    return list(rows.values())


def write_pages(zoo: Zoo, cells: list[Cell], store: Path, command: str) -> Path:
    out = Store(store).zoo_dir()
    write_text(out / "index.html", page_html(zoo, cells, out, command))
    write_text(out / "README.md", page_md(zoo, cells, out, command))
    return out / "index.html"


def overrides_of(args: Any) -> dict[str, Any]:
    """The run options given on the command line (``--time-limit``), over the zoo file's
    (``--time-limit 20`` is the file's ``time-limit = 20``: the same key)."""
    return {k: int(v) if isinstance(v, float) and v.is_integer() else v for k in RUN_KEYS
            if (v := getattr(args, k.replace("-", "_"), None)) is not None}

