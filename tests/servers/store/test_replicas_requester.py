"""A held call whose requester is gone, on replicas sharing one database: the mark the replica
that served the request makes is every replica's (listed by each, approval refused by each with
409 ``REQUESTER_GONE``, rejection taken by each), and a new request of the call, through another
replica, clears it everywhere.

Two runtimes (``tests/servers/store/test_replicas.py``'s ``replicas``) on one fresh database
(``pg_url``), the call asked through MCP on the first by a client that leaves
(``tests/support/abandoned.py``)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from servers.mcp.app import McpOptions
from tests.servers.store.test_replicas import replicas
from tests.support.abandoned import abandoned
from tests.support.runtime_harness import APPROVAL, PROPOSAL, Stack, run_async

APPROVER = {**APPROVAL, "x-seif-approver": "ops-ana"}


async def _marks(s: Stack) -> dict[str, bool]:
    """Each pending call's callId, and whether its requester is gone, as ``s`` lists them."""
    listed = await s.call("GET", "/v1/context/tools/pending", headers=APPROVAL)
    assert listed.status == 200, listed
    return {p["callId"]: p["requesterGone"] for p in listed.body["pending"]}


async def _one(s: Stack, entry: dict[str, Any]) -> dict[str, Any]:
    """The entry of one call, as ``s`` finds it by its contextRef and callId."""
    query = f"contextRef={entry['contextRef']}&callId={entry['callId']}"
    found = await s.call("GET", f"/v1/context/tools/pending?{query}", headers=APPROVAL)
    assert found.status == 200, found
    [item] = found.body["pending"]
    assert isinstance(item, dict)
    return item


@contextlib.asynccontextmanager
async def _gone_on_a(
    root: Path, url: str
) -> AsyncIterator[tuple[Stack, Stack, str, str, dict[str, Any]]]:
    """Two replicas, ``a`` and ``b``, and a call asked through ``a`` whose client left: the
    call's contextRef and callId, and ``a``'s pending entry of it (marked)."""
    async with replicas(root, url, mcp=McpOptions(approval_wait_s=20.0)) as (a, b):
        entry = await abandoned(a, PROPOSAL)
        yield a, b, entry["contextRef"], entry["callId"], entry


def test_a_requester_gone_on_one_replica_is_marked_and_refused_on_another(
    tmp_path: Path, pg_url: str
) -> None:
    async def scenario() -> None:
        async with _gone_on_a(tmp_path, pg_url) as (a, b, ref, call_id, entry):
            assert await _marks(b) == {call_id: True}
            assert (await _one(b, entry))["requesterGone"] is True
            refused = await b.approve(ref, "propose_change", call_id, PROPOSAL)
            assert (refused.status, refused.body["error"]["code"]) == (409, "REQUESTER_GONE")
            assert await _marks(a) == {call_id: True}  # still held, still marked
            body = {"contextRef": ref, "tool": "propose-change", "callId": call_id,
                    "arguments": PROPOSAL, "reason": "nobody waits for it"}  # fmt: skip
            rejected = await b.call("POST", "/v1/context/tools/reject", body, headers=APPROVER)
            assert rejected.status == 200, rejected
            assert await _marks(a) == {} and await _marks(b) == {}

    run_async(scenario())


def test_a_new_request_of_the_call_through_another_replica_clears_the_mark(
    tmp_path: Path, pg_url: str
) -> None:
    async def scenario() -> None:
        async with _gone_on_a(tmp_path, pg_url) as (a, b, ref, call_id, entry):
            asked = await b.execute(ref, "propose-change", call_id, PROPOSAL)  # with a requester
            assert (asked["status"], asked["reason"]) == ("DENIED", "APPROVAL_REQUIRED")
            assert await _marks(a) == {call_id: False} == await _marks(b)
            assert (await _one(a, entry))["requesterGone"] is False
            approved = await a.approve(ref, "propose_change", call_id, PROPOSAL)
            assert approved.status == 200, approved
            done = await b.execute(
                ref, "propose-change", call_id, PROPOSAL, approved.body["approvalId"]
            )
            assert done["status"] == "SUCCEEDED", done

    run_async(scenario())
