"""A client process: ``python -m workloads.client CONFIG.json``.

Each client is its own OS process, so that SIGSTOP freezes a lock holder the way a GC pause does,
its renewal threads included. It binds its own source address, builds its lock, runs the
workload until told to stop (SIGTERM) and journals every op as it happens. The controller
resolved every name to a ``module:Class`` target already: this process never needs the registry.
"""

from __future__ import annotations

import contextlib
import os
import resource as resource_usage
import signal
import sys
import time
from pathlib import Path
from typing import Any

from harness.core.atomic import write_text
from harness.core.client_config import ClientConfig
from harness.core.journal import JournalWriter
from harness.core.locks import LockConfig
from harness.core.roles import load_object
from harness.core.text import line
from workloads import crash
from workloads.async_lock import AsyncLockRunner, is_async
from workloads.lock_setup import set_up
from workloads.mutex import MutexParams, Stop
from workloads.sockbind import bind_source

CLOCK_SIGNAL = signal.SIGUSR2  # asks the client to write its clocks (clock-client's read-back)


def answer_clock_probes(path: str) -> None:
    """On :data:`CLOCK_SIGNAL`, write ``WALL MONOTONIC`` as this process reads them to
    ``path``: a clock moved for this process alone (its vDSO patched) is read back as it sees
    it, against the controller's clocks."""
    signal.signal(CLOCK_SIGNAL, lambda *_: write_text(
        path, f"{time.time()!r} {time.monotonic()!r}\n"))


def build_lock(cfg: ClientConfig, lock_cls: Any, *, needs_tokens: bool = False) -> Any:
    """The run's lock. Its options: the ones it declares (``lock_options``: every one, the
    run's value or its default); apart from them, in ``config.harness``: the seed, the
    client's own source address, whether the workload needs fencing tokens (a lock that only
    learns at start-up whether it has them, an external program, can refuse then), and what
    the DB or the lock's entry adds (``harness_options``: Sentinels, a program's path)."""
    config = LockConfig(
        nodes=cfg.nodes,
        name=cfg.lock_name,
        ttl=cfg.ttl,
        op_timeout=cfg.op_timeout,
        process=cfg.process,
        options=dict(cfg.lock_options),
        harness={**cfg.harness_options, "seed": cfg.seed, "source": cfg.source,
                 "workload_needs_tokens": needs_tokens},
    )
    lock = lock_cls(config)
    return AsyncLockRunner(lock) if is_async(lock) else lock


def cpu_seconds() -> float:
    usage = resource_usage.getrusage(resource_usage.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str]) -> int:
    """Run the client; anything that stops it is ONE line on stderr (its log, which the
    controller quotes), then exit 70."""
    try:
        return run_client(argv)
    except Exception as e:
        where = getattr(e, "__traceback__", None)
        frame = ""
        while where is not None and where.tb_next is not None:
            where = where.tb_next
        if where is not None:
            frame = f" (at {Path(where.tb_frame.f_code.co_filename).name}:{where.tb_lineno})"
        print(f"client stopped: {type(e).__name__}: {line(str(e), 300)}{frame}",
              file=sys.stderr, flush=True)
        return 70


def run_client(argv: list[str]) -> int:
    cfg = ClientConfig.from_json(Path(argv[1]).read_text())
    stop = Stop()  # set by SIGTERM; its flag is what the loop of empty sessions checks
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the controller's to handle
    answer_clock_probes(cfg.clock_file)
    bind_source(cfg.source, cfg.networks, cfg.redirects)
    journal = JournalWriter(cfg.journal, cfg.process, cfg.t0_ns)
    workload_cls = load_object(cfg.workload_target)
    lock_cls = load_object(cfg.lock_target)
    # Ready to be armed before the lock starts (an external program takes a while): the arming
    # signal kills a process that has no handler for it yet.
    crash.configure(cfg.crash_file, tuple(getattr(lock_cls, "crash_steps", ())))
    lock = build_lock(cfg, lock_cls,
                      needs_tokens=bool(getattr(workload_cls, "needs_tokens", False)))
    set_up(lock)  # once, bounded, before the first op; a failure: could-not-run
    resource = load_object(cfg.resource_target)(cfg.resource.host, cfg.resource.port,
                                                mode=cfg.resource_mode)
    # A lock may say how it is used (consensus locks guard long critical sections); options
    # from the run's config win.
    options = {**(getattr(lock, "workload_defaults", None) or {}),
               **cfg.workload_options}
    params = MutexParams(process=cfg.process, lock_name=cfg.lock_name, seed=cfg.seed,
                         end_ns=cfg.end_ns, holds_seen=cfg.faults, **options)
    ready = cpu_seconds()
    try:
        workload_cls(params, lock, resource, journal, stop).run()
    finally:
        print(f"client {cfg.process}: {journal.lines} journal lines, {cpu_seconds():.2f} s CPU "
              f"({ready:.2f} s of it before the first op)", file=sys.stderr, flush=True)
        journal.close()
        for closer in (lock, resource):
            with contextlib.suppress(Exception):
                closer.close()
    return 0


def exit_now(code: int) -> None:
    """Exit without the interpreter's teardown: the journal, the lock and the resource are
    closed by then, and a client spent ~0.33 s tearing down modules (strace: no system call
    between its journal's close and its exit), five of them ~0.5 s of CPU on two cores, all of
    it between the load's end and the verdict."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main(sys.argv))
