"""The results store: the only module that knows how a run directory is laid out.

    <store>/<test-name>/<YYYYmmddTHHMMSS>-<tail>/   (tail: 6 random hex digits)
        test.json       the spec, seed, fault schedule, plugin versions, status (replayable)
        history.jsonl   the merged history
        results.json    the checkers' verdicts
        report.html     the one-file report
        logs/           <node>.log, client-<p>.log
        journals/       c<p>.jsonl, nemesis.jsonl, final.jsonl (merged into history.jsonl)
        clients/        c<p>.json (each client's config), c<p>.crash
        nodes/<name>/   a node's config and data
        links/          the link layer's proxy: config.json (its routes), state.json (its
                        listeners and control port, written by the proxy when it is ready)
        pids.json       the processes the run started, for teardown and ``harness clean``
        manifest.json   what the finished run wrote: bytes, SHA-256 and ops (lines) of
                        history.jsonl and of each journal (``harness check`` verifies it)
        rechecks/<YYYYmmddTHHMMSS>/   one ``harness check`` of the run: its results.json and
                        report.html, beside the run's own (``--write``: over them)
    <store>/latest -> the newest run that started
    <store>/_explore/<test-name>/<YYYYmmddTHHMMSS>/     one harness explore
        summary.json, summary.txt    what was searched, found, shrunk, and how often it fails
        minimal.toml    the smallest failing schedule with its spec (harness run --config)
        runs.jsonl      every run of the search: its schedule, exit code, run directory
        first-failure, minimal      links to those run directories
        logs/           each run's output

Everything else asks a :class:`Store` or a :class:`RunDir` for paths, and reads and writes
runs through them.

A run's id is ``<test-name>/<directory name>`` (test.json's ``run_id``): what its docker
labels, its iptables rules' comment, its active-run marker and its scratch directory are named
by, which ``harness clean`` selects by. The directory's random tail keeps two runs of one test
started in the same second apart, in two stores as in one (two pytest-xdist workers, two
``--jobs``); a directory from before the tail (``<stamp>`` or ``<stamp>-<n>``) loads as any.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.controller.spec_keys import check_types
from harness.core.atomic import write_json
from harness.core.capped import read_capped
from harness.core.checks import TIME_ORDERED, Shared, well_formed
from harness.core.column_lines import write_history
from harness.core.errors import HarnessError, UsageError
from harness.core.history import HistoryError, Op
from harness.core.history_file import read_history
from harness.core.journal import merge_journals

LATEST = "latest"
SUITES = "_suites"
EXPLORE = "_explore"
ZOO = "zoo"  # harness zoo: its page, and which run each of its cells made
RECHECKS = "rechecks"
RUN_TAIL_BYTES = 3  # a run directory's random tail: 6 hex digits
NAME = re.compile(r"[^A-Za-z0-9_.+-]")
MAX_JSON_BYTES = 64 * 1024 * 1024
MANIFEST = "manifest.json"  # also test.json's mark of a run that writes one at its end
HASH_CHUNK = 1 << 20


def safe_name(name: str) -> str:
    """A test name that stays one directory inside the store (no separators, no ``..``)."""
    cleaned = NAME.sub("-", name).strip(".") or "test"
    return cleaned[:200]


class Inside:
    """A file or folder in a directory object's ``path``, as a class attribute:
    ``history = Inside("history.jsonl")`` makes ``run.history`` ``run.path / "history.jsonl"``."""

    def __init__(self, *parts: str) -> None:
        self.parts = parts

    def __get__(self, obj: Any, owner: type | None = None) -> Path:
        return obj.path.joinpath(*self.parts)


@dataclass(frozen=True)
class RunDir:
    """One run directory and the files in it."""

    path: Path

    # paths ---------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.path.name

    test_json = Inside("test.json")
    history = Inside("history.jsonl")
    results = Inside("results.json")
    report = Inside("report.html")
    pids = Inside("pids.json")
    logs = Inside("logs")
    journals = Inside("journals")
    manifest = Inside(MANIFEST)

    def log(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    def recheck(self) -> RunDir:
        """A new ``rechecks/<stamp>/`` beside the run: where a re-check writes its
        results.json and report.html (:attr:`results`, :attr:`report` of the directory
        returned), leaving the run's own as they were."""
        return RunDir(_new_dir(self.path / RECHECKS, time.strftime("%Y%m%dT%H%M%S"),
                               "re-checks"))

    def rechecks(self) -> list[RunDir]:
        """The run's re-checks (:meth:`recheck`), the oldest first."""
        d = self.path / RECHECKS
        return [RunDir(p) for p in sorted(d.iterdir())] if d.is_dir() else []

    def client_log(self, process: int) -> Path:
        return self.logs / f"client-{process}.log"

    def journal(self, process: int | str) -> Path:
        return self.journals / (f"c{process}.jsonl" if isinstance(process, int)
                                else f"{process}.jsonl")

    def client_config(self, process: int) -> Path:
        return self.path / "clients" / f"c{process}.json"

    def crash_file(self, process: int) -> Path:
        return self.path / "clients" / f"c{process}.crash"

    def clock_file(self, process: int) -> Path:
        return self.path / "clients" / f"c{process}.clock"

    def node_dir(self, name: str) -> Path:
        return self.path / "nodes" / name

    links_config = Inside("links", "config.json")
    links_state = Inside("links", "state.json")

    # reading and writing -------------------------------------------------------------------
    def is_run(self) -> bool:
        return self.test_json.is_file()

    def load_test(self) -> dict[str, Any]:
        """test.json as a dict (HarnessError, one line, if it is missing or not a run's, or
        if its spec's keys are not of the types a spec has)."""
        data = _load_json(self.test_json, "test.json")
        if not isinstance(data, dict) or not isinstance(data.get("spec"), dict):
            raise HarnessError(f"{self.test_json} has no spec: not a run directory?")
        try:
            check_types({str(k).replace("-", "_"): v for k, v in data["spec"].items()})
        except UsageError as e:
            raise HarnessError(f"{self.test_json}: {e}") from None
        return data

    def save_test(self, data: dict[str, Any]) -> None:
        _save(self.test_json, data)

    def begin(self, data: dict[str, Any]) -> None:
        """test.json of a run that starts, marked as one that writes a manifest when it ends
        (:meth:`seal`): a directory without one is then known as cut short or damaged."""
        self.save_test({**data, "manifest": MANIFEST})

    def update_test(self, **fields: Any) -> None:
        try:
            data = self.load_test()
        except HarnessError:
            data = {}
        data.update(fields)
        self.save_test(data)

    def load_results(self) -> dict[str, Any]:
        data = _load_json(self.results, "results.json")
        if not isinstance(data, dict):
            raise HarnessError(f"{self.results} is not a results object")
        return data

    def save_results(self, results: dict[str, Any]) -> None:
        _save(self.results, results)

    def has_journals(self) -> bool:
        return self.journals.is_dir()

    def merge(self) -> Sequence[Op]:
        """Merge the journals into history.jsonl (idempotent; what a crashed run recorded)."""
        history = self.merged()
        self.save_history(history)
        return history

    def merged(self) -> Sequence[Op]:
        """The journals merged into one history, not written (:meth:`save_history`), that
        keeps what is derived from it (its checks, summary and report derive each view of it
        once): its client ops in columns (a
        :class:`~harness.core.run_history.ColumnHistory`, merged a journal at a time: a few
        tens of bytes an op, not a dict) when any fit, else dicts
        (:class:`~harness.core.checks.Shared`)."""
        from harness.core.journal_columns import merge_journals_columns  # (numpy: when used)

        paths = list(self.journals.glob("*.jsonl"))
        columns = merge_journals_columns(paths)
        merged = columns if columns is not None else Shared(merge_journals(paths))
        merged.derived[TIME_ORDERED] = True  # sorted by time: no process's clock goes back
        return merged

    def save_history(self, history: Sequence[Op]) -> None:
        write_history(self.history, history)

    def load_history(self, *, save: bool = True) -> Sequence[Op]:
        """history.jsonl, or the journals merged now (a run that died before merging; written
        as its history.jsonl unless not ``save``), as the run's own checks had it
        (:meth:`merged`): its client ops in columns where any fit, else a
        :class:`~harness.core.checks.Shared` list."""
        if self.history.exists():  # read_history found it well-formed (a check need not again)
            from harness.core.run_history import merged_columns  # (numpy: when used)

            ops = read_history(self.history)
            return well_formed(merged_columns(ops) or ops)
        if self.has_journals():
            merged = self.merged()
            if save:
                self.save_history(merged)
            return merged
        raise HarnessError(f"{self.path} has no history.jsonl and no journals")

    def sealed_files(self) -> list[Path]:
        """What a manifest covers: history.jsonl and each journal (the final read's too)."""
        journals = sorted(self.journals.glob("*.jsonl")) if self.has_journals() else []
        return [p for p in (self.history, *journals) if p.is_file()]

    def seal(self) -> None:
        """manifest.json: the bytes, SHA-256 and ops (lines) of each file the run wrote
        (:meth:`sealed_files`), once history.jsonl is written: what :meth:`verify` holds
        the directory to."""
        files = {p.relative_to(self.path).as_posix(): _digest(p) for p in self.sealed_files()}
        _save(self.manifest, {"manifest": 1, "files": files})

    def verify(self, test: dict[str, Any]) -> str | None:
        """Hold the directory to its manifest (``test``: its test.json). None when every file
        matches; HarnessError (exit 3) naming the first file that does not (missing, another
        size or hash, or a journal the manifest does not know); a note when there is no
        manifest to hold it to: a run from before manifests, or one that did not finish (its
        verdict is never VALID: test.json's status says so). A finished run marked as writing
        one that has none is refused."""
        if not self.manifest.exists():
            status = str(test.get("status") or "starting")
            if test.get("manifest") != MANIFEST:
                return "no manifest: written before manifests, not verified"
            if status != "complete":
                return (f"no manifest: the run did not finish (status {status}), its files "
                        "are not verified")
            raise HarnessError(f"{self.manifest} is missing, though the run finished and "
                               "writes one: its files cannot be verified; refused")
        data = _load_json(self.manifest, "manifest")
        files = data.get("files") if isinstance(data, dict) else None
        if not isinstance(files, dict) or "history.jsonl" not in files or not all(
                _sealed_name(k) and isinstance(v, dict) and isinstance(v.get("sha256"), str)
                and all(type(v.get(n)) is int for n in ("bytes", "ops"))
                for k, v in files.items()):
            raise HarnessError(f"{self.manifest} is not a run manifest: refused")
        for name, want in files.items():
            path = self.path / name
            if not path.is_file():
                raise HarnessError(f"{path} is missing (the manifest records {want['ops']:,} "
                                   "ops): the run directory was damaged; refused")
            got = _digest(path)
            if got["bytes"] != want["bytes"] or got["sha256"] != want["sha256"]:
                what = (f"{got['bytes']:,} bytes, {got['ops']:,} ops" if got["bytes"] !=
                        want["bytes"] else "the same size but another SHA-256")
                raise HarnessError(f"{path} does not match the run's manifest ({what}; it "
                                   f"records {want['bytes']:,} bytes, {want['ops']:,} ops): "
                                   "changed since the run; refused")
        for path in self.sealed_files():
            if path.relative_to(self.path).as_posix() not in files:
                raise HarnessError(f"{path} is not in the run's manifest: added since the "
                                   "run; refused")
        return None

    def raw_files(self) -> list[str]:
        """The run's own files that exist, by their names in the directory (for links)."""
        return [p.name for p in (self.history, self.results, self.test_json) if p.exists()]

    def log_names(self) -> list[str]:
        return sorted(p.name for p in self.logs.glob("*.log")) if self.logs.is_dir() else []


def _save(path: Path, data: Any) -> None:
    try:
        write_json(path, data)
    except OSError as e:
        raise HarnessError(f"cannot write {path}: {e.strerror or e}") from None


def _new_dir(base: Path, stamp: str, what: str) -> Path:
    """A new directory ``base/<stamp>`` (``<stamp>-<n>`` when that one is taken), resolved."""
    for n in range(100):
        d = base / (stamp if n == 0 else f"{stamp}-{n}")
        try:
            d.mkdir(parents=True)
        except FileExistsError:
            continue
        except OSError as err:
            raise HarnessError(f"cannot create {d}: {err.strerror}") from None
        return d.resolve()
    raise HarnessError(f"too many {what} in {base} this second")


def _sealed_name(name: str) -> bool:
    """A name a manifest may hold: history.jsonl or journals/<name>.jsonl, nothing outside."""
    parts = name.split("/")
    return name == "history.jsonl" or (len(parts) == 2 and parts[0] == "journals" and
                                       parts[1].endswith(".jsonl"))


def _digest(path: Path) -> dict[str, Any]:
    """A file's bytes, SHA-256 and lines (ops, for a JSON-lines file), in one pass."""
    sha, size, lines = hashlib.sha256(), 0, 0
    try:
        with path.open("rb") as f:
            while chunk := f.read(HASH_CHUNK):
                sha.update(chunk)
                size += len(chunk)
                lines += chunk.count(b"\n")
    except OSError as e:
        raise HarnessError(f"cannot read {path}: {e.strerror or e}") from None
    return {"bytes": size, "sha256": sha.hexdigest(), "ops": lines}


def _load_json(path: Path, what: str) -> Any:
    raw = read_capped(path, MAX_JSON_BYTES, str(path), what)
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise HarnessError(f"{path} is not valid JSON: not a {what}?") from None


class Store:
    """A results store: ``<root>/<test>/<stamp>/`` run directories and ``<root>/latest``."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def create(self, test_name: str) -> RunDir:
        """A new, empty run directory for ``test_name``: ``<stamp>-<tail>``, the tail random
        (the run id, ``<test>/<name>``, is then unique across stores)."""
        stamp = time.strftime("%Y%m%dT%H%M%S")
        base = self.root / safe_name(test_name)
        try:
            base.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise HarnessError(f"cannot create the results store {base}: {e.strerror}") from None
        for _ in range(100):
            run = base / f"{stamp}-{secrets.token_hex(RUN_TAIL_BYTES)}"
            try:
                run.mkdir()
            except FileExistsError:
                continue
            return RunDir(run.resolve())
        raise HarnessError(f"too many runs in {base} this second")

    def point_latest(self, run: RunDir) -> None:
        link = self.root / LATEST
        tmp = self.root / f".latest.{os.getpid()}"
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        tmp.symlink_to(os.path.relpath(run.path, self.root.resolve()))
        tmp.replace(link)

    def latest(self) -> RunDir | None:
        link = self.root / LATEST
        return RunDir(link.resolve()) if link.exists() else None

    def runs(self) -> Iterator[RunDir]:
        """Every run directory under the store (suites and ``latest`` left out)."""
        for test_json in self.root.glob("*/*/test.json"):
            run = test_json.parent
            if run.parent.name.startswith("_") or run.parent.is_symlink() or run.is_symlink():
                continue
            yield RunDir(run)

    def relative(self, run: RunDir) -> str:
        return run.path.resolve().relative_to(self.root.resolve()).as_posix()

    def suites_dir(self, suite_name: str, label: str = "") -> Path:
        """``<store>/_suites/<name>/<stamp>[-<label>]/``: beside the runs, so relative links to
        their reports hold when the store is copied or uploaded as one artifact. The label
        names a shard (``shard-2-of-4``) or a merge."""
        stamp = time.strftime("%Y%m%dT%H%M%S") + (f"-{safe_name(label)}" if label else "")
        return _new_dir(self.root / SUITES / safe_name(suite_name), stamp, "suite runs")

    def zoo_dir(self) -> Path:
        """``<store>/zoo/``: the zoo's page and ``cells/`` (one a run it made, by its key)."""
        d = self.root / ZOO
        d.mkdir(parents=True, exist_ok=True)
        return d

    def explore_dir(self, test_name: str) -> ExploreDir:
        """A new ``<store>/_explore/<test>/<stamp>/`` for one search."""
        d = _new_dir(self.root / EXPLORE / safe_name(test_name),
                     time.strftime("%Y%m%dT%H%M%S"), "searches")
        (d / "logs").mkdir()
        return ExploreDir(d)

    def suite_summaries(self) -> Iterator[Path]:
        yield from self.root.glob(f"{SUITES}/*/*/summary.json")

    def explores(self) -> Iterator[ExploreDir]:
        """Every ``harness explore`` under the store (one that ran no run yet too)."""
        for d in self.root.glob(f"{EXPLORE}/*/*/logs"):
            yield ExploreDir(d.parent)


@dataclass(frozen=True)
class ExploreDir:
    """The directory of one ``harness explore``."""

    path: Path

    summary_json = Inside("summary.json")
    summary_txt = Inside("summary.txt")
    minimal_toml = Inside("minimal.toml")
    runs = Inside("runs.jsonl")

    def log(self, n: int) -> Path:
        return self.path / "logs" / f"run-{n:03d}.log"

    def run_ids(self) -> list[str]:
        """The runs of the search so far, as ``<test>/<stamp>`` in its store (runs.jsonl
        names them by their directory, from wherever the search ran)."""
        try:
            lines = self.runs.read_text(encoding="utf-8").splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            with contextlib.suppress(ValueError, LookupError, AttributeError, TypeError):
                out.append("/".join(Path(json.loads(line)["run"]).parts[-2:]))
        return list(dict.fromkeys(out))

    def add_run(self, record: dict[str, Any]) -> None:
        """One line of runs.jsonl, appended (a search cut short keeps what it ran)."""
        with self.runs.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, separators=(",", ":"), default=str) + "\n")

    def link(self, name: str, run: RunDir) -> Path:
        """``first-failure`` or ``minimal``: a relative link to a run directory."""
        link = self.path / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(os.path.relpath(run.path, self.path))
        return link


def open_run(path: str | os.PathLike[str]) -> RunDir:
    """A run directory given on the command line (64 if it is not one)."""
    p = Path(path)
    if not p.is_dir():
        raise UsageError(f"{p} is not a run directory (expected results/<test>/<time>)")
    run = RunDir(p.resolve())
    if not run.test_json.exists():
        raise UsageError(f"{p} has no test.json: not a run directory (expected "
                         "results/<test>/<time>)")
    return run


__all__ = ["ExploreDir", "HistoryError", "RunDir", "Store", "open_run", "safe_name"]
