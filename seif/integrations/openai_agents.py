"""OpenAI Agents SDK tools of one seif turn: ``as_function_tools(turn) -> list[FunctionTool]``
(the extra ``seif[openai-agents]``).

Each ``FunctionTool`` carries the exact JSON schema the context disclosed, with
``strict_json_schema=False`` (the Agents SDK's strict mode would rewrite the schema, and the
model must see what the contract digest covers). Invoked by the Agents SDK, it executes
through the turn with the tool call's id (``ToolContext.tool_call_id``) and returns the text
of :func:`seif.receipt_text`: the output for a call that succeeded, and for any
other receipt its status, reason and what it means. Arguments that are not a JSON object are
told to the model as such, and nothing is executed.
"""

from __future__ import annotations

import json
from typing import Any

from seif.sdk.text import receipt_text
from seif.sdk.turns import Turn
from seif.sdk.types import ToolSchema

try:
    from agents import FunctionTool, RunContextWrapper
    from agents.tool_context import ToolContext
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "seif.integrations.openai_agents needs openai-agents: pip install 'seif[openai-agents]'"
    ) from e

from policy.json.strict import loads
from policy.json.value import thaw

__all__ = ["as_function_tools"]


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


def _tool(turn: Turn, schema: ToolSchema) -> FunctionTool:
    async def invoke(context: ToolContext[Any] | RunContextWrapper[Any], text: str) -> str:
        call_id = getattr(context, "tool_call_id", None)
        if not isinstance(call_id, str) or not call_id:
            raise ValueError(f"`{schema.name}` runs through seif and needs the tool call's id")
        arguments = _arguments(text)
        if isinstance(arguments, str):
            return arguments
        return receipt_text(await turn.execute(schema.name, call_id, arguments))

    return FunctionTool(
        name=schema.name,
        description=schema.description,
        params_json_schema=thaw(schema.parameters),
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )


def as_function_tools(turn: Turn) -> list[FunctionTool]:
    """One ``FunctionTool`` per disclosed tool of ``turn``, in the context's order."""
    return [_tool(turn, schema) for schema in turn.tools]
