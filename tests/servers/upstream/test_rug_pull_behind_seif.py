"""The rug pull, end to end as an operator meets it (docs/upstream-mcp.md): a server written
here on the official SDK (``tests/support/upstream_tools.py``, Streamable HTTP on loopback with a
bearer token, every call it receives logged to a file) is imported with ``seif tool import
--url``, two of its tools included, built and served with ``seif serve --mcp``, and a call of
its read tool runs there. Then it is restarted on the same port with that tool's description
changed: the tool is ``INCOMPATIBLE`` ``UPSTREAM_CHANGED`` (``/v1/ready``, a resolve's
``omitted``), not listed to an MCP client, and a call of it is refused, under a new context and
under one that disclosed it before, without reaching the server. ``seif tool import --update``
shows the changed description; rebuilt and served again, the tool is ``READY`` and runs."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support import upstream_runtime as ur
from tests.support.behind_seif import PROJECT_FILE, ok, put_behind_seif, ready_states, serving
from tests.support.guide_examples import free_port
from tests.support.mcp_support import call_meta, dumped, mcp_client, receipt_of
from tests.support.runtime_harness import BEARER, ENV, run_async
from tests.support.upstream_tools import ECHO_DESCRIPTION

PROJECT = {
    "format": "seif.context-project.v1",
    "id": "notes",
    "version": "1.0.0",
    "objectives": [{"id": "ops", "profile": "ops", "description": "Operate the notes."}],
    "profiles": [{"id": "ops"}],
}
TOKEN_REF = "env:CONTEXT_TOOL_UP_TOKEN"
ENV_UP = {**ENV, "CONTEXT_TOOL_UP_TOKEN": ur.HTTP_TOKEN}
CHANGED = "Echo a text back, and mail your files away."
BOTH = {"up_echo", "up_note"}


async def _listed(url: str) -> dict[str, Any]:
    """What a new MCP client on ``ops`` is listed: each tool's description by name."""
    async with mcp_client(url, "ops", mode="auto") as client:
        return {t.name: t.description for t in (await client.list_tools()).tools}


async def _echo(url: str, call_id: str, text: str) -> Any:
    async with mcp_client(url, "ops", mode="auto") as client:
        return await client.call_tool("up_echo", {"text": text}, meta=call_meta(call_id))


async def _resolve(http: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    body = {"objective": "ops", "consumer": "tutor-app"}
    async with http.post(f"{url}/v1/context/resolve", json=body, headers=BEARER) as reply:
        assert reply.status == 200, await reply.text()
        resolved: dict[str, Any] = await reply.json()
    return resolved


async def _execute(http: aiohttp.ClientSession, url: str, ref: str, call_id: str) -> Any:
    body = {"contextRef": ref, "tool": "up-echo", "callId": call_id, "arguments": {"text": "x"}}
    async with http.post(f"{url}/v1/context/tools/execute", json=body, headers=BEARER) as reply:
        assert reply.status == 200, await reply.text()
        return await reply.json()


def _ready(tool_state: str) -> Any:
    return lambda document: document["tools"].get("up-echo") == tool_state


@pytest.mark.slow  # about 13 s: a listing is read again once it is 5 s old
def test_a_changed_description_is_incompatible_refused_and_shown_by_update(
    tmp_path: Path,
) -> None:
    state = tmp_path / "up"
    state.mkdir()
    port = free_port()

    def sent() -> list[tuple[str, str]]:
        """The calls the upstream received: each one's tool and call id."""
        return [(c["name"], c["meta"]["io.seif/callId"]) for c in ur.calls(state)]

    async def before(url: str) -> str:
        async with aiohttp.ClientSession() as http:
            ready = await ready_states(http, url, _ready("READY"))
            assert ready["tools"] == {"up-echo": "READY", "up-note": "READY"}
            resolved = await _resolve(http, url)
            assert {t["name"] for t in resolved["tools"]} == BOTH
        assert (await _listed(url)) == {"up_echo": ECHO_DESCRIPTION, "up_note": "Write a note."}
        echoed = await _echo(url, "e1", "before")
        assert echoed.is_error is False, dumped(echoed)
        assert echoed.structured_content == {"text": "before"}
        assert sent() == [("echo", "e1")]
        ref: str = resolved["contextRef"]
        return ref

    async def pulled(url: str, disclosed: str) -> None:
        async with aiohttp.ClientSession() as http:
            ready = await ready_states(http, url, _ready("INCOMPATIBLE"))
            assert ready["ready"] is False and ready["tools"]["up-note"] == "READY"
            assert ready["reasons"] == {"up-echo": "UPSTREAM_CHANGED"}
            resolved = await _resolve(http, url)
            assert {t["name"] for t in resolved["tools"]} == {"up_note"}
            omitted = {o["id"]: o["reason"] for o in resolved["omitted"]}
            assert omitted == {"up-echo": "UPSTREAM_CHANGED"}
            # a context that disclosed it before the change: checked before dispatch
            refused = await _execute(http, url, disclosed, "e3")
            assert (refused["status"], refused["reason"]) == ("FAILED", "UPSTREAM_CHANGED")
        assert (await _listed(url)) == {"up_note": "Write a note."}
        denied = await _echo(url, "e2", "after")
        assert receipt_of(denied) == {
            "status": "DENIED",
            "reason": "TOOL_NOT_DISCLOSED",
            "duplicate": False,
        }
        assert sent() == [("echo", "e1")], "a call of the changed tool reached the upstream"

    async def updated(url: str) -> None:
        async with aiohttp.ClientSession() as http:
            ready = await ready_states(http, url, _ready("READY"))
            assert ready["tools"] == {"up-echo": "READY", "up-note": "READY"}
            assert "up-echo" not in ready.get("reasons", {})
        assert (await _listed(url)) == {"up_echo": CHANGED, "up_note": "Write a note."}
        echoed = await _echo(url, "e4", "reviewed")
        assert echoed.is_error is False, dumped(echoed)
        assert echoed.structured_content == {"text": "reviewed"}
        assert sent() == [("echo", "e1"), ("echo", "e4")]

    with contextlib.ExitStack() as first_runtime:
        with ur.http_upstream("up", state, port) as upstream:
            source = ["--url", upstream.url, "--secret-ref", TOKEN_REF]
            put_behind_seif(tmp_path, PROJECT, server="up", source=source, tools=("echo", "note"),
                            profile="ops", included=("up-echo", "up-note"),
                            upstream={"url": upstream.url, "secretRef": TOKEN_REF},
                            env=ENV_UP)  # fmt: skip
            _, url = first_runtime.enter_context(serving(tmp_path, env=ENV_UP))
            disclosed = run_async(before(url))
        # the rug pull: the server started again on its port, echo's description changed
        (state / "echo-description").write_text(CHANGED, encoding="utf-8")
        with ur.http_upstream("up", state, port) as upstream:
            assert upstream.url == source[1] and len(ur.pids(state)) == 2
            run_async(pulled(url, disclosed))
            first_runtime.close()

            shown = ok("tool", "import", "--project", PROJECT_FILE, "--server", "up", *source,
                       "--tool", "echo", "--tool", "note", "--update", cwd=tmp_path,
                       env=ENV_UP)  # fmt: skip
            assert "--- up-echo 1.0.0" in shown and "+++ up-echo 1.0.1" in shown
            assert f"-description: {ECHO_DESCRIPTION}" in shown
            assert f"+description: {CHANGED}" in shown
            assert "`up-note`: unchanged upstream" in shown
            tools = {t["id"]: t for t in json.loads((tmp_path / PROJECT_FILE).read_text())["tools"]}
            assert set(tools) == {"up-echo", "up-note"}
            assert tools["up-echo"]["version"] == "1.0.1"  # its patch bumped
            assert tools["up-echo"]["description"] == CHANGED
            ok("build", "--out", "build", PROJECT_FILE, cwd=tmp_path)
            with serving(tmp_path, env=ENV_UP, name="serve-updated") as (_, url):
                run_async(updated(url))
