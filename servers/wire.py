"""Wire types of the runtime's HTTP API: error codes, body decoding, request shapes.

Handlers decode with these helpers and raise :class:`HttpError`; one middleware renders every
error as ``{"error": {"code", "message"}}``. Nothing a client can send produces a 500.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from policy.jsonvalue import DuplicateKey, iter_strings, unique_pairs

MAX_BODY_BYTES = 1 << 20
MAX_ID_LENGTH = 256


class HttpError(Exception):
    """An error answer: HTTP status, stable code, one-line message, optional extra fields."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra

    def response(self) -> web.Response:
        body: dict[str, Any] = {"error": {"code": self.code, "message": self.message}}
        body.update(self.extra)
        return json_response(body, status=self.status)


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""What ``json.dumps(body, ensure_ascii=False, separators=(",", ":"))`` uses, made once."""


def json_bytes(body: Any) -> bytes:
    return _ENCODER.encode(body).encode("utf-8")


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json_bytes(body),
        status=status,
        content_type="application/json",
    )


def bad_request(message: str, code: str = "BAD_REQUEST") -> HttpError:
    return HttpError(400, code, message)


def _no_constant(name: str) -> Any:
    raise bad_request(f"`{name}` is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise bad_request("a number is too large for a double")
    return value


_DECODER = json.JSONDecoder(
    object_pairs_hook=unique_pairs, parse_constant=_no_constant, parse_float=_finite
)
"""What ``json.loads(text, object_pairs_hook=..., ...)`` uses, made once."""


async def read_json(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object: 413 past the size limit, 400 for anything else."""
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise HttpError(413, "TOO_LARGE", f"the body exceeds {MAX_BODY_BYTES} bytes")
    try:  # one read; the application's client_max_size is MAX_BODY_BYTES (chunked bodies too)
        data = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise HttpError(413, "TOO_LARGE", f"the body exceeds {MAX_BODY_BYTES} bytes") from None
    if len(data) > MAX_BODY_BYTES:  # an application built with a larger client_max_size
        raise HttpError(413, "TOO_LARGE", f"the body exceeds {MAX_BODY_BYTES} bytes")
    try:
        text = data.decode("utf-8")
        value = _DECODER.decode(text)
    except DuplicateKey as exc:
        raise bad_request(str(exc)) from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise bad_request("the body is not a UTF-8 JSON document") from None
    if not isinstance(value, dict):
        raise bad_request("the body must be a JSON object")
    if "\\u" in text and _lone_surrogate(value):  # only a \u escape can make one
        raise bad_request("a string in the body is not Unicode text (a lone surrogate)")
    return value


def _lone_surrogate(value: Any) -> bool:
    """Whether a decoded string (key or value) holds an unpaired surrogate such as ``\\ud800``:
    it cannot be stored, logged or encoded as UTF-8 (RFC 7493 refuses it too)."""
    return any(not text.isascii() and not _utf8_encodable(text) for text in iter_strings(value))


def _utf8_encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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


def _check_kind(name: str, kind: str, value: Any) -> None:
    if kind == "str":
        if not isinstance(value, str) or not value or len(value) > MAX_ID_LENGTH:
            raise bad_request(
                f"`{name}` must be a non-empty string of at most {MAX_ID_LENGTH} characters"
            )
    elif kind == "text":
        if not isinstance(value, str) or not value.strip() or len(value) > 4096:
            raise bad_request(f"`{name}` must be a non-empty string of at most 4096 characters")
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
REPORT = {
    "contextRef": Field("str", required=True),
    "turnId": Field("str"),
    "tools": Field("names", required=True),
}
COMPLETE_TURN = {"outcome": Field("str", required=True)}
