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

from harness.presentation.interop import dumps_edn, op_to_edn

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


# ---------------------------------------------------------------------------------------------
# Semantically malformed histories, each knowing the damage it made (the oracle: nothing here
# reads a history through the harness's readers). Made from real runs' histories, VALID and
# INVALID, in our JSONL, their EDN export and a Jepsen log of the same ops.

VALID_RUN = REPO / "tests" / "data" / "runs" / "redis-setnx-none"  # a real 5 s run, VALID
BASES = {"invalid": RUN, "valid": VALID_RUN}  # the stored run's verdict is in its results.json
FORMATS = {"jsonl": ".jsonl", "edn": ".edn", "log": ".log"}
ALL = tuple(FORMATS)
CLIENT_FS = ("acquire", "release", "extend", "read", "write", "cas")  # what clients call

# Every kind of damage of issue 24 case 6, and where each applies (a Jepsen log has no index,
# time or lock column).
MALFORMED = {
    "deleted-invoke": ALL, "invoke-f-OK": ALL, "duplicate-key": ALL,
    "client-op-from-nemesis": ALL, "every-line-twice": ALL,
    "duplicate-index": ("jsonl", "edn"), "invoke-twice": ALL,
    "completion-f-differs": ALL, "missing-invokes": ALL, "truncated-line": ALL,
    "lone-surrogate": ALL, "completion-lock-differs": ("jsonl", "edn"),
    "time-backwards": ("jsonl", "edn"), "completion-without-invoke": ALL,
    "client-line-twice": ALL,
}
BENIGN = ("bom", "crlf", "extra-fields", "blank-lines")


class Case:
    """One file to check: its bytes, the damage, and what must come of it: ``line`` is the
    line the damage shows at (1-based), when the damage alone decides it."""

    __slots__ = ("base", "data", "fmt", "kind", "line", "malformed", "name")

    def __init__(self, name: str, fmt: str, base: str, kind: str, data: bytes,
                 line: int | None) -> None:
        self.name, self.fmt, self.base, self.kind = name, fmt, base, kind
        self.data, self.line = data, line
        self.malformed = kind in MALFORMED

    @property
    def suffix(self) -> str:
        return FORMATS[self.fmt]

    def __repr__(self) -> str:
        return f"Case({self.name})"


def base_ops(base: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (BASES[base] / "history.jsonl").read_text().splitlines()]


def base_verdict(base: str) -> bool:
    return bool(json.loads((BASES[base] / "results.json").read_text())["valid"])


def _is_client(op: dict[str, Any]) -> bool:
    return type(op["process"]) is int


def _completion(ops: list[dict[str, Any]], k: int) -> int | None:
    """The position of the completion of the client invoke at ``k``, if it has one."""
    p = ops[k]["process"]
    for j in range(k + 1, len(ops)):
        if ops[j]["process"] == p:
            return j if ops[j]["type"] != "invoke" else None
    return None


def _completed(ops: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """(invoke, completion) positions of every client call that completed."""
    out = []
    for k, op in enumerate(ops):
        if _is_client(op) and op["type"] == "invoke" and op["f"] in CLIENT_FS:
            c = _completion(ops, k)
            if c is not None:
                out.append((k, c))
    return out


def render(op: dict[str, Any], fmt: str) -> str:
    """One op as a line of ``fmt``: JSONL, EDN (the harness's export) or a Jepsen log line."""
    if fmt == "jsonl":
        return json.dumps(op, separators=(",", ":"))
    if fmt == "edn":
        return op_to_edn(op)
    process = ":nemesis" if op["process"] == "nemesis" else str(op["process"])
    return (f"INFO  jepsen.util - {process}\t:{op['type']}\t:{op['f']}\t"
            f"{dumps_edn(op.get('value'))}")


def _dup_key(text: str, fmt: str) -> str:
    """The op line with its ``type`` (or, in a log, a map value's key) given twice, the second
    time with the same value: the duplicate is the only damage (a ``lock`` added to an op that
    had none was no duplicate, and the harness rightly named the next line instead)."""
    if fmt == "jsonl":
        return text[:-1] + f',"type":{json.dumps(json.loads(text)["type"])}}}'
    if fmt == "edn":
        head, _, kind = text.partition(":type ")
        return text[:-1] + f", :type {kind.split(',')[0].split('}')[0].strip()}}}"
    head, _, _ = text.rpartition("\t")
    return head + "\t{:session 1, :session 2}"


def _truncate(text: str, fmt: str, rng: random.Random) -> str:
    if fmt == "log":  # cut inside the f column, as `0	:ok	:w`
        head, _, _value = text.rpartition("\t")
        head, _, f = head.rpartition("\t")
        return f"{head}\t{f[: rng.randint(1, max(1, len(f) - 1))]}"
    return text[: rng.randrange(1, len(text) - 1)]


def damage(kind: str, fmt: str, ops: list[dict[str, Any]], rng: random.Random
           ) -> tuple[list[str], int | None]:
    """The lines of a copy of ``ops`` damaged as ``kind`` says, and the line it shows at."""
    ops = [dict(op) for op in ops]
    calls = _completed(ops)
    k, c = rng.choice(calls)
    lines: list[str] | None = None
    line: int | None = None
    if kind == "deleted-invoke":
        del ops[k]
        line = c  # the completion, one line up
    elif kind == "invoke-f-OK":
        ops[k]["f"] = "OK"
        line = c + 1
    elif kind == "duplicate-key":
        lines = [render(op, fmt) for op in ops]
        if fmt == "log":
            k = rng.choice([i for i, op in enumerate(ops) if _is_client(op)])
        lines[k] = _dup_key(lines[k], fmt)
        line = k + 1
    elif kind == "client-op-from-nemesis":
        ops[k]["process"] = "nemesis"
        line = k + 1
    elif kind == "every-line-twice":
        lines = [x for op in ops for x in (render(op, fmt),) * 2]
        line = 2 if _is_client(ops[0]) and ops[0]["type"] == "invoke" else None  # it again
    elif kind == "duplicate-index":
        j = rng.randrange(1, len(ops))
        ops[j]["index"] = ops[rng.randrange(j)]["index"]
        line = j + 1
    elif kind == "invoke-twice":
        extra = {**ops[k], "f": rng.choice([f for f in CLIENT_FS if f != ops[k]["f"]]),
                 "index": len(ops) + 1000}
        ops.insert(k + 1, extra)
        line = k + 2
    elif kind == "completion-f-differs":
        ops[c]["f"] = rng.choice([f for f in CLIENT_FS if f != ops[c]["f"]])
        line = c + 1
    elif kind == "missing-invokes":
        p = ops[k]["process"]
        ops = [op for op in ops if not (op["process"] == p and op["type"] == "invoke")]
        line = 1 + next(i for i, op in enumerate(ops) if op["process"] == p)
    elif kind == "truncated-line":
        lines = [render(op, fmt) for op in ops]
        lines[c] = _truncate(lines[c], fmt, rng)
        line = c + 1 if fmt != "edn" else None  # EDN reads on into the next map
    elif kind == "lone-surrogate":
        ops[c]["value"] = rng.choice(["\ud800", "a\udfff", "\udc80z"])
        line = c + 1
    elif kind == "completion-lock-differs":
        ops[c]["lock"] = "other"
        line = c + 1
    elif kind == "time-backwards":
        ops[c]["time"] = ops[k]["time"] - rng.randint(1, 10**6)
        line = c + 1
    elif kind == "completion-without-invoke":
        ops.insert(c, {**ops[c], "process": 90 + rng.randrange(9), "index": len(ops) + 1000})
        line = c + 1
    elif kind == "client-line-twice":
        ops.insert(k + 1, dict(ops[k]))
        line = k + 2
    else:
        raise ValueError(kind)
    if lines is None:
        lines = [render(op, fmt) for op in ops]
    return lines, line


def benign(kind: str, fmt: str, ops: list[dict[str, Any]], rng: random.Random) -> bytes:
    """``ops`` in ``fmt`` with a change that must not change the verdict."""
    if kind == "extra-fields":
        if fmt == "log":  # a Jepsen log's other lines: no op in them
            lines = [render(op, fmt) for op in ops]
            for _ in range(5):
                lines.insert(rng.randrange(len(lines)), "INFO  jepsen.core - Running test")
            return ("\n".join(lines) + "\n").encode()
        ops = [{**op, "zz-extra": rng.choice([1, "x", None, [1, 2]])} for op in ops]
    text = "\n".join(render(op, fmt) for op in ops) + "\n"
    if kind == "bom":
        return b"\xef\xbb\xbf" + text.encode()
    if kind == "crlf":
        return text.replace("\n", "\r\n").encode()
    if kind == "blank-lines":
        return text.replace("\n", "\n\n").encode()
    return text.encode()


def semantic_cases(seeds: int = 13, benign_seeds: int = 3) -> list[Case]:
    """Every kind of damage on every base and format, ``seeds`` times each (different places),
    and every benign change ``benign_seeds`` times; deterministic."""
    out = []
    for base in BASES:
        ops = base_ops(base)
        for fmt in FORMATS:
            for kind, where in MALFORMED.items():
                if fmt not in where:
                    continue
                for seed in range(seeds):
                    rng = random.Random(f"{base}/{fmt}/{kind}/{seed}")
                    lines, line = damage(kind, fmt, ops, rng)
                    data = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
                    out.append(Case(f"{base}-{kind}-{seed}", fmt, base, kind, data, line))
            for kind in BENIGN:
                for seed in range(benign_seeds):
                    rng = random.Random(f"{base}/{fmt}/{kind}/{seed}")
                    out.append(Case(f"{base}-{kind}-{seed}", fmt, base, kind,
                                    benign(kind, fmt, ops, rng), None))
    return out


# Damage to the syntax that no reading can take for a history, whatever the place: the line
# is cut, holds bytes that are not UTF-8, is not an object, or its brackets do not close.
SYNTACTIC = ("cut-line", "not-utf8", "stranger-line", "unclosed")


def syntactic(kind: str, fmt: str, base: str, rng: random.Random) -> tuple[bytes, int | None]:
    """A base history in ``fmt`` with syntax damage at one line; (bytes, that line or None)."""
    lines = [render(op, fmt) for op in base_ops(base)]
    k = rng.randrange(len(lines))
    line: int | None = k + 1
    if kind == "cut-line":
        if fmt == "log":
            lines[k] = _truncate(lines[k], fmt, rng)
        else:
            lines[k] = lines[k][: rng.randrange(1, len(lines[k]) - 1)]
            line = line if fmt == "jsonl" else None  # EDN reads on into the next map
    elif kind == "not-utf8":
        i = rng.randrange(len(lines[k]))
        data = [x.encode() for x in lines]
        data[k] = data[k][:i] + bytes([rng.randrange(0x80, 0x100)]) + data[k][i:]
        return b"\n".join(data) + b"\n", line
    elif kind == "stranger-line":
        if fmt == "log":  # an op line whose type is no type
            lines[k] = lines[k].replace(f"\t:{base_ops(base)[k]['type']}\t", "\t:maybe\t", 1)
        else:
            lines.insert(k, rng.choice(["null", "1", '"op"', "[]", BIG_INT_TEXT]
                                       if fmt == "jsonl" else [":op", "1", "[]", "nil"]))
    else:  # unclosed
        if fmt == "log":
            lines[k] = lines[k] + "\t[[["
        else:
            lines[k] = lines[k][:-1]
            line = line if fmt == "jsonl" else None
    return ("\n".join(lines) + "\n").encode(), line
