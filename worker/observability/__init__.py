"""Traces, metrics and log format."""
