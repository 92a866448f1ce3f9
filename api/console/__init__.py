"""The web console: pages and assets served by the API, reading and acting through its REST
API and event streams (same origin, same tenancy), and the browser sign-in they need."""

from keel.api.console.pages import router as pages_router
from keel.api.console.sign_in import router as sign_in_router

__all__ = ["pages_router", "sign_in_router"]
