"""`GET /v1/traces/{contextRef}` reads one context's records from the decision log's index, in a
reader thread: the same events as a full read filtered by contextRef, while `/v1/health` keeps
answering. The runtime runs as a `seif serve` process so that the client's own work (reading
and parsing a large answer) is not mistaken for the server's."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from runtime_harness import (
    APP_TOKEN,
    BEARER,
    listening,
    run_async,
    running_stack,
    start_serve,
    stop,
    write_config,
)

from servers.log.decision_log import admit, read_records

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
BIG = 20_000
"""Records of the one large context: about 9 MB of log."""


def _denied(ctx: str, i: int) -> dict[str, Any]:
    return {
        "event": "DENIED",
        "contextRef": ctx,
        "tool": "inspect-context",
        "callId": f"b{i}",
        "outcome": "DENY",
        "reason": "CALL_LIMIT_EXCEEDED",
        "coordinates": {"objective": "learner", "consumer": "tutor-app", "trace": f"t-{i}"},
        "explanation": {"pointer": "/tools/1/limits/maxCalls", "rule": "maxCalls " * 20},
    }


def _seed(root: Path) -> tuple[str, str]:
    """A data directory whose log holds one large context and a small one among others."""

    async def session() -> tuple[str, str]:
        async with running_stack(root) as s:
            big = (await s.resolve())["contextRef"]
            small = (await s.resolve(objective="learner", consumer="tutor-app"))["contextRef"]
            records = [admit(_denied(big if i % 10 else small, i)) for i in range(BIG)]
            records += [admit(_denied(f"ctx_other_{i}", i)) for i in range(500)]
            assert all(isinstance(r, int) for r in s.prepared.log.write_now(records))
            return big, small

    return run_async(session())


def _fetch(url: str, out: dict[str, Any]) -> None:
    """The traces request from another thread, raw bytes only: parsing waits until later."""
    started = time.monotonic()
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {APP_TOKEN}"})
    with urllib.request.urlopen(request, timeout=30) as r:
        out["body"] = r.read()
    out["span"] = (started, time.monotonic())


async def _pings(base: str, stop_at: threading.Event) -> list[tuple[float, float]]:
    spans: list[tuple[float, float]] = []
    async with aiohttp.ClientSession() as session:
        while not stop_at.is_set():
            started = time.monotonic()
            async with session.get(base + "/v1/health") as r:
                assert r.status == 200
                await r.read()
            spans.append((started, time.monotonic()))
            await asyncio.sleep(0.005)
    return spans


async def _traced_while_pinging(base: str, ctx: str) -> tuple[bytes, list[float], int]:
    stop_at = threading.Event()
    pinger = asyncio.ensure_future(_pings(base, stop_at))
    await asyncio.sleep(0.05)
    out: dict[str, Any] = {}
    await asyncio.to_thread(_fetch, f"{base}/v1/traces/{ctx}", out)
    stop_at.set()
    spans = await pinger
    first, last = out["span"]
    during = [end - start for start, end in spans if start >= first and end <= last]
    return out["body"], [end - start for start, end in spans], len(during)


def test_a_large_trace_is_exact_and_health_keeps_answering(tmp_path: Path) -> None:
    big, small = _seed(tmp_path)
    config = write_config(tmp_path, "http://127.0.0.1:9")
    proc = start_serve(config)
    try:
        base = listening(proc)
        body, latencies, during = run_async(_traced_while_pinging(base, big))
        log = config.data / "decisions.cbor"
        everything = list(read_records(log))
        for ctx, answer in ((big, json.loads(body)), (small, _get_trace(base, small))):
            expected = [r for r in everything if r.get("contextRef") == ctx]
            assert answer == {"contextRef": ctx, "events": expected}
        assert len(json.loads(body)["events"]) > BIG * 0.9
        assert during >= 3, (during, latencies)  # the loop answered while the trace was read
        assert max(latencies) < 0.2, sorted(latencies)[-5:]
        assert _get_trace(base, "ctx_never_resolved") == {
            "contextRef": "ctx_never_resolved",
            "events": [],
        }
    finally:
        stop(proc)


def _get_trace(base: str, ctx: str) -> dict[str, Any]:
    async def get() -> dict[str, Any]:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{base}/v1/traces/{ctx}", headers=BEARER) as r,
        ):
            assert r.status == 200
            found: dict[str, Any] = json.loads(await r.read())
            return found

    return run_async(get())
