"""The lock-harness node image on a real Docker engine.

Builds the image if need be (docker/build_image.py: a no-op when the recipe's image is present),
then checks what the docker backend relies on: Redis is the libc-malloc build; a node on a
labelled bridge network answers PING, can be paused with SIGSTOP, cut off with iptables inside
the container (cap NET_ADMIN), and have its clock moved with libfaketime.

Skipped (with the reason) only when no Docker engine answers, a failure under
`--harness-require-servers` (CI): `bash docker/engine.sh` starts one.
Every container and network made here carries the labels lock-harness=1 and
lock-harness.test=<run id>, and is removed by that label at the end.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker  # a dependency of the harness (pyproject.toml): never a reason to skip
import pytest
from docker.errors import DockerException, NotFound

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "docker" / "build_image.py"
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
RUN_ID = uuid.uuid4().hex[:8]
LABELS = {"lock-harness": "1", "lock-harness.test": RUN_ID}
PREFIX = f"lh-test-{RUN_ID}"


def wait_for(what: str, probe: Any, timeout_s: float = 20.0, every_s: float = 0.1) -> Any:
    """Call probe() until it returns a truthy value; fail after timeout_s."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every_s)
    pytest.fail(f"{what}: not within {timeout_s:.0f}s (last: {last!r})")


def sh(container: Any, cmd: str, **kw: Any) -> tuple[int, str]:
    """Run a shell command in a container; (exit code, stdout+stderr)."""
    res = container.exec_run(["sh", "-c", cmd], **kw)
    return res.exit_code, res.output.decode(errors="replace").strip()


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    try:
        c = docker.from_env(timeout=30)
        c.ping()
    except DockerException as e:
        pytest.skip(f"no Docker engine reachable ({type(e).__name__}): run bash docker/engine.sh")
    try:
        yield c
    finally:
        for ctr in c.containers.list(all=True, filters={"label": f"lock-harness.test={RUN_ID}"}):
            with contextlib.suppress(NotFound):
                ctr.remove(force=True)
        for net in c.networks.list(filters={"label": f"lock-harness.test={RUN_ID}"}):
            net.remove()
        c.close()


@pytest.fixture(scope="module")
def image(client: Any) -> str:
    """The image tag for the current recipe, built if missing (minutes, root)."""
    proc = subprocess.run(
        [sys.executable, str(BUILD)], capture_output=True, text=True, timeout=3600, check=False
    )
    assert proc.returncode == 0, f"build_image.py failed: {proc.stderr.strip().splitlines()[-1:]}"
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def network(client: Any) -> Any:
    return client.networks.create(f"{PREFIX}-net", driver="bridge", labels=LABELS)


def run_node(client: Any, image: str, name: str, cmd: list[str], **kw: Any) -> Any:
    return client.containers.run(
        image, cmd, name=f"{PREFIX}-{name}", hostname=name, labels=LABELS, detach=True, **kw
    )


@pytest.fixture(scope="module")
def redis_node(client: Any, image: str, network: Any) -> Any:
    node = run_node(
        client,
        image,
        "r1",
        # protected-mode: with no password Redis answers only loopback clients otherwise.
        ["redis-server", "--port", "6379", "--protected-mode", "no", "--save", ""],
        network=network.name,
        cap_add=["NET_ADMIN"],
    )
    wait_for("r1 answers PING", lambda: sh(node, "redis-cli ping") == (0, "PONG"))
    return node


@pytest.fixture(scope="module")
def peer(client: Any, image: str, network: Any, redis_node: Any) -> Any:
    """A second node on the same network, to talk to r1 over the bridge."""
    node = run_node(client, image, "p1", ["sleep", "infinity"], network=network.name)
    node.reload()
    return node


def peer_ping(peer: Any, timeout_s: int = 2) -> tuple[int, str]:
    return sh(peer, f"timeout {timeout_s} redis-cli -h {PREFIX}-r1 -p 6379 ping")


def test_image_is_labelled_and_tagged(client: Any, image: str) -> None:
    img = client.images.get(image)
    assert img.labels.get("lock-harness") == "1"
    assert image == f"lock-harness/node:{img.labels['lock-harness.recipe']}"
    assert "lock-harness/node:latest" in img.tags
    again = subprocess.run(
        [sys.executable, str(BUILD), "--print-tag"], capture_output=True, text=True, check=True
    )
    assert again.stdout.strip() == image


def test_redis_is_the_libc_malloc_build(client: Any, image: str) -> None:
    out = client.containers.run(
        image, ["redis-server", "--version"], labels=LABELS, network_mode="none", remove=True
    ).decode()
    assert "malloc=libc" in out, out
    assert "v=7.0." in out, out


def test_node_answers_ping_over_the_labelled_network(network: Any, peer: Any) -> None:
    network.reload()
    assert network.attrs["Labels"].get("lock-harness") == "1"
    assert network.attrs["Driver"] == "bridge"
    assert peer_ping(peer) == (0, "PONG")


def test_sigstop_pauses_the_server(redis_node: Any, peer: Any) -> None:
    redis_node.kill(signal="SIGSTOP")
    try:
        code, state = sh(redis_node, "grep '^State:' /proc/1/status")
        assert code == 0 and "stopped" in state, state
        code, out = peer_ping(peer)
        assert code == 124, f"a paused server answered: {code} {out!r}"
    finally:
        redis_node.kill(signal="SIGCONT")
    wait_for("r1 answers after SIGCONT", lambda: peer_ping(peer) == (0, "PONG"), 10)


def test_iptables_inside_the_container_cuts_the_peer_off(redis_node: Any, peer: Any) -> None:
    peer_ip = peer.attrs["NetworkSettings"]["Networks"][f"{PREFIX}-net"]["IPAddress"]
    rule = f"INPUT -s {peer_ip} -p tcp --dport 6379 -j DROP"
    code, out = sh(redis_node, f"iptables -A {rule}")
    assert code == 0, f"iptables (cap NET_ADMIN) failed: {out}"
    try:
        code, out = peer_ping(peer)
        assert code == 124, f"the cut-off peer still got an answer: {code} {out!r}"
        assert sh(redis_node, "redis-cli ping") == (0, "PONG")  # the server itself is fine
    finally:
        code, out = sh(redis_node, f"iptables -D {rule}")
        assert code == 0, out
    wait_for("r1 answers after the heal", lambda: peer_ping(peer) == (0, "PONG"), 10)


def redis_time(node: Any, port: int) -> int | None:
    # LD_PRELOAD= : redis-cli itself need not be faked (TIME is the server's clock).
    code, out = sh(node, f"redis-cli -p {port} TIME", environment={"LD_PRELOAD": ""})
    return int(out.split()[0]) if code == 0 and out else None


def test_libfaketime_moves_redis_time_by_60s(client: Any, image: str) -> None:
    node = run_node(
        client,
        image,
        "ft1",
        ["redis-server", "--port", "7000", "--save", ""],
        network_mode="none",
        environment={"LD_PRELOAD": FAKETIME_LIB, "FAKETIME": "+60s"},
    )
    server_now = wait_for("faked redis answers TIME", lambda: redis_time(node, 7000))
    offset = server_now - time.time()
    assert 57 <= offset <= 63, f"TIME is {offset:+.1f}s from the host clock, not +60s"


def test_faketime_file_changes_the_offset_of_a_running_server(client: Any, image: str) -> None:
    node = run_node(
        client,
        image,
        "ft2",
        ["sh", "-c", "echo +60s >/tmp/faketime && exec redis-server --port 7000 --save ''"],
        network_mode="none",
        environment={
            "LD_PRELOAD": FAKETIME_LIB,
            "FAKETIME_TIMESTAMP_FILE": "/tmp/faketime",
            "FAKETIME_NO_CACHE": "1",
        },
    )
    first = wait_for("faked redis answers TIME", lambda: redis_time(node, 7000))
    assert 57 <= first - time.time() <= 63
    assert sh(node, "echo +120s >/tmp/faketime")[0] == 0
    later = wait_for("redis TIME follows the file", lambda: redis_time(node, 7000))
    assert 117 <= later - time.time() <= 123, f"offset {later - time.time():+.1f}s, not +120s"


def test_etcd_starts(client: Any, image: str) -> None:
    node = run_node(
        client,
        image,
        "etcd1",
        [
            "etcd", "--name", "n1", "--data-dir", "/data/etcd",
            "--listen-client-urls", "http://0.0.0.0:2379",
            "--advertise-client-urls", "http://127.0.0.1:2379",
            "--listen-peer-urls", "http://0.0.0.0:2380",
            "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
            "--initial-cluster", "n1=http://127.0.0.1:2380",
        ],
        network_mode="none",
    )  # fmt: skip
    health = "etcdctl --endpoints http://127.0.0.1:2379 endpoint health"
    wait_for("etcd is healthy", lambda: "is healthy" in sh(node, health)[1])


ZOO_CFG = (
    "tickTime=2000\\ninitLimit=10\\nsyncLimit=5\\ndataDir=/data/zk\\nclientPort=2181\\n"
    "4lw.commands.whitelist=*\\nadmin.enableServer=false\\n"
)
ZK_CLASSPATH = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"


def test_zookeeper_starts(client: Any, image: str) -> None:
    start = (
        f"mkdir -p /data/zk && printf '{ZOO_CFG}' >/data/zoo.cfg && exec java -Xmx256m "
        f"-cp {ZK_CLASSPATH} org.apache.zookeeper.server.quorum.QuorumPeerMain /data/zoo.cfg"
    )
    node = run_node(client, image, "zk1", ["sh", "-c", start], network_mode="none")
    # Bounded: an nc that connected while the JVM was starting once waited for ever (CI).
    ruok = "echo ruok | timeout 5 nc -q1 -w2 127.0.0.1 2181"
    wait_for("zookeeper answers ruok", lambda: sh(node, ruok) == (0, "imok"), 60, 0.25)
    assert "QuorumPeerConfig" in node.logs().decode(errors="replace")  # it logs (slf4j-simple)
