"""Native approvals with LangGraph, against real servers on loopback (the runtime, the synthetic
executor and the approval server) and a real graph: a scripted LangChain chat model node and
LangGraph's prebuilt ``ToolNode`` over ``seif.integrations.langgraph.as_tools``, with a
checkpointer. A held write pauses the graph with ``interrupt()``; resumed by its call id before
the approver decided, it pauses again; approved in the approval server, it runs once with the
model's call id; rejected, the model reads a refusal and nothing runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from seif import RuntimeClient, Turn
from seif.integrations.langgraph import as_tools, held_calls, resume
from tests.support.approval_harness import approval_stack, decide
from tests.support.runtime_harness import APP_TOKEN, PROPOSAL, READ_ARGS, run_async

AUTHORING = {"objective": "authoring", "consumer": "course-authoring"}
CONFIG: Any = {"configurable": {"thread_id": "lesson-3"}}


def _graph(turn: Turn, answers: list[BaseMessage]) -> CompiledStateGraph[Any, Any, Any, Any]:
    model = GenericFakeChatModel(messages=iter(answers))

    async def think(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", think)
    builder.add_node("tools", ToolNode(as_tools(turn)))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=InMemorySaver())


def _calls(*calls: tuple[str, str, dict[str, Any]]) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[{"name": n, "args": a, "id": i, "type": "tool_call"} for i, n, a in calls],
    )


def _tool_messages(out: dict[str, Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}


def test_a_held_write_interrupts_the_graph_and_runs_once_when_resumed(tmp_path: Path) -> None:
    answers: list[BaseMessage] = [
        _calls(("r1", "inspect_context", READ_ARGS)),
        _calls(("w1", "propose_change", PROPOSAL)),
        AIMessage(content="proposed"),
    ]

    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:

            async def handler(turn: Turn) -> dict[str, Any]:
                graph = _graph(turn, answers)
                out = await graph.ainvoke({"messages": [("user", "improve lesson 3")]}, CONFIG)
                held = held_calls(out["__interrupt__"])
                assert list(held) == ["w1"]
                assert held["w1"].value["seif"]["name"] == "propose_change"
                early = await graph.ainvoke(resume(out["__interrupt__"]), CONFIG)
                assert list(held_calls(early["__interrupt__"])) == ["w1"]  # waits again
                await decide(a, "approve", "w1")
                assert (await turn.wait_for_approval("w1", timeout_s=5)).approved
                return await graph.ainvoke(resume(early["__interrupt__"]), CONFIG)

            async with RuntimeClient(a.runtime.runtime, APP_TOKEN) as sdk:
                delivery = await sdk.run_agent_turn(AUTHORING, handler)
            out = delivery.result
            assert "__interrupt__" not in out and out["messages"][-1].content == "proposed"
            written = _tool_messages(out)["w1"]
            assert written.status == "success"
            assert json.loads(str(written.content))["status"] == "pending-review"
            assert [(r.call_id, r.status, r.reason) for r in delivery.receipts] == [
                ("r1", "SUCCEEDED", None),
                ("w1", "DENIED", "APPROVAL_REQUIRED"),  # held once, never executed again
                ("w1", "SUCCEEDED", None),
            ]
            assert (await a.runtime.stats())["byCallId"] == {"r1": 1, "w1": 1}

    run_async(scenario())


def test_a_rejected_write_is_a_refusal_and_never_runs(tmp_path: Path) -> None:
    answers: list[BaseMessage] = [
        _calls(("w2", "propose_change", PROPOSAL)),
        AIMessage(content="understood"),
    ]

    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:

            async def handler(turn: Turn) -> dict[str, Any]:
                graph = _graph(turn, answers)
                out = await graph.ainvoke({"messages": [("user", "improve lesson 3")]}, CONFIG)
                await decide(a, "reject", "w2")
                assert (await turn.wait_for_approval("w2", timeout_s=5)).state == "REJECTED"
                return await graph.ainvoke(resume(out["__interrupt__"]), CONFIG)

            async with RuntimeClient(a.runtime.runtime, APP_TOKEN) as sdk:
                delivery = await sdk.run_agent_turn(AUTHORING, handler)
            out = delivery.result
            assert out["messages"][-1].content == "understood"
            refused = _tool_messages(out)["w2"]
            assert refused.status == "error"
            note = json.loads(str(refused.content))["seif"]
            assert (note["status"], note["reason"]) == ("DENIED", "REJECTED")
            assert [r.reason for r in delivery.receipts] == ["APPROVAL_REQUIRED"]
            assert (await a.runtime.stats())["byCallId"] == {}

    run_async(scenario())
