"""A worker's sizing defaults, measured with `python -m bench.peers` (bench/README.md).

Workflow code holds the GIL while it runs, so threads beyond a few only take turns
with the event loop that runs the activities: Temporal's default pool (up to 500
threads) made 50 runs at once slower, not faster. The Postgres pool is sized for
the statements of about 50 runs in flight at once, each held for one round trip.
"""

from __future__ import annotations

WORKFLOW_THREADS = 2
DATABASE_POOL_SIZE = 20
