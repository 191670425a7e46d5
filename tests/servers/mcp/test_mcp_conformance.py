"""The official MCP conformance suite (``@modelcontextprotocol/conformance``, pinned in
``tests/node``, run on the Node 22 it needs) against a real ``seif serve --mcp`` on loopback:
every server scenario of the suite either runs and passes (:data:`RUN`) or is said not to
apply to seif, and why (:data:`NOT_APPLICABLE`); a scenario a new version of the suite adds
fails the first test until it is placed.

The scenarios call tools by fixed names (``test_simple_text``, ...): the project
``conformance-project.json`` beside this file declares them, and a small executor here serves
them. The suite's client sends no credential, and seif answers 401 to a request without one:
``bearer.mjs`` (loaded with ``node --import``) adds the application's bearer token to the
requests the suite sends to seif, as a configured client would (``docs/mcp.md``). The
``dns-rebinding-protection`` scenario sends its requests with ``undici`` rather than ``fetch``
(it sets ``Host``, which ``fetch`` may not): it runs through a small loopback proxy here that
adds the token and forwards ``Host`` and ``Origin`` as sent (:func:`_proxy`)."""

from __future__ import annotations

import asyncio
import hmac
import json
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from compiler import compile_project
from compiler.builds.build import write_build
from policy.ir import Tool
from tests.support.mcp_support import mcp_url
from tests.support.node_support import PACKAGE, node_script
from tests.support.runtime_harness import (
    APP_TOKEN,
    APPROVAL,
    TOOL_ENV,
    TOOL_TOKENS,
    Threaded,
    in_thread,
    listening,
    serving,
    start_serve,
    stop,
    write_config,
)

PROJECT = Path(__file__).with_name("conformance-project.json")
CLI = "node_modules/@modelcontextprotocol/conformance/dist/index.js"
CONTRACT = "context-tool-executor.v1"
TOKEN = TOOL_TOKENS["inspect-context"]
"""The executor's bearer token (its variable is one ``seif serve`` is given in the tests)."""
SIMPLE_TEXT = "This is a simple text response for testing."
APPROVE_AFTER_S = 10.5
"""The progress scenario wants three notifications: seif sends one every 5 seconds while a
call waits for its approval, the first at once; the operator approves after the third."""

RUN = {
    "server-initialize": "the 2025-11-25 handshake (initialize, then initialized)",
    "ping": "the SDK's ping",
    "tools-list": "what the policy discloses, each with a name, description and inputSchema",
    "tools-call-simple-text": "a read whose output comes back as JSON text",
    "tools-call-error": "a call whose executor fails: isError with a text",
    "tools-call-with-progress": "a write waiting for its approval: progress every 5 s",
    "server-sse-multiple-streams": "concurrent requests of one session, each its own stream",
    "dns-rebinding-protection": "a Host and Origin of another name are refused (403) before the "
    "token is looked at, loopback ones served: through a proxy adding the token (the suite "
    "sends none)",
}
THROUGH_THE_PROXY = frozenset({"dns-rebinding-protection"})
NOT_APPLICABLE = {
    "logging-set-level": "seif sends no log messages to clients (the decision log is its record)",
    "completion-complete": "completions are for prompts and resources, which seif does not serve",
    "tools-call-image": "a seif tool's output is JSON (text and structuredContent), never an image",
    "tools-call-audio": "a seif tool's output is JSON, never audio",
    "tools-call-embedded-resource": "a seif tool's output is JSON, never a resource",
    "tools-call-mixed-content": "a seif tool's output is JSON, one text content",
    "tools-call-with-logging": "seif sends no log messages to clients",
    "tools-call-sampling": "seif never asks the client's model (no sampling)",
    "tools-call-elicitation": "seif never asks the client's user (approval is a human's at the "
    "approval desk, never the MCP client's)",
    "elicitation-sep1034-defaults": "seif never elicits",
    "elicitation-sep1330-enums": "seif never elicits",
    "json-schema-2020-12": "a seif parameter schema is a closed subset of JSON Schema without "
    "`$schema`, `$defs` and `$ref` (seif validate refuses them): no tool can have that shape",
    "server-sse-polling": "seif keeps no event store, so it sends no priming event and never "
    "closes a stream for the client to resume (SEP-1699's polling is optional)",
    "resources-list": "resources are out of scope (docs/mcp.md)",
    "resources-read-text": "resources are out of scope",
    "resources-read-binary": "resources are out of scope",
    "resources-templates-read": "resources are out of scope",
    "resources-subscribe": "resources are out of scope",
    "resources-unsubscribe": "resources are out of scope",
    "prompts-list": "prompts are out of scope (docs/mcp.md)",
    "prompts-get-simple": "prompts are out of scope",
    "prompts-get-with-args": "prompts are out of scope",
    "prompts-get-embedded-resource": "prompts are out of scope",
    "prompts-get-with-image": "prompts are out of scope",
}


# ---------------------------------------------------------------------- the executor


def _executor(tools: dict[str, Tool]) -> web.Application:
    """The tools of :data:`PROJECT` over ``context-tool-executor.v1``: ``test-error-handling``
    answers ``ok: false``, the others a text."""

    def descriptor(tool: Tool) -> dict[str, Any]:
        return {"id": tool.id, "version": tool.version, "contractDigest": tool.contract_digest}

    def tool_of(request: web.Request) -> Tool:
        given = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, f"Bearer {TOKEN}".encode()):
            raise web.HTTPUnauthorized()
        found = tools.get(request.match_info["tool"])
        if found is None:
            raise web.HTTPNotFound()
        return found

    async def describe(request: web.Request) -> web.Response:
        return web.json_response({"contract": CONTRACT, "tool": descriptor(tool_of(request))})

    async def execute(request: web.Request) -> web.Response:
        tool = tool_of(request)
        body = await request.json()
        assert body["tool"] == descriptor(tool) and body["arguments"] == {}, body
        if tool.id == "test-error-handling":
            error = {"code": "INTENTIONAL_ERROR", "message": "this tool always fails"}
            return web.json_response({"contract": CONTRACT, "ok": False, "error": error})
        output = {"text": SIMPLE_TEXT}
        return web.json_response({"contract": CONTRACT, "ok": True, "output": output})

    app = web.Application()
    app.router.add_get("/{tool}/describe", describe)
    app.router.add_post("/{tool}/execute", execute)
    return app


# ---------------------------------------------------------------------- seif serve


@dataclass
class Served:
    url: str
    """The objective's MCP endpoint."""
    runtime: str
    proxied: str
    """The objective's MCP endpoint through :func:`_proxy`."""


HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length"})


@asynccontextmanager
async def _proxy(runtime: str) -> AsyncIterator[str]:
    """A loopback proxy to ``runtime`` (its base URL) that adds the application's bearer token
    and forwards every other header as sent, ``Host`` and ``Origin`` among them; its base URL.
    Answers are forwarded whole (the scenario's are single JSON-RPC answers)."""

    async def forward(request: web.Request) -> web.Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        headers["Authorization"] = f"Bearer {APP_TOKEN}"
        url = runtime + request.rel_url.raw_path_qs
        body = await request.read()
        async with http.request(request.method, url, data=body, headers=headers) as answer:
            got = await answer.read()
            back = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_BY_HOP}
            return web.Response(status=answer.status, body=got, headers=back)

    app = web.Application()
    app.router.add_route("*", "/{path:.*}", forward)
    async with aiohttp.ClientSession(auto_decompress=False) as http, serving(app) as url:
        yield url


@asynccontextmanager
async def _served(root: Path) -> AsyncIterator[Served]:
    """The executor, and ``seif serve --mcp`` of :data:`PROJECT` bound to it."""
    project = compile_project(PROJECT)
    write_build(project, root / "build")
    async with serving(_executor({t.id: t for t in project.tools})) as executor_url:
        endpoint = {"secretRef": f"env:{TOOL_ENV['inspect-context']}"}
        tools = {t.id: {"endpoint": f"{executor_url}/{t.id}", **endpoint} for t in project.tools}
        bindings = {"environment": "test", "revision": 1, "tools": tools}
        config = write_config(root, executor_url, bindings=bindings)
        proc = start_serve(config, "--mcp", "--mcp-approval-wait", "60")
        try:
            base = await asyncio.to_thread(listening, proc)
            async with _proxy(base) as proxy:
                yield Served(mcp_url(base, "conformance"), base, mcp_url(proxy, "conformance"))
        finally:
            stop(proc)


@pytest.fixture(scope="module")
def seif(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Threaded[Served]]:
    node_script(CLI)  # the suite is installed (else the tests skip) before seif starts
    with in_thread(_served(tmp_path_factory.mktemp("conformance")), "conformance") as served:
        yield served


# ---------------------------------------------------------------------- the suite


def _suite(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The conformance CLI with ``args``, on Node 22, the bearer token added to seif's URL."""
    node, cli = node_script(CLI)
    env = {"PATH": os.environ.get("PATH", ""), "SEIF_APP_TOKEN": APP_TOKEN, "NO_COLOR": "1"}
    return subprocess.run(
        [node, "--import", str(PACKAGE / "bearer.mjs"), str(cli), *args],
        cwd=PACKAGE, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def test_every_server_scenario_is_run_or_said_not_to_apply() -> None:
    listed = _suite("list", "--server")
    assert listed.returncode == 0, listed.stderr
    names = {line.strip()[2:].split(" ")[0] for line in listed.stdout.splitlines()
             if line.strip().startswith("- ")}  # fmt: skip
    assert names == set(RUN) | set(NOT_APPLICABLE)
    assert not set(RUN) & set(NOT_APPLICABLE)


@pytest.mark.parametrize("scenario", list(RUN))
def test_the_conformance_suite_s_server_scenario_passes(
    seif: Threaded[Served], scenario: str, tmp_path: Path
) -> None:
    operator = None
    if scenario == "tools-call-with-progress":
        operator = asyncio.run_coroutine_threadsafe(_approve_when_told(seif.stack), seif.loop)
    try:
        url = seif.stack.proxied if scenario in THROUGH_THE_PROXY else seif.stack.url
        done = _suite("server", "--url", url, "--scenario", scenario,
                      "--output-dir", str(tmp_path))  # fmt: skip
    finally:
        if operator is not None:
            operator.result(30)
    [checks_file] = tmp_path.rglob("checks.json")
    checks = json.loads(checks_file.read_text(encoding="utf-8"))
    graded = [(c["id"], c["status"], c.get("errorMessage")) for c in checks
              if c["status"] != "INFO"]  # fmt: skip
    assert graded and all(status == "SUCCESS" for _, status, _ in graded), (graded, done.stdout)
    assert done.returncode == 0, (done.stdout, done.stderr)


async def _approve_when_told(served: Served) -> None:
    """The operator: approves the held ``test-tool-with-progress`` call once its client has been
    told of the wait three times."""
    async with aiohttp.ClientSession() as http:
        while True:
            url = f"{served.runtime}/v1/context/tools/pending"
            async with http.get(url, headers=APPROVAL) as reply:
                pending = (await reply.json())["pending"]
            held = [p for p in pending if p["tool"] == "test-tool-with-progress"]
            if held:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(APPROVE_AFTER_S)
        body = {k: held[0][k] for k in ("contextRef", "tool", "callId", "arguments")}
        approver = {**APPROVAL, "x-seif-approver": "ops-ana"}
        url = f"{served.runtime}/v1/context/tools/approve"
        async with http.post(url, json={**body, "reason": "conformance"}, headers=approver) as r:
            assert r.status == 200, await r.text()
