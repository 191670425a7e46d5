"""LangChain tools of one seif turn: ``as_tools(turn) -> list[StructuredTool]`` (the extra
``seif[langchain]``, ``langchain-core``).

Each tool's ``args_schema`` is the exact JSON schema the context disclosed (LangChain binds it
to a model as it is). Invoked with a model's ``ToolCall`` (``tool.ainvoke(call)``, or
``invoke`` for a blocking turn), it executes through the turn with LangChain's
``tool_call_id`` and returns a ``ToolMessage``: its ``artifact`` is the :class:`~seif.Receipt`,
its ``content`` the text of :func:`seif.receipt_text`, and its ``status``
``"error"`` for every receipt that is not ``SUCCEEDED``. A call without a tool call id is a
``ValueError`` (seif never invents a call id: a retry must reuse the model's).
"""

from __future__ import annotations

from typing import Any

from seif.sdk.sync import SyncTurn
from seif.sdk.text import receipt_text
from seif.sdk.turns import Turn
from seif.sdk.types import Receipt, ToolSchema

try:
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import StructuredTool
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "seif.integrations.langchain needs langchain-core: pip install 'seif[langchain]'"
    ) from e

from policy.json.value import thaw

__all__ = ["SeifTool", "as_tools", "tool_message"]


class SeifTool(StructuredTool):
    """A ``StructuredTool`` whose arguments reach seif whole, with the tool call's id."""

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        if not isinstance(tool_input, dict):
            raise ValueError(f"`{self.name}` takes a JSON object of arguments, not a string")
        if not tool_call_id:
            raise ValueError(
                f"`{self.name}` runs through seif and needs the model's tool call id: invoke it"
                " with a ToolCall ({'name', 'args', 'id', 'type': 'tool_call'})"
            )
        return (), {"arguments": dict(tool_input), "call_id": tool_call_id}


def tool_message(schema: ToolSchema, call_id: str, receipt: Receipt) -> ToolMessage:
    """The ``ToolMessage`` of ``receipt``: its text, the receipt as ``artifact``, and
    ``status`` ``"error"`` unless it is ``SUCCEEDED``."""
    return ToolMessage(
        content=receipt_text(receipt),
        tool_call_id=call_id,
        name=schema.name,
        artifact=receipt,
        status="success" if receipt.succeeded else "error",
    )


def _tool(turn: Turn | SyncTurn, schema: ToolSchema) -> SeifTool:
    common: dict[str, Any] = {
        "name": schema.name,
        "description": schema.description,
        "args_schema": thaw(schema.parameters),
    }
    if isinstance(turn, SyncTurn):

        def run(arguments: dict[str, Any], call_id: str) -> ToolMessage:
            return tool_message(schema, call_id, turn.execute(schema.name, call_id, arguments))

        return SeifTool(func=run, **common)

    async def arun(arguments: dict[str, Any], call_id: str) -> ToolMessage:
        return tool_message(schema, call_id, await turn.execute(schema.name, call_id, arguments))

    return SeifTool(coroutine=arun, **common)


def as_tools(turn: Turn | SyncTurn) -> list[StructuredTool]:
    """One ``StructuredTool`` per disclosed tool of ``turn``, in the context's order."""
    return [_tool(turn, schema) for schema in turn.tools]
