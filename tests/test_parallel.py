"""``--jobs N`` (issue 30): N runs at once, for ``harness suite`` and ``harness explore``'s
replays. The scheduling is tested here on stand-in work (threads that sleep; no server is the
subject); real suites at 1 and 2 jobs are in test_suite.py, the search's lookahead in
test_search.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness.core.errors import UsageError
from harness.presentation import suite as suite_mod
from harness.presentation.parallel import check_jobs, cores, run_all
from harness.presentation.suite import Entry, Outcome, parse
from tests.harness_runs import bounded

ROOT = Path(__file__).parent.parent


class Gauge:
    """How many pieces of work run at once, at most; and in which order they started."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0
        self.order: list[Any] = []
        self.spans: dict[Any, tuple[float, float]] = {}

    def work(self, item: Any, seconds: float = 0.05) -> Any:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.order.append(item)
        start = time.monotonic()
        time.sleep(seconds)
        with self.lock:
            self.now -= 1
            self.spans[item] = (start, time.monotonic())
        return item


def test_jobs_is_checked_and_defaults_to_the_cores() -> None:
    assert check_jobs(None) == cores() >= 1
    assert check_jobs(3) == 3
    for bad in (0, -1, 65):
        with pytest.raises(UsageError, match="--jobs must be 1 to 64"):
            check_jobs(bad)


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_at_most_n_at_once_each_heard_of_in_the_main_thread(jobs: int) -> None:
    gauge = Gauge()
    heard: list[tuple[int, int, bool]] = []
    results, interrupted = run_all(
        list(range(7)), gauge.work, jobs,
        done=lambda i, r: heard.append((i, r, threading.current_thread() is
                                        threading.main_thread())))
    assert results == list(range(7)) and not interrupted
    assert gauge.most == jobs
    assert gauge.order[:jobs] == list(range(jobs))  # started in the order given
    assert sorted(i for i, _, _ in heard) == list(range(7))
    assert all(i == r and main for i, r, main in heard)


def test_a_stop_result_starts_nothing_more() -> None:
    gauge = Gauge()
    results, interrupted = run_all(list(range(6)), gauge.work, 1, done=lambda i, r: None,
                                   stop=lambda r: r == 2)
    assert interrupted
    assert results == [0, 1, 2, None, None, None]


def test_ctrl_c_starts_nothing_more_and_lets_the_running_ones_end() -> None:
    gauge = Gauge()
    main = threading.main_thread().ident
    assert main is not None

    def work(i: int) -> int:
        if i == 3:  # Ctrl-C while the loop runs, whatever the machine's speed
            signal.pthread_kill(main, signal.SIGINT)
        return gauge.work(i, 0.1)

    results, interrupted = run_all(list(range(20)), work, 2, done=lambda i, r: None)
    assert interrupted
    started = set(gauge.order)
    assert 4 <= len(started) < 20
    assert all((results[i] == i) == (i in started) for i in range(20))  # the running ones end


@pytest.mark.parametrize("where", ["done", "start"])
def test_a_ctrl_c_anywhere_in_the_main_thread_is_heard_not_raised(where: str) -> None:
    """A Ctrl-C landing outside the wait (in ``done``, in a submit) still stops the loop: it
    must never escape as KeyboardInterrupt and leave children running unheard of."""
    gauge = Gauge()
    heard: list[int] = []

    def done(i: int, r: Any) -> None:
        heard.append(i)
        if where == "done" and i == 1:
            os.kill(os.getpid(), signal.SIGINT)  # delivered here, in the main thread
            time.sleep(0.01)

    def work(i: int) -> int:
        if where == "start" and i == 2:
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        return gauge.work(i, 0.02)

    before = signal.getsignal(signal.SIGINT)
    _, interrupted = run_all(list(range(12)), work, 2, done=done)
    assert interrupted and len(heard) < 12
    assert signal.getsignal(signal.SIGINT) is before  # put back


# the suite ------------------------------------------------------------------------------------
def suite_of(runs: list[dict[str, Any]]) -> suite_mod.Suite:
    return parse({"name": "p", "run": runs}, Path("p.toml"))


def fake_runs(monkeypatch: pytest.MonkeyPatch, gauge: Gauge) -> None:
    def run_entry(entry: Entry, store: Path, log_dir: Path) -> Outcome:
        gauge.work(entry.number, 0.02 * entry.time_limit)
        return Outcome(entry, entry.expect, 0 if entry.expect == "valid" else 1,
                       0.02 * entry.time_limit, None, "")

    monkeypatch.setattr(suite_mod, "run_entry", run_entry)


def test_a_suite_with_jobs_runs_longest_first_and_keeps_its_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gauge = Gauge()
    fake_runs(monkeypatch, gauge)
    s = suite_of([
        {"lock": "redis-setnx", "nemesis": "none", "time-limit": 4, "expect": "valid"},
        {"lock": "redis-setnx", "nemesis": "pause", "time-limit": 9, "seeds": [1, 2],
         "expect": "invalid"},
        {"lock": "redis-setnx", "nemesis": "none", "backend": "docker", "time-limit": 3,
         "expect": "valid"},
        {"lock": "redis-del", "nemesis": "none", "time-limit": 6, "expect": "valid"},
    ])
    lines: list[str] = []
    outcomes = suite_mod.run_suite(s, tmp_path / "store", tmp_path / "out", jobs=2,
                                   echo=lambda text, **kw: lines.append(text))
    assert [o.entry.number for o in outcomes] == [1, 2, 3, 4, 5]
    assert all(o.as_expected for o in outcomes)
    assert gauge.order == [2, 3, 5, 1, 4]  # longest first; the docker run last
    assert gauge.most == 2
    docker = gauge.spans[4]
    assert all(end <= docker[0] for n, (_, end) in gauge.spans.items() if n != 4)  # alone
    finished = [x for x in lines if x.startswith("[")]
    assert len(finished) == 5 and finished[-1].startswith("[5/5] #4 ")
    assert all(" ok (" in x for x in finished)
    assert lines[0] == "4 local run(s), 2 at a time; then 1 on other backends, one at a time"


def test_a_suite_with_one_job_runs_in_file_order(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    gauge = Gauge()
    fake_runs(monkeypatch, gauge)
    s = suite_of([{"lock": "redis-setnx", "nemesis": "none", "time-limit": t, "expect": "valid"}
                  for t in (2, 5, 3)])
    outcomes = suite_mod.run_suite(s, tmp_path / "store", tmp_path / "out", jobs=1,
                                   echo=lambda *a, **kw: None)
    assert gauge.order == [1, 2, 3] and gauge.most == 1
    assert [o.verdict for o in outcomes] == ["valid"] * 3


def harness(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return bounded([sys.executable, "-m", "harness.cli", *args], timeout=120, cwd=ROOT, env=env)


def test_bad_jobs_is_one_line_before_anything_runs(tmp_path: Path) -> None:
    store = tmp_path / "store"
    suite = tmp_path / "s.toml"
    suite.write_text('[[run]]\nnemesis = "none"\nexpect = "valid"\n')
    proc = harness("suite", str(suite), "--jobs", "0", "--store", str(store))
    assert proc.returncode == 64
    assert proc.stderr.strip() == "harness: --jobs must be 1 to 64 runs at once, got 0"
    proc = harness("explore", "--menu", "pause", "--budget", "3", "--jobs", "-2",
                   "--store", str(store))
    assert proc.returncode == 64
    assert proc.stderr.strip() == "harness: --jobs must be 1 to 64 runs at once, got -2"
    proc = harness("suite", "merge", str(tmp_path), "--jobs", "2")
    assert proc.returncode == 64 and "not --shard, --seeds, --jobs or --dry-run" in proc.stderr
    assert not store.exists()
