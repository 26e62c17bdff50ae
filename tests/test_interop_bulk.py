"""EDN histories and Jepsen logs read in columns (harness.presentation.interop_bulk) against the
strict reader (interop.load_any): the same ops and the same verdict, counts and witness where the
columns read a file; where they do not (an odd but legal form, a malformed file), the strict
reader reads it, and its refusal is the only one, word for word."""

from __future__ import annotations

import contextlib
import random
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from checker import lockorder
from checker.linearizable import check
from harness.core import history_bulk, history_file
from harness.core.history import HistoryError
from harness.presentation import interop, interop_bulk
from harness.presentation.check_file import check_file
from harness.presentation.interop import dumps_edn, load_any, write_edn_history
from tests.test_columns import histories
from tests.test_linearizable import generated_service, load_bench

Op = dict[str, Any]
LOCK_MODELS = ("mutex", "fenced-mutex")
LIMITS = {"time_limit": 60.0, "max_states": 10**7, "max_memory": 8 << 30}


@pytest.fixture(autouse=True)
def strict_sections(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lockorder, "STRICT", True)


def strict(path: Path) -> list[Op] | str:
    """What the strict reader makes of the file: its ops, or its error."""
    try:
        return load_any(path)
    except HistoryError as e:
        return str(e)


def agree(path: Path, block: int, monkeypatch: pytest.MonkeyPatch, *, plain: bool | None = None
          ) -> Any:
    """Read ``path`` both ways (blocks of ``block`` bytes): where the columns read it, the
    strict reader reads the same ops and every lock model decides them alike. ``plain``:
    whether the columns must read it."""
    monkeypatch.setattr(history_bulk, "BLOCK", block)
    ops = strict(path)
    cols = interop_bulk.read_columns(path, smallest=0)
    if plain is not None:
        assert (cols is not None) is plain, ops if isinstance(ops, str) else path.read_text()[:300]
    with contextlib.suppress(InvalidArgument):  # (outside a hypothesis test: no events)
        event("read in columns" if cols is not None else
              "read strictly" if not isinstance(ops, str) else "refused")
    if cols is None:
        return None
    assert not isinstance(ops, str), f"the columns read what the strict reader refuses: {ops}"
    assert cols.ops() == ops
    assert interop.positions(cols) == interop.positions(ops)  # (times, or said not to be)
    assert [type(op["process"]) for op in cols.ops()] == [type(op["process"]) for op in ops]
    for model in LOCK_MODELS:
        assert check(cols, model) == check(ops, model), model
    return cols


# ---------------------------------------------------------------------------------------------
# Writers: our EDN writer, Jepsen's key order, other legal spellings, Jepsen's log lines

STYLES = ("ours", "jepsen", "no-commas", "strings", "no-index", "no-time")


def edn_line(op: Op, style: str) -> str:
    """One op as an EDN map in a style (all read alike by the strict reader)."""
    if style == "ours":
        return interop.op_to_edn(op)
    keys = ["type", "f", "value", "time", "process", "index", "lock"]
    if style == "no-index":
        keys.remove("index")
    if style == "no-time":
        keys.remove("time")
    parts = []
    for k in keys:
        if k not in op:
            continue
        v = op[k]
        # type and f keywords, lock a string; in style "strings" the other way round
        keyword = k in ("type", "f", "lock") and (k == "lock") == (style == "strings")
        text = ":" + v if keyword and v is not None else dumps_edn(v)
        parts.append(f":{k} {text}")
    return "{" + (" " if style == "no-commas" else ", ").join(parts) + "}"


def write_edn(path: Path, ops: list[Op], style: str) -> None:
    if style == "ours":
        write_edn_history(path, ops)
    else:
        path.write_text("".join(edn_line(op, style) + "\n" for op in ops))


def log_line(op: Op, prefix: str) -> str:
    return f"{prefix}{op['process']}\t:{op['type']}\t:{op['f']}\tnil"


def write_log(path: Path, ops: list[Op], prefix: str) -> None:
    path.write_text("".join(log_line(op, prefix) + "\n" for op in ops))


def uniform(ops: list[Op], lock: str | None = "lock") -> list[Op]:
    """The ops with the same fields each (an index, a lock): the shape every op of a file
    read in columns shares."""
    return [{"index": i, "time": op["time"], "process": op["process"], "type": op["type"],
             "f": op["f"], "value": None, "lock": lock} for i, op in enumerate(ops)]


# ---------------------------------------------------------------------------------------------
# Plain files: read in columns, as the strict reader reads them


def test_generated_lock_services_are_read_in_columns_in_every_style(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's simulated lock service, valid and with a grant inside another's
    section, written in each style and as a log: read in columns, the same ops and verdicts."""
    rnd = random.Random(5)
    decided = {True: 0, False: 0}
    for i in range(24):
        h = generated_service(rnd, 400, 8, invalid=bool(i % 2))
        ops = uniform(h, rnd.choice(["lock", None, "a-b"]))
        style = STYLES[i % len(STYLES)]
        path = tmp_path / f"h{i}.edn"
        write_edn(path, ops, style)
        # (the injected grant may be 1 ns later than the next op: the strict reader keeps the
        # file's order, the columns are by time and leave such a file to it)
        ordered = all(a["time"] <= b["time"] for a, b in pairwise(ops))
        cols = agree(path, rnd.choice([64, 999, 4 << 20]), monkeypatch, plain=ordered)
        if cols is not None:
            decided[check(cols, "mutex")["valid"] is True] += 1
        log = tmp_path / f"h{i}.log"
        write_log(log, ops, rnd.choice(["INFO  jepsen.util - ", "", "jepsen.util: "]))
        agree(log, rnd.choice([64, 4 << 20]), monkeypatch, plain=True)  # (times made up)
    assert min(decided.values()) >= 4, decided


def test_a_lock_nil_absent_or_named_and_a_value_or_none_may_differ_line_by_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ops = uniform(load_bench().mutex_history(300, 4, 1))
    lock_of: dict[int, str | None] = {}
    for op in ops:
        if op["type"] == "invoke":
            lock_of[op["process"]] = ("lock", None, "absent")[op["index"] % 3]
        if lock_of[op["process"]] == "absent":
            del op["lock"]
        else:
            op["lock"] = lock_of[op["process"]]
        if op["index"] % 5 == 0:
            del op["value"]
    path = tmp_path / "h.edn"
    write_edn_history(path, ops)
    cols = agree(path, 500, monkeypatch, plain=True)
    assert {cols.op(i).get("lock", "absent") for i in range(len(cols))} == {"lock", None,
                                                                           "absent"}


def test_comments_blank_lines_and_log_lines_of_no_op_are_left_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the strict reader reads no op from (an EDN comment or blank line, a log's other
    lines, Jepsen's among them) is left out line by line: the file is still read in columns,
    the ops numbered and timed as the strict reader does (a log's by their position)."""
    ops = uniform(load_bench().mutex_history(300, 4, 7))
    edn = [interop.op_to_edn(op) for op in ops]
    for at, extra in ((0, "; Jepsen history, abridged"), (40, ""), (41, " ,\t"),
                      (300, '  ; a comment with "quotes", {braces} and \u2028 é'),
                      (len(edn), "")):
        edn.insert(at, extra)
    path = tmp_path / "h.edn"
    path.write_text("\n".join(edn) + "\n")
    agree(path, 1000, monkeypatch, plain=True)
    log = [log_line(op, "INFO  jepsen.util - ") for op in ops]
    for at, extra in ((0, "INFO  jepsen.core - Running test jepsen.core/lock"),
                      (10, "2017-03-07 13:46:43,579{GMT}\tINFO\t[jepsen nemesis] jepsen.core"),
                      (200, ""), (201, "WARN  jepsen.util - Process 3 crashed"),
                      (len(log), "INFO  jepsen.core - Everything looks good! ヽ('ー`)ノ")):
        log.insert(at, extra)
    path = tmp_path / "h.log"
    path.write_text("\n".join(log) + "\n")
    cols = agree(path, 1000, monkeypatch, plain=True)
    assert cols.op(300)["time"] == 300 and interop.positions(cols)
    path.write_text("INFO  jepsen.core - 1 setting up\n" * 30 + "\n".join(log) + "\n")
    agree(path, 64, monkeypatch, plain=True)  # (blocks of no op, a number a line, first)
    for bad in ("INFO  jepsen.util - 3\t:ok\t:acquire\t7",  # an op, not plain
                "INFO  jepsen.core - a line\rINFO  jepsen.util - 3\t:info\t:acquire\tnil",
                "INFO  jepsen.core - not UTF-8 \udcff"):
        path.write_bytes(("\n".join([*log[:150], bad, *log[150:]]) + "\n").encode(
            "utf-8", "surrogateescape"))
        agree(path, 1000, monkeypatch, plain=False)


def jepsen_log_line(op: Op, k: int) -> str:
    """An op line as Jepsen's log writes it: a time stamp, a level, a worker's name."""
    ms = op["time"] // 1_000_000 + k
    return (f"2017-03-07 13:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}{{GMT}}"
            f"\tINFO\t[jepsen worker {op['process'] % 5}] jepsen.util: {log_line(op, '')}")


def test_a_jepsen_log_with_time_stamps_and_workers_is_read_in_columns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The numbers of a line's time stamp and worker (with leading zeros: nobody reads them)
    are numbers of its shape: the log is read in columns, as the strict reader reads it; an
    op line with a number more or less before its process (a nemesis line's, say) is not."""
    ops = uniform(load_bench().mutex_history(300, 4, 9))
    lines = ["2017-03-07 13:46:40,001{GMT}\tINFO\t[main] jepsen.core: Running test",
             *(jepsen_log_line(op, k) for k, op in enumerate(ops)),
             "2017-03-07 13:59:59,999{GMT}\tINFO\t[main] jepsen.core: Everything looks good!"]
    path = tmp_path / "jepsen.log"
    path.write_text("\n".join(lines) + "\n")
    cols = agree(path, 700, monkeypatch, plain=True)
    assert len(cols) == len(ops)
    for other in ("[jepsen nemesis 2] jepsen.util: 1\t:info\t:acquire\tnil",
                  "[jepsen worker] jepsen.util: 1\t:info\t:acquire\tnil",
                  "[jepsen worker 1] jepsen.util: 01\t:info\t:acquire\tnil"):
        bad = [*lines[:200], lines[200].split("\tINFO\t")[0] + "\tINFO\t" + other,
               *lines[201:]]
        path.write_text("\n".join(bad) + "\n")
        agree(path, 700, monkeypatch, plain=False)


# ---------------------------------------------------------------------------------------------
# Odd and malformed files: the strict reader's


def _spoil(lines: list[str], kind: int, at: int) -> list[str]:
    """One line (or the file) made odd but legal, or malformed."""
    line = lines[at]
    edits = {
        0: lambda: [*lines[:at], "; a comment", *lines[at:]],
        1: lambda: [*lines[:at], line.replace(", ", ",\n ", 1), *lines[at + 1:]],
        2: lambda: _sub(lines, at, r":process -?\d+", ":process :nemesis"),
        3: lambda: _sub(lines, at, r"\}$", ", :extra #{1 2}}"),
        4: lambda: _sub(lines, at, r"^\{", "#jepsen.history.Op{"),
        5: lambda: _sub(lines, at, ", ", ",, "),
        6: lambda: _sub(lines, at, r":time (\d)", r":time 0\1"),
        7: lambda: _sub(lines, at, r":process (\d+)", r":process \1N"),
        8: lambda: _sub(lines, at, r":time \d+,? ?", ""),
        9: lambda: _sub(lines, at, r"\}$", ", :f :acquire}"),
        10: lambda: _sub(lines, at, ":value nil", ":value 1"),
        11: lambda: ["[" + lines[0], *lines[1:-1], lines[-1] + "]"],
        12: lambda: [*lines[:at], line + "\r", *lines[at + 1:]],
        13: lambda: [*lines[:at], "", *lines[at:]],
        14: lambda: [*lines[:at], line + " ", *lines[at + 1:]],
        15: lambda: _sub(lines, at, r':lock "lock"', r':lock "lo\\"ck"'),
        16: lambda: _sub(lines, at, r':lock "lock"', ':lock "l7"'),
        17: lambda: _sub(lines, at, r":f :(\w+)", r':f "\1"'),
        18: lambda: _sub(lines, at, r":type :\w+", ":type :bogus"),
        19: lambda: _sub(lines, at, r":process (\d+)", r":process -\1"),
        20: lambda: _sub(lines, at, r":index \d+", ":index nil"),
        21: lambda: ["\ufeff" + lines[0], *lines[1:]],
        22: lambda: [*lines[:at], line[: len(line) // 2], *lines[at + 1:]],
        23: lambda: _sub(lines, at, r":time \d+", ":time 0"),
        24: lambda: _sub(lines, at, r":lock \"lock\"", ":lock \"" + "l" * 201 + "\""),
        25: lambda: _sub(lines, at, r":index \d+", ":index 0"),
        26: lambda: _sub(lines, at, r":f :\w+", ":f :release"),
        27: lambda: _sub(lines, at, r":process \d+", ":process 12345678901234567890"),
        28: lambda: _sub(lines, at, r", ", " "),
        29: lambda: _sub(lines, at, r":type :(\w+)", r':type "\1"'),
        30: lambda: _sub(lines, at, r':process (\d+)(.*):lock "lo', r':process \2:lock "lo\1'),
    }
    return edits[kind]()


SPOILS = 31


def _sub(lines: list[str], at: int, pattern: str, repl: str) -> list[str]:
    import re

    return [*lines[:at], re.sub(pattern, repl, lines[at], count=1), *lines[at + 1:]]


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(h=histories(), style=st.sampled_from(STYLES), block=st.sampled_from([1, 90, 333, 4 << 20]),
       spoils=st.lists(st.tuples(st.integers(-1, SPOILS - 1), st.integers(0, 10**6)),
                       max_size=2))
def test_any_history_in_edn_reads_as_the_strict_reader_reads_it(
        h: list[Op], style: str, block: int, spoils: list[tuple[int, int]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Lock histories of any shape (overlaps, ties, unknown outcomes, changed completions),
    some lines made odd (a comment, a map over two lines, a nemesis process, a set, a record,
    ``,,``, ``0123``, ``3N``, no time, a vector of maps, CR, a BOM, ...) or malformed (a
    duplicate key, a cut line, a bad type, a long name): the columns read and decide what the
    strict reader does, or leave the file to it."""
    lines = [edn_line(op, style) if style != "ours" else interop.op_to_edn(op) for op in h]
    for kind, where in spoils:
        if lines and kind >= 0:
            lines = _spoil(lines, kind, where % len(lines))
    path = tmp_path / "h.edn"
    path.write_text("".join(x + "\n" for x in lines))
    agree(path, block, monkeypatch)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(h=histories(), prefix=st.sampled_from(["INFO  jepsen.util - ", "", "x jepsen.util: "]),
       block=st.sampled_from([1, 90, 4 << 20]),
       spoil=st.sampled_from(["", "other", "error", "value", "zero", "minus", "space", "cr",
                              "nemesis", "tab", "digit", "twice"]),
       where=st.integers(0, 10**6))
def test_any_history_as_a_log_reads_as_the_strict_reader_reads_it(
        h: list[Op], prefix: str, block: int, spoil: str, where: int, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [log_line(op, prefix) for op in h]
    if lines and spoil:
        at = where % len(lines)
        line = lines[at]
        lines[at] = {
            "other": "INFO  jepsen.core - Running test",  # a line that is no op: skipped
            "error": line + "\t:timed-out",
            "value": line.removesuffix("nil") + "3",
            "zero": line.replace("\t", "0\t", 1) if prefix else "0" + line,
            "minus": prefix + "-" + line[len(prefix):],
            "space": line.replace("\t", "   "),
            "cr": line + "\r",
            "nemesis": prefix + ":nemesis" + line[line.index("\t"):],
            "tab": line + "\t",
            "digit": line.replace(":acquire", ":acquire2"),
            "twice": prefix + line,
        }[spoil]
    path = tmp_path / "h.log"
    path.write_text("".join(x + "\n" for x in lines))
    agree(path, block, monkeypatch)


MALFORMED = {
    "a duplicate key": (9, "duplicate key :f"),
    "a cut line": (22, "unclosed '{'"),
    "an unknown type": (18, "unknown type 'bogus'"),
    "a lock name too long": (24, "'lock' must be a short name"),
    "an index twice": (25, "duplicate index"),
    "a completion of another f": (26, "malformed history"),
    "a process's digits moved into its lock": (30, "needs an even number of forms"),
}


@pytest.mark.parametrize("what", sorted(MALFORMED))
def test_a_malformed_file_is_refused_by_the_strict_reader_in_its_words(
        what: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the first blocks (its shapes learnt, many lines read in columns), one line of a
    big file is wrong: the columns leave the file to the strict reader, and ``harness check``
    says the strict reader's error, naming the same line."""
    kind, words = MALFORMED[what]
    ops = uniform(load_bench().mutex_history(2000, 5, 3))
    lines = [interop.op_to_edn(op) for op in ops]
    at = next(i for i in range(3000, len(lines))
              if ops[i]["type"] != "invoke" and ops[i]["f"] == "acquire")
    path = tmp_path / "h.edn"
    path.write_text("".join(x + "\n" for x in _spoil(lines, kind, at)))
    monkeypatch.setattr(history_bulk, "BLOCK", 4096)
    monkeypatch.setattr(history_file, "BULK_BYTES", 0)
    assert interop_bulk.read_columns(path) is None
    message = strict(path)
    assert isinstance(message, str) and words in message, message
    with pytest.raises(HistoryError) as e:
        check_file(path, None, LIMITS)
    assert str(e.value) == message


def test_a_shape_the_strict_reader_reads_otherwise_is_not_learnt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The safety net: a layout that splits a line into fields other than the strict reader
    reads (here made to, by telling a wrong f) learns no shape, and the file is not read."""
    path = tmp_path / "h.edn"
    write_edn_history(path, uniform(load_bench().mutex_history(50, 2, 1)))
    assert interop_bulk.read_columns(path, smallest=0) is not None
    real = interop_bulk._Edn.split

    def lying(self: Any, line: bytes) -> Any:
        got = real(self, line)
        if got is not None:
            got[1]["f"] = "release" if got[1]["f"] == "acquire" else "acquire"
        return got

    monkeypatch.setattr(interop_bulk._Edn, "split", lying)
    assert interop_bulk.read_columns(path, smallest=0) is None


def test_harness_check_says_the_same_of_edn_a_log_and_jsonl(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    """``harness check`` of the same history as JSONL (read in columns), EDN (in columns) and
    EDN with one op that is not plain (read by the strict reader): the same lines, witness
    included; and of a log, in columns and not, alike."""
    from harness.core.column_lines import write_history

    bench = load_bench()
    ops = uniform(bench.inject_violation(bench.mutex_history(3000, 6, 4)))
    monkeypatch.setattr(history_file, "BULK_BYTES", 0)
    paths = {"jsonl": tmp_path / "h.jsonl", "edn": tmp_path / "h.edn",
             "strict": tmp_path / "s.edn"}
    write_history(paths["jsonl"], ops)
    write_edn_history(paths["edn"], ops)
    write_edn_history(paths["strict"], [{**ops[0], "token": None}, *ops[1:]])
    assert interop_bulk.read_columns(paths["edn"]) is not None
    assert interop_bulk.read_columns(paths["strict"]) is None
    assert history_file.read_columns(paths["jsonl"], smallest=0) is not None
    read = interop_bulk.read_columns
    in_columns: list[bool] = []  # whether check_file read each foreign file in columns

    def spied(*args: Any, **kwargs: Any) -> Any:
        got = read(*args, **kwargs)
        in_columns.append(got is not None)
        return got

    monkeypatch.setattr(interop_bulk, "read_columns", spied)
    outs = {}
    for name, path in paths.items():
        assert check_file(path, None, LIMITS) == 1
        outs[name] = capsys.readouterr().out.replace(str(path), "PATH")
    assert in_columns == [True, False]
    assert outs["jsonl"] == outs["edn"] == outs["strict"], outs
    assert "INVALID  PATH as mutex" in outs["edn"] and "had not released" in outs["edn"]
    logs = {"cols": tmp_path / "h.log", "strict": tmp_path / "s.log"}
    write_log(logs["cols"], ops, "INFO  jepsen.util - ")
    logs["strict"].write_bytes(logs["cols"].read_bytes().replace(b"\n", b"\r\n"))  # (CRLF)
    said = []
    for path in logs.values():
        code = check_file(path, None, LIMITS)
        said.append((code, capsys.readouterr().out.replace(str(path), "PATH")))
    assert in_columns == [True, False, True, False]
    assert said[0] == said[1] and said[0][0] == 1 and "INVALID  PATH" in said[0][1], said


_PIECES = st.sampled_from([
    "", " ", ",", "\n", "\t", "\r", ";", "#", "#_", "{", "}", "[", "]", '"', "\\", ":", "-",
    "0", "1", "9", "N", "M", "nil", ":f", ":lock", ":index", ":time", ":process", ":nemesis",
    ":acquire", ":release", ":ok", '"lock"', "\ufeff", "\u2028", "\x85", "é", "jepsen.util - ",
])


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(style=st.sampled_from([*STYLES, "log", "jepsen-log"]), size=st.integers(1, 30),
       seed=st.integers(0, 99),
       edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 3), _PIECES),
                      min_size=1, max_size=4),
       block=st.sampled_from([1, 100, 4 << 20]))
def test_a_plain_file_edited_anywhere_reads_as_the_strict_reader_reads_it(
        style: str, size: int, seed: int, edits: list[tuple[int, int, str]], block: int,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain file (read in columns) with a few characters cut or pasted in anywhere: the
    columns read what the strict reader reads, or leave the file to it."""
    ops = uniform(load_bench().mutex_history(size, 3, seed))
    lines = ([log_line(op, "INFO  jepsen.util - ") for op in ops] if style == "log" else
             [jepsen_log_line(op, k) for k, op in enumerate(ops)] if style == "jepsen-log" else
             [edn_line(op, style) for op in ops])
    text = "".join(x + "\n" for x in lines)
    for at, cut, piece in edits:
        at %= len(text) + 1
        text = text[:at] + piece + text[at + cut:]
    path = tmp_path / ("h.edn" if style in STYLES else "h.log")
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    agree(path, block, monkeypatch)


def test_columns_sized_from_the_first_block_grow_when_it_misleads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The columns are sized from the first block's bytes an op: a file whose first ops are
    long (a long lock name) holds more ops than that says; it is read whole all the same."""
    ops = uniform(load_bench().mutex_history(600, 3, 2, crash_rate=0.0))
    lock_of: dict[int, str] = {}
    for k, op in enumerate(ops):
        if op["type"] == "invoke":
            lock_of[op["process"]] = "l" * 150 if k < 20 else "m"
        op["lock"] = lock_of[op["process"]]
    path = tmp_path / "h.edn"
    write_edn_history(path, ops)
    grown = []
    real = interop_bulk.ColumnStore.put

    def put(self: Any, at: int, n: int, nbytes: int, columns: Any) -> None:
        before = len(self.arrays[0]) if self.arrays else 0
        real(self, at, n, nbytes, columns)
        grown.append(bool(before) and len(self.arrays[0]) > before)

    monkeypatch.setattr(interop_bulk.ColumnStore, "put", put)
    cols = agree(path, 2048, monkeypatch, plain=True)
    assert len(cols) == len(ops) and any(grown)
