"""`seif serve` as a real process: crash recovery, the data-directory lock and start-up
refusals. The executor runs as a separate process too; every process is killed by its own
handle."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from compiler.builds.build import BUILD_FILE, MANIFEST_FILE
from policy.json.canonical import canonical_cbor, decode_canonical_cbor
from policy.json.digest import build_digest
from policy.json.strict import loads
from tests.support.runtime_harness import (
    APP_TOKEN,
    BEARER,
    CREDENTIALS,
    ENV,
    READ_ARGS,
    Config,
    bindings_document,
    executor_process,
    listening,
    run_async,
    serve_args,
    spawn,
    start_executor_process,
    start_serve,
    stop,
    write_config,
)

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


@pytest.fixture
def executor(tmp_path: Path) -> Iterator[str]:
    """A well-behaved reference executor process; its base URL."""
    with executor_process(tmp_path) as url:
        yield url


async def _post(session: aiohttp.ClientSession, url: str, body: Any) -> dict[str, Any]:
    async with session.post(url, json=body, headers=BEARER) as r:
        assert r.status == 200, await r.text()
        found: dict[str, Any] = await r.json()
        return found


async def _get(session: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with session.get(url, headers=BEARER) as r:
        found: dict[str, Any] = await r.json()
        return found


def test_crash_during_dispatch_is_unknown_and_never_redone(tmp_path: Path) -> None:
    ex_proc, ex_url = start_executor_process(
        tmp_path, "inspect-context:delay_ms=2000", "inspect-context:routes=execute"
    )
    config = write_config(tmp_path, ex_url)
    first = start_serve(config, name="first")
    procs = [ex_proc, first]

    async def before_crash(rt: str) -> str:
        async with aiohttp.ClientSession() as session:
            resolved = await _post(
                session,
                rt + "/v1/context/resolve",
                {"objective": "learner", "consumer": "tutor-app"},
            )
            ctx: str = resolved["contextRef"]
            body = {
                "contextRef": ctx,
                "tool": "inspect-context",
                "callId": "k1",
                "arguments": READ_ARGS,
            }
            background = asyncio.ensure_future(
                _post(session, rt + "/v1/context/tools/execute", body)
            )
            for _ in range(500):  # the executor has acted and now holds the request
                if (await _get(session, ex_url + "/_stats"))["byCallId"].get("k1"):
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("the execute never reached the executor")
            first.send_signal(signal.SIGKILL)
            first.wait(10)
            done = await asyncio.gather(background, return_exceptions=True)
            assert isinstance(done[0], aiohttp.ClientError)  # the runtime died mid-request
            return ctx

    async def after_restart(rt: str, ctx: str) -> None:
        async with aiohttp.ClientSession() as session:
            body = {
                "contextRef": ctx,
                "tool": "inspect-context",
                "callId": "k1",
                "arguments": READ_ARGS,
            }
            receipt = await _post(session, rt + "/v1/context/tools/execute", body)
            assert (receipt["status"], receipt["duplicate"]) == ("UNKNOWN", True)
            assert receipt["reason"] == "INTERRUPTED" and "output" not in receipt
            search = {
                **body,
                "tool": "search-knowledge",
                "callId": "k2",
                "arguments": {"query": "median", "limit": 2},
            }
            other = await _post(session, rt + "/v1/context/tools/execute", search)
            assert other["status"] == "SUCCEEDED"  # the restarted runtime dispatches new calls
            stats = await _get(session, ex_url + "/_stats")
            assert stats["byCallId"] == {"k1": 1, "k2": 1}
            assert stats["requests"] == {"inspect-context": 1, "search-knowledge": 1}
            # the intent was in the decision log before the request left; the restart says
            # UNKNOWN (INTERRUPTED) once, and there is never a result
            events = (await _get(session, f"{rt}/v1/traces/{ctx}"))["events"]
            k1 = [(e["event"], e.get("reason")) for e in events if e.get("callId") == "k1"]
            assert k1 == [("INTENT", None), ("UNKNOWN", "INTERRUPTED")]

    try:
        ctx = run_async(before_crash(listening(first)))
        assert first.returncode == -signal.SIGKILL
        second = start_serve(config, name="second")
        procs.append(second)
        run_async(after_restart(listening(second), ctx))
        second.send_signal(signal.SIGTERM)
        assert second.wait(20) == 0
    finally:
        for proc in procs:
            stop(proc)


def test_one_owner_per_data_directory(tmp_path: Path, executor: str) -> None:
    config = write_config(tmp_path, executor)
    first = start_serve(config, name="first")
    procs = [first]
    try:
        listening(first)
        second = start_serve(config, name="second")
        procs.append(second)
        assert second.wait(30) == 3
        err = (tmp_path / "second.err").read_text()
        assert "DATA_DIR_LOCKED" in err and f"pid {first.pid}" in err

        first.send_signal(signal.SIGKILL)
        first.wait(10)
        third = start_serve(config, name="third")  # the dead owner is reclaimed
        procs.append(third)
        url = listening(third)

        async def healthy() -> int:
            async with aiohttp.ClientSession() as session, session.get(url + "/v1/health") as r:
                return r.status

        assert run_async(healthy()) == 200
        owner = loads((config.data / "owner.lock").read_text())
        assert owner["pid"] == third.pid
    finally:
        for proc in procs:
            stop(proc)


# --- refusals at start -------------------------------------------------------------------------


def _unsupported_runtime_build(config: Config) -> None:
    body = decode_canonical_cbor((config.build / BUILD_FILE).read_bytes())
    data = canonical_cbor({**body, "requiresRuntime": "seif.context-runtime.v9"})
    (config.build / BUILD_FILE).write_bytes(data)
    manifest = loads((config.build / MANIFEST_FILE).read_text())
    manifest.update(digest=build_digest(data), requiresRuntime="seif.context-runtime.v9")
    (config.build / MANIFEST_FILE).write_text(json.dumps(manifest))


def _tamper_build(config: Config) -> None:
    data = bytearray((config.build / BUILD_FILE).read_bytes())
    data[-1] ^= 1
    (config.build / BUILD_FILE).write_bytes(bytes(data))


def _tools(executor: str, **overrides: dict[str, Any]) -> dict[str, Any]:
    return bindings_document(executor, {k.replace("_", "-"): v for k, v in overrides.items()})


Refusal = tuple[tuple[str, ...], dict[str, Any], dict[str, Any] | None, Any]


def _refusals(executor: str) -> list[Refusal]:
    """(codes printed, bindings, credentials, env change or build change) per process."""
    approve_scope: dict[str, Any] = loads(json.dumps(CREDENTIALS))
    approve_scope["credentials"][0]["scopes"].append("tools.approve")
    bindings = _tools(executor)
    several = _tools(
        executor,
        inspect_context={"secretRef": "env:SEIF_REGISTRY_TOKEN"},
        search_knowledge={"endpoint": "http://backend.example/search"},
        propose_change={"timeoutMs": 20_000},
    )
    codes = (
        "SECRET_REF_REGISTRY_REFUSED",
        "ENDPOINT_HTTP_NOT_LOOPBACK",
        "TIMEOUT_EXCEEDS_DECLARED",
    )
    return [
        (codes, several, None, None),
        (("APPROVE_SCOPE_REFUSED",), bindings, approve_scope, None),
        (("SECRET_MISSING",), bindings, None, {"CONTEXT_TOOL_SEARCH_TOKEN": None}),
        (("APPROVAL_TOKEN_MISSING",), bindings, None, {"SEIF_CONTEXT_TOOL_APPROVAL_TOKEN": None}),
        (
            ("APPROVAL_TOKEN_NOT_DISTINCT",),
            bindings,
            None,
            {"SEIF_CONTEXT_TOOL_APPROVAL_TOKEN": APP_TOKEN},
        ),
        (("RUNTIME_UNSUPPORTED",), bindings, None, _unsupported_runtime_build),
        (("BUILD_DIGEST_MISMATCH",), bindings, None, _tamper_build),
    ]


def test_start_up_refusals_exit_2_with_the_code(tmp_path: Path, executor: str) -> None:
    """Every case starts at once (they are independent processes), then each is checked."""
    started: dict[tuple[str, ...], tuple[subprocess.Popen[str], Config]] = {}
    try:
        for codes, bindings, credentials, change in _refusals(executor):
            config = write_config(
                tmp_path / codes[0], executor, bindings=bindings, credentials=credentials
            )
            env = dict(ENV)
            if isinstance(change, dict):
                env = {k: v for k, v in {**env, **change}.items() if v is not None}
            elif change is not None:
                change(config)
            started[codes] = (start_serve(config, env=env), config)
        deadline = time.monotonic() + 60
        for codes, (proc, config) in started.items():
            rc = proc.wait(max(1.0, deadline - time.monotonic()))
            err = (config.data.parent / "serve.err").read_text()
            assert rc == 2, (codes, rc, err)
            for code in codes:
                assert code in err, (code, err)
            for secret in ENV.values():
                assert secret not in err, codes
            assert not config.data.exists()  # refused before taking the data directory
    finally:
        for proc, _config in started.values():
            stop(proc)


def test_bad_arguments_exit_2(tmp_path: Path) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:9")
    proc = start_serve(config, "--port", "not-a-port")
    try:
        assert proc.wait(30) == 2
    finally:
        stop(proc)
    assert os.path.exists(config.build / BUILD_FILE)


def test_a_store_in_memory_serves_and_says_it_keeps_nothing(tmp_path: Path, executor: str) -> None:
    """``seif serve --store memory:``: the runtime says at start that nothing is kept across a
    restart, then serves as with a data directory (a call runs once, its repeat says so, the
    trace holds its records) and creates no data directory."""
    config = write_config(tmp_path, executor)
    args = serve_args(config)
    at = args.index("--data")
    args[at : at + 2] = ["--store", "memory:"]
    proc = spawn(args, ENV, tmp_path / "memory.err")

    async def use(rt: str) -> None:
        async with aiohttp.ClientSession() as session:
            resolved = await _post(
                session,
                rt + "/v1/context/resolve",
                {"objective": "learner", "consumer": "tutor-app"},
            )
            ctx = resolved["contextRef"]
            body = {
                "contextRef": ctx,
                "tool": "inspect-context",
                "callId": "m1",
                "arguments": READ_ARGS,
            }
            first = await _post(session, rt + "/v1/context/tools/execute", body)
            again = await _post(session, rt + "/v1/context/tools/execute", body)
            assert (first["status"], first["duplicate"]) == ("SUCCEEDED", False)
            assert (again["status"], again["duplicate"]) == ("SUCCEEDED", True)
            events = (await _get(session, f"{rt}/v1/traces/{ctx}"))["events"]
            assert [e["event"] for e in events] == ["DISCLOSED", "INTENT", "RESULT"]
            assert [e["seq"] for e in events] == [1, 2, 3]

    try:
        run_async(use(listening(proc)))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        stop(proc)
    assert "nothing is kept across a restart" in (tmp_path / "memory.err").read_text()
    assert not config.data.exists()
