"""Malformed and adversarial inputs for ``harness check``: histories (ours, EDN, Jepsen logs)
and run directories, damaged in the ways real files get damaged (truncated, wrong types, deep
nesting, huge numbers, bad unicode) and in ways an adversary would try. Shared by the fuzz test
(``tests/test_fuzz_check.py``, a few hundred inputs) and the corpus bench
(``bench/fuzz_corpus.py``, thousands)."""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core.interop import op_to_edn

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / "tests" / "data" / "runs" / "redis-setnx-pause"

NASTY: list[Any] = [
    None, True, False, 0, -1, 1.5, float("-0.0"), 2**63, -(2**63) - 1, "", "x", "1",
    "\u0000", "\x1b[2J\x1b[H", "line\nbreak", "é", [], {}, [1, 2], {"a": 1},
    ["invoke"], {"type": "ok"}, "ok", "invoke", "nemesis", "acquire",
]
BIG_INT_TEXT = "9" * 5000  # more digits than Python's int() takes from text by default
DEEP_JSON = "[" * 1200 + "]" * 1200
LONE_SURROGATE_JSON = '"\\ud800"'


def base_lines() -> list[str]:
    return (RUN / "history.jsonl").read_text().splitlines()


def nasty_json(rng: random.Random) -> str:
    choice = rng.randrange(8)
    if choice == 0:
        return BIG_INT_TEXT
    if choice == 1:
        return DEEP_JSON
    if choice == 2:
        return LONE_SURROGATE_JSON
    if choice == 3:
        return json.dumps("y" * rng.choice([10_000, 1_000_000]))
    return json.dumps(rng.choice(NASTY))


def mutate_line(line: str, rng: random.Random) -> str:
    try:
        op = json.loads(line)
    except (ValueError, RecursionError):  # already garbage, or nested past Python's limit
        return line
    if not isinstance(op, dict):
        return line
    kind = rng.randrange(6)
    keys = ["time", "process", "type", "f", "value", "token", "lock", "index", "targets",
            "detail", "error"]
    key = rng.choice(keys)
    if kind == 0 and key in op:
        del op[key]
        return json.dumps(op)
    if kind <= 3:
        text = json.dumps({k: v for k, v in op.items() if k != key})
        return text[:-1] + f', "{key}": {nasty_json(rng)}}}'
    if kind == 4:
        return line[: rng.randrange(1, max(2, len(line)))]
    value = op.get("value")  # inside the value: the resource log, a session, a seq
    if isinstance(value, list) and value and isinstance(value[0], dict):
        entry = rng.choice(value)
        entry[rng.choice(["seq", "process", "accepted", "kind", "token", "from", "to"])] = \
            rng.choice(NASTY)
    elif isinstance(value, dict):
        value[rng.choice(["session", "seq", "validity", "kind"])] = rng.choice(NASTY)
    else:
        op["value"] = rng.choice(NASTY)
    return json.dumps(op)


def damaged_jsonl(rng: random.Random) -> bytes:
    lines = base_lines()
    kind = rng.randrange(10)
    if kind == 0:
        return b""
    if kind == 1:
        return rng.choice([b"\xef\xbb\xbf", b"\n\n  \n", b"\xff\xfe\x00", b"{}", b"[]\n"])
    if kind == 2:  # invalid UTF-8 somewhere
        data = "\n".join(lines).encode()
        i = rng.randrange(len(data))
        return data[:i] + bytes([rng.randrange(0x80, 0x100)]) + data[i:]
    if kind == 3:  # times go backwards
        i, j = sorted(rng.sample(range(len(lines)), 2))
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == 4:  # a stranger's lines in the middle
        lines.insert(rng.randrange(len(lines)), rng.choice(
            ["null", "1", '"op"', DEEP_JSON, "{" + '"a":' * 3 + "1}", BIG_INT_TEXT]))
    else:
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(lines))
            lines[i] = mutate_line(lines[i], rng)
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")


def damaged_edn(rng: random.Random) -> bytes:
    ops = [json.loads(x) for x in base_lines()]
    text = "\n".join(op_to_edn(op) for op in ops[:120])
    kind = rng.randrange(9)
    if kind == 0:
        text = text[: rng.randrange(len(text))]
    elif kind == 1:
        text = text.replace(":type :ok", ":type #{1 2}", 1)
    elif kind == 2:
        text += "\n{:type :invoke, :f :acquire, :process 0, :value " + "[" * 1000 + "]" * 1000
    elif kind == 3:  # a huge string (one in ten of these 20 MB: the old reader took 4 GB)
        size = 20_000_000 if rng.randrange(10) == 0 else 2_000_000
        text += '\n{:type :ok, :f :acquire, :process 0, :value "' + "z" * size + '"}'
    elif kind == 4:
        text = text.replace(":process 0", ':process "\\ud800\\u001b[2J"', 3)
    elif kind == 5:
        text += "\n{:type :invoke :f :read :process 1 :time " + BIG_INT_TEXT + "}"
    elif kind == 6:
        text = text.replace("}", "]", 1)
    elif kind == 7:
        text += '\n{:type :ok, :f :read, :value "\\q", :process 2}'
    else:
        i = rng.randrange(len(text))
        text = text[:i] + rng.choice(["#", "\\", '"', "#_", "##Foo", ":", "1/0", "#{", "{"]) \
            + text[i:]
    return text.encode("utf-8", "surrogatepass")


def damaged_log(rng: random.Random) -> bytes:
    rows = ["INFO  jepsen.util - 0\t:invoke\t:write\t1",
            "INFO  jepsen.util - 0\t:ok\t:write\t1",
            "INFO  jepsen.util - 1\t:invoke\t:cas\t[1 2]",
            "INFO  jepsen.util - 1\t:ok\t:cas\t[1 2]",
            "INFO  jepsen.util - 2\t:invoke\t:read\tnil",
            "INFO  jepsen.util - 2\t:ok\t:read\t2"]
    i = rng.randrange(len(rows))
    rows[i] = rng.choice([rows[i].replace("\t", " "), rows[i] + "\t[[[[", rows[i][:20],
                          rows[i].replace(":ok", ":maybe"), rows[i].replace("2", BIG_INT_TEXT)])
    return ("\n".join(rows) + "\n").encode()


def damaged_run(rng: random.Random, dest: Path) -> None:
    shutil.copytree(RUN, dest)
    kind = rng.randrange(8)
    test = dest / "test.json"
    if kind == 0:
        data = json.loads(test.read_text())
        data["spec"] = rng.choice([[], "spec", None, 5])
        test.write_text(json.dumps(data))
    elif kind == 1:
        data = json.loads(test.read_text())
        data["spec"][rng.choice(["ttl", "workload", "nemesis", "seed", "clients"])] = \
            rng.choice(NASTY)
        test.write_text(json.dumps(data))
    elif kind == 2:
        test.write_text(rng.choice(["", "{", "[]", "null", DEEP_JSON]))
    elif kind == 3:
        (dest / "results.json").unlink()
        (dest / "results.json").mkdir()
    elif kind == 4:
        (dest / "history.jsonl").write_bytes(damaged_jsonl(rng))
    elif kind == 5:
        (dest / "history.jsonl").unlink()
    elif kind == 6:
        data = json.loads(test.read_text())
        data["status"] = rng.choice(["starting", "interrupted", "error", 7])
        test.write_text(json.dumps(data))
    else:
        test.unlink()


MAKERS: dict[str, tuple[str, Callable[[random.Random], bytes]]] = {
    "jsonl": (".jsonl", damaged_jsonl),
    "edn": (".edn", damaged_edn),
    "log": (".log", damaged_log),
}


def make_corpus(out: Path, n: int, seed: int = 1) -> list[Path]:
    """``n`` damaged inputs under ``out`` (files and run directories), deterministic."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    kinds = [*MAKERS, "run", "run"]
    for i in range(n):
        kind = kinds[i % len(kinds)]
        if kind == "run":
            dest = out / f"{i:05d}-run"
            damaged_run(rng, dest)
            paths.append(dest)
        else:
            suffix, make = MAKERS[kind]
            p = out / f"{i:05d}{suffix}"
            p.write_bytes(make(rng))
            paths.append(p)
    return paths
