"""The layers point one way, and the contract that says so can fail; and every test can fail.

``lint-imports`` runs the contracts of pyproject.toml; here it runs on the checkout (it must
pass) and on a copy in which one import points the wrong way (it must fail, naming the
contract). The tests themselves are read with ``ast``: no exit code compared with a set of
codes (``code in (0, 1)``, ``proc.wait() in (0, 1)``, ``code == 0 or code == 1``: each accepts a
verdict and its opposite), no assert of a constant (``assert True``), no assert whose failure is
caught and dropped (``try: assert ... except AssertionError: pass``), and no test function
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

from tests.conftest import required_by

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



@needs_lint
def test_a_deferred_import_that_closes_a_circle_breaks_the_contract(tmp_path: Path) -> None:
    """history imports text; text importing history inside a function is a circle too."""
    tree = copy_tree(tmp_path)
    path = tree / "harness/core/text.py"
    path.write_text(path.read_text() + "\n\ndef _late() -> None:\n"
                    "    import harness.core.history  # noqa\n")
    proc = lint(tree)
    assert proc.returncode != 0, proc.stdout
    assert "no circle among the modules of harness/core BROKEN" in proc.stdout
    assert ".text -> .history" in proc.stdout or ".history -> .text" in proc.stdout

# tests that can fail --------------------------------------------------------------------------
CODE_NAMES = {"code", "rc", "returncode", "exit_code", "exitcode", "exit_status",
              "wait", "poll", "call", "main"}  # the last: calls that return an exit code
ASSERTING_CALLS = {"raises", "fail", "warns"}  # pytest's; and any call named assert*
SWALLOWING = {"AssertionError", "Exception", "BaseException"}  # what catches a failed assert

# Exit-code sets kept on purpose: the verdict is not what these tests are about.
NOT_ABOUT_THE_VERDICT = {
    # runs interrupted by SIGINT at a random moment: a verdict or "could not run" are both
    # honest; the test is about what is left after `harness clean`
    ("test_docker_runs.py", "test_interrupted_runs_leave_nothing_after_clean",
     "code in (0, 1, 3)"),
}


def leaf(node: ast.expr) -> str | None:
    """The last name of ``x``, ``a.x``, ``a["x"]`` or ``a.x(...)``."""
    if isinstance(node, ast.Call):
        return leaf(node.func)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return str(node.slice.value)
    return None


def is_code(node: ast.expr) -> bool:
    name = leaf(node) or ""
    return name in CODE_NAMES or name.endswith("_code")


def is_code_set(node: ast.expr) -> bool:
    """A literal tuple, list or set of two or more integers."""
    return (isinstance(node, ast.Tuple | ast.List | ast.Set) and len(node.elts) >= 2
            and all(isinstance(e, ast.Constant) and type(e.value) is int for e in node.elts))


def code_sets(fn: ast.AST) -> Iterator[ast.expr]:
    """Each exit code compared with a set of codes: ``code in (0, 1)``, or spelt out,
    ``code == 0 or code == 1`` (``code != 0 and code != 1``)."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Compare) and is_code(node.left):
            if any(isinstance(op, ast.In | ast.NotIn) and is_code_set(right)
                   for op, right in zip(node.ops, node.comparators, strict=True)):
                yield node
        elif isinstance(node, ast.BoolOp):
            eq = ast.Eq if isinstance(node.op, ast.Or) else ast.NotEq
            sides = [ast.dump(v.left) for v in node.values if isinstance(v, ast.Compare)
                     and is_code(v.left) and len(v.ops) == 1 and isinstance(v.ops[0], eq)
                     and isinstance(v.comparators[0], ast.Constant)
                     and type(v.comparators[0].value) is int]
            if len(sides) > len(set(sides)):  # one code equal to one value or another
                yield node


def swallows(handler: ast.ExceptHandler) -> bool:
    """Does ``handler`` catch a failed assert and go on (it neither raises nor fails)?"""
    caught = [] if handler.type is None else (
        handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type])
    return ((handler.type is None or any(leaf(c) in SWALLOWING for c in caught))
            and not any(isinstance(n, ast.Raise) or (isinstance(n, ast.Call)
                                                     and leaf(n.func) in ASSERTING_CALLS)
                        for stmt in handler.body for n in ast.walk(stmt)))


def drops_failures(node: ast.AST) -> bool:
    """A ``try`` with a handler that swallows, or ``with suppress(AssertionError)``."""
    if isinstance(node, ast.Try | ast.TryStar):
        return any(map(swallows, node.handlers))
    return isinstance(node, ast.With | ast.AsyncWith) and any(
        isinstance(i.context_expr, ast.Call) and leaf(i.context_expr.func) == "suppress"
        and any(leaf(a) in SWALLOWING for a in i.context_expr.args) for i in node.items)


def dead_asserts(fn: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """Asserts that cannot fail: of a constant, or inside a ``try`` that drops the failure
    (or ``contextlib.suppress(AssertionError)``)."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Constant) \
                and node.test.value:
            yield node, "assert of a constant"
        for a in (n for stmt in (node.body if drops_failures(node) else [])  # type: ignore
                  for n in ast.walk(stmt) if isinstance(n, ast.Assert)):
            yield a, "an assert whose failure is caught"


def asserts(fn: ast.AST, helpers: set[str]) -> bool:
    """Does ``fn`` assert, raise pytest's failure, or call a helper that does?"""
    dead = {id(a) for a, _ in dead_asserts(fn)}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assert) and id(node) not in dead:
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


def offenders(source: str, filename: str, shared: frozenset[str] = frozenset()
              ) -> list[tuple[str, str, str, int]]:
    """(file, function, what, line) for every exit code compared with a set of codes, every
    assert that cannot fail and (in a test module) every test function without an assertion
    in ``source``; ``shared`` names the asserting helpers of the tests' helper modules."""
    found = []
    tree = ast.parse(source)
    helpers = asserting_helpers(tree) | shared
    for fn in functions(tree):
        found += [(filename, fn.name, ast.unparse(node), node.lineno)
                  for node in code_sets(fn)]
        found += [(filename, fn.name, what, node.lineno)  # type: ignore[attr-defined]
                  for node, what in dead_asserts(fn)]
        if filename.startswith("test_") and fn.name.startswith("test") \
                and not asserts(fn, helpers):
            found.append((filename, fn.name, "no assertion", fn.lineno))
    return found


def test_no_test_accepts_any_exit_code_or_asserts_nothing() -> None:
    allowed = NOT_ABOUT_THE_VERDICT
    found = [o for path in sorted(TESTS.glob("*.py"))  # the test modules and helpers
             for o in offenders(path.read_text(), path.name, shared_helpers())]
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

def test_waited(proc):
    assert proc.wait(90) in (0, 1)   # a call that returns an exit code

def test_spelt_out(r, n):
    assert r.code == 0 or r.code == 1
    assert r.code != 2 and n != 3 and r.code != 3

def test_either_count(n, r):
    assert (n == 0 or n == 1) and r.code == 0   # a count is no exit code

def test_true():
    assert True

def test_swallowed(r):
    try:
        assert r.ok
    except AssertionError:
        pass

def test_suppressed(r):
    with contextlib.suppress(Exception):
        assert r.ok

def test_reraised(r):
    try:
        assert r.ok
    except AssertionError:
        print(r.output)
        raise
"""


def shared_helpers() -> frozenset[str]:
    """The asserting functions of the helper modules in tests/ (``tests/one_node.py``, ...),
    which a test module imports by name."""
    return frozenset().union(*(asserting_helpers(ast.parse(path.read_text()))
                               for path in sorted(TESTS.glob("*.py"))
                               if not path.name.startswith("test_")))


def test_a_helper_module_that_asserts_counts_and_one_that_does_not_does_not() -> None:
    source = "from tests.one_node import lease_contract\n\ndef test_a(x):\n    lease_contract(x)\n"
    assert offenders(source, "test_s.py", frozenset({"lease_contract"})) == []
    assert [w for _, _, w, _ in offenders(source, "test_s.py")] == ["no assertion"]
    assert "lease_contract" in shared_helpers()


def test_the_check_catches_what_it_is_about() -> None:
    assert [(fn, what) for _, fn, what, _ in offenders(SAMPLE, "test_sample.py")] == [
        ("helper", "code in (0, 1)"),
        ("test_set", "proc.returncode in {0, 2}"),
        ("test_not_in", "r['exit_code'] not in [3, 64]"),
        ("test_nothing", "no assertion"),
        ("test_writes_only", "no assertion"),
        ("test_waited", "proc.wait(90) in (0, 1)"),
        ("test_spelt_out", "r.code == 0 or r.code == 1"),
        ("test_spelt_out", "r.code != 2 and n != 3 and (r.code != 3)"),
        ("test_true", "assert of a constant"),
        ("test_true", "no assertion"),
        ("test_swallowed", "an assert whose failure is caught"),
        ("test_swallowed", "no assertion"),
        ("test_suppressed", "an assert whose failure is caught"),
        ("test_suppressed", "no assertion"),
    ]


# skips CI cannot pass quietly -----------------------------------------------------------------
def skip_reasons(tree: ast.AST) -> Iterator[str]:
    """The reason of each ``pytest.skip("...")``, ``skipif(..., reason="...")`` and
    ``importorskip(..., reason="...")``, an f-string's fields as ``{}``."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or leaf(node.func) not in {"skip", "skipif",
                                                                     "importorskip"}:
            continue
        given = [k.value for k in node.keywords if k.arg in ("reason", "msg")]
        for arg in given or node.args[:1] if leaf(node.func) == "skip" else given:
            if isinstance(arg, ast.Constant):
                yield str(arg.value)
            elif isinstance(arg, ast.JoinedStr):
                yield "".join(str(v.value) if isinstance(v, ast.Constant) else "{}"
                              for v in arg.values)


def test_every_skip_fails_where_servers_are_required_but_for_root() -> None:
    """Under --harness-require-servers (CI) a skip is a failure (tests/conftest.py) unless the
    test needs root, which CI has (setup.sh runs only as root): a new reason that would stay a
    skip is decided here, never found in CI's log."""
    reasons = {r for path in sorted(TESTS.glob("*.py"))
               for r in skip_reasons(ast.parse(path.read_text()))}
    assert sorted(r for r in reasons if required_by(r) is None) == [
        "iptables needs root", "partitions need root", "the vDSO patch needs root on x86_64"]
    for quiet_in_ci_before in ("no Docker engine reachable ({}): run bash docker/engine.sh",
                               "no FUSE here", "needs redis-server (harness setup)",
                               "power loss needs FUSE: fusermount3 not found (Debian package "
                               "fuse3): run `bash setup.sh`",
                               "power loss needs FUSE: the mfusepy binding does not load (x)"):
        assert required_by(quiet_in_ci_before) == "--harness-require-servers"
    assert required_by("client curator is not built: run ...") == "--harness-require-clients"
