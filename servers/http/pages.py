"""What the servers' own pages (the approvers' page, the Design workstation) share: their
security headers, set on every answer by :func:`secured`, and the favicon they do not have."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from http import HTTPStatus

from aiohttp import web

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def secured(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every answer, errors included, with the page's security headers."""
    response = await handler(request)
    response.headers.update(HEADERS)
    return response


async def no_icon(_request: web.Request) -> web.Response:
    """Browsers ask for ``/favicon.ico``: there is none, and that is not an error."""
    return web.Response(status=HTTPStatus.NO_CONTENT)
