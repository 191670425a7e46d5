"""``python -m bench upstream``: ``tools/call`` of a read tool of an upstream MCP server through
seif (the HTTP API's execute and seif's MCP) against the official client calling the upstream
directly, in one run.

Processes on loopback, each started here:

- the upstream (:mod:`bench.upstream_server`): a Streamable HTTP server on the official ``mcp``
  SDK with the SDK's defaults, one read tool ``lookup``, a bearer token;
- the runtime, ``seif serve --mcp`` on a project made as a user makes one: ``seif tool import
  --url`` of ``lookup`` (pinned), ``seif tool include``, ``maxCalls`` 20 (the most a tool may
  declare), built; the bindings name the upstream by ``url`` and ``secretRef``; a fresh data
  directory, durability as shipped (every intent committed before the call is sent);
- the load generator (``python -m bench.upstream load``), closed loop, three targets:
  - ``direct`` (the baseline): the official client (``mcp.Client``, ``mcp`` 2.3.0, its default
    mode: the SDK server speaks the stateless ``2026-07-28`` revision) calling the upstream, one
    client per worker;
  - ``execute``: ``POST /v1/context/tools/execute`` (aiohttp), on contexts resolved untimed;
  - ``mcp``: the same client calling seif's ``/mcp/lookup`` (the same revision), one client
    per context (``deployment`` coordinate), each opened and listed untimed.

seif's own connection to the upstream is a ``2025-11-25`` session opened by the SDK's client
(the handshake, the listing, ``list_changed``); its calls go on seif's HTTP/1.1 client
(:mod:`servers.upstream.calls`).

Every call is ``lookup`` with a distinct reference and (through seif) a distinct call id. The
runtime is pinned to the first core; the upstream and the load generator share the second
(``SEIF_BENCH_PIN=0``: no pinning), so the direct baseline has that core to itself and seif's
cost falls on a core of its own.

Each round runs, for each target (order rotating): a *latency* phase, one worker calling one at
a time (what a call through seif adds, without queueing), then a *rate* phase, ``connections``
workers (throughput); a warm-up round first, not counted. Every answer is checked (``direct``
and ``mcp``: ``isError`` false and the reference echoed in ``structuredContent``; ``execute``:
a ``SUCCEEDED`` receipt, not a duplicate, with that output). The upstream's count of calls
must grow by exactly each phase's successes (every call dispatched once), and after the run
every success through seif must be a ``SUCCEEDED`` intent in the store.

Figures: requests per second of the rate phases; p50 and p99 latency of both phases; *added*
latency, the latency phase's p50 and p99 of each seif target minus the direct baseline's; the
runtime's and the upstream's CPU time per call (``/proc``). Targets (issue 31): each seif
target at least 0.5x the direct rate, p50 added at most 2 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.harness import (
    Phase,
    Server,
    closed_loop,
    latency_row,
    quantiles,
    run_json,
    started,
    summed_counts,
)
from bench.runtime import (
    APP_TOKEN,
    LOAD_TOKEN_ENV,
    PROFILE_ENV,
    _cpu_sets,
    _env,
    cores,
    cpu_delta,
    cpu_seconds,
    get_json,
    receipt_problem,
    stored_intents,
    summary,
)
from bench.upstream_server import PATH, TOOL_NAME

TARGETS = ("direct", "execute", "mcp")
NAMES = {
    "direct": ("official client -> upstream", "direct"),
    "execute": ("POST /v1/context/tools/execute -> upstream", "seif HTTP API"),
    "mcp": ("official client -> seif MCP -> upstream", "seif MCP"),
}
TARGET_RATIO = 0.5
"""Each seif target's rate must reach this fraction of the direct rate."""
TARGET_ADDED_P50_MS = 2.0
"""What a call through seif may add to the direct p50 latency, at most."""
SERVER, OBJECTIVE, PROFILE = "docs", "lookup", "lookup"
TOOL = f"{SERVER}-{TOOL_NAME}"
MAX_CALLS = 20
UPSTREAM_TOKEN = "bench-upstream-token-8c2e5a1f"
UPSTREAM_TOKEN_ENV = "CONTEXT_TOOL_DOCS_TOKEN"
CONSUMER = "bench"
CALL_ID_META = "io.seif/callId"


@dataclass(frozen=True, slots=True)
class Load:
    connections: int
    rounds: int
    sequential_calls: int
    rate_calls: int
    duration_s: float
    warmup_calls: int


FULL = Load(
    connections=16,
    rounds=3,
    sequential_calls=300,
    rate_calls=3_000,
    duration_s=8.0,
    warmup_calls=200,
)
QUICK = Load(
    connections=8, rounds=1, sequential_calls=20, rate_calls=120, duration_s=3.0, warmup_calls=20
)


# ================================================================ the load generator


def _looked_up(structured: Any, ref: str) -> str | None:
    if not isinstance(structured, dict) or structured.get("ref") != ref:
        return "not this call's output"
    return None


class Target:
    """One target's clients (or contexts) for a phase: ``open`` them (untimed), ``send`` call
    ``i`` (its latency and what was wrong), ``close`` them (untimed)."""

    def __init__(self, mode: str, config: dict[str, Any], http: Any) -> None:
        self.mode, self.config, self.http = mode, config, http
        self.name = TOOL_NAME if mode == "direct" else config["tool_name"]
        self.tag = ""
        self.slots: list[Any] = []
        self.closing, self.opening = asyncio.Event(), asyncio.Semaphore(1)
        self.holders: list[asyncio.Future[None]] = []
        self.pool: Any = None

    async def open(self, tag: str, calls: int, workers: int) -> None:
        self.tag = tag
        count = workers if self.mode == "direct" else -(-calls // MAX_CALLS)
        if self.mode == "execute":
            self.slots = list(await asyncio.gather(*(self._resolve(k) for k in range(count))))
            return
        self.closing, self.opening = asyncio.Event(), asyncio.Semaphore(workers)
        self.pool = self._pool(workers)
        opened = [asyncio.get_running_loop().create_future() for _ in range(count)]
        self.holders = [asyncio.ensure_future(self._hold(k, o)) for k, o in enumerate(opened)]
        self.slots = list(await asyncio.gather(*opened))

    async def close(self) -> int:
        """Close the phase's clients; how many failed to close (counted, not raised: the
        phase's answers were all checked already)."""
        if self.mode == "execute":
            return 0
        self.closing.set()
        ended = await asyncio.gather(*self.holders, return_exceptions=True)
        await self.pool.aclose()
        return sum(isinstance(end, BaseException) for end in ended)

    def _pool(self, workers: int) -> Any:
        """The phase's HTTP connections, shared by its clients: as many as its workers (a
        client per context, each with its own pool, would open hundreds, past what the
        runtime keeps open)."""
        import httpx2

        token = UPSTREAM_TOKEN if self.mode == "direct" else os.environ.get(LOAD_TOKEN_ENV, "")
        return httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx2.Timeout(30.0, read=60.0),
            limits=httpx2.Limits(max_connections=workers, max_keepalive_connections=workers),
            trust_env=False,
        )

    async def _resolve(self, k: int) -> str:
        body = {"objective": OBJECTIVE, "consumer": CONSUMER, "deployment": f"bench-{self.tag}-{k}"}
        async with self.http.post(self.config["runtime"] + "/v1/context/resolve", json=body) as r:
            data = await r.json()
            assert r.status == 200, f"resolve HTTP {r.status}: {data}"
        return str(data["contextRef"])

    async def _hold(self, k: int, opened: asyncio.Future[Any]) -> None:
        """Open client ``k`` (its context entered and left in this one task, as anyio wants),
        hand it over, keep it open until the phase closes."""
        import mcp
        from mcp.client.streamable_http import streamable_http_client

        if self.mode == "direct":
            url = self.config["upstream"] + PATH
        else:
            url = (
                f"{self.config['runtime']}/mcp/{OBJECTIVE}?consumer={CONSUMER}"
                f"&deployment=bench-{self.tag}-{k}"
            )
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = mcp.Client(
                    streamable_http_client(url, http_client=self.pool),
                    cache=None,
                    read_timeout_seconds=60.0,
                )
                async with self.opening:  # seif bounds a credential's open requests
                    await stack.enter_async_context(client)
                    listed = [tool.name for tool in (await client.list_tools()).tools]
                assert self.name in listed, f"{self.mode} tools/list: {listed}"
                opened.set_result(client)
                await self.closing.wait()
        except BaseException as exc:
            if not opened.done():
                opened.set_exception(exc)
            raise

    def sender(self) -> Callable[[int], Awaitable[tuple[int, str | None]]]:
        per = len(self.slots) if self.mode == "direct" else MAX_CALLS
        name = self.name

        async def send(i: int) -> tuple[int, str | None]:
            ref = f"doc-{self.tag}-{i}"
            call_id = f"bench-{self.mode}-{self.tag}-{i}"
            slot = self.slots[i % per] if self.mode == "direct" else self.slots[i // per]
            start = time.perf_counter_ns()
            try:
                problem = await self._call(slot, name, ref, call_id)
            except Exception as exc:  # a failed request is counted by its kind, not raised
                return 0, f"{type(exc).__name__}: {str(exc)[:80]}"
            return time.perf_counter_ns() - start, problem

        return send

    async def _call(self, slot: Any, name: str, ref: str, call_id: str) -> str | None:
        if self.mode == "execute":
            body = {"contextRef": slot, "tool": TOOL, "callId": call_id, "arguments": {"ref": ref}}
            url = self.config["runtime"] + "/v1/context/tools/execute"
            async with self.http.post(url, json=body) as response:
                data = await response.read()
                problem = receipt_problem(response.status, data)
            return problem or _looked_up(json.loads(data).get("output"), ref)
        meta = {CALL_ID_META: call_id} if self.mode == "mcp" else None
        result = await slot.call_tool(name, {"ref": ref}, meta=meta)
        if result.is_error:
            return "isError"
        return _looked_up(result.structured_content, ref)


def _calls(url: str) -> int:
    return int(get_json(url + "/_stats")["calls"])


async def _phase(
    target: Target, config: dict[str, Any], tag: str, calls: int, workers: int, duration: float
) -> tuple[dict[str, Any], Phase]:
    """One timed phase of ``target``: its figures and its successes' latencies."""
    await target.open(tag, calls, workers)
    try:
        called = _calls(config["upstream"])
        watched = {name: cpu_seconds(pid) for name, pid in config["watch"].items()}
        found = await closed_loop(target.sender(), range(calls), workers, duration)
        spent = {
            name: cpu_delta(before, cpu_seconds(config["watch"][name]))
            for name, before in watched.items()
        }
        dispatched = _calls(config["upstream"]) - called
    finally:
        unclosed = await target.close()
    elapsed = found.elapsed_ns / 1e9
    ok = len(found.latencies_ns)
    figures = {
        **found.counts(),
        "elapsed_s": round(elapsed, 3),
        "rps": round(ok / elapsed, 1) if elapsed else 0.0,
        "dispatched": dispatched,
        "cpu_s": spent,
        "unclosed_clients": unclosed,
    }
    return figures, found


async def _load(config: dict[str, Any]) -> dict[str, Any]:
    import aiohttp

    load = Load(**config["load"])
    token = os.environ.get(LOAD_TOKEN_ENV, "")
    phases: dict[str, dict[str, list[dict[str, Any]]]] = {
        t: {"latency": [], "rate": []} for t in TARGETS
    }
    latencies: dict[str, dict[str, list[int]]] = {t: {"latency": [], "rate": []} for t in TARGETS}
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=load.connections),
        headers={"Authorization": f"Bearer {token}"},
        timeout=aiohttp.ClientTimeout(total=60),
        trust_env=False,
    ) as http:
        modes: list[str] = config["targets"]
        targets = {t: Target(t, config, http) for t in modes}
        for round_ in range(load.rounds + 1):  # round 0: the warm-up, not counted
            turn = round_ % len(modes)
            order = modes[turn:] + modes[:turn]
            for mode in order:
                shapes = [
                    ("latency", load.sequential_calls, 1),
                    ("rate", load.rate_calls, load.connections),
                ]
                if round_ == 0:
                    shapes = [("rate", load.warmup_calls, load.connections)]
                for kind, calls, workers in shapes:
                    tag = f"r{round_}{kind[0]}"
                    figures, found = await _phase(
                        targets[mode], config, tag, calls, workers, load.duration_s
                    )
                    phases[mode][kind].append({"round": round_, **figures})
                    if round_ > 0:
                        latencies[mode][kind] += found.latencies_ns
    return {
        mode: {kind: _summed(phases[mode][kind], latencies[mode][kind]) for kind in phases[mode]}
        for mode in modes
    }


def _summed(phases: list[dict[str, Any]], latencies: list[int]) -> dict[str, Any]:
    timed = [p for p in phases if p["round"] > 0]
    ok = sum(p["ok"] for p in timed)
    elapsed = sum(p["elapsed_s"] for p in timed)

    def cpu_us(process: str) -> float | None:
        spent = [p["cpu_s"].get(process) for p in timed]
        if not ok or any(s is None for s in spent):
            return None
        return round(sum(sum(s) for s in spent if s is not None) / ok * 1e6, 1)

    return {
        "ok": ok,
        "sent": sum(p["sent"] for p in timed),
        "errors": summed_counts(p["errors"] for p in timed),
        "elapsed_s": round(elapsed, 3),
        "rps": round(ok / elapsed, 1) if elapsed else 0.0,
        **quantiles(latencies),
        "runtime_cpu_us_per_call": cpu_us("runtime"),
        "upstream_cpu_us_per_call": cpu_us("upstream"),
        "dispatched": sum(p["dispatched"] for p in timed),
        "unclosed_clients": sum(p["unclosed_clients"] for p in phases),
        "ok_with_warmup": sum(p["ok"] for p in phases),
        "dispatched_with_warmup": sum(p["dispatched"] for p in phases),
        "phase_rps": [p["rps"] for p in timed],
    }


def load_main(argv: list[str]) -> int:
    """``python -m bench.upstream load --config JSON``: the rounds; prints one JSON object.
    seif's bearer token comes from ``SEIF_BENCH_LOAD_TOKEN``."""
    parser = argparse.ArgumentParser(prog="python -m bench.upstream load")
    parser.add_argument("--config", required=True)
    result = asyncio.run(_load(json.loads(parser.parse_args(argv).config)))
    json.dump(result, sys.stdout)
    print()
    return 0


# ================================================================ the project and the processes


def _seif(*args: str, cwd: Path, env: dict[str, str]) -> str:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "seif.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"seif {' '.join(args[:2])} failed: {done.stdout}{done.stderr}")
    return done.stdout


def make_project(work: Path, upstream: str, env: dict[str, str]) -> str:
    """Import, include and build as a user does (``seif tool import --url``, ``seif tool
    include``, ``seif build``), the tool allowing :data:`MAX_CALLS` calls per context; write
    the bindings and credentials. The tool's MCP name."""
    project = work / "project.json"
    project.write_text(
        json.dumps(
            {
                "format": "seif.context-project.v1",
                "id": "bench-upstream",
                "version": "1.0.0",
                "objectives": [
                    {"id": OBJECTIVE, "profile": PROFILE, "description": "Look documents up."}
                ],
                "profiles": [{"id": PROFILE}],
            }
        )
    )
    _seif(
        "tool",
        "import",
        "--project",
        str(project),
        "--server",
        SERVER,
        "--tool",
        TOOL_NAME,
        "--url",
        upstream + PATH,
        "--secret-ref",
        f"env:{UPSTREAM_TOKEN_ENV}",
        cwd=work,
        env=env,
    )
    _seif(
        "tool",
        "include",
        "--project",
        str(project),
        "--profile",
        PROFILE,
        "--tool",
        TOOL,
        cwd=work,
        env=env,
    )
    document = json.loads(project.read_text())
    tool = next(t for t in document["tools"] if t["id"] == TOOL)
    tool["maxCalls"] = MAX_CALLS  # policy, not contract: the pin still holds
    project.write_text(json.dumps(document, indent=2))
    _seif("build", "--out", str(work / "build"), str(project), cwd=work, env=env)
    bindings = {
        "environment": "bench",
        "revision": 1,
        "upstreams": {SERVER: {"url": upstream + PATH, "secretRef": f"env:{UPSTREAM_TOKEN_ENV}"}},
        "tools": {TOOL: {"upstream": SERVER}},
    }
    credentials = {
        "credentials": [
            {
                "id": "bench-app",
                "tokenRef": "env:SEIF_APP_TOKEN",
                "scopes": ["context.resolve", "tools.execute"],
            }
        ]
    }
    (work / "bindings.json").write_text(json.dumps(bindings))
    (work / "credentials.json").write_text(json.dumps(credentials))
    return str(tool["name"])


def runtime_argv(work: Path, *, profiled: bool = False, sdk_calls: bool = False) -> list[str]:
    serve = ["bench.runtime", "profiled-serve"] if profiled else ["seif.cli", "serve"]
    if sdk_calls:
        serve = ["bench.upstream", "sdk-serve"]
    return [
        sys.executable,
        "-m",
        *serve,
        "--mcp",
        "--build",
        str(work / "build"),
        "--bindings",
        str(work / "bindings.json"),
        "--credentials",
        str(work / "credentials.json"),
        "--data",
        str(work / "data"),
        "--host",
        "127.0.0.1",
        "--port",
        "0",
    ]


def _wait_ready(url: str, timeout: float = 30.0) -> None:
    """Until ``/v1/ready`` says ready (the runtime connects to the upstream after it listens)."""
    import urllib.error

    deadline = time.monotonic() + timeout
    while True:
        try:
            state = get_json(url + "/v1/ready")
        except urllib.error.HTTPError as answer:  # 503 while not ready
            state = json.loads(answer.read() or b"{}")
        if state.get("ready"):
            return
        if time.monotonic() >= deadline:
            raise RuntimeError(f"runtime not ready: {state}")
        time.sleep(0.1)


def measure(
    load: Load,
    targets: tuple[str, ...] = TARGETS,
    profile_to: Path | None = None,
    *,
    sdk_calls: bool = False,
) -> dict[str, Any]:
    """Start the upstream and ``seif serve --mcp``, run the load, read the store back."""
    server_cpus, other_cpus = _cpu_sets()
    env = {**_env(), UPSTREAM_TOKEN_ENV: UPSTREAM_TOKEN}
    if profile_to is not None:
        env[PROFILE_ENV] = str(profile_to)
    with tempfile.TemporaryDirectory(prefix="seif-bench-upstream-") as tmp:
        work = Path(tmp)
        upstream_argv = [
            sys.executable,
            "-m",
            "bench.upstream_server",
            "--token-env",
            UPSTREAM_TOKEN_ENV,
        ]
        with started("upstream", upstream_argv, env, work / "upstream.log") as upstream:
            upstream.pin(other_cpus)
            tool_name = make_project(work, upstream.url, env)
            runtime = Server(
                "runtime",
                runtime_argv(work, profiled=profile_to is not None, sdk_calls=sdk_calls),
                env,
                work / "runtime.log",
            )
            try:
                runtime.wait_listening()
                runtime.pin(server_cpus)
                _wait_ready(runtime.url)
                config = {
                    "runtime": runtime.url,
                    "upstream": upstream.url,
                    "tool_name": tool_name,
                    "watch": {"runtime": runtime.pid, "upstream": upstream.pid},
                    "load": asdict(load),
                    "targets": list(targets),
                }
                argv = [
                    sys.executable,
                    "-m",
                    "bench.upstream",
                    "load",
                    "--config",
                    json.dumps(config),
                ]
                limit = 300 + (load.rounds + 1) * 3 * (2 * load.duration_s + 60)
                results = run_json(
                    argv,
                    {**env, LOAD_TOKEN_ENV: APP_TOKEN},
                    other_cpus,
                    timeout=limit,
                    name="the load generator",
                )
            finally:
                code = runtime.stop()
            if code != 0:
                raise RuntimeError(f"runtime exited {code}: {runtime.tail()}")
            intents = stored_intents(work / "data")
    return {"results": results, "intents": intents, "pinned": server_cpus is not None}


def run(*, quick: bool = False) -> dict[str, Any]:
    load = QUICK if quick else FULL
    return report(load, measure(load), quick=quick)


def report(load: Load, measured: dict[str, Any], *, quick: bool) -> dict[str, Any]:
    results: dict[str, Any] = measured["results"]
    direct = results["direct"]
    rows = []
    for mode in TARGETS:
        name, impl = NAMES[mode]
        rows.append(latency_row(f"{name} (one at a time)", impl, results[mode]["latency"]))
        rows.append(
            latency_row(f"{name} ({load.connections} workers)", impl, results[mode]["rate"])
        )
    base = direct["rate"]["rps"] or math.nan
    ratios = {f"{m} / direct rps": round(results[m]["rate"]["rps"] / base, 3) for m in TARGETS[1:]}
    added = {
        mode: {
            q: round(results[mode]["latency"][f"{q}_ms"] - direct["latency"][f"{q}_ms"], 3)
            for q in ("p50", "p99")
        }
        for mode in TARGETS[1:]
    }
    through_seif = sum(
        results[m][k]["ok_with_warmup"] for m in TARGETS[1:] for k in ("latency", "rate")
    )
    intents = measured["intents"]
    once = all(
        results[m][k]["dispatched_with_warmup"] == results[m][k]["ok_with_warmup"]
        for m in TARGETS
        for k in ("latency", "rate")
    )
    out: dict[str, Any] = {
        "config": {
            **asdict(load),
            "cores": 2 if measured["pinned"] else cores(),
            "pinned": measured["pinned"],
            "max_calls": MAX_CALLS,
            "tool": TOOL,
        },
        "targets": results,
        "rows": rows,
        "ratios": ratios,
        "added_ms": added,
        "goal": {
            "ratio": TARGET_RATIO,
            "added_p50_ms": TARGET_ADDED_P50_MS,
            "met": {
                m: ratios[f"{m} / direct rps"] >= TARGET_RATIO
                and added[m]["p50"] <= TARGET_ADDED_P50_MS
                for m in TARGETS[1:]
            },
        },
        "store": {
            "intents": intents,
            "succeeded": through_seif,
            "recorded": intents.get("SUCCEEDED", 0) >= through_seif and not intents.get("PENDING"),
        },
        "dispatched_once": once,
    }
    out["notes"] = notes(out, quick=quick)
    return out


def notes(out: dict[str, Any], *, quick: bool) -> list[str]:
    config, targets = out["config"], out["targets"]
    lines = [
        f"{config['rounds']} rounds of the 3 targets (order rotating) after a warm-up round; "
        f"each round a latency phase ({config['sequential_calls']} calls, one at a time) and a "
        f"rate phase ({config['connections']} workers, {config['rate_calls']} calls or "
        f"{config['duration_s']:.0f} s); {config['cores']} cores, "
        + (
            "runtime on core 0, upstream and load generator on core 1"
            if config["pinned"]
            else "no pinning"
        ),
    ]
    for mode in TARGETS:
        one, many = targets[mode]["latency"], targets[mode]["rate"]
        runtime = many["runtime_cpu_us_per_call"]
        lines.append(
            f"{mode}: {many['rps']:.0f} calls/s (phases {many['phase_rps']}); one at a time "
            f"p50 {one['p50_ms']:.2f} ms, p99 {one['p99_ms']:.2f} ms; under load p50 "
            f"{many['p50_ms']:.2f} ms, p99 {many['p99_ms']:.2f} ms; CPU per call: runtime "
            f"{runtime} us, upstream {many['upstream_cpu_us_per_call']} us"
            + (
                f"; ERRORS {one['errors'] or ''} {many['errors'] or ''}"
                if one["errors"] or many["errors"]
                else ""
            )
        )
    for mode in TARGETS[1:]:
        ratio, added = out["ratios"][f"{mode} / direct rps"], out["added_ms"][mode]
        lines.append(
            f"target {mode}: rate {ratio:.2f}x direct (>= {TARGET_RATIO}), added p50 "
            f"{added['p50']:.2f} ms (<= {TARGET_ADDED_P50_MS}), added p99 {added['p99']:.2f} ms "
            "-> " + ("met" if out["goal"]["met"][mode] else "NOT met")
        )
    store = out["store"]
    lines.append(
        f"every call reached the upstream once: {out['dispatched_once']}; every success "
        f"through seif a SUCCEEDED intent in the store: {store['recorded']} ({store['intents']})"
    )
    if quick:
        lines.append("--quick: a smoke run, the figures are not meaningful")
    return lines


# ================================================================ profiling


SUMMARY_LOOP = (
    ("loop: MCP handle (seif's HTTP boundary)", "servers/mcp/app.py", "handle"),
    ("loop: POST execute handler", "servers/http/app.py", "execute"),
    ("loop: Runtime.execute", "servers/runtime/service.py", "execute"),
    ("loop:   UpstreamExecutor.dispatch", "servers/upstream/executor.py", "dispatch"),
    ("loop:     UpstreamConnection.call", "servers/upstream/connection.py", "call"),
    ("loop: epoll (idle or waiting on sockets)", "~", "<method 'poll' of 'select.epoll' objects>"),
)


def profile(mode: str, calls: int, top: int = 40) -> None:
    """One seif target against a runtime under cProfile (the event loop thread's own CPU
    time): where the time of a call goes."""
    import pstats

    load = Load(
        connections=16,
        rounds=1,
        sequential_calls=1,
        rate_calls=calls,
        duration_s=120.0,
        warmup_calls=40,
    )
    with tempfile.TemporaryDirectory(prefix="seif-bench-upstream-profile-") as tmp:
        out = Path(tmp) / "runtime.prof"
        result = measure(load, (mode,), profile_to=out)["results"][mode]
        done = result["rate"]["ok_with_warmup"] + result["latency"]["ok_with_warmup"]
        shown = {k: result["rate"][k] for k in ("rps", "p50_ms", "p99_ms", "ok", "errors")}
        print(f"== {mode} under cProfile (slower than unprofiled): {shown}")
        stats = pstats.Stats(str(out), stream=sys.stdout)
        print(f"== where the time goes, per call ({done}, warm-up included)")
        for line in summary(stats, SUMMARY_LOOP, done):
            print("  ", line)
        print("== event loop thread, by internal time")
        stats.strip_dirs().sort_stats("tottime").print_stats(top)
        print("== event loop thread, by cumulative time")
        stats.strip_dirs().sort_stats("cumulative").print_stats(top)


def sdk_serve_main(argv: list[str]) -> int:
    """``python -m bench.upstream sdk-serve SERVE-ARGS...``: ``seif serve`` whose upstream
    calls all go through the official SDK's client (as before :mod:`servers.upstream.calls`):
    the comparison ``--sdk-calls`` measures."""
    from seif.cli import main as seif_main
    from servers.upstream import connection

    defaults = connection.UpstreamConnection.__init__.__kwdefaults__
    assert defaults is not None and "native_calls" in defaults
    defaults["native_calls"] = False
    code: int = seif_main(["serve", *argv])
    return code


def main(argv: list[str]) -> int:
    if argv and argv[0] == "load":
        return load_main(argv[1:])
    if argv and argv[0] == "sdk-serve":
        return sdk_serve_main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m bench.upstream",
        description="python -m bench upstream [--json] [--quick] runs the benchmark; this entry "
        "point profiles one seif target, or runs the load generator (load)",
    )
    parser.add_argument("--profile", action="store_true", help="profile one seif target")
    parser.add_argument("--mode", choices=TARGETS[1:], default="mcp")
    parser.add_argument("--calls", type=int, default=3_000)
    parser.add_argument(
        "--sdk-calls",
        action="store_true",
        help="the whole benchmark with seif's upstream calls through the SDK's client instead "
        "of its own HTTP/1.1 client (the comparison; --quick for a smoke run)",
    )
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.profile:
        profile(args.mode, args.calls)
    elif args.sdk_calls:
        load = QUICK if args.quick else FULL
        out = report(load, measure(load, sdk_calls=True), quick=args.quick)
        print("== upstream, seif's upstream calls through the SDK's client")
        print("\n".join(f"   {line}" for line in out["notes"]))
    else:
        parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
