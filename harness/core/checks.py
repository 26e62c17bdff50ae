"""Running checkers and combining their verdicts (pure; Jepsen's ``check-safe`` and ``compose``).

Each checker runs on its own: one that raises gives ``{"valid": "unknown", "error": ...}`` for
itself, and the others' verdicts stand. Verdicts combine as false over unknown over true: a
violation found is real whatever else happened, and nothing unknown passes as valid.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from harness.core.heap import collector_paused
from harness.core.history import Op

CheckFn = Callable[..., dict[str, Any]]
VALID_VALUES = (True, False, "unknown")


def merge_valid(values: Sequence[Any]) -> bool | str:
    if any(v is False for v in values):
        return False
    if any(v is not True for v in values):
        return "unknown"
    return True


def check_safe(fn: CheckFn, history: Sequence[Op], params: dict[str, Any]) -> dict[str, Any]:
    """One checker's result; an exception (or a result that is not a verdict) is ``unknown``
    with the error, never a verdict."""
    try:
        with collector_paused():  # see harness.core.heap: linear passes stay linear
            result = fn(history, **params)
    except RecursionError:
        return {"valid": "unknown", "crashed": True,
                "error": "RecursionError: the history is nested too deeply to check"}
    except MemoryError:
        return {"valid": "unknown", "crashed": True, "error": "MemoryError: out of memory"}
    except Exception as e:
        return {"valid": "unknown", "crashed": True,
                "error": f"{type(e).__name__}: {str(e)[:300]}"}
    if not isinstance(result, dict) or result.get("valid") not in VALID_VALUES:
        return {"valid": "unknown", "crashed": True,
                "error": f"the checker returned no verdict ({type(result).__name__})"}
    return result


class Shared(list[Op]):
    """The history as the checkers of one :func:`compose` call see it: the same ops in the same
    order, and ``derived``, where a view every checker builds alike (the clients' lives, see
    :meth:`checker.lives.Lives.of`) is kept the first time one is built, for the others to
    read, never to change. It lives as long as the call: nothing is kept from one history to
    the next."""

    __slots__ = ("derived",)

    def __init__(self, ops: Sequence[Op]) -> None:
        super().__init__(ops)
        self.derived: dict[Any, Any] = {}


def compose(history: Sequence[Op], checkers: Sequence[tuple[str, CheckFn, dict[str, Any]]]
            ) -> dict[str, Any]:
    """``{"valid": merged, "checks": {name: result}}``, each checker run safely, on the
    history shared (:class:`Shared`)."""
    shared = Shared(history)
    checks = {name: check_safe(fn, shared, params) for name, fn, params in checkers}
    out: dict[str, Any] = {"valid": merge_valid([c["valid"] for c in checks.values()]),
                           "checks": checks}
    crashed = [name for name, c in checks.items() if c.get("crashed")]
    if crashed:
        out["crashed-checkers"] = crashed
    return out
