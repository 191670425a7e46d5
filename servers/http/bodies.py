"""Reading request bodies and writing JSON answers, for every seif HTTP server.

Handlers read a body with :func:`read_json` and decode it into its typed request
(:func:`servers.wire.fields.decode`); a refusal is a :class:`~servers.wire.errors.Refused`,
which one middleware (``servers.http.middleware.errors``) renders with :func:`error_response`:
``{"error": {"code", "message"}}`` with the status the error table gives its code. Nothing a
client can send produces a 500.
"""

from __future__ import annotations

import asyncio
from http import HTTPStatus
from typing import Any

from aiohttp import http_exceptions, web

from policy.json.strict import JsonError, dump_bytes, loads
from servers.wire.errors import ErrorCode, Refused
from servers.wire.limits import MAX_BODY_BYTES

BODY_TIMEOUT_S = 30.0
"""The longest a request body may take to arrive once its headers have (1 MiB at 35 KB/s),
unless the connection's handler says otherwise (``serving.Limits.body_timeout_s``)."""
ENCODINGS = frozenset({"", "identity", "gzip", "deflate"})
"""The request ``Content-Encoding`` values read (aiohttp decodes gzip and deflate)."""
ENDS_CONNECTION = frozenset({HTTPStatus.REQUEST_TIMEOUT, HTTPStatus.REQUEST_ENTITY_TOO_LARGE})
"""The statuses whose answer always closes its connection (the body may still be arriving)."""


def json_bytes(body: Any) -> bytes:
    """The wire's JSON encoding: compact, UTF-8, never NaN or an infinity."""
    return dump_bytes(body)


def json_response(body: Any, status: int = HTTPStatus.OK) -> web.Response:
    return web.Response(
        body=dump_bytes(body),
        status=status,
        content_type="application/json",
    )


def error_response(refused: Refused, status: int | None = None) -> web.Response:
    """The answer of a refusal: its body, with the status of its code in the error table
    (``status``: aiohttp's own, for a refusal of aiohttp's that the table has no entry for)."""
    answer = json_response(
        refused.body(), status=refused.error.status if status is None else status
    )
    answer.headers.update(refused.headers)
    return answer


def closing_if_unread(request: web.BaseRequest, response: web.StreamResponse) -> web.StreamResponse:
    """``response``, made the last answer of its connection (``Connection: close``) when the
    body was not read to its end: a 408, a 413, any other error that left the body unread
    (401 before a body was read, ``BODY_INCOMPLETE``, broken framing or encoding), and any
    answer given before the whole body had arrived. A body that had all arrived but was not
    read by a successful answer is discarded and the connection kept."""
    body = request.content
    unread = not body.at_eof()
    refused = response.status >= HTTPStatus.BAD_REQUEST
    if response.status in ENDS_CONNECTION or (refused and unread) or not body.is_eof():
        response.force_close()
    return response


async def read_json(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object: 413 past the size limit (decompressed), 408 when it
    does not arrive in time (each answer then ends its connection: see
    :func:`closing_if_unread`), 400 for anything else: an unsupported or broken
    ``Content-Encoding``, broken chunked framing, a connection closed mid-body, and whatever
    the strict boundary of :mod:`policy.json.strict` refuses (duplicate keys, non-finite or
    oversized numbers, lone surrogates, excessive depth), the message naming what and where
    and never quoting a header."""
    data = await read_bytes(request)
    try:
        value = loads(data)
    except JsonError as exc:
        raise Refused(ErrorCode.BAD_REQUEST, f"the body is not strict JSON: {exc}") from None
    if not isinstance(value, dict):
        raise Refused(ErrorCode.BAD_REQUEST, "the body must be a JSON object")
    return value


async def read_bytes(request: web.Request) -> bytes:
    """The request body's bytes, decoded from its ``Content-Encoding``: 413 past the size
    limit, 408 when it does not arrive in time, 400 when it cannot be read as framed and
    encoded (see :func:`read_json`)."""
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise Refused(ErrorCode.TOO_LARGE)
    if request.headers.get("Content-Encoding", "").strip().lower() not in ENCODINGS:
        message = "the body's `Content-Encoding` must be identity, gzip or deflate"
        raise Refused(ErrorCode.BAD_REQUEST, message)
    data = await _read_body(request)
    if len(data) > MAX_BODY_BYTES:  # an application built with a larger client_max_size
        raise Refused(ErrorCode.TOO_LARGE)
    return data


async def _read_body(request: web.Request) -> bytes:
    """One read (the application's client_max_size is MAX_BODY_BYTES, chunked and
    decompressed bodies too), within the connection's body deadline."""
    deadline = getattr(request.protocol, "body_timeout_s", BODY_TIMEOUT_S)
    try:
        if request.content.is_eof():  # all of it has arrived (the common case): no timer
            return await request.read()
        async with asyncio.timeout(deadline):
            return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise Refused(ErrorCode.TOO_LARGE) from None
    except TimeoutError:
        message = f"the body did not arrive within {deadline:g} s"
        raise Refused(ErrorCode.BODY_TIMEOUT, message) from None
    except web.RequestPayloadError as exc:
        raise _payload_error(exc.__cause__) from None
    except ConnectionError:  # the client went away: nobody reads the answer, nothing started
        raise Refused(ErrorCode.BODY_INCOMPLETE) from None


def _payload_error(cause: BaseException | None) -> Refused:
    """The body could not be read as framed and encoded: say which, never quoting it."""
    if isinstance(cause, http_exceptions.DecompressSizeError):
        return Refused(ErrorCode.TOO_LARGE)
    if isinstance(cause, http_exceptions.ContentEncodingError):
        return Refused(
            ErrorCode.BAD_REQUEST, "the body is not valid data of its `Content-Encoding`"
        )
    if isinstance(cause, http_exceptions.ContentLengthError):
        return Refused(ErrorCode.BODY_INCOMPLETE)
    return Refused(ErrorCode.BAD_REQUEST, "the body's chunked framing is invalid")
