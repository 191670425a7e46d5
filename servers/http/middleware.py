"""The error middleware every seif HTTP server uses: a :class:`~servers.wire.errors.Refused`
becomes its JSON answer (the status its code has in the error table), aiohttp's own 404, 405
and 413 become the API's JSON error (a 405 keeps its ``Allow``), a body past the size limit is
413 before any handler reads it, a store that did not answer is a ``503 STORE_UNAVAILABLE`` (a
shared store down or too busy: retry, with the same ``callId``), and anything else is a logged
``500 INTERNAL`` that says nothing about the data (a bug, never a client's doing). A log line
names the matched route's template (``/v1/traces/{contextRef}``), never the path asked for: a
decoded path is the client's text, ``%0A`` a line of its choosing."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from http import HTTPStatus

from aiohttp import web

from servers.http import bodies
from servers.http.bodies import error_response
from servers.store.rows import StoreError
from servers.wire.errors import ErrorCode, Refused
from servers.wire.limits import MAX_BODY_BYTES

LOG = logging.getLogger("seif.http")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ROUTING: dict[int, ErrorCode] = {
    HTTPStatus.NOT_FOUND: ErrorCode.NOT_FOUND,
    HTTPStatus.METHOD_NOT_ALLOWED: ErrorCode.METHOD_NOT_ALLOWED,
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE: ErrorCode.TOO_LARGE,
}
"""aiohttp's own refusals, by status; any other is ``HTTP_ERROR`` with aiohttp's status."""


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            raise Refused(ErrorCode.TOO_LARGE)  # every route, also one that reads no body
        response = await handler(request)
    except Refused as exc:
        response = error_response(exc)
    except web.HTTPException as exc:
        response = _routing_error(exc)
    except StoreError as exc:  # the store did not answer (a shared one: down, or too busy)
        LOG.error("store unavailable in %s %s: %s", request.method, route_of(request), exc)
        response = error_response(Refused(ErrorCode.STORE_UNAVAILABLE))
    except Exception as exc:  # a bug, never a client's doing: say nothing about the data
        kind = type(exc).__name__
        LOG.error("internal error in %s %s: %s", request.method, route_of(request), kind)
        response = error_response(Refused(ErrorCode.INTERNAL))
    # a body left unread ends the connection: its rest is never taken for the next request
    return bodies.closing_if_unread(request, response)


def route_of(request: web.Request) -> str:
    """The template of the route ``request`` matched (``unmatched`` if none): no value a
    client sent. Its method is one the route declares (any other is 405 before a handler)."""
    route = request.match_info.route
    resource = route.resource if route is not None else None
    return resource.canonical if resource is not None else "unmatched"


def _routing_error(exc: web.HTTPException) -> web.Response:
    """aiohttp's own 404, 405 or 413 as the API's JSON error; a 405 keeps its ``Allow``."""
    error = ROUTING.get(exc.status, ErrorCode.HTTP_ERROR)
    refused = Refused(error, exc.reason or error.code.lower())
    response = error_response(refused, None if error in ROUTING.values() else exc.status)
    if exc.status == HTTPStatus.METHOD_NOT_ALLOWED and "Allow" in exc.headers:
        response.headers["Allow"] = exc.headers["Allow"]
    return response
