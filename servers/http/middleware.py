"""The error middleware every seif HTTP server uses: an ``HttpError`` becomes its JSON answer,
aiohttp's own 404, 405 and 413 become the API's JSON error (a 405 keeps its ``Allow``), a body
past the size limit is 413 before any handler reads it, a store that did not answer is a
``503 STORE_UNAVAILABLE`` (a shared store down or too busy: retry, with the same ``callId``),
and anything else is a logged ``500 INTERNAL`` that says nothing about the data (a bug, never
a client's doing). A log line names the matched route's template (``/v1/traces/{contextRef}``),
never the path asked for: a decoded path is the client's text, ``%0A`` a line of its choosing."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from servers.http import wire
from servers.http.wire import error_response
from servers.runtime.errors import HttpError
from servers.store.rows import StoreError

LOG = logging.getLogger("seif.http")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
UNAVAILABLE = "the store did not answer: retry (a call with the same `callId` runs once)"


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        if request.content_length is not None and request.content_length > wire.MAX_BODY_BYTES:
            # every route, also one that reads no body (`POST /v1/turns`)
            raise HttpError(413, "TOO_LARGE", f"the body exceeds {wire.MAX_BODY_BYTES} bytes")
        response = await handler(request)
    except HttpError as exc:
        response = error_response(exc)
    except web.HTTPException as exc:
        response = _routing_error(exc)
    except StoreError as exc:  # the store did not answer (a shared one: down, or too busy)
        LOG.error("store unavailable in %s %s: %s", request.method, route_of(request), exc)
        response = error_response(HttpError(503, "STORE_UNAVAILABLE", UNAVAILABLE))
    except Exception as exc:  # a bug, never a client's doing: say nothing about the data
        kind = type(exc).__name__
        LOG.error("internal error in %s %s: %s", request.method, route_of(request), kind)
        response = error_response(HttpError(500, "INTERNAL", "internal error"))
    # a body left unread ends the connection: its rest is never taken for the next request
    return wire.closing_if_unread(request, response)


def route_of(request: web.Request) -> str:
    """The template of the route ``request`` matched (``unmatched`` if none): no value a
    client sent. Its method is one the route declares (any other is 405 before a handler)."""
    route = request.match_info.route
    resource = route.resource if route is not None else None
    return resource.canonical if resource is not None else "unmatched"


def _routing_error(exc: web.HTTPException) -> web.Response:
    """aiohttp's own 404, 405 or 413 as the API's JSON error; a 405 keeps its ``Allow``."""
    code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "TOO_LARGE"}.get(
        exc.status, "HTTP_ERROR"
    )
    response = error_response(HttpError(exc.status, code, exc.reason or code.lower()))
    if exc.status == 405 and "Allow" in exc.headers:
        response.headers["Allow"] = exc.headers["Allow"]
    return response
