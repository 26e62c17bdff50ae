"""The pieces the array readers of big history files share (:mod:`harness.core.history_bulk`
for JSON lines, :mod:`harness.presentation.interop_bulk` for EDN and Jepsen logs): lines told
apart by their length and a few bytes, and the numbers of a block's runs of digits read by
array operations.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

MAX_OFFSETS = 3  # bytes a line is told by, besides its length (a key fits an int64)


def line_key(line: bytes, offsets: Sequence[int]) -> int:
    """A line's length, then its bytes at ``offsets`` (0 past its end), as one int: what
    the readers compute for each line of a block, by array operations."""
    key = len(line)
    for o in offsets:
        key = key << 8 | (line[o] if o < len(line) else 0)
    return key


def telling(lines: Sequence[bytes]) -> tuple[int, ...] | None:
    """A few offsets at which ``lines`` differ, so that a line's length and its bytes there
    (:func:`line_key`) tell which it is (each offset the one that tells most apart, in turn);
    None when :data:`MAX_OFFSETS` do not tell them all apart."""
    longest = max(map(len, lines), default=0)
    offsets: list[int] = []
    while len({line_key(x, offsets) for x in lines}) < len(lines):
        if len(offsets) == MAX_OFFSETS:
            return None
        offsets.append(max(range(longest),
                           key=lambda o: len({line_key(x, [*offsets, o]) for x in lines})))
    return tuple(offsets)


def keys_of(buf: Any, begins: Any, length: Any, offsets: Sequence[int]) -> Any:
    """:func:`line_key` of each line of ``buf`` (a block's bytes as uint8) that begins at
    ``begins`` and is ``length`` bytes long, for all of them at once."""
    key = length.copy()
    last = len(buf) - 1
    for offset in offsets:
        key <<= 8
        key |= np.where(offset < length, buf[np.minimum(begins + offset, last)], 0)
    return key


def run_values(buf: Any, end: Any, digits: Any) -> Any:
    """The numbers of runs of decimal digits in ``buf`` (a block's bytes as uint8), each
    ending before ``end`` and ``digits`` long (the caller has checked they are digits, at
    most 18): the bytes before each run's end, as many as the longest run's, by powers of
    ten, those that are not the run's own counted as 0."""
    longest = int(digits.max())
    place = np.arange(longest)
    weights = 10 ** place[::-1]
    if int(end.min()) >= longest:  # (then every row is inside the block)
        rows = sliding_window_view(buf, longest)[end - longest]
        if int(digits.min()) == longest:  # every run as long: only digits in the rows
            return rows @ weights - 48 * int(weights.sum())
        window = np.subtract(rows, 48, dtype=np.int64)
    else:
        window = np.subtract(buf[end[:, None] - longest + place], 48, dtype=np.int64)
    window[place < longest - digits[:, None]] = 0  # (not this number's)
    return window @ weights
