"""Requests Keel sends out: the target policy, pinned connections, token prefixes."""
