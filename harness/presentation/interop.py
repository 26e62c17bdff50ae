"""Histories to and from the Jepsen ecosystem: EDN (Jepsen, Knossos) and Jepsen's text logs.

- :func:`parse_edn_history`: a Jepsen ``history.edn``: a sequence of op maps, one a line or
  pretty-printed, or one top-level vector (as in Knossos' data files), e.g.
  ``{:type :invoke, :f :acquire, :value nil, :process 0, :time 123, :index 0}``.
- :func:`parse_jepsen_log`: the op lines of a Jepsen log (``INFO  jepsen.util - 0	:invoke	:read
  nil``, the format of Porcupine's and Knossos' test data) or of a plain tab-separated
  ``history.txt`` (``0	:invoke	:read	nil``); other log lines are skipped.
- :func:`write_edn_history`: our history as EDN, one op map a line, readable by Knossos/Elle.
- :func:`load_any`: any of these, or our own ``history.jsonl``, by extension or by content.

Mapping to our ops: keywords become strings (``:acquire`` -> ``"acquire"``, ``:nemesis`` ->
``"nemesis"``), vectors and lists become lists, sets sorted lists, tagged literals their value
(``#inst``/``#uuid`` their string). ``:index`` and ``:time`` are in every op or in none
(:func:`finish_ops`): a file with neither (Knossos') or with no times (a Jepsen log) has its
ops' positions in their place, and says so (:class:`Positions`); one op without what the others
have is refused, never filled in. The file order is kept: Jepsen's order is its own history
order, and its ``:time`` may go backwards by a little across processes (the checker orders by
``time`` itself). Every error is a :class:`~harness.core.history.HistoryError` naming the file
and the line (and the column, for text that is not EDN).

The EDN reader is small, strict and ours (a library such as ``edn_format`` is several times
slower on Knossos' data, names no line, and reads ``:1a`` and ``^{} x``): nil, booleans,
strings (with escapes), characters, integers (``N``), floats (``M``, ``##Inf``, ``##NaN``),
ratios (Clojure's, which Jepsen writes), keywords and symbols as the spec spells them, lists,
vectors, maps, sets, tagged literals (``#inst`` an RFC 3339 time, ``#uuid`` a UUID, records
such as ``#jepsen.history.Op{...}``, any other tag kept as :class:`Tagged`), comments (``;``)
and discards (``#_``); commas are whitespace. Anything else (``'x``, ``~x``, `````x``,
``^{}``, ``#?()``, a NUL in a keyword, ``1/0``, ``01``) is refused with its line and column.
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Callable, Iterator
from operator import itemgetter

from harness.core.atomic import write_lines
from harness.core.history import HistoryError, Op, validate_op
from harness.core.history_file import read_history
from harness.core.text import show
from harness.core.wellformed import require

TYPE_CHECKING = False  # see harness/core/history.py
if TYPE_CHECKING:
    from typing import Any

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


_DELIMITERS = r"\s,\[\](){}\";\\"  # what ends a symbol, keyword, number, tag or character
_TOKEN_PATTERN = (
    rf"""
    (?P<ws>[ \t\n\r\f\v,]+)
  | (?P<comment>;[^\n]*)
  | (?P<open>\#\{{|[\[({{])
  | (?P<close>[\])}}])
  | (?P<discard>\#_)
  | (?P<special>\#\#[^{_DELIMITERS}]*)
  | (?P<tag>\#[A-Za-z][^{_DELIMITERS}]*)
  | (?P<char>\\[^ \t\n\r\f\v][^{_DELIMITERS}]*)
  | (?P<atom>[^{_DELIMITERS}\#][^{_DELIMITERS}]*)
    """
)
# A symbol's name begins with a letter, one of * ! _ ? $ % & = < >, or one of + - . not
# followed by a digit; then letters, digits, those, + - . and : #. At most one / between two
# names, or / alone. A keyword is : and a symbol (never :/ nor ::).
_NAME = r"(?:[^\W\d]|[*!?$%&=<>]|[+\-.](?!\d))[\w.*+!\-?$%&=<>:#]*"
_INT = r"[+-]?(?:0|[1-9]\d*)"


@functools.cache
def _syntax() -> tuple[re.Pattern[str], ...]:
    """EDN's token, name and number patterns (token, symbol, keyword, integer, float, ratio),
    compiled on first use: a Jepsen log of plain ops never needs them, and compiling them is a
    millisecond of every `harness check` that would otherwise."""
    return (re.compile(_TOKEN_PATTERN, re.VERBOSE | re.DOTALL),
            re.compile(rf"/|{_NAME}(?:/{_NAME})?"), re.compile(rf":{_NAME}(?:/{_NAME})?"),
            re.compile(rf"{_INT}N?", re.ASCII),
            re.compile(rf"{_INT}(?:M|(?:\.\d+)?(?:[eE][+-]?\d+)?M?)", re.ASCII),
            re.compile(rf"{_INT}/[1-9]\d*", re.ASCII))


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", '"': '"', "\\": "\\"}
_CHARS = {"newline": "\n", "space": " ", "tab": "\t", "return": "\r", "backspace": "\b",
          "formfeed": "\f"}
_SURROGATE = re.compile("[\ud800-\udfff]")
_CLOSERS = {"[": "]", "(": ")", "{": "}", "#{": "}"}
_SPECIAL = {"##Inf": math.inf, "##-Inf": -math.inf, "##NaN": math.nan}
_INST = re.compile(r"(\d{4})(?:-(\d\d)(?:-(\d\d)(?:T(\d\d)(?::(\d\d)(?::(\d\d)(?:\.\d+)?)?)?"
                   r"(?:Z|[+-](\d\d):(\d\d))?)?)?)?", re.ASCII)
_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")

Token = tuple[str, str, int, int]  # kind, text, line, where it starts in the text


_FORM = itemgetter(1)  # of a (line, form) pair


class EdnReader:
    """Reads EDN forms from text, strictly (https://github.com/edn-format/edn, and ratios as
    Clojure reads them): what is not EDN is an error naming its line and column."""

    def __init__(self, text: str, name: str, *, where: str | None = None,
                 column: int = 0) -> None:
        self.text = text
        self.name = name
        self.where = where  # when set, errors name this place instead of a line of the text
        self.column = column  # (with where: the column of the text's start there, less 1)
        self.pos = 0
        self.line = 1
        (self._token_re, self._symbol_re, self._keyword_re, self._int_re, self._float_re,
         self._ratio_re) = _syntax()
        self._names: dict[str, Any] = {"nil": None, "true": True, "false": False}

    def error(self, msg: str, tok: Token | None = None, *, line: int | None = None
              ) -> HistoryError:
        """``msg`` at ``tok`` (its line and column), at ``line``, or where the reader is."""
        at = (line, None) if line is not None else (
            (tok[2], tok[3]) if tok is not None else (self.line, self.pos))
        col = "" if at[1] is None else f" column {at[1] - self.text.rfind(chr(10), 0, at[1])}"
        if self.where is not None:
            if at[1] is not None:
                col = f" column {self.column + at[1] + 1}"
            return HistoryError(f"{self.where}{col}: {msg}")
        return HistoryError(f"{self.name} line {at[0]}{col}: {msg}")

    def _token(self) -> Token | None:
        """The next meaningful token (kind, text, line, start), or None at the end."""
        text = self.text
        while self.pos < len(text):
            if text[self.pos] == '"':
                return self._string_token()
            m = self._token_re.match(text, self.pos)
            if m is None:
                raise self.error(f"invalid EDN: unexpected {text[self.pos]!r}")
            kind, value = m.lastgroup or "", m.group()
            line, start = self.line, self.pos
            self.line += value.count("\n")
            self.pos = m.end()
            if kind in ("ws", "comment"):
                continue
            return kind, value, line, start
        return None

    def _string_token(self) -> Token:
        """A string literal, scanned with ``str.find`` (linear time, no regex state per
        character: a 20 MB string costs 20 MB, not gigabytes)."""
        text, start, line = self.text, self.pos, self.line
        i = start + 1
        while True:
            j = text.find('"', i)
            if j < 0:
                raise self.error("invalid EDN: an unterminated string")
            k = j - 1
            while text[k] == "\\" and k > start:  # an odd run of backslashes escapes it
                k -= 1
            if (j - 1 - k) % 2 == 0:
                break
            i = j + 1
        value = text[start:j + 1]
        self.line += value.count("\n")
        self.pos = j + 1
        return "str", value, line, start

    def forms(self) -> Iterator[tuple[int, Any]]:
        """Every top-level form with the line it starts on."""
        while True:
            tok = self._token()
            if tok is None:
                return
            if tok[0] == "close":
                raise self.error(f"invalid EDN: unexpected {tok[1]!r}", tok)
            yield tok[2], self._form(tok, 0)

    def items(self, opener: Token, depth: int = 0) -> Iterator[tuple[int, Any]]:
        """The elements of a collection whose opening token was just read (at ``depth``),
        with their lines."""
        close = _CLOSERS[opener[1]]
        while True:
            tok = self._token()
            if tok is None:
                raise self.error(f"unclosed {opener[1]!r} (opened on line {opener[2]})")
            if tok[0] == "close":
                if tok[1] != close:
                    raise self.error(f"expected {close!r} to close {opener[1]!r} from line "
                                     f"{opener[2]}, got {tok[1]!r}", tok)
                return
            yield tok[2], self._form(tok, depth + 1)

    def next_form(self, depth: int, what: str) -> Any:
        tok = self._token()
        if tok is None or tok[0] == "close":
            raise self.error(f"{what} is missing its value", tok)
        return self._form(tok, depth)

    def _form(self, tok: Token, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise self.error(f"nested deeper than {MAX_DEPTH} levels", tok)
        kind, text = tok[0], tok[1]
        if kind == "open":
            return self._collection(tok, depth)
        if kind == "str":
            return self._string(tok)
        if kind == "atom":
            return self._atom(tok)
        if kind == "char":
            return self._char(tok)
        if kind == "special":
            if text not in _SPECIAL:
                raise self.error(f"invalid EDN: unknown symbolic value {show(text, 40)}", tok)
            return _SPECIAL[text]
        if kind == "discard":
            self.next_form(depth + 1, "#_")
            nxt = self._token()
            if nxt is None or nxt[0] == "close":
                raise self.error("#_ discards the last form of a collection or file", tok)
            return self._form(nxt, depth)
        if kind == "tag":
            if self._symbol_re.fullmatch(text, 1) is None:
                raise self.error(f"invalid EDN: {show(text, 40)} is not a tag (# and a "
                                 "symbol)", tok)
            return self._tagged(tok, self.next_form(depth + 1, f"tag {text}"))
        raise self.error(f"invalid EDN: unexpected {text!r}", tok)

    def _collection(self, tok: Token, depth: int) -> Any:
        opener, line = tok[1], tok[2]
        elems = list(map(_FORM, self.items(tok, depth)))  # (no frame of its own: C)
        if opener == "{":
            if len(elems) % 2:
                raise self.error(f"a map (opened on line {line}) needs an even number of forms",
                                 tok)
            out = {_hashable(k): v for k, v in zip(elems[::2], elems[1::2], strict=True)}
            if len(out) * 2 != len(elems):  # EDN forbids it; a dict would keep the last quietly
                keys = [_hashable(k) for k in elems[::2]]
                twice = next(k for k in keys if keys.count(k) > 1)
                raise self.error(f"malformed history: duplicate key {dumps_edn(twice)[:60]} in a "
                                 f"map (opened on line {line})", tok)
            return out
        if opener == "#{":
            members = frozenset(_hashable(e) for e in elems)
            if len(members) != len(elems):
                raise self.error(f"invalid EDN: a set (opened on line {line}) holds an element "
                                 "twice", tok)
            return members
        return elems

    def _string(self, tok: Token) -> str:
        body = tok[1][1:-1]
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
                raise self.error(f"invalid EDN: unknown escape \\{esc} in a string", tok)
        text = "".join(out)
        if _SURROGATE.search(text):  # a pair written as two escapes is one character
            try:
                text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
            except UnicodeDecodeError:
                raise self.error("malformed history: a lone surrogate (an escape such as "
                                 "\\ud800 that is half of a character) in a string", tok
                                 ) from None
        return text

    def _char(self, tok: Token) -> Char:
        name = tok[1][1:]
        if name in _CHARS:
            return Char(_CHARS[name])
        if len(name) == 1 and name.isprintable():
            return Char(name)
        if len(name) == 5 and name[0] == "u" and re.fullmatch("[0-9A-Fa-f]{4}", name[1:]):
            if 0xD800 <= int(name[1:], 16) <= 0xDFFF:
                raise self.error(f"malformed history: a lone surrogate {tok[1]} (half of a "
                                 "character)", tok)
            return Char(chr(int(name[1:], 16)))
        raise self.error(f"invalid EDN: {show(tok[1], 40)} is not a character (\\c, \\newline, "
                         "\\space, \\tab, \\return or \\uNNNN)", tok)

    def _atom(self, tok: Token) -> Any:
        text = tok[1]
        if text in self._names:  # (the same few names again and again: checked once)
            return self._names[text]
        if text[0].isdigit() or (text[0] in "+-" and len(text) > 1 and text[1].isdigit()):
            return self._number(tok)
        if text[0] == ":":
            if self._keyword_re.fullmatch(text) is None:
                raise self.error(f"invalid EDN: {show(text, 40)} is not a keyword (':' and a "
                                 "name that begins with a letter or * ! _ ? $ % & = < > - + .)",
                                 tok)
            value: Any = Keyword(text[1:])
        elif self._symbol_re.fullmatch(text) is None:
            raise self.error(f"invalid EDN: {show(text, 40)} is not EDN (no symbol, keyword or "
                             "number is written so)", tok)
        else:
            value = Symbol(text)
        if len(self._names) < 1 << 16:
            self._names[text] = value
        return value

    def _number(self, tok: Token) -> Any:
        text = tok[1]
        try:
            if self._int_re.fullmatch(text):
                return int(text.rstrip("N"))
            if self._float_re.fullmatch(text):
                return float(text.rstrip("M"))
            if self._ratio_re.fullmatch(text):
                from fractions import Fraction  # rare: not worth importing up front

                return float(Fraction(text))
        except (ValueError, OverflowError) as e:
            raise self.error(f"invalid number {show(text, 40)} ({e})", tok) from None
        raise self.error(f"invalid EDN: {show(text, 40)} is not a number", tok)

    def _tagged(self, tok: Token, value: Any) -> Any:
        """``#inst`` (an RFC 3339 time) and ``#uuid`` as their strings, a record such as
        ``#jepsen.history.Op{...}`` as its map, any other tag as :class:`Tagged`."""
        tag = tok[1][1:]
        if tag == "inst":
            m = _INST.fullmatch(value) if isinstance(value, str) else None
            if m is None or not _instant(m):
                raise self.error(f"invalid EDN: #inst {show(value, 40)} is not an RFC 3339 "
                                 "time such as \"2024-01-31T12:00:00.5Z\"", tok)
            return value
        if tag == "uuid":
            if not (isinstance(value, str) and _UUID.fullmatch(value)):
                raise self.error(f"invalid EDN: #uuid {show(value, 40)} is not a UUID such as "
                                 "\"f81d4fae-7dec-11d0-a765-00a0c91e6bf6\"", tok)
            return value
        if isinstance(value, dict):
            return value  # a record such as #jepsen.history.Op{...}: its fields are what matter
        return Tagged(tag, value)


def _instant(m: re.Match[str]) -> bool:
    """Whether the fields of an #inst are a time of day on a day of the calendar."""
    import datetime

    year, month, day, hour, minute, second, oh, om = (int(g) if g else None for g in m.groups())
    try:
        datetime.datetime(year or 1, month or 1, day or 1, hour or 0, minute or 0, second or 0)
    except ValueError:
        return False
    return (oh or 0) < 24 and (om or 0) < 60


def _hashable(value: Any) -> Any:
    """EDN lets any value be a map key or set element; Python needs it hashable."""
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted(((_hashable(k), _hashable(v)) for k, v in value.items()), key=repr))
    if isinstance(value, Tagged):
        return Tagged(value.tag, _hashable(value.value))
    return value


def loads_edn(text: str, name: str = "<edn>", *, where: str | None = None,
              column: int = 0) -> list[Any]:
    """All top-level forms of an EDN text (HistoryError naming the line when it is not EDN;
    ``where``: name this place instead, for a snippet such as the op part of a log line that
    begins after ``column`` characters of it)."""
    return [form for _, form in EdnReader(text, name, where=where, column=column).forms()]


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


def to_op(form: Any, where: str) -> Op:
    """One Jepsen op map as our op (not yet validated; ``index`` and ``time`` may be missing:
    see :func:`finish_ops`)."""
    if isinstance(form, Tagged):
        form = form.value
    if not isinstance(form, dict):
        raise HistoryError(f"{where}: expected an op map like {{:type :invoke, :f ..., "
                           f":process 0}}, got {_describe(form)}")
    op = {_plain_key(k): plain(v) for k, v in form.items()}
    f = op.get("f")
    if isinstance(f, int | float) and not isinstance(f, bool):
        op["f"] = str(f)
    return op


def _describe(form: Any) -> str:
    if isinstance(form, list):
        return "a vector or list"
    if form is None:
        return "nil"
    return f"{type(form).__name__} {str(form)[:40]!r}"


class Positions(list):  # type: ignore[type-arg]
    """The ops of a file that has no times (a Jepsen log, a Knossos history): each op's
    ``time`` is its position among the file's ops (0, 1, 2, ...), an order and not a time,
    and whatever shows one says so (:func:`checker.models.times_are_positions`)."""

    __slots__ = ()
    positions = True


def positions(ops: object) -> bool:
    """Whether the times of ``ops`` (a file's, as read here or by
    :mod:`harness.presentation.interop_bulk`) are their positions in the file, not times."""
    return getattr(ops, "positions", False) is True


def finish_ops(located: list[tuple[str, Op]]) -> list[Op]:
    """The ops validated against our contract. ``index`` and ``time`` are in every op or in
    none: a file without them (a Knossos history has neither, a Jepsen log no time) has its
    ops' positions in their place, and its ops are :class:`Positions` when the times are
    positions; a file in which some op lacks one that the others have is refused there (the
    value is never made up)."""
    timeless = bool(located) and all("time" not in op for _, op in located)
    for field in ("index", "time"):
        lacking = [where for where, op in located if field not in op]
        if lacking and len(lacking) < len(located):
            raise HistoryError(f"{lacking[0]}: malformed history: this op has no :{field}, "
                               f"though {len(located) - len(lacking)} other op(s) of the file "
                               f"have one (a missing {field} is never made up)")
        if lacking:
            for i, (_, op) in enumerate(located):
                op[field] = i
    ops: list[Op] = Positions() if timeless else []
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


def parse_edn_history(text: str, name: str = "<edn>") -> list[Op]:
    """The ops of a Jepsen/Knossos EDN history (see the module docstring)."""
    reader = EdnReader(text, name)
    located: list[tuple[str, Op]] = []
    tops = reader.forms()
    first = reader._token()  # a single top-level vector or list holds the ops: read it lazily
    if first is None:
        return []
    if first[0] == "open" and first[1] in ("[", "("):
        for line, form in reader.items(first):
            located.append((f"{name} line {line}", to_op(form, f"{name} line {line}")))
        trailing = next(tops, None)
        if trailing is not None:
            raise reader.error("more forms after the top-level vector of ops",
                               line=trailing[0])
        return finish_ops(located)
    items = [(first[2], reader._form(first, 0)), *tops]
    for line, form in items:
        where = f"{name} line {line}"
        located.append((where, to_op(form, where)))
    return finish_ops(located)


# ---------------------------------------------------------------------------------------------
# Jepsen text logs


_LOG_PREFIX = re.compile(r"jepsen\.util\s*(?:-|:)\s*")


def parse_jepsen_log(text: str, name: str = "<log>") -> list[Op]:
    """The ops of a Jepsen log or tab-separated ``history.txt`` (see the module docstring)."""
    located: list[tuple[str, Op]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        payload = _op_fields(line)
        if payload is None:
            continue
        where = f"{name} line {lineno}"
        located.append((where, _log_op(payload, where, len(located), len(line) - len(payload))))
    if not located:
        raise HistoryError(f"{name}: no Jepsen op lines found (expected lines like "
                           "'INFO  jepsen.util - 0\t:invoke\t:read\tnil')")
    return finish_ops(located)


_OP_LINE = re.compile(r"\s*\S+\s+(?::invoke|:ok|:fail|:info)(?:\s|$)")
_ANY_OP_LINE = re.compile(r"\s*(?:-?\d+|:\S+)\t")


def _op_fields(line: str) -> str | None:
    """The op part of a log line (``process type f value [error]``), or None for other lines.

    Columns are separated by tabs in Jepsen's logs, by spaces where the tabs were expanded;
    each column is an EDN value, so the op part is read as a sequence of EDN forms.
    """
    m = _LOG_PREFIX.search(line)
    payload = line[m.end():] if m is not None else line
    if _OP_LINE.match(payload):
        return payload
    # After jepsen.util's prefix, "process<TAB>" is an op line whatever follows: a damaged
    # type is an error to report, never a line to skip silently.
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


def _log_op(payload: str, where: str, position: int, column: int = 0) -> Op:
    simple = _simple_op(payload, position)
    if simple is not None:
        return simple
    forms = loads_edn(payload, where=where, column=column)
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
    """``:s`` where that is a keyword of plain ASCII as the reader reads it, else ``"s"``."""
    if _KEYWORD_NAME.fullmatch(s) and _syntax()[2].fullmatch(":" + s):
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
    """Read a history in any supported format: by extension (``.jsonl``, ``.edn``, ``.log`` or
    ``.txt``), else by a look at the content. ``progress``: told the bytes read so far, now and
    then, where the format's reader can."""
    p = os.fspath(path)
    kind = _KINDS.get(os.path.splitext(p)[1].lower())
    text = _read_text(p) if kind != "jsonl" else ""
    kind = kind or sniff(text)
    if kind == "jsonl":
        return read_history(p, progress)
    if kind == "edn":
        return parse_edn_history(text, p)
    if kind == "log":
        return parse_jepsen_log(text, p)
    raise HistoryError(f"{p}: not a history this harness can read (expected history.jsonl, "
                       "Jepsen EDN or a Jepsen log)")


_KINDS = {".jsonl": "jsonl", ".edn": "edn", ".log": "log", ".txt": "log"}


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
