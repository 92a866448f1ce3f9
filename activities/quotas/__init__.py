"""Tenant quotas: where a tenant (or user) stands against its quotas, the check a scheduled
run makes as it fires, and the per-step watch of the LLM activity."""
