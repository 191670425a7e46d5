"""The SDK against real servers: the runtime (``prepare`` + ``create_app``) and the synthetic
executor, in process on loopback ports, driven by a scripted model through ``run_agent_turn``.
Nothing of the runtime is mocked; the executor's knobs make it fail or hang."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from policy.json.value import json_equal
from seif import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    Context,
    ContextDeliveryGateway,
    NotFoundError,
    PermissionDeniedError,
    ResolutionBlockedError,
    RuntimeClient,
    SeifRequestError,
    ToolBuildRefused,
    Turn,
    TurnRequest,
)
from seif.formats import from_openai_tool_call
from servers.http.app import RUNTIME
from servers.store.memory import MemoryTurns
from tests.support.runtime_harness import (
    APP_TOKEN,
    BRIEFING,
    PROPOSAL,
    READ_ARGS,
    READER_TOKEN,
    Stack,
    run_async,
    running_stack,
    write_briefing_build,
)

AUTHORING = {"objective": "authoring", "consumer": "course-authoring"}
SEARCH = {"query": "median outliers", "limit": 3}
HANG_MS = 2000
CLIENT_TIMEOUT_S = 1.0


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """What a Chat Completions model sends back."""
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


async def events(stack: Stack, context_ref: str, kind: str) -> list[dict[str, Any]]:
    reply = await stack.call("GET", f"/v1/traces/{context_ref}")
    assert reply.status == 200, reply
    return [e for e in reply.body["events"] if e["event"] == kind]


def turn_outcome(stack: Stack, turn_id: str) -> str | None:
    store = stack.runtime_app[RUNTIME].turns.store
    assert isinstance(store, MemoryTurns)
    return store.kept[turn_id].outcome


def test_a_scripted_model_through_run_agent_turn(tmp_path: Path) -> None:
    """Every receipt status in one turn, in call order: a read SUCCEEDED, its repeat a
    duplicate, a write DENIED for approval, FAILED from the executor, and UNKNOWN from a
    hanging executor (the client's timeout is shorter than the executor's delay). The UNKNOWN
    call is not retried: the executor saw it once, and it did run (its repeat, later, is a
    duplicate of a SUCCEEDED original). The disclosure is reported and the turn COMPLETED."""
    script = [
        tool_call("r1", "inspect_context", READ_ARGS),
        tool_call("r1", "inspect_context", READ_ARGS),
        tool_call("w1", "propose_change", PROPOSAL),
        tool_call("s1", "search_knowledge", SEARCH),
        tool_call("s2", "search_knowledge", {"query": "mean", "limit": 2}),
    ]

    async def scenario() -> None:
        async with running_stack(tmp_path) as s:
            knobs = {
                "s1": {"fail_code": "BACKEND_DOWN"},
                "s2": {"delay_ms": HANG_MS, "routes": frozenset({"execute"})},
            }

            async def handler(turn: Turn) -> str:
                assert [t.name for t in turn.tools] == list(turn.context.tool_names)
                for call in script:
                    name, call_id, arguments = from_openai_tool_call(call)
                    s.set_knobs("search-knowledge", **knobs.get(call_id, {}))
                    await turn.execute(name, call_id, arguments)
                return "answered"

            async with RuntimeClient(s.runtime, APP_TOKEN, timeout_s=CLIENT_TIMEOUT_S) as sdk:
                delivery = await sdk.run_agent_turn(AUTHORING, handler)
                hung_until = asyncio.get_running_loop().time() + HANG_MS / 1000

            assert delivery.result == "answered" and delivery.reporting_errors == ()
            got = [(r.call_id, r.status, r.reason, r.duplicate) for r in delivery.receipts]
            assert got == [
                ("r1", "SUCCEEDED", None, False),
                ("r1", "SUCCEEDED", None, True),
                ("w1", "DENIED", "APPROVAL_REQUIRED", False),
                ("s1", "FAILED", "EXECUTOR_ERROR", False),
                ("s2", "UNKNOWN", "CLIENT_TIMEOUT", False),
            ]
            read, duplicate, write, failed, unknown = delivery.receipts
            assert read.output_available and read.output["ref"] == READ_ARGS["ref"]
            assert not duplicate.output_available and duplicate.output is None
            assert write.needs_approval and write.decision is not None
            assert write.decision["explanation"]["tool"] == "propose-change"
            assert failed.executor_error == "BACKEND_DOWN"
            assert unknown.detail is not None and "1 s" in unknown.detail

            assert turn_outcome(s, delivery.turn_id) == "COMPLETED"
            reported = await events(s, delivery.context_ref, "REPORTED")
            names = ["inspect_context", "search_knowledge", "propose_change"]
            assert [e["tools"] for e in reported] == [names]
            assert delivery.reported == tuple(names)

            # the hanging call: dispatched once, never again by the client
            await asyncio.sleep(max(0.0, hung_until - asyncio.get_running_loop().time()) + 0.2)
            stats = await s.stats()
            assert stats["requests"]["search-knowledge"] == 2  # s1 and s2, each once
            assert stats["byCallId"]["s2"] == 1 and stats["byCallId"]["r1"] == 1
            assert "propose-change" not in stats["requests"]
            async with RuntimeClient(s.runtime, APP_TOKEN) as sdk:
                again = await sdk.execute(
                    delivery.context_ref, "search-knowledge", "s2", {"query": "mean", "limit": 2}
                )
            assert (again.status, again.duplicate) == ("SUCCEEDED", True)
            assert (await s.stats())["byCallId"]["s2"] == 1

    run_async(scenario())


def test_a_handler_that_raises_fails_the_turn_and_the_exception_propagates(
    tmp_path: Path,
) -> None:
    """The turn is completed FAILED and the handler's own exception is re-raised; the names
    the handler reported before it raised are reported (and no others)."""

    class ModelCrashed(Exception):
        pass

    async def scenario() -> None:
        async with running_stack(tmp_path) as s, RuntimeClient(s.runtime, APP_TOKEN) as sdk:
            seen: dict[str, Any] = {}

            async def handler(turn: Turn) -> None:
                seen["turn"], seen["context"] = turn.turn_id, turn.context.context_ref
                turn.report_disclosure(["inspect_context"])
                await turn.execute("inspect_context", "c1", READ_ARGS)
                raise ModelCrashed("the model went away")

            with pytest.raises(ModelCrashed, match="the model went away") as raised:
                await sdk.run_agent_turn(TurnRequest("authoring", consumer="x"), handler)
            assert not getattr(raised.value, "__notes__", None)  # reporting went fine
            assert turn_outcome(s, seen["turn"]) == "FAILED"
            reported = await events(s, seen["context"], "REPORTED")
            assert [e["tools"] for e in reported] == [["inspect_context"]]

            async def silent(turn: Turn) -> None:  # raises without saying what it bound
                seen["context"] = turn.context.context_ref
                raise ModelCrashed("again")

            with pytest.raises(ModelCrashed):
                await sdk.run_agent_turn(AUTHORING, silent)
            assert await events(s, seen["context"], "REPORTED") == []

    run_async(scenario())


def test_typed_errors_of_the_request_itself(tmp_path: Path) -> None:
    """401, 403, 404, 409 and 400 as typed exceptions with status, code, message and the body's
    extra fields; an unknown context at execute is a DENIED receipt, as the runtime says."""

    async def scenario() -> None:
        async with running_stack(tmp_path) as s, RuntimeClient(s.runtime, APP_TOKEN) as sdk:
            async with RuntimeClient(s.runtime, "not-a-token") as bad:
                with pytest.raises(AuthenticationError) as e401:
                    await bad.resolve("authoring")
            assert (e401.value.status, e401.value.code) == (401, "UNAUTHENTICATED")
            assert "not-a-token" not in str(e401.value)

            context = await sdk.resolve("authoring", consumer="course-authoring")
            async with RuntimeClient(s.runtime, READER_TOKEN) as reader:
                with pytest.raises(PermissionDeniedError) as e403:
                    await reader.execute(context.context_ref, "inspect-context", "c1", READ_ARGS)
            assert (e403.value.status, e403.value.code) == (403, "FORBIDDEN")
            assert "tools.execute" in e403.value.message

            with pytest.raises(NotFoundError) as e404:
                await sdk.report_disclosure("ctx_nope", ["inspect_context"])
            assert (e404.value.status, e404.value.code) == (404, "CONTEXT_UNKNOWN")
            with pytest.raises(NotFoundError, match="TURN_UNKNOWN"):
                await sdk.complete_turn("turn_nope", "COMPLETED")
            turn = await sdk.start_turn()
            await sdk.complete_turn(turn, "COMPLETED")
            with pytest.raises(ConflictError) as e409:
                await sdk.complete_turn(turn, "FAILED")
            assert e409.value.code == "TURN_COMPLETED"
            with pytest.raises(BadRequestError) as e400:
                await sdk.resolve("no-such-objective")
            assert e400.value.code == "OBJECTIVE_UNKNOWN"

            s.set_knobs("inspect-context", changed_digest=True)  # a required tool: blocked
            with pytest.raises(ResolutionBlockedError) as blocked:
                await sdk.resolve("learner", consumer="tutor-app")
            assert isinstance(blocked.value, ConflictError | SeifRequestError)
            assert blocked.value.code == "RESOLUTION_BLOCKED"
            assert [c["id"] for c in blocked.value.causes] == ["inspect-context"]
            assert blocked.value.causes == blocked.value.extra["causes"]
            s.set_knobs("inspect-context")

            unknown = await sdk.execute("ctx_nope", "inspect-context", "c1", READ_ARGS)
            assert (unknown.status, unknown.reason) == ("DENIED", "CONTEXT_UNKNOWN")
            with pytest.raises(ValueError, match="COMPLETED"):
                await sdk.complete_turn(turn, "DONE")  # refused before sending
            with pytest.raises(ValueError, match="list of function names"):
                await sdk.report_disclosure(context.context_ref, "inspect_context")

    run_async(scenario())


def test_execute_by_function_name(tmp_path: Path) -> None:
    """``execute_tool_by_name`` maps the model's name to the tool id through the context; a
    name the context does not disclose raises ValueError naming those it does, and nothing is
    sent. ``execute`` takes the function name too, on a context this client resolved."""

    async def scenario() -> None:
        async with running_stack(tmp_path) as s, RuntimeClient(s.runtime, APP_TOKEN) as sdk:
            learner = await sdk.resolve("learner", consumer="tutor-app")
            assert learner.tool_id("inspect_context") == "inspect-context"
            receipt = await sdk.execute_tool_by_name(learner, "inspect_context", "n1", READ_ARGS)
            assert (receipt.status, receipt.tool) == ("SUCCEEDED", "inspect-context")

            before = await s.call("GET", f"/v1/traces/{learner.context_ref}")
            with pytest.raises(ValueError) as refused:
                await sdk.execute_tool_by_name(learner, "propose_change", "n2", PROPOSAL)
            assert "`inspect_context`, `search_knowledge`" in str(refused.value)
            assert "propose_change" in str(refused.value)
            after = await s.call("GET", f"/v1/traces/{learner.context_ref}")
            assert after.body == before.body  # nothing reached the runtime

            by_name = await sdk.execute(learner.context_ref, "search_knowledge", "n3", SEARCH)
            assert (by_name.status, by_name.tool) == ("SUCCEEDED", "search-knowledge")
            by_id = await sdk.execute(learner.context_ref, "inspect-context", "n4", READ_ARGS)
            assert by_id.status == "SUCCEEDED"

    run_async(scenario())


def test_context_values_are_immutable_and_exact(tmp_path: Path) -> None:
    """A Context carries the resolve answer's values unchanged (messages in order, schemas
    equal to the wire's), frozen; expires_at is an aware UTC datetime."""

    async def scenario() -> None:
        async with running_stack(tmp_path) as s, RuntimeClient(s.runtime, APP_TOKEN) as sdk:
            context = await sdk.resolve("authoring", consumer="course-authoring")
            wire = await s.resolve()
            assert [(m.id, m.role, m.text) for m in context.messages] == [
                (m["id"], m["role"], m["text"]) for m in wire["messages"]
            ]
            schemas = [
                {"name": t.name, "description": t.description, "parameters": t.parameters}
                for t in context.tools
            ]
            assert json_equal(schemas, wire["tools"])  # arrays are tuples here, lists there
            assert json.loads(json.dumps(schemas)) == wire["tools"]
            assert [c.id for c in context.contracts] == [c["id"] for c in wire["contracts"]]
            assert context.expires_at.utcoffset() is not None
            assert context.tokens.total == wire["tokens"]["total"]
            with pytest.raises(AttributeError):
                context.objective = "learner"  # type: ignore[misc]  # frozen: the point
            with pytest.raises(TypeError):
                context.tools[0].parameters["type"] = "array"
            assert isinstance(hash(context), int)

    run_async(scenario())


def test_resolve_context_and_the_gateway(tmp_path: Path) -> None:
    """``resolve_context`` returns the messages of a context-only objective and refuses one that
    discloses tools; the gateway hands an existing composer every message in order and the
    exact schemas, wraps its tool calls in execute, and returns the Delivery."""
    write_briefing_build(tmp_path)

    async def scenario() -> None:
        async with running_stack(tmp_path) as s, RuntimeClient(s.runtime, APP_TOKEN) as sdk:
            messages = await sdk.resolve_context(BRIEFING, consumer="course-authoring")
            assert [(m.id, m.role) for m in messages] == [("briefing-role", "system")]
            with pytest.raises(ToolBuildRefused) as refused:
                await sdk.resolve_context("learner", consumer="tutor-app")
            assert refused.value.tools == ("inspect_context", "search_knowledge")
            assert refused.value.context_ref.startswith("ctx_")

            wire = await s.resolve("learner", "tutor-app")
            composed: dict[str, Any] = {}

            async def composer(messages: tuple[Any, ...], tools: tuple[Any, ...]) -> str:
                composed["messages"] = [(m.id, m.role, m.text) for m in messages]
                composed["tools"] = [
                    {"name": t.name, "description": t.description, "parameters": t.parameters}
                    for t in tools
                ]
                receipt = await tools[0]("g1", READ_ARGS)
                return f"{tools[0].name}: {receipt.status}"

            gateway = ContextDeliveryGateway(sdk)
            delivery = await gateway.forward_agent(
                {"objective": "learner", "consumer": "tutor-app"}, composer
            )
            assert delivery.result == "inspect_context: SUCCEEDED"
            assert composed["messages"] == [
                (m["id"], m["role"], m["text"]) for m in wire["messages"]
            ]
            assert json_equal(composed["tools"], wire["tools"])
            assert [r.call_id for r in delivery.receipts] == ["g1"]
            assert turn_outcome(s, delivery.turn_id) == "COMPLETED"
            with pytest.raises(ValueError, match="unknown keys"):
                await sdk.run_agent_turn({"objective": "learner", "traceid": "t"}, composer)

    run_async(scenario())


def test_run_agent_turn_resolve_failure_closes_the_turn(tmp_path: Path) -> None:
    """A resolve that fails inside run_agent_turn completes the turn FAILED and raises; the
    handler never runs."""

    async def scenario() -> None:
        async with running_stack(tmp_path) as s, RuntimeClient(s.runtime, APP_TOKEN) as sdk:
            ran: list[Context] = []

            async def handler(turn: Turn) -> None:
                ran.append(turn.context)

            with pytest.raises(BadRequestError, match="OBJECTIVE_UNKNOWN"):
                await sdk.run_agent_turn({"objective": "nope"}, handler)
            assert ran == []
            store = s.runtime_app[RUNTIME].turns.store
            assert isinstance(store, MemoryTurns)
            outcomes = [t.outcome for t in store.kept.values()]
            assert outcomes == ["FAILED"]

    run_async(scenario())
