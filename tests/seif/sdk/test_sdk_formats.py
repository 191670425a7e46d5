"""``seif.formats``: the provider tool formats pass the context's schemas through unchanged (the
very same objects), and the tool-call parsers read objects and dicts and name what is wrong
with malformed input. Checked against the provider libraries' own types where installed."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace
from typing import Any

import pytest

from seif import Context
from seif.formats import (
    from_anthropic_tool_use,
    from_openai_tool_call,
    to_anthropic_tools,
    to_openai_chat_tools,
    to_openai_responses_tools,
)
from tests.support.runtime_harness import reference_project


def reference_context() -> Context:
    """A Context read from a resolve answer holding every reference tool's schema."""
    tools = reference_project().tools
    return Context.from_wire(
        {
            "contextRef": "ctx_1",
            "build": "blake3:00",
            "objective": "authoring",
            "expiresAt": "2026-01-01T00:15:00.000Z",
            "messages": [{"id": "m", "role": "system", "text": "hello"}],
            "tools": [json.loads(json.dumps(t.model_schema)) for t in tools],
            "contracts": [],
            "omitted": [],
            "tokens": {"messages": 1, "tools": 2, "total": 3, "ceiling": 9, "estimated": True},
        }
    )


def test_tool_formats_pass_the_schemas_through_unchanged() -> None:
    context = reference_context()
    chat = to_openai_chat_tools(context.tools)
    responses = to_openai_responses_tools(context.tools)
    anthropic = to_anthropic_tools(context.tools)
    assert len(chat) == len(responses) == len(anthropic) == len(context.tools) == 3
    for tool, c, r, a in zip(context.tools, chat, responses, anthropic, strict=True):
        assert c == {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        assert r == {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        }
        assert a == {
            "name": tool.name,
            "description": tool.description,
            "input_schema": tool.parameters,
        }
        # the very object the context holds: nothing copied, reordered or rewritten
        assert c["function"]["parameters"] is tool.parameters
        assert r["parameters"] is tool.parameters and a["input_schema"] is tool.parameters
    # what goes on the wire to the provider is the schema the contract digest covers
    for ir_tool, c in zip(reference_project().tools, chat, strict=True):
        sent = json.loads(json.dumps(c))["function"]
        assert sent == json.loads(json.dumps(ir_tool.model_schema))

    plain = [{"name": "f", "description": "d", "parameters": {"type": "object"}}]
    assert to_anthropic_tools(plain)[0]["input_schema"] is plain[0]["parameters"]
    assert to_openai_chat_tools([]) == []


@pytest.mark.parametrize(
    ("tools", "says"),
    [
        ("inspect_context", "sequence of tool schemas"),
        ({"name": "f"}, "sequence of tool schemas"),
        ([{"description": "d", "parameters": {}}], "tools[0]: `name`"),
        ([{"name": "f", "parameters": {}}], "tools[0] (`f`): `description`"),
        ([{"name": "f", "description": "d", "parameters": "{}"}], "`parameters` is not"),
    ],
)
def test_tool_formats_refuse_malformed_schemas(tools: Any, says: str) -> None:
    for convert in (to_openai_chat_tools, to_openai_responses_tools, to_anthropic_tools):
        with pytest.raises(ValueError, match=re.escape(says)):
            convert(tools)


def test_openai_tool_calls_as_dicts_and_objects() -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "inspect_context", "arguments": '{"ref": "a", "depth": 1}'},
    }
    expected = ("inspect_context", "call_1", {"ref": "a", "depth": 1})
    assert from_openai_tool_call(call) == expected
    as_object = SimpleNamespace(
        id="call_1",
        type="function",
        function=SimpleNamespace(name="inspect_context", arguments='{"ref": "a", "depth": 1}'),
    )
    assert from_openai_tool_call(as_object) == expected
    responses_item = {
        "type": "function_call",
        "call_id": "call_1",
        "name": "inspect_context",
        "arguments": '{"ref": "a", "depth": 1}',
        "id": "fc_9",
    }
    assert from_openai_tool_call(responses_item) == expected


@pytest.mark.parametrize(
    ("call", "says"),
    [
        ({"type": "function", "function": {"name": "f", "arguments": "{}"}}, "`id`"),
        ({"id": "c", "type": "custom", "function": {}}, "`type` is 'custom'"),
        ({"id": "c", "type": "function"}, "no `function` object"),
        ({"id": "c", "function": {"arguments": "{}"}}, "`function.name`"),
        ({"id": "c", "function": {"name": "f", "arguments": {"a": 1}}}, "must be a JSON string"),
        ({"id": "c", "function": {"name": "f", "arguments": "{"}}, "not strict JSON"),
        ({"id": "c", "function": {"name": "f", "arguments": '{"a":1,"a":2}'}}, "more than once"),
        ({"id": "c", "function": {"name": "f", "arguments": '{"a": NaN}'}}, "not strict JSON"),
        ({"id": "c", "function": {"name": "f", "arguments": "[1]"}}, "not a JSON object"),
        ({"type": "function_call", "name": "f", "arguments": "{}"}, "`call_id`"),
    ],
)
def test_openai_tool_calls_malformed(call: Any, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        from_openai_tool_call(call)


def test_anthropic_tool_use_blocks() -> None:
    block = {"type": "tool_use", "id": "toolu_1", "name": "search_knowledge", "input": {"q": 1}}
    assert from_anthropic_tool_use(block) == ("search_knowledge", "toolu_1", {"q": 1})
    as_object = SimpleNamespace(type="tool_use", id="toolu_1", name="search_knowledge", input={})
    assert from_anthropic_tool_use(as_object) == ("search_knowledge", "toolu_1", {})
    for bad, says in [
        ({"type": "text", "text": "hi"}, "`type` is 'text'"),
        ({"id": "t", "name": "f", "input": {}}, "`type` is missing"),
        ({"type": "tool_use", "name": "f", "input": {}}, "`id`"),
        ({"type": "tool_use", "id": "t", "input": {}}, "`name`"),
        ({"type": "tool_use", "id": "t", "name": "f", "input": "{}"}, "`input`"),
    ]:
        with pytest.raises(ValueError, match=says):
            from_anthropic_tool_use(bad)


def test_against_the_openai_library_types() -> None:
    openai_types = pytest.importorskip("openai.types.chat")
    pydantic = pytest.importorskip("pydantic")
    context = reference_context()
    adapter = pydantic.TypeAdapter(list[openai_types.ChatCompletionToolParam])
    adapter.validate_python(json.loads(json.dumps(to_openai_chat_tools(context.tools))))
    call = openai_types.ChatCompletionMessageToolCall(
        id="call_1",
        type="function",
        function={"name": "inspect_context", "arguments": '{"ref": "a"}'},
    )
    assert from_openai_tool_call(call) == ("inspect_context", "call_1", {"ref": "a"})


def test_against_the_anthropic_library_types() -> None:
    anthropic_types = pytest.importorskip("anthropic.types")
    pydantic = pytest.importorskip("pydantic")
    context = reference_context()
    adapter = pydantic.TypeAdapter(list[anthropic_types.ToolParam])
    adapter.validate_python(json.loads(json.dumps(to_anthropic_tools(context.tools))))
    block = anthropic_types.ToolUseBlock(
        type="tool_use", id="toolu_1", name="inspect_context", input={"ref": "a"}
    )
    assert from_anthropic_tool_use(block) == ("inspect_context", "toolu_1", {"ref": "a"})
