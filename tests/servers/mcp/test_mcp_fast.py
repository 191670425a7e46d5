"""The native stateless path (``servers.mcp.fast``) answers exactly as the SDK's JSON path does.

Each request is sent twice to one runtime: once as served (the native path takes it when it
qualifies) and once with the native path switched off (``Mounted.native``), so the SDK's own
``StreamableHTTPSessionManager`` answers it. The answers must agree in status, content type
and JSON, once what differs by design is set aside: the call id (each request makes its own
call) and the context ref. Requests the native path declines (a bad call id, wrong headers) are
answered by the SDK either way, and the same."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from servers.mcp.mounted import MOUNTED
from tests.servers.mcp.test_mcp_boundary import (
    AUTHORING,
    LEARNER,
    Boundary,
    rpc,
    session_headers,
    stack_in_a_thread,
    stateless_headers,
)
from tests.support.runtime_harness import READ_ARGS

CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("list", "tools/list", {}),
    ("read", "tools/call", {"name": "inspect_context", "arguments": READ_ARGS}),
    ("invalid", "tools/call", {"name": "inspect_context", "arguments": {"ref": 7}}),
    ("invalid-many", "tools/call", {"name": "search_knowledge", "arguments": {
        "query": "x", "limit": 99, "filters": {"modules": list(range(20, 32))}}}),
    ("undisclosed", "tools/call", {"name": "propose_change", "arguments": {}}),
    ("unknown", "tools/call", {"name": "no_such_tool", "arguments": {}}),
    ("no-arguments", "tools/call", {"name": "inspect_context"}),
    ("bad-call-id", "tools/call", {"name": "inspect_context", "arguments": READ_ARGS,
                                    "_meta": {"io.seif/callId": ""}}),
    ("params-wrong", "tools/call", {"name": 7}),
]  # fmt: skip


@pytest.fixture(scope="module")
def mcp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Boundary]:
    root: Path = tmp_path_factory.mktemp("mcp-fast")
    with stack_in_a_thread(root) as threaded:
        yield Boundary(threaded)


DECLINED = {"bad-call-id", "params-wrong"}
"""The cases the native path leaves to the SDK (it would refuse them)."""


def _answer(mcp: Boundary, path: str, message: Any, *, native: bool) -> tuple[int, str, Any]:
    mounted = mcp.stack.runtime_app[MOUNTED]
    mounted.native = native
    try:
        answer = mcp.send("POST", path, json.dumps(message).encode(), stateless_headers(message))
    finally:
        mounted.native = True
    body = json.loads(answer.body)
    return answer.status, answer.headers.get("Content-Type", "").split(";")[0], _comparable(body)


def _comparable(body: Any) -> Any:
    """The answer without what differs by design between two requests of the same call."""
    result = body.get("result") if isinstance(body, dict) else None
    if isinstance(result, dict):
        meta = dict(result.get("_meta") or {})
        for key in ("io.seif/callId", "io.seif/contextRef"):
            if key in meta:
                meta[key] = "<differs>"
        result = {**result, "_meta": meta}
        return {**body, "result": result}
    return body


@pytest.mark.parametrize(("case", "method", "params"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("path", [LEARNER, AUTHORING])
def test_the_native_path_answers_as_the_sdk(
    mcp: Boundary, case: str, method: str, params: dict[str, Any], path: str
) -> None:
    mounted = mcp.stack.runtime_app[MOUNTED]
    before = mounted.native_answers
    native = _answer(mcp, path, rpc(method, params, ident=f"n-{case}", style="stateless"),
                     native=True)  # fmt: skip
    assert mounted.native_answers == before + (case not in DECLINED)
    sdk = _answer(mcp, path, rpc(method, params, ident=f"n-{case}", style="stateless"),
                  native=False)  # fmt: skip
    assert native == sdk
    assert native[0] in (200, 400)


def test_a_duplicate_is_answered_alike(mcp: Boundary) -> None:
    params = {"name": "inspect_context", "arguments": READ_ARGS,
              "_meta": {"io.seif/callId": "fast-dup"}}  # fmt: skip
    first = _answer(mcp, AUTHORING, rpc("tools/call", params, style="stateless"), native=True)
    again_native = _answer(mcp, AUTHORING, rpc("tools/call", params, style="stateless"),
                           native=True)  # fmt: skip
    again_sdk = _answer(mcp, AUTHORING, rpc("tools/call", params, style="stateless"),
                        native=False)  # fmt: skip
    assert first[2]["result"]["isError"] is False
    assert again_native == again_sdk
    assert "structuredContent" not in again_native[2]["result"]
    assert again_native[2]["result"]["_meta"]["io.seif/receipt"]["duplicate"] is True
    assert mcp.stats()["byCallId"]["fast-dup"] == 1


@pytest.mark.parametrize("native", [True, False], ids=["native", "sdk"])
@pytest.mark.parametrize("path", [LEARNER, AUTHORING])
def test_a_stateless_list_says_it_is_the_credential_s_own(
    mcp: Boundary, native: bool, path: str
) -> None:
    """``cacheScope: "private"`` (and ``ttlMs: 0``): the list depends on the credential that
    asked, so no shared cache may give it to another."""
    status, _, body = _answer(mcp, path, rpc("tools/list", {}, style="stateless"), native=native)
    assert status == 200
    assert body["result"]["cacheScope"] == "private"
    assert body["result"]["ttlMs"] == 0


def test_a_session_s_list_carries_no_caching_hints(mcp: Boundary) -> None:
    """The hints are the stateless revision's: a ``2025-11-25`` session's list has none."""
    session = mcp.open_session()
    listed = mcp.post(AUTHORING, rpc("tools/list"), session_headers(session)).result()
    assert listed["tools"]
    assert "cacheScope" not in listed and "ttlMs" not in listed
