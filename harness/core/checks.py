"""Running checkers and combining their verdicts (pure; Jepsen's ``check-safe`` and ``compose``).

Each checker runs on its own: one that raises gives ``{"valid": "unknown", "error": ...}`` for
itself, and the others' verdicts stand. Verdicts combine as false over unknown over true: a
violation found is real whatever else happened, and nothing unknown passes as valid.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, SupportsIndex, TypeVar

from harness.core.heap import collector_paused
from harness.core.history import Op
from harness.core.history_parts import is_columns

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
    """A history that keeps what is derived from it: the same ops in the same order, and
    ``derived``, where a view every reader builds alike (the client op pairs, the clients'
    lives, see :meth:`checker.lives.Lives.of`; the report's places) is kept the first time one
    is built, for the others to read, never to change (:func:`derive`).

    Why a memo that travels with the history rather than values passed along: the checkers
    stay pure functions of the history alone (``check(history, **params)``, what a plugin
    implements), the report and the summary take the history as they always did, and each
    view is still built by the one function that defines it; what is shared is only the
    result of calling it twice on the same ops. A run's merged history is one (from the merge
    through its checks, its summary and its report: each view built once); so is a stored
    history read back (:meth:`harness.controller.store.RunDir.load_history`). It lives as long
    as the history: nothing is kept from one history to the next. Nobody changes the ops of a
    history once read (a history is what happened); a list changed all the same (an op
    added, removed, replaced, the order changed) forgets what was derived from it."""

    __slots__ = ("derived",)

    def __init__(self, ops: Sequence[Op]) -> None:
        super().__init__(ops)
        self.derived: dict[Any, Any] = {}

    def _changed(self) -> None:
        """The ops are not those it was derived from: forget what was (a history is what
        happened and nobody should change it, but a list can be changed)."""
        self.derived.clear()

    def append(self, op: Op) -> None:
        self._changed()
        super().append(op)

    def extend(self, ops: Iterable[Op]) -> None:
        self._changed()
        super().extend(ops)

    def insert(self, i: SupportsIndex, op: Op) -> None:
        self._changed()
        super().insert(i, op)

    def pop(self, i: SupportsIndex = -1) -> Op:
        self._changed()
        return super().pop(i)

    def remove(self, op: Op) -> None:
        self._changed()
        super().remove(op)

    def clear(self) -> None:
        self._changed()
        super().clear()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self._changed()
        super().sort(*args, **kwargs)

    def reverse(self) -> None:
        self._changed()
        super().reverse()

    def __setitem__(self, i: Any, value: Any) -> None:
        self._changed()
        super().__setitem__(i, value)

    def __delitem__(self, i: Any) -> None:
        self._changed()
        super().__delitem__(i)

    def __iadd__(self, ops: Iterable[Op]) -> Shared:  # type: ignore[override,misc]
        self._changed()
        return super().__iadd__(ops)

    def __imul__(self, n: SupportsIndex) -> Shared:  # type: ignore[override,misc]
        self._changed()
        return super().__imul__(n)

    @classmethod
    def of(cls, history: Sequence[Op]) -> Shared:
        """``history`` itself when it is shared already, else a shared copy (of the list of
        references: the ops are the same objects). A history in columns
        (:class:`harness.core.run_history.ColumnHistory`) is one already: it has its own
        ``derived``, and a copy would make a dict of each op."""
        if type(history) is cls or is_columns(history):
            return history  # type: ignore[return-value]
        return cls(history)


T = TypeVar("T")
WELL_FORMED = "well-formed"  # derived: the history passed harness.core.wellformed.require
TIME_ORDERED = "time-ordered"  # derived: its times never go backwards (a merge sorted them)


def derive(history: Sequence[Op], key: Any, build: Callable[[], T]) -> T:
    """``build()``, called once per shared history (:class:`Shared`) and ``key``; on any other
    sequence, every time. A build that raises keeps nothing."""
    derived = getattr(history, "derived", None)
    if type(derived) is not dict:
        return build()
    try:
        return derived[key]  # type: ignore[no-any-return]
    except KeyError:
        value = derived[key] = build()
        return value


def well_formed(history: Sequence[Op]) -> Shared:
    """``history`` shared and marked well-formed: its reader ran
    :func:`harness.core.wellformed.require` on it (a check need not again)."""
    shared = Shared.of(history)
    shared.derived[WELL_FORMED] = True
    return shared


def compose(history: Sequence[Op], checkers: Sequence[tuple[str, CheckFn, dict[str, Any]]]
            ) -> dict[str, Any]:
    """``{"valid": merged, "checks": {name: result}}``, each checker run safely, on the
    history shared (:class:`Shared`: ``history`` itself when it is one)."""
    shared = Shared.of(history)
    checks = {name: check_safe(fn, shared, params) for name, fn, params in checkers}
    out: dict[str, Any] = {"valid": merge_valid([c["valid"] for c in checks.values()]),
                           "checks": checks}
    crashed = [name for name, c in checks.items() if c.get("crashed")]
    if crashed:
        out["crashed-checkers"] = crashed
    return out
