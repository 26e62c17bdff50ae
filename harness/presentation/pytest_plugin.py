"""A pytest plugin: a lock library tests its lock with the harness, from its own test suite.

Installed with lock-harness (entry point ``pytest11``: ``lock_harness``), so any test in the
same environment can write::

    class MyLock: ...                            # at the top level of the test module

    @pytest.mark.lock_harness("redis")           # skipped when redis-server is not installed
    def test_my_lock_under_pauses(lock_harness):
        result = lock_harness.run(MyLock, nemesis="pause", time_limit=10, seed=1)
        result.assert_valid()                    # fails with the violation in words

``lock_harness.run`` takes ``harness run``'s options as keywords (``db``, ``workload``,
``nemesis`` (a name, ``"pause,kill"`` or a list), ``clients``, ``time_limit``, ``ttl``,
``nodes``, ``backend``, ``persistence``, ``nemesis_options``, ``seed``), ``env`` (variables
for the harness and its clients, e.g. what chooses the lock) and a lock: a class, a
registered name or ``"package.module:Class"``. The run is real (servers on loopback, client
processes, the nemesis) and goes through the same child process a suite's runs take. A lock
class from the test module is imported by the client processes by its module path, with the
directory it is imported from put on their ``PYTHONPATH``: so it must live at the top level of
an importable module (not inside a function).

It returns a :class:`HarnessResult` (``valid``, ``results``, ``checks``, ``violations``,
``report``, ``run_dir``, ``history()``, ``command``) with ``assert_valid()`` and
``assert_invalid()``. A harness that cannot run the test (a port taken, a crash) fails the test
in one line with its log; missing servers skip it (``--harness-require-servers``: fail
instead, for CI machines that must have them). Every test using the fixture gets the
``lock_harness`` marker, so ``-m "not lock_harness"`` leaves the real-server tests out.

Options: ``--harness-store DIR`` (where runs are kept; default: pytest's temporary directory,
of which pytest keeps the last three), ``--harness-seed N`` (the seed of every run that does
not fix one: replay a failure), ``--harness-require-servers``.

Nothing heavy is imported until a test asks for the fixture: pytest loads this module in every
session of an environment where lock-harness is installed.
"""

from __future__ import annotations

import io
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from harness.core.history import Op

MARKER = "lock_harness"
RUNS_KEY = pytest.StashKey[list["HarnessResult"]]()
FAIL_KEY = pytest.StashKey[str]()
OPTION_KEYS = ("db", "workload", "nemesis", "backend", "nodes", "clients", "time_limit",
               "seed", "ttl", "persistence")


# pytest hooks ---------------------------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lock-harness", "lock-harness (real servers, faults, checkers)")
    group.addoption("--harness-store", metavar="DIR", default=None,
                    help="keep the lock_harness fixture's runs here (default: pytest's "
                    "temporary directory)")
    group.addoption("--harness-seed", metavar="N", type=int, default=None,
                    help="the seed of every run that does not give one (replay a failure)")
    group.addoption("--harness-require-servers", action="store_true", default=False,
                    help="fail, instead of skipping, a test whose servers are not installed")
    group.addoption("--harness-require-clients", action="store_true", default=False,
                    help="fail, instead of skipping, a test whose external lock client is not "
                    "built (read by the harness's own test suite)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(*dbs): runs real servers through lock-harness; skipped when the "
        "servers of a db named (default: redis) are not installed")
    config.stash[RUNS_KEY] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test that uses the fixture has the marker; a test whose servers are missing is
    marked to skip (reported at the test's own location), or, with
    ``--harness-require-servers`` (or a db name the harness does not know), to fail in its
    setup."""
    missing: dict[str, tuple[str, bool] | None] = {}
    require = config.getoption("--harness-require-servers")
    for item in items:
        if MARKER in getattr(item, "fixturenames", ()) and item.get_closest_marker(MARKER) is None:
            item.add_marker(MARKER)
        for mark in item.iter_markers(MARKER):
            for db in mark.args or ("redis",):
                if db not in missing:
                    missing[db] = db_missing(str(db))
                found = missing[db]
                if found is None:
                    continue
                reason, wrong_name = found
                if wrong_name or require:
                    item.stash[FAIL_KEY] = reason + ("" if wrong_name else
                                                     " (--harness-require-servers)")
                else:
                    item.add_marker(pytest.mark.skip(reason=reason))


def pytest_runtest_setup(item: pytest.Item) -> None:
    reason = item.stash.get(FAIL_KEY, None)
    if reason is not None:
        pytest.fail(reason, pytrace=False)


def db_missing(db: str) -> tuple[str, bool] | None:
    """What this machine lacks to run ``db`` and the resource (and whether it is a wrong
    name rather than a missing server), or None."""
    from harness.controller.spec import TestSpec
    from harness.core.errors import UsageError

    try:
        reason = servers_missing(TestSpec(db=db, nemesis=[]))
    except UsageError as err:
        return f"@pytest.mark.{MARKER}: {err}", True
    return None if reason is None else (f"lock-harness: {reason}", False)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    runs = config.stash.get(RUNS_KEY, [])
    if not runs:
        return
    terminalreporter.section("lock-harness")
    for r in runs:
        terminalreporter.line(f"{r.verdict:<8} {r.test}  {r.report or r.run_dir}")


# the fixture ----------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def lock_harness_store(tmp_path_factory: pytest.TempPathFactory,
                       pytestconfig: pytest.Config) -> Path:
    """The results store the ``lock_harness`` fixture's runs go to."""
    given = pytestconfig.getoption("--harness-store")
    return Path(given).resolve() if given else tmp_path_factory.mktemp("lock-harness")


@pytest.fixture
def lock_harness(request: pytest.FixtureRequest, lock_harness_store: Path) -> LockHarness:
    """Runs a lock through the harness: ``lock_harness.run(MyLock, nemesis="pause")``."""
    return LockHarness(request.config, lock_harness_store, request.node.nodeid)


@dataclass
class LockHarness:
    """What the ``lock_harness`` fixture gives a test: :meth:`run`."""

    config: pytest.Config
    store: Path
    test: str

    def __repr__(self) -> str:
        return f"LockHarness(store={str(self.store)!r})"

    def run(self, lock: type | str, *, env: dict[str, str] | None = None,
            **options: Any) -> HarnessResult:
        """Run ``lock`` under ``options`` (``harness run``'s, as keywords) and return what the
        checkers said. ``env``: variables set for the harness and its clients (what chooses
        the lock or its settings, such as ``{"TINYLOCK": "UnsafeLock"}``), printed in the
        replay line too. Skips when the servers are missing; fails the test, in one line, when
        the harness could not run it; raises KeyboardInterrupt after a Ctrl-C has healed."""
        __tracebackhide__ = True
        from harness.core.errors import UsageError
        from harness.presentation.suite import run_args, spec_of

        target, roots = lock_target(lock)
        entry = entry_options(target, options, self.config.getoption("--harness-seed"))
        env = dict(env or {})
        bad = next((k for k, v in env.items() if not (isinstance(k, str) and k.isidentifier()
                                                      and isinstance(v, str))), None)
        if bad is not None or "PYTHONPATH" in env:
            pytest.fail(f"lock_harness.run: env must map variable names to strings (PYTHONPATH "
                        f"is the plugin's own), got {bad or 'PYTHONPATH'!r}", pytrace=False)
        try:
            spec = spec_of(entry, self.store)
        except UsageError as err:
            pytest.fail(f"lock_harness.run: {err}", pytrace=False)
        missing = servers_missing(spec)
        if missing is not None:
            skip_or_fail(self.config, missing)
        env["PYTHONPATH"] = python_path([*roots, *self.config.getini("pythonpath"),
                                         self.config.rootpath])
        command = " ".join([*(f"{k}={shlex.quote(v)}" for k, v in env.items()), shlex.join(
            [sys.executable, "-m", "harness.cli", "run", *run_args(entry)])])
        result = run_spec(spec, self.test, command, env)
        self.config.stash[RUNS_KEY].append(result)
        return result


def run_spec(spec: Any, test: str, command: str, env: dict[str, str]) -> HarnessResult:
    """The run, in a child process with ``env`` (its PYTHONPATH among them) set, as are its
    clients."""
    __tracebackhide__ = True
    from harness.controller.store import Store
    from harness.presentation.runs import run_in_child
    from harness.presentation.suite import judge, last_line

    run = Store(spec.store).create(spec.test_name)
    run.logs.mkdir(parents=True, exist_ok=True)
    log = run.log("harness")
    child = run_in_child(spec, run, log, env={**os.environ, **env})
    if child.interrupted:
        raise KeyboardInterrupt
    verdict, why = judge(child.code, run if run.is_run() else None)
    if child.code not in (0, 1, 2):
        verdict, why = "error", harness_error(child.output) or last_line(child.output)
    if verdict == "error":
        pytest.fail(f"lock-harness could not run the test (exit {child.code}): "
                    f"{why or last_line(child.output)}; log: {log}", pytrace=False)
    results = run.load_results()
    return HarnessResult(test=test, spec=spec.to_dict(), command=command,
                         exit_code=child.code, run_dir=run.path, results=results,
                         output=child.output)


# the result -----------------------------------------------------------------------------------
@dataclass
class HarnessResult:
    """What one run of the harness found."""

    test: str
    spec: dict[str, Any]
    command: str  # how to run it again from a shell
    exit_code: int | None
    run_dir: Path
    results: dict[str, Any] = field(default_factory=dict)
    output: str = ""

    @property
    def valid(self) -> bool | str:
        """True, False, or "unknown" (the checkers could not decide)."""
        v = self.results.get("valid")
        return v if isinstance(v, bool) else "unknown"

    @property
    def verdict(self) -> str:
        return {True: "VALID", False: "INVALID"}.get(self.results.get("valid"), "UNKNOWN")

    @property
    def checks(self) -> dict[str, Any]:
        return dict(self.results.get("checks") or {})

    @property
    def report(self) -> Path | None:
        from harness.controller.store import RunDir

        report = RunDir(self.run_dir).report
        return report if report.exists() else None

    @property
    def violations(self) -> list[dict[str, Any]]:
        """Every violation the checkers explained: ``{"checker", "kind", "explanation", ...}``,
        in checker order (lock overlaps, stale writes, lost updates, stuck locks, ...)."""
        out = []
        for name, check in self.checks.items():
            if not isinstance(check, dict):
                continue
            for kind, value in check.items():
                if isinstance(value, list):
                    out += [{"checker": name, "kind": kind, **v} for v in value
                            if isinstance(v, dict) and "explanation" in v]
            witness = check.get("witness")
            if isinstance(witness, dict) and witness.get("explanation"):
                out.append({"checker": name, "kind": "witness", **witness})
        return out

    def history(self) -> list[Op]:
        """The run's ops, a list of dicts (made from the columns it is read into)."""
        from harness.controller.store import RunDir

        return list(RunDir(self.run_dir).load_history())

    def explain(self) -> str:
        """The verdict in words: what ran, each checker's verdict and first violation, where
        the report is, and how to run it again."""
        from harness.controller.store import RunDir
        from harness.presentation.runs import print_summary

        s = self.spec
        faults = "+".join(s.get("nemesis") or []) or "no faults"
        head = (f"lock {s.get('lock')} on {s.get('db')} ({s.get('workload')} workload) under "
                f"{faults}: {s.get('clients')} clients, {s.get('time_limit'):g} s, "
                f"seed {s.get('seed')}")
        out = io.StringIO()
        print_summary({**self.results, "checks": failing_first(self.checks)},
                      RunDir(self.run_dir), out)
        return f"{head}\n{out.getvalue()}replay: {self.command}"

    def assert_valid(self) -> None:
        """Fail the test unless every checker found the history valid; the message says what
        went wrong in words (the first lock overlap, stale write, ...)."""
        __tracebackhide__ = True
        if self.valid is not True:
            raise AssertionError(self.explain())

    def assert_invalid(self) -> None:
        """Fail the test unless the harness caught a violation: for a lock known to be unsafe
        under a fault (the test that the harness still finds the bug)."""
        __tracebackhide__ = True
        if self.valid is not False:
            raise AssertionError(f"expected the harness to find a violation, but:\n"
                                 f"{self.explain()}")


# helpers --------------------------------------------------------------------------------------
def failing_first(checks: dict[str, Any]) -> dict[str, Any]:
    """The checkers that found something first, the linearizability witness (the least plain
    of the explanations) after the others; then the rest, as they were."""
    names = list(checks)
    order = sorted(names, key=lambda n: (
        not (isinstance(checks[n], dict) and checks[n].get("valid") is False),
        n == "linearizable", names.index(n)))
    return {n: checks[n] for n in order}


def lock_target(lock: type | str) -> tuple[str, list[Path]]:
    """``module:Class`` for a lock, and the directory its module is imported from (for the
    client processes' PYTHONPATH); a name or target string stands for itself."""
    __tracebackhide__ = True
    if isinstance(lock, str):
        return lock, []
    if not isinstance(lock, type):
        pytest.fail(f"lock_harness.run: the lock must be a class, a name or "
                    f"'package.module:Class', got {lock!r}", pytrace=False)
    name, qual = lock.__module__, lock.__qualname__
    if "<locals>" in qual or name == "__main__":
        pytest.fail(f"lock_harness.run: {qual} must be defined at the top level of an "
                    "importable module: each client process imports it by name",
                    pytrace=False)
    root = import_root(sys.modules.get(name))
    if root is None:
        pytest.fail(f"lock_harness.run: cannot tell where module {name!r} is imported from: "
                    f"pass lock='{name}:{qual}' and put its directory on PYTHONPATH",
                    pytrace=False)
    return f"{name}:{qual}", [root]


def import_root(module: Any) -> Path | None:
    """The directory ``module`` is imported from by its name (``tests.test_x`` in
    ``/repo/tests/test_x.py``: ``/repo``), or None if its file does not fit its name."""
    file = getattr(module, "__file__", None)
    if module is None or file is None:
        return None
    path = Path(file).resolve()
    parts = module.__name__.split(".")
    depth = len(parts) + (1 if path.name == "__init__.py" else 0)
    root = path.parents[depth - 1]
    expected = root.joinpath(*parts)
    if path not in (expected.with_suffix(".py"), expected / "__init__.py"):
        return None
    return root


def entry_options(target: str, options: dict[str, Any], seed: int | None) -> dict[str, Any]:
    """The keywords of ``run`` as a suite entry's options (``time_limit`` -> ``time-limit``)."""
    unknown = sorted(set(options) - {*OPTION_KEYS, "nemesis_options"})
    if unknown:
        pytest.fail(f"lock_harness.run: unknown option {unknown[0]!r}: use "
                    f"{', '.join((*OPTION_KEYS, 'nemesis_options'))}", pytrace=False)
    entry: dict[str, Any] = {"lock": target}
    for key in OPTION_KEYS:
        value = options.get(key)
        if value is not None:
            entry[key.replace("_", "-")] = value
    if isinstance(entry.get("nemesis"), list | tuple):
        entry["nemesis"] = ",".join(entry["nemesis"]) or "none"
    if options.get("nemesis_options"):
        entry["nemesis-opt"] = dict(options["nemesis_options"])
    if "seed" not in entry and seed is not None:
        entry["seed"] = seed
    return entry


def harness_error(output: str) -> str:
    """The run's own one-line error (a client that died names its own last words, the lock's
    exception usually, and its log)."""
    line = next((x for x in output.splitlines() if x.startswith("harness: ")), "")
    return line.removeprefix("harness: ")


def python_path(dirs: list[Any]) -> str:
    """``dirs`` first (without repeats), then the PYTHONPATH this process was given, every
    one absolute (the replay line runs from any directory)."""
    out: list[str] = []
    for d in map(os.path.abspath, [*map(str, dirs), *filter(None, os.environ.get(
            "PYTHONPATH", "").split(os.pathsep))]):
        if d not in out:
            out.append(d)
    return os.pathsep.join(out)


def servers_missing(spec: Any) -> str | None:
    """What this machine lacks to run ``spec`` (a TestSpec), in one line, or None."""
    from harness.controller.preflight import unmet

    return unmet(spec)


def skip_or_fail(config: pytest.Config, reason: str) -> None:
    __tracebackhide__ = True
    if config.getoption("--harness-require-servers"):
        pytest.fail(f"lock-harness: {reason} (--harness-require-servers)", pytrace=False)
    pytest.skip(f"lock-harness: {reason}")
