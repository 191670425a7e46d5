"""`GET /v1/traces/{contextRef}` reads one context's records from the decision log's index, in a
reader thread: the same events as a full read filtered by contextRef, while `/v1/health` keeps
answering. The runtime runs as a `seif serve` process so that the client's own work (reading
and parsing a large answer) is not mistaken for the server's."""

from __future__ import annotations

import asyncio
import json
import random
import secrets
import threading
import time
import tracemalloc
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from servers.log.decision_log import DecisionLog, admit, read_records
from servers.log.index import TraceIndex
from tests.support.runtime_harness import (
    APP_TOKEN,
    BEARER,
    OPERATOR_TOKEN,
    READ_ARGS,
    listening,
    run_async,
    running_stack,
    start_serve,
    stop,
    write_config,
)

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
    """The trace as an operator reads it (``traces.read`` alone: any context, a context never
    resolved too, where an application's credential gets 404)."""
    operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}

    async def get() -> dict[str, Any]:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{base}/v1/traces/{ctx}", headers=operator) as r,
        ):
            assert r.status == 200
            found: dict[str, Any] = json.loads(await r.read())
            return found

    return run_async(get())


# --- the index is bounded: what it dropped is found by a scan ------------------------------


def _runtime_like(rng: random.Random, refs: list[str], n: int) -> dict[str, Any]:
    """A record as the runtime writes them: a context's first record is its DISCLOSED (a
    fresh contextRef), later ones name a context already disclosed; some name none."""
    roll = rng.random()
    if roll < 0.25 or not refs:
        refs.append(f"ctx_{n}")
        return {"event": "DISCLOSED", "contextRef": refs[-1], "n": n}
    if roll < 0.3:
        return {"event": "DISCLOSED", "n": n}  # a blocked resolution names no context
    ref = rng.choice(refs[-3:]) if roll < 0.6 else rng.choice(refs)  # recent ones more often
    return {"event": rng.choice(["DENIED", "INTENT", "RESULT", "REPORTED"]), "contextRef": ref}


def _check_traces(log: DecisionLog, path: Path, refs: list[str]) -> None:
    everything = list(read_records(path))
    for ref in [*refs, "ctx_never", ""]:
        expected = [r for r in everything if r.get("contextRef") == ref]
        assert log.trace(ref) == expected, ref
        assert log.trace(ref) == expected, ref  # again, once the index holds it whole


def test_a_dropped_contexts_trace_still_equals_read_records_filtered(tmp_path: Path) -> None:
    """With room for 3 contexts and 40 positions, most contexts are dropped, some come back
    (a new record after they were dropped), across a reopen (the index rebuilt by the pass at
    open, keeping the most recent) and every way of appending: every trace is still the
    filtered full read, and the bounds hold after every append."""
    path = tmp_path / "decisions.cbor"
    rng, refs = random.Random(5), list[str]()
    with DecisionLog.open(path, fsync_every=0, trace_contexts=3, trace_records=40) as log:
        for n in range(400):
            log.append(_runtime_like(rng, refs, n))
            assert (len(log._index), log._index.records) <= (3, 40)
            if n % 97 == 0:
                _check_traces(log, path, refs)
        _check_traces(log, path, refs)
    with DecisionLog.open(path, fsync_every=0, trace_contexts=3, trace_records=40) as log:
        assert (len(log._index), log._index.records) <= (3, 40)
        _check_traces(log, path, refs)
        log.write_now([admit(_runtime_like(rng, refs, 1000 + n)) for n in range(100)])

        async def more() -> None:
            records = [_runtime_like(rng, refs, 2000 + n) for n in range(50)]
            await asyncio.gather(*(log.append_async(r) for r in records))

        asyncio.run(more())
        assert (len(log._index), log._index.records) <= (3, 40)
        _check_traces(log, path, refs)
    assert len(refs) > 50


def test_a_context_with_more_records_than_the_index_holds_is_traced_whole(
    tmp_path: Path,
) -> None:
    path = tmp_path / "decisions.cbor"
    with DecisionLog.open(path, fsync_every=0, trace_contexts=10, trace_records=25) as log:
        log.append({"event": "DISCLOSED", "contextRef": "ctx_big"})
        for n in range(100):
            log.append({"event": "DENIED", "contextRef": "ctx_big", "n": n})
            if n % 7 == 0:
                log.append({"event": "DISCLOSED", "contextRef": f"ctx_{n}"})
        assert log._index.records <= 25
        _check_traces(log, path, ["ctx_big", "ctx_0", "ctx_98"])
        assert len(log.trace("ctx_big")) == 101


def test_the_index_stays_bounded_in_size_and_memory_with_many_contexts() -> None:
    """200,000 contexts of 3 records into an index for 20,000: it holds the most recent
    20,000, and its memory is what docs/data-directory.md says (about 350 bytes a context,
    16 a position)."""
    contexts, records = 20_000, 200_000
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        index = TraceIndex(max_contexts=contexts, max_records=records)
        offset = 0
        for _ in range(200_000):
            ref = "ctx_" + secrets.token_urlsafe(18)  # held by the index alone, as at run time
            for event in ("DISCLOSED", "DENIED", "INTENT"):
                index.add({"event": event, "contextRef": ref}, offset, 400)
                offset += 400
            assert len(index) <= contexts and index.records <= records
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(index) == contexts and index.records == 3 * contexts
    assert used < contexts * 400 + index.records * 24, used / contexts
    assert index.dropped_below == (200_000 - contexts) * 3 * 400  # the last dropped one's end
    with pytest.raises(ValueError):
        TraceIndex(max_contexts=0)


def test_an_evicted_context_over_http_while_health_answers(tmp_path: Path) -> None:
    """A runtime on loopback whose index is cut to 2 contexts: the trace of a context it no
    longer holds (found by a scan of about 9 MB in the reader thread) is the filtered full
    read, health checks answer meanwhile, and a call on that context afterwards is in its
    next trace."""

    async def session() -> None:
        async with running_stack(tmp_path) as s:
            old = (await s.resolve(objective="learner", consumer="tutor-app"))["contextRef"]
            records = [admit(_denied(old if i % 10 == 0 else f"ctx_o{i}", i)) for i in range(BIG)]
            assert all(isinstance(r, int) for r in s.prepared.log.write_now(records))
            recent = [(await s.resolve())["contextRef"] for _ in range(2)]
            assert s.prepared.log.bound_traces(2, 1000) == (2, 2)  # `old` is dropped
            log_of = s.prepared.log
            scanned_in: list[int] = []
            scan = log_of.trace

            def recorded_scan(context_ref: str) -> list[dict[str, Any]]:
                scanned_in.append(threading.get_ident())
                return scan(context_ref)

            log_of.trace = recorded_scan  # type: ignore[method-assign]  # observes the thread
            stop_at = threading.Event()
            pinger = asyncio.ensure_future(_pings(s.runtime, stop_at))
            await asyncio.sleep(0.05)
            started = time.monotonic()
            async with s.http.get(f"{s.runtime}/v1/traces/{old}", headers=BEARER) as r:
                assert r.status == 200
                answer = json.loads(await r.read())
            ended = time.monotonic()
            stop_at.set()
            spans = await pinger
            log = s.prepared.log.path
            expected = [r for r in read_records(log) if r.get("contextRef") == old]
            assert answer == {"contextRef": old, "events": expected}
            assert len(expected) > BIG // 10
            log_of.trace = scan  # type: ignore[method-assign]
            # the scan ran in a reader thread, never in the event loop's, and the loop answered
            # health checks meanwhile (how many depends on the machine's load: at least one)
            assert scanned_in and threading.get_ident() not in scanned_in, scanned_in
            during = [b for a, b in spans if a >= started and b <= ended]
            assert len(during) >= 1, (len(spans), ended - started)
            denied = await s.execute(old, "inspect-context", "late-1", READ_ARGS)
            assert denied["status"] in ("SUCCEEDED", "DENIED")
            after = await _trace(s, old)
            assert after["events"][: len(expected)] == expected
            everything = [r for r in read_records(log) if r.get("contextRef") == old]
            assert after == {"contextRef": old, "events": everything}
            for ref in recent:
                assert (await _trace(s, ref))["events"] == [
                    r for r in read_records(log) if r.get("contextRef") == ref
                ]

    run_async(session())


async def _trace(s: Any, ref: str) -> dict[str, Any]:
    async with s.http.get(f"{s.runtime}/v1/traces/{ref}", headers=BEARER) as r:
        assert r.status == 200
        found: dict[str, Any] = json.loads(await r.read())
        return found
