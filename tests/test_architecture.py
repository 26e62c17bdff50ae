"""The layers point one way, and the contract that says so can fail; and every test can fail.

``lint-imports`` runs the contracts of pyproject.toml; here it runs on the checkout (it must
pass) and on a copy in which one import points the wrong way (it must fail, naming the
contract). The tests themselves are read with ``ast``: no exit code compared with a set of
codes (``code in (0, 1)``: it accepts a verdict and its opposite), and no test function
without an assertion (``assert``, ``pytest.raises``/``fail``/``warns``, an ``assert_*`` call, or
a call of a function of the same module that asserts); each check is shown to catch what it is
about.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")
PACKAGES = ("harness", "workloads", "nemesis", "checker", "dbs")

TESTS = ROOT / "tests"
needs_lint = pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed")


def lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT), "--no-cache"], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"})


@needs_lint
def test_the_checkout_keeps_its_layers() -> None:
    proc = lint(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


def copy_tree(tmp_path: Path) -> Path:
    for name in PACKAGES:
        shutil.copytree(ROOT / name, tmp_path / name,
                        ignore=shutil.ignore_patterns("__pycache__", "assets"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


@needs_lint
@pytest.mark.parametrize(("module", "line"), [
    ("nemesis/base.py", "import harness.controller.run"),  # a role importing the controller
    ("harness/core/history.py", "import checker.mutex"),  # the core importing a role
    ("workloads/mutex.py", "import nemesis.base"),  # one role importing another
    ("dbs/redis.py", "import harness.controller.procs"),  # a DB importing the controller
    ("dbs/postgres.py", "import workloads.locks.pg_conn"),  # a DB importing another role
    ("harness/controller/spec.py", "import harness.presentation.runs"),  # controller -> up
])
def test_a_wrong_way_import_breaks_the_contract(tmp_path: Path, module: str, line: str) -> None:
    tree = copy_tree(tmp_path)
    path = tree / module
    path.write_text(path.read_text() + f"\n{line}  # noqa\n")
    proc = lint(tree)
    assert proc.returncode != 0, proc.stdout
    assert "BROKEN" in proc.stdout and line.split()[1] in proc.stdout


# tests that can fail --------------------------------------------------------------------------
CODE_NAMES = {"code", "rc", "returncode", "exit_code", "exitcode", "exit_status"}
ASSERTING_CALLS = {"raises", "fail", "warns"}  # pytest's; and any call named assert*

# Exit-code sets kept on purpose: the verdict is not what these tests are about.
NOT_ABOUT_THE_VERDICT = {
    # runs interrupted by SIGINT at a random moment: a verdict or "could not run" are both
    # honest; the test is about what is left after `harness clean`
    ("test_docker_runs.py", "test_interrupted_runs_leave_nothing_after_clean",
     "code in (0, 1, 3)"),
}



def leaf(node: ast.expr) -> str | None:
    """The last name of ``x``, ``a.x`` or ``a["x"]``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return str(node.slice.value)
    return None


def is_code_set(node: ast.expr) -> bool:
    """A literal tuple, list or set of two or more integers."""
    return (isinstance(node, ast.Tuple | ast.List | ast.Set) and len(node.elts) >= 2
            and all(isinstance(e, ast.Constant) and type(e.value) is int for e in node.elts))


def asserts(fn: ast.AST, helpers: set[str]) -> bool:
    """Does ``fn`` assert, raise pytest's failure, or call a helper that does?"""
    for node in ast.walk(fn):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call):
            name = leaf(node.func) or ""
            if name.startswith("assert") or name in ASSERTING_CALLS or name in helpers:
                return True
    return False


def functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def asserting_helpers(tree: ast.AST) -> set[str]:
    """The module's own functions that assert, directly or through one another."""
    helpers: set[str] = set()
    while True:
        more = {fn.name for fn in functions(tree)
                if not fn.name.startswith("test") and asserts(fn, helpers)}
        if more <= helpers:
            return helpers
        helpers |= more


def offenders(source: str, filename: str) -> list[tuple[str, str, str, int]]:
    """(file, function, what, line) for every exit code compared with a set of codes and every
    test function without an assertion in ``source``."""
    found = []
    tree = ast.parse(source)
    helpers = asserting_helpers(tree)
    for fn in functions(tree):
        for node in ast.walk(fn):
            if not isinstance(node, ast.Compare):
                continue
            name = leaf(node.left) or ""
            if not (name in CODE_NAMES or name.endswith("_code")):
                continue
            for op, right in zip(node.ops, node.comparators, strict=True):
                if isinstance(op, ast.In | ast.NotIn) and is_code_set(right):
                    found.append((filename, fn.name, ast.unparse(node), node.lineno))
        if fn.name.startswith("test") and not asserts(fn, helpers):
            found.append((filename, fn.name, "no assertion", fn.lineno))
    return found


def test_no_test_accepts_any_exit_code_or_asserts_nothing() -> None:
    allowed = NOT_ABOUT_THE_VERDICT
    found = [o for path in sorted(TESTS.glob("test_*.py"))
             for o in offenders(path.read_text(), path.name)]
    bad = [f"tests/{f}:{line} {fn}: {what}" for f, fn, what, line in found
           if (f, fn, what) not in allowed]
    assert not bad, "\n".join(bad)


SAMPLE = """
import pytest

def helper(code):
    assert code in (0, 1)          # a set of exit codes, even in a helper

def test_set(proc):
    assert proc.returncode in {0, 2}

def test_not_in(r):
    assert r["exit_code"] not in [3, 64]

def test_exact(code, status):
    assert code == 1 and status in (200, 404)   # an HTTP status is no exit code

def test_nothing(tmp_path):
    (tmp_path / "x").write_text("y")

def test_raises():
    with pytest.raises(ValueError):
        int("x")

def test_helper(result):
    result.assert_valid()

def wait_until(probe):
    if not probe():
        pytest.fail("never")

def test_waits(probe):
    wait_until(probe)

def write(path):
    path.write_text("y")

def test_writes_only(tmp_path):
    write(tmp_path / "x")
"""


def test_the_check_catches_what_it_is_about() -> None:
    assert [(fn, what) for _, fn, what, _ in offenders(SAMPLE, "sample.py")] == [
        ("helper", "code in (0, 1)"),
        ("test_set", "proc.returncode in {0, 2}"),
        ("test_not_in", "r['exit_code'] not in [3, 64]"),
        ("test_nothing", "no assertion"),
        ("test_writes_only", "no assertion"),
    ]
