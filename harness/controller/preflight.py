"""Can this machine run a spec at all? One line saying what it lacks, before anything starts.

For those who must tell "not installed here" from "failed": the pytest plugin skips a test
whose servers are missing instead of failing it. A run makes the same checks itself (the
backend's preflight), so nothing here is needed for correctness, only for saying it early.
"""

from __future__ import annotations

from typing import Any

from dbs.faketime import libfaketime
from harness.controller import netfilter
from harness.controller.registry import Registry, default_registry
from harness.controller.resolved import make_db
from harness.core import capabilities
from harness.core.errors import HarnessError, UsageError

RESOURCE_DB = "redis"  # the protected resource is a Redis of the harness's own


def unmet(spec: Any, registry: Registry | None = None) -> str | None:
    """What is missing to run ``spec`` (a TestSpec) here, or None: the DB's servers and the
    resource's, iptables for partitions, libfaketime for clocks, a Docker engine. An unknown
    name is no missing server: UsageError."""
    reg = registry or default_registry()
    try:
        if spec.backend == "docker":
            from harness.controller.backends.docker import client

            client().close()
            return None
        if spec.backend != "local":
            return None  # other backends check their hosts when they start
        db = make_db(reg.load("dbs", spec.db), spec.persistence)
        db.check_environment()
        make_db(reg.load("dbs", RESOURCE_DB)).check_environment()
        requires = {cap for n in spec.fault_names
                    for cap in reg.nemesis_requires(n, spec.nemesis_options)}
        if requires & {capabilities.Iptables, capabilities.PeerLinks}:
            netfilter.check_available()
        if capabilities.ClockFaults in requires:
            if libfaketime() is None:
                return ("libfaketime is not installed (Debian package libfaketime): run "
                        "`bash setup.sh`")
            db.host_faketime_dir()  # raises when this host has none for it
    except UsageError:
        raise  # not a missing server: a wrong name
    except HarnessError as err:
        return str(err)
    return None
