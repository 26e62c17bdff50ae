"""The client driver against redis-benchmark, side by side in one window.

    .venv/bin/python bench/bench_driver.py [--rounds 3] [--time-limit 10] [--clients 5]
    .venv/bin/python bench/bench_driver.py --db zookeeper|etcd [...]

Each round runs, one after the other on this machine:

A. redis-benchmark against a real redis-server with the commands of a lock session: ``SET key
   v NX PX 2000`` (acquire) and the compare-and-delete ``EVAL`` (release), ``--clients``
   connections, a key per connection (``-r``), no pipelining: acquire+release pairs per second
   = 1 / (1/set_rps + 1/eval_rps).
B. ``harness run --workload lock --nemesis none --hold 0 --think 0 --keys N --clients N``
   (acquire and release, the same two commands; each client its own key, so nobody waits for
   a lock), acquire+release pairs per second from its history, every op journaled.

With ``--floor``, each round also runs C. a bare Python loop: ``--clients`` processes, each
sending the same two requests on a socket of its own (packed once, the owner changed each
time, EVALSHA for the release as the driver's lock sends it), nothing journaled, no lock or
workload layer: what any Python client process a request costs on this machine, the floor the
driver's own layers stand on.

The ratio B/A is printed per round and as the median, and beside it what each side spent on
the CPU a pair: redis-benchmark's user+system seconds, and the client processes' own (each
prints in its log as it exits its CPU seconds and how many of them went before its first op;
those are left out). On a machine shared with other work the pairs per second follow the share
of the CPU each side gets; the CPU a pair much less so. ``--workload mutex`` measures the mutex
workload instead, which also writes twice to the protected resource per session: the ratio of
requests per second (4 a session against 2 a pair) is printed too.

With ``--db zookeeper`` or ``--db etcd`` (Debian ships no benchmark tool for either), A is a
bare client loop instead: ``--clients`` processes, each taking and releasing the DB's own lock
recipe (kazoo's ``Lock``, python-etcd3's ``lock()``) on a key of its own as fast as it can,
against the same cluster the harness starts, with nothing journaled and nothing written.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CAD = ("if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
       "end return 0")


@contextlib.contextmanager
def redis_node(tmp: Path) -> Iterator[tuple[str, int]]:
    from dbs.redis import RedisDB
    from tests.one_node import one_node

    with one_node(RedisDB(), tmp) as (node,):
        yield node.host, node.port


def benchmark_rps(host: str, port: int, clients: int, n: int, *command: str) -> float:
    out = subprocess.run(["redis-benchmark", "-h", host, "-p", str(port), "-c", str(clients),
                          "-n", str(n), "-r", str(clients), "--csv", *command],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    rows = [row for row in csv.reader(out.splitlines()) if row]
    return float(rows[-1][1])


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def client_cpu_per_pair(store: Path) -> float:
    """Seconds of CPU the latest run's clients spent per completed release (from their first
    op on: their start-up left out)."""
    run = (store / "latest").resolve()
    cpu = sum(float(m.group(1)) - float(m.group(2))
              for log in (run / "logs").glob("client-*.log")
              for m in re.finditer(r"journal lines, ([0-9.]+) s CPU \(([0-9.]+) s of it before",
                                   log.read_text()))
    with (run / "history.jsonl").open("rb") as fh:
        releases = sum(1 for line in fh if b'"f":"release"' in line and b'"type":"ok"' in line)
    return cpu / max(1, releases)


def benchmark_pairs(host: str, port: int, clients: int, n: int) -> float:
    set_rps = benchmark_rps(host, port, clients, n, "SET", "lock:__rand_int__", "v", "NX",
                            "PX", "2000")
    eval_rps = benchmark_rps(host, port, clients, n, "EVAL", CAD, "1", "lock:__rand_int__",
                             "v")
    return 1 / (1 / set_rps + 1 / eval_rps)


BARE_LOOP = {
    "zookeeper": """
import sys, time
from kazoo.client import KazooClient
hosts, key, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
zk = KazooClient(hosts=hosts, timeout=2.0); zk.start(15)
lock = zk.Lock(f"/bench/{key}"); n = 0; end = time.monotonic() + seconds
while time.monotonic() < end:
    lock.acquire(timeout=5); lock.release(); n += 1
print(n); zk.stop()
""",
    "etcd": """
import sys, time
import etcd3
host, port = sys.argv[1].split(",")[0].split(":"); key, seconds = sys.argv[2], float(sys.argv[3])
client = etcd3.client(host=host, port=int(port), timeout=2)
n = 0; end = time.monotonic() + seconds
while time.monotonic() < end:
    lock = client.lock(key, ttl=2); lock.acquire(timeout=5); lock.release(); n += 1
print(n)
""",
}


@contextlib.contextmanager
def cluster(db: str, tmp: Path) -> Iterator[str]:
    from harness.controller.registry import default_registry
    from harness.controller.spec import make_db
    from tests.one_node import one_node

    db_obj = make_db(default_registry().load("dbs", db))
    with one_node(db_obj, tmp, nodes=3) as nodes:
        yield ",".join(f"{n.host}:{n.port}" for n in nodes)


def bare_pairs(db: str, hosts: str, clients: int, seconds: float) -> float:
    procs = [subprocess.Popen([sys.executable, "-c", BARE_LOOP[db], hosts, f"k{i}",
                               str(seconds)], stdout=subprocess.PIPE, text=True)
             for i in range(clients)]
    total = sum(int(p.communicate(timeout=seconds * 4 + 60)[0].split()[-1]) for p in procs)
    return total / seconds


BARE_PYTHON = """
import os, random, resource, socket, sys, time
host, port, key, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode(), float(sys.argv[4])
cad, pairs = sys.argv[5].encode(), int(sys.argv[6]) if len(sys.argv) > 6 else -1
sha = __import__("hashlib").sha1(cad).hexdigest().encode()
def bulk(b):
    return b"$%d\\r\\n%b\\r\\n" % (len(b), b)
s = socket.create_connection((host, port)); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
buf = bytearray(65536)
s.sendall(b"*3\\r\\n" + bulk(b"SCRIPT") + bulk(b"LOAD") + bulk(cad)); s.recv_into(buf)
set_head = b"*6\\r\\n" + bulk(b"SET") + bulk(key)
set_tail = bulk(b"NX") + bulk(b"PX") + bulk(b"2000")
cad_head = b"*5\\r\\n" + bulk(b"EVALSHA") + bulk(sha) + bulk(b"1") + bulk(key)
rng = random.Random(os.urandom(16))
def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF); return u.ru_utime + u.ru_stime
n, c0 = 0, cpu(); end = time.monotonic() + seconds
while n != pairs and time.monotonic() < end:
    owner = b"%032x" % rng.getrandbits(128)
    s.sendall(set_head + bulk(owner) + set_tail)
    if not s.recv_into(buf) or buf[0] != 43:  # +OK
        raise SystemExit("SET NX PX failed")
    s.sendall(cad_head + bulk(owner))
    if not s.recv_into(buf) or buf[:2] != b":1":
        raise SystemExit("compare-and-delete failed")
    n += 1
print(n, cpu() - c0)
"""


def bare_python_pairs(host: str, port: int, clients: int, seconds: float
                      ) -> tuple[float, float]:
    """Pairs per second of ``clients`` bare Python loops (module doc: C), and their CPU a
    pair."""
    procs = [subprocess.Popen([sys.executable, "-c", BARE_PYTHON, host, str(port),
                               f"lock:floor{i}", str(seconds), CAD], stdout=subprocess.PIPE,
                              text=True)
             for i in range(clients)]
    outs = [p.communicate(timeout=seconds * 4 + 60)[0].split() for p in procs]
    pairs = sum(int(o[0]) for o in outs)
    return pairs / seconds, sum(float(o[1]) for o in outs) / max(1, pairs)


def driver_pairs(store: Path, clients: int, time_limit: float, db: str = "redis",
                 workload: str = "lock", extra: tuple[str, ...] = ("--nemesis", "none")
                 ) -> float:
    """Pairs per second of the driver in a run (``extra``: its nemesis and more), counted
    until the run's first fault, if it has one."""
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--db", db, *extra,
         "--workload", workload,
         "--hold", "0", "--think", "0", "--clients", str(clients), "--keys", str(clients),
         "--time-limit", str(time_limit), "--store", str(store), "--quiet"],
        cwd=REPO, capture_output=True, text=True, timeout=time_limit * 4 + 120)
    run = (store / "latest").resolve()
    if proc.returncode != 0 and not (run / "history.jsonl").exists():
        raise RuntimeError(f"harness run exited {proc.returncode}: {proc.stderr.strip()}")
    ops = [json.loads(x) for x in (run / "history.jsonl").read_text().splitlines()]
    fault = next((op["time"] for op in ops if op["process"] == "nemesis"), None)
    ops = [op for op in ops if fault is None or op["time"] < fault]
    releases = [op for op in ops if op["f"] == "release" and op["type"] == "ok"]
    acquires = [op for op in ops if op["f"] == "acquire" and op["type"] == "invoke"]
    span = (releases[-1]["time"] - acquires[0]["time"]) / 1e9
    return len(releases) / span


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=5)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--db", default="redis", choices=["redis", "zookeeper", "etcd"])
    ap.add_argument("--workload", default="lock", choices=["lock", "mutex"])
    ap.add_argument("--floor", action="store_true",
                    help="also a bare Python loop each round (C in the module doc)")
    args = ap.parse_args()
    if args.db != "redis":
        return main_bare(args)
    if shutil.which("redis-benchmark") is None:
        print("redis-benchmark not found (Debian package redis-tools)", file=sys.stderr)
        return 3
    ratios, a_all, b_all, floors = [], [], [], []
    per_pair = 2 if args.workload == "mutex" else 1  # requests a pair, against the benchmark's
    with tempfile.TemporaryDirectory(prefix="lh-driver-") as tmp:
        for r in range(1, args.rounds + 1):
            with redis_node(Path(tmp) / f"node{r}") as (host, port):
                cpu = children_cpu()
                a = benchmark_pairs(host, port, args.clients, args.requests)
                a_cpu = (children_cpu() - cpu) / args.requests
                if args.floor:
                    c, c_cpu = bare_python_pairs(host, port, args.clients, args.time_limit)
            store = Path(tmp) / f"store{r}"
            b = driver_pairs(store, args.clients, args.time_limit, workload=args.workload)
            b_cpu = client_cpu_per_pair(store)
            ratios.append(b / a)
            a_all.append(a)
            b_all.append(b)
            print(f"round {r}: redis-benchmark {a:,.0f} pairs/s, driver {b:,.0f} pairs/s: "
                  f"{100 * b / a:.1f}% (requests: {100 * per_pair * b / a:.1f}%); CPU a pair: "
                  f"redis-benchmark {1e6 * a_cpu:.1f} us, driver's clients "
                  f"{1e6 * b_cpu:.1f} us", flush=True)
            if args.floor:
                floors.append(c / a)
                print(f"round {r}: bare Python loop {c:,.0f} pairs/s: {100 * c / a:.1f}% of "
                      f"redis-benchmark; CPU a pair {1e6 * c_cpu:.1f} us", flush=True)
            time.sleep(1)
    med = statistics.median(ratios)
    print(f"median: redis-benchmark {statistics.median(a_all):,.0f} pairs/s, driver "
          f"{statistics.median(b_all):,.0f} pairs/s, ratio {100 * med:.1f}% of "
          f"redis-benchmark (requests per second: {100 * per_pair * med:.1f}%)")
    if floors:
        print(f"median: bare Python loop at {100 * statistics.median(floors):.1f}% of "
              "redis-benchmark")
    return 0


def main_bare(args: argparse.Namespace) -> int:
    ratios = []
    with tempfile.TemporaryDirectory(prefix="lh-driver-") as tmp:
        for r in range(1, args.rounds + 1):
            with cluster(args.db, Path(tmp) / f"c{r}") as hosts:
                a = bare_pairs(args.db, hosts, args.clients, args.time_limit)
            b = driver_pairs(Path(tmp) / f"store{r}", args.clients, args.time_limit, args.db,
                             args.workload)
            ratios.append(b / a)
            print(f"round {r}: bare {args.db} loop {a:,.0f} pairs/s, driver {b:,.0f} pairs/s: "
                  f"{100 * b / a:.1f}%", flush=True)
    print(f"median: driver at {100 * statistics.median(ratios):.1f}% of a bare {args.db} "
          "client loop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
