"""What a checker calls the figures and the violations of its result, asked of its class
(``figures``, ``violations``, ``caveats``: see :mod:`checker.base`), which the registry loads
by the name the result is filed under the first time it is asked. A result of a checker that
is not installed here (a run checked on another machine, a plugin since removed) is shown with
its raw keys: no figures, and its violations called by their key."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from harness.controller.registry import default_registry


@cache
def declared(check: str) -> type | None:
    """The class of the checker named ``check``; None when it is not installed (a name of the
    form ``module:Class`` is not looked up: reading a result imports no module it names)."""
    return default_registry().installed("checkers", check)


def _attribute(check: str, name: str, default: Any) -> Any:
    cls = declared(check)
    return default if cls is None else getattr(cls, name, default)


def figures(check: str, result: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(key, value) of each figure the checker declares, as its result has them: what its
    summary line prints."""
    declared_figures = _attribute(check, "figures", {})
    return [(k, v) for k, v in result.items()
            if k in declared_figures and not isinstance(v, list | dict)]


def figure_words(check: str, result: Mapping[str, Any]) -> str:
    """The figures found (non-zero counts with words) as one short phrase: ``3 lock-overlap``
    (serve's list of runs, the report's chips)."""
    words = _attribute(check, "figures", {})
    return ", ".join(f"{v} {words[k]}" for k, v in figures(check, result)
                     if words[k] is not None and isinstance(v, int) and v)


def violation_kinds(check: str) -> tuple[str, ...]:
    """The result keys of the checker's lists of violations, in the order it declares them."""
    return tuple(_attribute(check, "violations", {}))


def caveats(check: str) -> tuple[str, ...]:
    """The result keys of the lists of what the checker's verdict does not cover."""
    return tuple(_attribute(check, "caveats", ()))


def violation_words(check: str, kind: str, n: int = 1) -> str:
    """``n`` violations of ``kind`` (without the number): ``lock overlap``, ``lock overlaps``;
    an undeclared kind is its key (plural with an s, unless it ends in one)."""
    words = _attribute(check, "violations", {}).get(kind)
    if words is not None:
        return words[0] if n == 1 else words[1]
    return kind if n == 1 or kind.endswith("s") else f"{kind}s"


def inline(value: Any, limit: int = 200) -> str:
    """Any value of a result, a spec or an op in words on one line, never JSON or a repr: None
    ``—``, a bool ``yes``/``no``, a float as ``%g``, a list ``a, b``, a mapping
    ``key value, ...`` (nested ones in brackets); cut at ``limit`` characters."""
    text = _inline(value, 0)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _inline(value: Any, depth: int) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if depth > 4 or not isinstance(value, Mapping | list | tuple | set | frozenset):
        return str(value)
    if isinstance(value, Mapping):
        items = [f"{k} {_inline(v, depth + 1)}" for k, v in list(value.items())[:41]]
    else:
        items = [_inline(v, depth + 1) for v in list(value)[:41]]
    text = ", ".join(items[:40]) + (", …" if len(items) > 40 else "")
    return f"({text})" if depth else text or "none"
