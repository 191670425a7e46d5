"""``python -m bench.pending_list [--calls N] [--size BYTES] [--seconds S]``: what listing the
calls held for approval costs when one application fills its share of them.

The synthetic executor, the runtime (``seif serve`` on the reference build, as
:mod:`bench.runtime` starts it) and the approval server (``seif approval-server``) run as
subprocesses on loopback. One application credential asks ``--calls`` ``propose-change`` calls
(32 per context, the most a context holds) whose ``details`` are ``--size`` bytes each (4-byte
characters: the tool allows 4,000 characters): with the defaults, 1,000 calls of 16 KB, the
share of held calls one credential may fill. Then,
timed from this process (an aiohttp client):

- ``first list``: ``GET /v1/pending`` of the approval server, as the approvers' page asks it
  when it signs in and on every refresh (median of 9), and the bytes of its answer;
- ``runtime list``: the runtime's own ``GET /v1/context/tools/pending`` the approval server
  reads (median of 9), and its bytes;
- ``every page``: following ``next`` from the first list until it is null (a server without
  paging answers everything at once), the requests and bytes it took;
- ``five pages polling``: five clients asking ``GET /v1/pending`` back to back for
  ``--seconds`` seconds, the median and slowest list;
- the high-water mark of each server's resident memory (``VmHWM``) at the end.

Prints one JSON object. Runs against whatever tree it is started from, so the same command
measures a commit before and after a change.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.harness import started
from bench.runtime import (
    APP_TOKEN,
    APPROVAL_TOKEN,
    executor_argv,
    prepare_setup,
    runtime_argv,
)

APPROVER_TOKEN = "bench-approver-token-8c2e5a"
PER_CONTEXT = 32
APP = {"Authorization": f"Bearer {APP_TOKEN}"}
APPROVER = {"Authorization": f"Bearer {APPROVER_TOKEN}"}
RUNNER = {"x-seif-tool-approval": APPROVAL_TOKEN}
PROPOSAL = {
    "target": "course/data-literacy/module-2/lesson-3",
    "kind": "clarify",
    "summary": "Define the median before the outlier example.",
}


async def fill(http: aiohttp.ClientSession, url: str, calls: int, size: int) -> None:
    """``calls`` propose-change calls held for approval, ``PER_CONTEXT`` per context."""
    details = "\U0001f600" * min(4000, size // 4)  # 4 bytes each; 4,000 characters at most
    for first in range(0, calls, PER_CONTEXT):
        body = {"objective": "authoring", "consumer": "course-authoring"}
        async with http.post(url + "/v1/context/resolve", json=body, headers=APP) as r:
            ctx = (await r.json())["contextRef"]
        asks = [
            _ask(http, url, ctx, f"w{n}", {**PROPOSAL, "details": details})
            for n in range(first, min(calls, first + PER_CONTEXT))
        ]
        await asyncio.gather(*asks)


async def _ask(
    http: aiohttp.ClientSession, url: str, ctx: str, call_id: str, arguments: Any
) -> None:
    body = {"contextRef": ctx, "tool": "propose-change", "callId": call_id, "arguments": arguments}
    async with http.post(url + "/v1/context/tools/execute", json=body, headers=APP) as r:
        receipt = await r.json()
    if receipt.get("reason") != "APPROVAL_REQUIRED":
        raise RuntimeError(f"not held for approval: {receipt}")


async def timed_get(
    http: aiohttp.ClientSession, url: str, headers: dict[str, str]
) -> tuple[float, int, Any]:
    """(seconds, bytes of the answer, its JSON) of one GET."""
    start = time.perf_counter()
    async with http.get(url, headers=headers) as r:
        raw = await r.read()
        if r.status != 200:
            raise RuntimeError(f"GET {url}: {r.status} {raw[:300]!r}")
    return time.perf_counter() - start, len(raw), json.loads(raw)


async def median_of(
    http: aiohttp.ClientSession, url: str, headers: dict[str, str]
) -> dict[str, Any]:
    runs = [await timed_get(http, url, headers) for _ in range(9)]
    return {
        "median_s": round(statistics.median(r[0] for r in runs), 4),
        "bytes": runs[-1][1],
        "calls": len(runs[-1][2]["pending"]),
    }


async def every_page(http: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    start, requests, size, calls, after = time.perf_counter(), 0, 0, 0, None
    while True:
        query = "" if after is None else "?after=" + after
        _, got, body = await timed_get(http, url + "/v1/pending" + query, APPROVER)
        requests, size, calls = requests + 1, size + got, calls + len(body["pending"])
        after = body.get("next")
        if after is None:
            break
    return {"seconds": round(time.perf_counter() - start, 4), "requests": requests,
            "bytes": size, "calls": calls}  # fmt: skip


async def polling(http: aiohttp.ClientSession, url: str, seconds: float) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    times: list[float] = []

    async def page() -> None:
        while time.monotonic() < deadline:
            took, _, _ = await timed_get(http, url + "/v1/pending", APPROVER)
            times.append(took)

    await asyncio.gather(*(page() for _ in range(5)))
    return {"lists": len(times), "median_s": round(statistics.median(times), 4),
            "max_s": round(max(times), 4)}  # fmt: skip


def high_water_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


async def measure(runtime: str, approval: str, args: argparse.Namespace) -> dict[str, Any]:
    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        await fill(http, runtime, args.calls, args.size)
        return {
            "first list": await median_of(http, approval + "/v1/pending", APPROVER),
            "runtime list": await median_of(http, runtime + "/v1/context/tools/pending", RUNNER),
            "every page": await every_page(http, approval),
            "five pages polling": await polling(http, approval, args.seconds),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pending_list", description=__doc__)
    parser.add_argument("--calls", type=int, default=1_000)
    parser.add_argument("--size", type=int, default=16_000, help="bytes of each call's details")
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="seif-bench-pending-") as tmp:
        work = Path(tmp)
        setup = prepare_setup(work)
        env = {**setup.env, "SEIF_APPROVER_BENCH": APPROVER_TOKEN}
        approvers = {"approvers": [{"id": "bench", "tokenRef": "env:SEIF_APPROVER_BENCH"}]}
        (work / "approvers.json").write_text(json.dumps(approvers))
        with started("executor", executor_argv(), env, work / "executor.log") as executor:
            setup.write(executor.url)
            with started("runtime", runtime_argv(setup), env, work / "runtime.log") as runtime:
                approval_argv = [sys.executable, "-m", "seif.cli", "approval-server",
                                 "--runtime", runtime.url, "--approvers",
                                 str(work / "approvers.json"), "--port", "0"]  # fmt: skip
                with started("approval", approval_argv, env, work / "approval.log") as approval:
                    out = asyncio.run(measure(runtime.url, approval.url, args))
                    out["high water MiB"] = {
                        "runtime": high_water_mib(runtime.pid),
                        "approval server": high_water_mib(approval.pid),
                    }
    print(json.dumps({"calls": args.calls, "size": args.size, **out}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
