"""The reference flow end to end: the runtime (``prepare`` + ``create_app``) and the synthetic
executor, both in process on real loopback ports, talked to over HTTP."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from servers.http.app import create_app
from tests.support.runtime_harness import (
    APPROVAL,
    BEARER,
    OTHER_PROPOSAL,
    PROPOSAL,
    READ_ARGS,
    READER_TOKEN,
    Stack,
    idempotency_key,
    run_async,
    running_stack,
)

LEARNER = {"objective": "learner", "consumer": "tutor-app"}


def test_ready_capabilities_and_openapi(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path) as s:
            health = await s.call("GET", "/v1/health", headers={})
            assert (health.status, health.body) == (200, {"status": "ok"})
            ready = await s.call("GET", "/v1/ready", headers={})
            assert ready.status == 200 and ready.body["ready"] is True
            assert set(ready.body["tools"].values()) == {"READY"}
            assert len(ready.body["tools"]) == 3

            assert (await s.call("GET", "/v1/capabilities", headers={})).status == 401
            caps = await s.call("GET", "/v1/capabilities")
            assert caps.status == 200
            native = caps.body["integrations"]["native"]
            assert [n.split(" (")[0] for n in native] == [
                "seif Python SDK",
                "LangChain StructuredTool",
                "OpenAI Agents FunctionTool",
                "LangGraph interrupt() for held calls",
            ]
            documented = " ".join(caps.body["integrations"]["documented"])
            assert "n8n" in documented and "LangChain" in documented
            assert "seif.context-runtime.v2" in caps.body["runtimeContracts"]
            assert caps.body["executor"]["contract"] == "context-tool-executor.v1"

            doc = await s.call("GET", "/v1/openapi.json", headers={})
            assert doc.status == 200 and doc.body["openapi"].startswith("3.1")
            paths = doc.body["paths"]
            app = create_app(s.prepared)
            served: set[tuple[str, str]] = set()
            for route in app.router.routes():
                if route.method == "HEAD":
                    continue  # aiohttp adds HEAD to every GET; OpenAPI leaves it implicit
                path = route.resource.canonical if route.resource is not None else ""
                served.add((route.method.lower(), path))
                assert path in paths, path
                assert route.method.lower() in paths[path], (route.method, path)
            documented_ops = {(m, p) for p, item in paths.items() for m in item}
            assert documented_ops == served

    run_async(scenario())


def test_learner_never_gets_propose_change(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path) as s:
            learner = await s.resolve(**LEARNER)
            names = [t["name"] for t in learner["tools"]]
            assert "propose_change" not in names and "inspect_context" in names
            assert "propose-change" not in [c["id"] for c in learner["contracts"]]
            assert learner["tokens"]["estimated"] is True
            denied = await s.execute(learner["contextRef"], "propose-change", "lp1", PROPOSAL)
            assert (denied["status"], denied["reason"]) == ("DENIED", "TOOL_NOT_DISCLOSED")
            approve = await s.approve(learner["contextRef"], "propose-change", "lp1", PROPOSAL)
            assert approve.status == 409 and approve.body["error"]["code"] == "TOOL_NOT_DISCLOSED"
            authoring = await s.resolve()
            assert "propose_change" in [t["name"] for t in authoring["tools"]]
            assert (await s.stats())["executions"] == {}

    run_async(scenario())


async def _read_and_ask(s: Stack, ctx: str) -> None:
    read = await s.execute(ctx, "inspect-context", "c1", READ_ARGS)
    assert read["status"] == "SUCCEEDED" and read["duplicate"] is False
    assert read["outputAvailable"] is True and read["output"]["ref"] == READ_ARGS["ref"]

    asked = await s.execute(ctx, "propose-change", "p1", PROPOSAL)
    assert (asked["status"], asked["reason"]) == ("DENIED", "APPROVAL_REQUIRED")
    assert asked["outputAvailable"] is False and "output" not in asked

    pending = await s.call("GET", "/v1/context/tools/pending", headers=APPROVAL)
    assert pending.status == 200
    [item] = pending.body["pending"]
    assert (item["contextRef"], item["tool"], item["callId"]) == (ctx, "propose-change", "p1")
    assert item["arguments"] == PROPOSAL
    for headers in ({}, BEARER, {"x-seif-tool-approval": "wrong"}):
        refused = await s.call("GET", "/v1/context/tools/pending", headers=headers)
        assert refused.status == 401 and refused.body["error"]["code"] == "UNAUTHENTICATED"
    as_app = await s.approve(ctx, "propose-change", "p1", PROPOSAL, headers=BEARER)
    assert as_app.status == 401


async def _approve_exactly(s: Stack, ctx: str) -> str:
    """Approve on both paths; an approval of other arguments does not carry over."""
    other = await s.approve(
        ctx, "propose-change", "p1", OTHER_PROPOSAL, path="/runtime/v1/context/tools/approve"
    )
    assert other.status == 200 and other.body["approvalId"].startswith("apr_")
    wrong = await s.execute(ctx, "propose-change", "p1", PROPOSAL, other.body["approvalId"])
    assert (wrong["status"], wrong["reason"]) == ("DENIED", "APPROVAL_INVALID")
    unknown = await s.execute(ctx, "propose-change", "p1", PROPOSAL, "apr_unknown")
    assert (unknown["status"], unknown["reason"]) == ("DENIED", "APPROVAL_INVALID")

    right = await s.approve(ctx, "propose-change", "p1", PROPOSAL, path="/v1/context/tools/approve")
    assert right.status == 200 and set(right.body) == {"approvalId", "expiresAt"}
    approval_id: str = right.body["approvalId"]
    return approval_id


async def _dispatch_once(s: Stack, ctx: str, approval_id: str) -> None:
    done = await s.execute(ctx, "propose-change", "p1", PROPOSAL, approval_id)
    assert (done["status"], done["duplicate"], done["outputAvailable"]) == (
        "SUCCEEDED",
        False,
        True,
    )
    assert done["output"]["status"] == "pending-review"

    again = await s.execute(ctx, "propose-change", "p1", PROPOSAL, approval_id)
    assert again == {
        "callId": "p1",
        "tool": "propose-change",
        "status": "SUCCEEDED",
        "reason": None,
        "duplicate": True,
        "outputAvailable": False,
    }
    read_again = await s.execute(ctx, "inspect-context", "c1", READ_ARGS)
    assert read_again["duplicate"] is True and "output" not in read_again

    conflict = await s.execute(ctx, "propose-change", "p1", OTHER_PROPOSAL, approval_id)
    assert (conflict["status"], conflict["reason"]) == ("DENIED", "CALL_CONFLICT")
    pending = await s.call("GET", "/v1/context/tools/pending", headers=APPROVAL)
    assert pending.body["pending"] == []


async def _check_executor_and_traces(s: Stack, ctx: str, build: str) -> None:
    stats = await s.stats()
    assert stats["byCallId"] == {"c1": 1, "p1": 1}
    assert stats["executions"] == {"inspect-context": 1, "propose-change": 1}
    assert stats["byIdempotencyKey"] == {
        idempotency_key(build, ctx, "c1"): 1,
        idempotency_key(build, ctx, "p1"): 1,
    }
    assert stats["redirectTargetHits"] == 0

    reported = await s.call(
        "POST", "/v1/context/disclosures", {"contextRef": ctx, "tools": ["inspect_context"]}
    )
    assert reported.status == 202
    reader = {"Authorization": f"Bearer {READER_TOKEN}"}
    assert (await s.call("GET", f"/v1/traces/{ctx}", headers=reader)).status == 403
    assert (await s.call("GET", f"/v1/traces/{ctx}", headers={})).status == 401
    traces = await s.call("GET", f"/v1/traces/{ctx}")
    assert traces.status == 200 and traces.body["contextRef"] == ctx
    events = traces.body["events"]
    kinds = [e["event"] for e in events]
    for kind in ("DISCLOSED", "DENIED", "APPROVED", "INTENT", "RESULT", "REPORTED"):
        assert kind in kinds, kind
    assert kinds[0] == "DISCLOSED"
    assert all(e["contextRef"] == ctx and e["bindingRevision"] == 7 for e in events)
    assert all(e["build"] == build for e in events)
    approved = [e for e in events if e["event"] == "APPROVED"]
    assert len(approved) == 2 and all(len(e["fingerprint"]) == 64 for e in approved)
    results = {e["callId"]: e["status"] for e in events if e["event"] == "RESULT"}
    assert results == {"c1": "SUCCEEDED", "p1": "SUCCEEDED"}
    denied = [e["reason"] for e in events if e["event"] == "DENIED"]
    assert {"APPROVAL_REQUIRED", "APPROVAL_INVALID", "CALL_CONFLICT"} <= set(denied)


def test_reference_flow(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path) as s:
            resolved = await s.resolve()
            ctx, build = resolved["contextRef"], resolved["build"]
            assert build == s.prepared.build.digest
            assert [t["name"] for t in resolved["tools"]] == [
                "inspect_context",
                "search_knowledge",
                "propose_change",
            ]
            await _read_and_ask(s, ctx)
            approval_id = await _approve_exactly(s, ctx)
            await _dispatch_once(s, ctx, approval_id)
            await _check_executor_and_traces(s, ctx, build)

    run_async(scenario())


def test_scopes_and_unknown_routes(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path) as s:
            reader = {"Authorization": f"Bearer {READER_TOKEN}"}
            ctx = (await s.resolve())["contextRef"]
            body = {"contextRef": ctx, "tool": "inspect-context", "callId": "x", "arguments": {}}
            checks: list[tuple[str, str, Any, dict[str, str], int, str]] = [
                ("POST", "/v1/context/tools/execute", body, reader, 403, "FORBIDDEN"),
                ("POST", "/v1/context/tools/execute", body, {}, 401, "UNAUTHENTICATED"),
                ("POST", "/v1/context/resolve", {"objective": "learner"}, {}, 401, ""),
                ("POST", "/v1/context/resolve", {"objective": "nope"}, BEARER, 400, ""),
                ("GET", "/v1/nope", None, BEARER, 404, "NOT_FOUND"),
                ("GET", "/v1/context/resolve", None, BEARER, 405, "METHOD_NOT_ALLOWED"),
            ]
            for method, path, payload, headers, status, code in checks:
                reply = await s.call(method, path, payload, headers=headers)
                assert reply.status == status, (path, reply)
                assert isinstance(reply.body["error"]["code"], str)
                assert not code or reply.body["error"]["code"] == code
            await asyncio.sleep(0)

    run_async(scenario())
