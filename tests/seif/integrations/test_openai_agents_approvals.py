"""Native approvals with the OpenAI Agents SDK, against real servers on loopback (the runtime,
the synthetic executor and the approval server) and the Agents SDK's own ``Runner`` with a
scripted model: a write interrupts the run (``result.interruptions``) while seif holds it; the
approver decides in the approval server; ``apply_approvals`` reads the decision into the
``RunState``; ``Runner.run(agent, state)`` resumes and the write runs once, with the model's
call id, in this process or in a new one that resumes from the serialized state. A rejection
reaches the model as a refusal, and the SDK's own approval grants nothing."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from agents import Agent, Runner

from seif import Delivery, RuntimeClient, Turn
from seif.integrations.openai_agents import apply_approvals, as_function_tools
from tests.support.approval_harness import ApprovalStack, approval_stack, decide
from tests.support.paths import ROOT
from tests.support.runtime_harness import APP_TOKEN, PROPOSAL, READ_ARGS, run_async
from tests.support.scripted_models import RUN, ScriptedModel, answer, function_call, outputs

AUTHORING = {"objective": "authoring", "consumer": "course-authoring"}
T = TypeVar("T")


def _agent(turn: Turn, model: ScriptedModel) -> Agent[Any]:
    return Agent(name="author", instructions="help", tools=as_function_tools(turn), model=model)


def _note(text: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(text)["seif"]
    return found


async def _turn(a: ApprovalStack, handler: Callable[[Turn], Awaitable[T]]) -> Delivery[T]:
    async with RuntimeClient(a.runtime.runtime, APP_TOKEN) as sdk:
        return await sdk.run_agent_turn(AUTHORING, handler)


async def _dispatched(a: ApprovalStack) -> dict[str, int]:
    found: dict[str, int] = (await a.runtime.stats())["byCallId"]
    return found


def test_a_write_interrupts_the_run_and_runs_once_after_approval(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            [function_call("r1", "inspect_context", READ_ARGS)],
            [function_call("w1", "propose_change", PROPOSAL)],
            [answer("proposed")],
        ]
    )

    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:

            async def handler(turn: Turn) -> Any:
                agent = _agent(turn, model)
                result = await Runner.run(agent, "improve lesson 3", run_config=RUN)
                assert [(i.name, i.call_id) for i in result.interruptions] == [
                    ("propose_change", "w1")
                ]
                assert result.final_output is None and await _dispatched(a) == {"r1": 1}
                state = result.to_state()
                waiting = await apply_approvals(turn, state)  # undecided: still waiting
                assert [i.call_id for i in waiting] == ["w1"]
                await decide(a, "approve", "w1")
                assert await apply_approvals(turn, state, timeout_s=5) == []
                resumed = await Runner.run(agent, state, run_config=RUN)
                return resumed.final_output

            delivery = await _turn(a, handler)
            assert delivery.result == "proposed"
            assert [(r.call_id, r.status, r.reason) for r in delivery.receipts] == [
                ("r1", "SUCCEEDED", None),
                ("w1", "DENIED", "APPROVAL_REQUIRED"),  # held: what the approver saw
                ("w1", "SUCCEEDED", None),  # approved: the same call id, run once
            ]
            assert json.loads(outputs(model.inputs[2])["w1"])["status"] == "pending-review"
            assert await _dispatched(a) == {"r1": 1, "w1": 1}

    run_async(scenario())


async def _interrupted(a: ApprovalStack, saved: Path) -> str:
    """Run the agent until the write interrupts it, and keep what a restart needs: the
    context, the serialized run state, and the model's answer after the resume."""
    model = ScriptedModel([[function_call("w7", "propose_change", PROPOSAL)]])

    async def handler(turn: Turn) -> str:
        result = await Runner.run(_agent(turn, model), "improve lesson 3", run_config=RUN)
        assert [i.call_id for i in result.interruptions] == ["w7"]
        kept = {
            "context": turn.context.to_wire(),
            "state": result.to_state().to_string(),
            "script": ["proposed after a restart"],
        }
        saved.write_text(json.dumps(kept), encoding="utf-8")
        return turn.context.context_ref

    return (await _turn(a, handler)).result


async def _resume_in_a_new_process(a: ApprovalStack, saved: Path) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.support.agents_resume",
        str(saved),
        cwd=ROOT,
        env={
            "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": str(ROOT),
            "SEIF_URL": a.runtime.runtime,
            "SEIF_APP_TOKEN": APP_TOKEN,
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    found: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return found


def test_a_new_process_resumes_the_serialized_run_and_the_write_runs_once(
    tmp_path: Path,
) -> None:
    saved = tmp_path / "interrupted.json"

    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:
            context_ref = await _interrupted(a, saved)
            assert await _dispatched(a) == {}
            await decide(a, "approve", "w7")
            resumed = await _resume_in_a_new_process(a, saved)
            assert resumed["contextRef"] == context_ref  # the same context: not resolved again
            assert (resumed["final"], resumed["waiting"]) == ("proposed after a restart", [])
            assert resumed["receipts"] == [["w7", "SUCCEEDED", None]]
            assert json.loads(resumed["told"]["w7"])["status"] == "pending-review"
            assert await _dispatched(a) == {"w7": 1}
            again = await _resume_in_a_new_process(a, saved)  # the same state, resumed twice
            assert again["receipts"] == [["w7", "SUCCEEDED", None]]
            assert _note(again["told"]["w7"])["duplicate"] is True  # not run, not redelivered
            assert await _dispatched(a) == {"w7": 1}

    run_async(scenario())


def test_a_rejection_in_seif_is_a_refusal_the_model_reads(tmp_path: Path) -> None:
    model = ScriptedModel([[function_call("w2", "propose_change", PROPOSAL)], [answer("ok")]])

    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:

            async def handler(turn: Turn) -> Any:
                agent = _agent(turn, model)
                result = await Runner.run(agent, "improve lesson 3", run_config=RUN)
                state = result.to_state()
                await decide(a, "reject", "w2")
                assert await apply_approvals(turn, state, timeout_s=5) == []
                return (await Runner.run(agent, state, run_config=RUN)).final_output

            delivery = await _turn(a, handler)
            assert delivery.result == "ok"
            note = _note(outputs(model.inputs[1])["w2"])
            assert (note["status"], note["reason"]) == ("DENIED", "REJECTED")
            assert "rejected" in note["note"] and "do not make it again" in note["note"]
            assert await _dispatched(a) == {}

    run_async(scenario())


def test_the_sdks_own_approval_grants_nothing(tmp_path: Path) -> None:
    """The application approves the interruption in the Agents SDK while the call waits in
    seif (and once more after a rejection): the write never runs; the model is told why."""
    model = ScriptedModel(
        [
            [function_call("w3", "propose_change", PROPOSAL)],
            [function_call("w4", "propose_change", {**PROPOSAL, "kind": "correct"})],
            [answer("ok")],
        ]
    )

    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:

            async def handler(turn: Turn) -> Any:
                agent = _agent(turn, model)
                result = await Runner.run(agent, "improve lesson 3", run_config=RUN)
                state = result.to_state()
                for item in state.get_interruptions():
                    state.approve(item)  # not seif's approval
                result = await Runner.run(agent, state, run_config=RUN)
                state = result.to_state()
                await decide(a, "reject", "w4")
                for item in state.get_interruptions():
                    state.approve(item)
                return (await Runner.run(agent, state, run_config=RUN)).final_output

            delivery = await _turn(a, handler)
            assert delivery.result == "ok"
            waiting = _note(outputs(model.inputs[1])["w3"])
            assert (waiting["status"], waiting["reason"]) == ("DENIED", "APPROVAL_REQUIRED")
            assert _note(outputs(model.inputs[2])["w4"])["reason"] == "REJECTED"
            assert await _dispatched(a) == {}
            assert [i["callId"] for i in await a.pending()] == ["w3"]  # still on the desk

    run_async(scenario())


def test_a_call_seif_refuses_outright_is_told_not_interrupted(tmp_path: Path) -> None:
    """Asked whether to interrupt, seif refuses the write for its arguments: no interruption,
    the model reads each error's pointer and message, and nothing is executed twice."""
    bad = {"target": "course/x", "kind": "rewrite", "summary": "s", "extra": "v" * 50}
    model = ScriptedModel([[function_call("w5", "propose_change", bad)], [answer("fixed")]])

    async def scenario() -> None:
        async with approval_stack(tmp_path) as a:

            async def handler(turn: Turn) -> Any:
                result = await Runner.run(_agent(turn, model), "improve", run_config=RUN)
                assert result.interruptions == []
                return result.final_output

            delivery = await _turn(a, handler)
            assert delivery.result == "fixed"
            assert [(r.call_id, r.reason) for r in delivery.receipts] == [
                ("w5", "ARGUMENTS_INVALID")
            ]
            told = outputs(model.inputs[1])["w5"]
            assert _note(told)["errors"] == [
                {"pointer": "/kind", "message": "value is not one of the `enum` values"},
                {"pointer": "/extra", "message": "property `extra` is not allowed"},
            ]
            assert "rewrite" not in told and "v" * 50 not in told  # never the values
            assert await a.pending() == []

    run_async(scenario())
