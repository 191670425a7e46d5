"""One upstream MCP server's tool listing, read through the official ``mcp`` SDK's client.

:func:`list_tools` connects (stdio: the command is spawned without a shell, with only the SDK's
default environment; Streamable HTTP: an optional bearer token and CA file, redirects to
another origin never followed), negotiates with ``mcp.Client`` (``auto``: the stateless revision,
else the ``initialize`` handshake), and reads every page of ``tools/list``.

The tools are the JSON objects exactly as the server sent them. ``ClientSession.list_tools``
parses them into pydantic models, which may add members (defaults) or drop unknown ones, and
under the 2026 revision drops whole tools; a descriptor digest must be over the wire's JSON, so
each page is requested with the session's public ``send_request`` and a ``TypeAdapter`` of a
plain ``dict``: the SDK validates the result against the protocol and hands back the result
object as parsed from the wire (JSON objects as dicts, members as sent). The only change the SDK
makes to that object is at its top level (a later revision's cache hints removed, ``ttlMs``
clamped), never inside a tool.
"""

from __future__ import annotations

import asyncio
import math
import os
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_PAGES = 100
"""More pages than this is a server that never stops paging: refused."""
TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Stdio:
    """Spawn ``command[0]`` with ``command[1:]`` (never through a shell)."""

    command: Sequence[str]


@dataclass(frozen=True)
class Http:
    """A Streamable HTTP endpoint; ``bearer`` sent as ``Authorization``; ``tls`` the client
    context (a CA file's, or the system's)."""

    url: str
    bearer: str | None = field(default=None, repr=False)
    tls: ssl.SSLContext | None = None


@dataclass(frozen=True)
class Listing:
    """What an upstream said about itself and its tools."""

    name: str
    version: str
    protocol_version: str
    tools: list[dict[str, Any]]


class UpstreamUnreachable(Exception):
    """The upstream could not be started, reached, or did not answer as MCP."""


async def list_tools(target: Stdio | Http, *, timeout: float = TIMEOUT_S) -> Listing:
    """The upstream's identity and every tool of its listing, as sent;
    :class:`UpstreamUnreachable` (saying why, never a token) when that is not possible."""
    import mcp  # noqa: PLC0415, F401  # the `server` extra, on demand: SERVER_STACK_MISSING

    try:
        async with asyncio.timeout(timeout):
            return await _list(target, timeout)
    except UpstreamUnreachable:
        raise
    except TimeoutError:
        raise UpstreamUnreachable(f"no complete answer within {math.ceil(timeout)} s") from None
    except Exception as exc:  # the SDK's and the transport's failures, whatever their class
        raise UpstreamUnreachable(_why(exc)) from None


def _why(exc: BaseException) -> str:
    """A short reason: the exception's class and first line (a group: its first leaf)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).splitlines()[0][:200] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _list(target: Stdio | Http, timeout: float) -> Listing:
    import httpx2  # noqa: PLC0415
    import mcp  # noqa: PLC0415
    from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: PLC0415
    from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415

    if isinstance(target, Stdio):
        command, *args = target.command
        params = StdioServerParameters(command=command, args=list(args))
        with open(os.devnull, "w", encoding="utf-8") as errlog:  # it may echo what it is given
            client = mcp.Client(
                stdio_client(params, errlog=errlog), cache=None, read_timeout_seconds=timeout
            )
            return await _read(client)
    headers = {} if target.bearer is None else {"Authorization": f"Bearer {target.bearer}"}
    verify: ssl.SSLContext | bool = target.tls if target.tls is not None else True
    http = httpx2.AsyncClient(headers=headers, verify=verify, timeout=httpx2.Timeout(timeout))
    async with http:
        transport = streamable_http_client(target.url, http_client=http)
        client = mcp.Client(transport, cache=None, read_timeout_seconds=timeout)
        return await _read(client)


async def _read(client: Any) -> Listing:
    async with client:
        info = client.server_info
        tools = await read_tools(client.session)
        return Listing(
            name=getattr(info, "name", "") or "",
            version=getattr(info, "version", "") or "",
            protocol_version=client.protocol_version,
            tools=tools,
        )


async def read_tools(session: Any) -> list[dict[str, Any]]:
    """Every page of ``tools/list`` of an open ``ClientSession``, each tool as sent;
    :class:`UpstreamUnreachable` when the answer is not a listing (the SDK's own failures
    propagate)."""
    import mcp_types as mt  # noqa: PLC0415
    from pydantic import TypeAdapter  # noqa: PLC0415

    raw = TypeAdapter(dict[str, Any])
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        params = None if cursor is None else mt.PaginatedRequestParams(cursor=cursor)
        page = await session.send_request(mt.ListToolsRequest(params=params), raw)
        listed = page.get("tools")
        if not isinstance(listed, list) or not all(isinstance(t, Mapping) for t in listed):
            raise UpstreamUnreachable("`tools/list` answered without a list of tools")
        tools.extend(dict(t) for t in listed)
        cursor = page.get("nextCursor")
        if not isinstance(cursor, str):
            return tools
    raise UpstreamUnreachable(f"`tools/list` did not end within {MAX_PAGES} pages")
