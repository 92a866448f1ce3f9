"""Timeouts and retry policies of every activity the workflows call, in one place.

Each kind of call has a named `ActivityOptions` bundle; `workflows.activity_call`
runs a reference with one, as a local or a regular activity. Every number says why
it is what it is.
"""

from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache

from temporalio.common import RetryPolicy

from keel.workflows.error_types import LLM_REQUEST_REJECTED, STORE_UNAVAILABLE, WEBHOOK_REJECTED


@dataclass(frozen=True)
class ActivityOptions:
    """How one kind of activity is called: its timeouts and its retry policy."""

    start_to_close: timedelta
    """One attempt's limit."""
    retry: RetryPolicy
    heartbeat: timedelta | None = None
    """Regular activities only: a worker that dies mid-call is noticed this soon."""
    schedule_to_close: timedelta | None = None
    """All attempts together, when the attempts alone do not bound them."""


# Local activities retry in the worker up to this long, then by durable timer.
LOCAL_RETRY_THRESHOLD = timedelta(seconds=30)

# Postgres may be away for minutes (a restart, a failover). Every activity that touches
# it fails with `STORE_UNAVAILABLE` meanwhile (`activities.store.outage`) and is retried
# for this long, backing off to one attempt every `STORE_OUTAGE_MAX_DELAY`, before the
# run fails.
STORE_OUTAGE_BUDGET = timedelta(minutes=10)
STORE_OUTAGE_FIRST_DELAY = timedelta(milliseconds=500)
STORE_OUTAGE_MAX_DELAY = timedelta(seconds=10)
# Retries bounded by time (a schedule-to-close timeout), not by a count of attempts.
OUTAGE_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=STORE_OUTAGE_MAX_DELAY,
    maximum_attempts=0,
)

# -- model calls ---------------------------------------------------------------------

# A long completion streams for minutes; ten bounds a hung provider.
LLM_START_TO_CLOSE = timedelta(minutes=10)
# The activity heartbeats every 2 s while it streams (`keel.activities.llm.step`).
LLM_HEARTBEAT = timedelta(seconds=10)
# A model that answered the last call this fast gets the next one as a local
# activity (no round trip through the server), until this much model time has
# passed since the last regular activity: then one regular call checkpoints the
# run, so a crash repeats little and queries and signals wait little.
LLM_LOCAL_BELOW_MS = 1_000
LLM_LOCAL_BUDGET_MS = 2_000


def llm_retry(max_attempts: int) -> RetryPolicy:
    """Provider errors: back off, honour retry-after (set by the activity), then give up.

    A store outage is not the provider's: it spends none of these attempts, because the
    workflow waits it out and calls again (`model_steps.outlasting_outages`)."""
    return RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=60),
        maximum_attempts=max_attempts,
        non_retryable_error_types=[LLM_REQUEST_REJECTED, STORE_UNAVAILABLE],
    )


@lru_cache(maxsize=8)
def llm_call(max_attempts: int) -> ActivityOptions:
    """A model call, with the run's attempts (`RunInput.llm_max_attempts`)."""
    return ActivityOptions(
        start_to_close=LLM_START_TO_CLOSE, heartbeat=LLM_HEARTBEAT, retry=llm_retry(max_attempts)
    )


@lru_cache(maxsize=8)
def compaction_call(max_attempts: int) -> ActivityOptions:
    """A summarising model call: one request that nearly fills the window, unstreamed."""
    return ActivityOptions(start_to_close=LLM_START_TO_CLOSE, retry=llm_retry(max_attempts))


@lru_cache(maxsize=8)
def route_classify(max_attempts: int) -> ActivityOptions:
    """The router's classification: one short unstreamed answer (a JSON object)."""
    return ActivityOptions(start_to_close=timedelta(minutes=2), retry=llm_retry(max_attempts))


# -- tools ---------------------------------------------------------------------------

# Built-in tools: reads and quick writes take milliseconds, searches a few seconds.
# Tools tell the model their own failures as output; what raises is the store or the
# worker. A read is safe to repeat and an acting call is claimed first, so retrying for
# as long as a store outage may last costs nothing.
TOOL_CALL = ActivityOptions(
    start_to_close=timedelta(seconds=90),
    retry=OUTAGE_RETRY,
    schedule_to_close=timedelta(seconds=90) + STORE_OUTAGE_BUDGET,
)

# A command (`bash`) runs for up to its own `timeout_s` (at most 30 min) and is then
# killed; the attempt gets a minute more to kill it, collect its output and store it.
# It heartbeats, so a worker lost mid-call is noticed in seconds: the retry runs a call
# whose claim never started, and says the outcome is unknown of one that did.
COMMAND_GRACE = timedelta(seconds=60)
COMMAND_HEARTBEAT = timedelta(seconds=10)


def tool_call(run_limit_s: int | None) -> ActivityOptions:
    """A built-in tool call; one whose arguments set how long it may run gets that long."""
    if run_limit_s is None:
        return TOOL_CALL
    limit = max(timedelta(seconds=run_limit_s) + COMMAND_GRACE, TOOL_CALL.start_to_close)
    return ActivityOptions(
        start_to_close=limit,
        retry=TOOL_CALL.retry,
        heartbeat=COMMAND_HEARTBEAT,
        schedule_to_close=limit + STORE_OUTAGE_BUDGET,
    )


# Tools of external MCP servers. Discovery tries a server that is down a few times
# over a few seconds, then the run goes on without its tools. A call is claimed
# before it runs, so a retry never calls the server twice; the client's own timeout
# (`KEEL_MCP_TIMEOUT_S`, at most 240 s) ends a call well within the activity's.
MCP_DISCOVERY_ATTEMPTS = 3
MCP_DISCOVERY = ActivityOptions(
    start_to_close=timedelta(minutes=2),
    retry=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=10),
        maximum_attempts=MCP_DISCOVERY_ATTEMPTS,
    ),
)
MCP_TOOL_CALL = ActivityOptions(
    start_to_close=timedelta(minutes=5),
    retry=TOOL_CALL.retry,
    schedule_to_close=timedelta(minutes=5) + STORE_OUTAGE_BUDGET,
)

# Plugin tools: a plugin's own code, on the workers that have it. Five minutes covers a
# call to a slow service; the activity heartbeats, so a lost worker is noticed within
# the heartbeat timeout. An acting call is claimed first, so retries never repeat it.
PLUGIN_TOOL_CALL = ActivityOptions(
    start_to_close=timedelta(minutes=5),
    retry=TOOL_CALL.retry,
    heartbeat=timedelta(seconds=30),
    schedule_to_close=timedelta(minutes=5) + STORE_OUTAGE_BUDGET,
)

# Hooks of plugins (`tool.before`, `tool.after`, `run.end`): policy code that should
# answer in seconds. Three attempts ride out a flaky dependency; a hook that fails all
# three refuses the calls it judges (or withholds the output it sees) rather than stall
# the run, and the model is told why.
HOOK_ATTEMPTS = 3
HOOK_CALL = ActivityOptions(
    start_to_close=timedelta(seconds=60),
    retry=RetryPolicy(
        initial_interval=timedelta(milliseconds=500),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=5),
        maximum_attempts=HOOK_ATTEMPTS,
    ),
)

# -- records in Postgres -------------------------------------------------------------

# Reads and idempotent writes of a few milliseconds, so the run records them as
# local activities; retried through a store outage, so a database restart delays a
# run and never fails it.
STORE_CALL = ActivityOptions(
    start_to_close=timedelta(seconds=30),
    retry=OUTAGE_RETRY,
    schedule_to_close=STORE_OUTAGE_BUDGET,
)

# Listing a workspace for a coverage plan: a walk and a sniff of each file's head,
# seconds for tens of thousands of files; retried like a store call.
COVERAGE_LISTING = ActivityOptions(
    start_to_close=timedelta(minutes=2),
    retry=OUTAGE_RETRY,
    schedule_to_close=STORE_OUTAGE_BUDGET,
)

# -- retention ---------------------------------------------------------------------

# One batch deletes a few hundred runs' rows per tenant in one transaction each: seconds,
# not minutes. Retried through a store outage like the run's records; a sweep that
# still cannot finish is started again by the next fire of its schedule.
RETENTION_BATCH = ActivityOptions(
    start_to_close=timedelta(minutes=5),
    retry=OUTAGE_RETRY,
    schedule_to_close=STORE_OUTAGE_BUDGET,
)

# -- agent memory --------------------------------------------------------------------

# Memory helps a run and never holds it up: recall is one embeddings request and two
# queries, extraction one short model call and one transaction. Three attempts ride out
# a blip; after them the run goes on without (recall) or ends without storing (facts).
MEMORY_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=500),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=5),
    maximum_attempts=3,
    non_retryable_error_types=[LLM_REQUEST_REJECTED],
)
MEMORY_RECALL = ActivityOptions(start_to_close=timedelta(seconds=30), retry=MEMORY_RETRY)
MEMORY_EXTRACTION = ActivityOptions(start_to_close=timedelta(minutes=2), retry=MEMORY_RETRY)

# -- webhooks ------------------------------------------------------------------------

# A down receiver delays a notice but loses nothing for three days.
WEBHOOK_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=10),
    maximum_attempts=0,  # bounded by the delivery window instead
    non_retryable_error_types=[WEBHOOK_REJECTED],
)
WEBHOOK_DELIVERY = ActivityOptions(
    # One POST; the activity's client gives up after 10 s.
    start_to_close=timedelta(seconds=15),
    retry=WEBHOOK_RETRY,
    schedule_to_close=timedelta(days=3),
)

# -- A2A delegation (the coordinator) ------------------------------------------------

# Sending a task answers at once (the agent works on it afterwards); three tries
# over a few seconds tell an unreachable agent from a blip.
A2A_SEND = ActivityOptions(
    start_to_close=timedelta(seconds=60),
    retry=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=10),
        maximum_attempts=3,
    ),
)
# Following polls every second and heartbeats each time; a minute past the
# coordinator's deadline lets the last poll answer "timed out" instead of failing.
A2A_FOLLOW_GRACE = timedelta(seconds=60)
A2A_FOLLOW_HEARTBEAT = timedelta(seconds=30)
A2A_FOLLOW_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=5,
)


def a2a_follow(deadline_s: int) -> ActivityOptions:
    """Following a task for up to `deadline_s` (`CoordinatorInput.timeout_s`)."""
    return ActivityOptions(
        start_to_close=timedelta(seconds=deadline_s) + A2A_FOLLOW_GRACE,
        heartbeat=A2A_FOLLOW_HEARTBEAT,
        retry=A2A_FOLLOW_RETRY,
    )


# -- workflow waits ------------------------------------------------------------------

# A decision for an interaction the run has not opened (yet): how long it waits for
# a replay to open it, within the API's 15 s wait for the `decide` update.
DECISION_WAITS_FOR_INTERACTION = timedelta(seconds=10)

# Continue-as-new well before Temporal's 50k-event / 50 MB history limits.
MAX_HISTORY_EVENTS = 2_000
