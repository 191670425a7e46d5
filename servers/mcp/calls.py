"""``tools/call``: the runtime's one execute path, and the wait for a human's approval.

A call is what ``POST /v1/context/tools/execute`` would be for the same context, tool, call id
and arguments: the engine decides, the intent is durable before any I/O, a call id is
dispatched once. A call denied for approval is held (the approval server lists it with its
exact arguments); this request then waits, up to the approval wait, for the operator:

- approved: the call is executed again with that approval (one dispatch);
- rejected, or held past its approval window: ``REJECTED``, ``APPROVAL_EXPIRED``;
- the wait ran out first: ``APPROVAL_REQUIRED`` (the call stays held; calling again with the
  same ``io.seif/callId`` and arguments uses an approval granted meanwhile).

While it waits, a client that sent a ``progressToken`` is told every
:data:`PROGRESS_EVERY_S` seconds. Nothing here approves: an MCP client never can.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from servers.runtime.service import Runtime

PROGRESS_EVERY_S = 5.0
WAITED_FOR = frozenset({"APPROVAL_REQUIRED"})
"""The denial a call waits on: a first request (an MCP client sends no approval id)."""
Progress = Callable[[float, float, str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class CallRequest:
    context_ref: str
    tool: str
    call_id: str
    arguments: Any
    credential: str


async def call(
    runtime: Runtime, request: CallRequest, wait_s: float, progress: Progress
) -> dict[str, Any]:
    """The receipt of one call, after the approval wait when the call needed one."""
    receipt = await runtime.execute(_execute_body(request, None), request.credential)
    if receipt["status"] != "DENIED" or receipt.get("reason") not in WAITED_FOR:
        return receipt
    return await _approved_or_not(runtime, request, receipt, wait_s, progress)


def _execute_body(request: CallRequest, approval_id: str | None) -> Mapping[str, Any]:
    return {
        "contextRef": request.context_ref,
        "tool": request.tool,
        "callId": request.call_id,
        "arguments": request.arguments,
        "approvalId": approval_id,
    }


async def _approved_or_not(
    runtime: Runtime,
    request: CallRequest,
    denied: dict[str, Any],
    wait_s: float,
    progress: Progress,
) -> dict[str, Any]:
    key = (request.context_ref, request.call_id)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while True:
        woken = runtime.pending.waiter(key)  # before the status: no decision falls between
        try:
            state = await runtime.approval_status(*key, request.credential)
            if state["state"] == "APPROVED":
                body = _execute_body(request, state["approvalId"])
                return await runtime.execute(body, request.credential)
            if state["state"] in ("REJECTED", "EXPIRED"):
                reason = "REJECTED" if state["state"] == "REJECTED" else "APPROVAL_EXPIRED"
                return {**denied, "reason": reason}
            if state["state"] == "NONE":  # it ran meanwhile (another request of this call id)
                ran = await runtime.receipt_of(*key, request.credential)
                if ran is not None:
                    return ran
            left = deadline - loop.time()
            if left <= 0:
                return denied  # APPROVAL_REQUIRED: still held, approvable later
            await progress(wait_s - left, wait_s, "waiting for a human to approve this call")
            with contextlib.suppress(TimeoutError):  # woken, or time to say progress
                await asyncio.wait_for(woken.wait(), timeout=min(left, PROGRESS_EVERY_S))
        finally:
            runtime.pending.unwait(key, woken)
