"""Checking a large history without the cyclic garbage collector walking it again and again.

A checker allocates objects in proportion to the history (pairs, grants, search entries) while
the history itself, millions of dicts, stays alive. Every full collection of CPython's cyclic
collector walks every tracked object, the history included, and the more a checker allocates
the more collections it triggers: a linear pass over a 1M-op history became 13-18x slower than
over 100k ops. The checkers build no reference cycles (reference counting frees all they drop),
so the collector has nothing to find while they run: :func:`gc_paused` switches it off for the
duration and restores it after, whatever happens. Reentrant: a checker run inside another keeps
it off until the outermost one ends.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

TYPE_CHECKING = False  # see harness/core/history.py
if TYPE_CHECKING:
    from typing import Any, ParamSpec, TypeVar

    P = ParamSpec("P")
    R = TypeVar("R")

_depth = 0


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block (restored as it was on the way out)."""
    global _depth
    outermost = _depth == 0
    was_enabled = outermost and gc.isenabled()
    if was_enabled:
        gc.disable()
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if was_enabled:
            gc.enable()


def gc_paused(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorate a checker: it runs with the cyclic collector paused (:func:`collector_paused`)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with collector_paused():
            return fn(*args, **kwargs)

    return wrapper


def give_back() -> None:
    """Return the C heap's free pages to the system (glibc's ``malloc_trim``; elsewhere
    nothing). Arrays a few MB large are taken from the heap once glibc has seen larger ones
    freed, and what they leave when freed stays resident, while Python's own objects come
    from fresh mappings: before a stage that makes many objects, the arrays the last stage
    let go would count twice in the peak."""
    global _trim
    if _trim is None:
        try:
            import ctypes

            _trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _trim = False
    if _trim:
        _trim(0)


_trim: Any = None
