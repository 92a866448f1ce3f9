"""Coordinations: the service and its schemas."""
