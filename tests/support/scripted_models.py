"""Models that answer from a script, for the framework adapters' tests (no network): an OpenAI
Agents SDK ``Model`` whose responses are ``ResponseFunctionToolCall``s and messages, and the
constructors of those items. Importable by a test's subprocess too (``tests.support``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from agents import ModelResponse, RunConfig
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

RUN = RunConfig(tracing_disabled=True)
"""A run configuration that sends nothing anywhere."""


class ScriptedModel(Model):
    """An Agents SDK model that answers from a script: each response is the next list of
    output items; it records the tools it was offered and the inputs it was given."""

    def __init__(self, script: list[list[Any]]) -> None:
        self.script = list(script)
        self.offered: list[list[Any]] = []
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions, input, model_settings, tools, *a, **kw):  # type: ignore[no-untyped-def, override]  # the Agents SDK's signature, untyped here
        self.offered.append(tools)
        self.inputs.append(input)
        return ModelResponse(output=self.script.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *a: Any, **kw: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model does not stream")


def function_call(call_id: str, name: str, arguments: Any) -> ResponseFunctionToolCall:
    """A model's function call (``arguments`` a JSON value, or the text itself)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ResponseFunctionToolCall(
        arguments=text, call_id=call_id, name=name, type="function_call", id=f"fc_{call_id}"
    )


def answer(text: str) -> ResponseOutputMessage:
    """A model's final message."""
    return ResponseOutputMessage(
        id="msg_1",
        content=[ResponseOutputText(text=text, type="output_text", annotations=[])],
        role="assistant",
        status="completed",
        type="message",
    )


def outputs(model_input: Any) -> dict[str, str]:
    """The function call outputs a model was given, by call id."""
    return {
        item["call_id"]: item["output"]
        for item in model_input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }
