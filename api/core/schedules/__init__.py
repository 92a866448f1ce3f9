"""Schedules: the service, specs, cron and fields."""
