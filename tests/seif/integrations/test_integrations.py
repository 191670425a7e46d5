"""The native integrations against real servers (the runtime and the synthetic executor on
loopback), each driven by its own library's objects: LangChain ``ToolCall``s from a scripted
``AIMessage`` through ``StructuredTool.ainvoke``/``invoke``, and the OpenAI Agents SDK's own
``Runner`` with a scripted ``Model`` whose responses are ``ResponseFunctionToolCall``s. Every
call runs through the turn: its receipt is in the delivery, and a receipt that is not
``SUCCEEDED`` reaches the model as what it is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, FunctionTool, Runner
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from policy.json.value import thaw
from seif import Receipt, RuntimeClient, SyncRuntimeClient, SyncTurn, Turn
from seif.integrations.langchain import as_tools
from seif.integrations.openai_agents import apply_approvals, as_function_tools
from tests.support.runtime_harness import (
    APP_TOKEN,
    PROPOSAL,
    READ_ARGS,
    Stack,
    run_async,
    running_stack,
)
from tests.support.scripted_models import RUN, ScriptedModel, answer, outputs
from tests.support.scripted_models import function_call as _call

AUTHORING = {"objective": "authoring", "consumer": "course-authoring"}
SEARCH = {"query": "median outliers", "limit": 3}


def _seif_note(content: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(content)["seif"]
    return found


def _model_turn() -> AIMessage:
    """What a LangChain chat model answers: four tool calls, the second a repeat."""
    return AIMessage(
        content="",
        tool_calls=[
            {"name": "inspect_context", "args": READ_ARGS, "id": "r1", "type": "tool_call"},
            {"name": "inspect_context", "args": READ_ARGS, "id": "r1", "type": "tool_call"},
            {"name": "propose_change", "args": PROPOSAL, "id": "w1", "type": "tool_call"},
            {"name": "search_knowledge", "args": SEARCH, "id": "s1", "type": "tool_call"},
        ],
    )


def _check_langchain_messages(messages: list[ToolMessage]) -> None:
    read, again, write, failed = messages
    assert (read.status, read.tool_call_id, read.name) == ("success", "r1", "inspect_context")
    assert json.loads(str(read.content))["ref"] == READ_ARGS["ref"]
    assert isinstance(read.artifact, Receipt) and read.artifact.succeeded
    assert again.status == "success" and _seif_note(str(again.content))["duplicate"] is True
    assert write.status == "error"
    note = _seif_note(str(write.content))
    assert (note["status"], note["reason"]) == ("DENIED", "APPROVAL_REQUIRED")
    assert "approval" in note["note"]
    assert failed.status == "error" and _seif_note(str(failed.content))["status"] == "FAILED"


def test_langchain_tools_carry_the_exact_schemas_and_run_through_the_turn(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path) as s:
            s.set_knobs("search-knowledge", fail_code="BACKEND_DOWN")

            async def handler(turn: Turn) -> list[ToolMessage]:
                tools = {t.name: t for t in as_tools(turn)}
                assert list(tools) == [t.name for t in turn.tools]
                for schema in turn.tools:  # what LangChain binds to a model: the exact schema
                    bound = convert_to_openai_tool(tools[schema.name])["function"]
                    assert bound["parameters"] == thaw(schema.parameters)
                    assert bound["description"] == schema.description
                with pytest.raises(ValueError, match="tool call id"):
                    await tools["inspect_context"].ainvoke(READ_ARGS)  # no id: never invented
                return [await tools[c["name"]].ainvoke(c) for c in _model_turn().tool_calls]

            async with RuntimeClient(s.runtime, APP_TOKEN) as sdk:
                delivery = await sdk.run_agent_turn(AUTHORING, handler)
            _check_langchain_messages(delivery.result)
            assert [(r.call_id, r.status) for r in delivery.receipts] == [
                ("r1", "SUCCEEDED"),
                ("r1", "SUCCEEDED"),
                ("w1", "DENIED"),
                ("s1", "FAILED"),
            ]
            stats = await s.stats()  # each call dispatched once; the repeat and the write not
            assert stats["byCallId"] == {"r1": 1} and stats["requests"]["search-knowledge"] == 1
            assert "propose-change" not in stats["requests"]

    run_async(scenario())


def test_langchain_tools_of_a_blocking_turn(tmp_path: Path) -> None:
    async def start() -> None:
        async with running_stack(tmp_path) as s:
            s.set_knobs("search-knowledge", fail_code="BACKEND_DOWN")
            await _blocking(s)

    run_async(start())


async def _blocking(s: Stack) -> None:
    import asyncio

    def in_thread() -> list[ToolMessage]:
        def handler(turn: SyncTurn) -> list[ToolMessage]:
            tools = {t.name: t for t in as_tools(turn)}
            return [tools[c["name"]].invoke(c) for c in _model_turn().tool_calls]

        with SyncRuntimeClient(s.runtime, APP_TOKEN) as sdk:
            delivery = sdk.run_agent_turn(AUTHORING, handler)
        assert len(delivery.receipts) == 4 and delivery.reporting_errors == ()
        return delivery.result

    _check_langchain_messages(await asyncio.to_thread(in_thread))


def test_openai_agents_function_tools_run_through_the_turn(tmp_path: Path) -> None:
    """A read runs, arguments that are not an object are told as such, and the write (its
    contract requires an approval) interrupts the run: approved with the runtime's approve
    route, it runs once when the run resumes."""
    model = ScriptedModel(
        [
            [
                _call("r1", "inspect_context", READ_ARGS),
                _call("w1", "propose_change", PROPOSAL),
                _call("b1", "inspect_context", "[1, 2]"),
            ],
            [answer("done")],
        ]
    )

    async def scenario() -> None:
        async with running_stack(tmp_path) as s:

            async def handler(turn: Turn) -> str:
                tools = as_function_tools(turn)
                for tool, schema in zip(tools, turn.tools, strict=True):
                    assert isinstance(tool, FunctionTool) and tool.name == schema.name
                    assert tool.params_json_schema == thaw(schema.parameters)
                    assert tool.strict_json_schema is False
                    assert (tool.needs_approval is False) is (schema.name != "propose_change")
                agent = Agent(name="author", instructions="help", tools=tools, model=model)
                result = await Runner.run(agent, "check the lesson", run_config=RUN)
                assert [i.call_id for i in result.interruptions] == ["w1"]
                ref = turn.context.context_ref
                await s.approval_id(ref, "propose-change", "w1", PROPOSAL)
                state = result.to_state()
                assert await apply_approvals(turn, state) == []
                return str((await Runner.run(agent, state, run_config=RUN)).final_output)

            async with RuntimeClient(s.runtime, APP_TOKEN) as sdk:
                delivery = await sdk.run_agent_turn(AUTHORING, handler)
            assert delivery.result == "done"
            got = [(r.call_id, r.status, r.reason) for r in delivery.receipts]
            assert got[-1] == ("w1", "SUCCEEDED", None)  # approved, the run resumed: it ran
            assert sorted(got[:-1]) == [  # the first step ran together; its order is the SDK's
                ("r1", "SUCCEEDED", None),
                ("w1", "DENIED", "APPROVAL_REQUIRED"),  # held for the approver
            ]  # b1's arguments were not an object: nothing was sent
            offered = [t.name for t in model.offered[0]]
            assert offered == ["inspect_context", "search_knowledge", "propose_change"]
            told = outputs(model.inputs[1])
            assert json.loads(told["r1"])["ref"] == READ_ARGS["ref"]
            assert json.loads(told["w1"])["status"] == "pending-review"
            assert _seif_note(told["b1"])["status"] == "NOT_SENT"
            assert (await s.stats())["byCallId"] == {"r1": 1, "w1": 1}

    run_async(scenario())
