"""Time through the injected clock (``Prepared.clock``): contexts, approvals and turns expire
at their instant and fail closed; ``--require-turn`` needs a live turn of the caller."""

from __future__ import annotations

from pathlib import Path

from servers.runtime.events import iso
from tests.support.runtime_harness import (
    APPROVAL,
    PROPOSAL,
    READ_ARGS,
    READER_TOKEN,
    FakeClock,
    run_async,
    running_stack,
)

MINUTE = 60_000
CONTEXT_TTL = 15 * MINUTE
APPROVAL_TTL = 5 * MINUTE


def test_context_expires_at_its_instant(tmp_path: Path) -> None:
    clock = FakeClock()

    async def scenario() -> None:
        async with running_stack(tmp_path, clock=clock) as s:
            resolved = await s.resolve()
            ctx = resolved["contextRef"]
            assert resolved["expiresAt"] == iso(clock.now + CONTEXT_TTL)
            clock.advance(CONTEXT_TTL - 1)
            live = await s.execute(ctx, "inspect-context", "c1", READ_ARGS)
            assert live["status"] == "SUCCEEDED"
            asked = await s.execute(ctx, "propose-change", "p1", PROPOSAL)
            assert asked["reason"] == "APPROVAL_REQUIRED"
            pending = await s.call("GET", "/v1/context/tools/pending", headers=APPROVAL)
            assert len(pending.body["pending"]) == 1

            clock.advance(1)  # exactly expiresAt
            late = await s.execute(ctx, "inspect-context", "c2", READ_ARGS)
            assert (late["status"], late["reason"]) == ("DENIED", "CONTEXT_EXPIRED")
            repeat = await s.execute(ctx, "inspect-context", "c1", READ_ARGS)
            assert (repeat["status"], repeat["reason"]) == ("DENIED", "CONTEXT_EXPIRED")
            approve = await s.approve(ctx, "propose-change", "p1", PROPOSAL)
            assert approve.status == 409
            assert approve.body["error"]["code"] == "CONTEXT_EXPIRED"
            pending = await s.call("GET", "/v1/context/tools/pending", headers=APPROVAL)
            assert pending.body["pending"] == []
            assert (await s.stats())["byCallId"] == {"c1": 1}

    run_async(scenario())


def test_approval_expires_at_its_instant(tmp_path: Path) -> None:
    clock = FakeClock()

    async def scenario() -> None:
        async with running_stack(tmp_path, clock=clock) as s:
            ctx = (await s.resolve())["contextRef"]
            clock.advance(MINUTE)
            approved = await s.approve(ctx, "propose-change", "p1", PROPOSAL)
            assert approved.body["expiresAt"] == iso(clock.now + APPROVAL_TTL)
            clock.advance(APPROVAL_TTL)
            late = await s.execute(
                ctx, "propose-change", "p1", PROPOSAL, approved.body["approvalId"]
            )
            assert (late["status"], late["reason"]) == ("DENIED", "APPROVAL_EXPIRED")
            assert (await s.stats())["requests"] == {}

            # a denied call leaves no trace: a fresh approval still works
            fresh = await s.approval_id(ctx, "propose-change", "p1", PROPOSAL)
            clock.advance(APPROVAL_TTL - 1)
            done = await s.execute(ctx, "propose-change", "p1", PROPOSAL, fresh)
            assert done["status"] == "SUCCEEDED"
            assert (await s.stats())["byCallId"] == {"p1": 1}

    run_async(scenario())


def test_require_turn(tmp_path: Path) -> None:
    clock = FakeClock()

    async def scenario() -> None:
        async with running_stack(tmp_path, clock=clock, require_turn=True) as s:
            refused = await s.call(
                "POST", "/v1/context/resolve", {"objective": "authoring", "consumer": "tutor-app"}
            )
            assert refused.status == 403 and refused.body["error"]["code"] == "TURN_REQUIRED"

            started = await s.call("POST", "/v1/turns")
            assert started.status == 200
            turn = started.body["turnId"]
            assert started.body["expiresAt"] == iso(clock.now + CONTEXT_TTL)
            ctx = (await s.resolve(turnId=turn))["contextRef"]

            body = {"contextRef": ctx, "tool": "inspect-context", "arguments": READ_ARGS}
            no_turn = await s.call("POST", "/v1/context/tools/execute", {**body, "callId": "c0"})
            assert no_turn.status == 403 and no_turn.body["error"]["code"] == "TURN_REQUIRED"
            done = await s.execute(ctx, "inspect-context", "c1", READ_ARGS, turnId=turn)
            assert done["status"] == "SUCCEEDED"
            bogus = await s.call(
                "POST", "/v1/context/tools/execute", {**body, "callId": "c2", "turnId": "turn_x"}
            )
            assert bogus.status == 403

            # another credential's turn is not a live turn of this one
            reader = {"Authorization": f"Bearer {READER_TOKEN}"}
            theirs = (await s.call("POST", "/v1/turns", headers=reader)).body["turnId"]
            other = await s.call(
                "POST", "/v1/context/resolve", {"objective": "learner", "turnId": theirs}
            )
            assert other.status == 403 and other.body["error"]["code"] == "TURN_REQUIRED"

            complete = await s.call("POST", f"/v1/turns/{turn}/complete", {"outcome": "COMPLETED"})
            assert complete.status == 200 and complete.body["outcome"] == "COMPLETED"
            twice = await s.call("POST", f"/v1/turns/{turn}/complete", {"outcome": "FAILED"})
            assert twice.status == 409
            for path, payload in (
                ("/v1/context/resolve", {"objective": "authoring", "turnId": turn}),
                ("/v1/context/tools/execute", {**body, "callId": "c3", "turnId": turn}),
            ):
                closed = await s.call("POST", path, payload)
                assert closed.status == 403 and closed.body["error"]["code"] == "TURN_REQUIRED"

            # a turn expires like a context: at its instant
            expiring = (await s.call("POST", "/v1/turns")).body["turnId"]
            clock.advance(CONTEXT_TTL)
            gone = await s.call(
                "POST", "/v1/context/resolve", {"objective": "learner", "turnId": expiring}
            )
            assert gone.status == 403
            assert (await s.stats())["byCallId"] == {"c1": 1}

    run_async(scenario())
