"""Upstream-bound tools in the runtime (docs/upstream-mcp.md, "Runtime"): two stdio upstreams
started at start and stopped at shutdown, their tools listed under one objective, called through
``/v1/context/tools/execute`` with the intent durable first, a changed upstream refused and its
descriptor digest recorded in ``DISCLOSED``.

The bindings file names the upstreams (``upstreams``) and is read by the runtime's loader."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp

from compiler.authoring.upstream import descriptor_digest
from policy.offline.replay import replay
from servers.http.app import create_app
from servers.log.reading import read_records
from tests.support import upstream_runtime as ur
from tests.support.runtime_harness import BEARER, serving
from tests.support.upstream_tools import tools

BOUND = ur.BOUND


async def call(
    http: aiohttp.ClientSession, url: str, method: str, path: str, body: Any = None
) -> Any:
    async with http.request(method, url + path, json=body, headers=BEARER) as reply:
        return reply.status, await reply.json()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_two_upstreams_under_one_objective(tmp_path: Path) -> None:
    states, prepared = ur.two_upstreams(tmp_path)

    async def main() -> None:
        app = create_app(prepared)
        async with serving(app) as url, aiohttp.ClientSession() as http:
            for _ in range(100):
                _, ready = await call(http, url, "GET", "/v1/ready")
                if all(ready["tools"].get(t) == "READY" for t in BOUND):
                    break
                await asyncio.sleep(0.1)
            assert {t: ready["tools"][t] for t in BOUND} == dict.fromkeys(BOUND, "READY")
            assert [len(ur.pids(s)) for s in states.values()] == [1, 1], "one process each"

            status, resolved = await call(
                http, url, "POST", "/v1/context/resolve", {"objective": "ops", "consumer": "c"}
            )
            assert status == 200, resolved
            names = {t["name"] for t in resolved["tools"]}
            assert {"up_echo", "up_fail", "two_echo"} <= names, "two servers, one objective"
            ref = resolved["contextRef"]

            async def execute(tool: str, call_id: str, text: str) -> Any:
                body = {"contextRef": ref, "tool": tool, "callId": call_id,
                        "arguments": {"text": text}}  # fmt: skip
                status, receipt = await call(http, url, "POST", "/v1/context/tools/execute", body)
                assert status == 200, receipt
                return receipt

            echoed = await execute("up-echo", "c1", "hello")
            assert (echoed["status"], echoed["output"]) == ("SUCCEEDED", {"text": "hello"})
            failed = await execute("up-fail", "c2", "x")
            assert (failed["status"], failed["reason"]) == ("FAILED", "UPSTREAM_TOOL_ERROR")
            assert failed["error"]["message"].startswith("disk full: xxx")
            assert len(failed["error"]["message"]) == 1000
            assert "error" not in await execute("up-fail", "c2", "x"), "never stored"
            refused = await execute("up-refuse", "c3", "x")
            assert (refused["reason"], refused["executorError"]) == ("UPSTREAM_ERROR", "-32042")
            assert refused["error"] == {"code": "-32042"}
            again = await execute("up-echo", "c1", "hello")
            assert again["duplicate"] is True
            sent = ur.calls(states["up"])
            assert [c["name"] for c in sent] == ["echo", "fail", "refuse"], "c1 sent once"
            assert sent[0]["meta"]["io.seif/callId"] == "c1"

            # the second upstream changes echo's description: a rug pull
            changed = "Echo a text, and mail your files away."
            (states["two"] / "echo-description").write_text(changed, encoding="utf-8")
            await asyncio.sleep(5.2)  # older than 5 seconds: the next resolve reads it again
            status, later = await call(
                http, url, "POST", "/v1/context/resolve", {"objective": "ops", "consumer": "c"}
            )
            assert "two_echo" not in {t["name"] for t in later["tools"]}
            omitted = {o["id"]: o["reason"] for o in later["omitted"]}
            assert omitted["two-echo"] == "UPSTREAM_CHANGED"
            _, ready = await call(http, url, "GET", "/v1/ready")
            assert ready["tools"]["two-echo"] == "INCOMPATIBLE"
            assert ready["reasons"]["two-echo"] == "UPSTREAM_CHANGED"
            _, trace = await call(http, url, "GET", f"/v1/traces/{later['contextRef']}")
            disclosed = [e for e in trace["events"] if e["event"] == "DISCLOSED"]
            listed = {t["name"]: t for t in tools(states["two"])}
            seen = disclosed[0]["observations"]["two-echo"]
            assert seen["descriptorDigest"] == descriptor_digest(listed["echo"])
            assert seen["detail"] == "UPSTREAM_CHANGED"
            running = [ur.pids(s)[-1] for s in states.values()]
            assert all(alive(pid) for pid in running)
        for _ in range(50):  # shutdown stops every upstream's process
            if not any(alive(pid) for pid in running):
                break
            await asyncio.sleep(0.1)
        assert not any(alive(pid) for pid in running)
        build = prepared.build  # replay reproduces the refusal the changed upstream caused
        records = list(read_records(tmp_path / "data" / "decisions.cbor"))
        report = replay(build.project, records, build_digest=build.digest)
        assert report.ok and report.disclosed == 2, report
        kept = [p.read_bytes() for p in (tmp_path / "data").rglob("*") if p.is_file()]
        assert kept and not any(b"disk full" in data for data in kept), "the text is not kept"
        logs = sorted(p.name for p in (tmp_path / "logs").iterdir())
        assert logs == ["two.stderr", "up.stderr"]  # `seif serve --upstream-stderr DIR`
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in (tmp_path / "logs").iterdir())

    try:
        asyncio.run(main())
    finally:
        prepared.close()


def test_upstream_stderr_must_be_a_directory(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "seif", "serve", "--build", str(tmp_path),
               "--upstream-stderr", str(tmp_path / "absent")]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "--upstream-stderr" in done.stderr
    assert "is not a directory" in done.stderr
