"""Small lock programs for the tests of the client protocol: a toy that speaks it (an in-memory
"lock" that grants at once, or a real Redis lock), and the ways a program can break.

Each is a Python script with this interpreter in its shebang, written where a test wants it:
real programs, started by the harness as any program would be, nothing mocked.
"""

from __future__ import annotations

import sys
from pathlib import Path

# MODE: how the program misbehaves. STATE: a file counting its starts, so that it can misbehave
# only the first time (a restarted program then works).
TOY = r'''#!{python}
import json, os, sys, time
MODE = {mode!r}
STATE = {state!r}
starts = int(open(STATE).read() or 0) + 1 if os.path.exists(STATE) else 1
open(STATE, "w").write(str(starts))
first = starts == 1

def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

hello = json.loads(sys.stdin.readline() or "{{}}")
if MODE == "exit-at-start":
    print("toy: cannot reach the lock service", file=sys.stderr)
    sys.exit(3)
if MODE == "garbage-hello":
    print("Picked up JAVA_TOOL_OPTIONS: -Xmx64m", flush=True)
    time.sleep(5)
    sys.exit(0)
if MODE == "refuse-hello":
    send({{"type": "fail", "error": "no ZooKeeper at " + hello["nodes"][0]["host"]}})
    sys.exit(1)
if MODE == "slow-start":
    time.sleep(float(os.environ.get("TOY_DELAY", "0.3")))
print("toy: hello for process", hello.get("process"), file=sys.stderr, flush=True)
send({{"type": "ok", "name": "toy", "version": "1",
       "tokens": MODE != "no-tokens", "features": ["held", "extend"]}})
if MODE == "deaf":  # never reads again: does not notice stdin closing either
    time.sleep(3600)
token = 0
for line in sys.stdin:
    req = json.loads(line)
    op, rid = req["op"], req["id"]
    if op == "acquire":
        if MODE == "hang-acquire" and first:
            time.sleep(3600)
        if MODE == "garbage-acquire" and first:
            print("<garbage>", flush=True)
            continue
        if MODE == "wrong-id" and first:
            send({{"id": rid + 7, "type": "ok", "token": 1}})
            continue
        if MODE == "busy" or (MODE == "say-why" and rid % 2):
            send({{"id": rid, "type": "fail", "error": "lock busy" if MODE == "busy"
                   else "toy: held by another owner"}})
            continue
        if MODE == "info":
            send({{"id": rid, "type": "info", "error": "connection lost"}})
            continue
        if MODE == "slow-acquire":
            time.sleep(float(os.environ.get("TOY_DELAY", "0.3")))
        token += 1
        send({{"id": rid, "type": "ok", "token": None if MODE == "tokenless-grant" else token,
               "validity": hello["ttl"], "handle": {{"n": token}}}})
        if MODE == "die-after-acquire" and first:
            sys.exit(9)
    elif op == "release" and MODE == "say-why":
        send({{"id": rid, "type": "fail", "error": "toy: the lease lapsed before release"}})
    elif op == "release":
        send({{"id": rid, "type": "ok" if req.get("handle") == {{"n": req.get("token")}}
               else "fail"}})
    elif op == "held":
        send({{"id": rid, "type": "ok", "held": True}})
    elif op == "extend":
        send({{"id": rid, "type": "ok", "validity": req["ttl"]}})
'''


def toy(directory: Path, mode: str = "ok", name: str | None = None) -> Path:
    """Write the toy program misbehaving as ``mode``; its path (executable)."""
    path = directory / (name or f"toy-{mode}")
    path.write_text(TOY.format(python=sys.executable, mode=mode,
                               state=str(directory / f".{path.name}.starts")))
    path.chmod(0o755)
    return path


def starts(program: Path) -> int:
    state = program.with_name(f".{program.name}.starts")
    return int(state.read_text() or 0) if state.exists() else 0


# A real lock over the protocol, for runs against a real Redis: SET NX PX with a counter as the
# token, release by compare-and-delete (redis-py from the harness's own environment). BREAK says
# how it fails once it has served AFTER acquires: "" (never), exit, garbage, hang.
REDIS_LOCK = r'''#!{python}
import json, sys, time, uuid
import redis
BREAK, AFTER = {brk!r}, {after}
SET_INCR = ("if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
            "return redis.call('INCR', KEYS[2]) end return false")
CAD = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"

def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

hello = json.loads(sys.stdin.readline())
node = hello["nodes"][0]
r = redis.Redis(host=node["host"], port=node["port"], socket_timeout=hello["op_timeout"],
                socket_connect_timeout=hello["op_timeout"])
key, ttl = "lock:" + hello["lock"], int(hello["ttl"] * 1000)
send({{"type": "ok", "name": "redis-toy", "version": "1", "tokens": True}})
served = 0
for line in sys.stdin:
    req = json.loads(line)
    rid = req["id"]
    try:
        if req["op"] == "acquire":
            if BREAK and served >= AFTER:
                if BREAK == "exit":
                    print("redis-toy: giving up", file=sys.stderr, flush=True)
                    sys.exit(7)
                if BREAK == "garbage":
                    print("Exception in thread main", flush=True)
                    continue
                if BREAK == "hang":
                    time.sleep(3600)
            served += 1
            owner, deadline = uuid.uuid4().hex, time.monotonic() + req["timeout"]
            while True:
                token = r.eval(SET_INCR, 2, key, key + ":token", owner, ttl)
                if token:
                    send({{"id": rid, "type": "ok", "token": token, "validity": hello["ttl"],
                           "handle": owner}})
                    break
                if time.monotonic() > deadline:
                    send({{"id": rid, "type": "fail", "error": "lock busy"}})
                    break
                time.sleep(0.02)
        elif req["op"] == "release":
            done = r.eval(CAD, 1, key, req["handle"])
            send({{"id": rid, "type": "ok" if done else "fail"}})
    except redis.RedisError as e:
        send({{"id": rid, "type": "info", "error": str(e)}})
'''


def redis_lock(directory: Path, brk: str = "", after: int = 0) -> Path:
    path = directory / f"redis-lock{'-' + brk if brk else ''}"
    path.write_text(REDIS_LOCK.format(python=sys.executable, brk=brk, after=after))
    path.chmod(0o755)
    return path
