"""Options a role declares (a nemesis's ``clock-offset``, a lock's ``expire``): name, type,
default and help, so that ``harness list`` can show them and a typo or a bad value is one line
before anything starts.

    options = {"clock-offset": Option(float, 60.0, "seconds to move the clock", finite=True)}

Values come as strings from the command line (``--nemesis-opt clock-offset=60``) or typed
from TOML; :meth:`Option.parse` turns either into the declared type or raises ``ValueError``
with a short reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.core.errors import UsageError
from harness.core.text import show

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True)
class Option:
    type: type  # bool, int, float or str
    default: Any = None
    help: str = ""
    choices: tuple[Any, ...] = ()
    minimum: float | None = None  # inclusive
    maximum: float | None = None
    patterns: tuple[str, ...] = ()  # only these patterns of its role use it (role.pattern())

    def parse(self, value: Any) -> Any:
        """``value`` (a string from the command line, or already typed) as this option's
        type; ValueError with a short reason when it is not one."""
        t = self.type
        if t is bool:
            if isinstance(value, bool):
                out: Any = value
            elif isinstance(value, str) and value.strip().lower() in TRUE + FALSE:
                out = value.strip().lower() in TRUE
            else:
                raise ValueError(f"expected true or false, got {show(value)}")
        elif t in (int, float):
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                raise ValueError(f"expected a number, got {show(value)}")
            try:
                out = t(value.strip()) if isinstance(value, str) else t(value)
            except (ValueError, OverflowError):
                raise ValueError(f"expected {'an integer' if t is int else 'a number'}, "
                                 f"got {show(value)}") from None
            if t is int and isinstance(value, float) and not value.is_integer():
                raise ValueError(f"expected an integer, got {show(value)}")
            if isinstance(out, float) and not math.isfinite(out):
                raise ValueError(f"expected a finite number, got {show(value)}")
            if self.minimum is not None and out < self.minimum:
                raise ValueError(f"must be at least {self.minimum:g}, got {show(value)}")
            if self.maximum is not None and out > self.maximum:
                raise ValueError(f"must be at most {self.maximum:g}, got {show(value)}")
        elif t is str:
            if not isinstance(value, str | int | float) or isinstance(value, bool):
                raise ValueError(f"expected a string, got {show(value)}")
            out = str(value)
            if len(out) > 500:
                raise ValueError("longer than 500 characters")
        else:  # pragma: no cover: a role declared a type we do not parse
            raise ValueError(f"options of type {t.__name__} are not supported")
        if self.choices and out not in self.choices:
            raise ValueError(f"expected one of {', '.join(map(str, self.choices))}, got "
                             f"{show(value)}")
        return out

    def problem(self) -> str | None:
        """What is wrong with this declaration (a type we do not parse, a default or a choice
        not of that type, a default the option itself refuses), or None."""
        if self.type not in TYPES:
            return (f"type {getattr(self.type, '__name__', self.type)!r} is not one of "
                    "bool, int, float, str")
        if not isinstance(self.help, str):
            return f"help must be a string, got {show(self.help)}"
        for bound in (self.minimum, self.maximum):
            if bound is not None and not of_type(bound, float):
                return f"minimum and maximum must be numbers, got {show(bound)}"
        if not isinstance(self.choices, tuple | list):
            return f"choices must be a tuple, got {show(self.choices)}"
        values = [("default", self.default)] if self.default is not None else []
        for what, value in values + [("choice", c) for c in self.choices]:
            if not of_type(value, self.type):
                return f"{what} {show(value)} is not a {self.type.__name__}"
            try:
                self.parse(value)
            except ValueError as e:
                if what == "default":
                    return f"default {show(value)}: {e}"
        return None

    def describe(self) -> str:
        kind = "/".join(map(str, self.choices)) if self.choices else self.type.__name__
        default = "" if self.default is None else f", default {self.default}"
        return f"{kind}{default}: {self.help}" if self.help else f"{kind}{default}"


TYPES = (bool, int, float, str)


def of_type(value: Any, t: type) -> bool:
    """Is ``value`` a value of option type ``t`` as written in code (an int is a float)?"""
    if t is bool or isinstance(value, bool):
        return t is bool and isinstance(value, bool)
    if t is float:
        return isinstance(value, int | float) and math.isfinite(value)
    return isinstance(value, t)


def declaration_problem(options: Any) -> str | None:
    """What is wrong with a role's ``options`` declaration (a table of names to
    :class:`Option`), naming the option; None when nothing is."""
    if not isinstance(options, Mapping):
        return f"must be a dict of names to Option, got {type(options).__name__}"
    for key, option in options.items():
        if not isinstance(key, str) or not key or len(key) > 100:
            return f"{show(key)} is not an option name"
        if not isinstance(option, Option):
            return (f"{key!r} must be an Option(type, default, help), got "
                    f"{show(option, 60)} ({type(option).__name__})")
        problem = option.problem()
        if problem is not None:
            return f"{key!r}: {problem}"
    return None


def parse_options(given: Mapping[str, Any], declared: Mapping[str, Option], flag: str,
                  owners: str) -> dict[str, Any]:
    """Check ``given`` against ``declared``: each key known and each value parsed; the typed
    values. UsageError (one line) otherwise; ``flag`` and ``owners`` name them in it."""
    out: dict[str, Any] = {}
    for key, raw in given.items():
        if key not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise UsageError(f"{flag} {show(key)}: not an option of {owners} (options: "
                             f"{known})")
        try:
            out[key] = declared[key].parse(raw)
        except ValueError as e:
            raise UsageError(f"{flag} {key}={show(raw, 60)}: {e}") from None
    return out
