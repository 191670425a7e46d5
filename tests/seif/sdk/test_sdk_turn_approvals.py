"""A turn's approvals and a turn on a context resolved earlier, against a real runtime and the
synthetic executor on loopback: ``turn.wait_for_approval`` (async and blocking) reads what the
operator decided; ``Context.to_wire`` keeps a context as JSON and ``resume_agent_turn`` runs a
new turn on it without resolving again, where the approved call runs once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from seif import Context, RuntimeClient, SyncRuntimeClient, SyncTurn, Turn
from tests.support.runtime_harness import (
    APP_TOKEN,
    APPROVAL,
    PROPOSAL,
    Stack,
    run_async,
    running_stack,
)

AUTHORING = {"objective": "authoring", "consumer": "course-authoring"}


async def _approve_soon(s: Stack, context_ref: str, call_id: str) -> None:
    await asyncio.sleep(0.3)
    await s.approval_id(context_ref, "propose-change", call_id, PROPOSAL)


def test_turn_wait_for_approval_then_resume_on_the_kept_context(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path) as s, RuntimeClient(s.runtime, APP_TOKEN) as sdk:

            async def first(turn: Turn) -> str:
                held = await turn.execute("propose_change", "w1", PROPOSAL)
                assert held.needs_approval
                assert (await turn.approval_status("w1")).state == "PENDING"
                waited = await turn.wait_for_approval("w1", timeout_s=0.2, interval_s=0.05)
                assert waited.state == "PENDING"  # the time ran out
                return json.dumps(turn.context.to_wire())

            delivery = await sdk.run_agent_turn(AUTHORING, first)
            kept = Context.from_wire(json.loads(delivery.result))  # as another process would
            approving = asyncio.create_task(_approve_soon(s, kept.context_ref, "w1"))

            async def second(turn: Turn) -> str:
                assert turn.context == kept and turn.turn_id != delivery.turn_id
                status = await turn.wait_for_approval("w1", timeout_s=10, interval_s=0.05)
                assert status.approved and status.approval_id is not None
                ran = await turn.execute(
                    "propose_change", "w1", PROPOSAL, approval_id=status.approval_id
                )
                return ran.status

            resumed = await sdk.resume_agent_turn(kept, second)
            await approving
            assert resumed.result == "SUCCEEDED" and resumed.context_ref == kept.context_ref
            assert resumed.reported == kept.tool_names and resumed.reporting_errors == ()
            assert (await s.stats())["byCallId"] == {"w1": 1}
            trace = await s.call("GET", f"/v1/traces/{kept.context_ref}")
            kinds = [e["event"] for e in trace.body["events"]]
            assert kinds.count("DISCLOSED") == 1  # resumed without resolving again

    run_async(scenario())


def test_a_kept_context_reads_back_equal(tmp_path: Path) -> None:
    async def scenario() -> Context:
        async with running_stack(tmp_path) as s, RuntimeClient(s.runtime, APP_TOKEN) as sdk:
            return await sdk.resolve(**AUTHORING)

    context = run_async(scenario())
    wire = json.loads(json.dumps(context.to_wire()))
    assert Context.from_wire(wire) == context
    assert Context.from_wire(wire).to_wire() == wire


def test_a_blocking_turn_waits_for_approval(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path) as s:

            def in_thread() -> str:
                def handler(turn: SyncTurn) -> str:
                    assert turn.execute("propose_change", "w2", PROPOSAL).needs_approval
                    assert turn.approval_status("w2").state == "PENDING"
                    return turn.wait_for_approval("w2", timeout_s=5, interval_s=0.05).state

                with SyncRuntimeClient(s.runtime, APP_TOKEN) as sdk:
                    return sdk.run_agent_turn(AUTHORING, handler).result

            waiting = asyncio.create_task(asyncio.to_thread(in_thread))
            await asyncio.sleep(0.3)
            ref = await _only_pending(s)
            await s.approval_id(ref, "propose-change", "w2", PROPOSAL)
            assert await waiting == "APPROVED"

    run_async(scenario())


async def _only_pending(s: Stack) -> str:
    """The context of the one call held for approval (the runtime's pending list)."""
    for _ in range(50):
        reply = await s.call("GET", "/v1/context/tools/pending", headers=APPROVAL)
        if reply.status == 200 and reply.body["pending"]:
            (item,) = reply.body["pending"]
            found: str = item["contextRef"]
            return found
        await asyncio.sleep(0.05)
    raise AssertionError("nothing was held")
