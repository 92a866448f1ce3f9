"""AG-UI over Keel's service: `POST /ag-ui/{agent}` (see docs/ag-ui.md)."""

from keel.api.agui.routes import PREFIX, router

__all__ = ["PREFIX", "router"]
