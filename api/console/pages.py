"""The console's pages and assets: plain ES modules and CSS shipped in the package.

There is no build step: the browser loads `app.js` as a module and it imports the rest,
so what is in `assets/` is exactly what runs. Every page is the same shell (`index.html`);
the script draws the page its path names. Responses carry a strict Content-Security-Policy
(no inline script, no other origin), so even a rendering bug cannot run injected script.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, HTTPException
from fastapi.responses import RedirectResponse, Response

router = APIRouter(include_in_schema=False)

ASSETS = resources.files("keel.api.console") / "assets"
CONTENT_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".svg": "image/svg+xml",
}
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}


def _shell() -> Response:
    html = (ASSETS / "index.html").read_bytes()
    return Response(
        html,
        media_type=CONTENT_TYPES[".html"],
        headers={**SECURITY_HEADERS, "Cache-Control": "no-store"},
    )


@router.get("/")
async def root() -> RedirectResponse:
    return RedirectResponse("/console/", status_code=307)


@router.get("/console")
async def console_root() -> RedirectResponse:
    return RedirectResponse("/console/", status_code=307)


@router.get("/console/assets/{name}")
async def asset(name: str) -> Response:
    suffix = name[name.rfind(".") :] if "." in name else ""
    if "/" in name or name.startswith(".") or suffix not in CONTENT_TYPES:
        raise HTTPException(404, detail=f"No console asset {name}.")
    path = ASSETS / name
    if not path.is_file():
        raise HTTPException(404, detail=f"No console asset {name}.")
    return Response(
        path.read_bytes(),
        media_type=CONTENT_TYPES[suffix],
        headers={**SECURITY_HEADERS, "Cache-Control": "no-cache"},
    )


@router.get("/console/")
async def console_home() -> Response:
    return _shell()


@router.get("/console/{page:path}")
async def console_page(page: str) -> Response:
    """Any console path (`runs/ID`, `approvals`, …) is the shell; the script draws the page."""
    return _shell()
