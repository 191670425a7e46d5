"""Wire types of the runtime's HTTP API: error codes, body decoding, request shapes.

Handlers decode with these helpers and raise :class:`~servers.runtime.errors.HttpError`; one
middleware renders every error as ``{"error": {"code", "message"}}``. Nothing a client can
send produces a 500.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from aiohttp import http_exceptions, web

from policy.strictjson import JsonError, dump_bytes, loads
from servers.runtime.errors import HttpError
from servers.runtime.paging import DEFAULT_LIMIT, MAX_CURSOR, MAX_LIMIT, Page
from servers.support.visible import has_visible

MAX_BODY_BYTES = 1 << 20
MAX_ID_LENGTH = 256
BODY_TIMEOUT_S = 30.0
"""The longest a request body may take to arrive once its headers have (1 MiB at 35 KB/s),
unless the connection's handler says otherwise (``serving.Limits.body_timeout_s``)."""
ENCODINGS = frozenset({"", "identity", "gzip", "deflate"})
"""The request ``Content-Encoding`` values read (aiohttp decodes gzip and deflate)."""
_TOO_LARGE = f"the body exceeds {MAX_BODY_BYTES} bytes"


def json_bytes(body: Any) -> bytes:
    """The wire's JSON encoding: compact, UTF-8, never NaN or an infinity."""
    return dump_bytes(body)


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=dump_bytes(body),
        status=status,
        content_type="application/json",
    )


def error_response(error: HttpError) -> web.Response:
    return json_response(error.body(), status=error.status)


def closing_if_unread(request: web.BaseRequest, response: web.StreamResponse) -> web.StreamResponse:
    """``response``, made the last answer of its connection (``Connection: close``) when the
    body was not read to its end: a 408, a 413, any other error that left the body unread
    (401 before a body was read, ``BODY_INCOMPLETE``, broken framing or encoding), and any
    answer given before the whole body had arrived. A body that had all arrived but was not
    read by a successful answer is discarded and the connection kept."""
    body = request.content
    unread = not body.at_eof()
    if response.status in (408, 413) or (response.status >= 400 and unread) or not body.is_eof():
        response.force_close()
    return response


def bad_request(message: str, code: str = "BAD_REQUEST") -> HttpError:
    return HttpError(400, code, message)


async def read_json(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object: 413 past the size limit (decompressed), 408 when it
    does not arrive in time (each answer then ends its connection: see
    :func:`closing_if_unread`), 400 for anything else: an unsupported or broken
    ``Content-Encoding``, broken chunked framing, a connection closed mid-body, and whatever
    the strict boundary of :mod:`policy.strictjson` refuses (duplicate keys, non-finite or
    oversized numbers, lone surrogates, excessive depth), the message naming what and where
    and never quoting a header."""
    data = await read_bytes(request)
    try:
        value = loads(data)
    except JsonError as exc:
        raise bad_request(f"the body is not strict JSON: {exc}") from None
    if not isinstance(value, dict):
        raise bad_request("the body must be a JSON object")
    return value


async def read_bytes(request: web.Request) -> bytes:
    """The request body's bytes, decoded from its ``Content-Encoding``: 413 past the size
    limit, 408 when it does not arrive in time, 400 when it cannot be read as framed and
    encoded (see :func:`read_json`)."""
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise HttpError(413, "TOO_LARGE", _TOO_LARGE)
    if request.headers.get("Content-Encoding", "").strip().lower() not in ENCODINGS:
        raise bad_request("the body's `Content-Encoding` must be identity, gzip or deflate")
    data = await _read_body(request)
    if len(data) > MAX_BODY_BYTES:  # an application built with a larger client_max_size
        raise HttpError(413, "TOO_LARGE", _TOO_LARGE)
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
        raise HttpError(413, "TOO_LARGE", _TOO_LARGE) from None
    except TimeoutError:
        raise HttpError(
            408, "BODY_TIMEOUT", f"the body did not arrive within {deadline:g} s"
        ) from None
    except web.RequestPayloadError as exc:
        raise _payload_error(exc.__cause__) from None
    except ConnectionError:  # the client went away: nobody reads the answer, nothing started
        raise _incomplete() from None


def _incomplete() -> HttpError:
    return HttpError(400, "BODY_INCOMPLETE", "the connection closed before the body was complete")


def _payload_error(cause: BaseException | None) -> HttpError:
    """The body could not be read as framed and encoded: say which, never quoting it."""
    if isinstance(cause, http_exceptions.DecompressSizeError):
        return HttpError(413, "TOO_LARGE", _TOO_LARGE)
    if isinstance(cause, http_exceptions.ContentEncodingError):
        return bad_request("the body is not valid data of its `Content-Encoding`")
    if isinstance(cause, http_exceptions.ContentLengthError):
        return _incomplete()
    return bad_request("the body's chunked framing is invalid")


@dataclass(frozen=True, slots=True)
class Field:
    """One body field: its JSON type (``str``, ``object``, ``list``, ``any``) and whether it
    must be present."""

    kind: str
    required: bool = False


def fields(body: Mapping[str, Any], shape: Mapping[str, Field]) -> dict[str, Any]:
    """Check ``body`` against a closed ``shape``; missing optional fields are None."""
    for k in body:
        if k not in shape:
            raise bad_request(f"unknown field `{k[:64]}`")
    out: dict[str, Any] = {}
    for name, spec in shape.items():
        value = body.get(name)
        if value is None:
            if spec.required:
                raise bad_request(f"missing field `{name}`")
            out[name] = None
            continue
        _check_kind(name, spec.kind, value)
        out[name] = value
    return out


def is_id(value: object) -> TypeGuard[str]:
    """A name a client gives (an id, a call id, a coordinate): a non-empty string of at most
    :data:`MAX_ID_LENGTH` characters, none of them NUL (which no store's text can hold)."""
    return isinstance(value, str) and 0 < len(value) <= MAX_ID_LENGTH and "\x00" not in value


ID_RULE = f"a non-empty string of at most {MAX_ID_LENGTH} characters, none of them NUL"


def _check_kind(name: str, kind: str, value: Any) -> None:
    if kind == "str":
        if not is_id(value):
            raise bad_request(f"`{name}` must be {ID_RULE}")
    elif kind == "text":
        if not isinstance(value, str) or len(value) > 4096 or not has_visible(value):
            raise bad_request(
                f"`{name}` must be a string of at most 4096 characters with a visible character"
            )
    elif kind == "object" and not isinstance(value, dict):
        raise bad_request(f"`{name}` must be a JSON object")
    elif kind == "names" and not (
        isinstance(value, list) and all(isinstance(v, str) and v for v in value)
    ):
        raise bad_request(f"`{name}` must be a list of names")


RESOLVE = {
    "objective": Field("str", required=True),
    "consumer": Field("str"),
    "environment": Field("str"),
    "deployment": Field("str"),
    "traceId": Field("str"),
    "turnId": Field("str"),
}
EXECUTE = {
    "contextRef": Field("str", required=True),
    "tool": Field("str", required=True),
    "callId": Field("str", required=True),
    "arguments": Field("any", required=True),
    "approvalId": Field("str"),
    "turnId": Field("str"),
}
APPROVE = {
    "contextRef": Field("str", required=True),
    "tool": Field("str", required=True),
    "callId": Field("str", required=True),
    "arguments": Field("any", required=True),
    "reason": Field("text", required=True),
}
REJECT = APPROVE
"""``POST /v1/context/tools/reject``: the call rejected, and the approver's reason (never kept)."""
REPORT = {
    "contextRef": Field("str", required=True),
    "turnId": Field("str"),
    "tools": Field("names", required=True),
}
COMPLETE_TURN = {"outcome": Field("str", required=True)}


_LIMIT = re.compile(r"[0-9]{1,3}")
_CURSOR = re.compile(f"[A-Za-z0-9._~-]{{1,{MAX_CURSOR}}}")


def page_of(query: Mapping[str, str]) -> Page:
    """The page a pending list's query asks for: ``limit`` (1..200, default 50: anything else
    is 400) and ``after`` (a cursor of a ``next``: URL-safe characters only)."""
    limit = query.get("limit")
    if limit is not None and not (_LIMIT.fullmatch(limit) and 1 <= int(limit) <= MAX_LIMIT):
        raise bad_request(f"`limit` must be a whole number from 1 to {MAX_LIMIT}")
    after = query.get("after")
    if after is not None and not _CURSOR.fullmatch(after):
        raise bad_request("`after` must be the `next` of a page of this list")
    return Page(DEFAULT_LIMIT if limit is None else int(limit), after)


def call_of(query: Mapping[str, str]) -> tuple[str, str] | None:
    """The one call ``contextRef`` and ``callId`` name in a pending list's query (both or
    neither), if any."""
    ref, call_id = query.get("contextRef"), query.get("callId")
    if ref is None and call_id is None:
        return None
    if not (is_id(ref) and is_id(call_id)) or "after" in query:
        raise bad_request(
            f"`contextRef` and `callId` go together, each {ID_RULE}, and without `after`"
        )
    return ref, call_id
