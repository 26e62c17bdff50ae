"""harness.core.history_bulk's digit runs: what both array readers of big history files share."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from harness.core.history_bulk import MAX_OFFSETS, keys_of, line_key, run_values, telling

numbers = st.lists(st.integers(0, 10**18 - 1), min_size=1, max_size=40)


@given(numbers, st.sampled_from([b"", b"x", b":time ", b'{"index": ']))
def test_run_values_read_each_run_as_its_number(values: list[int], before: bytes) -> None:
    """Runs of unequal and equal lengths, the first one at the block's start or not: each
    read as int() reads its digits (a byte outside a run is never counted)."""
    block, ends, lengths = b"", [], []
    for v in values:
        block += before + b"%d" % v
        ends.append(len(block))
        lengths.append(len(b"%d" % v))
        block += b"\n"
    buf = np.frombuffer(block, np.uint8)
    got = run_values(buf, np.array(ends), np.array(lengths))
    assert got.tolist() == values


def test_run_values_are_wrong_when_told_a_wrong_length() -> None:
    """The caller's lengths decide what is read: a run told one digit short reads the
    number without its first digit (what the readers' place checks are for)."""
    buf = np.frombuffer(b"x123\n", np.uint8)
    assert run_values(buf, np.array([4]), np.array([2])).tolist() == [23]


@given(st.lists(st.binary(min_size=0, max_size=12), min_size=1, max_size=30, unique=True))
def test_telling_tells_lines_apart_or_says_it_cannot(lines: list[bytes]) -> None:
    offsets = telling(lines)
    if offsets is None:  # three bytes and the length do not tell them apart
        return
    assert len(offsets) <= MAX_OFFSETS
    keys = [line_key(x, offsets) for x in lines]
    assert len(set(keys)) == len(lines)
    block = b"".join(lines)
    begins = np.cumsum([0, *map(len, lines[:-1])])
    got = keys_of(np.frombuffer(block + b"\n", np.uint8), begins,
                  np.array([len(x) for x in lines]), offsets)
    assert got.tolist() == keys


def test_telling_gives_up_beyond_its_offsets() -> None:
    """Sixteen lines of one length that differ only in the same four bytes' bits are
    not told apart by three of them."""
    lines = [bytes([a, b, c, d]) for a in (0, 1) for b in (0, 1) for c in (0, 1) for d in (0, 1)]
    assert telling(lines) is None
    assert telling(lines[:8]) is not None
