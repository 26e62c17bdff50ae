"""The Debian packages a machine of the harness needs, derived from what declares them.

Each DB class declares its own (``debian_packages``, :class:`dbs.base.DB`); a DB whose clock
faults go through libfaketime also needs libfaketime (:mod:`dbs.faketime`); the harness's own
few are below. ``python3 -m harness.controller.packages`` prints the list for this host, one a
line (setup.sh installs it); ``--image`` prints the node image's (docker/build_image.py and
docker/Dockerfile install it). A new DB is one file plus its registry entry: both lists follow.

setup.sh runs this with the system Python, before the venv exists: so it imports the standard
library and the DB modules alone (they load without their client libraries, :mod:`dbs.base`),
and reads the built-in DBs from the registry's source (the registry imports third-party
libraries).
"""

from __future__ import annotations

import argparse
import ast
from collections.abc import Iterable, Sequence
from pathlib import Path

from dbs.base import DB
from dbs.faketime import DEBIAN_PACKAGES as FAKETIME
from harness.core.capabilities import ClockFaults
from harness.core.roles import load_object

REGISTRY = Path(__file__).with_name("registry.py")

# What the harness itself runs, on this host and in a node.
HARNESS = (
    "iptables",  # partitions, one-way and lossy links (netfilter)
    "iproute2",  # `ip`: the addresses of nodes and clients
    "procps",  # ps and pkill, to look into a node
    "fuse3",  # libfuse3 and fusermount3: the power-loss filesystem (syncfs)
)
HOST = ("openssh-client",)  # the ssh backend (and ssh-keygen for `harness hosts up`)
IMAGE = (
    "openssh-server",  # a node as a plain SSH host of the ssh backend (harness hosts up)
    "netcat-openbsd",  # health checks and debugging inside a node
    "etcd-client",  # etcdctl, the same
    "python3-pip",  # the power-loss filesystem in a node: python3, and mfusepy from PyPI
)


def builtin_dbs(registry: Path = REGISTRY) -> list[type[DB]]:
    """The registry's built-in DB classes, read from its ``BUILTINS`` table."""
    tree = ast.parse(registry.read_text(), str(registry))
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == "BUILTINS" and node.value is not None:
            table = ast.literal_eval(node.value)
            return [load_object(t) for t in table["dbs"].values()]
    raise LookupError(f"{registry} has no BUILTINS table")


def db_packages(db: type[DB]) -> list[str]:
    """What a DB's nodes need: its own packages, and libfaketime when its clock faults use it."""
    own = list(db.debian_packages.values())
    if db.clock_mechanism == "libfaketime" and issubclass(db, ClockFaults):
        own += FAKETIME
    return own


def packages(dbs: Iterable[type[DB]], image: bool = False) -> list[str]:
    """This host's packages (``image``: the node image's), each once, in a stable order."""
    wanted = [*HARNESS, *(IMAGE if image else HOST)]
    for db in dbs:
        if db.apt_source is None:  # another repository's: `harness setup --db NAME` alone
            wanted += db_packages(db)
    return list(dict.fromkeys(wanted))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m harness.controller.packages",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--image", action="store_true", help="the node image's packages")
    args = parser.parse_args(argv)
    print("\n".join(packages(builtin_dbs(), image=args.image)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
