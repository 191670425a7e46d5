"""An MCP server put behind seif as a user puts it there (docs/upstream-mcp.md), every step a
process: ``seif tool import`` (over stdio or Streamable HTTP), ``seif tool include``, ``seif
build``, bindings from ``seif bindings template`` with the upstream's entry filled in, then
``seif serve --mcp`` (and ``seif approval-server`` in front of it).

- :func:`put_behind_seif`: the project's files under a directory, from the import to the
  bindings; :func:`ok` runs one ``seif`` command that must succeed.
- :func:`serving`: ``seif serve --mcp`` on those files; :func:`approving`: an approval server
  in front of it; :func:`upstream_processes`: its stdio upstreams; :func:`ready_states`:
  ``GET /v1/ready`` polled until a check holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.approval_harness import APPROVER_ENV, write_approvers
from tests.support.cli import seif
from tests.support.runtime_harness import CREDENTIALS, ENV, listening, seif_command, spawn, stop

PROJECT_FILE = "p.json"


def ok(*args: str, cwd: Path, env: Mapping[str, str] | None = None) -> str:
    """``seif ARGS`` in ``cwd`` (``env`` added to the environment): its stdout, once it exits
    0."""
    done = seif(*args, cwd=cwd, env=env)
    assert done.returncode == 0, f"seif {args[:2]}: {done.returncode}\n{done.stdout}{done.stderr}"
    return done.stdout


def put_behind_seif(
    root: Path,
    project: Mapping[str, Any],
    *,
    server: str,
    source: Sequence[str],
    tools: Sequence[str],
    profile: str,
    included: Sequence[str],
    upstream: Mapping[str, Any],
    env: Mapping[str, str] | None = None,
) -> None:
    """Write ``project`` to ``root/p.json``, import its upstream ``server``'s ``tools`` from
    ``source`` (``--url URL ...`` or ``-- COMMAND ...``), include the tools ``included`` in
    ``profile``, build into ``root/build``, and write ``root/bindings.json`` from the template,
    ``upstream`` as the server's entry, beside the credentials and the approvers."""
    (root / PROJECT_FILE).write_text(json.dumps(project))
    selected = [a for name in tools for a in ("--tool", name)]
    ok("tool", "import", "--project", PROJECT_FILE, "--server", server, *selected, *source,
       cwd=root, env=env)  # fmt: skip
    for tool in included:
        ok("tool", "include", "--project", PROJECT_FILE, "--tool", tool, "--profile", profile,
           cwd=root)  # fmt: skip
    ok("build", "--out", "build", PROJECT_FILE, cwd=root)
    bindings = json.loads(ok("bindings", "template", "--build", "build", cwd=root))
    placeholder = {"command": [f"/replace/with/the/{server}/server/command"]}
    assert bindings["upstreams"] == {server: placeholder}
    bindings["upstreams"][server] = dict(upstream)
    (root / "bindings.json").write_text(json.dumps(bindings))
    (root / "credentials.json").write_text(json.dumps(CREDENTIALS))
    write_approvers(root)


def upstream_processes(runtime: subprocess.Popen[str]) -> list[int]:
    """The process ids of the runtime's children: its stdio upstreams."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, IndexError):
            if entry.name.isdigit():
                stat = (entry / "stat").read_text()
                if int(stat.rpartition(")")[2].split()[1]) == runtime.pid:
                    found.append(int(entry.name))
    return found


@contextlib.contextmanager
def serving(
    root: Path, *, env: Mapping[str, str] = ENV, name: str = "serve"
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``seif serve --mcp`` on the files of :func:`put_behind_seif` (data in ``root/data``,
    upstreams' stderr in ``root/logs``), as a process; the process and its URL. Its stdio
    upstreams are killed with it."""
    (root / "logs").mkdir(exist_ok=True)
    serve = [
        *seif_command(), "serve", "--build", str(root / "build"),
        "--bindings", str(root / "bindings.json"), "--credentials", str(root / "credentials.json"),
        "--data", str(root / "data"), "--host", "127.0.0.1", "--port", "0",
        "--mcp", "--mcp-approval-wait", "60", "--upstream-stderr", str(root / "logs"),
    ]  # fmt: skip
    runtime = spawn(serve, env, root / f"{name}.err")
    try:
        yield runtime, listening(runtime)
    finally:
        started = upstream_processes(runtime)
        stop(runtime)
        for pid in started:  # none outlives the test, a stuck one included
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def approving(root: Path, runtime: str) -> Iterator[str]:
    """``seif approval-server`` in front of the runtime at ``runtime``, as a process, with the
    approvers of :func:`put_behind_seif`; its URL."""
    approval = [
        *seif_command(), "approval-server", "--runtime", runtime,
        "--approvers", str(root / "approvers.json"), "--port", "0",
    ]  # fmt: skip
    proc = spawn(approval, {**ENV, **APPROVER_ENV}, root / "approval.err")
    try:
        yield listening(proc, name="approval-server")
    finally:
        stop(proc)


async def ready_states(
    http: aiohttp.ClientSession,
    runtime: str,
    holds: Callable[[dict[str, Any]], bool],
    timeout: float = 30.0,
) -> dict[str, Any]:
    """``GET /v1/ready``'s document, polled until ``holds`` says it does (an assertion error,
    with the last one, after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        async with http.get(f"{runtime}/v1/ready") as reply:
            document: dict[str, Any] = await reply.json()
        if holds(document):
            return document
        assert time.monotonic() < deadline, document
        await asyncio.sleep(0.2)
