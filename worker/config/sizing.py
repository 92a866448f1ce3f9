"""A worker's sizing defaults, measured with `python -m bench.peers` (bench/README.md).

The Postgres pool: a step holds a connection for one round trip per activity, so ten
serve 50 runs at once; `KEEL_DATABASE_POOL_SIZE` raises it for more. Workflow code
keeps Temporal's own thread pool: a smaller one gained nothing measurable at 50 runs
at once, and Temporal's deadlock check (2 s) counts the time an activation waits for
a thread, so a burst of activations (approvals of thousands of waiting runs) could
fail workflow tasks that never deadlocked.
"""

from __future__ import annotations

DATABASE_POOL_SIZE = 10
