"""What the ssh backend costs: hosts up, cluster start-up to ready, node operations over SSH.

    .venv/bin/python bench/bench_ssh.py [--hosts 3] [--runs 3] [--db redis|zookeeper|etcd]
                                        [--ops 50]

1. `harness hosts up N` (containers of the node image as SSH hosts): seconds until every sshd
   answers.
2. Per run, through the harness's own ssh backend: connect and claim the hosts, provision,
   start N nodes (+ the resource on this machine) until every one is ready; then tear down.
3. Node operations with the run's multiplexed connections: pause+resume, is_running, a cut
   of one address on a host plus its heal, a clock offset written; medians in milliseconds,
   and the same pause+resume with a new SSH connection each time (what multiplexing saves).
4. `harness hosts down`.
Exit 0, or 1 if something failed (one line says what).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from harness.controller.backends.ssh import docker_hosts  # noqa: E402
from harness.controller.backends.ssh.backend import SshBackend  # noqa: E402
from harness.controller.backends.ssh.hosts import load  # noqa: E402
from harness.controller.backends.ssh.transport import Remote  # noqa: E402
from harness.controller.procs import ProcessTable  # noqa: E402
from harness.controller.registry import default_registry  # noqa: E402
from harness.controller.spec import make_db  # noqa: E402
from harness.controller.store import RunDir  # noqa: E402
from harness.core.cluster import Node  # noqa: E402
from harness.core.errors import HarnessError  # noqa: E402


def median_ms(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.monotonic()
        fn()
        times.append(time.monotonic() - t0)
    return statistics.median(times) * 1000


def one_run(hosts_path: Path, db_name: str, nodes: int, ops: int, measure_ops: bool
            ) -> tuple[float, float]:
    reg = default_registry()
    db = make_db(reg.load("dbs", db_name))
    resource_db = make_db(reg.load("dbs", "redis"))
    with tempfile.TemporaryDirectory(prefix="lh-bench-ssh-") as tmp:
        run = RunDir(Path(tmp))
        procs = ProcessTable(run.pids)
        backend = SshBackend(run, procs, f"bench/{uuid.uuid4().hex[:8]}", load(hosts_path))
        t0 = time.monotonic()
        try:
            backend.prepare(db.port, nodes, clients=1)
            cluster = [Node(f"n{i + 1}", backend.node_host(i), db.port) for i in range(nodes)]
            resource = Node("resource", backend.resource_host(), db.port)
            backend.preflight(db, [*cluster, resource], True)
            backend.provision(db, cluster)
            backend.provision(resource_db, [resource])
            for node in [*cluster, resource]:
                backend.start(node)
            for node in [*cluster, resource]:
                backend.wait_ready(node, 60)
            up = time.monotonic() - t0
            if measure_ops:
                n1 = cluster[0]
                backend.register_endpoint("c0", backend.client_host(0))

                def pause_resume() -> None:
                    backend.pause(n1)
                    backend.resume(n1)

                def cut_heal() -> None:
                    backend.cut([("c0", "n1")])
                    backend.heal()

                print(f"  pause+resume {median_ms(pause_resume, ops):6.1f} ms, is_running "
                      f"{median_ms(lambda: backend.is_running(n1), ops):6.1f} ms, cut+heal "
                      f"{median_ms(cut_heal, ops):6.1f} ms, clock offset "
                      f"{median_ms(lambda: backend.set_clock(n1, 0), ops):6.1f} ms "
                      f"(median of {ops}, multiplexed)")
                plain = Remote(backend.remotes[backend.node_hosts[0].name].host)
                pidfile = backend._paths(n1)[2]

                def unmultiplexed() -> None:
                    plain.helper("signal", pidfile, "STOP")
                    plain.helper("signal", pidfile, "CONT")

                print(f"  pause+resume {median_ms(unmultiplexed, max(5, ops // 5)):6.1f} ms "
                      "with a new SSH connection per command")
        finally:
            t1 = time.monotonic()
            backend.teardown()
            procs.kill_all()
            down = time.monotonic() - t1
    return up, down


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=3, help="SSH hosts (3)")
    ap.add_argument("--runs", type=int, default=3, help="cluster starts (3)")
    ap.add_argument("--db", default="redis", help="redis (default), zookeeper or etcd")
    ap.add_argument("--ops", type=int, default=50, help="repetitions of each node op (50)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lh-bench-hosts-") as tmp:
        path = Path(tmp) / "HOSTS.toml"
        try:
            t0 = time.monotonic()
            docker_hosts.up(a.hosts, path, say=lambda s: None)
            print(f"hosts up {a.hosts}: {time.monotonic() - t0:.2f} s")
            ups = []
            for i in range(a.runs):
                up, down = one_run(path, a.db, a.hosts, a.ops, measure_ops=i == 0)
                print(f"run {i + 1}: {a.hosts} {a.db} node(s) + resource ready over ssh in "
                      f"{up:.2f} s; torn down in {down:.2f} s")
                ups.append(up)
            print(f"start-up of {a.hosts} {a.db} node(s): best {min(ups):.2f} s, median "
                  f"{statistics.median(ups):.2f} s over {len(ups)} run(s)")
        except HarnessError as e:
            print(f"bench_ssh.py: {e}", file=sys.stderr)
            return 1
        finally:
            if path.exists():
                t1 = time.monotonic()
                docker_hosts.down(path, say=lambda s: None)
                print(f"hosts down: {time.monotonic() - t1:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
