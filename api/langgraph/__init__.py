"""A LangGraph Agent Server API subset over Keel's service (see docs/langgraph.md)."""

from keel.api.langgraph.routes import PREFIX, router

__all__ = ["PREFIX", "router"]
