"""Provider rate limits shared by every worker: configuration, the provider's headers,
and the limiter a model call waits its turn in (state in Postgres, migration 028)."""

from keel.activities.llm.limits.config import ProviderLimit, check_unique, endpoint_of, key_hash
from keel.activities.llm.limits.limiter import MAX_WAIT_S, CallPermit, OnWait, ProviderLimiter

__all__ = [
    "MAX_WAIT_S",
    "CallPermit",
    "OnWait",
    "ProviderLimit",
    "ProviderLimiter",
    "check_unique",
    "endpoint_of",
    "key_hash",
]
