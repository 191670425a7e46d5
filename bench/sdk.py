"""``python -m bench sdk``: the Python SDK's own cost per execute, against a bare aiohttp client
call of the same route, in one run.

The executor and the runtime (`seif serve`) run as subprocesses on loopback; this process is the
client. Each call is timed by the client thread's CPU (``time.thread_time_ns``: what the client
spends, not the time it waits for the runtime) and by wall clock. The two clients alternate in
blocks of :data:`BLOCK` calls, so drift of the machine falls on both alike; each call has a
fresh call id (a real dispatch, never a duplicate), spread over contexts resolved before the
measure so no tool's ``maxCalls`` is reached.

- ``bare``: one ``aiohttp.ClientSession`` (as the SDK keeps one), ``json.dumps`` of the body,
  ``session.post``, ``read`` and ``json.loads`` of the receipt: the least an application can do.
- ``sdk``: ``RuntimeClient.execute``, which also checks its arguments, parses the answer through
  the strict JSON boundary, builds an immutable :class:`seif.Receipt` and keeps a transport
  failure after sending as an ``UNKNOWN`` receipt.

The target (issue 11): at most 1.3x the bare call's client CPU per execute (the median).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.harness import quantile, started
from bench.runtime import (
    APP_TOKEN,
    ARGUMENTS,
    CONSUMER,
    OBJECTIVE,
    TOOL,
    check_ready,
    executor_argv,
    prepare_setup,
    runtime_argv,
)

BLOCK = 100
TARGET_RATIO = 1.3


async def _contexts(url: str, count: int) -> list[str]:
    from seif import RuntimeClient

    async with RuntimeClient(url, APP_TOKEN) as client:
        return [
            (await client.resolve(OBJECTIVE, consumer=CONSUMER)).context_ref for _ in range(count)
        ]


def _bare(session: Any, url: str) -> Callable[[str, str], Awaitable[Any]]:
    headers = {"Authorization": f"Bearer {APP_TOKEN}", "Content-Type": "application/json"}
    route = url + "/v1/context/tools/execute"

    async def call(ctx: str, call_id: str) -> Any:
        body = {"contextRef": ctx, "tool": TOOL, "callId": call_id, "arguments": ARGUMENTS}
        async with session.post(route, data=json.dumps(body), headers=headers) as r:
            return json.loads(await r.read())

    return call


def _status(receipt: Any) -> str:
    return str(receipt["status"] if isinstance(receipt, dict) else receipt.status)


async def _measure(url: str, calls: int, per_context: int) -> dict[str, Any]:
    import aiohttp

    from seif import RuntimeClient

    refs = iter(await _contexts(url, -(-2 * calls // per_context) + 6))  # + the warm-up
    samples: dict[str, dict[str, list[int]]] = {k: {"cpu": [], "wall": []} for k in ("bare", "sdk")}
    statuses: dict[str, dict[str, int]] = {"bare": {}, "sdk": {}}
    async with aiohttp.ClientSession() as session, RuntimeClient(url, APP_TOKEN) as sdk:
        impls: dict[str, Callable[[str, str], Awaitable[Any]]] = {
            "bare": _bare(session, url),
            "sdk": lambda ctx, call_id: sdk.execute(ctx, TOOL, call_id, ARGUMENTS),
        }
        used = {"ctx": next(refs), "n": 0}
        serial = 0
        for _ in range(2):  # warm both connections and code paths, not measured
            for call in impls.values():
                serial += 1
                await call(next(refs), f"warm-{serial}")
        for block in range(-(-calls // BLOCK) * 2):
            name = ("bare", "sdk")[block % 2]
            for _ in range(BLOCK):
                if used["n"] == per_context:
                    used["ctx"], used["n"] = next(refs), 0
                used["n"] += 1
                serial += 1
                cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
                receipt = await impls[name](str(used["ctx"]), f"c{serial}")
                samples[name]["wall"].append(time.perf_counter_ns() - wall)
                samples[name]["cpu"].append(time.thread_time_ns() - cpu)
                status = _status(receipt)
                statuses[name][status] = statuses[name].get(status, 0) + 1
    return {"samples": samples, "statuses": statuses}


def run(*, quick: bool = False) -> dict[str, Any]:
    calls = 200 if quick else 3_000
    with tempfile.TemporaryDirectory(prefix="seif-bench-sdk-") as tmp:
        work = Path(tmp)
        setup = prepare_setup(work)
        with started("executor", executor_argv(), setup.env, work / "executor.log") as executor:
            setup.write(executor.url)
            argv = runtime_argv(setup)
            with started("runtime", argv, setup.env, work / "runtime.log") as runtime:
                check_ready(runtime.url)
                found = asyncio.run(_measure(runtime.url, calls, setup.calls_per_context))
    return report(found, calls)


def _quantiles(values: list[int]) -> tuple[float, float]:
    ordered = sorted(float(v) for v in values)
    return quantile(ordered, 0.50), quantile(ordered, 0.99)


def report(found: dict[str, Any], calls: int) -> dict[str, Any]:
    rows, stats = [], {}
    for name in ("bare", "sdk"):
        for kind in ("cpu", "wall"):
            values = found["samples"][name][kind]
            stats[(name, kind)] = median, p99 = _quantiles(values)
            rows.append(
                {
                    "name": f"execute, client {kind}",
                    "impl": name,
                    "median_ns": median,
                    "p99_ns": p99,
                    "calls": len(values),
                }
            )
    cpu = stats[("sdk", "cpu")][0] / stats[("bare", "cpu")][0]
    cpu99 = stats[("sdk", "cpu")][1] / stats[("bare", "cpu")][1]
    wall = stats[("sdk", "wall")][0] / stats[("bare", "wall")][0]
    verdict = "met" if cpu <= TARGET_RATIO else "NOT met"
    return {
        "rows": rows,
        "ratios": {
            "sdk/bare client CPU per execute (median)": cpu,
            "sdk/bare client CPU per execute (p99)": cpu99,
            "sdk/bare wall per execute (median)": wall,
        },
        "statuses": found["statuses"],
        "target": {"ratio": TARGET_RATIO, "met": cpu <= TARGET_RATIO},
        "notes": [
            f"{calls} executes per client, alternating in blocks of {BLOCK}, each a new call id",
            f"client CPU (thread time) sdk/bare median {cpu:.2f}x: target <= {TARGET_RATIO}x"
            f" {verdict}",
            f"receipts: {found['statuses']}",
        ],
    }
