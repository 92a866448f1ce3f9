"""Retention's activities: the sweep's deletes."""
