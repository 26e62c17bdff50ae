"""``harness zoo``: the zoo file's validation and plan (pure), the shipped matrix (14 libraries,
every fault of their store's menu, each cell a valid ``harness run``), and real rows on Redis
through the zoo path: the page's cells are the runs' own verdicts linking to their reports, a
second call runs nothing, a new seed runs only itself (CI: redis-py, none and pause; slow: each
library of the zoo extra)."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from harness.controller import needs
from harness.controller.registry import BUILTINS, Registry
from harness.controller.store import RunDir
from harness.core.errors import UsageError
from harness.presentation import zoo
from tests.harness_runs import harness
from workloads.external import builds

ZOO_LOCKS = [n for n, t in BUILTINS["locks"].items() if t.startswith("workloads.zoo.")]
NEEDS_REDIS = pytest.mark.skipif(shutil.which("redis-server") is None,
                                 reason="redis-server missing: run `bash setup.sh`")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "zoo.toml"
    path.write_text(text)
    return path


# the file and the plan --------------------------------------------------------------------------
def test_the_shipped_matrix_is_every_library_under_its_stores_menu() -> None:
    registry = Registry()
    found = zoo.load(zoo.ZOO_FILE, registry)
    assert len(found.libraries) >= 14
    assert set(ZOO_LOCKS) <= set(found.libraries)
    assert list(found.faults) == ["none", "pause", "partition", "clock-client", "delay",
                                  "store-failure"]
    cells = zoo.plan(found, registry, [1, 2, 3])
    tokens = [n for n in found.libraries if registry.lock_tokens(n)]
    assert found.fenced and "portalocker-redis-fenced" in tokens and "curator" in tokens
    assert len(cells) == (len(found.libraries) + len(tokens)) * len(found.faults)
    fenced = {c.library.name for c in cells if c.library.row.endswith(" (fenced)")}
    assert fenced == set(tokens)
    for cell in cells:
        assert cell.library.promise, f"{cell.library.name} declares no promise"
        if cell.library.unavailable:  # a library not installed here: said, never run
            assert cell.note == cell.library.unavailable and not cell.entries
            continue
        assert not cell.note, f"{cell.library.name} x {cell.fault}: {cell.note}"
        assert [e.options["seed"] for e in cell.entries] == [1, 2, 3]
        assert all(e.options["lock"] == cell.library.name for e in cell.entries)
        assert all(e.options["workload"] == cell.library.workload for e in cell.entries)
    failure = {c.library.store: c.entries[0].options["nemesis"] for c in cells
               if c.fault == "store-failure" and c.entries}
    assert failure.get("redis") == "kill" and failure.get("zookeeper") == "kill-majority"
    assert failure.get("etcd") == "kill-majority"


@pytest.mark.parametrize(("text", "message"), [
    ('libraries = ["nope"]\n[faults.none]\nnemesis = "none"\n', "unknown lock 'nope'"),
    ('libraries = ["redis-py"]\n[faults.x]\nnemesis = "pauze"\n', "unknown nemesis 'pauze'"),
    ('libraries = ["redis-py"]\n[faults.x]\ntime-limit = 5\n', "fault 'x' names no nemesis"),
    ('libraries = []\n[faults.none]\nnemesis = "none"\n', "libraries must be a list"),
    ('libraries = ["redis-py"]\n', "no [faults.NAME] tables"),
    ('librarie = ["redis-py"]\n', "unknown key 'librarie'"),
])
def test_a_bad_zoo_file_is_one_line_before_anything_runs(tmp_path: Path, text: str,
                                                         message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        zoo.load(write(tmp_path, text), Registry())


def test_a_fault_off_its_stores_menu_or_that_cannot_run_is_a_note(tmp_path: Path) -> None:
    path = write(tmp_path, """libraries = ["redis-py", "zookeeper"]
[faults.store-failure.per-store]
zookeeper = {nemesis = "kill-majority"}
[faults.leader]
nemesis = "partition-leader"
""")
    registry = Registry()
    cells = {(c.library.name, c.fault): c for c in zoo.plan(zoo.load(path, registry),
                                                             registry, [1])}
    assert cells["redis-py", "store-failure"].note == "not on the menu of redis"
    assert cells["zookeeper", "store-failure"].entries
    assert "partition-leader" in cells["redis-py", "leader"].note  # redis has no leader
    assert not cells["redis-py", "leader"].entries
    with pytest.raises(UsageError, match="--faults 'pause' is not in"):
        zoo.plan(zoo.load(path, registry), registry, [1], faults=["pause"])


def test_the_key_is_the_settings_given_and_the_versions_not_the_code(
        monkeypatch: pytest.MonkeyPatch) -> None:
    registry = Registry()
    found = zoo.load(zoo.ZOO_FILE, registry)
    [cell] = [c for c in zoo.plan(found, registry, zoo.seeds_of("2"), libraries=["redis-py"],
                                  faults=["pause"]) if c.chosen]
    assert (cell.library.name, cell.fault) == ("redis-py", "pause")
    a, b = cell.entries
    lib = zoo.library(registry, "redis-py")
    # what the spec resolves to (a new key, a new default) is not in the key
    monkeypatch.setattr(zoo.Entry, "spec", lambda *_: pytest.fail("the key resolved a spec"))
    assert zoo.key(a, lib) == zoo.key(a, lib) != zoo.key(b, lib)
    newer = zoo.Library(lib.name, lib.store, lib.version + ".1", lib.promise, None)
    assert zoo.key(a, newer) != zoo.key(a, lib)
    for limit, same in ((20.0, True), (7.0, False)):  # --time-limit 20 is the file's 20
        given = zoo.overrides_of(argparse.Namespace(time_limit=limit))
        [c] = next(x for x in zoo.plan(found, registry, [1], overrides=given)
                   if (x.library.row, x.fault) == ("redis-py", "pause")).entries
        assert (zoo.key(c, lib) == zoo.key(a, lib)) == same
    assert zoo.seeds_of("3") == [1, 2, 3] and zoo.seeds_of("2-3") == [2, 3]


def test_a_page_or_store_it_cannot_write_is_one_line_and_exit_3(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    proc = harness("zoo", "--store", str(tmp_path / "results"), "--libraries", "redis-py",
                   "--plan", "--markdown", str(tmp_path / "file" / "zoo.md"))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.startswith("harness: zoo stopped: Not a directory: "), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "results").exists()  # --plan wrote nothing in the store


# real rows --------------------------------------------------------------------------------------
def zoo_call(store: Path, *args: str) -> str:
    proc = harness("zoo", "--store", str(store), "--jobs", "2", *args, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    return out


def cells_of(store: Path) -> dict[str, dict[str, str]]:
    """The store's Markdown page's rows: library -> fault -> its cell."""
    return cells_of_page((store / "zoo" / "README.md").read_text())


def cells_of_page(text: str) -> dict[str, dict[str, str]]:
    page = text.split("## Promised and shown")[0]
    lines = [x for x in page.splitlines() if x.startswith("| ")]
    faults = [f.strip() for f in lines[0].strip("|").split("|")][1:]
    out = {}
    for line in lines[1:]:
        name, *cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == len(faults):
            out[name.rsplit(" (", 1)[0]] = dict(zip(faults, cells, strict=True))
    return out


def verdicts_match_results(store: Path, cell: str) -> list[str]:
    """Each of a cell's [VERDICT](report) links: the report exists and the verdict is its
    run's results.json; the verdicts."""
    links = re.findall(r"\[(\w+)\]\(([^)]+)\)", cell)
    assert links, cell
    for verdict, href in links:
        report = (store / "zoo" / href).resolve()
        assert report.is_file(), href
        valid = RunDir(report.parent).load_results()["valid"]
        assert verdict == {True: "VALID", False: "INVALID"}.get(valid, "UNKNOWN")
    return [v for v, _ in links]


@pytest.mark.servers
@NEEDS_REDIS
def test_a_row_on_redis_through_the_zoo_and_a_second_call_runs_nothing(tmp_path: Path) -> None:
    store = tmp_path / "results"
    args = ("--libraries", "redis-py", "--faults", "none,pause", "--time-limit", "8")
    out = zoo_call(store, *args, "--seeds", "1")
    assert "2 run(s) to make, 0 already made" in out
    assert "redis-py x pause seed 1: INVALID (processes " in out, out  # the zoo's words
    progress = re.search(r"redis-py x pause seed 1: INVALID \((.*)\)(?:  ~\d+ min left)?$", out,
                         re.M)
    assert progress, out
    row = cells_of(store)["redis-py"]
    assert verdicts_match_results(store, row["none"]) == ["VALID"]
    assert verdicts_match_results(store, row["pause"]) == ["INVALID"]  # its lease ran out
    page = (store / "zoo" / "README.md").read_text()
    sentence = re.search(r"\*\*redis-py × pause\*\*: (.*)", page)
    assert sentence and "while others acquired it" in sentence.group(1)
    assert re.match(r"processes \d+ and \d+: process \d+ held", sentence.group(1))  # both
    # the progress line says the sentence's first clause, whole, or cut at 160 with an ellipsis
    said, whole = progress.group(1), sentence.group(1).split("; ")[0]
    assert said == whole if len(whole) <= 160 else (
        said == whole[:160] + "…"), (said, whole)
    assert "pause (SIGSTOP)" in sentence.group(1)
    html = (store / "zoo" / "index.html").read_text()
    assert html.count('class="chip"') == 2 and "Promised and shown" in html
    [run] = [r for r in store.glob("redis_redis-py_mutex_none/*/test.json")]
    [lock] = [p for p in json.loads(run.read_text())["plugins"] if p["kind"] == "lock"]
    assert lock["library"]["name"] == "redis" and lock["library"]["version"]

    again = zoo_call(store, *args, "--seeds", "1")
    assert "0 run(s) to make, 2 already made" in again and "0 run(s) made, 2 reused" in again
    assert cells_of(store)["redis-py"] == row
    assert "redis-py: 2 due (all), 0 reused" in zoo_call(  # another setting: a run of its own
        store, *args[:-1], "9", "--plan")
    # a full disk as the page is written: one line, exit 3, and the run made is kept
    (store / "zoo" / "index.html").unlink()
    (store / "zoo" / "index.html").mkdir()
    more = harness("zoo", "--store", str(store), *args[:3], "none", *args[4:], "--seeds", "1-2",
                   timeout=300)
    assert more.returncode == 3 and "redis-py x none seed 2: VALID (" in more.stdout, more.stdout
    assert "1 run(s) to make, 1 already made" in more.stdout  # only seed 2 is new
    assert "expect" not in more.stdout  # the zoo's words: what happened, not a suite's
    [line] = more.stderr.strip().splitlines()
    assert line.startswith("harness: zoo stopped: Is a directory: "), more.stderr
    assert len(list((store / "zoo" / "cells").glob("*.json"))) == 3  # its record, as it ended
    (store / "zoo" / "index.html").rmdir()
    after = zoo_call(store, *args[:3], "none", *args[4:], "--seeds", "1-2")
    assert "0 run(s) to make, 2 already made" in after
    assert verdicts_match_results(store, cells_of(store)["redis-py"]["none"]) == ["VALID"] * 2

    registry = Registry()
    cells = zoo.plan(zoo.load(zoo.ZOO_FILE, registry), registry, [1], libraries=["redis-py"],
                     faults=["none", "pause"], overrides={"time-limit": 8})
    chosen = [c for c in cells if c.chosen]
    assert not zoo.look(chosen, store)
    assert all((store / "zoo" / "cells" / f"{zoo.key(e, c.library)}.json").is_file()
               for c in chosen for e in c.entries)  # each run's record, by its key
    for c in chosen:  # another version of the library: its cells are due
        c.library, c.outcomes = replace(c.library, version="redis 0.0.1"), []
    assert len(zoo.look(chosen, store)) == 2
    # no records (made before they were kept): each run is found by its own test.json, and a
    # run whose own spec is not the entry's (another number of clients) is not its cell's
    shutil.rmtree(store / "zoo" / "cells")
    [test] = [t for t in store.glob("redis_redis-py_mutex_none/*/test.json")
              if json.loads(t.read_text())["spec"]["seed"] == 1]
    lib = zoo.library(registry, "redis-py")
    found = {c.fault: zoo.made_before(store, c.entries[0], lib) for c in chosen}
    assert found["none"] and found["none"].run_dir.path == test.parent
    assert found["pause"] and found["pause"].verdict == "invalid"
    data = json.loads(test.read_text())
    older = {k: v for k, v in data["spec"].items() if k != "release_frees_others"}
    test.write_text(json.dumps({**data, "spec": older}))  # recorded before the key was added
    assert zoo.made_before(store, found["none"].entry, lib), "a key added since is no setting"
    test.write_text(json.dumps({**data, "spec": {**data["spec"], "clients": 3}}))
    assert zoo.made_before(store, found["none"].entry, lib) is None
    test.write_text(json.dumps({**data, "spec": {**data["spec"], "kept": 1}}))
    assert zoo.made_before(store, found["none"].entry, lib) is None, "a key the entry lacks"


def test_an_incidents_clients_are_named_first() -> None:
    assert zoo.who([4, 1, 4]) == "processes 1 and 4: "
    assert zoo.who([3, 0, 2]) == "processes 0, 2 and 3: "
    assert zoo.who([2]) == "process 2: " and zoo.who([]) == ""


def runnable(registry: Registry, name: str) -> type:
    """The zoo library's lock class; a skip naming what lacks: its client's build (a failure
    under --harness-require-clients), its Python library, its store's server."""
    cls = registry.load("locks", name)
    build = getattr(cls, "build", None)
    if build is not None and builds.built(build) is None:
        pytest.skip(f"client {build} is not built: {builds.not_built_reason(build)}")
    if cls.unavailable() is not None:
        pytest.skip(f"{cls.library} is not installed: pip install 'lock-harness[zoo]'")
    db = registry.load("dbs", cls.dbs[0])
    missing = list(needs.absent(db.debian_packages).values())
    probe = getattr(db, "unavailable", None)
    if missing or (callable(probe) and probe()):
        pytest.skip(f"{cls.dbs[0]}'s server is missing ({missing or probe()}): run setup.sh")
    return cls


@pytest.mark.servers
@pytest.mark.slow
@pytest.mark.parametrize("name", ZOO_LOCKS)
def test_each_library_of_the_zoo_without_faults_and_under_a_pause(tmp_path: Path,
                                                                   name: str) -> None:
    """Its baseline without faults and a pause of its holder, as its adapter uses it, on its
    store; where the library's own algorithm lets two holders in, the test says which and
    why."""
    cls = runnable(Registry(), name)
    store = tmp_path / "results"
    zoo_call(store, "--libraries", name, "--faults", "none,pause", "--time-limit", "10")
    rows = cells_of(store)
    # expire=None, documented as "will not expire", sends EXPIRE key -1: the key is deleted
    # at once, and every client holds the lock
    assert verdicts_match_results(store, rows[name]["none"]) == (
        ["INVALID"] if name == "sherlock-no-expire" else ["VALID"])
    assert len(verdicts_match_results(store, rows[name]["pause"])) == 1
    if cls.tokens:  # its row under --workload fenced: the tokens it gives keep the resource
        assert verdicts_match_results(store, rows[f"{name} (fenced)"]["none"]) == ["VALID"]
        assert len(verdicts_match_results(store, rows[f"{name} (fenced)"]["pause"])) == 1


def test_list_names_the_library_each_lock_wraps_and_its_version_here() -> None:
    import redis

    from harness.presentation.list_roles import lock_tags

    registry = Registry()
    assert f"redis {redis.__version__}" in lock_tags(registry, "redis-py")
    for name in ZOO_LOCKS:
        cls = registry.load("locks", name)
        [tag] = [t for t in lock_tags(registry, name) if t.startswith(f"{cls.library} ")]
        if cls.library.startswith("npm:"):  # the version its client's package.json pins
            assert re.fullmatch(r"\S+ \d+\.\d+\.\d+", tag), tag
        else:
            assert tag.endswith("NOT INSTALLED") == (cls.unavailable() is not None)


# what the zoo needs ------------------------------------------------------------------------------
def test_setup_zoo_sets_up_every_store_fault_client_and_library_of_the_zoo(
        tmp_path: Path) -> None:
    registry = Registry()
    wanted = zoo.needs(zoo.load(zoo.ZOO_FILE, registry), registry)
    assert {"redis", "zookeeper", "etcd", "postgres", "dynamodb"} <= set(wanted["dbs"])
    assert {"pause", "partition", "clock-client", "delay", "kill", "kill-majority"} == set(
        wanted["faults"])
    assert wanted["clients"] == ["curator", "go-etcd-mutex", "node-redlock"]
    assert {r.split("==")[0] for r in wanted["python"]} == {
        registry.load("locks", n).library for n in ZOO_LOCKS
        if not registry.load("locks", n).library.startswith("npm:")} | {
        "etcd3gw"}  # the client tooz's etcd3gw driver imports (tooz-etcd3gw)
    proc = harness("setup", "--zoo", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    for client in wanted["clients"]:
        assert any(x.endswith(f"-m workloads.external.builds {client}") for x in lines), lines
    [pip] = [x for x in lines if " -m pip install " in x]
    assert all(r in pip.split() for r in wanted["python"]), pip
    assert any("dynalite@" in x for x in lines), lines  # the dynamodb store's own server
    bad = harness("setup", "--zoo", str(tmp_path / "none.toml"), "--dry-run")
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_an_npm_library_whose_client_is_not_built_is_said_and_never_run(tmp_path: Path) -> None:
    env = {**os.environ, "LOCK_HARNESS_CLIENT_CACHE": str(tmp_path / "empty-cache")}
    proc = harness("zoo", "--store", str(tmp_path / "results"), "--libraries", "etcd3-lock",
                   "--faults", "none", "--dry-run", env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "etcd3-lock x none: not run: not built; build it with `python -m " \
        "workloads.external.builds node-redlock`" in out, out


def test_the_published_page_is_the_zoo_files_matrix_in_the_harness_words() -> None:
    """docs/zoo.md (``harness zoo --seeds 3 --markdown docs/zoo.md``): the command and date the
    harness wrote, a row for each row of the zoo file, a column for each fault, and in each
    cell only verdicts or 'not run'; a library added to the zoo file without regenerating it
    fails here."""
    page = (zoo.ZOO_FILE.parents[1] / "docs" / "zoo.md").read_text()
    assert re.search(r"^`harness zoo .*--markdown docs/zoo.md`, \d{4}-\d\d-\d\d \d\d:\d\d UTC",
                     page.splitlines()[2])
    registry = Registry()
    cells = zoo.plan(zoo.load(zoo.ZOO_FILE, registry), registry, [1])
    assert list(cells_of_page(page)) == list(dict.fromkeys(c.library.row for c in cells))
    for row in cells_of_page(page).values():
        assert list(row) == list(dict.fromkeys(c.fault for c in cells))
        assert all(re.fullmatch(r"not run|((VALID|INVALID|UNKNOWN) ?)+", v) for v in row.values())
