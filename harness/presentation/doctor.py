"""``harness doctor``: one table of every DB, backend, fault family and external client, with
available / missing and, for each missing one, the ``harness setup ...`` that installs it
(:mod:`harness.controller.needs` reads them from the roles' declarations). Exit 0 when what
``--db/--backend/--lock/--nemesis`` ask for (the defaults of ``harness run`` otherwise) is
available here, else 1, naming it in the one line ``harness run`` would refuse with."""

from __future__ import annotations

from typing import Any

from harness.controller import needs
from harness.controller.spec import TestSpec


def doctor(asked: dict[str, Any]) -> int:
    """Print the table; 0 when the run ``asked`` (spec keys) describes can run here, else 1."""
    rows = needs.table()
    width = max(len(r.name) for r in rows)
    for r in rows:
        state = "available" if r.available else f"MISSING   {r.fix}"
        print(f"{r.kind:<8} {r.name:<{width}}  {state}")
    spec = TestSpec.from_dict(asked).validate()
    lines = [r.line() for r in needs.asked(spec) if not r.available]
    for line in lines:
        print(f"doctor: {line}")
    what = (f"--db {spec.db} --lock {spec.lock} --backend {spec.backend} --nemesis "
            f"{','.join(spec.fault_names) or 'none'}")
    print(f"doctor: {'cannot run' if lines else 'ready for'} {what}")
    return 1 if lines else 0
