"""An MCP call id names one call of its credential and objective, whichever session or context
a retry arrives in, and a waiting call is dispatched only for a client still waiting.

Each test drives the official client (or raw JSON-RPC where the client cannot do what is
tested) against a real runtime and the synthetic executor on loopback; the executor's counts
are what was dispatched."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from servers.http.app import create_app
from servers.mcp.app import McpOptions, mount
from tests.servers.mcp.test_mcp_boundary import (
    INITIALIZE,
    base_headers,
    rpc,
    session_headers,
    stateless_headers,
)
from tests.support.abandoned import abandoned
from tests.support.mcp_support import (
    MODES,
    call_meta,
    executions,
    log_records,
    mcp_client,
    mcp_url,
    of,
    receipt_of,
)
from tests.support.runtime_harness import (
    APP_TOKEN,
    APPROVAL,
    OTHER_APP_TOKEN,
    OTHER_PROPOSAL,
    PROPOSAL,
    READ_ARGS,
    prepare_config,
    run_async,
    running_stack,
    write_config,
)

QUICK = McpOptions(approval_wait_s=1.0)
TWO_SESSIONS = McpOptions(approval_wait_s=1.0, sessions_per_credential=2)
AUTHORING = {"consumer": "course-authoring"}


@pytest.mark.parametrize("mode", MODES)
def test_a_call_id_retried_in_another_session_runs_once(tmp_path: Path, mode: str) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=QUICK) as stack:
            async with mcp_client(stack.runtime, "authoring", mode=mode, **AUTHORING) as first:
                done = await first.call_tool("inspect_context", READ_ARGS, meta=call_meta("r-1"))
            assert done.is_error is False
            # a new session (legacy), or other coordinates, so another context (auto)
            again_at = {**AUTHORING, "deployment": "elsewhere"} if mode == "auto" else AUTHORING
            async with mcp_client(stack.runtime, "authoring", mode=mode, **again_at) as second:
                again = await second.call_tool("inspect_context", READ_ARGS, meta=call_meta("r-1"))
                other = await second.call_tool(
                    "inspect_context", {"ref": "course/other"}, meta=call_meta("r-1")
                )
            assert again.is_error is True
            assert receipt_of(again) == {"status": "SUCCEEDED", "reason": None, "duplicate": True}
            assert receipt_of(other)["reason"] == "CALL_CONFLICT"  # same id, other arguments
            assert (await executions(stack)).get("inspect-context") == 1

    run_async(scenario())


def test_a_call_id_retried_after_a_restart_runs_once(tmp_path: Path) -> None:
    async def first_runtime() -> None:
        async with running_stack(tmp_path, mcp=QUICK) as stack:
            c = mcp_client(stack.runtime, "authoring", mode="legacy", **AUTHORING)
            async with c as client:
                done = await client.call_tool("inspect_context", READ_ARGS, meta=call_meta("r-2"))
                assert done.is_error is False

    async def second_runtime() -> None:  # the same data directory, a new process's state
        async with running_stack(tmp_path, mcp=QUICK) as stack:
            async with mcp_client(stack.runtime, "authoring", mode="legacy", **AUTHORING) as c:
                again = await c.call_tool("inspect_context", READ_ARGS, meta=call_meta("r-2"))
            assert receipt_of(again)["duplicate"] is True
            assert (await executions(stack)).get("inspect-context") is None  # nothing ran

    run_async(first_runtime())
    run_async(second_runtime())


def test_concurrent_requests_of_one_call_id_in_two_sessions_run_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=QUICK) as stack:
            async with (
                mcp_client(stack.runtime, "authoring", mode="legacy", **AUTHORING) as a,
                mcp_client(stack.runtime, "authoring", mode="legacy", **AUTHORING) as b,
            ):
                stack.set_knobs("inspect-context", delay_ms=300)  # both arrive while it runs
                results = await asyncio.gather(
                    *(
                        c.call_tool("inspect_context", READ_ARGS, meta=call_meta("r-3"))
                        for c in (a, b, a, b)
                    )
                )
            assert sorted(bool(r.is_error) for r in results) == [False, True, True, True]
            assert (await executions(stack)).get("inspect-context") == 1

    run_async(scenario())


def test_a_waiting_call_whose_client_left_is_never_dispatched(tmp_path: Path) -> None:
    """The client gives up while its write waits for approval; the approval that comes later
    dispatches nothing (nobody would receive the answer); a later retry gets it."""

    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=McpOptions(approval_wait_s=20.0)) as stack:
            url = mcp_url(stack.runtime, "authoring", **AUTHORING)
            params = {"name": "propose_change", "arguments": PROPOSAL,
                      "_meta": {"io.seif/callId": "w-gone"}}  # fmt: skip
            message = rpc("tools/call", params, style="stateless")
            headers = stateless_headers(message)
            async with aiohttp.ClientSession() as http:
                posted = asyncio.ensure_future(
                    http.post(url, data=json.dumps(message), headers=headers)
                )
                ref = await _held_context(stack, "w-gone")
                posted.cancel()  # the client leaves: its connection closes
                await asyncio.gather(posted, return_exceptions=True)
            await asyncio.sleep(0.3)
            assert (await stack.approve(ref, "propose_change", "w-gone", PROPOSAL)).status == 200
            await asyncio.sleep(1.0)  # the abandoned request wakes, sees nobody, stops
            assert (await executions(stack)).get("propose-change") is None
            async with mcp_client(stack.runtime, "authoring", mode="auto", **AUTHORING) as c:
                later = await c.call_tool("propose_change", PROPOSAL, meta=call_meta("w-gone"))
            assert later.is_error is False  # the approval granted meanwhile is used
            assert (await executions(stack)).get("propose-change") == 1

    run_async(scenario())


def test_a_waiting_call_of_its_own_whose_client_left_has_no_requester(tmp_path: Path) -> None:
    """A stateless call without `io.seif/callId` has a call id of its own: once its client
    leaves, nobody can ask for the call again, so the runtime lists it with `requesterGone`,
    refuses to approve it (409 `REQUESTER_GONE`, nothing dispatched) and lets it be rejected;
    the same call id asked again would hold it anew, with a requester."""

    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=McpOptions(approval_wait_s=20.0)) as stack:
            entry = await abandoned(stack, PROPOSAL)
            assert entry["requesterGone"] is True and entry["application"] == "tutor-app"
            ref, call_id = entry["contextRef"], entry["callId"]
            refused = await stack.approve(ref, "propose_change", call_id, PROPOSAL)
            assert (refused.status, refused.body["error"]["code"]) == (409, "REQUESTER_GONE")
            assert (await executions(stack)).get("propose-change") is None
            body = {"contextRef": ref, "tool": "propose-change", "callId": call_id,
                    "arguments": PROPOSAL, "reason": "nobody waits for it"}  # fmt: skip
            rejected = await stack.call(
                "POST",
                "/v1/context/tools/reject",
                body,
                headers={**APPROVAL, "x-seif-approver": "ops"},
            )
            assert rejected.status == 200
            listed = await stack.call("GET", "/v1/context/tools/pending", headers=APPROVAL)
            assert [p for p in listed.body["pending"] if p["callId"] == call_id] == []

    run_async(scenario())


async def _held_context(stack: Any, call_id: str) -> str:
    for _ in range(100):
        reply = await stack.call("GET", "/v1/context/tools/pending", headers=APPROVAL)
        held = [p for p in reply.body["pending"] if p["callId"] == call_id]
        if held:
            ref: str = held[0]["contextRef"]
            return ref
        await asyncio.sleep(0.05)
    raise AssertionError(f"{call_id} was never held")


def test_an_approved_call_retried_uses_its_approval_at_once(tmp_path: Path) -> None:
    """A retry of a call approved meanwhile runs with that approval: it is not held (nor
    listed to approvers) again first."""

    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=QUICK) as stack:
            async with mcp_client(stack.runtime, "authoring", mode="auto", **AUTHORING) as c:
                first = await c.call_tool("propose_change", PROPOSAL, meta=call_meta("w-ok"))
                assert receipt_of(first)["reason"] == "APPROVAL_REQUIRED"
                ref = await _held_context(stack, "w-ok")
                assert (await stack.approve(ref, "propose_change", "w-ok", PROPOSAL)).status == 200
                other = await c.call_tool("propose_change", OTHER_PROPOSAL, meta=call_meta("w-x"))
                assert receipt_of(other)["reason"] == "APPROVAL_REQUIRED"
                again = await c.call_tool("propose_change", PROPOSAL, meta=call_meta("w-ok"))
            assert again.is_error is False
            denied = of(log_records(stack), "DENIED", callId="w-ok")
            assert len(denied) == 1  # denied (and held) once, not again on the retry
            assert (await executions(stack)).get("propose-change") == 1

    run_async(scenario())


def test_a_session_request_id_past_256_characters_is_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=QUICK) as stack:
            url = mcp_url(stack.runtime, "authoring", **AUTHORING)
            message = rpc("tools/list", {}, ident="x" * 257, style="stateless")
            async with aiohttp.ClientSession() as http:
                posted = await http.post(
                    url, data=json.dumps(message), headers=stateless_headers(message)
                )
                body = await posted.json()
            assert posted.status == 400 and body["error"]["code"] == -32600

    run_async(scenario())


ROUNDS = 150


def test_a_request_id_resent_the_moment_its_answer_arrives_is_served(tmp_path: Path) -> None:
    """A client that reuses a request id once its answer came (as MCP allows) is served
    every time: the id is free before the answer is sent, never ``still in use`` (it was
    once freed after the answer's stream ended, and a quick client was refused)."""

    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=QUICK) as stack:
            url = mcp_url(stack.runtime, "learner")
            connector = aiohttp.TCPConnector(limit=0)
            async with aiohttp.ClientSession(connector=connector) as http:
                session = await opened_session(http, url, APP_TOKEN)
                listing = json.dumps(rpc("tools/list", ident=7))
                headers = session_headers(session)
                previous: aiohttp.ClientResponse | None = None
                refusals: list[str] = []
                for _ in range(ROUNDS):
                    response = await http.post(url, data=listing, headers=headers)
                    if previous is not None:  # it ends after its answer was read and resent
                        await previous.read()
                        previous.release()
                        previous = None
                    if response.status != 200:
                        refusals.append(await response.text())
                        response.release()
                        continue
                    answer = await _answer_of(response)
                    assert answer["id"] == 7 and answer["result"]["tools"], answer
                    previous = response
                if previous is not None:
                    previous.release()
                assert refusals == [], f"{len(refusals)} of {ROUNDS} refused: {refusals[:1]}"

    run_async(scenario())


async def _answer_of(response: aiohttp.ClientResponse) -> dict[str, Any]:
    """The JSON-RPC answer of a POST answered as an event stream, read as soon as its event
    arrives (the stream itself may not have ended yet)."""
    while True:
        line = await response.content.readline()
        assert line, "the stream ended without an answer"
        if line.startswith(b"data:"):
            message: dict[str, Any] = json.loads(line[5:])
            if "result" in message or "error" in message:
                return message


async def opened_session(http: aiohttp.ClientSession, url: str, token: str) -> str:
    """A new ``2025-11-25`` session (initialized) of ``token``'s credential at ``url``."""
    async with http.post(url, data=json.dumps(INITIALIZE), headers=base_headers(token)) as r:
        await r.read()
        assert r.status == 200, (r.status, await r.text())
        session = r.headers["Mcp-Session-Id"]
    initialized = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    async with http.post(url, data=initialized, headers=session_headers(session, token)) as r:
        assert r.status == 202, r.status
    return session


def test_one_credential_cannot_hold_every_session(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=TWO_SESSIONS) as stack:
            url = mcp_url(stack.runtime, "authoring", **AUTHORING)
            opened = [await _initialize(url, APP_TOKEN) for _ in range(3)]
            assert opened[:2] == [200, 200] and opened[2] == 503  # its own share is full
            assert await _initialize(url, OTHER_APP_TOKEN) == 200  # another's is not
            assert (await executions(stack)) == {}

    run_async(scenario())


def test_a_credential_s_sessions_are_one_budget_across_objectives(tmp_path: Path) -> None:
    """Its budget is not one per objective (the attack multiplied it by the objectives)."""

    async def scenario() -> None:
        async with running_stack(tmp_path, mcp=TWO_SESSIONS) as stack:
            authoring = mcp_url(stack.runtime, "authoring", **AUTHORING)
            learner = mcp_url(stack.runtime, "learner")
            assert await _initialize(authoring, APP_TOKEN) == 200
            assert await _initialize(learner, APP_TOKEN) == 200
            assert await _initialize(learner, APP_TOKEN) == 503  # its one budget is full
            assert await _initialize(authoring, APP_TOKEN) == 503
            assert await _initialize(learner, OTHER_APP_TOKEN) == 200

    run_async(scenario())


async def _initialize(url: str, token: str) -> int:
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                          "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}  # fmt: skip
    async with (
        aiohttp.ClientSession() as http,
        http.post(url, data=json.dumps(message), headers=headers) as answer,
    ):
        await answer.read()
        return answer.status


def test_mcp_is_not_mounted_on_a_runtime_that_requires_turns(tmp_path: Path) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:9")
    prepared = prepare_config(config, require_turn=True)
    try:
        with pytest.raises(ValueError, match="require_turn"):
            mount(create_app(prepared), QUICK)
    finally:
        prepared.close()
