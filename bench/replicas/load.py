"""The client of ``python -m bench replicas``, a process of its own (``python -m bench.replicas
load``): an HTTP/1.1 keep-alive client (``servers.executor.http1`` on uvloop), closed loop,
request ``i`` to replica ``i mod n``; it resolves its contexts and warms up (untimed), says it
is ready, and runs its timed phase when told to."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.harness import Phase, closed_loop
from bench.replicas.config import SPREAD
from bench.runtime import (
    ARGUMENTS,
    CONTEXT_REF,
    LOAD_TOKEN_ENV,
    TOOL,
    receipt_problem,
    resolve_body,
)


def contexts_needed(total: int, per: int, spread: int = SPREAD) -> int:
    """How many contexts ``total`` calls use under :func:`context_of`."""
    block = per * spread
    return (total // block) * spread + min(spread, total % block)


def context_of(i: int, per: int, spread: int = SPREAD) -> int:
    """The context of call ``i``: blocks of ``per * spread`` calls over ``spread`` contexts,
    each context's calls ``spread`` apart (at most ``per`` of them)."""
    block, within = divmod(i, per * spread)
    return block * spread + within % spread


def load_main(argv: list[str]) -> int:
    """``python -m bench.replicas load --url URL... --concurrency N --requests N --warmup N
    --duration S --calls-per-context N --name NAME``: resolves, warms up, prints ``READY
    {...}``, waits for a line on stdin, runs the timed phase and prints its JSON result. The
    bearer token comes from ``SEIF_BENCH_LOAD_TOKEN``."""
    parser = argparse.ArgumentParser(prog="python -m bench.replicas load")
    parser.add_argument("--url", action="append", required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--requests", type=int, required=True)
    parser.add_argument("--warmup", type=int, required=True)
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--calls-per-context", type=int, required=True)
    parser.add_argument("--name", default="c0")
    args = parser.parse_args(argv)
    try:
        import uvloop
    except ImportError:  # asyncio's own loop: the same, with more client CPU
        result = asyncio.run(_client(args))
    else:
        result = uvloop.run(_client(args))
    print(json.dumps(result, separators=(",", ":")), flush=True)
    return 0


class LoadClient:
    """The client's requests: resolves and executes, request ``i`` to replica ``i mod n``."""

    def __init__(self, args: argparse.Namespace) -> None:
        from servers.executor.http1 import Http1Client

        self.http = Http1Client()
        self.headers = [
            ("Authorization", f"Bearer {os.environ.get(LOAD_TOKEN_ENV, '')}"),
            ("Content-Type", "application/json"),
        ]
        bases: list[str] = args.url
        self.resolve_urls = [base + "/v1/context/resolve" for base in bases]
        self.execute_urls = [base + "/v1/context/tools/execute" for base in bases]
        self.concurrency: int = args.concurrency
        self.per: int = args.calls_per_context
        self.name: str = args.name
        self.refs: list[str] = [""] * contexts_needed(args.warmup + args.requests, self.per)

    async def closed_loop(
        self,
        indices: range,
        duration_s: float,
        request: Callable[[int], tuple[str, bytes]],
        check: Callable[[int, int, bytes], str | None],
    ) -> Phase:
        """:func:`bench.harness.closed_loop` of the POSTs ``request(i)`` (a URL and a body),
        ``concurrency`` workers, each answer checked by ``check``."""
        from servers.executor.http1 import TransportError

        async def send(i: int) -> tuple[int, str | None]:
            url, body = request(i)
            start = time.perf_counter_ns()
            try:
                answer = await self.http.request(
                    "POST", url, self.headers, body, timeout_s=60.0, max_bytes=1 << 20
                )
            except TransportError as error:
                return 0, error.reason
            took = time.perf_counter_ns() - start
            return took, check(i, answer.status, answer.body)

        return await closed_loop(send, indices, self.concurrency, duration_s)

    def resolve(self, i: int) -> tuple[str, bytes]:
        urls = self.resolve_urls
        return urls[i % len(urls)], resolve_body(i)

    def resolved(self, i: int, status: int, body: bytes) -> str | None:
        if status != 200:
            return f"resolve HTTP {status}"
        found = CONTEXT_REF.search(body)
        if found is None:
            return "resolve: no contextRef"
        self.refs[i] = found.group(1).decode()
        return None

    def execute(self, i: int) -> tuple[str, bytes]:
        call = {
            "contextRef": self.refs[context_of(i, self.per)],
            "tool": TOOL,
            "callId": f"{self.name}-{i}",
            "arguments": ARGUMENTS,
        }
        urls = self.execute_urls
        return urls[i % len(urls)], json.dumps(call, separators=(",", ":")).encode()

    @staticmethod
    def executed(_i: int, status: int, body: bytes) -> str | None:
        return receipt_problem(status, body)


async def _prepare(client: LoadClient, warmup: int) -> dict[str, Any]:
    """Resolve every context the calls need, then warm up (both untimed)."""
    began = time.perf_counter()
    contexts = await client.closed_loop(
        range(len(client.refs)), 3600.0, client.resolve, client.resolved
    )
    if contexts.errors:
        raise RuntimeError(f"resolving the contexts failed: {dict(contexts.errors)}")
    resolve_s = time.perf_counter() - began
    warm = await client.closed_loop(range(warmup), 3600.0, client.execute, client.executed)
    return {"contexts": len(client.refs), "resolve_s": round(resolve_s, 3), "warmup": warm.counts()}


async def _client(args: argparse.Namespace) -> dict[str, Any]:
    client = LoadClient(args)
    ready = await _prepare(client, args.warmup)
    print("READY " + json.dumps(ready), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    before = resource.getrusage(resource.RUSAGE_SELF)
    timed = await client.closed_loop(
        range(args.warmup, args.warmup + args.requests),
        args.duration,
        client.execute,
        client.executed,
    )
    after = resource.getrusage(resource.RUSAGE_SELF)
    await client.http.close()
    return {
        **ready,
        **timed.counts(),
        "elapsed_s": round(timed.elapsed_ns / 1e9, 4),
        "cpu_s": [
            round(after.ru_utime - before.ru_utime, 3),
            round(after.ru_stime - before.ru_stime, 3),
        ],
        "latencies_ns": timed.latencies_ns,
    }
