"""The memory budget (harness/core/budget.py): a history file too large for it is refused before
it is read, the search's cache is sized from it, and past it the address-space cap turns an
allocation into MemoryError, which the checkers' composition reports as unknown, never as a
verdict. The address-space cap is set in child processes only (it is inherited and, for a
lowered hard limit, cannot be raised again)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from harness.core import budget
from tests.harness_runs import harness

MIB = 1 << 20


def ops(n: int) -> list[dict[str, Any]]:
    """``n`` sessions of one process after another: acquire, release, nothing concurrent."""
    out: list[dict[str, Any]] = []
    for k in range(n):
        p, t = k % 2, k * 10_000_000
        for dt, kind, f in ((0, "invoke", "acquire"), (1, "ok", "acquire"),
                            (5, "invoke", "release"), (6, "ok", "release")):
            out.append({"index": len(out), "time": t + dt * 1_000_000, "process": p,
                        "type": kind, "f": f, "value": None, "lock": "lock"})
    return out


def write_history(path: Path, padding: int = 0) -> Path:
    path.write_text("".join(json.dumps(op) + "\n" for op in ops(4)) + "\n" * padding)
    return path


def in_child(code: str) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter; it prints one JSON object as its last line."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


# the size of a file --------------------------------------------------------------------------
@pytest.mark.parametrize(("size", "fits"), [
    (0, True),
    (64 * MIB // 10, True),  # ten times its size is still within 64 MiB
    (64 * MIB // 10 + 1, False),
    (100 * MIB, False),
])
def test_a_file_fits_when_ten_times_its_size_is_within_the_budget(
        tmp_path: Path, size: int, fits: bool) -> None:
    path = tmp_path / "h.jsonl"
    with path.open("wb") as f:
        f.truncate(size)  # sparse: nothing is written, nothing need be read
    reason = budget.file_fits(path, 64 * MIB)
    if fits:
        assert reason is None
    else:
        assert reason == (f"{size / MIB:.0f} MiB on disk: checking it needs more than "
                          "--max-memory 64 MiB (raise --max-memory)")


def test_a_file_that_cannot_be_read_is_left_to_the_reader(tmp_path: Path) -> None:
    assert budget.file_fits(tmp_path / "absent.jsonl", 64 * MIB) is None


def test_harness_check_refuses_an_oversized_file_as_unknown_before_reading_it(
        tmp_path: Path) -> None:
    # a valid history padded with blank lines to 7 MiB: within --max-memory 128M it is read and
    # checked (VALID); under 64M its size alone refuses it, as unknown, not as a verdict
    path = write_history(tmp_path / "padded.jsonl", padding=7 * MIB)
    big = harness("check", "--max-memory", "128M", str(path))
    assert big.returncode == 0, big.stdout + big.stderr
    assert big.stdout.startswith("VALID "), big.stdout
    small = harness("check", "--max-memory", "64M", str(path))
    assert small.returncode == 2, small.stdout + small.stderr
    assert small.stdout.splitlines() == [
        f"UNKNOWN  {path}: 7 MiB on disk: checking it needs more than --max-memory 64 MiB "
        "(raise --max-memory)"]
    # refused unread: a file of NULs of that size is not a history, yet it is not read either
    nuls = tmp_path / "nuls.jsonl"
    with nuls.open("wb") as f:
        f.truncate(7 * MIB)
    assert harness("check", "--max-memory", "64M", str(nuls)).returncode == 2
    unread = harness("check", "--max-memory", "128M", str(nuls))
    assert unread.returncode == 3 and unread.stderr.startswith("harness: "), unread.stderr


def test_the_search_cache_is_sized_from_the_budget() -> None:
    assert budget.states_for(64 * MIB) == 64 * MIB // 320
    assert budget.states_for(1 * MIB) == 10_000  # never below the floor


# the address-space cap --------------------------------------------------------------------
def test_the_cap_is_the_budget_plus_headroom_and_never_raised() -> None:
    got = in_child("""
        import json, resource
        from harness.core.budget import limit_memory
        AS, M = resource.RLIMIT_AS, 1 << 20
        limit_memory(64 * M)
        first = resource.getrlimit(AS)[0]
        limit_memory(1024 * M)  # a larger budget later: the cap stays
        second = resource.getrlimit(AS)[0]
        resource.setrlimit(AS, (300 * M, 400 * M))
        limit_memory(64 * M)  # already below budget + headroom: left alone
        third = resource.getrlimit(AS)
        resource.setrlimit(AS, (400 * M, 400 * M))
        limit_memory(1024 * M)  # a hard limit below: never asked for more than it
        print(json.dumps([first, second, list(third), list(resource.getrlimit(AS))]))
    """)
    assert got == [(64 + 512) * MIB, (64 + 512) * MIB, [300 * MIB, 400 * MIB],
                   [400 * MIB, 400 * MIB]]


def test_memory_past_the_budget_is_unknown_and_a_violation_still_stands() -> None:
    got = in_child("""
        import json
        from harness.core.budget import limit_memory
        from harness.core.checks import compose
        M = 1 << 20
        limit_memory(64 * M)
        def hog(history):  # twice the whole cap: cannot be mapped under it
            return {"valid": True, "bytes": len(bytearray(2 * (64 + 512) * M))}
        def small(history):  # well within the budget
            return {"valid": True, "bytes": len(bytearray(32 * M))}
        def violation(history):
            return {"valid": False}
        print(json.dumps({
            "hog": compose([], [("hog", hog, {})]),
            "small": compose([], [("small", small, {})]),
            "hog+small": compose([], [("hog", hog, {}), ("small", small, {})]),
            "hog+violation": compose([], [("hog", hog, {}), ("violation", violation, {})]),
        }))
    """)
    unknown = {"valid": "unknown", "crashed": True, "error": "MemoryError: out of memory"}
    assert got["hog"] == {"valid": "unknown", "checks": {"hog": unknown},
                          "crashed-checkers": ["hog"]}
    assert got["small"] == {"valid": True, "checks": {"small": {"valid": True,
                                                               "bytes": 32 * MIB}}}
    assert got["hog+small"]["valid"] == "unknown"  # nothing unknown passes as valid
    assert got["hog+violation"]["valid"] is False  # a violation found is real
    assert got["hog+violation"]["checks"]["hog"] == unknown
