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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from policy import reasons as R
from servers.identity.principal import Authenticated
from servers.runtime.service import Runtime
from servers.wire import reasons
from servers.wire.answers import Receipt
from servers.wire.requests import ExecuteRequest

PROGRESS_EVERY_S = 5.0
WAITED_FOR = frozenset({R.APPROVAL_REQUIRED})
"""The denial a call waits on: a first request (an MCP client sends no approval id)."""
Progress = Callable[[float, float, str], Awaitable[None]]
Alive = Callable[[], bool]
"""Whether the client still waits for the request's answer."""


def always() -> bool:
    return True


@dataclass(frozen=True, slots=True)
class CallRequest:
    context_ref: str
    tool: str
    call_id: str
    arguments: Any
    credential: Authenticated
    own: bool = False
    """Whether the call id is this request's own (made up for it): no later request can name
    the call, so once its client leaves, nobody can take the call's answer."""

    def execute(self, approval_id: str | None = None) -> ExecuteRequest:
        """The request as ``POST /v1/context/tools/execute`` takes it."""
        return ExecuteRequest(
            context_ref=self.context_ref,
            tool=self.tool,
            call_id=self.call_id,
            arguments=self.arguments,
            approval_id=approval_id,
        )


async def call(
    runtime: Runtime,
    request: CallRequest,
    wait_s: float,
    progress: Progress,
    alive: Alive = always,
) -> Receipt:
    """The receipt of one call, after the approval wait when the call needed one. A call of a
    tool that needs approval uses an approval granted meanwhile (for a request that waited
    before) at once; ``alive`` says whether the client still waits for the answer: a request
    whose client left stops waiting, and never dispatches an approved call it would answer
    to nobody."""
    receipt = await _approved(runtime, request) if _needs_approval(runtime, request) else None
    if receipt is None:
        receipt = await runtime.dispatcher.execute(request.execute(), request.credential)
    if receipt["status"] != "DENIED" or receipt.get("reason") not in WAITED_FOR:
        return receipt
    return await _waited(runtime, request, receipt, _Wait(wait_s, progress, alive))


def _needs_approval(runtime: Runtime, request: CallRequest) -> bool:
    wanted = runtime.ir.approval_tools
    return request.tool in wanted or runtime.ir.tool_id_by_name.get(request.tool) in wanted


async def _approved(runtime: Runtime, request: CallRequest) -> Receipt | None:
    """The call executed with its unexpired approval, if it has one; else None."""
    state = await runtime.approvals.approval_status(
        request.context_ref, request.call_id, request.credential
    )
    if state["state"] != "APPROVED":
        return None
    return await runtime.dispatcher.execute(
        request.execute(state["approvalId"]), request.credential
    )


@dataclass(frozen=True, slots=True)
class _Wait:
    seconds: float
    progress: Progress
    alive: Alive


async def _waited(runtime: Runtime, request: CallRequest, denied: Receipt, wait: _Wait) -> Receipt:
    key = (request.context_ref, request.call_id)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait.seconds
    while wait.alive():
        woken = runtime.held.waiter(key)  # before the status: no decision falls between
        try:
            ended = await _decided(runtime, request, denied)
            if ended is not None:
                return ended
            left = deadline - loop.time()
            if left <= 0:
                return denied  # APPROVAL_REQUIRED: still held, approvable later
            await wait.progress(wait.seconds - left, wait.seconds, "waiting for a human to approve")
            with contextlib.suppress(TimeoutError):  # woken, or time to say progress
                every = min(PROGRESS_EVERY_S, runtime.held.poll_s or PROGRESS_EVERY_S)
                await asyncio.wait_for(woken.wait(), timeout=min(left, every))
        finally:
            runtime.held.unwait(key, woken)
    if request.own:  # and nobody can ask for it again: an approval of it would run nothing
        runtime.held.left(key)
    return denied  # nobody waits for the answer any more: nothing more is done


async def _decided(runtime: Runtime, request: CallRequest, denied: Receipt) -> Receipt | None:
    """The receipt that ends the wait, if the operator (or another request) ended it."""
    key = (request.context_ref, request.call_id)
    state = await runtime.approvals.approval_status(*key, request.credential)
    if state["state"] == "APPROVED":
        approved = request.execute(state["approvalId"])
        return await runtime.dispatcher.execute(approved, request.credential)
    if state["state"] in ("REJECTED", "EXPIRED"):
        reason = reasons.REJECTED if state["state"] == "REJECTED" else R.APPROVAL_EXPIRED
        return {**denied, "reason": reason}
    if state["state"] == "NONE":  # no longer held: it ran meanwhile, or was dropped
        ran = await runtime.dispatcher.receipt_of(*key, request.credential)
        if ran is not None:
            return ran
        again = await runtime.dispatcher.execute(request.execute(), request.credential)
        held = runtime.held.get(*key) is not None
        if again.get("reason") not in WAITED_FOR or not held:
            return again  # what the engine says now (a call limit used up, say)
    return None
