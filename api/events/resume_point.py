"""Where a protocol stream picks a run's events up: after a seq, or after interactions.

A LangGraph or AG-UI request that resumes a run (by deciding what it waited on, or by
reconnecting with `Last-Event-ID`) reads the run's events from the start, to rebuild
what the client holds, but sends only what comes after that point.
"""

from __future__ import annotations

from keel.api.events.stream import Outgoing

__all__ = ["ResumePoint"]


class ResumePoint:
    """Events up to `after_seq`, and up to the `interaction_pending` of each interaction in
    `after_interactions`, were seen by the client already."""

    def __init__(self, after_seq: int = 0, after_interactions: frozenset[str] = frozenset()):
        self._after_seq = after_seq
        self._waiting_for = set(after_interactions)

    @property
    def live(self) -> bool:
        """Whether live deltas go out: the stream is past the interactions it resumes."""
        return not self._waiting_for

    def sends(self, event: Outgoing) -> bool:
        """Whether `event` goes out; an interaction the stream resumes after is passed."""
        if event.type == "interaction_pending" and self._waiting_for:
            self._waiting_for.discard(str(event.record.data.get("interaction_id")))
            return False
        return event.seq > self._after_seq and not self._waiting_for
