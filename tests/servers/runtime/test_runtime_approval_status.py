"""The approval status and reject routes, through a real runtime on loopback with the injected
clock: PENDING -> APPROVED -> (execute), PENDING -> REJECTED, PENDING -> EXPIRED and an unused
approval -> EXPIRED (each expiry logged as ``APPROVAL_EXPIRED``), a rejection that survives a
restart, and the SDK's ``approval_status`` / ``wait_for_approval`` against the same runtime."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from policy.engine.state import APPROVAL_TTL_MS
from seif import RuntimeClient
from servers.runtime.service import Runtime
from servers.wire.paging import Page
from tests.support.runtime_harness import (
    APP_TOKEN,
    APPROVAL,
    BEARER,
    PROPOSAL,
    READER_TOKEN,
    FakeClock,
    Stack,
    run_async,
    run_on_fake_clock,
    running_stack,
)

REASON = "not-this-lesson-7f3a9c"  # a reason text that must never reach the disk
APPROVER = {**APPROVAL, "x-seif-approver": "ops-ana"}


def _status_path(ctx: str, call_id: str) -> str:
    return f"/v1/context/tools/approvals/{ctx}/{call_id}"


async def _status(s: Stack, ctx: str, call_id: str) -> dict[str, Any]:
    reply = await s.call("GET", _status_path(ctx, call_id))
    assert reply.status == 200, reply
    body: dict[str, Any] = reply.body
    return body


async def _ask(s: Stack, call_id: str = "p1") -> str:
    ctx: str = (await s.resolve())["contextRef"]
    asked = await s.execute(ctx, "propose-change", call_id, PROPOSAL)
    assert (asked["status"], asked["reason"]) == ("DENIED", "APPROVAL_REQUIRED")
    return ctx


async def _reject(s: Stack, ctx: str, call_id: str = "p1", **kw: Any) -> Any:
    body = {
        "contextRef": ctx,
        "tool": "propose-change",
        "callId": call_id,
        "arguments": PROPOSAL,
        "reason": REASON,
    }
    path = kw.pop("path", "/v1/context/tools/reject")
    return await s.call("POST", path, body, headers=kw.pop("headers", APPROVER))


async def _events(s: Stack, ctx: str) -> list[dict[str, Any]]:
    reply = await s.call("GET", f"/v1/traces/{ctx}")
    assert reply.status == 200
    found: list[dict[str, Any]] = reply.body["events"]
    return found


def test_pending_then_approved_then_executed(tmp_path: Path) -> None:
    """NONE before anything is asked, PENDING (with when it stops being approvable) while held,
    APPROVED with the approval's id and expiry, NONE once the call has run; the route needs
    `tools.execute` and answers 404 CONTEXT_UNKNOWN for a context that does not exist."""

    async def scenario(s: Stack, _runtime: Runtime, clock: FakeClock) -> None:
        ctx = (await s.resolve())["contextRef"]
        assert await _status(s, ctx, "p1") == {"state": "NONE"}
        await s.execute(ctx, "propose-change", "p1", PROPOSAL)
        pending = await _status(s, ctx, "p1")
        assert pending["state"] == "PENDING" and set(pending) == {"state", "expiresAt"}
        approval_id = await s.approval_id(ctx, "propose-change", "p1", PROPOSAL)
        approved = await _status(s, ctx, "p1")
        assert approved["state"] == "APPROVED" and approved["approvalId"] == approval_id
        done = await s.execute(ctx, "propose-change", "p1", PROPOSAL, approval_id)
        assert done["status"] == "SUCCEEDED"
        assert await _status(s, ctx, "p1") == {"state": "NONE"}

        unknown = await s.call("GET", _status_path("ctx_nope", "p1"))
        assert (unknown.status, unknown.body["error"]["code"]) == (404, "CONTEXT_UNKNOWN")
        reader = {"Authorization": f"Bearer {READER_TOKEN}"}
        assert (await s.call("GET", _status_path(ctx, "p1"), headers=reader)).status == 403
        assert (await s.call("GET", _status_path(ctx, "p1"), headers={})).status == 401
        as_approver = await s.call("GET", _status_path(ctx, "p1"), headers=APPROVAL)
        assert as_approver.status == 401  # the approval credential reads no status

    run_on_fake_clock(tmp_path, scenario)


def test_rejected_is_final_and_never_stored_with_its_reason(tmp_path: Path) -> None:
    """A reject (either path) ends the wait: the call leaves the pending list, asking again
    does not put it back, its status is REJECTED, approving it is 409 CALL_REJECTED, so is a
    second reject; a bearer token cannot reject; the log has REJECTED with the approver and
    the fingerprint, and the reason text is nowhere in the data directory."""

    async def scenario(s: Stack, _runtime: Runtime, clock: FakeClock) -> None:
        ctx = await _ask(s)
        assert (await _reject(s, ctx, headers=BEARER)).status == 401
        done = await _reject(s, ctx, path="/runtime/v1/context/tools/reject")
        assert done.status == 200
        assert done.body == {"state": "REJECTED", "callId": "p1", "approver": "ops-ana"}
        assert await _status(s, ctx, "p1") == {"state": "REJECTED"}
        listed = await s.call("GET", "/v1/context/tools/pending", headers=APPROVAL)
        assert listed.body["pending"] == []

        again = await s.execute(ctx, "propose-change", "p1", PROPOSAL)
        assert again["reason"] == "APPROVAL_REQUIRED"
        listed = await s.call("GET", "/v1/context/tools/pending", headers=APPROVAL)
        assert listed.body["pending"] == []  # rejected: never held again
        approve = await s.approve(ctx, "propose-change", "p1", PROPOSAL)
        assert (approve.status, approve.body["error"]["code"]) == (409, "CALL_REJECTED")
        twice = await _reject(s, ctx)
        assert (twice.status, twice.body["error"]["code"]) == (409, "CALL_REJECTED")
        assert await _status(s, ctx, "p1") == {"state": "REJECTED"}

        [rejected] = [e for e in await _events(s, ctx) if e["event"] == "REJECTED"]
        assert (rejected["callId"], rejected["approver"]) == ("p1", "ops-ana")
        assert len(rejected["fingerprint"]) == 64
        for path in s.config.data.rglob("*"):
            if path.is_file():
                assert REASON.encode() not in path.read_bytes(), path

        # an approved call cannot be rejected any more: it was decided
        other = await _ask(s, "p2")
        await s.approval_id(other, "propose-change", "p2", PROPOSAL)
        decided = await _reject(s, other, "p2")
        assert (decided.status, decided.body["error"]["code"]) == (409, "CALL_DECIDED")

    run_on_fake_clock(tmp_path, scenario)


def test_pending_and_unused_approval_expire_and_are_logged(tmp_path: Path) -> None:
    """A held call whose five minutes pass reads EXPIRED and leaves the list; an approval
    never used reads EXPIRED once it has run out; each is logged once as APPROVAL_EXPIRED,
    when the runtime notices (here: the status read's sweep, on the injected clock)."""

    async def scenario(s: Stack, runtime: Runtime, clock: FakeClock) -> None:
        ctx = await _ask(s)
        clock.advance(APPROVAL_TTL_MS)
        assert await _status(s, ctx, "p1") == {"state": "EXPIRED"}
        assert runtime.approvals.pending_page(Page()).items == []
        assert await _status(s, ctx, "p1") == {"state": "EXPIRED"}
        expired = [e for e in await _events(s, ctx) if e["event"] == "APPROVAL_EXPIRED"]
        assert [(e["callId"], e["expired"]) for e in expired] == [("p1", "PENDING")]

        await s.execute(ctx, "propose-change", "p2", PROPOSAL)
        approval_id = await s.approval_id(ctx, "propose-change", "p2", PROPOSAL)
        clock.advance(APPROVAL_TTL_MS - 1)
        assert (await _status(s, ctx, "p2"))["state"] == "APPROVED"
        clock.advance(1)
        assert await _status(s, ctx, "p2") == {"state": "EXPIRED"}
        late = await s.execute(ctx, "propose-change", "p2", PROPOSAL, approval_id)
        assert (late["status"], late["reason"]) == ("DENIED", "APPROVAL_EXPIRED")
        expired = [e for e in await _events(s, ctx) if e["event"] == "APPROVAL_EXPIRED"]
        assert [(e["callId"], e["expired"]) for e in expired] == [
            ("p1", "PENDING"),
            ("p2", "APPROVAL"),
        ]
        assert expired[1]["approvalId"] == approval_id

    run_on_fake_clock(tmp_path, scenario)


def test_the_periodic_sweep_logs_an_expiry_nobody_asked_about(tmp_path: Path) -> None:
    """With no status read, listing or new call, the runtime's own sweep (every second of wall
    time, expiry judged by the injected clock) notices the expiry and logs it once."""

    async def scenario(s: Stack, runtime: Runtime, clock: FakeClock) -> None:
        ctx = await _ask(s)
        clock.advance(APPROVAL_TTL_MS)
        for _ in range(40):  # the sweep runs every SWEEP_EVERY_S (1 s)
            await asyncio.sleep(0.1)
            kinds = [e["event"] for e in await _events(s, ctx)]
            if "APPROVAL_EXPIRED" in kinds:
                break
        assert kinds.count("APPROVAL_EXPIRED") == 1
        assert len(runtime.held) == 0
        assert await _status(s, ctx, "p1") == {"state": "EXPIRED"}
        kinds = [e["event"] for e in await _events(s, ctx)]
        assert kinds.count("APPROVAL_EXPIRED") == 1

    run_on_fake_clock(tmp_path, scenario)


def test_a_rejection_survives_a_restart(tmp_path: Path) -> None:
    """The rejection is in the decision log: a runtime started again on the same data
    directory still answers REJECTED, and refuses to approve the call."""

    async def scenario() -> str:
        async with running_stack(tmp_path) as s:
            ctx = await _ask(s)
            assert (await _reject(s, ctx)).status == 200
        async with running_stack(tmp_path) as s:
            assert await _status(s, ctx, "p1") == {"state": "REJECTED"}
            approve = await s.approve(ctx, "propose-change", "p1", PROPOSAL)
            assert (approve.status, approve.body["error"]["code"]) == (409, "CALL_REJECTED")
        return ctx

    run_async(scenario())


def test_sdk_reads_and_waits_for_the_status(tmp_path: Path) -> None:
    """``RuntimeClient.approval_status`` and ``wait_for_approval`` against the runtime: PENDING
    while held, the wait ends APPROVED (with the approval to execute with) once an approver
    approves, and REJECTED once one rejects."""

    async def scenario(s: Stack, _runtime: Runtime, clock: FakeClock) -> None:
        async with RuntimeClient(s.runtime, APP_TOKEN) as sdk:
            ctx = await _ask(s)
            first = await sdk.approval_status(ctx, "p1")
            assert (first.state, first.settled) == ("PENDING", False)
            waiting = asyncio.ensure_future(
                sdk.wait_for_approval(ctx, "p1", timeout_s=20, interval_s=0.02)
            )
            await asyncio.sleep(0.1)
            assert not waiting.done()
            approval_id = await s.approval_id(ctx, "propose-change", "p1", PROPOSAL)
            status = await waiting
            assert (status.state, status.approval_id) == ("APPROVED", approval_id)
            assert status.expires_at is not None
            receipt = await sdk.execute(
                ctx, "propose-change", "p1", PROPOSAL, approval_id=approval_id
            )
            assert receipt.status == "SUCCEEDED"

            ctx = await _ask(s, "p2")  # (one propose-change per context: a new one)
            waiting = asyncio.ensure_future(
                sdk.wait_for_approval(ctx, "p2", timeout_s=20, interval_s=0.02)
            )
            await asyncio.sleep(0.1)
            assert (await _reject(s, ctx, "p2")).status == 200
            assert (await waiting).state == "REJECTED"

    run_on_fake_clock(tmp_path, scenario)
