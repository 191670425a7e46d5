"""OpenAI Agents SDK tools of one seif turn: ``as_function_tools(turn) -> list[FunctionTool]``
(the extra ``seif[openai-agents]``), and ``apply_approvals(turn, state)`` for the calls the run
was interrupted by.

Each ``FunctionTool`` carries the exact JSON schema the context disclosed, with
``strict_json_schema=False`` (the Agents SDK's strict mode would rewrite the schema, and the
model must see what the contract digest covers). Invoked by the Agents SDK, it executes
through the turn with the tool call's id (``ToolContext.tool_call_id``: the model's, kept in a
serialized ``RunState``) and returns the text of :func:`seif.receipt_text`. Arguments that are
not a JSON object are told to the model as such, and nothing is executed.

A tool whose contract requires an approval has ``needs_approval``: the Agents SDK asks before
it runs the call, and the tool asks seif, executing the call without an approval, which seif
holds for the approvers (``DENIED`` ``APPROVAL_REQUIRED``): the run is interrupted
(``result.interruptions``). :func:`apply_approvals` reads seif's decisions into the run state
(``state.approve`` for an approved call, ``state.reject`` with seif's text for a rejected or
expired one); ``Runner.run(agent, state)`` then resumes, and the approved call executes with
its approval id and the same call id: it runs once. Any other answer of seif at that first ask
(an invalid call, a limit...) is not an interruption: the tool returns it to the model.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from seif.integrations.approvals import (
    REFUSED,
    execute_approved,
    gated,
    hold,
    made,
)
from seif.sdk.text import REJECTED, receipt_text
from seif.sdk.turns import Turn
from seif.sdk.types import Receipt, ToolSchema

try:
    from agents import FunctionTool, RunContextWrapper, RunState, ToolApprovalItem
    from agents.tool_context import ToolContext
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "seif.integrations.openai_agents needs openai-agents: pip install 'seif[openai-agents]'"
    ) from e

from policy.json.strict import loads
from policy.json.value import thaw

__all__ = ["apply_approvals", "as_function_tools"]

EXPIRED = "the approval ran out before the run resumed; nothing was sent"


def _arguments(text: str) -> dict[str, Any] | str:
    """The call's arguments, or the text telling the model why they are not usable."""
    try:  # the one strict boundary: no NaN, no duplicate keys, no lone surrogates
        parsed = loads(text) if text else {}
    except ValueError:
        return json.dumps({"seif": {"status": "NOT_SENT", "note": "arguments are not JSON"}})
    if not isinstance(parsed, dict):
        return json.dumps(
            {"seif": {"status": "NOT_SENT", "note": "arguments must be a JSON object"}}
        )
    return parsed


def _call_id(context: ToolContext[Any] | RunContextWrapper[Any], name: str) -> str:
    call_id = getattr(context, "tool_call_id", None)
    if not isinstance(call_id, str) or not call_id:
        raise ValueError(f"`{name}` runs through seif and needs the tool call's id")
    return call_id


def _tool(turn: Turn, schema: ToolSchema, asked: dict[str, Receipt]) -> FunctionTool:
    name = schema.name
    needs = gated(turn, name)

    async def invoke(context: ToolContext[Any] | RunContextWrapper[Any], text: str) -> str:
        call_id = _call_id(context, name)
        known = asked.pop(call_id, None) if needs else None
        if known is not None:  # seif answered when asked whether to interrupt
            return receipt_text(known)
        arguments = _arguments(text)
        if isinstance(arguments, str):
            return arguments
        if needs:
            return receipt_text(await execute_approved(turn, name, call_id, arguments))
        return receipt_text(await turn.execute(name, call_id, arguments))

    async def needs_approval(
        context: RunContextWrapper[Any], arguments: dict[str, Any], call_id: str
    ) -> bool:
        """Interrupt the run while seif holds the call for an approver."""
        receipt = await hold(turn, name, call_id, arguments)
        if receipt is None:  # approved in seif already: run it
            return False
        if receipt.needs_approval:
            return True
        asked[call_id] = receipt  # refused otherwise: the tool tells the model
        return False

    return FunctionTool(
        name=name,
        description=schema.description,
        params_json_schema=thaw(schema.parameters),
        on_invoke_tool=invoke,
        strict_json_schema=False,
        needs_approval=needs_approval if needs else False,
    )


def as_function_tools(turn: Turn) -> list[FunctionTool]:
    """One ``FunctionTool`` per disclosed tool of ``turn``, in the context's order."""
    asked: dict[str, Receipt] = {}
    return [_tool(turn, schema, asked) for schema in turn.tools]


async def apply_approvals(
    turn: Turn, state: RunState[Any, Any], *, timeout_s: float = 0.0
) -> list[ToolApprovalItem]:
    """Read seif's decision on each interruption of ``state`` that is a call of ``turn``'s tools
    (waiting up to ``timeout_s`` for the undecided, all at once) and record it in ``state``:
    approved in seif (or not held there, so that the tool tells the model what seif says),
    ``state.approve``; rejected or expired, ``state.reject`` with seif's text for the model.
    Returns the interruptions still waiting for an approver (none: resume with
    ``Runner.run(agent, state)``; others are interrupted again if resumed now)."""
    names = {t.name for t in turn.tools}
    ours = [
        item
        for item in state.get_interruptions()
        if item.name in names and isinstance(item.call_id, str) and item.call_id
    ]
    statuses = await asyncio.gather(
        *(turn.wait_for_approval(str(item.call_id), timeout_s=timeout_s) for item in ours)
    )
    waiting: list[ToolApprovalItem] = []
    for item, status in zip(ours, statuses, strict=True):
        if status.approved or status.state == "NONE":
            state.approve(item)
        elif status.state in ("REJECTED", "EXPIRED"):
            reason, detail = (
                (REJECTED, REFUSED) if status.state == "REJECTED" else ("APPROVAL_EXPIRED", EXPIRED)
            )
            refusal = made(turn, str(item.name), status.call_id, reason, detail)
            state.reject(item, rejection_message=receipt_text(refusal))
        else:
            waiting.append(item)
    return waiting
