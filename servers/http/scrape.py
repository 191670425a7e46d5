"""``GET /metrics`` and the middleware that counts every HTTP request (``servers.runtime.metrics``).

The route label is the matched route's template (``/v1/traces/{contextRef}``), never the path
asked for, so no contextRef, callId or other value a client sends becomes a label; a request
no route matches counts as ``unmatched``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from servers.http.middleware import route_of
from servers.runtime.metrics import CONTENT_TYPE, Metrics

METRICS: web.AppKey[Metrics] = web.AppKey("metrics", Metrics)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Authorize = Callable[[web.Request, str], Awaitable[object]]


@web.middleware
async def counted(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Count the request and time it, whatever it answered (the error middleware runs
    inside this one, so its answers are counted with their codes)."""
    began = time.perf_counter()
    response = await handler(request)
    request.app[METRICS].answered(route_of(request), response.status, time.perf_counter() - began)
    return response


def scrape(authorize: Authorize) -> Handler:
    """The ``GET /metrics`` handler: a credential with the ``metrics.read`` scope (never
    implied by another), then the registry in the Prometheus text format."""

    async def metrics(request: web.Request) -> web.Response:
        await authorize(request, "metrics.read")
        body = request.app[METRICS].render()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    return metrics
