"""`harness check PATH...`: a history file (JSONL, EDN, a Jepsen log; checked for
linearizability against a model, given or inferred from its ops) or a run directory (verified
against its manifest, checked again with its workload's checkers, and its results.json and
report.html written beside it, in ``RUN/rechecks/<stamp>/``, the run left as it was; over the
run's own with ``--write``), each said in a line or a summary, and the exit code of the worst.

Its imports are few on purpose, as :mod:`harness.cli`'s: a check of a small file takes
milliseconds, and scripts call it once per file."""

from __future__ import annotations

import os
import sys
import time

from harness.core.errors import (
    EXIT_INVALID,
    EXIT_SETUP,
    EXIT_UNKNOWN,
    EXIT_USAGE,
    EXIT_VALID,
    HarnessError,
    UsageError,
    exit_code_for,
)
from harness.core.history import HistoryError

TYPE_CHECKING = False  # see harness/core/history.py
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from os import PathLike
    from typing import Any

    from harness.core.history import Op


def check_paths(paths: Sequence[str | PathLike[str]], model: str | None,
                limits: dict[str, Any], write: bool = False) -> int:
    """``harness check PATH...``: each history file or run directory checked and said; the
    exit code of the worst. A path that cannot be checked is said in one line and the next one
    is checked (with one path, its error is the command's)."""
    if len(paths) == 1:
        return check_one(paths[0], model, limits, write)
    worst = EXIT_VALID
    for path in paths:
        try:
            code = check_one(path, model, limits, write)
        except (HarnessError, HistoryError) as e:  # said, and the next one is checked
            for line in str(e).splitlines() or [""]:
                print(f"harness: {line}", file=sys.stderr)
            code = e.exit_code if isinstance(e, HarnessError) else EXIT_SETUP
        worst = min(worst, code, key=SEVERITY.index)
    return worst


SEVERITY = (EXIT_INVALID, EXIT_USAGE, EXIT_SETUP, EXIT_UNKNOWN, EXIT_VALID)  # worst first


def check_one(path: str | PathLike[str], model: str | None, limits: dict[str, Any],
              write: bool = False) -> int:
    """``path``: a str from :mod:`harness.check_argv`, a Path from argparse. A run directory's
    results and report go to a new re-check directory beside it (over its own: ``write``),
    said in one line."""
    if os.path.isfile(path):  # a history file: only the checker and the reader are imported
        return check_file(path, model, limits)

    from pathlib import Path

    from harness.controller.checking import check_history, exit_code
    from harness.controller.store import open_run
    from harness.presentation.report import write_report
    from harness.presentation.runs import could_not, print_summary

    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such file or run directory")
    if model is not None:
        raise UsageError("--model is for a history file; a run directory is checked with the "
                         "checkers of its workload")
    run = open_run(path)
    test = run.load_test()
    spec, status = test["spec"], str(test.get("status") or "starting")
    unverified = run.verify(test)  # a directory that does not match its manifest: exit 3
    history = run.load_history(save=write)
    error = test.get("error") if status != "complete" else None
    results = check_history(history, spec, status=status, limits=limits,
                            error=error if isinstance(error, str) else None)
    if unverified:  # no manifest to hold it to: said, the verdict as its status gives
        results["unverified"] = unverified
    to = run if write else run.recheck()
    to.save_results(results)
    write_report(run, spec, history, results, to)
    print_summary(results, run, history=history, report=False)
    where = "over the run's own" if write else "beside the run, which is unchanged"
    print(f"wrote {to.results.name} and {to.report.name} {where}: {to.path}")
    code = exit_code(results)
    if code == EXIT_SETUP:
        print(f"harness: {could_not(results)}", file=sys.stderr)
    return code


def check_limits(time_limit: float, max_memory_text: str | None) -> dict[str, Any]:
    """--time-limit and --max-memory: finite and positive; the memory budget is enforced on
    this process (a search that would pass it ends as unknown, with the reason)."""
    import math

    from harness.core.budget import limit_memory, states_for

    if not math.isfinite(time_limit) or time_limit <= 0:
        raise UsageError(f"--time-limit must be a positive number of seconds, got "
                         f"{time_limit}")
    max_memory = parse_size(max_memory_text)
    limit_memory(max_memory)
    return {"time_limit": time_limit, "max_states": states_for(max_memory),
            "max_memory": max_memory}


def parse_size(text: str | None) -> int:
    from harness.core.budget import default_memory

    if text is None:
        return default_memory()
    units = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower().removesuffix("b").removesuffix("i")
    unit = t[-1:] if t[-1:] in units else ""
    try:
        value = float(t[: len(t) - len(unit)] if unit else t) * units[unit]
    except ValueError:
        raise UsageError(f"--max-memory {text!r}: expected a size such as 512M or 2G") from None
    if not value >= 64 << 20 or value > 1 << 50:
        raise UsageError(f"--max-memory {text!r}: give at least 64M")
    return int(value)


PROGRESS_BYTES = 16 << 20  # a history file this large takes seconds: say what is going on


def file_progress(path: str | PathLike[str]) -> tuple[Any, Callable[[int], None]] | None:
    """For a large file read at a terminal: a progress reporter on stderr, and the callback
    its reader calls with the bytes read so far. None for a small file, or when stderr is not
    a terminal: in a script or a log, stderr keeps the one line of an error, if any."""
    if not sys.stderr.isatty():
        return None
    try:
        size = os.stat(path).st_size
    except OSError:
        return None
    if size < PROGRESS_BYTES:
        return None
    from harness.controller.progress import Progress
    from harness.core.text import line

    name = os.path.basename(path)
    progress = Progress()
    progress.line(f"reading {line(str(path))} ({size / 2**20:.0f} MiB)")
    return progress, lambda done: progress.fraction(f"reading {name}", done, size)


def client_ops(ops: list[Op]) -> tuple[list[Op], set[str], bool]:
    """The clients' ops (not the nemesis's), their fs, and whether an acquire has a token: each
    a pass in C over a million ops, not a Python loop."""
    from itertools import compress, repeat
    from operator import is_not, itemgetter, ne

    get = dict.get
    client = list(compress(ops, map(ne, map(get, ops, repeat("process")), repeat("nemesis"))))
    fs = set(map(str, set(map(itemgetter("f"), client))))
    with_token = compress(client, map(is_not, map(get, client, repeat("token")), repeat(None)))
    tokens = any(op.get("f") == "acquire" for op in with_token)
    return client, fs, tokens


def _columns(path: str | PathLike[str], progress: tuple[Any, Callable[[int], None]] | None
             ) -> Any:
    """A big JSONL, EDN or Jepsen log file of plain client ops in columns
    (:mod:`harness.core.columns`), or None: then it is read as ops
    (:func:`harness.presentation.interop.load_any`). By extension, as load_any tells them."""
    from harness.core import history_file

    ext = os.path.splitext(os.fspath(path))[1].lower()
    try:
        if os.stat(path).st_size < history_file.BULK_BYTES:
            return None  # (a small file: the strict reader, sooner than importing numpy)
    except OSError:
        return None
    read = history_file.read_columns
    if ext != ".jsonl":
        from harness.presentation.interop_bulk import read_columns as read
    return read(path, None if progress is None else progress[1])


def check_file(path: str | PathLike[str], model: str | None, limits: dict[str, Any]) -> int:
    """A foreign (or our own) history file, checked for linearizability against ``model``
    (inferred from its ops when not given)."""
    from checker.linearizable import check
    from checker.models import MODELS, infer, times_are_positions
    from harness.core.budget import file_fits
    from harness.core.text import line, show, verdict_word
    from harness.presentation.interop import load_any, positions

    given = model is not None
    if model is not None and model not in MODELS:
        raise UsageError(f"unknown model {model!r}: use one of {', '.join(sorted(MODELS))}")
    reason = file_fits(path, limits["max_memory"])
    if reason is not None:
        print(f"UNKNOWN  {line(str(path))}: {reason}")
        return exit_code_for("unknown")
    progress = file_progress(path)
    started = time.monotonic()
    ops: Any = _columns(path, progress)
    if ops is not None:  # every op a client's, none with a token
        client, fs, tokens = ops, set(ops.fs), False
    else:
        ops = load_any(path, None if progress is None else progress[1])
        client, fs, tokens = client_ops(ops)
    inferred = infer(fs, tokens)
    if model is None or not client:  # no client op: nothing to test, whatever the model
        if inferred is None:
            print(f"UNKNOWN  {line(str(path))}: {len(client)} client ops, none of them an op a "
                  f"model checks (f: {', '.join(sorted(fs)) or 'none'}); nothing was tested")
            return exit_code_for("unknown")
        model = inferred
    elif not fs & MODELS[model].fs:
        hint = f": check it with --model {inferred}" if inferred else ""
        raise UsageError(f"{path}: the history has no op of model {model} "
                         f"({', '.join(sorted(MODELS[model].fs))}); its ops are "
                         f"{', '.join(sorted(fs)[:8]) or 'none'}{hint}")
    if progress is not None:
        progress[0].line(f"read {len(ops):,} ops in {time.monotonic() - started:.1f} s; "
                         f"checking them as {model}")
    with times_are_positions(positions(ops)):
        result = check(ops, model, time_limit=limits["time_limit"],
                       max_states=limits["max_states"])
    how = "" if given else " (inferred from its ops)"
    print(f"{verdict_word(result['valid'])}  {line(str(path))} as {model}{how}: "
          f"{result['ops']} ops in {result['parts']} part(s)")
    left = dict(result.get("ignored") or {})
    if left:
        print(f"  left out, not ops of {model}: "
              + ", ".join(f"{n} {show(f)}" for f, n in sorted(left.items())))
    if result.get("failed"):
        print(f"  left out: {result['failed']} failed op(s) (they certainly did not happen)")
    witness = result.get("witness")
    if witness:
        print(f"  {witness['explanation']}")
        if positions(ops):
            print("  (the file has no times: a position is an op's place among its ops, from "
                  "0, not a time)")
    if result.get("reason"):
        print(f"  {result['reason']}")
    return exit_code_for(result["valid"])
