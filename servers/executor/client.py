"""Client side of the executor protocol ``context-tool-executor.v1``.

``ExecutorClient.describe`` observes a bound executor (never raises); ``execute`` dispatches one
call and turns whatever happens into an :class:`Outcome` (never raises, except that cancellation
propagates). Guarantees, whatever the executor does (the transport is
:class:`servers.executor.http1.Http1Client`):

- the only URL ever requested is ``binding.endpoint + "/describe"`` or ``+ "/execute"``:
  redirects are not followed (any 3xx is ``REDIRECT``), no proxy, no cookie, nothing from the
  environment;
- one request per call, never retried, on a new or a kept-alive connection;
- ``binding.timeout_ms`` bounds the whole exchange (connecting included), ``binding.max_bytes``
  the body, read incrementally (``Accept-Encoding: identity``: nothing is decompressed);
- a response that carries the credential (raw bytes, headers or decoded strings) is refused and
  its content dropped;
- no secret, argument, output or executor message reaches a log line, an exception or an
  :class:`Outcome`; the executor's ``error.code`` is kept only when it is a short code.

Status semantics: ``FAILED`` only when the executor said ``ok: false``, the output broke the
tool's result schema, or nothing was sent: the connection never opened (``CONNECTION_REFUSED``;
``CONNECT_TIMEOUT`` when the deadline passed while connecting; ``TLS_UNTRUSTED``,
``TLS_NAME_MISMATCH`` or ``TLS_FAILED`` when the executor's certificate was refused, before any
request byte), a kept-alive connection the executor had closed and no new one could open, an
invalid endpoint, a request that could not be written (``REQUEST_INVALID``: a body that is not
JSON, a credential that cannot go in a header), a binding of another tool. Everything after the
request may have been sent (timeout, lost connection, redirect, oversized, invalid or
reflecting response) is ``UNKNOWN``: the action may have happened.

Cancellation: ``execute`` lets ``asyncio.CancelledError`` through (the request is abandoned), so
a dispatch must never be awaited bare from a request handler: the runtime runs the exchange and
the completion of its receipt in a task of its own, awaited through ``asyncio.shield``, so that
cancelling the caller (an HTTP client that went away) neither cancels the backend call nor
loses its receipt (``servers.runtime.service.Runtime.drain`` waits for those tasks at shutdown).
"""

from __future__ import annotations

import logging
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from policy.ir import Tool
from policy.json.strict import JsonError, dump_bytes, loads
from policy.json.value import iter_strings, thaw
from servers.executor.http1 import Http1Client, Response, TransportError
from servers.executor.interface import (
    COORDINATES,
    FAILED,
    READY,
    SUCCEEDED,
    UNKNOWN,
    Dispatch,
    Observation,
    Outcome,
    unavailable,
)
from servers.wire import reasons

CONTRACT = "context-tool-executor.v1"
MAX_DESCRIPTOR_FIELD = 200
_ERROR_CODE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")

log = logging.getLogger(__name__)


class BindingLike(Protocol):
    """What the client needs of a binding (``servers.config.files.Binding`` has this shape).
    A binding may also carry ``tls``, the ``ssl.SSLContext`` of an ``https://`` endpoint
    (:func:`_tls`); without one the transport trusts the system trust store."""

    @property
    def tool(self) -> str: ...
    @property
    def endpoint(self) -> str: ...
    @property
    def timeout_ms(self) -> int: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def secret(self) -> str | None: ...


# --- protocol values -----------------------------------------------------------------------


def execute_body(
    tool: Tool,
    arguments: Any,
    call_id: str,
    idem_key: str,
    coordinates: Mapping[str, Any],
) -> dict[str, Any]:
    """The exact ``POST /execute`` body. ``coordinates`` must carry exactly the seven
    coordinate keys (values may be None); a missing or extra key is a ``ValueError``."""
    missing = [k for k in COORDINATES if k not in coordinates]
    extra = sorted(k for k in coordinates if k not in COORDINATES)
    if missing or extra:
        raise ValueError(f"coordinates: missing {missing}, unknown {extra}")
    return {
        "contract": CONTRACT,
        "tool": {"id": tool.id, "version": tool.version, "contractDigest": tool.contract_digest},
        "arguments": thaw(arguments),
        "callId": call_id,
        "idempotencyKey": idem_key,
        "coordinates": {k: coordinates[k] for k in COORDINATES},
    }


def new_transport() -> Http1Client:
    """The executors' transport: keep-alive HTTP/1.1, no proxies, cookies or redirects; TLS
    with each binding's context (:data:`servers.config.files.Binding.tls`: its ``caFile``'s or
    the system trust store's, host names verified)."""
    return Http1Client()


# --- response decoding ---------------------------------------------------------------------


def _decode(raw: bytes) -> Any:
    """The strict JSON of an executor's answer (:func:`policy.json.strict.loads`: no duplicate
    keys, no NaN, infinities or oversized numbers, no lone surrogates, bounded depth).
    Raises ``TransportError``."""
    try:
        return loads(raw)
    except JsonError:
        raise TransportError(reasons.INVALID_RESPONSE) from None


def _carries(value: Any, secret: str) -> bool:
    """Whether any string (key or value) inside a decoded JSON value contains ``secret``."""
    return any(secret in text for text in iter_strings(value))


def _may_carry(raw: bytes, secret: str) -> bool:
    """False when no decoded string can hold ``secret``: without a ``\\`` escape in the raw
    body, every decoded string (key or value) is a slice of it, so the secret would be too."""
    return b"\\" in raw or secret.encode("utf-8", "surrogatepass") in raw


def _protocol_document(reply: Response, secret: str | None) -> dict[str, Any]:
    """The decoded response object, after the reflection check on its strings."""
    value = _decode(reply.body)
    if secret and _may_carry(reply.body, secret) and _carries(value, secret):
        raise TransportError(reasons.CREDENTIAL_REFLECTED)
    if not isinstance(value, dict):
        raise TransportError(reasons.INVALID_RESPONSE)
    return value


def _error_code(document: Mapping[str, Any]) -> str | None:
    error = document.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) and _ERROR_CODE.fullmatch(code) else None


def _interpret_execute(reply: Response, tool: Tool, secret: str | None) -> Outcome:
    if 300 <= reply.status < 400:
        return Outcome(UNKNOWN, reason=reasons.REDIRECT)
    document = _protocol_document(reply, secret)
    ok = document.get("ok")
    if document.get("contract") != CONTRACT or not isinstance(ok, bool):
        return Outcome(UNKNOWN, reason=reasons.INVALID_RESPONSE)
    if not ok:
        return Outcome(FAILED, reason=reasons.EXECUTOR_ERROR, error_code=_error_code(document))
    if not 200 <= reply.status < 300 or "output" not in document:
        return Outcome(UNKNOWN, reason=reasons.INVALID_RESPONSE)
    output = document["output"]
    validator = tool.result_validator
    if validator is not None and not validator.is_valid(output):
        return Outcome(FAILED, reason=reasons.RESULT_INVALID)
    return Outcome(SUCCEEDED, output=output)


def _short(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_DESCRIPTOR_FIELD


def _interpret_describe(reply: Response, binding: BindingLike) -> Observation:
    if 300 <= reply.status < 400:
        return unavailable(reasons.REDIRECT)
    if reply.status != 200:
        return unavailable(f"HTTP_{reply.status}")
    document = _protocol_document(reply, binding.secret)
    tool = document.get("tool")
    if document.get("contract") != CONTRACT or not isinstance(tool, dict):
        return unavailable(reasons.INVALID_RESPONSE)
    if not all(_short(tool.get(k)) for k in ("id", "version", "contractDigest")):
        return unavailable(reasons.INVALID_RESPONSE)
    if tool["id"] != binding.tool:
        return unavailable("TOOL_MISMATCH")
    return {"state": READY, "version": tool["version"], "contractDigest": tool["contractDigest"]}


# --- transport -----------------------------------------------------------------------------


def _headers(binding: BindingLike, has_body: bool) -> list[tuple[str, str]]:
    # identity: the byte limit and the reflection check apply to what the executor sent
    headers = [("Accept", "application/json"), ("Accept-Encoding", "identity")]
    if has_body:
        headers.append(("Content-Type", "application/json"))
    if binding.secret:
        headers.append(("Authorization", f"Bearer {binding.secret}"))
    return headers


def _tls(binding: BindingLike) -> ssl.SSLContext | None:
    """The binding's TLS context; None (the transport's system trust store) for a
    binding-shaped value without one."""
    tls = getattr(binding, "tls", None)
    return tls if isinstance(tls, ssl.SSLContext) else None


def _unreflected(response: Response, binding: BindingLike) -> Response:
    """The response, unless its headers or body carry the credential."""
    secret = binding.secret.encode() if binding.secret else None
    if secret and any(secret in name or secret in value for name, value in response.headers):
        raise TransportError(reasons.CREDENTIAL_REFLECTED)
    if secret and secret in response.body:
        raise TransportError(reasons.CREDENTIAL_REFLECTED)
    return response


class ExecutorClient:
    """Talks to bound executors over one :class:`~servers.executor.http1.Http1Client`."""

    def __init__(self, transport: Http1Client) -> None:
        self._transport = transport

    async def describe(self, binding: BindingLike) -> Observation:
        """``{"state": "READY", "version", "contractDigest"}`` or
        ``{"state": "UNAVAILABLE", "detail": code}``. Never raises (but for cancellation)."""
        try:
            reply = await self._exchange("GET", binding, "/describe", None)
            return _interpret_describe(reply, binding)
        except TransportError as problem:
            return unavailable(problem.reason)

    async def execute(self, binding: BindingLike, tool: Tool, body: dict[str, Any]) -> Outcome:
        """Send ``body`` (see :func:`execute_body`) once. Never raises, but cancellation
        propagates and abandons the request (see the module's note on cancellation)."""
        if binding.tool != tool.id:
            return Outcome(FAILED, reason=reasons.BINDING_MISMATCH)
        try:
            payload = dump_bytes(body)
        except (TypeError, ValueError):  # JsonError is a ValueError
            return Outcome(FAILED, reason=reasons.REQUEST_INVALID)
        try:
            reply = await self._exchange("POST", binding, "/execute", payload)
            return _interpret_execute(reply, tool, binding.secret)
        except TransportError as problem:
            return Outcome(FAILED if problem.unsent else UNKNOWN, reason=problem.reason)

    async def _exchange(
        self, method: str, binding: BindingLike, suffix: str, payload: bytes | None
    ) -> Response:
        """One request to exactly ``binding.endpoint + suffix``; raises ``TransportError``."""
        try:
            response = await self._transport.request(
                method,
                binding.endpoint + suffix,
                _headers(binding, payload is not None),
                payload,
                timeout_s=binding.timeout_ms / 1000,
                max_bytes=binding.max_bytes,
                tls=_tls(binding),
            )
        except TransportError as error:
            log.warning("executor %s %s: %s", binding.tool, suffix[1:], error.reason)
            raise
        except Exception as error:  # a bug below us: the exchange's fate is unknown
            log.error("executor %s %s: %s", binding.tool, suffix[1:], type(error).__name__)
            raise TransportError(reasons.CLIENT_ERROR) from None
        return _unreflected(response, binding)


@dataclass(frozen=True, slots=True)
class HttpExecutor:
    """A tool bound to an endpoint that speaks ``context-tool-executor.v1``: an
    :class:`~servers.executor.interface.Executor` over a shared :class:`ExecutorClient`."""

    binding: BindingLike
    client: ExecutorClient

    @property
    def tool(self) -> str:
        return self.binding.tool

    async def describe(self) -> Observation:
        return await self.client.describe(self.binding)

    async def dispatch(self, call: Dispatch) -> Outcome:
        body = execute_body(
            call.tool, call.arguments, call.call_id, call.idempotency_key, call.coordinates
        )
        return await self.client.execute(self.binding, call.tool, body)
