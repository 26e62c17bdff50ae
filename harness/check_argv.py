"""`harness check FILE...`'s arguments read without argparse, for the common form only.

Scripts call `harness check` once per file, and importing argparse (with gettext and its
help machinery) and pathlib is a good part of what such a call costs. So the plain form is read
here: ``check``, the paths, and ``--model X``, ``--time-limit X``, ``--max-memory X`` as whole
words with their values in the next word. Anything else (help, an abbreviation, ``--opt=value``,
``--``, a value that starts with ``-``, a path argparse would spell differently, an option
between two paths) gives None, and argparse reads the command line: its answers, its help and
its errors are the command line's. Where this module answers, it answers as argparse would,
except that the paths stay strings; ``tests/test_check_argv.py`` holds it to that.
"""

from __future__ import annotations

from types import SimpleNamespace

OPTIONS = {"--model": "model", "--time-limit": "time_limit", "--max-memory": "max_memory"}
DEFAULTS = {"model": None, "time_limit": 60.0, "max_memory": None,
            "write": False}  # argparse's too


def quick_check_args(words: list[str]) -> SimpleNamespace | None:
    """``words`` (the command line after ``harness``) as argparse's namespace for `check`, or
    None when it is not the plain form (argparse then reads it)."""
    if len(words) < 2 or words[0] != "check":
        return None
    values: dict[str, object] = dict(DEFAULTS)
    paths: list[str] = []
    paths_ended = False  # argparse takes the paths as one run of words: none after an option
    i = 1
    while i < len(words):
        word = words[i]
        if word.startswith("-"):
            key = OPTIONS.get(word)
            if key is None or i + 1 == len(words) or words[i + 1].startswith("-"):
                return None
            value: object = words[i + 1]
            if key == "time_limit":
                try:
                    value = float(words[i + 1])
                except ValueError:
                    return None
            values[key] = value
            paths_ended = bool(paths)
            i += 2
            continue
        if paths_ended or not plain_path(word):
            return None
        paths.append(word)
        i += 1
    if not paths:
        return None
    return SimpleNamespace(command="check", run_dir=paths, **values)


def plain_path(word: str) -> bool:
    """True when ``str(Path(word)) == word``: no empty or ``.`` part, no trailing or doubled
    slash (pathlib drops them, and messages name the path as pathlib spells it)."""
    if not word or word == "/" or word.startswith("//"):
        return word == "/"
    parts = word[1:].split("/") if word.startswith("/") else word.split("/")
    return all(part and part != "." for part in parts)
