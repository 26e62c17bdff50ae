"""Every TOML file the harness reads (a run's --config, a HOSTS.toml, a suite, a --replay
schedule) read one way: whatever is wrong with it (not there, too big, not UTF-8, not TOML,
nested too deep, a number TOML cannot hold) is one :class:`UsageError` line, exit 64, before
any server starts."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from harness.core.capped import read_capped
from harness.core.errors import UsageError

MAX_BYTES = 1 << 20  # a spec, hosts or suite file is a page or two; 1 MiB is far past any
MAX_DEPTH = 16  # tables and arrays inside one another (a suite's matrix is 3 deep)
INT_RANGE = 2**63  # TOML's integers are 64-bit (toml.io: "Arbitrary 64-bit signed integers")


def read_toml(path: Path | str, what: str) -> dict[str, Any]:
    """``path`` parsed; ``what`` names the file in the error ("spec", "suite", ...)."""
    path = Path(path)
    where = f"{what} {path}"
    raw = read_capped(path, MAX_BYTES, where, "TOML file", UsageError)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise UsageError(f"{where} is not UTF-8 text (byte {e.start + 1}, line {line}: "
                         f"{raw[e.start:e.start + 1]!r}); TOML files are UTF-8") from None
    text = text.removeprefix("\ufeff")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{where} is not valid TOML: {e}") from None
    except RecursionError:
        raise UsageError(f"{where}: arrays or tables nested too deep (at most {MAX_DEPTH})"
                         ) from None
    except ValueError:  # a number of more digits than Python converts (sys.int_info)
        raise UsageError(f"{where}: a number of thousands of digits, outside TOML's 64-bit "
                         "range") from None
    check_values(data, where)
    return data


def check_values(data: Any, where: str) -> None:
    """Nesting at most MAX_DEPTH deep and integers within TOML's 64 bits (walked without
    recursion: the depth is what is being checked)."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth >= MAX_DEPTH:
                raise UsageError(f"{where}: arrays or tables nested more than {MAX_DEPTH} deep")
            items = value.values() if isinstance(value, dict) else value
            stack.extend((v, depth + 1) for v in items)
        elif isinstance(value, int) and not isinstance(value, bool) and not (
                -INT_RANGE <= value < INT_RANGE):
            raise UsageError(f"{where}: an integer of {value.bit_length()} bits, outside "
                             "TOML's 64-bit range")
