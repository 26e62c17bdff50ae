"""Jepsen interop: the EDN reader and writer, Jepsen's text logs, and reading any format."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from checker.linearizable import check
from harness.core.column_lines import write_history
from harness.core.history import HistoryError
from harness.core.history_file import read_history
from harness.presentation import interop
from harness.presentation.interop import (
    Keyword,
    Symbol,
    Tagged,
    dumps_edn,
    load_any,
    loads_edn,
    parse_edn_history,
    parse_jepsen_log,
    write_edn_history,
)

JEPSEN_EDN = """\
; an etcd lock test, abridged
{:type :invoke, :f :acquire, :value nil, :process 0, :time 1000, :index 0}
{:type :invoke, :f :acquire, :value nil, :process 1, :time 2000, :index 1}
{:type :ok, :f :acquire, :value nil, :process 0, :time 3000, :index 2}
{:type :info, :f :start, :value nil, :process :nemesis, :time 3500, :index 3}
{:type :ok, :f :acquire, :value nil, :process 1, :time 4000, :index 4}
{:type :invoke, :f :release, :value nil, :process 2, :time 4400, :index 5}
{:type :fail, :f :release, :process 2, :time 4500, :error [:not-found "lease \\"x\\" gone"],
 :index 6}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# The EDN reader


def test_edn_scalars_and_collections() -> None:
    forms = loads_edn(
        'nil true false 42 -7 12N 1.5 2e3 3.25M 1/4 ##Inf ##NaN "a\\tb\\u00e9" \\a \\newline '
        ":kw :ns/kw sym [1 2] (3 4) {:a 1, \"b\" [2]} #{1 2} #inst \"2024-01-01\" "
        "#uuid \"f81d4fae-7dec-11d0-a765-00a0c91e6bf6\" #my/tag [1] #_ ignored "
        "#_[also ignored] last"
    )
    assert forms[:9] == [None, True, False, 42, -7, 12, 1.5, 2000.0, 3.25]
    assert forms[9] == 0.25 and forms[10] == math.inf and math.isnan(forms[11])
    assert forms[12] == "a\tbé" and forms[13] == "a" and forms[14] == "\n"
    assert forms[15] == Keyword("kw") and isinstance(forms[15], Keyword)
    assert forms[16] == "ns/kw" and isinstance(forms[17], Symbol)
    assert forms[18] == [1, 2] and forms[19] == [3, 4]
    assert forms[20] == {Keyword("a"): 1, "b": [2]}
    assert forms[21] == frozenset({1, 2})
    assert forms[22] == "2024-01-01" and forms[23] == "f81d4fae-7dec-11d0-a765-00a0c91e6bf6"
    assert forms[24] == Tagged("my/tag", [1])
    assert forms[25] == Symbol("last") and len(forms) == 26


def test_edn_vector_keys_and_records() -> None:
    [m] = loads_edn("{[1 2] :a}")
    assert m == {(1, 2): Keyword("a")}
    [rec] = loads_edn("#jepsen.history.Op{:index 0, :type :invoke}")
    assert rec == {Keyword("index"): 0, Keyword("type"): Keyword("invoke")}


@pytest.mark.parametrize(("text", "line", "column", "fragment"), [
    ('{:a 1}\n{:b "unterminated}', 2, 5, "unterminated string"),
    ("[1 2\n3", 2, 2, "unclosed '['"),
    ("{:a 1 :b}", 1, 1, "even number"),
    ("(1 2]", 1, 5, "expected ')'"),
    ("\n\n]", 3, 1, "unexpected ']'"),
    ("12abc", 1, 1, "'12abc' is not a number"),
    ('"bad \\q escape"', 1, 1, "unknown escape"),
    ("#", 1, 1, "unexpected '#'"),
    ("[#_]", 1, 4, "#_"),
    ("[" * 300, 1, 202, "nested deeper"),
    ("[1 2]\n  [3 'x]", 2, 6, "\"'x\" is not EDN"),
])
def test_edn_errors_name_the_line_and_column(text: str, line: int, column: int,
                                            fragment: str) -> None:
    with pytest.raises(HistoryError) as e:
        loads_edn(text, "h.edn")
    assert str(e.value).startswith(f"h.edn line {line} column {column}: ")
    assert fragment in str(e.value)


# ---------------------------------------------------------------------------------------------
# EDN histories


def test_read_jepsen_edn_history(tmp_path: Path) -> None:
    ops = load_any(write(tmp_path, "history.edn", JEPSEN_EDN))
    assert len(ops) == 7
    assert ops[0] == {"index": 0, "time": 1000, "type": "invoke", "f": "acquire",
                      "value": None, "process": 0}
    assert ops[3]["process"] == "nemesis" and ops[3]["f"] == "start"
    assert ops[6]["error"] == ["not-found", 'lease "x" gone']
    r = check(ops, "mutex")
    assert r["valid"] is False
    assert "process 1" in r["witness"]["explanation"]
    assert "process 0" in r["witness"]["explanation"]


def test_top_level_vector_without_times(tmp_path: Path) -> None:
    text = """[{:process 0, :type :invoke, :f :write, :value 1}
 {:process 0, :type :ok, :f :write, :value 1}
 {:process 1, :type :invoke, :f :read, :value nil}
 ; a comment between ops
 {:process 1, :type :ok, :f :read, :value 2}]
"""
    ops = load_any(write(tmp_path, "knossos.edn", text))
    assert [op["time"] for op in ops] == [0, 1, 2, 3]  # positions, and said to be
    assert [op["index"] for op in ops] == [0, 1, 2, 3]
    assert interop.positions(ops) and not interop.positions(load_any(
        write(tmp_path, "timed.edn", JEPSEN_EDN)))
    assert check(ops, "register")["valid"] is False


READ_ERRORS = [  # (file, its bytes (None: no such file), what its error says)
    ("a.edn", b"{:type :invoke, :f :x, :process 0, :time 1}\n"
              b"{:type :maybe, :f :x, :process 0, :time 2}\n",
     r"a\.edn line 2: unknown type 'maybe'"),
    ("b.edn", b"{:type :invoke, :f :x, :process 0, :time 1}\n\n:oops\n",
     r"b\.edn line 3: expected an op map"),
    ("c.edn", b"[{:type :invoke, :f :x, :process 0, :time 1}]\n{:a 1}",
     r"c\.edn line 2: more forms"),
    ("d.edn", b"{:type :invoke, :f :x, :time 1}", r"d\.edn line 1: missing field 'process'"),
    ("nope.edn", None, "cannot read"),
    ("e.edn", b"{:a 1}\n\xff\xfe", r"e\.edn line 2: not UTF-8"),
    ("bad.log", b'INFO  jepsen.util - 0\t:invoke\t:read\tnil\n'
                b'INFO  jepsen.util - 0\t:ok\t:read\t"unterminated\n',
     r"bad\.log line 2 column 33: invalid EDN"),
    ("w.log", b"INFO  jepsen.util - [0]\t:ok\t:read\t1\n", r"w\.log line 1: 'process'"),
    ("empty.log", b"nothing to see\n", "no Jepsen op lines"),
]


@pytest.mark.parametrize(("name", "data", "says"), READ_ERRORS, ids=[r[0] for r in READ_ERRORS])
def test_edn_and_log_errors_name_file_and_line(tmp_path: Path, name: str, data: bytes | None,
                                               says: str) -> None:
    path = tmp_path / name
    if data is not None:
        path.write_bytes(data)
    with pytest.raises(HistoryError, match=says):
        load_any(path)


OURS = [
    {"index": 0, "time": 10, "process": 3, "type": "invoke", "f": "acquire", "value": None,
     "lock": "lock"},
    {"index": 1, "time": 20, "process": 3, "type": "ok", "f": "acquire",
     "value": {"session": 1, "validity": 9.5}, "lock": "lock", "token": 7},
    {"index": 2, "time": 25, "process": "nemesis", "type": "info", "f": "partition",
     "value": "start"},
    {"index": 3, "time": 30, "process": 3, "type": "invoke", "f": "write",
     "value": {"kind": "enter", "weird key": [1, 2.5, "x\ny", None, True]}},
    {"index": 4, "time": 40, "process": 3, "type": "info", "f": "write", "value": None,
     "error": 'TimeoutError: "slow"'},
]


def test_edn_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "out.edn"
    write_edn_history(path, OURS)
    text = path.read_text()
    assert text.splitlines()[0] == ("{:index 0, :time 10, :process 3, :type :invoke, "
                                    ":f :acquire, :value nil, :lock \"lock\"}")
    assert ":process :nemesis" in text
    assert load_any(path) == OURS


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(value=json_values)
def test_edn_writer_and_reader_agree_on_any_json_value(value: Any) -> None:
    [back] = loads_edn(dumps_edn(value))
    assert json.dumps(_plain(back), sort_keys=True) == json.dumps(value, sort_keys=True)


def _plain(v: Any) -> Any:
    from harness.presentation.interop import plain

    return plain(v)


# ---------------------------------------------------------------------------------------------
# Jepsen logs


JEPSEN_LOG = """\
2017-01-01 12:00:00,000{GMT}\tINFO\t[main] jepsen.core - Running test
INFO  jepsen.util - 0\t:invoke\t:read\tnil
INFO  jepsen.util - 1\t:invoke\t:write\t3
INFO  jepsen.util - 1\t:ok\t:write\t3
INFO  jepsen.util - :nemesis\t:info\t:start\tnil
INFO  jepsen.util - 0\t:ok\t:read\t3
INFO  jepsen.util - 2\t:invoke\t:cas\t[3 4]
INFO  jepsen.util - 2\t:fail\t:cas\t[3 4]
INFO  jepsen.util - 3   :invoke :write  1
INFO  jepsen.util - 3   :info   :write  :timed-out
INFO  jepsen.util - 4\t:invoke\t:read\tnil
INFO  jepsen.util - 4\t:fail\t:read\t:timed-out
INFO  jepsen.util - Relative time begins now
"""


def test_read_jepsen_log(tmp_path: Path) -> None:
    ops = load_any(write(tmp_path, "jepsen.log", JEPSEN_LOG))
    assert len(ops) == 11
    assert ops[0] == {"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "read",
                      "value": None}
    assert ops[3]["process"] == "nemesis"
    assert ops[5]["value"] == [3, 4]
    assert interop.positions(ops)
    assert ops[8] == {"index": 8, "time": 8, "process": 3, "type": "info",
                      "f": "write", "value": "timed-out"}
    assert check(ops, "cas-register")["valid"] is True


def test_plain_history_txt_with_an_error_column() -> None:
    ops = parse_jepsen_log("0\t:invoke\t:acquire\tnil\n0\t:fail\t:acquire\tnil\t:timeout\n")
    assert ops[1]["error"] == "timeout"


# ---------------------------------------------------------------------------------------------
# load_any


def test_load_any_dispatches_on_extension_and_content(tmp_path: Path) -> None:
    jsonl = tmp_path / "history.jsonl"
    write_history(jsonl, OURS)
    assert load_any(jsonl) == OURS
    edn = write(tmp_path, "history.edn", JEPSEN_EDN)
    assert load_any(edn)[0]["f"] == "acquire"
    log = write(tmp_path, "jepsen.log", JEPSEN_LOG)
    assert len(load_any(log)) == 11
    # No telling extension: the content decides.
    assert load_any(write(tmp_path, "a", jsonl.read_text())) == OURS
    assert len(load_any(write(tmp_path, "b", JEPSEN_EDN))) == 7
    assert len(load_any(write(tmp_path, "c", "[" + JEPSEN_EDN.split("\n", 1)[1] + "]"))) == 7
    assert len(load_any(write(tmp_path, "d", JEPSEN_LOG))) == 11
    with pytest.raises(HistoryError, match="not a history"):
        load_any(write(tmp_path, "e", "hello world\n"))


def test_parse_edn_history_of_nothing_is_empty() -> None:
    assert parse_edn_history("; nothing\n") == []


# ---------------------------------------------------------------------------------------------
# Fuzz: whatever the text, a HistoryError or a history, never anything else


EDN_PIECES = [
    *'{}[]()#_:;"\\ \t\n,0123456789.-+/eENMabcfilnrstuvx\xe9\x00',
    ":type", ":invoke", ":ok", ":info", ":f", ":process", ":time", ":index", "nil",
    "##Inf", "#{", "#inst", "jepsen.util - ", "\\u00",
]
edn_ish = st.lists(st.sampled_from(EDN_PIECES), max_size=50).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(edn_ish, st.text(max_size=60)),
       ext=st.sampled_from([".edn", ".log", ".jsonl", ".txt", ""]))
def test_random_text_raises_only_history_error(tmp_path_factory: pytest.TempPathFactory,
                                               text: str, ext: str) -> None:
    directory = tmp_path_factory.mktemp("fuzz")
    for name in (f"h{ext}", "as.edn", "as.log"):  # its own reader, then EDN's and the log's
        path = directory / name
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            ops = load_any(path)
        except HistoryError:
            continue
        assert isinstance(ops, list)
        check(ops, "mutex", time_limit=5)


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=60))
def test_random_bytes_are_no_ops(tmp_path_factory: pytest.TempPathFactory,
                                 data: bytes) -> None:
    """Bytes that are not UTF-8: a HistoryError naming the line of the first bad byte; other
    random bytes: a HistoryError naming the file, or no op at all (nothing, blanks, comments,
    an empty vector): 60 random bytes never make an op map."""
    path = tmp_path_factory.mktemp("fuzzb") / "h.edn"
    path.write_bytes(data)
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as e:
        bad = body[: e.start].count(b"\n") + 1
        with pytest.raises(HistoryError, match=rf"^{re.escape(str(path))} line {bad}: not UTF-8"):
            load_any(path)
        return
    try:
        assert load_any(path) == []
    except HistoryError as e:
        assert str(e).startswith(str(path)), e


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=st.sampled_from([JEPSEN_EDN, JEPSEN_LOG, "[" + JEPSEN_EDN + "]"]),
       edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 3),
                                st.sampled_from(EDN_PIECES)), min_size=1, max_size=4))
def test_damaged_histories_raise_only_history_error(source: str,
                                                    edits: list[tuple[int, int, str]]) -> None:
    """Real histories with a few characters cut or pasted in: read, or a HistoryError."""
    text = source
    for at, cut, piece in edits:
        at %= len(text) + 1
        text = text[:at] + piece + text[at + cut:]
    for parse in (parse_edn_history, parse_jepsen_log):
        try:
            ops = parse(text, "damaged")
        except HistoryError as e:
            assert str(e).startswith("damaged")
            continue
        check(ops, "mutex", time_limit=5)
        check(ops, "cas-register", time_limit=5)


def test_the_quick_reading_of_plain_log_lines_matches_the_edn_reader(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain op lines skip the EDN reader; what they give must be what the reader gives."""
    text = "\n".join([
        "INFO  jepsen.util - 0\t:invoke\t:read\tnil",
        "INFO  jepsen.util - 0\t:ok\t:read\t3",
        "INFO  jepsen.util - 12\t:invoke\t:cas\t[-1 4]",
        "INFO  jepsen.util - 12\t:fail\t:cas\t[-1 4]",
        "INFO  jepsen.util - 3 :invoke :write 0",
        "INFO  jepsen.util - 3 :info :write :timed-out",
        "INFO  jepsen.util - 4\t:invoke\t:write\t1234567890123456789",
        "INFO  jepsen.util - 4\t:ok\t:write\t+7",
        "INFO  jepsen.util - 5\t:invoke\t:cas\t[1 2 3]",
        "INFO  jepsen.util - 5\t:fail\t:cas\t:timed-out\t:extra",
    ])
    quick = parse_jepsen_log(text)
    monkeypatch.setattr(interop, "_simple_op", lambda payload, position: None)
    slow = parse_jepsen_log(text)
    assert quick == slow
    assert [type(op["value"]) for op in quick] == [type(op["value"]) for op in slow]


# ---------------------------------------------------------------------------------------------
# Read strictly: what is not EDN, and an :index or a :time missing or unreadable, is refused


VALID_EDN = """\
{:index 0, :time 1000000000, :process 0, :type :invoke, :f :acquire, :value nil}
{:index 1, :time 1200000000, :process 0, :type :ok, :f :acquire, :value nil}
{:index 2, :time 2000000000, :process 1, :type :invoke, :f :acquire, :value nil}
{:index 3, :time 3777000000, :process 1, :type :ok, :f :acquire, :value nil}
"""  # process 1 acquires at 3.777 s while 0 holds the lock: INVALID


def damaged(line: str) -> str:
    """VALID_EDN with its third line replaced."""
    lines = VALID_EDN.splitlines()
    lines[2] = line
    return "\n".join(lines) + "\n"


NOT_EDN = [  # (the value of the third op, the text at which it is refused)
    (":a\x00b", ":a\x00b"), ("'sym", "'sym"), ("~x", "~x"), ("~@x", "~@x"), ("`x", "`x"),
    ("@x", "@x"), ("^{} x", "^"), ("^:m x", "^:m"), ("#?()", "#?()"), ("#?@(:clj [1])", "#?@"),
    ('#inst "nope"', "#inst"), ('#inst "2024-13-01"', "#inst"), ('#uuid "zz"', "#uuid"),
    ("#uuid 12", "#uuid"), ("1/0", "1/0"), ("01", "01"), ("1.", "1."), (".5", ".5"),
    ("1e", "1e"), (":#a", ":#a"), (":1a", ":1a"), ("::a", "::a"), (":/", ":/"), (":a/", ":a/"),
    ("a/b/c", "a/b/c"), ("\\abc", "\\abc"), ("##foo", "##foo"), ("#1x", "#1x"),
    ("nil\u00a0", "\u00a0"), ('"\\/"', '"'),
]


@pytest.mark.parametrize(("value", "at"), NOT_EDN)
def test_text_that_is_not_edn_is_refused_with_its_line_and_column(
        value: str, at: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    line = f"{{:index 2, :time 2000000000, :process 1, :type :invoke, :f :acquire, :value {value}}}"
    path = write(tmp_path, "h.edn", damaged(line))
    assert main(["check", str(path)]) == 3
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"harness: {path} line 3 column {line.index(at) + 1}: "), err


INDEX_OR_TIME = [  # the third op's fields where VALID_EDN has its :index and :time
    (":time 2000000000", "this op has no :index"), (":index 2", "this op has no :time"),
    (":index 2, :tme 2000000000", "this op has no :time"),
    *((f":index 2, :time {t}", "'time' must be") for t in (
        "nil", '"2000000000"', "2.0", "-5", ":x", "1/2", "[2000000000]", "true")),
    *((f":index {i}, :time 2000000000", "'index' must") for i in (
        "nil", '"2"', "-1", "2.0", ":x")),
    (":index 2, :time 2000000000, :time 3", "duplicate key :time"),
    (":index 2, :index 2, :time 2000000000", "duplicate key :index"),
]


@pytest.mark.parametrize(("fields", "said"), INDEX_OR_TIME)
def test_an_index_or_a_time_missing_or_unreadable_is_refused_never_made_up(
        fields: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    path = write(tmp_path, "h.edn", damaged(
        f"{{{fields}, :process 1, :type :invoke, :f :acquire, :value nil}}"))
    assert main(["check", str(path)]) == 3
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"harness: {path} line 3") and said in err, err


def test_a_time_shown_is_the_files_and_a_position_is_never_shown_as_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The file's times as it says them; a file with none (no :time in any op, a Jepsen log):
    positions, said to be, and no seconds anywhere."""
    from harness.cli import main

    assert main(["check", str(write(tmp_path, "timed.edn", VALID_EDN))]) == 1
    timed = capsys.readouterr().out
    assert "acquired at 3.777 s (invoked at 2.000 s)" in timed and "position" not in timed
    untimed = re.sub(r", :time \d+", "", VALID_EDN)
    log = "".join(f"INFO  jepsen.util - {p}\t:{t}\t:acquire\tnil\n"
                  for p, t in ((0, "invoke"), (0, "ok"), (1, "invoke"), (1, "ok")))
    for path in (write(tmp_path, "untimed.edn", untimed), write(tmp_path, "jepsen.log", log)):
        assert main(["check", str(path)]) == 1
        out = capsys.readouterr().out
        assert "acquired at position 3 (invoked at position 2)" in out, out
        assert "the file has no times" in out and not re.search(r"\d s\b", out), out


def test_a_damaged_type_in_a_log_is_refused_not_skipped() -> None:
    text = "INFO  jepsen.util - 0\t:invoke\t:read\tnil\nINFO  jepsen.util - 0\t#?()\t:read\t1\n"
    with pytest.raises(HistoryError, match=r"^h\.log line 2 column 23: invalid EDN"):
        parse_jepsen_log(text, "h.log")


names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1,
                max_size=6)
values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63) + 1, 2**63 - 1) | st.text(max_size=8)
    | st.floats(allow_nan=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=6)
calls = st.lists(st.tuples(st.integers(0, 3), names, values, st.sampled_from(["ok", "fail",
                                                                            "info"]),
                           st.integers(0, 10**12), st.booleans()), max_size=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=calls)
@example(calls=[(0, "x", {"kind": "k", "seq": 3}, "ok", 1, True)])  # typed fields, as ours
def test_a_history_written_to_edn_reads_back_exactly(calls: list[tuple[Any, ...]],
                                                     tmp_path_factory: pytest.TempPathFactory
                                                     ) -> None:
    """Any well-formed history of ours, written as EDN and read back: the same ops, their
    times included (and the file said to have times)."""
    ops: list[dict[str, Any]] = []
    time = 0
    for process, f, value, completion, gap, nemesis in calls:
        for type_ in ("invoke", completion):
            time += gap
            op = {"index": len(ops), "time": time, "process": process, "type": type_, "f": f,
                  "value": value}
            ops.append(op)
        if nemesis:
            ops.append({"index": len(ops), "time": time, "process": "nemesis", "type": "info",
                        "f": "partition", "value": "start"})
    path = tmp_path_factory.mktemp("edn") / "h.edn"
    try:  # well-formed as ours are: the JSON-lines reader's rules (a value's typed fields)
        write_history(path.with_suffix(".jsonl"), ops)
        read_history(path.with_suffix(".jsonl"))
    except HistoryError:
        assume(False)  # e.g. {"kind": False}: refused alike in either format (tests above)
    write_edn_history(path, ops)
    back = load_any(path)
    assert back == ops
    assert not interop.positions(back)
