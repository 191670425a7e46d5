"""What the upstream runtime tests share: a project whose tools are pinned to the tools of
:mod:`tests.support.upstream_tools` as it lists them, its upstreams and bindings as the bindings
loader produces them, and that server run over Streamable HTTP on loopback."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from compiler import compile_project
from compiler.authoring.upstream import descriptor_digest
from compiler.builds.build import write_build
from policy.ir import Project
from servers.config.upstreams import HttpUpstream, StdioUpstream, UpstreamBinding
from servers.runtime.startup import Prepared, prepare
from tests.support.guide_examples import free_port
from tests.support.paths import ROOT
from tests.support.runtime_harness import CREDENTIALS, ENV
from tests.support.upstream_tools import tools

SERVER = ROOT / "tests" / "support" / "upstream_tools.py"
HTTP_TOKEN = "upstream-bearer-5e1c9a7f3b"
ENV_SECRET = "upstream-env-secret-2d8b4f6a0c"
WRITES = frozenset({"note", "die", "announce"})
BOUND = ("up-echo", "up-fail", "up-refuse", "two-echo")
"""The tools :func:`prepared_with_upstreams` binds."""


def tool_id(server: str, name: str) -> str:
    return f"{server}-{name}"


def project(servers: tuple[str, ...] = ("up",)) -> Project:
    """One objective (``ops``) whose profile includes every tool of every server, each pinned to
    the server's listing as it starts."""
    return compile_project(document(servers))


def document(servers: tuple[str, ...] = ("up",)) -> dict[str, Any]:
    """:func:`project`'s document, for a test to vary (a profile's rules) before compiling."""
    listing = tools(Path("/nonexistent"))
    contracts = [contract(server, tool) for server in servers for tool in listing]
    rules = [{"tool": c["id"], "participation": "include"} for c in contracts]
    return {
        "format": "seif.context-project.v1",
        "id": "upstream-runtime",
        "version": "1.0.0",
        "description": "Tools of upstream MCP servers, for the runtime's tests.",
        "objectives": [{"id": "ops", "profile": "ops", "description": "Operate the upstreams."}],
        "profiles": [
            {
                "id": "ops",
                "tokenCeiling": 8000,
                "context": [{"id": "role", "role": "system", "text": "Use the tools."}],
                "toolRules": rules,
            }
        ],
        "tools": contracts,
    }


def contract(server: str, tool: Mapping[str, Any]) -> dict[str, Any]:
    name = tool["name"]
    declared: dict[str, Any] = {
        "id": tool_id(server, name),
        "name": f"{server}_{name}",
        "version": "1.0.0",
        "description": tool["description"],
        "parameters": tool["inputSchema"],
        "effect": "write" if name in WRITES else "read",
        "upstream": {"server": server, "tool": name, "descriptorDigest": descriptor_digest(tool)},
    }
    if "outputSchema" in tool:
        declared["result"] = tool["outputSchema"]
    return declared


def stdio_upstream(server: str, state: Path, **env: str) -> StdioUpstream:
    command = (sys.executable, str(SERVER), "stdio", str(state))
    return StdioUpstream(server=server, command=command, env=MappingProxyType(env))


def binding(server: str, name: str, *, timeout_ms: int = 5000, max_bytes: int = 65536) -> Any:
    return UpstreamBinding(
        tool=tool_id(server, name), upstream=server, timeout_ms=timeout_ms, max_bytes=max_bytes
    )


def calls(state: Path) -> list[dict[str, Any]]:
    """The calls the upstream received, in order."""
    path = state / "calls.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [json.loads(line) for line in lines]


def pids(state: Path) -> list[int]:
    """The process ids of each start of a stdio upstream, in order."""
    path = state / "pids"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [int(line.split()[0]) for line in lines]


@contextlib.contextmanager
def http_upstream(server: str, state: Path, port: int | None = None) -> Iterator[HttpUpstream]:
    """The server over Streamable HTTP on loopback (on ``port``, else a free one), as
    ``server``, for the span of the block."""
    port = free_port() if port is None else port
    command = [sys.executable, str(SERVER), "http", str(port), HTTP_TOKEN, str(state)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
                break
            time.sleep(0.1)
        url = f"http://127.0.0.1:{port}/mcp"
        yield HttpUpstream(server=server, url=url, secret=HTTP_TOKEN)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def prepared_with_upstreams(
    root: Path,
    states: dict[str, Path],
    *,
    served: Project | None = None,
    shadow_dir: Path | None = None,
) -> Prepared:
    """A runtime prepared (by the runtime's own loader, from a bindings file with
    ``upstreams``) for a build of :func:`project` over ``states``' servers (or of ``served``),
    with the tools of :data:`BOUND` those servers have bound to stdio upstreams (their stderr
    in ``root/logs``), and the candidate build in ``shadow_dir`` in shadow (``--shadow``)."""
    write_build(project(tuple(states)) if served is None else served, root / "build")
    upstreams = {
        server: {"command": [sys.executable, str(SERVER), "stdio", str(state)]}
        for server, state in states.items()
    }
    bound = {
        tool: {"upstream": server, "timeoutMs": 5000}
        for tool in BOUND
        if (server := tool.split("-", 1)[0]) in states
    }
    written = {"environment": "test", "revision": 1, "upstreams": upstreams, "tools": bound}
    (root / "bindings.json").write_text(json.dumps(written))
    (root / "credentials.json").write_text(json.dumps(CREDENTIALS))
    return prepare(
        build_dir=root / "build",
        bindings_path=root / "bindings.json",
        credentials_path=root / "credentials.json",
        data_dir=root / "data",
        env=ENV,
        upstream_stderr=root / "logs",
        shadow_dir=shadow_dir,
    )


def two_upstreams(root: Path) -> tuple[dict[str, Path], Prepared]:
    """The state directories of two stdio upstreams, ``up`` and ``two``, and a runtime
    prepared with them (:func:`prepared_with_upstreams`)."""
    states = {"up": root / "up", "two": root / "two"}
    for state in (*states.values(), root / "logs"):
        state.mkdir()
    return states, prepared_with_upstreams(root, states)
