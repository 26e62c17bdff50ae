"""Every default of a run, written once: the spec, the client, the lock's config and the
checkers read them from here (a checker's parameter default included)."""

from __future__ import annotations

TTL = 2.0  # seconds a lock's lease or session lasts (--ttl)
OP_TIMEOUT = 1.0  # seconds a client waits for one reply (--op-timeout; a nemesis may need more)
RESOURCE = "redis"  # the protected resource when neither the lock nor the workload picks one


def resource_mode(given: str | None, fenced: bool) -> str:
    """The protected resource's mode: as given, else ``fenced`` for a workload that writes
    with fencing tokens (``fenced = True``), else ``plain``."""
    return given or ("fenced" if fenced else "plain")
