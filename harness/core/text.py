"""Names and values as a terminal can show them: escaped, told apart by type, and short.

Whatever a history or a config says (a process named ``"\\x1b[2J"``, a 200 MB value, a lone
surrogate) is shown through :func:`show`: ``repr``-like (control characters, surrogates and
quotes escaped; the string ``"1"`` is ``'1'`` while the number 1 is ``1``) and at most about
200 characters.
"""

from __future__ import annotations

TYPE_CHECKING = False  # see harness/core/history.py
if TYPE_CHECKING:
    from typing import Any

LIMIT = 200


def show(value: Any, limit: int = LIMIT) -> str:
    """A short, escaped, type-revealing rendering of ``value``."""
    if isinstance(value, str):
        text = repr(value[: limit + 1])
    elif isinstance(value, bool | int | float) or value is None:
        text = repr(value) if not isinstance(value, int) or value.bit_length() < 600 else (
            f"<an integer of {len(str(abs(value)))} digits>" if value.bit_length() < 13000
            else "<a huge integer>")
    else:
        try:
            text = repr(value)
        except Exception:  # a value whose repr fails (or recurses too deep)
            text = f"<{type(value).__name__}>"
        text = text.encode("ascii", "backslashreplace").decode("ascii")
    if len(text) > limit:
        text = text[:limit] + "…"
    return text


def who(process: Any) -> str:
    """``process 3`` for a number, ``process 'c3'`` for a name (so 1 and "1" differ)."""
    if isinstance(process, int) and not isinstance(process, bool):
        return f"process {process}"
    return f"process {show(process, 60)}"


def line(text: str, limit: int = 400) -> str:
    """One line: newlines and control characters escaped, at most ``limit`` characters."""
    out = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text[: limit + 1])
    return out if len(out) <= limit else out[:limit] + "…"


VERDICT_WORDS = {True: "VALID", False: "INVALID", "unknown": "UNKNOWN"}


def verdict_word(valid: Any) -> str:
    """VALID, INVALID or UNKNOWN (anything else is unknown)."""
    return VERDICT_WORDS.get(valid, "UNKNOWN")
