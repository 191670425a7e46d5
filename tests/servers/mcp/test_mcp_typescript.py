"""The official MCP TypeScript SDK's client (``@modelcontextprotocol/sdk``, pinned in
``tests/node``) against a real ``seif serve --mcp`` on loopback: it lists the tools, then gets a
result it accepts, without throwing, for a read, its duplicate, an invalid call, an undisclosed
tool, a call over its tool's limit (a denial), a call whose executor never answered in time
(``UNKNOWN``), a write a human rejects and a write a human approves (through the runtime's
approval routes). Every refusal's text says what happened and what to do (an invalid call's
names each pointer, never a value) and its ``_meta`` carries the receipt; none carries a
``structuredContent`` (the client checks one against the tool's ``outputSchema`` and throws
``McpError -32602`` when it does not match, as a receipt never does). The approved write uses
the settings docs/mcp.md gives for a call that waits for a human: with
``resetTimeoutOnProgress``, seif's progress notifications keep a request alive past its own
``timeout``."""

from __future__ import annotations

import asyncio
import json
import os
from asyncio.subprocess import PIPE
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.mcp_support import CALL_ID, RECEIPT, mcp_url
from tests.support.node_support import node_script
from tests.support.runtime_harness import (
    APP_TOKEN,
    APPROVAL,
    EXECUTOR,
    PROPOSAL,
    READ_ARGS,
    TOOL_TOKENS,
    bindings_document,
    knobs,
    listening,
    run_async,
    serving,
    start_serve,
    stop,
    write_config,
)

APPROVER = {**APPROVAL, "x-seif-approver": "ops-ana"}
MARKER = "value-marker-3f9a"
"""A value in the invalid call's arguments that its text must never show."""
INVALID = {
    "query": "x",  # shorter than its minLength
    "limit": 987654,  # over its maximum: the text says "the value", not the number
    "filters": {"modules": list(range(700001, 700013)), "sections": [MARKER]},
}
WAIT = {"timeoutMs": 7000, "maxTotalMs": 120000}
"""The approved write's client settings: a timeout longer than seif's progress interval (5 s),
shorter than the human takes (who approves after the third notification, at about 10 s)."""
TOLD = 3
READ = {"name": "inspect_context", "arguments": READ_ARGS}
SEARCH = {"name": "search_knowledge", "arguments": {"query": "median", "limit": 3}}
WRITE = {"name": "propose_change", "arguments": PROPOSAL}
STEPS: list[dict[str, Any]] = [
    {"step": "read", **READ, "callId": "ts-read-1"},
    {"step": "duplicate", **READ, "callId": "ts-read-1"},
    {"step": "invalid", "name": "search_knowledge", "arguments": INVALID, "callId": "ts-bad"},
    {"step": "undisclosed", "name": "no_such_tool", "arguments": {}, "callId": "ts-none"},
    {"step": "read-2", **READ, "callId": "ts-read-2"},
    {"step": "read-3", **READ, "callId": "ts-read-3"},
    {"step": "denied", **READ, "callId": "ts-read-4"},  # inspect_context's maxCalls is 3
    {"step": "unknown", **SEARCH, "callId": "ts-late"},
    {"step": "rejected", **WRITE, "callId": "ts-no"},
    {"step": "approved", **WRITE, "callId": "ts-yes", "wait": WAIT},
]
TIMEOUT_MS = 300
"""search-knowledge's binding timeout; its executor answers later, so the call is UNKNOWN."""


def test_the_typescript_client_accepts_every_result(tmp_path: Path) -> None:
    node, script = node_script("mcp-client.mjs")
    lines, executions = run_async(_drive(tmp_path, node, script))
    assert [line["threw"] for line in lines if "threw" in line] == []
    by_step = {line["step"]: line["result"] for line in lines if "result" in line}
    assert list(by_step) == ["list", *(s["step"] for s in STEPS)]
    listed = by_step["list"]["tools"]
    assert [t["name"] for t in listed] == ["inspect_context", "search_knowledge", "propose_change"]
    assert all(t["outputSchema"]["type"] == "object" for t in listed)  # what the client checks
    for step in STEPS:
        assert by_step[step["step"]]["_meta"][CALL_ID] == step["callId"]
    _check_outputs(by_step)
    _check_refusals(by_step)
    progress = [line["progress"] for line in lines if "progress" in line]
    assert len(progress) >= TOLD and progress[-1]["total"] == 30
    assert by_step["approved"]["elapsedMs"] > WAIT["timeoutMs"]  # kept alive by progress
    assert executions == {"inspect-context": 3, "search-knowledge": 1, "propose-change": 1}


def _check_outputs(by_step: dict[str, Any]) -> None:
    for step in ("read", "read-2", "read-3", "approved"):
        result = by_step[step]
        assert result["isError"] is False, result
        assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
        assert RECEIPT not in result["_meta"]
    assert by_step["read"]["structuredContent"]["ref"] == READ_ARGS["ref"]


REFUSED = {
    "duplicate": ("SUCCEEDED", None, True, "nothing new ran"),
    "invalid": ("DENIED", "ARGUMENTS_INVALID", False, "correct them"),
    "undisclosed": ("DENIED", "TOOL_NOT_DISCLOSED", False, "list the tools"),
    "denied": ("DENIED", "CALL_LIMIT_EXCEEDED", False, "as often as allowed"),
    "unknown": ("UNKNOWN", "TIMEOUT", False, "may or may not have run"),
    "rejected": ("DENIED", "REJECTED", False, "a human rejected this call"),
}


def _check_refusals(by_step: dict[str, Any]) -> None:
    for step, (status, reason, duplicate, says) in REFUSED.items():
        result = by_step[step]
        assert result["isError"] is True and "structuredContent" not in result, result
        receipt = {"status": status, "reason": reason, "duplicate": duplicate}
        assert result["_meta"][RECEIPT] == receipt, step
        [content] = result["content"]
        assert content["type"] == "text" and says in content["text"], (step, content)
    text = by_step["invalid"]["content"][0]["text"]
    for said in (
        "/query: 1 characters is fewer than the minimum 2",
        "/limit: the value is greater than the maximum `10`",
        "/filters/modules: 12 items is more than the maximum 8",
        "/filters/modules/0: the value is greater than the maximum `12`",
        "; 6 more.",
    ):
        assert said in text, text
    for value in ("987654", "7000", MARKER):
        assert value not in text, text


async def _drive(root: Path, node: str, script: Path) -> tuple[list[dict[str, Any]], Any]:
    """Run the client against ``seif serve --mcp`` while an operator decides the writes: the
    lines it printed, and what the executor ran."""
    late = {"search-knowledge": knobs(delay_ms=TIMEOUT_MS + 700, routes=frozenset({"execute"}))}
    executor_app = EXECUTOR.create_app(tokens=TOOL_TOKENS, knobs=late)
    async with serving(executor_app) as executor_url:
        bindings = bindings_document(executor_url, {"search-knowledge": {"timeoutMs": TIMEOUT_MS}})
        config = write_config(root, executor_url, bindings=bindings)
        proc = start_serve(config, "--mcp", "--mcp-approval-wait", "30")
        try:
            base = await asyncio.to_thread(listening, proc)
            lines = await _client(node, script, base)
        finally:
            stop(proc)
    return lines, dict(executor_app[EXECUTOR.STATE].executions)


async def _client(node: str, script: Path, base: str) -> list[dict[str, Any]]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "SEIF_MCP_URL": mcp_url(base, "authoring", consumer="course-authoring"),
        "SEIF_APP_TOKEN": APP_TOKEN,
        "SEIF_STEPS": json.dumps(STEPS),
    }
    proc = await asyncio.create_subprocess_exec(
        node, str(script), env=env, stdout=PIPE, stderr=PIPE, limit=1 << 20
    )
    lines: list[dict[str, Any]] = []
    progressed = asyncio.Event()
    async with aiohttp.ClientSession() as http:
        operator = asyncio.ensure_future(_operator(http, base, progressed))
        try:
            assert proc.stdout is not None and proc.stderr is not None
            async for raw in proc.stdout:
                lines.append(json.loads(raw))
                if sum(1 for seen in lines if "progress" in seen) >= TOLD:
                    progressed.set()  # the write waited past its client's timeout
            await proc.wait()
            await asyncio.wait({operator}, timeout=10)  # its last answer may come after
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            operator.cancel()
        said = (lines, (await proc.stderr.read()).decode(errors="replace"))
    assert proc.returncode == 0, said
    assert not operator.cancelled() and operator.exception() is None, said
    return lines


async def _operator(http: aiohttp.ClientSession, base: str, progressed: asyncio.Event) -> None:
    """The human at the approval desk: rejects ``ts-no`` once it is held, approves ``ts-yes``
    once its client has been told of its progress :data:`TOLD` times."""
    await _decide(http, base, "reject", await _held(http, base, "ts-no"))
    await asyncio.wait_for(progressed.wait(), 60)
    await _decide(http, base, "approve", await _held(http, base, "ts-yes"))


async def _held(http: aiohttp.ClientSession, base: str, call_id: str) -> dict[str, Any]:
    async def found() -> dict[str, Any] | None:
        url = f"{base}/v1/context/tools/pending"
        async with http.get(url, headers=APPROVAL) as reply:
            assert reply.status == 200, await reply.text()
            pending = (await reply.json())["pending"]
        return next((item for item in pending if item["callId"] == call_id), None)

    return await _polled(found, 60)


async def _polled(check: Callable[[], Awaitable[Any]], timeout: float) -> Any:
    async def loop() -> Any:
        while not (found := await check()):
            await asyncio.sleep(0.05)
        return found

    return await asyncio.wait_for(loop(), timeout)


async def _decide(http: aiohttp.ClientSession, base: str, kind: str, item: dict[str, Any]) -> None:
    body = {k: item[k] for k in ("contextRef", "tool", "callId", "arguments")}
    body["reason"] = "checked"
    url = f"{base}/v1/context/tools/{kind}"
    async with http.post(url, json=body, headers=APPROVER) as reply:
        assert reply.status == 200, await reply.text()
