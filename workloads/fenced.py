"""The ``fenced`` workload: the mutex loop with the grant's token on every write.

The resource rejects a write whose token is lower than one it already accepted (fencing, as the
resource should check it), and a rejected write ends the session early: the holder has been
fenced off. The resource's verdict is what counts here: lock-level overlaps and the lock's own
linearizability are informational, since the resource keeps the data safe through them
(the checkers are the mutex workload's for a resource in ``fenced`` mode, this workload's
default).
"""

from __future__ import annotations

from workloads.mutex import MutexWorkload


class FencedWorkload(MutexWorkload):
    name = "fenced"
    summary = "the same, with the grant's token on every write; the resource rejects stale ones"
    needs_tokens = True
    fenced = True

