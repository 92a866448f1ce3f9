"""The names of the errors activities raise that workflows and retry policies act on.

An `ApplicationError`'s `type` is matched by name: a retry policy's
`non_retryable_error_types`, a workflow that tells a rejected request from an outage.
Each name is spelt once, here, and referenced wherever it is raised or matched, so a
typo cannot make an error retried that should not be, or the reverse.
"""

from __future__ import annotations

__all__ = [
    "CONTEXT_TOO_LONG",
    "LLM_MODEL_UNKNOWN",
    "LLM_REQUEST_REJECTED",
    "LLM_UNAVAILABLE",
    "STORE_UNAVAILABLE",
    "WEBHOOK_REJECTED",
    "WEBHOOK_UNREACHABLE",
]

LLM_UNAVAILABLE = "LlmUnavailable"
"""A model or embeddings endpoint did not answer, or answered it is busy: retried."""
LLM_REQUEST_REJECTED = "LlmRequestRejected"
"""A model endpoint refused the request itself (a 4xx other than 408/429): not retried."""
LLM_MODEL_UNKNOWN = "LlmModelUnknown"
"""A model endpoint does not know the model asked for (404): not retried; a run with a
list of models moves to the next one."""
CONTEXT_TOO_LONG = "ContextTooLong"
"""What is to be sent cannot fit the model's context window even after compaction."""
STORE_UNAVAILABLE = "StoreUnavailable"
"""Postgres is away (`activities.store.outage`); waited out by time, not attempts."""
WEBHOOK_REJECTED = "WebhookRejected"
"""A webhook receiver refused a notice (a 4xx): not retried."""
WEBHOOK_UNREACHABLE = "WebhookUnreachable"
"""A webhook receiver could not be reached or failed (5xx): retried."""
