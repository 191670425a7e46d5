"""The runtime half of `make run`: the reference executor and `seif serve` on loopback.

Starts the synthetic executor and the runtime as subprocesses with throwaway tokens and a
temporary data directory, resolves both objectives, performs a write that needs and then gets
exact operator approval, repeats it (a duplicate, never dispatched again), prints the receipts
and stops both servers.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import aiohttp

from policy.json.strict import dumps

ROOT = Path(__file__).resolve().parents[2]
EXECUTOR = ROOT / "examples" / "reference-tools" / "executor.py"
TOOL_ENV = {
    "inspect-context": "CONTEXT_TOOL_INSPECT_TOKEN",
    "search-knowledge": "CONTEXT_TOOL_SEARCH_TOKEN",
    "propose-change": "CONTEXT_TOOL_PROPOSE_TOKEN",
}
"""The synthetic executor's default token variable of each reference tool (the demo's and the
proof's)."""


def loopback_bindings(executor_url: str, environment: str) -> dict[str, Any]:
    """Every reference tool bound to the synthetic executor at ``executor_url``."""
    return {
        "environment": environment,
        "revision": 1,
        "tools": {
            tool: {"endpoint": f"{executor_url}/{tool}", "secretRef": f"env:{var}"}
            for tool, var in TOOL_ENV.items()
        },
    }


WRITE = {
    "target": "course/data-literacy/module-2/lesson-3",
    "kind": "clarify",
    "summary": "Define the median before using it.",
}


def _start(cmd: list[str], env: dict[str, str], stack: ExitStack) -> str:
    """Start a server and return the URL from its 'listening on' line."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    stack.callback(_stop, proc)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"listening on (http://\S+)", line)
    if found is None:
        raise RuntimeError(f"{cmd[1]} did not start: {line!r}")
    return found.group(1)


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def _files(work: Path, executor_url: str) -> None:
    bindings = loopback_bindings(executor_url, "demo")
    credentials = {
        "credentials": [
            {
                "id": "tutor-app",
                "tokenRef": "env:SEIF_DEMO_APP_TOKEN",
                "scopes": ["context.resolve", "tools.execute", "traces.read"],
            }
        ]
    }
    (work / "bindings.json").write_text(dumps(bindings, indent=2))
    (work / "credentials.json").write_text(dumps(credentials, indent=2))


def run(build_dir: Path) -> int:
    env = {
        **os.environ,
        **{v: secrets.token_urlsafe(24) for v in TOOL_ENV.values()},
        "SEIF_DEMO_APP_TOKEN": secrets.token_urlsafe(24),
        "SEIF_CONTEXT_TOOL_APPROVAL_TOKEN": secrets.token_urlsafe(24),
    }
    with tempfile.TemporaryDirectory(prefix="seif-demo-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        token_args = [f"{tool}={var}" for tool, var in TOOL_ENV.items()]
        executor = _start(
            [sys.executable, str(EXECUTOR), "--port", "0", "--token-env", *token_args], env, stack
        )
        _files(work, executor)
        runtime = _start(
            [
                sys.executable,
                "-m",
                "seif.cli",
                "serve",
                "--build",
                str(build_dir),
                "--bindings",
                str(work / "bindings.json"),
                "--credentials",
                str(work / "credentials.json"),
                "--data",
                str(work / "data"),
                "--port",
                "0",
            ],
            env,
            stack,
        )
        print(f"\nruntime: {runtime} (executor {executor}, data {work / 'data'})")
        asyncio.run(_flow(runtime, env))
    return 0


async def _post(s: aiohttp.ClientSession, url: str, body: Any, headers: dict[str, str]) -> Any:
    async with s.post(url, json=body, headers=headers) as answer:
        return await answer.json()


async def _flow(runtime: str, env: dict[str, str]) -> None:
    app = {"Authorization": f"Bearer {env['SEIF_DEMO_APP_TOKEN']}"}
    operator = {
        "x-seif-tool-approval": env["SEIF_CONTEXT_TOOL_APPROVAL_TOKEN"],
        "x-seif-approver": "ops-demo",
    }
    async with aiohttp.ClientSession() as s:
        for objective in ("learner", "authoring"):
            got = await _post(
                s,
                f"{runtime}/v1/context/resolve",
                {"objective": objective, "consumer": "course-authoring"},
                app,
            )
            print(
                f"resolve {objective}: tools {[t['name'] for t in got['tools']]}, "
                f"tokens {got['tokens']['total']}/{got['tokens']['ceiling']} (estimated)"
            )
        ctx = got["contextRef"]
        call = {"contextRef": ctx, "tool": "propose-change", "callId": "demo-1", "arguments": WRITE}
        show(
            "write without approval",
            await _post(s, f"{runtime}/v1/context/tools/execute", call, app),
        )
        approval = await _post(
            s,
            f"{runtime}/v1/context/tools/approve",
            {
                **{k: call[k] for k in ("contextRef", "tool", "callId", "arguments")},
                "reason": "checked against the glossary",
            },
            operator,
        )
        print(f"operator approval: {approval['approvalId']} until {approval['expiresAt']}")
        approved = {**call, "approvalId": approval["approvalId"]}
        show(
            "write with approval",
            await _post(s, f"{runtime}/v1/context/tools/execute", approved, app),
        )
        show(
            "the same call again",
            await _post(s, f"{runtime}/v1/context/tools/execute", approved, app),
        )


def show(label: str, receipt: dict[str, Any]) -> None:
    shown = {k: receipt.get(k) for k in ("status", "reason", "duplicate", "outputAvailable")}
    if receipt.get("outputAvailable"):
        shown["output"] = receipt.get("output")
    print(f"  {label}: {dumps(shown)}")
