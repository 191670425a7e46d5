"""The official ``mcp`` client (2.3.0) against seif's MCP server mode over real loopback HTTP.

- :func:`mcp_client`: an ``mcp.Client`` on ``{runtime}/mcp/{objective}?...`` with a bearer
  token, in ``legacy`` mode (the ``2025-11-25`` handshake, with an ``Mcp-Session-Id``) or the
  default ``auto`` mode (the stateless ``2026-07-28`` revision); the client's response cache is
  off, so every ``list_tools`` reaches the server.
- :class:`Notified`: a message handler that keeps the server's notifications.
- :func:`receipt_of`: the receipt an ``isError`` result carries in its ``_meta``.
- :func:`log_records`, :func:`trace_events`: the decision log (the file, or the runtime's
  ``GET /v1/traces/{contextRef}``), to assert what was logged.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlencode

import httpx2
import mcp
import mcp_types as mt
from mcp.client.session import MessageHandlerFnT
from mcp.client.streamable_http import streamable_http_client

from servers.log.reading import read_records
from tests.support.runtime_harness import APP_TOKEN, Stack

MODES = ("legacy", "auto")
"""The client's connect modes: ``legacy`` forces the session handshake, ``auto`` (the
default) negotiates the stateless revision."""
REVISION = {"legacy": "2025-11-25", "auto": "2026-07-28"}
"""The protocol revision each mode negotiates with seif."""
CALL_ID = "io.seif/callId"
CONTEXT_REF = "io.seif/contextRef"
RECEIPT = "io.seif/receipt"
TIMEOUT = httpx2.Timeout(10.0, read=30.0)


class Notified:
    """A client ``message_handler`` keeping every notification the server sent."""

    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def __call__(self, message: Any) -> None:
        self.messages.append(message)

    def methods(self) -> list[str]:
        return [m for m in (getattr(x, "method", None) for x in self.messages) if m]

    def count(self, method: str) -> int:
        return self.methods().count(method)

    async def arrived(self, method: str, count: int = 1, timeout: float = 5.0) -> bool:
        """Whether ``count`` notifications of ``method`` arrived within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while self.count(method) < count:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.02)
        return True

    async def wait_for(self, method: str, count: int = 1, timeout: float = 5.0) -> None:
        """Until ``count`` notifications of ``method`` arrived (an assertion error after
        ``timeout`` seconds)."""
        assert await self.arrived(method, count, timeout), (method, self.methods())


def raw_initialize(revision: str = "2025-11-25") -> dict[str, Any]:
    """A raw JSON-RPC ``initialize`` request of ``revision`` (tests that post it themselves)."""
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": revision,
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }


def raw_headers(revision: str = "2025-11-25") -> dict[str, str]:
    """The headers of a raw Streamable HTTP POST of ``revision``."""
    return {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": revision,
    }


def mcp_url(base: str, objective: str, **query: str) -> str:
    url = f"{base}/mcp/{objective}"
    return f"{url}?{urlencode(query)}" if query else url


@asynccontextmanager
async def mcp_client(
    base: str,
    objective: str,
    *,
    mode: str,
    token: str = APP_TOKEN,
    message_handler: MessageHandlerFnT | None = None,
    elicitation_callback: Callable[..., Any] | None = None,
    consumer: str | None = None,
    environment: str | None = None,
    deployment: str | None = None,
) -> AsyncIterator[mcp.Client]:
    """The official client connected to seif's ``/mcp/{objective}`` (with the context
    coordinates given), checked to have negotiated :data:`REVISION` of ``mode``."""
    given = {"consumer": consumer, "environment": environment, "deployment": deployment}
    url = mcp_url(base, objective, **{k: v for k, v in given.items() if v is not None})
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=TIMEOUT) as http:
        client = mcp.Client(
            streamable_http_client(url, http_client=http),
            mode=mode,
            message_handler=message_handler,
            elicitation_callback=elicitation_callback,
            cache=None,
            read_timeout_seconds=30.0,
        )
        async with client:
            assert client.protocol_version == REVISION[mode], client.protocol_version
            yield client


class NeverElicited:
    """An elicitation callback keeping what it was asked (seif never asks: an MCP client
    cannot approve), answering each ask with an error."""

    def __init__(self) -> None:
        self.asked: list[Any] = []

    async def __call__(self, *args: Any) -> Any:
        self.asked.append(args)
        return mt.ErrorData(code=mt.INVALID_REQUEST, message="not here")


def authoring_client(
    base: str, mode: str, elicitation: Callable[..., Any] | None = None
) -> AbstractAsyncContextManager[mcp.Client]:
    """:func:`mcp_client` for the ``authoring`` objective as ``course-authoring``."""
    return mcp_client(base, "authoring", mode=mode, consumer="course-authoring",
                      elicitation_callback=elicitation)  # fmt: skip


def call_meta(call_id: Any) -> mt.RequestParamsMeta:
    """A ``tools/call``'s ``_meta`` naming its call id (any value: bad ones are tested too)."""
    return cast(mt.RequestParamsMeta, {CALL_ID: call_id})


def dumped(value: Any) -> dict[str, Any]:
    """An SDK result as its JSON document (by alias, without unset optional fields)."""
    found: dict[str, Any] = value.model_dump(by_alias=True, exclude_none=True, mode="json")
    return found


def receipt_of(result: Any) -> dict[str, Any]:
    """The receipt of an ``isError`` result, ``_meta["io.seif/receipt"]``, checked to come with
    no ``structuredContent`` (that is the tool's output schema's, and there is no output)."""
    document = dumped(result)
    assert document.get("isError") is True, document
    assert "structuredContent" not in document, document
    receipt: dict[str, Any] = document["_meta"][RECEIPT]
    return receipt


def log_records(stack: Stack) -> list[dict[str, Any]]:
    """Every record of the runtime's decision log (the file under its data directory)."""
    return list(read_records(decision_log(stack)))


def decision_log(stack: Stack) -> Path:
    return stack.config.data / "decisions.cbor"


def of(records: list[dict[str, Any]], event: str, **fields: Any) -> list[dict[str, Any]]:
    """The records of ``event`` whose ``fields`` have those values."""
    return [
        r
        for r in records
        if r.get("event") == event and all(r.get(k) == v for k, v in fields.items())
    ]


async def trace_events(stack: Stack, context_ref: str) -> list[dict[str, Any]]:
    """The trace of ``context_ref`` as the runtime serves it to the credential that resolved
    it (``GET /v1/traces/{contextRef}``)."""
    reply = await stack.call("GET", f"/v1/traces/{context_ref}")
    assert reply.status == 200, reply
    events: list[dict[str, Any]] = reply.body["events"]
    return events


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["event"] for e in events]


async def executions(stack: Stack) -> Mapping[str, int]:
    """The executor's executions by tool id (what it dispatched)."""
    found: Mapping[str, int] = (await stack.stats())["executions"]
    return found


async def until(check: Callable[[], Any], timeout: float = 5.0) -> Any:
    """The first truthy value of the coroutine function ``check``, polled."""
    deadline = time.monotonic() + timeout
    while True:
        found = await check()
        if found:
            return found
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)
