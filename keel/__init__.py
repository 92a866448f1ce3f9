"""Keel: a durable orchestrator for LLM agents on Temporal.

The distribution owns this one top-level name. Its layers keep their folders at the
repository's root and are installed beneath it: `keel.workflows` (deterministic
orchestration), `keel.activities` (every piece of I/O), `keel.worker` (the worker
process) and `keel.api` (every surface a user reaches). Dependencies point one way:
api → worker → activities → workflows.
"""
