"""Histories to and from the Jepsen ecosystem: EDN (Jepsen, Knossos) and Jepsen's text logs.

- :func:`read_edn_history`: a Jepsen ``history.edn``: a sequence of op maps, one a line or
  pretty-printed, or one top-level vector (as in Knossos' data files), e.g.
  ``{:type :invoke, :f :acquire, :value nil, :process 0, :time 123, :index 0}``.
- :func:`read_jepsen_log`: the op lines of a Jepsen log (``INFO  jepsen.util - 0	:invoke	:read
  nil``, the format of Porcupine's and Knossos' test data) or of a plain tab-separated
  ``history.txt`` (``0	:invoke	:read	nil``); other log lines are skipped.
- :func:`write_edn_history`: our history as EDN, one op map a line, readable by Knossos/Elle.
- :func:`load_any`: any of these, or our own ``history.jsonl``, by extension or by content.

Mapping to our ops: keywords become strings (``:acquire`` -> ``"acquire"``, ``:nemesis`` ->
``"nemesis"``), vectors and lists become lists, sets sorted lists, tagged literals their value
(``#inst``/``#uuid`` their string). Missing ``:time``: synthetic times, 1 ms per op in file
order. Missing ``:index``: the position in the file. The file order is kept: Jepsen's order is
its own history order, and its ``:time`` may go backwards by a little across processes (the
checker orders by ``time`` itself). Every error is a :class:`~harness.core.history.HistoryError`
naming the file and the line.

The EDN reader is small but real: nil, booleans, strings (with escapes), characters, integers
(``N``), floats (``M``, ``##Inf``, ``##NaN``), ratios, keywords, symbols, lists, vectors, maps,
sets, tagged literals (``#inst "..."``, records such as ``#jepsen.history.Op{...}``),
comments (``;``) and discards (``#_``); commas are whitespace.
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Callable, Iterator

from harness.core.atomic import write_lines
from harness.core.history import HistoryError, Op, validate_op
from harness.core.history_file import read_history
from harness.core.text import show
from harness.core.wellformed import require

TYPE_CHECKING = False  # see harness/core/history.py
if TYPE_CHECKING:
    from typing import Any

MS = 1_000_000  # ns: the step of synthetic times
MAX_DEPTH = 200  # deeper nesting than any history needs; bounds the recursion


# ---------------------------------------------------------------------------------------------
# EDN values


class Keyword(str):
    """An EDN keyword, by its name without the colon (``:f`` is ``Keyword("f")``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f":{str.__str__(self)}"


class Symbol(str):
    """An EDN symbol (a bare word that is not nil, true, false or a number)."""

    __slots__ = ()


class Char(str):
    """An EDN character literal (``\\a``, ``\\newline``)."""

    __slots__ = ()


class Tagged:
    """A tagged literal whose tag we do not know: ``#tag value``. (Not a tuple: a tagged
    literal is one value, never a sequence of two.)"""

    __slots__ = ("tag", "value")

    def __init__(self, tag: str, value: Any) -> None:
        self.tag = tag
        self.value = value

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Tagged) and self.tag == other.tag
                and self.value == other.value)

    def __hash__(self) -> int:
        return hash((Tagged, self.tag, self.value))

    def __repr__(self) -> str:
        return f"Tagged({self.tag!r}, {self.value!r})"


_TOKEN_PATTERN = (
    r"""
    (?P<ws>[\s,]+)
  | (?P<comment>;[^\n]*)
  | (?P<open>\#\{|[\[({])
  | (?P<close>[\])}])
  | (?P<discard>\#_)
  | (?P<special>\#\#[A-Za-z-]+)
  | (?P<tag>\#[A-Za-z][^\s,\[\](){}";\\]*)
  | (?P<char>\\(?:newline|space|tab|return|backspace|formfeed|u[0-9A-Fa-f]{4}|.))
  | (?P<atom>[^\s,\[\](){}";\\\#][^\s,\[\](){}";\\]*)
    """
)


@functools.cache
def _syntax() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """EDN's token and number patterns (token, integer, float, ratio), compiled on first use:
    a Jepsen log of plain ops never needs them, and compiling them is a millisecond of every
    `harness check` that would otherwise."""
    return (re.compile(_TOKEN_PATTERN, re.VERBOSE | re.DOTALL), re.compile(r"[+-]?\d+N?"),
            re.compile(r"[+-]?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?M?"), re.compile(r"[+-]?\d+/\d+"))
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", '"': '"', "\\": "\\",
            "/": "/"}
_CHARS = {"newline": "\n", "space": " ", "tab": "\t", "return": "\r", "backspace": "\b",
          "formfeed": "\f"}
_SURROGATE = re.compile("[\ud800-\udfff]")
_CLOSERS = {"[": "]", "(": ")", "{": "}", "#{": "}"}
_SPECIAL = {"##Inf": math.inf, "##-Inf": -math.inf, "##NaN": math.nan}


class EdnReader:
    """Reads EDN forms from text, tracking line numbers for error messages."""

    def __init__(self, text: str, name: str, *, where: str | None = None) -> None:
        self.text = text
        self.name = name
        self.where = where  # when set, errors name this place instead of a line of the text
        self.pos = 0
        self.line = 1
        self._token_re, self._int_re, self._float_re, self._ratio_re = _syntax()

    def error(self, msg: str, line: int | None = None) -> HistoryError:
        if self.where is not None:
            return HistoryError(f"{self.where}: {msg}")
        return HistoryError(f"{self.name} line {line or self.line}: {msg}")

    def _token(self) -> tuple[str, str, int] | None:
        """The next meaningful token (kind, text, line), or None at the end."""
        text = self.text
        while self.pos < len(text):
            if text[self.pos] == '"':
                return self._string_token()
            m = self._token_re.match(text, self.pos)
            if m is None:
                ch = text[self.pos]
                what = "an unterminated string" if ch == '"' else f"unexpected {ch!r}"
                raise self.error(f"invalid EDN: {what}")
            kind, value = m.lastgroup or "", m.group()
            line = self.line
            self.line += value.count("\n")
            self.pos = m.end()
            if kind in ("ws", "comment"):
                continue
            return kind, value, line
        return None

    def _string_token(self) -> tuple[str, str, int]:
        """A string literal, scanned with ``str.find`` (linear time, no regex state per
        character: a 20 MB string costs 20 MB, not gigabytes)."""
        text, start, line = self.text, self.pos, self.line
        i = start + 1
        while True:
            j = text.find('"', i)
            if j < 0:
                raise self.error("invalid EDN: an unterminated string", line)
            k = j - 1
            while text[k] == "\\" and k > start:  # an odd run of backslashes escapes it
                k -= 1
            if (j - 1 - k) % 2 == 0:
                break
            i = j + 1
        value = text[start:j + 1]
        self.line += value.count("\n")
        self.pos = j + 1
        return "str", value, line

    def forms(self) -> Iterator[tuple[int, Any]]:
        """Every top-level form with the line it starts on."""
        while True:
            tok = self._token()
            if tok is None:
                return
            if tok[0] == "close":
                raise self.error(f"unexpected {tok[1]!r}", tok[2])
            yield tok[2], self._form(tok, 0)

    def items(self, opener: tuple[str, str, int]) -> Iterator[tuple[int, Any]]:
        """The elements of a collection whose opening token was just read, with their lines."""
        close = _CLOSERS[opener[1]]
        while True:
            tok = self._token()
            if tok is None:
                raise self.error(f"unclosed {opener[1]!r} (opened on line {opener[2]})")
            if tok[0] == "close":
                if tok[1] != close:
                    raise self.error(f"expected {close!r} to close {opener[1]!r} from line "
                                     f"{opener[2]}, got {tok[1]!r}", tok[2])
                return
            yield tok[2], self._form(tok, 1)

    def next_form(self, depth: int, what: str) -> Any:
        tok = self._token()
        if tok is None or tok[0] == "close":
            raise self.error(f"{what} is missing its value")
        return self._form(tok, depth)

    def _form(self, tok: tuple[str, str, int], depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise self.error(f"nested deeper than {MAX_DEPTH} levels")
        kind, text, line = tok
        if kind == "open":
            return self._collection(tok, depth)
        if kind == "str":
            return self._string(text, line)
        if kind == "atom":
            return self._atom(text, line)
        if kind == "char":
            return self._char(text)
        if kind == "special":
            if text not in _SPECIAL:
                raise self.error(f"unknown symbolic value {text}", line)
            return _SPECIAL[text]
        if kind == "discard":
            self.next_form(depth + 1, "#_")
            nxt = self._token()
            if nxt is None or nxt[0] == "close":
                raise self.error("#_ discards the last form of a collection or file", line)
            return self._form(nxt, depth)
        if kind == "tag":
            value = self.next_form(depth + 1, f"tag {text}")
            return _tagged(text[1:], value)
        raise self.error(f"unexpected {text!r}", line)

    def _collection(self, tok: tuple[str, str, int], depth: int) -> Any:
        opener, line = tok[1], tok[2]
        elems: list[Any] = []
        close = _CLOSERS[opener]
        while True:
            nxt = self._token()
            if nxt is None:
                raise self.error(f"unclosed {opener!r} (opened on line {line})")
            if nxt[0] == "close":
                if nxt[1] != close:
                    raise self.error(f"expected {close!r} to close {opener!r} from line {line}, "
                                     f"got {nxt[1]!r}", nxt[2])
                break
            elems.append(self._form(nxt, depth + 1))
        if opener == "{":
            if len(elems) % 2:
                raise self.error(f"a map (opened on line {line}) needs an even number of forms",
                                 line)
            out = {_hashable(k): v for k, v in zip(elems[::2], elems[1::2], strict=True)}
            if len(out) * 2 != len(elems):  # EDN forbids it; a dict would keep the last quietly
                keys = [_hashable(k) for k in elems[::2]]
                twice = next(k for k in keys if keys.count(k) > 1)
                raise self.error(f"malformed history: duplicate key {dumps_edn(twice)[:60]} in a "
                                 f"map (opened on line {line})", line)
            return out
        if opener == "#{":
            members = frozenset(_hashable(e) for e in elems)
            if len(members) != len(elems):
                raise self.error(f"invalid EDN: a set (opened on line {line}) holds an element "
                                 "twice", line)
            return members
        return elems

    def _string(self, text: str, line: int) -> str:
        body = text[1:-1]
        if "\\" not in body:
            return body
        out: list[str] = []
        i = 0
        while i < len(body):
            ch = body[i]
            if ch != "\\":
                out.append(ch)
                i += 1
                continue
            esc = body[i + 1]
            if esc == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", body[i + 2:i + 6]):
                out.append(chr(int(body[i + 2:i + 6], 16)))
                i += 6
            elif esc in _ESCAPES:
                out.append(_ESCAPES[esc])
                i += 2
            else:
                raise self.error(f"unknown escape \\{esc} in a string", line)
        text = "".join(out)
        if _SURROGATE.search(text):  # a pair written as two escapes is one character
            try:
                text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
            except UnicodeDecodeError:
                raise self.error("malformed history: a lone surrogate (an escape such as "
                                 "\\ud800 that is half of a character) in a string", line
                                 ) from None
        return text

    def _char(self, text: str) -> Char:
        name = text[1:]
        if name in _CHARS:
            return Char(_CHARS[name])
        if len(name) == 5 and name[0] == "u":
            if 0xD800 <= int(name[1:], 16) <= 0xDFFF:
                raise self.error(f"malformed history: a lone surrogate {text} (half of a "
                                 "character)")
            return Char(chr(int(name[1:], 16)))
        return Char(name)

    def _atom(self, text: str, line: int) -> Any:
        if text == "nil":
            return None
        if text == "true":
            return True
        if text == "false":
            return False
        if text[0] == ":":
            if text in (":", "::"):
                raise self.error(f"invalid keyword {text!r}", line)
            return Keyword(text[1:])
        if text[0].isdigit() or (text[0] in "+-" and len(text) > 1 and text[1].isdigit()):
            return self._number(text, line)
        return Symbol(text)

    def _number(self, text: str, line: int) -> Any:
        try:
            if self._int_re.fullmatch(text):
                return int(text.rstrip("N"))
            if self._float_re.fullmatch(text):
                return float(text.rstrip("M"))
            if self._ratio_re.fullmatch(text):
                from fractions import Fraction  # rare: not worth importing up front

                return float(Fraction(text))
        except (ValueError, ZeroDivisionError, OverflowError) as e:
            raise self.error(f"invalid number {text[:40]!r} ({e})", line) from None
        raise self.error(f"invalid number {text[:40]!r}", line)


def _tagged(tag: str, value: Any) -> Any:
    if tag in ("inst", "uuid"):
        return value
    if isinstance(value, dict):
        return value  # a record such as #jepsen.history.Op{...}: its fields are what matter
    return Tagged(tag, value)


def _hashable(value: Any) -> Any:
    """EDN lets any value be a map key or set element; Python needs it hashable."""
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted(((_hashable(k), _hashable(v)) for k, v in value.items()), key=repr))
    if isinstance(value, Tagged):
        return Tagged(value.tag, _hashable(value.value))
    return value


def loads_edn(text: str, name: str = "<edn>", *, where: str | None = None) -> list[Any]:
    """All top-level forms of an EDN text (HistoryError naming the line when it is not EDN;
    ``where``: name this place instead, for a snippet such as one column of a log line)."""
    return [form for _, form in EdnReader(text, name, where=where).forms()]


# ---------------------------------------------------------------------------------------------
# EDN values to our plain values and ops


def plain(value: Any) -> Any:
    """An EDN value as a JSON-like one: keywords and symbols become strings, and so on."""
    if isinstance(value, Keyword | Symbol | Char):
        return str.__str__(value)
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {_plain_key(k): plain(v) for k, v in value.items()}
    if isinstance(value, frozenset):
        return sorted((plain(v) for v in value), key=repr)
    if isinstance(value, Tagged):
        return plain(value.value)
    return value


def _plain_key(key: Any) -> str:
    k = plain(key)
    return k if isinstance(k, str) else dumps_edn(key)


def to_op(form: Any, where: str, position: int) -> Op:
    """One Jepsen op map as our op (not yet validated; ``time`` may still be missing)."""
    if isinstance(form, Tagged):
        form = form.value
    if not isinstance(form, dict):
        raise HistoryError(f"{where}: expected an op map like {{:type :invoke, :f ..., "
                           f":process 0}}, got {_describe(form)}")
    op = {_plain_key(k): plain(v) for k, v in form.items()}
    f = op.get("f")
    if isinstance(f, int | float) and not isinstance(f, bool):
        op["f"] = str(f)
    idx = op.get("index")
    if not isinstance(idx, int) or isinstance(idx, bool):
        op["index"] = position
    return op


def _describe(form: Any) -> str:
    if isinstance(form, list):
        return "a vector or list"
    if form is None:
        return "nil"
    return f"{type(form).__name__} {str(form)[:40]!r}"


def finish_ops(located: list[tuple[str, Op]]) -> list[Op]:
    """Synthetic times when any op lacks one, then validation against our contract."""
    if any("time" not in op for _, op in located):
        for i, (_, op) in enumerate(located):
            op["time"] = i * MS
    ops = []
    for where, op in located:
        ordered = {"index": op["index"], "time": op["time"]}
        ordered.update({k: v for k, v in op.items() if k not in ordered})
        ops.append(validate_op(ordered, where))
    require(ops, lambda i: located[i][0])
    return ops


def _read_text(path: str | os.PathLike[str]) -> str:
    p = os.fspath(path)
    try:
        with open(p, "rb") as fh:
            data = fh.read()
        return data.decode("utf-8-sig")  # a byte order mark first is not part of the text
    except OSError as e:
        raise HistoryError(f"{p}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise HistoryError(f"{p} line {line}: not UTF-8 text") from None


def read_edn_history(path: str | os.PathLike[str]) -> list[Op]:
    """Read a Jepsen/Knossos EDN history (see the module docstring)."""
    name = str(path)
    return parse_edn_history(_read_text(path), name)


def parse_edn_history(text: str, name: str = "<edn>") -> list[Op]:
    reader = EdnReader(text, name)
    located: list[tuple[str, Op]] = []
    tops = reader.forms()
    first = reader._token()  # a single top-level vector or list holds the ops: read it lazily
    if first is None:
        return []
    if first[0] == "open" and first[1] in ("[", "("):
        for line, form in reader.items(first):
            located.append((f"{name} line {line}", to_op(form, f"{name} line {line}",
                                                         len(located))))
        trailing = next(tops, None)
        if trailing is not None:
            raise reader.error("more forms after the top-level vector of ops", trailing[0])
        return finish_ops(located)
    items = [(first[2], reader._form(first, 0)), *tops]
    for line, form in items:
        where = f"{name} line {line}"
        located.append((where, to_op(form, where, len(located))))
    return finish_ops(located)


# ---------------------------------------------------------------------------------------------
# Jepsen text logs


_LOG_PREFIX = re.compile(r"jepsen\.util\s*(?:-|:)\s*")


def read_jepsen_log(path: str | os.PathLike[str]) -> list[Op]:
    """The ops of a Jepsen log or tab-separated ``history.txt`` (see the module docstring)."""
    return parse_jepsen_log(_read_text(path), str(path))


def parse_jepsen_log(text: str, name: str = "<log>") -> list[Op]:
    located: list[tuple[str, Op]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        payload = _op_fields(line)
        if payload is None:
            continue
        where = f"{name} line {lineno}"
        located.append((where, _log_op(payload, where, len(located))))
    if not located:
        raise HistoryError(f"{name}: no Jepsen op lines found (expected lines like "
                           "'INFO  jepsen.util - 0\t:invoke\t:read\tnil')")
    return finish_ops(located)


_OP_LINE = re.compile(r"\s*\S+\s+(?::invoke|:ok|:fail|:info)(?:\s|$)")
_ANY_OP_LINE = re.compile(r"\s*\S+\t:[A-Za-z]")


def _op_fields(line: str) -> str | None:
    """The op part of a log line (``process type f value [error]``), or None for other lines.

    Columns are separated by tabs in Jepsen's logs, by spaces where the tabs were expanded;
    each column is an EDN value, so the op part is read as a sequence of EDN forms.
    """
    m = _LOG_PREFIX.search(line)
    payload = line[m.end():] if m is not None else line
    if _OP_LINE.match(payload):
        return payload
    # After jepsen.util's prefix, "process<TAB>:something" is an op line whatever it says: a
    # damaged type is an error to report, never a line to skip silently.
    if m is not None and _ANY_OP_LINE.match(payload):
        return payload
    return None


_LOG_INT = r"-?(?:0|[1-9][0-9]{0,17})"  # longer numbers: the reader says what is wrong
_LOG_NAME = r"[A-Za-z][A-Za-z0-9_-]*"
# The common shape, read without the EDN reader: process, type, f and a value that is nil, an
# integer, a pair of integers or a keyword (every other line takes the reader's way).
_SIMPLE_OP = re.compile(rf"\s*({_LOG_INT})\s+:(invoke|ok|fail|info)\s+:({_LOG_NAME})\s+"
                        rf"(?:(nil)|({_LOG_INT})|\[({_LOG_INT})\s+({_LOG_INT})\]|:({_LOG_NAME}))\s*")


def _simple_op(payload: str, position: int) -> Op | None:
    m = _SIMPLE_OP.fullmatch(payload)
    if m is None:
        return None
    process, type_, f, _nil, number, a, b, keyword = m.groups()
    value: Any = None
    if number is not None:
        value = int(number)
    elif a is not None:
        value = [int(a), int(b)]
    elif keyword is not None:
        value = keyword
    return {"index": position, "process": int(process), "type": type_, "f": f, "value": value}


def _log_op(payload: str, where: str, position: int) -> Op:
    simple = _simple_op(payload, position)
    if simple is not None:
        return simple
    forms = loads_edn(payload, where=where)
    if len(forms) < 4:  # Jepsen writes every column, a value of nil too: this line was cut
        raise HistoryError(f"{where}: malformed history: an op line needs process, type, f and "
                           f"value, got {show(payload, 80)}")
    process, type_, f, *rest = forms
    op: Op = {
        "index": position,
        "process": plain(process),
        "type": plain(type_),
        "f": str(f) if isinstance(f, int | float) and not isinstance(f, bool) else plain(f),
        "value": plain(rest[0]) if rest else None,
    }
    if len(rest) > 1:
        op["error"] = plain(rest[1] if len(rest) == 2 else rest[1:])
    return op


# ---------------------------------------------------------------------------------------------
# Writing EDN


_KEYWORD_NAME = re.compile(r"[A-Za-z*!_?<>=+-][A-Za-z0-9*!_?<>=+.-]*(?:/[A-Za-z0-9*!_?<>=+.-]+)?")
_AS_KEYWORD = ("type", "f")


def _edn_string(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or 0xD800 <= ord(ch) <= 0xDFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _keyword_or_string(s: str) -> str:
    if _KEYWORD_NAME.fullmatch(s) and not re.match(r"[+-]?\d", s):
        return ":" + s
    return _edn_string(s)


def dumps_edn(value: Any) -> str:
    """A JSON-like value as EDN text (dict keys that are names become keywords)."""
    if value is None:
        return "nil"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, Keyword):
        return ":" + str.__str__(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "##NaN"
        if math.isinf(value):
            return "##Inf" if value > 0 else "##-Inf"
        return repr(value)
    if isinstance(value, str):
        return _edn_string(value)
    if isinstance(value, dict):
        inner = ", ".join(
            f"{_keyword_or_string(k) if isinstance(k, str) else dumps_edn(k)} {dumps_edn(v)}"
            for k, v in value.items())
        return "{" + inner + "}"
    if isinstance(value, set | frozenset):
        return "#{" + " ".join(sorted(dumps_edn(v) for v in value)) + "}"
    if isinstance(value, list | tuple):
        return "[" + " ".join(dumps_edn(v) for v in value) + "]"
    return _edn_string(str(value))


def op_to_edn(op: Op) -> str:
    """One op as a Jepsen op map: ``type`` and ``f`` as keywords, ``nemesis`` as ``:nemesis``."""
    parts = []
    for k, v in op.items():
        if (k in _AS_KEYWORD and isinstance(v, str)) or (k == "process" and v == "nemesis"):
            text = _keyword_or_string(v)
        else:
            text = dumps_edn(v)
        parts.append(f"{_keyword_or_string(k)} {text}")
    return "{" + ", ".join(parts) + "}"


def write_edn_history(path: str | os.PathLike[str], ops: list[Op]) -> None:
    """Write ops as an EDN history, one op map a line (atomically: a temp file, then rename)."""
    write_lines(path, (op_to_edn(op) for op in ops))


# ---------------------------------------------------------------------------------------------
# Any format


def load_any(path: str | os.PathLike[str], progress: Callable[[int], None] | None = None
             ) -> list[Op]:
    """Read a history in any supported format: by extension, else by a look at the content.
    ``progress``: told the bytes read so far, now and then, where the format's reader can."""
    p = os.fspath(path)
    ext = os.path.splitext(p)[1].lower()
    if ext == ".jsonl":
        return read_history(p, progress)
    if ext == ".edn":
        return read_edn_history(p)
    if ext in (".log", ".txt"):
        return read_jepsen_log(p)
    text = _read_text(p)
    kind = sniff(text)
    if kind == "jsonl":
        return read_history(p, progress)
    if kind == "edn":
        return parse_edn_history(text, str(p))
    if kind == "log":
        return parse_jepsen_log(text, str(p))
    raise HistoryError(f"{p}: not a history this harness can read (expected history.jsonl, "
                       "Jepsen EDN or a Jepsen log)")


def sniff(text: str) -> str | None:
    """Which format a text looks like: ``jsonl``, ``edn``, ``log``, or None."""
    stripped = text.lstrip()
    if not stripped:
        return "jsonl"
    first_line = stripped.split("\n", 1)[0]
    if first_line.startswith("{"):
        import json

        try:
            if isinstance(json.loads(first_line), dict):
                return "jsonl"
        except RecursionError:
            return "jsonl"  # (a line nested too deeply: the JSON reader names it)
        except ValueError:
            pass
        return "edn"
    if stripped[0] in "[(#;":
        return "edn"
    if any(_op_fields(line) is not None for line in text.splitlines()[:1000]):
        return "log"
    return None
