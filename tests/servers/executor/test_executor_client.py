"""The executor client against real loopback servers: the reference executor (with its test
knobs) and small scripted aiohttp apps. No part of the client is mocked."""

from __future__ import annotations

import asyncio
import hashlib
import json
import runpy
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from compiler import compile_project
from policy.engine.disclosure import availability
from policy.json.strict import loads
from servers.executor.client import (
    CONTRACT,
    ExecutorClient,
    Outcome,
    execute_body,
    new_transport,
)
from servers.executor.interface import idempotency_key
from tests.support.paths import ROOT
from tests.support.runtime_harness import COORDS, PlainBinding, execute_request, serving

IR = compile_project(ROOT / "reference" / "agent-tools" / "context-project.json")
TOOLS = IR.tool_by_id
TOKEN = "tok-inspect-5f1c9a"


# the example is a script in a folder with a dash: load its namespace, not a package
REF = runpy.run_path(str(ROOT / "examples" / "reference-tools" / "executor.py"))

ARGUMENTS = {
    "inspect-context": {"ref": "course/data-literacy/module-2/lesson-3", "section": "lesson"},
    "search-knowledge": {"query": "median outliers", "limit": 3},
    "propose-change": {
        "target": "course/data-literacy/module-2/lesson-3",
        "kind": "correct",
        "summary": "State that extreme values can shift the median in very small samples.",
    },
}
run = asyncio.run


@asynccontextmanager
async def reference(**options: Any) -> AsyncIterator[tuple[str, web.Application]]:
    app = REF["create_app"](**options)
    async with serving(app) as base:
        yield base, app


@asynccontextmanager
async def client() -> AsyncIterator[ExecutorClient]:
    transport = new_transport()
    try:
        yield ExecutorClient(transport)
    finally:
        await transport.close()


def body_for(tool_id: str, call_id: str = "c1", **coords: Any) -> dict[str, Any]:
    return execute_request(TOOLS[tool_id], ARGUMENTS[tool_id], call_id, **coords)


async def stats(base: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as session, session.get(base + "/_stats") as r:
        result: dict[str, Any] = await r.json()
        return result


async def on_reference(
    kind: str, tool_id: str, binding_options: dict[str, Any] | None = None, **options: Any
) -> tuple[Any, dict[str, Any]]:
    """One ``describe`` or ``execute`` against a fresh reference executor, and its stats."""
    async with reference(**options) as (base, _app), client() as c:
        binding = PlainBinding(tool_id, f"{base}/{tool_id}", **(binding_options or {}))
        if kind == "describe":
            return await c.describe(binding), await stats(base)
        return await c.execute(binding, TOOLS[tool_id], body_for(tool_id)), await stats(base)


def describe_ref(tool_id: str, binding: dict[str, Any] | None = None, **options: Any) -> Any:
    return run(on_reference("describe", tool_id, binding, **options))[0]


def execute_ref(tool_id: str, binding: dict[str, Any] | None = None, **options: Any) -> Any:
    return run(on_reference("execute", tool_id, binding, **options))


def knobs(tool_id: str, **kw: Any) -> dict[str, Any]:
    return {tool_id: REF["Knobs"](**kw)}


# --- scripted servers ------------------------------------------------------------------------


Seen = list[tuple[str, str, dict[str, str], bytes]]
"""What a scripted server received: method, path, headers, body."""


def scripted(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> tuple[web.Application, Seen]:
    seen: Seen = []

    async def record(request: web.Request) -> web.StreamResponse:
        seen.append((request.method, request.path, dict(request.headers), await request.read()))
        return await handler(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    return app, seen


def answer(body: bytes, status: int = 200) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(_request: web.Request) -> web.Response:
        return web.Response(body=body, status=status, content_type="application/json")

    return handler


async def execute_scripted(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    bound_tool: str = "inspect-context",
    **binding_options: Any,
) -> tuple[Outcome, Seen]:
    """Execute ``inspect-context`` through a binding of ``bound_tool`` to a scripted server."""
    app, seen = scripted(handler)
    async with serving(app) as base, client() as c:
        binding = PlainBinding(bound_tool, f"{base}/x", **binding_options)
        tool = TOOLS["inspect-context"]
        return await c.execute(binding, tool, body_for(tool.id)), seen


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# --- describe ----------------------------------------------------------------------------------


def test_describe_ready_with_the_declared_contract() -> None:
    tool = TOOLS["inspect-context"]
    seen = describe_ref("inspect-context", {"secret": TOKEN}, tokens={"inspect-context": TOKEN})
    assert seen == {"state": "READY", "version": "1.0.0", "contractDigest": tool.contract_digest}
    assert availability(tool, seen) is None


def test_describe_changed_digest_is_incompatible() -> None:
    tool = TOOLS["search-knowledge"]
    seen = describe_ref("search-knowledge", knobs=knobs("search-knowledge", changed_digest=True))
    assert seen["state"] == "READY" and seen["contractDigest"] != tool.contract_digest
    assert availability(tool, seen) == "TOOL_INCOMPATIBLE"


def test_describe_of_another_tool_is_unavailable() -> None:
    async def scenario() -> dict[str, Any]:
        async with reference() as (base, _app), client() as c:
            return await c.describe(PlainBinding("search-knowledge", f"{base}/inspect-context"))

    assert run(scenario()) == {"state": "UNAVAILABLE", "detail": "TOOL_MISMATCH"}


@pytest.mark.parametrize("secret", [None, "wrong-token"])
def test_describe_unauthenticated(secret: str | None) -> None:
    seen = describe_ref("inspect-context", {"secret": secret}, tokens={"inspect-context": TOKEN})
    assert seen == {"state": "UNAVAILABLE", "detail": "HTTP_401"}


@pytest.mark.parametrize(
    ("knob", "detail"),
    [
        ({"redirect": True}, "REDIRECT"),
        ({"oversized_bytes": 100_000}, "TOO_LARGE"),
        ({"invalid_json": True}, "INVALID_RESPONSE"),
        ({"reflect": "raw"}, "CREDENTIAL_REFLECTED"),
        ({"reflect": "escaped"}, "CREDENTIAL_REFLECTED"),
        ({"reflect": "header"}, "CREDENTIAL_REFLECTED"),
        ({"delay_ms": 600}, "TIMEOUT"),
    ],
)
def test_describe_misbehaviour_is_unavailable(knob: dict[str, Any], detail: str) -> None:
    seen = describe_ref(
        "inspect-context",
        {"secret": TOKEN, "timeout_ms": 200},
        tokens={"inspect-context": TOKEN},
        knobs=knobs("inspect-context", **knob),
    )
    assert seen == {"state": "UNAVAILABLE", "detail": detail}


# --- execute -----------------------------------------------------------------------------------


@pytest.mark.parametrize("tool_id", sorted(ARGUMENTS))
def test_execute_succeeds_with_a_valid_output(tool_id: str) -> None:
    outcome, counters = execute_ref(tool_id)
    assert outcome.status == "SUCCEEDED" and outcome.reason is None
    validator = TOOLS[tool_id].result_validator
    assert validator is not None and validator.is_valid(outcome.output)
    key = idempotency_key(COORDS["build"], COORDS["context"], "c1")
    assert counters["executions"] == {tool_id: 1}
    assert counters["byIdempotencyKey"] == {key: 1} and counters["byCallId"] == {"c1": 1}


@pytest.mark.parametrize(
    ("knob", "expected"),
    [
        ({"invalid_output": True}, Outcome("FAILED", reason="RESULT_INVALID")),
        ({"oversized_bytes": 500_000}, Outcome("UNKNOWN", reason="TOO_LARGE")),
        ({"invalid_json": True}, Outcome("UNKNOWN", reason="INVALID_RESPONSE")),
    ],
)
def test_a_bad_answer_after_the_action(knob: dict[str, Any], expected: Outcome) -> None:
    bad = knobs("inspect-context", **knob)
    outcome, counters = execute_ref("inspect-context", {"max_bytes": 4096}, knobs=bad)
    assert outcome == expected  # the output, if any, is withheld
    assert counters["executions"] == {"inspect-context": 1}


def test_ok_false_keeps_the_code_only() -> None:
    failing = knobs("search-knowledge", fail_code="BACKEND_BUSY")
    outcome, counters = execute_ref("search-knowledge", knobs=failing)
    assert outcome == Outcome("FAILED", reason="EXECUTOR_ERROR", error_code="BACKEND_BUSY")
    assert counters["executions"] == {}


@pytest.mark.parametrize("code", ["has spaces", "x" * 65, 42, None])
def test_error_code_that_is_not_a_short_code_is_dropped(code: Any) -> None:
    document = {"contract": CONTRACT, "ok": False, "error": {"code": code, "message": "m"}}
    outcome, _ = run(execute_scripted(answer(json.dumps(document).encode(), 422)))
    assert outcome == Outcome("FAILED", reason="EXECUTOR_ERROR", error_code=None)


def test_the_executor_authorizes_from_its_own_state() -> None:
    async def scenario() -> tuple[Outcome, Outcome, Outcome, dict[str, Any]]:
        async with reference(tokens={"propose-change": TOKEN}) as (base, _app), client() as c:
            tool = TOOLS["propose-change"]
            binding = PlainBinding(tool.id, f"{base}/{tool.id}", secret=TOKEN)
            outside = body_for(tool.id, "c-out")
            outside["arguments"] = {**ARGUMENTS[tool.id], "target": "billing/invoices/1"}
            stranger = body_for(tool.id, "c-stranger", consumer="model-said-admin")
            unauthenticated = PlainBinding(tool.id, binding.endpoint)
            return (
                await c.execute(binding, tool, outside),
                await c.execute(binding, tool, stranger),
                await c.execute(unauthenticated, tool, body_for(tool.id)),
                await stats(base),
            )

    outside, stranger, unauthenticated, counters = run(scenario())
    assert outside.error_code == "TARGET_NOT_ALLOWED" and outside.status == "FAILED"
    assert stranger.error_code == "CONSUMER_NOT_ALLOWED" and stranger.status == "FAILED"
    assert unauthenticated.error_code == "UNAUTHENTICATED"
    assert counters["executions"] == {} and counters["proposals"] == 0


def test_a_repeated_idempotency_key_makes_one_proposal() -> None:
    async def scenario() -> tuple[Outcome, Outcome, dict[str, Any]]:
        async with reference() as (base, _app), client() as c:
            tool = TOOLS["propose-change"]
            binding = PlainBinding(tool.id, f"{base}/{tool.id}")
            first = await c.execute(binding, tool, body_for(tool.id))
            return first, await c.execute(binding, tool, body_for(tool.id)), await stats(base)

    first, second, counters = run(scenario())
    assert first.output == second.output and first.output["status"] == "pending-review"
    assert counters["proposals"] == 1


def test_redirect_is_never_followed() -> None:
    target_app, target_seen = scripted(answer(b'{"contract":"x"}'))

    async def scenario() -> tuple[Outcome, int]:
        async with serving(target_app) as elsewhere:

            async def redirect(_request: web.Request) -> web.Response:
                raise web.HTTPFound(elsewhere + "/stolen")

            far, _ = await execute_scripted(redirect)
            return far, len(target_seen)

    far, far_hits = run(scenario())
    near, counters = execute_ref("inspect-context", knobs=knobs("inspect-context", redirect=True))
    assert far == Outcome("UNKNOWN", reason="REDIRECT") == near
    assert far_hits == 0 and counters["redirectTargetHits"] == 0


@pytest.mark.parametrize("how", ["raw", "escaped", "header"])
def test_credential_reflection_discards_the_output(how: str) -> None:
    outcome, _ = execute_ref(
        "inspect-context",
        {"secret": TOKEN},
        tokens={"inspect-context": TOKEN},
        knobs=knobs("inspect-context", reflect=how),
    )
    assert outcome == Outcome("UNKNOWN", reason="CREDENTIAL_REFLECTED")
    assert TOKEN not in repr(outcome)


def test_timeout_is_unknown_and_the_action_happened() -> None:
    async def scenario() -> tuple[Outcome, float, dict[str, Any]]:
        options = {"knobs": knobs("inspect-context", delay_ms=600)}
        async with reference(**options) as (base, _app), client() as c:
            tool = TOOLS["inspect-context"]
            started = time.monotonic()
            binding = PlainBinding(tool.id, f"{base}/{tool.id}", timeout_ms=150)
            outcome = await c.execute(binding, tool, body_for(tool.id))
            return outcome, time.monotonic() - started, await stats(base)

    outcome, elapsed, counters = run(scenario())
    assert outcome == Outcome("UNKNOWN", reason="TIMEOUT")
    assert 0.1 < elapsed < 0.5
    assert counters["executions"] == {"inspect-context": 1}


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b" " * 70_000, 200),  # declared length past max_bytes: TOO_LARGE
        (b"[]", 200),
        (b'{"contract": "other.v1", "ok": true, "output": {}}', 200),
        (b'{"contract": "context-tool-executor.v1", "ok": "yes", "output": {}}', 200),
        (b'{"contract": "context-tool-executor.v1", "ok": true}', 200),
        (b'{"contract": "context-tool-executor.v1", "ok": true, "output": {}}', 500),
        (b'{"contract": "context-tool-executor.v1", "ok": true, "ok": true, "output": 1}', 200),
        (b'{"contract": "context-tool-executor.v1", "ok": true, "output": NaN}', 200),
        (b"\xff\xfe", 200),
        (b"<html>bad gateway</html>", 502),
    ],
)
def test_a_response_outside_the_protocol_is_unknown(raw: bytes, status: int) -> None:
    outcome, _ = run(execute_scripted(answer(raw, status)))
    reason = "TOO_LARGE" if len(raw) > 65536 else "INVALID_RESPONSE"
    assert outcome == Outcome("UNKNOWN", reason=reason)


def test_connection_refused_is_failed_before_sending() -> None:
    async def scenario() -> tuple[Outcome, dict[str, Any]]:
        binding = PlainBinding("inspect-context", f"http://127.0.0.1:{free_port()}/inspect-context")
        async with client() as c:
            tool = TOOLS["inspect-context"]
            return await c.execute(binding, tool, body_for(tool.id)), await c.describe(binding)

    outcome, seen = run(scenario())
    assert outcome == Outcome("FAILED", reason="CONNECTION_REFUSED")
    assert seen == {"state": "UNAVAILABLE", "detail": "CONNECTION_REFUSED"}


def test_a_dropped_connection_is_unknown_and_not_retried() -> None:
    async def drop(request: web.Request) -> web.Response:
        assert request.transport is not None
        request.transport.close()
        return web.Response()

    outcome, seen = run(execute_scripted(drop))
    assert outcome == Outcome("UNKNOWN", reason="CONNECTION_LOST")
    assert len(seen) == 1


def test_binding_of_another_tool_sends_nothing() -> None:
    outcome, seen = run(execute_scripted(answer(b"{}"), bound_tool="search-knowledge"))
    assert outcome == Outcome("FAILED", reason="BINDING_MISMATCH") and not seen


# --- the request itself -----------------------------------------------------------------------


def test_idempotency_key_formula() -> None:
    key = idempotency_key("sha256:b", "ctx-9", "call-1")
    assert key == hashlib.sha256(b"sha256:b|ctx-9|call-1").hexdigest()
    assert len(key) == 64 and key == key.lower()
    assert key != idempotency_key("sha256:b", "ctx-9", "call-2")
    assert key != idempotency_key("sha256:c", "ctx-9", "call-1")


def test_the_request_is_exactly_the_protocol_body() -> None:
    tool = TOOLS["inspect-context"]
    document = {
        "contract": CONTRACT,
        "ok": True,
        "output": {"ref": "r", "title": "t", "reviewState": "reviewed", "revision": 1, "text": ""},
    }
    outcome, seen = run(
        execute_scripted(answer(json.dumps(document).encode()), secret="s3cret-token")
    )
    assert outcome.status == "SUCCEEDED"
    [(method, path, headers, raw)] = seen
    assert (method, path) == ("POST", "/x/execute")
    assert headers["Authorization"] == "Bearer s3cret-token"
    key = hashlib.sha256(f"{COORDS['build']}|ctx-1|c1".encode()).hexdigest()
    assert loads(raw) == {
        "contract": "context-tool-executor.v1",
        "tool": {"id": tool.id, "version": "1.0.0", "contractDigest": tool.contract_digest},
        "arguments": ARGUMENTS[tool.id],
        "callId": "c1",
        "idempotencyKey": key,
        "coordinates": COORDS,
    }
    assert " ".join(COORDS) == "build consumer objective environment deployment trace context"
    with pytest.raises(ValueError, match="missing"):
        execute_body(tool, {}, "c", "k", {k: v for k, v in COORDS.items() if k != "trace"})
    with pytest.raises(ValueError, match="unknown"):
        execute_body(tool, {}, "c", "k", {**COORDS, "secret": "x"})


def test_no_authorization_header_without_a_secret() -> None:
    async def scenario() -> Seen:
        app, seen = scripted(answer(b"{}"))
        async with serving(app) as base, client() as c:
            await c.describe(PlainBinding("inspect-context", f"{base}/x"))
        return seen

    [(method, path, headers, _raw)] = run(scenario())
    assert (method, path) == ("GET", "/x/describe") and "Authorization" not in headers


def test_proxies_in_the_environment_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{free_port()}")  # nobody listens there
    outcome, seen = run(execute_scripted(answer(b'{"contract": "x"}')))
    assert outcome == Outcome("UNKNOWN", reason="INVALID_RESPONSE") and len(seen) == 1


# --- cancellation ------------------------------------------------------------------------------
