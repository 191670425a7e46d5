"""A write asked through MCP by a client that leaves before its answer: the call id is the
request's own (a stateless ``tools/call`` without ``io.seif/callId``), so nobody can ask for the
call again, and the runtime lists it with ``requesterGone``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from tests.servers.mcp.test_mcp_boundary import rpc, stateless_headers
from tests.support.mcp_support import mcp_url
from tests.support.runtime_harness import APPROVAL, Stack


async def abandoned(
    stack: Stack, arguments: Any, known: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """Ask ``propose_change`` with ``arguments`` for ``course-authoring``, and leave once it is
    held; the runtime's pending entry of it, once it says its requester is gone. ``known``:
    call ids held before (the new call is the one not among them)."""
    url = mcp_url(stack.runtime, "authoring", consumer="course-authoring")
    message = rpc(
        "tools/call", {"name": "propose_change", "arguments": arguments}, style="stateless"
    )
    async with aiohttp.ClientSession() as http:
        posted = asyncio.ensure_future(
            http.post(url, data=json.dumps(message), headers=stateless_headers(message))
        )
        held = await _held(stack, lambda p: p["callId"] not in known)
        posted.cancel()  # the client leaves: its connection closes
        await asyncio.gather(posted, return_exceptions=True)
    return await _held(stack, lambda p: p["callId"] == held["callId"] and p["requesterGone"])


async def _held(stack: Stack, wanted: Any) -> dict[str, Any]:
    for _ in range(200):
        reply = await stack.call("GET", "/v1/context/tools/pending", headers=APPROVAL)
        found = [p for p in reply.body["pending"] if wanted(p)]
        if found:
            entry: dict[str, Any] = found[0]
            return entry
        await asyncio.sleep(0.05)
    raise AssertionError("the call was never listed so")
