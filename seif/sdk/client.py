"""``RuntimeClient``: the async client of the runtime's HTTP API (aiohttp, one session per
client).

What a call can end in:

- a value (``Context``, ``Receipt``, ``ApprovalStatus``, a turn id);
- a :class:`~seif.sdk.errors.SeifRequestError` subclass when the runtime refused the request
  itself (400, 401, 403, 404, 409, 503...);
- a :class:`~seif.sdk.errors.SeifTransportError` when no usable answer came back.

``execute`` is the exception to the last two: it never raises for a transport failure and
never retries. When the request may have reached the runtime (a timeout after connecting, a
connection lost, a 5xx other than 503, an answer that is not a receipt) it returns an
``UNKNOWN`` receipt whose ``reason`` says so (``CLIENT_TIMEOUT``, ``CONNECTION_LOST``,
``RUNTIME_ERROR``, ``INVALID_RESPONSE``); when no connection could be opened at all
(refused, or timed out while connecting: not one byte of the request was written) it returns
a ``FAILED`` receipt with ``CONNECT_FAILED``. Only what the runtime refused before dispatch (4xx,
and 503, a runtime that did not take the request) raises.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import quote

import aiohttp

from policy.json.strict import JsonError, dump_bytes, loads
from seif.sdk import turns
from seif.sdk.errors import SeifTransportError, ServerError, ToolBuildRefused, request_error
from seif.sdk.types import (
    ApprovalStatus,
    Context,
    Delivery,
    Message,
    Receipt,
    ReceiptStatus,
    TurnRequest,
)

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]

KEEPALIVE_S = 5.0
"""How long an idle connection is kept: well under the runtime's header timeout (10 s at
most), so a kept connection is never one the runtime is closing as it is reused."""
KNOWN_CONTEXTS = 1024
"""Contexts whose function names the client remembers (for ``execute`` by function name)."""
_NOT_JSON = object()


def _segment(value: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"a path identifier must be a non-empty string, not {value!r:.64}")
    return quote(value, safe="")


class RuntimeClient:
    """``RuntimeClient(base_url, token, *, timeout_s=30.0)``: the runtime at ``base_url``
    (``http://127.0.0.1:8787``) with the application's bearer ``token``. Use it as an async
    context manager (``async with RuntimeClient(...) as client``) or ``await client.close()``.

    ``timeout_s`` bounds each request, connecting included; give it more than the longest
    tool timeout of the build, or an execute that is still running at the runtime comes back
    ``UNKNOWN`` ``CLIENT_TIMEOUT``. ``sleep`` and ``clock`` (monotonic seconds) are what
    ``wait_for_approval`` waits with, injectable for tests."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout_s: float = 30.0,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = time.monotonic,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError("base_url must be an http:// or https:// URL")
        if not isinstance(token, str) or not token:
            raise ValueError("token must be a non-empty string")
        if not timeout_s > 0:
            raise ValueError("timeout_s must be more than 0")
        self.base_url = base_url.rstrip("/")
        self.timeout_s = float(timeout_s)
        self._token = token
        self._sleep = sleep
        self._clock = clock
        self._session: aiohttp.ClientSession | None = None
        self._closed = False
        self._names: OrderedDict[str, dict[str, str]] = OrderedDict()

    def __repr__(self) -> str:
        return f"RuntimeClient({self.base_url!r})"  # never the token

    # --- the session ---------------------------------------------------------------------------

    def _http(self) -> aiohttp.ClientSession:
        if self._closed:
            raise RuntimeError("this RuntimeClient is closed")
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(keepalive_timeout=KEEPALIVE_S),
                timeout=aiohttp.ClientTimeout(
                    total=self.timeout_s, connect=min(self.timeout_s, 10.0)
                ),
                headers={"Authorization": f"Bearer {self._token}"},
            )
        return self._session

    async def close(self) -> None:
        self._closed = True
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    async def __aenter__(self) -> RuntimeClient:
        self._http()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _request(self, method: str, path: str, body: Any = None) -> Any:
        """The decoded answer of a 2xx; the typed error of anything else."""
        data = None if body is None else dump_bytes(body)  # unencodable: raised before sending
        headers = {"Content-Type": "application/json"} if data is not None else None
        session = self._http()
        try:
            async with session.request(
                method, self.base_url + path, data=data, headers=headers, allow_redirects=False
            ) as response:
                raw = await response.read()
                status, phrase = response.status, response.reason or ""
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            raise SeifTransportError(
                "CONNECT_FAILED",
                f"no connection to {self.base_url} ({type(exc).__name__}); nothing was sent",
                sent=False,
            ) from exc
        except TimeoutError as exc:
            raise SeifTransportError(
                "CLIENT_TIMEOUT", f"no answer within {self.timeout_s:g} s", sent=True
            ) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise SeifTransportError(
                "CONNECTION_LOST",
                f"the connection failed after the request was sent ({type(exc).__name__})",
                sent=True,
            ) from exc
        try:
            answer: Any = loads(raw) if raw else None
        except JsonError:
            answer = _NOT_JSON
        if status >= 400:
            raise request_error(status, None if answer is _NOT_JSON else answer, phrase)
        if status >= 300:  # the runtime never redirects; a redirect is never followed
            raise SeifTransportError(
                "INVALID_RESPONSE", f"a {status} redirect answer (not followed)", sent=True
            )
        if answer is _NOT_JSON:
            raise SeifTransportError(
                "INVALID_RESPONSE", f"the {status} answer is not JSON", sent=True
            )
        return answer

    @staticmethod
    def _read(parse: Callable[[Any], T], answer: Any) -> T:
        try:
            return parse(answer)
        except ValueError as exc:
            raise SeifTransportError("INVALID_RESPONSE", str(exc), sent=True) from None

    # --- contexts ------------------------------------------------------------------------------

    async def resolve(
        self,
        objective: str,
        *,
        consumer: str | None = None,
        environment: str | None = None,
        deployment: str | None = None,
        trace_id: str | None = None,
        turn_id: str | None = None,
    ) -> Context:
        """``POST /v1/context/resolve``: the context the policy discloses for ``objective``
        (``ResolutionBlockedError`` with ``causes`` when it cannot be resolved)."""
        body = {
            "objective": objective,
            "consumer": consumer,
            "environment": environment,
            "deployment": deployment,
            "traceId": trace_id,
            "turnId": turn_id,
        }
        answer = await self._request(
            "POST", "/v1/context/resolve", {k: v for k, v in body.items() if v is not None}
        )
        context = self._read(Context.from_wire, answer)
        self._remember(context)
        return context

    def _remember(self, context: Context) -> None:
        """Know the function names of ``context`` (the most recent :data:`KNOWN_CONTEXTS`)."""
        self._names[context.context_ref] = {c.name: c.id for c in context.contracts}
        self._names.move_to_end(context.context_ref)
        while len(self._names) > KNOWN_CONTEXTS:
            self._names.popitem(last=False)

    async def resolve_context(
        self,
        objective: str,
        *,
        consumer: str | None = None,
        environment: str | None = None,
        deployment: str | None = None,
        trace_id: str | None = None,
        turn_id: str | None = None,
    ) -> tuple[Message, ...]:
        """The messages alone, for an application that binds no tools; ``ToolBuildRefused``
        when the context discloses tools (they are never dropped silently)."""
        context = await self.resolve(
            objective,
            consumer=consumer,
            environment=environment,
            deployment=deployment,
            trace_id=trace_id,
            turn_id=turn_id,
        )
        if context.tools:
            raise ToolBuildRefused(context.context_ref, context.tool_names)
        return context.messages

    # --- executing -----------------------------------------------------------------------------

    def _tool_id(self, context_ref: str, tool: str) -> str:
        names = self._names.get(context_ref)
        if names is None or tool in names.values():
            return tool
        return names.get(tool, tool)

    async def execute(
        self,
        context_ref: str,
        tool: str,
        call_id: str,
        arguments: Any,
        *,
        approval_id: str | None = None,
        turn_id: str | None = None,
    ) -> Receipt:
        """``POST /v1/context/tools/execute``, once. ``tool`` is the tool id or its function
        name (the runtime takes either; a name of a context this client resolved is sent as
        its id, so that a receipt the SDK makes itself, when no answer came, names the id too).
        A receipt always, but for a request the runtime refused before dispatch."""
        tool = self._tool_id(context_ref, tool)
        body: dict[str, Any] = {
            "contextRef": context_ref,
            "tool": tool,
            "callId": call_id,
            "arguments": arguments,
        }
        if approval_id is not None:
            body["approvalId"] = approval_id
        if turn_id is not None:
            body["turnId"] = turn_id
        try:
            answer = await self._request("POST", "/v1/context/tools/execute", body)
        except SeifTransportError as exc:
            status: ReceiptStatus = "UNKNOWN" if exc.sent else "FAILED"
            return Receipt(call_id, tool, status, reason=exc.reason, detail=exc.message)
        except ServerError as exc:
            if exc.status == 503:  # the runtime did not take the request: nothing dispatched
                raise
            return Receipt(call_id, tool, "UNKNOWN", reason="RUNTIME_ERROR", detail=str(exc))
        try:
            receipt = Receipt.from_wire(answer)
        except ValueError as exc:
            return Receipt(call_id, tool, "UNKNOWN", reason="INVALID_RESPONSE", detail=str(exc))
        if receipt.call_id != call_id:
            detail = "the receipt names another call id"
            return Receipt(call_id, tool, "UNKNOWN", reason="INVALID_RESPONSE", detail=detail)
        return receipt

    async def execute_tool_by_name(
        self,
        context: Context,
        name: str,
        call_id: str,
        arguments: Any,
        *,
        approval_id: str | None = None,
        turn_id: str | None = None,
    ) -> Receipt:
        """Execute the function ``name`` the model used, mapped to its tool id through
        ``context``'s contracts (the LangChain tool-callback shape). A name the context does
        not disclose is a ``ValueError`` naming those it does; nothing is sent."""
        return await self.execute(
            context.context_ref,
            context.tool_id(name),
            call_id,
            arguments,
            approval_id=approval_id,
            turn_id=turn_id,
        )

    # --- turns and disclosure reports ------------------------------------------------------------

    async def start_turn(self) -> str:
        """``POST /v1/turns``: a new turn's id (it lives 15 minutes)."""
        answer = await self._request("POST", "/v1/turns")

        def turn_id(body: Any) -> str:
            found = body.get("turnId") if isinstance(body, Mapping) else None
            if not isinstance(found, str) or not found:
                raise ValueError("the turn answer has no `turnId`")
            return found

        return self._read(turn_id, answer)

    async def complete_turn(self, turn_id: str, outcome: str) -> None:
        """``POST /v1/turns/{turnId}/complete`` with ``COMPLETED`` or ``FAILED``."""
        if outcome not in ("COMPLETED", "FAILED"):
            raise ValueError("outcome must be `COMPLETED` or `FAILED`")
        await self._request("POST", f"/v1/turns/{_segment(turn_id)}/complete", {"outcome": outcome})

    async def report_disclosure(
        self, context_ref: str, tools: Iterable[str], *, turn_id: str | None = None
    ) -> None:
        """``POST /v1/context/disclosures``: the function names the application bound for the
        model."""
        body: dict[str, Any] = {
            "contextRef": context_ref,
            "tools": list(turns.checked_names(tools)),
        }
        if turn_id is not None:
            body["turnId"] = turn_id
        await self._request("POST", "/v1/context/disclosures", body)

    async def run_agent_turn(
        self,
        request: TurnRequest | Mapping[str, Any],
        handler: Callable[[turns.Turn], Awaitable[T]] | Callable[[turns.Turn], T],
    ) -> Delivery[T]:
        """Start a turn, resolve with its id, ``await handler(turn)``, report the disclosure,
        complete the turn, and return the :class:`Delivery` (see :mod:`seif.sdk.turns`)."""
        return await turns.run_agent_turn(self, request, handler)

    async def resume_agent_turn(
        self,
        context: Context,
        handler: Callable[[turns.Turn], Awaitable[T]] | Callable[[turns.Turn], T],
    ) -> Delivery[T]:
        """A turn on ``context``, resolved earlier (``Context.from_wire(context.to_wire())``
        restores one kept across a restart): start a turn, ``await handler(turn)``, report the
        disclosure and complete the turn as ``run_agent_turn`` does, without resolving again,
        so that the calls held for approval in that context can run once approved."""
        self._remember(context)
        return await turns.resume_agent_turn(self, context, handler)

    # --- approvals -----------------------------------------------------------------------------

    async def approval_status(self, context_ref: str, call_id: str) -> ApprovalStatus:
        """``GET /v1/context/tools/approvals/{contextRef}/{callId}`` (``NotFoundError``
        ``CONTEXT_UNKNOWN`` for a context this credential did not resolve; ``NOT_FOUND`` from a
        runtime that does not serve the route yet)."""
        path = f"/v1/context/tools/approvals/{_segment(context_ref)}/{_segment(call_id)}"
        answer = await self._request("GET", path)
        return self._read(lambda body: ApprovalStatus.from_wire(context_ref, call_id, body), answer)

    async def wait_for_approval(
        self,
        context_ref: str,
        call_id: str,
        *,
        timeout_s: float,
        interval_s: float = 0.5,
        max_interval_s: float = 5.0,
        backoff: float = 1.5,
    ) -> ApprovalStatus:
        """Poll ``approval_status`` until it is no longer ``PENDING`` or ``timeout_s`` has
        passed, and return the last status (``PENDING`` when the time ran out). The waits grow
        from ``interval_s`` by ``backoff`` up to ``max_interval_s`` and never pass the
        deadline, where one last status is read."""
        if timeout_s < 0 or interval_s <= 0 or max_interval_s < interval_s or backoff < 1:
            raise ValueError(
                "need timeout_s >= 0, interval_s > 0, max_interval_s >= interval_s, backoff >= 1"
            )
        deadline = self._clock() + timeout_s
        wait = interval_s
        while True:
            status = await self.approval_status(context_ref, call_id)
            remaining = deadline - self._clock()
            if status.settled or remaining <= 0:
                return status
            await self._sleep(min(wait, remaining))
            wait = min(wait * backoff, max_interval_s)
