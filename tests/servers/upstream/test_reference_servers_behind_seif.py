"""The reference filesystem MCP server (``@modelcontextprotocol/server-filesystem``, which
nobody here wrote, pinned in ``tests/node``) behind seif, as a user puts it there
(docs/upstream-mcp.md): ``seif tool import`` over stdio, ``seif tool include`` of two of its
tools, ``seif build``, bindings from ``seif bindings template`` with the server's command in
``upstreams``, then ``seif serve --mcp`` and ``seif approval-server`` as processes and the
official MCP client: it sees exactly the two tools, a read returns the file, a write waits for
an approver and then writes once, and its retry under the same call id writes nothing; a call
in flight when the server is killed is ``UNKNOWN``, and its retry is never sent to the server
started again. The everything server (``@modelcontextprotocol/server-everything``) the same way
over Streamable HTTP: two of the tools imported of it listed, and a read runs there, its intent
durable."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.approval_harness import ANA
from tests.support.behind_seif import approving, put_behind_seif, serving, upstream_processes
from tests.support.mcp_support import CONTEXT_REF, call_meta, dumped, mcp_client, receipt_of
from tests.support.reference_servers import everything_over_http, filesystem_command
from tests.support.runtime_harness import BEARER, run_async

PROJECT = {
    "format": "seif.context-project.v1",
    "id": "files",
    "version": "1.0.0",
    "objectives": [{"id": "edit", "profile": "edit", "description": "Edit the documents."}],
    "profiles": [{"id": "edit"}],
}
IMPORTED = ("read_text_file", "write_file", "list_directory")
INCLUDED = ("fs-read-text-file", "fs-write-file")
EVERY_IMPORTED = ("echo", "get-sum", "get-env", "toggle-simulated-logging")
EVERY_INCLUDED = ("every-echo", "every-get-sum")
WRITTEN = "written through seif, once\n"


def _fs_project(root: Path, docs: Path) -> None:
    """Import three tools of the filesystem server on ``docs``, include two, build, and write
    the bindings from the template with the server's command."""
    command = filesystem_command(docs)
    put_behind_seif(root, PROJECT, server="fs", source=["--", *command], tools=IMPORTED,
                    profile="edit", included=INCLUDED, upstream={"command": command})  # fmt: skip


def _writer(pipe: Path) -> int | None:
    """A write end of ``pipe`` when a process reads it (held open, so that the reader waits
    for data), else None."""
    try:
        return os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        assert exc.errno == errno.ENXIO, exc
        return None


@contextlib.contextmanager
def _stack(root: Path) -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    """``seif serve --mcp`` on the files of :func:`put_behind_seif` and ``seif approval-server``
    in front of it, as processes; the runtime's process and both URLs."""
    with serving(root) as (runtime, url), approving(root, url) as approval:
        yield runtime, url, approval


async def _approve(http: aiohttp.ClientSession, approval: str, call_id: str) -> dict[str, Any]:
    """Approve the pending call of ``call_id`` as ``ops-ana`` once it is listed; the item."""
    for _ in range(200):
        async with http.get(f"{approval}/v1/pending", headers=ANA) as r:
            assert r.status == 200, await r.text()
            listed = [i for i in (await r.json())["pending"] if i["callId"] == call_id]
        if listed:
            break
        await asyncio.sleep(0.1)
    [item] = listed
    path = f"{approval}/v1/pending/{item['pendingId']}/approve"
    async with http.post(path, json={"reason": "the content is right"}, headers=ANA) as r:
        assert r.status == 200, await r.text()
    found: dict[str, Any] = item
    return found


def test_the_filesystem_server_behind_seif_reads_and_writes_once_when_approved(
    tmp_path: Path,
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("the first document\n")
    target = docs / "b.txt"
    _fs_project(tmp_path, docs)

    async def scenario(url: str, approval: str) -> None:
        async with (
            mcp_client(url, "edit", mode="auto") as client,
            aiohttp.ClientSession() as http,
        ):
            listed = {t.name for t in (await client.list_tools()).tools}
            assert listed == {"fs_read_text_file", "fs_write_file"}

            read = await client.call_tool("fs_read_text_file", {"path": str(docs / "a.txt")})
            assert read.is_error is False, dumped(read)
            assert read.structured_content == {"content": "the first document\n"}

            arguments = {"path": str(target), "content": WRITTEN}
            waiting = asyncio.ensure_future(
                client.call_tool("fs_write_file", arguments, meta=call_meta("w1"))
            )
            item = await _approve(http, approval, "w1")
            assert (item["tool"], item["arguments"]) == ("fs-write-file", arguments)
            written = await asyncio.wait_for(waiting, 30)
            assert written.is_error is False, dumped(written)
            assert target.read_text(encoding="utf-8") == WRITTEN

            target.unlink()
            again = await client.call_tool("fs_write_file", arguments, meta=call_meta("w1"))
            assert receipt_of(again) == {"status": "SUCCEEDED", "reason": None, "duplicate": True}
            assert not target.exists(), "the retry was sent to the upstream again"
            async with http.get(f"{approval}/v1/pending", headers=ANA) as r:
                assert (await r.json())["pending"] == []

    with _stack(tmp_path) as (_, url, approval):
        run_async(scenario(url, approval))


def test_a_filesystem_server_killed_mid_call_is_unknown_and_never_sent_again(
    tmp_path: Path,
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    pipe = docs / "pipe"
    os.mkfifo(pipe)  # reading it waits for a writer that never comes: the call stays in flight
    _fs_project(tmp_path, docs)

    async def scenario(runtime: subprocess.Popen[str], url: str) -> None:
        async with mcp_client(url, "edit", mode="auto") as client:
            await client.list_tools()
            arguments = {"path": str(pipe)}
            waiting = asyncio.ensure_future(
                client.call_tool("fs_read_text_file", arguments, meta=call_meta("r1"))
            )
            [first] = upstream_processes(runtime)
            for _ in range(200):
                held = _writer(pipe)
                if held is not None:
                    break
                await asyncio.sleep(0.05)
            assert held is not None, "the call did not reach the filesystem server"
            os.kill(first, signal.SIGKILL)
            answered = await asyncio.wait_for(waiting, 30)
            os.close(held)
            lost = {"status": "UNKNOWN", "reason": "CONNECTION_LOST"}
            assert receipt_of(answered) == {**lost, "duplicate": False}, dumped(answered)

            for _ in range(200):  # restarted after its backoff
                if [p for p in upstream_processes(runtime) if p != first]:
                    break
                await asyncio.sleep(0.1)
            again = await client.call_tool("fs_read_text_file", arguments, meta=call_meta("r1"))
            assert receipt_of(again) == {**lost, "duplicate": True}
            await asyncio.sleep(1.0)
            assert _writer(pipe) is None, "the call was sent again"

    with _stack(tmp_path) as (runtime, url, _):
        run_async(scenario(runtime, url))


def test_the_everything_server_over_streamable_http_behind_seif(tmp_path: Path) -> None:
    async def scenario(url: str) -> None:
        async with (
            mcp_client(url, "edit", mode="auto") as client,
            aiohttp.ClientSession() as http,
        ):
            listed = await client.list_tools()
            assert {t.name for t in listed.tools} == {"every_echo", "every_get-sum"}

            echoed = await client.call_tool(
                "every_echo", {"message": "through seif"}, meta=call_meta("e1")
            )
            assert echoed.is_error is False, dumped(echoed)
            said = [{"type": "text", "text": "Echo: through seif"}]  # the server's own answer
            assert echoed.structured_content == {"content": said}
            summed = await client.call_tool("every_get-sum", {"a": 2, "b": 3.5})
            assert summed.is_error is False, dumped(summed)
            sum_said = [{"type": "text", "text": "The sum of 2 and 3.5 is 5.5."}]
            assert summed.structured_content == {"content": sum_said}

            ref = (listed.meta or {})[CONTEXT_REF]
            async with http.get(f"{url}/v1/traces/{ref}", headers=BEARER) as r:
                assert r.status == 200, await r.text()
                events = (await r.json())["events"]
            called = [e for e in events if e.get("callId") == "e1"]
            assert [(e["event"], e["tool"]) for e in called] == [
                ("INTENT", "every-echo"),
                ("RESULT", "every-echo"),
            ]
            assert called[1]["status"] == "SUCCEEDED"
            again = await client.call_tool(
                "every_echo", {"message": "through seif"}, meta=call_meta("e1")
            )  # answered from the stored intent
            assert receipt_of(again) == {"status": "SUCCEEDED", "reason": None, "duplicate": True}

    with everything_over_http() as upstream:
        put_behind_seif(tmp_path, PROJECT, server="every", source=["--url", upstream],
                        tools=EVERY_IMPORTED, profile="edit", included=EVERY_INCLUDED,
                        upstream={"url": upstream})  # fmt: skip
        with serving(tmp_path) as (_, url):
            run_async(scenario(url))
