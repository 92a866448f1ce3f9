"""The router's activities: classification and the recorded decision."""
