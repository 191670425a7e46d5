"""The reference filesystem MCP server (``@modelcontextprotocol/server-filesystem``, which
nobody here wrote, pinned in ``tests/node``) behind seif, as a user puts it there
(docs/upstream-mcp.md): ``seif tool import`` over stdio, ``seif tool include`` of two of its
tools, ``seif build``, bindings from ``seif bindings template`` with the server's command in
``upstreams``, then ``seif serve --mcp`` and ``seif approval-server`` as processes and the
official MCP client: it sees exactly the two tools, a read returns the file, a write waits for
an approver and then writes once, and its retry under the same call id writes nothing; a call
in flight when the server is killed is ``UNKNOWN``, and its retry is never sent to the server
started again."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.approval_harness import ANA, APPROVER_ENV, write_approvers
from tests.support.cli import seif
from tests.support.mcp_support import call_meta, dumped, mcp_client, receipt_of
from tests.support.reference_servers import filesystem_command
from tests.support.runtime_harness import (
    CREDENTIALS,
    ENV,
    listening,
    run_async,
    seif_command,
    spawn,
    stop,
)

PROJECT = {
    "format": "seif.context-project.v1",
    "id": "files",
    "version": "1.0.0",
    "objectives": [{"id": "edit", "profile": "edit", "description": "Edit the documents."}],
    "profiles": [{"id": "edit"}],
}
IMPORTED = ("read_text_file", "write_file", "list_directory")
INCLUDED = ("fs-read-text-file", "fs-write-file")
WRITTEN = "written through seif, once\n"


def _ok(*args: str, cwd: Path) -> str:
    done = seif(*args, cwd=cwd)
    assert done.returncode == 0, f"seif {args[:2]}: {done.returncode}\n{done.stdout}{done.stderr}"
    return done.stdout


def _project(root: Path, docs: Path) -> None:
    """Import three tools of the filesystem server on ``docs``, include two, build, and write
    the bindings from the template with the server's command."""
    (root / "p.json").write_text(json.dumps(PROJECT))
    selected = [a for name in IMPORTED for a in ("--tool", name)]
    command = filesystem_command(docs)
    _ok("tool", "import", "--project", "p.json", "--server", "fs", *selected, "--", *command,
        cwd=root)  # fmt: skip
    for tool in INCLUDED:
        _ok("tool", "include", "--project", "p.json", "--tool", tool, "--profile", "edit", cwd=root)
    _ok("build", "--out", "build", "p.json", cwd=root)
    bindings = json.loads(_ok("bindings", "template", "--build", "build", cwd=root))
    assert bindings["upstreams"] == {"fs": {"command": ["/replace/with/the/fs/server/command"]}}
    bindings["upstreams"]["fs"]["command"] = command
    (root / "bindings.json").write_text(json.dumps(bindings))
    (root / "credentials.json").write_text(json.dumps(CREDENTIALS))
    write_approvers(root)


def _upstreams(runtime: subprocess.Popen[str]) -> list[int]:
    """The process ids of the runtime's children: its stdio upstreams."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, IndexError):
            if entry.name.isdigit():
                stat = (entry / "stat").read_text()
                if int(stat.rpartition(")")[2].split()[1]) == runtime.pid:
                    found.append(int(entry.name))
    return found


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
    """``seif serve --mcp`` on the files of :func:`_project` and ``seif approval-server`` in
    front of it, as processes; the runtime's process and both URLs."""
    serve = [
        *seif_command(), "serve", "--build", str(root / "build"),
        "--bindings", str(root / "bindings.json"), "--credentials", str(root / "credentials.json"),
        "--data", str(root / "data"), "--host", "127.0.0.1", "--port", "0",
        "--mcp", "--mcp-approval-wait", "60", "--upstream-stderr", str(root / "logs"),
    ]  # fmt: skip
    (root / "logs").mkdir()
    runtime = spawn(serve, ENV, root / "serve.err")
    procs = [runtime]
    try:
        url = listening(runtime)
        approval = [
            *seif_command(), "approval-server", "--runtime", url,
            "--approvers", str(root / "approvers.json"), "--port", "0",
        ]  # fmt: skip
        procs.append(spawn(approval, {**ENV, **APPROVER_ENV}, root / "approval.err"))
        yield runtime, url, listening(procs[-1], name="approval-server")
    finally:
        started = _upstreams(runtime)
        for proc in reversed(procs):
            stop(proc)
        for pid in started:  # none outlives the test, a stuck one included
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


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
    _project(tmp_path, docs)

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
    _project(tmp_path, docs)

    async def scenario(runtime: subprocess.Popen[str], url: str) -> None:
        async with mcp_client(url, "edit", mode="auto") as client:
            await client.list_tools()
            arguments = {"path": str(pipe)}
            waiting = asyncio.ensure_future(
                client.call_tool("fs_read_text_file", arguments, meta=call_meta("r1"))
            )
            [first] = _upstreams(runtime)
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
                if [p for p in _upstreams(runtime) if p != first]:
                    break
                await asyncio.sleep(0.1)
            again = await client.call_tool("fs_read_text_file", arguments, meta=call_meta("r1"))
            assert receipt_of(again) == {**lost, "duplicate": True}
            await asyncio.sleep(1.0)
            assert _writer(pipe) is None, "the call was sent again"

    with _stack(tmp_path) as (runtime, url, _):
        run_async(scenario(runtime, url))
