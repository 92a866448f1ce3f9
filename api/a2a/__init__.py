"""Keel agents as A2A servers: agent cards, JSON-RPC, tasks backed by workflow state."""
