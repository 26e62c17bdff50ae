"""``harness doctor``: a table of what this machine has and lacks, with available / missing and,
for each missing one, the ``harness setup ...`` that installs it (:mod:`harness.controller.needs`
reads them from the roles' declarations). Alone: every DB, backend, fault family and external
client (each client with the locks it serves). With ``--db/--backend/--lock/--nemesis``: only
the rows such a run needs (the defaults of ``harness run`` for the rest). Exit 0 when that run
can run here, else 1, naming it in the one line ``harness run`` would refuse with."""

from __future__ import annotations

from typing import Any

from harness.controller import needs
from harness.controller.registry import default_registry
from harness.controller.spec import TestSpec


def doctor(asked: dict[str, Any]) -> int:
    """Print the table; 0 when the run ``asked`` (spec keys) describes can run here, else 1."""
    spec = TestSpec.from_dict(asked).validate()
    wanted = needs.asked(spec)
    rows = wanted if asked else needs.table()
    served = {build: [cls.name for cls in locks]
              for build, locks in needs.clients(default_registry()).items()}
    width = max(len(r.name) for r in rows)
    for r in rows:
        state = "available" if r.available else f"MISSING   {r.fix}"
        locks = served.get(r.name, []) if r.kind == "client" else []
        print(f"{r.kind:<8} {r.name:<{width}}  {state}"
              + (f"  (locks {', '.join(locks)})" if locks else ""))
    lines = [r.line() for r in wanted if not r.available]
    for line in lines:
        print(f"doctor: {line}")
    what = (f"--db {spec.db} --lock {spec.lock} --backend {spec.backend} --nemesis "
            f"{','.join(spec.fault_names) or 'none'}")
    print(f"doctor: {'cannot run' if lines else 'ready for'} {what}")
    return 1 if lines else 0
