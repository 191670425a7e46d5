"""LangGraph: a call seif holds for a human approval pauses the graph with ``interrupt()``, and
``Command(resume=...)`` resumes it by its call id (the extra ``seif[langgraph]``).

- ``as_tools(turn)``: the LangChain tools of :mod:`seif.integrations.langchain` (the exact
  schemas, the model's tool call id), for a graph's ``ToolNode``, with one difference: a call
  held for an approval (``DENIED`` ``APPROVAL_REQUIRED``) calls ``interrupt(value)``, ``value``
  being ``{"seif": {"contextRef", "callId", "tool", "name", "reason"}}``. The graph stops there
  (its checkpointer keeps it); the approver decides in seif.
- Resumed (``graph.ainvoke(resume(interrupts), config)``), LangGraph runs the tool again from
  its start: it asks seif for the call's approval and executes it once with the approval's id
  and the same call id; a rejection is a refusal the model reads; a call still waiting pauses
  the graph again. The resume value grants nothing: seif decides.
- ``held_calls(interrupts)``: the call ids of seif's interrupts (``result["__interrupt__"]``),
  to wait for (``turn.wait_for_approval(call_id, timeout_s=...)``); ``resume(interrupts)``: the
  ``Command`` that resumes each of them by its call id.

A tool whose contract requires an approval asks seif first (``approval_status``), so a resume
never executes it without its approval; a tool that needs one only by a condition of the policy
is executed once more without it on a resume (seif answers the same) before asking.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from seif.integrations.approvals import execute_approved, gated, held_value
from seif.integrations.langchain import SeifTool, tool_message
from seif.sdk.turns import Turn
from seif.sdk.types import Receipt, ToolSchema

try:
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import StructuredTool
    from langgraph.types import Command, Interrupt, interrupt
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "seif.integrations.langgraph needs langgraph: pip install 'seif[langgraph]'"
    ) from e

from policy.json.value import thaw

__all__ = ["as_tools", "execute_or_interrupt", "held_calls", "resume"]


async def execute_or_interrupt(turn: Turn, name: str, call_id: str, arguments: Any) -> Receipt:
    """Execute the call through ``turn``; while seif holds it for an approval, ``interrupt()``
    the graph (inside a LangGraph node or tool) and, once resumed, execute it with seif's
    approval: the receipt of the call that ran, or of seif's refusal."""
    if gated(turn, name):
        receipt = await execute_approved(turn, name, call_id, arguments)
    else:
        receipt = await turn.execute(name, call_id, arguments)
    while receipt.needs_approval:
        interrupt(held_value(turn, name, receipt))  # pauses; returns once resumed
        receipt = await execute_approved(turn, name, call_id, arguments)
    return receipt


def _tool(turn: Turn, schema: ToolSchema) -> SeifTool:
    async def arun(arguments: dict[str, Any], call_id: str) -> ToolMessage:
        receipt = await execute_or_interrupt(turn, schema.name, call_id, arguments)
        return tool_message(schema, call_id, receipt)

    return SeifTool(
        name=schema.name,
        description=schema.description,
        args_schema=thaw(schema.parameters),
        coroutine=arun,
    )


def as_tools(turn: Turn) -> list[StructuredTool]:
    """One ``StructuredTool`` per disclosed tool of ``turn``, in the context's order."""
    return [_tool(turn, schema) for schema in turn.tools]


def _call_id(item: Interrupt) -> str | None:
    value = item.value
    seif = value.get("seif") if isinstance(value, Mapping) else None
    call_id = seif.get("callId") if isinstance(seif, Mapping) else None
    return call_id if isinstance(call_id, str) else None


def held_calls(interrupts: Iterable[Interrupt]) -> dict[str, Interrupt]:
    """seif's interrupts among ``interrupts``, by the call id they hold."""
    found: dict[str, Interrupt] = {}
    for item in interrupts:
        call_id = _call_id(item)
        if call_id is not None:
            found[call_id] = item
    return found


def resume(interrupts: Iterable[Interrupt]) -> Command[Any]:
    """The ``Command`` resuming each of seif's interrupts with its call id (the others are not
    resumed): the tools then ask seif what was decided."""
    return Command(resume={item.id: call_id for call_id, item in held_calls(interrupts).items()})
