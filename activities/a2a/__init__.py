"""A2A as a client: delegated tasks and push notifications."""
