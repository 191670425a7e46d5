"""Runtime replicas on one PostgreSQL store: every guarantee of one runtime holds across them.

Two runtimes (``prepare`` + ``create_app``, as ``seif serve --store postgresql://...`` starts
one) serve one fresh database (``pg_url``: a real PostgreSQL server) and one synthetic
executor, whose counts are what was dispatched."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg

from tests.support.runtime_harness import (
    ENV,
    EXECUTOR,
    PROPOSAL,
    READ_ARGS,
    TOOL_TOKENS,
    Stack,
    bindings_document,
    run_async,
    runtime_stack,
    seif_command,
    serving,
    write_config,
)

TRACE_ENV = {**ENV, "CONTEXT_TOOL_TRACE_KEY": "replicas-share-this-trace-key-0123456789"}


@contextlib.asynccontextmanager
async def replicas(
    root: Path,
    url: str,
    count: int = 2,
    credentials: dict[str, Any] | None = None,
    **options: Any,
) -> AsyncIterator[list[Stack]]:
    """``count`` runtimes on the database of ``url``, named ``r0``, ``r1``, ... (``options``
    go to ``runtime_stack``), with ``credentials`` (a credentials file's document) if given."""
    executor_app = EXECUTOR.create_app(tokens=TOOL_TOKENS, knobs={})
    async with serving(executor_app) as executor_url:
        document = {**bindings_document(executor_url), "traceKeyRef": "env:CONTEXT_TOOL_TRACE_KEY"}
        config = write_config(root, executor_url, bindings=document, credentials=credentials)
        async with contextlib.AsyncExitStack() as held:
            stacks = [
                await held.enter_async_context(
                    runtime_stack(
                        config,
                        executor_url,
                        executor_app,
                        env=TRACE_ENV,
                        store_url=url,
                        replica_id=f"r{i}",
                        **options,
                    )
                )
                for i in range(count)
            ]
            yield stacks


def test_a_context_resolved_on_one_replica_is_executed_on_another(
    tmp_path: Path, pg_url: str
) -> None:
    async def scenario() -> None:
        async with replicas(tmp_path, pg_url) as (a, b):
            context = await a.resolve()
            receipt = await b.execute(context["contextRef"], "inspect-context", "c-1", READ_ARGS)
            assert receipt["status"] == "SUCCEEDED" and not receipt["duplicate"]
            again = await a.execute(context["contextRef"], "inspect-context", "c-1", READ_ARGS)
            assert again["duplicate"] is True
            trace = await a.call("GET", f"/v1/traces/{context['contextRef']}")
            assert [e["event"] for e in trace.body["events"]][:3] == [
                "DISCLOSED",
                "INTENT",
                "RESULT",
            ]
            assert (await a.stats())["executions"] == {"inspect-context": 1}

    run_async(scenario())


def test_concurrent_executes_of_one_call_id_over_replicas_dispatch_once(
    tmp_path: Path, pg_url: str
) -> None:
    async def scenario() -> None:
        async with replicas(tmp_path, pg_url) as (a, b):
            a.set_knobs("inspect-context", delay_ms=200)  # all arrive while the first runs
            context = await a.resolve()
            ref = context["contextRef"]
            receipts = await asyncio.gather(
                *(
                    (a if i % 2 else b).execute(ref, "inspect-context", "same", READ_ARGS)
                    for i in range(100)
                )
            )
            first = [r for r in receipts if not r["duplicate"]]
            assert len(first) == 1 and first[0]["status"] == "SUCCEEDED"
            assert all(r["duplicate"] for r in receipts if r is not first[0])
            assert (await a.stats())["executions"] == {"inspect-context": 1}

    run_async(scenario())


def test_an_approval_granted_through_one_replica_is_used_through_another(
    tmp_path: Path, pg_url: str
) -> None:
    async def scenario() -> None:
        async with replicas(tmp_path, pg_url) as (a, b):
            ref = (await a.resolve())["contextRef"]
            held = await a.execute(ref, "propose-change", "w-1", PROPOSAL)
            assert held["reason"] == "APPROVAL_REQUIRED"
            approval = await a.approval_id(ref, "propose-change", "w-1", PROPOSAL)
            done = await b.execute(ref, "propose-change", "w-1", PROPOSAL, approval)
            assert done["status"] == "SUCCEEDED"
            assert (await a.stats())["executions"] == {"propose-change": 1}

    run_async(scenario())


def test_the_database_holds_no_argument_value(tmp_path: Path, pg_url: str) -> None:
    marker = "distinctive-argument-7f3a9c"

    async def scenario() -> None:
        async with replicas(tmp_path, pg_url) as (a, b):
            ref = (await a.resolve())["contextRef"]
            await b.execute(ref, "inspect-context", "m-1", {"ref": f"course/{marker}"})
            await b.execute(ref, "propose-change", "m-2", {**PROPOSAL, "summary": marker})

    run_async(scenario())
    with psycopg.connect(pg_url) as db:
        tables = [r[0] for r in db.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        )]  # fmt: skip
        for table in tables:
            for row in db.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    data = bytes(value) if isinstance(value, memoryview) else str(value).encode()
                    assert marker.encode() not in data, table


def test_seif_serve_refuses_a_postgresql_store_without_a_trace_key(
    tmp_path: Path, pg_url: str
) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:9")
    proc = subprocess.run(
        [*seif_command(), "serve", "--build", str(config.build), "--bindings",
         str(config.bindings), "--credentials", str(config.credentials), "--store", pg_url],
        env={**os.environ, **ENV}, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "TRACE_KEY_REQUIRED" in proc.stderr


def test_seif_serve_takes_exactly_one_store(tmp_path: Path) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:9")
    base: list[Any] = [*seif_command(), "serve", "--build", str(config.build), "--bindings",
                       str(config.bindings), "--credentials", str(config.credentials)]  # fmt: skip
    for extra in ([], ["--data", str(tmp_path / "d"), "--store", "sqlite:x"], ["--store", "x"]):
        proc = subprocess.run(
            [*base, *extra], env={**os.environ, **ENV}, capture_output=True, text=True,
            timeout=60, check=False,
        )  # fmt: skip
        assert proc.returncode == 2 and "store" in proc.stderr, (extra, proc.stderr)
    assert not (tmp_path / "d").exists()  # nothing was created


def test_the_store_s_log_exports_and_replays_exactly(tmp_path: Path, pg_url: str) -> None:
    """``seif trace export --store URL`` writes the replicas' log in the file log's format, and
    ``seif replay`` reproduces every disclosure recorded by either replica."""

    async def scenario() -> str:
        async with replicas(tmp_path, pg_url) as (a, b):
            ref = (await a.resolve())["contextRef"]
            await b.resolve(objective="learner", consumer="tutor-app")
            await b.execute(ref, "inspect-context", "x-1", READ_ARGS)
            return str(a.config.build)

    build = run_async(scenario())
    out = tmp_path / "log.cbor"
    command = [*seif_command(), "trace", "export", "--store", pg_url, "--out", str(out)]
    exported = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert exported.returncode == 0, exported.stderr
    assert "exported" in exported.stdout
    replayed = subprocess.run(
        [*seif_command(), "replay", "--build", build, "--log", str(out), "--json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    report = json.loads(replayed.stdout)["replay"]
    assert report["ok"] is True and report["disclosed"] >= 2, report
    assert report["reproduced"] == report["disclosed"] and report["mismatched"] == 0
