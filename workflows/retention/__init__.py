"""Retention: the scheduled sweep of a tenant's expired records."""
