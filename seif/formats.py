"""Provider formats: the model-facing schemas of a context in each provider's tool format, and
the parsers of the tool calls a model sends back. Pure functions, no network.

Schemas are passed through unchanged: the ``parameters`` object of each result *is* the
context's (the same read-only object, not a copy), so what the model sees is exactly what the
contract digest covers. A ``tools`` argument is ``context.tools`` (or ``turn.tools``), or any
sequence of mappings with ``name``, ``description`` and ``parameters``.

The parsers accept the provider library's objects (attributes) or their dict form, and return
``(name, call_id, arguments)``: the function name the model used, the provider's call id (pass
it on as the call id, never invent one) and the arguments as a JSON object. Malformed input
raises ``ValueError`` naming what is wrong.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from policy.json.strict import JsonError, loads

__all__ = [
    "to_openai_chat_tools",
    "to_openai_responses_tools",
    "to_anthropic_tools",
    "from_openai_tool_call",
    "from_anthropic_tool_use",
]

_MISSING = object()


def _field(item: Any, name: str) -> Any:
    """``item[name]`` of a mapping or ``item.name`` of an object; ``_MISSING`` when absent."""
    if isinstance(item, Mapping):
        return item.get(name, _MISSING)
    return getattr(item, name, _MISSING)


def _schemas(tools: Any) -> list[tuple[str, str, Any]]:
    if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Iterable):
        raise ValueError("tools must be a sequence of tool schemas (e.g. context.tools)")
    out = []
    for index, tool in enumerate(tools):
        name = _field(tool, "name")
        description = _field(tool, "description")
        parameters = _field(tool, "parameters")
        if not isinstance(name, str) or not name:
            raise ValueError(f"tools[{index}]: `name` is missing or not a non-empty string")
        if not isinstance(description, str):
            raise ValueError(f"tools[{index}] (`{name[:64]}`): `description` is not a string")
        if not isinstance(parameters, Mapping):
            raise ValueError(f"tools[{index}] (`{name[:64]}`): `parameters` is not a JSON object")
        out.append((name, description, parameters))
    return out


def to_openai_chat_tools(tools: Iterable[Any]) -> list[dict[str, Any]]:
    """OpenAI Chat Completions ``tools``:
    ``[{"type": "function", "function": {"name", "description", "parameters"}}]``."""
    return [
        {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": parameters},
        }
        for name, description, parameters in _schemas(tools)
    ]


def to_openai_responses_tools(tools: Iterable[Any]) -> list[dict[str, Any]]:
    """OpenAI Responses ``tools``: ``[{"type": "function", "name", "description",
    "parameters"}]``."""
    return [
        {"type": "function", "name": name, "description": description, "parameters": parameters}
        for name, description, parameters in _schemas(tools)
    ]


def to_anthropic_tools(tools: Iterable[Any]) -> list[dict[str, Any]]:
    """Anthropic Messages ``tools``: ``[{"name", "description", "input_schema"}]``."""
    return [
        {"name": name, "description": description, "input_schema": parameters}
        for name, description, parameters in _schemas(tools)
    ]


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} is missing or not a non-empty string")
    return value


def _arguments(text: Any, what: str) -> dict[str, Any]:
    if not isinstance(text, str):
        raise ValueError(f"{what} must be a JSON string, not {type(text).__name__}")
    try:
        value = loads(text)
    except JsonError as exc:
        raise ValueError(f"{what} is not strict JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{what} is not a JSON object")
    return value


def from_openai_tool_call(call: Any) -> tuple[str, str, dict[str, Any]]:
    """A Chat Completions tool call (``{"id", "type": "function", "function": {"name",
    "arguments"}}``, ``arguments`` a JSON string) as ``(name, call_id, arguments)``. A
    Responses ``function_call`` item (``{"type": "function_call", "call_id", "name",
    "arguments"}``) is read too."""
    kind = _field(call, "type")
    if kind == "function_call":  # the Responses API's output item
        name = _text(_field(call, "name"), "the function call's `name`")
        call_id = _text(_field(call, "call_id"), "the function call's `call_id`")
        return (
            name,
            call_id,
            _arguments(_field(call, "arguments"), "the function call's `arguments`"),
        )
    if kind is not _MISSING and kind != "function":
        raise ValueError(f"the tool call's `type` is {str(kind)[:32]!r}, not 'function'")
    call_id = _text(_field(call, "id"), "the tool call's `id`")
    function = _field(call, "function")
    if function is _MISSING or function is None or isinstance(function, str):
        raise ValueError("the tool call has no `function` object")
    name = _text(_field(function, "name"), "the tool call's `function.name`")
    return name, call_id, _arguments(_field(function, "arguments"), "`function.arguments`")


def from_anthropic_tool_use(block: Any) -> tuple[str, str, dict[str, Any]]:
    """An Anthropic ``tool_use`` content block (``{"type": "tool_use", "id", "name",
    "input"}``) as ``(name, call_id, arguments)``."""
    kind = _field(block, "type")
    if kind != "tool_use":
        shown = "missing" if kind is _MISSING else repr(str(kind)[:32])
        raise ValueError(f"the content block's `type` is {shown}, not 'tool_use'")
    call_id = _text(_field(block, "id"), "the tool_use block's `id`")
    name = _text(_field(block, "name"), "the tool_use block's `name`")
    arguments = _field(block, "input")
    if not isinstance(arguments, Mapping):
        raise ValueError("the tool_use block's `input` is missing or not a JSON object")
    return name, call_id, dict(arguments)
