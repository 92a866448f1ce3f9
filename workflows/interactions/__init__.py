"""Interactions: what a run waits on from outside (approvals, questions, client tools)."""
