"""``tools/call`` to a Streamable HTTP upstream on seif's own HTTP/1.1 client, in the session
the official SDK's client opened.

The SDK's client (``mcp`` 2.3.0) keeps an upstream's session: the ``initialize`` handshake, the
listing, the ``GET`` stream that brings ``notifications/tools/list_changed``. Its ``tools/call``
costs a new TCP connection per call (it closes a call's event stream as soon as the response
arrived, before the stream's end, so the connection cannot be kept) and most of a millisecond
of CPU in its layers (``python -m bench upstream``). A call is sent here instead, in the same
session (its ``Mcp-Session-Id`` and protocol version), with
:class:`~servers.executor.http1.Http1Client`, the executor endpoints' client: keep-alive
connections, redirects never followed, the binding's TLS, a deadline over the whole exchange,
and the knowledge of whether a failed request can have left (``unsent``).

The answer is read whole (JSON, or an event stream read to its end: the server closes a
request's stream once it answered, as the transport says it should) up to the binding's
``maxBytes`` and :data:`SLACK_BYTES` for the envelope; every message in it must be strict JSON
(a key given twice, a ``NaN``: ``UNKNOWN INVALID_RESPONSE``). What comes back:

- the JSON-RPC response to the call: its ``result`` object (the executor interprets it), or,
  for a JSON-RPC error, ``FAILED UPSTREAM_ERROR`` with its code, whatever the HTTP status;
- a notification in the stream: ``on_notification(method)`` (``tools/list_changed`` refreshes
  the listing); a request from the server is not answered (seif's client declares no
  capability a server may ask of: no sampling, elicitation or roots);
- a redirect (never followed): ``FAILED REDIRECT``; ``404`` in a session: the session is gone,
  ``FAILED UPSTREAM_UNAVAILABLE`` and the connection is renewed; another ``4xx``: ``FAILED
  UPSTREAM_ERROR`` (code ``HTTP <status>``): the server refused the request without running it;
- anything else (``5xx`` without a JSON-RPC error, ``202``, a stream that ends without the
  response, a message that is not JSON-RPC): ``UNKNOWN INVALID_RESPONSE``, as are a timeout
  (``TIMEOUT``), a connection lost after sending (``CONNECTION_LOST``) and an answer over the
  limit (``TOO_LARGE``); a request that cannot have left is ``FAILED`` with the transport's
  reason (``CONNECTION_REFUSED``: the connection is renewed).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from policy.json.strict import dump_bytes, loads
from servers.config.upstreams import HttpUpstream
from servers.executor.http1 import Http1Client, Response, TransportError
from servers.executor.interface import FAILED, UNKNOWN, Outcome
from servers.wire import reasons

SLACK_BYTES = 1 << 20
"""Bytes an answer may carry beyond the binding's ``maxBytes``: the JSON-RPC envelope, the
event stream's framing and notifications sent before the response."""
ACCEPT = "application/json, text/event-stream"


class CallFailed(Exception):
    """A call that brought no result: its ``outcome``; ``renew``: the session is gone or the
    server is down, so the connection must be opened again."""

    def __init__(self, outcome: Outcome, *, renew: bool = False) -> None:
        super().__init__(outcome.reason)
        self.outcome = outcome
        self.renew = renew


@dataclass(slots=True)
class HttpSession:
    """Where an upstream's calls go: its URL, bearer token and TLS, the connection's own
    HTTP/1.1 client, and the session the SDK's client opened (the negotiated version,
    ``session_id`` from the ``initialize`` answer)."""

    upstream: HttpUpstream
    transport: Http1Client
    protocol_version: str
    session_id: str | None = None
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def headers(self) -> list[tuple[str, str]]:
        # identity: the byte limit applies to what the upstream sent
        headers = [
            ("Accept", ACCEPT),
            ("Accept-Encoding", "identity"),
            ("Content-Type", "application/json"),
            ("Mcp-Protocol-Version", self.protocol_version),
        ]
        if self.session_id is not None:
            headers.append(("Mcp-Session-Id", self.session_id))
        if self.upstream.secret:
            headers.append(("Authorization", f"Bearer {self.upstream.secret}"))
        return headers

    def next_id(self) -> str:
        """A request id the SDK's client never uses on this session (its ids are numbers)."""
        return f"seif-{next(self._ids)}"


async def call_tool(
    session: HttpSession,
    params: dict[str, Any],
    *,
    timeout_s: float,
    max_bytes: int,
    on_notification: Callable[[str], None],
) -> dict[str, Any]:
    """Send one ``tools/call`` with ``params``, never retried; its result object, or
    :class:`CallFailed`."""
    request_id = session.next_id()
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    try:
        payload = dump_bytes(message)
    except (TypeError, ValueError):
        raise CallFailed(Outcome(FAILED, reason=reasons.REQUEST_INVALID)) from None
    upstream = session.upstream
    try:
        response = await session.transport.request(
            "POST",
            upstream.url,
            session.headers(),
            payload,
            timeout_s=timeout_s,
            max_bytes=max_bytes + SLACK_BYTES,
            tls=upstream.tls,
        )
    except TransportError as problem:
        status = FAILED if problem.unsent else UNKNOWN
        renew = problem.reason == reasons.CONNECTION_REFUSED
        raise CallFailed(Outcome(status, reason=problem.reason), renew=renew) from None
    return answer(response, request_id, on_notification, in_session=session.session_id is not None)


def answer(
    response: Response,
    request_id: str,
    on_notification: Callable[[str], None],
    *,
    in_session: bool = True,
) -> dict[str, Any]:
    """The result of the call ``request_id`` in ``response``, or :class:`CallFailed`."""
    status = response.status
    if 300 <= status < 400:
        raise CallFailed(Outcome(FAILED, reason=reasons.REDIRECT))
    messages = _messages(response)
    for message in messages:
        if isinstance(message, dict) and message.get("id") is None:
            method = message.get("method")
            if isinstance(method, str):
                on_notification(method)
    found = [m for m in messages if isinstance(m, dict) and m.get("id") == request_id]
    reply = found[0] if len(found) == 1 else None
    if reply is not None and "method" not in reply:
        error = reply.get("error")
        if isinstance(error, dict) and "result" not in reply:
            code = error.get("code")
            code_text = str(code) if isinstance(code, int) and not isinstance(code, bool) else None
            raise CallFailed(Outcome(FAILED, reason=reasons.UPSTREAM_ERROR, error_code=code_text))
        result = reply.get("result")
        if 200 <= status < 300 and isinstance(result, dict) and "error" not in reply:
            return result
    if status == 404 and in_session:
        raise CallFailed(Outcome(FAILED, reason=reasons.UPSTREAM_UNAVAILABLE), renew=True)
    if 400 <= status < 500:
        refused = Outcome(FAILED, reason=reasons.UPSTREAM_ERROR, error_code=f"HTTP {status}")
        raise CallFailed(refused)
    raise CallFailed(Outcome(UNKNOWN, reason=reasons.INVALID_RESPONSE))


def _messages(response: Response) -> list[Any]:
    """The JSON-RPC messages of an answer: its JSON body, or each event's data; an empty list
    for a body that is neither. Not strict JSON: ``UNKNOWN INVALID_RESPONSE``."""
    kind = _content_type(response)
    try:
        if kind == "application/json" and response.body:
            return [loads(response.body)]
        if kind == "text/event-stream":
            return [loads(data) for data in _event_data(response.body)]
    except ValueError:  # JsonError, or bytes that are not UTF-8
        raise CallFailed(Outcome(UNKNOWN, reason=reasons.INVALID_RESPONSE)) from None
    return []


def _content_type(response: Response) -> str:
    for name, value in response.headers:
        if name.lower() == b"content-type":
            return value.split(b";", 1)[0].strip().lower().decode("latin-1")
    return ""


def _event_data(body: bytes) -> list[bytes]:
    """The ``data`` of each event of an event stream (its lines joined by newlines), in
    order; events whose data is empty are skipped, as the format says."""
    events: list[bytes] = []
    lines: list[bytes] = []
    for line in body.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n"):
        if not line:
            data = b"\n".join(lines)
            if data:  # an event with empty data is not dispatched (a resumption primer)
                events.append(data)
            lines = []
        elif line.startswith(b"data:"):
            value = line[5:]
            lines.append(value[1:] if value.startswith(b" ") else value)
    return events  # an event the stream ended in the middle of is dropped, as the format says
