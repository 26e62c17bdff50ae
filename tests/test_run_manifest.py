"""A run directory carries its own manifest (issue 40, item 2): ``harness check RUN`` holds the
directory to it before judging and refuses one that does not match, naming the file; a run
without one says why it is not verified."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.controller.store import RunDir
from harness.core.errors import HarnessError
from tests.harness_runs import harness, run

OPS = [{"time": t, "process": 1, "type": kind, "f": "acquire", "value": None}
       for t, kind in ((1, "invoke"), (2, "ok"))]


def sealed(tmp_path: Path, status: str = "complete") -> RunDir:
    """A run directory as a finished run leaves it: journals, history.jsonl, test.json marked
    as writing a manifest, and the manifest."""
    run_dir = RunDir(tmp_path / "run")
    run_dir.journals.mkdir(parents=True)
    for name, lines in (("c1", 2), ("c2", 3), ("final", 4)):
        run_dir.journal(name if name == "final" else int(name[1:])).write_text(
            "".join(json.dumps({**OPS[i % 2], "n": i}) + "\n" for i in range(lines)))
    run_dir.history.write_text("".join(json.dumps(op) + "\n" for op in OPS * 4))
    run_dir.begin({"spec": {}, "status": status})
    run_dir.seal()
    return run_dir


def cut(path: Path, size: int) -> None:
    with path.open("r+b") as f:
        f.truncate(size)


def flip(path: Path) -> None:  # one byte changed, the size kept
    data = bytearray(path.read_bytes())
    data[5] ^= 1
    path.write_bytes(bytes(data))


def test_a_finished_run_verifies_and_its_manifest_counts_each_journals_ops(
        tmp_path: Path) -> None:
    run_dir = sealed(tmp_path)
    assert run_dir.verify(run_dir.load_test()) is None
    files = json.loads(run_dir.manifest.read_text())["files"]
    assert {k: v["ops"] for k, v in files.items()} == {
        "history.jsonl": 8, "journals/c1.jsonl": 2, "journals/c2.jsonl": 3,
        "journals/final.jsonl": 4}
    assert files["history.jsonl"]["bytes"] == run_dir.history.stat().st_size


DAMAGE: list[tuple[str, Callable[[RunDir], None], str, str]] = [
    ("history-removed, journal cut", lambda r: (r.history.unlink(), cut(r.journal(1), 7)),
     "history.jsonl", "is missing"),
    ("history cut at a line end", lambda r: r.history.write_text(
        "".join(r.history.read_text().splitlines(keepends=True)[:5])), "history.jsonl",
     "5 ops; it records"),
    ("history one byte changed", lambda r: flip(r.history), "history.jsonl", "another SHA-256"),
    ("journal removed", lambda r: r.journal(2).unlink(), "journals/c2.jsonl", "is missing"),
    ("final removed", lambda r: r.journal("final").unlink(), "journals/final.jsonl",
     "is missing"),
    ("journal added", lambda r: r.journal(9).write_text("{}\n"), "journals/c9.jsonl",
     "not in the run's manifest"),
    ("manifest not JSON", lambda r: r.manifest.write_text("{"), "manifest.json",
     "not valid JSON"),
    ("manifest of nothing", lambda r: r.manifest.write_text('{"files": {}}'), "manifest.json",
     "not a run manifest"),
    ("manifest removed", lambda r: r.manifest.unlink(), "manifest.json", "is missing"),
    ("manifest names a file outside", lambda r: edit_manifest(r, lambda f: f.update(
        {"../test.json": f["history.jsonl"]})), "manifest.json", "not a run manifest"),
    ("manifest's ops not a number", lambda r: edit_manifest(r, lambda f: f[
        "journals/c1.jsonl"].update(ops="2")), "manifest.json", "not a run manifest"),
]


def edit_manifest(run_dir: RunDir, edit: Callable[[dict[str, Any]], object]) -> None:
    data = json.loads(run_dir.manifest.read_text())
    edit(data["files"])
    run_dir.manifest.write_text(json.dumps(data))


@pytest.mark.parametrize(("damage", "name", "says"), [d[1:] for d in DAMAGE],
                         ids=[d[0] for d in DAMAGE])
def test_a_damaged_directory_is_refused_naming_the_file(
        tmp_path: Path, damage: Callable[[RunDir], None], name: str, says: str) -> None:
    run_dir = sealed(tmp_path)
    damage(run_dir)
    with pytest.raises(HarnessError) as err:
        run_dir.verify(run_dir.load_test())
    text = str(err.value)
    assert f"{run_dir.path / name} " in text and says in text and "\n" not in text
    assert err.value.exit_code == 3


def test_without_a_manifest_a_run_says_why_it_is_not_verified(tmp_path: Path) -> None:
    killed = sealed(tmp_path, status="starting")
    killed.manifest.unlink()
    assert killed.verify(killed.load_test()) == (
        "no manifest: the run did not finish (status starting), its files are not verified")
    old = killed.load_test()
    del old["manifest"]
    old["status"] = "complete"
    assert killed.verify(old) == "no manifest: written before manifests, not verified"



def files_of(run_dir: Path) -> dict[str, bytes]:
    return {p.relative_to(run_dir).as_posix(): p.read_bytes() for p in sorted(run_dir.rglob("*"))
            if p.is_file()}


def test_a_recheck_leaves_the_run_as_it_was_and_says_where_it_wrote(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`harness check RUN` writes its results.json and report.html in a new
    RUN/rechecks/<time>/ and names it; `--write` writes them over the run's own."""
    from harness.cli import main

    run_dir = RunDir(tmp_path / "run")  # as a killed run left it: its journals only
    run_dir.journals.mkdir(parents=True)
    for p in (1, 2):  # two grants of one lock at once
        run_dir.journal(p).write_text("".join(json.dumps({**op, "process": p}) + "\n"
                                              for op in OPS))
    run_dir.begin({"spec": {}, "status": "starting"})
    run_dir.save_results({"valid": True, "checks": {}})
    before = files_of(run_dir.path)
    written = []
    for _ in range(2):  # two in the same second: two directories
        assert main(["check", str(run_dir.path)]) == 1
        last = capsys.readouterr().out.splitlines()[-1]
        assert last.startswith("wrote results.json and report.html beside the run, which is "
                               f"unchanged: {run_dir.path / 'rechecks'}/"), last
        written.append(RunDir(Path(last.rsplit(": ", 1)[1])))
    assert files_of(run_dir.path) == {**before, **{
        f"rechecks/{w.name}/{f}": (w.path / f).read_bytes() for w in written
        for f in ("results.json", "report.html")}}
    assert written[0] != written[1]
    results = written[0].load_results()
    assert results["valid"] is False and results["unverified"].startswith("no manifest")
    page = written[0].report.read_text()
    assert '<a href="../../results.json">results.json</a>' in page and "INVALID" in page
    assert main(["check", "--write", str(run_dir.path)]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"wrote results.json and report.html over the run's own: {run_dir.path}")
    assert run_dir.load_results() == results
    assert '<a href="results.json">results.json</a>' in run_dir.report.read_text()
    assert run_dir.history.is_file()  # --write: the journals merged, as before


@pytest.mark.parametrize("command", ["report", "export", "check"])
def test_report_and_export_refuse_a_damaged_directory_as_check_does(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    from harness.cli import main

    run_dir = sealed(tmp_path)
    run_dir.save_results({"valid": True, "checks": {}})
    flip(run_dir.journal(1))
    before = files_of(run_dir.path)
    assert main([command, str(run_dir.path)]) == 3
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert f"{run_dir.journal(1)} does not match the run's manifest" in err and "refused" in err
    assert files_of(run_dir.path) == before


# a real run, its damaged copies checked by the CLI ------------------------------------------
@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int, str]]:
    """One short real run without faults: its directory, exit code and verdict line."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server missing")
    store = tmp_path_factory.mktemp("manifest") / "results"
    code, results, run_dir, out = run(store, "--nemesis", "none", "--time-limit", "4",
                                      "--clients", "3")
    assert results and (run_dir / "manifest.json").is_file(), out
    yield run_dir, code, out.splitlines()[0]
    harness("clean", "--store", str(store))  # what its dead runs left, nobody else's


def check_copy(finished: tuple[Path, int, str], tmp_path: Path,
               damage: Callable[[Path], object]) -> subprocess.CompletedProcess[str]:
    copy = tmp_path / "copy"
    shutil.copytree(finished[0], copy, symlinks=True)
    damage(copy)
    return harness("check", str(copy))


def drop_process(copy: Path) -> None:
    history = copy / "history.jsonl"
    lines = history.read_text().splitlines(keepends=True)
    kept = [ln for ln in lines if json.loads(ln)["process"] != 1]
    assert 0 < len(kept) < len(lines)
    history.write_text("".join(kept))


REAL_DAMAGE: list[tuple[str, Callable[[Path], object], str]] = [
    ("history removed, journal cut mid-line",
     lambda c: ((c / "history.jsonl").unlink(), cut(c / "journals/c1.jsonl", 150)),
     "history.jsonl"),
    ("history cut to its first 30 lines", lambda c: (c / "history.jsonl").write_text("".join(
        (c / "history.jsonl").read_text().splitlines(keepends=True)[:30])), "history.jsonl"),
    ("one client's ops removed", drop_process, "history.jsonl"),
    ("a client journal deleted", lambda c: (c / "journals/c2.jsonl").unlink(),
     "journals/c2.jsonl"),
    ("final.jsonl deleted", lambda c: (c / "journals/final.jsonl").unlink(),
     "journals/final.jsonl"),
]


@pytest.mark.servers
@pytest.mark.parametrize(("damage", "name"), [d[1:] for d in REAL_DAMAGE],
                         ids=[d[0] for d in REAL_DAMAGE])
def test_a_damaged_copy_of_a_real_run_is_exit_3_naming_the_file(
        finished: tuple[Path, int, str], tmp_path: Path, damage: Callable[[Path], object],
        name: str) -> None:
    proc = check_copy(finished, tmp_path, damage)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
    assert f"{tmp_path / 'copy' / name} " in proc.stderr and "refused" in proc.stderr


@pytest.mark.servers
def test_an_undamaged_copy_checks_as_the_run_did(finished: tuple[Path, int, str],
                                                 tmp_path: Path) -> None:
    _, code, verdict = finished
    proc = check_copy(finished, tmp_path, lambda c: None)
    assert (proc.returncode, proc.stdout.splitlines()[0]) == (code, verdict), proc.stderr
    assert "unverified" not in proc.stdout
    again = check_copy(finished, tmp_path / "again", lambda c: (c / "manifest.json").unlink())
    assert again.returncode == 3 and "manifest.json is missing" in again.stderr
    old = check_copy(finished, tmp_path / "old", pre_manifest)
    assert (old.returncode, old.stdout.splitlines()[0]) == (code, verdict), old.stderr
    assert "  unverified: no manifest: written before manifests, not verified\n" in old.stdout


@pytest.mark.servers
def test_a_killed_copy_says_it_has_no_manifest_and_is_never_valid(
        finished: tuple[Path, int, str], tmp_path: Path) -> None:
    proc = check_copy(finished, tmp_path, killed)
    code, word = (1, "INVALID") if finished[1] == 1 else (2, "UNKNOWN")  # VALID: unknown
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert proc.stdout.startswith(f"{word}\n  unfinished: the run did not finish (status "
                                  "starting)"), proc.stdout
    assert ("  unverified: no manifest: the run did not finish (status starting), its files "
            "are not verified\n") in proc.stdout


def pre_manifest(copy: Path) -> None:
    """As a run recorded before manifests left its directory."""
    (copy / "manifest.json").unlink()
    edit_test(copy, lambda t: t.pop("manifest"))


def killed(copy: Path) -> None:
    """As a run killed before its end left its directory: no manifest, status starting."""
    (copy / "manifest.json").unlink()
    edit_test(copy, lambda t: t.update(status="starting"))


def edit_test(copy: Path, edit: Callable[[dict[str, Any]], object]) -> None:
    test = json.loads((copy / "test.json").read_text())
    edit(test)
    (copy / "test.json").write_text(json.dumps(test))
