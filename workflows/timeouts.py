"""Timeouts and retry policies of every activity the workflows call, in one place."""

from datetime import timedelta

from temporalio.common import RetryPolicy

LLM_START_TO_CLOSE = timedelta(minutes=10)
LLM_HEARTBEAT = timedelta(seconds=10)
LLM_DEFAULT_ATTEMPTS = 6
# A model that answered the last call this fast gets the next one as a local
# activity (no round trip through the server), until this much model time has
# passed since the last regular activity: then one regular call checkpoints the
# run, so a crash repeats little and queries and signals wait little.
LLM_LOCAL_BELOW_MS = 1_000
LLM_LOCAL_BUDGET_MS = 2_000


def llm_retry(max_attempts: int) -> RetryPolicy:
    """Provider errors: back off, honour retry-after (set by the activity), then give up."""
    return RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=60),
        maximum_attempts=max_attempts,
        non_retryable_error_types=["LlmRequestRejected"],
    )


TOOL_START_TO_CLOSE = timedelta(seconds=90)
TOOL_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=4,
)

# Tools of external MCP servers. Discovery tries a server that is down a few times
# over a few seconds, then the run goes on without its tools. A call is claimed
# before it runs, so a retry never calls the server twice; the client's own timeout
# (`KEEL_MCP_TIMEOUT_S`, at most 240 s) ends a call well within the activity's.
MCP_DISCOVERY_START_TO_CLOSE = timedelta(minutes=2)
MCP_DISCOVERY_ATTEMPTS = 3
MCP_DISCOVERY_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=MCP_DISCOVERY_ATTEMPTS,
)
MCP_TOOL_START_TO_CLOSE = timedelta(minutes=5)

STORE_START_TO_CLOSE = timedelta(seconds=30)
STORE_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=20,
)

# Webhooks: a down receiver delays a notice but loses nothing for three days.
WEBHOOK_ATTEMPT_TIMEOUT = timedelta(seconds=15)
WEBHOOK_DELIVERY_WINDOW = timedelta(days=3)
WEBHOOK_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=10),
    maximum_attempts=0,  # bounded by WEBHOOK_DELIVERY_WINDOW instead
    non_retryable_error_types=["WebhookRejected"],
)

# A decision for an interaction the run has not opened (yet): how long it waits for
# a replay to open it, within the API's 15 s wait for the `decide` update.
DECISION_WAITS_FOR_INTERACTION = timedelta(seconds=10)

# Local activities retry in the worker up to this long, then by durable timer.
LOCAL_RETRY_THRESHOLD = timedelta(seconds=30)

# Continue-as-new well before Temporal's 50k-event / 50 MB history limits.
MAX_HISTORY_EVENTS = 2_000
