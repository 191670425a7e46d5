"""``python -m bench mcp``: ``tools/call`` through MCP against the HTTP API's execute, on the same
runtime, in one run.

The synthetic executor and the runtime (``seif serve --mcp`` on the reference build, as
:mod:`bench.runtime` starts them: fresh data directory, durability as shipped) run as
subprocesses on loopback; the load generator (``python -m bench.mcp load``) is a third, an
aiohttp client, closed loop, ``connections`` workers on as many keep-alive connections. The
runtime is pinned to the first core, the load generator and the executor to the second
(``SEIF_BENCH_PIN=0``: no pinning). Three targets, the same read call each time
(``inspect-context`` with the reference arguments, a new call id per request, so every request
dispatches to the executor):

- ``execute``: ``POST /v1/context/tools/execute`` (the baseline);
- ``stateless``: ``tools/call`` at ``/mcp/learner`` in the stateless ``2026-07-28`` revision,
  with the envelope and headers the official client (``mcp`` 2.3.0) sends: ``Mcp-Protocol-Version``,
  ``Mcp-Method``, ``Mcp-Name``, and ``params._meta`` with the revision, the client's info and
  capabilities, and ``io.seif/callId``;
- ``session``: ``tools/call`` in a ``2025-11-25`` session (``initialize``,
  ``notifications/initialized``, then the calls with ``Mcp-Session-Id``); the runtime answers
  with an SSE stream.

Raw JSON-RPC POSTs (``Accept: application/json, text/event-stream``), not the official client,
whose own overhead would dominate; an answer is parsed as JSON or SSE, whichever came.

``inspect-context`` allows 3 calls per context (``maxCalls``), so each target uses as many
contexts as its calls need, 3 calls each, resolved before its timed phase and not timed: for
``execute`` one ``POST /v1/context/resolve`` per context; ``stateless`` contexts are one per
credential, objective and coordinates, so each gets its own ``deployment`` coordinate in the
query (``?consumer=tutor-app&deployment=...``) and is resolved by a ``tools/list``; ``session``
contexts are one per session, so each session is opened (``initialize``, ``initialized``) and
resolved by a ``tools/list``, and closed (``DELETE``) after the phase. Every target's contexts
carry the same coordinates' shape (``consumer`` and a distinct ``deployment``). The runtime
keeps at most 1,000 MCP contexts per credential, so a phase uses at most
:data:`CONTEXTS_PER_PHASE` contexts, and the run alternates the three targets in rounds (their
order rotating), after a warm-up round that is not counted: drift of the shared machine and the
growth of the store fall on all three alike.

Every answer is checked (``execute``: a ``SUCCEEDED`` receipt, not a duplicate; MCP: the
JSON-RPC result of that request, ``isError: false``, the call id in ``_meta``, the output in
``structuredContent``); anything else is an error, left out of the figures. The executor's
count of executions must grow by exactly the successes of each timed phase (every call
dispatched once), and after the run every success must be a ``SUCCEEDED`` intent in the store.

Figures: requests per second (successes / wall time of the timed phases), p50 and p99 latency
(client side, per request), the runtime's CPU time per request (all threads, and the event
loop thread, from ``/proc``). ``ratios``: rps of each MCP revision / rps of execute. Target
(issue 18): at least 0.7x.

``python -m bench.mcp --profile [--mode stateless|session|execute] [--requests N]
[--max-calls N] [--keep FILE]`` runs one target against a runtime under cProfile (as
``python -m bench.runtime --profile`` does: the event loop thread's own CPU time) and prints
where the time goes per call. The profile cannot leave out the untimed preparation of
contexts; ``--max-calls 20`` (the most a tool may declare) profiles a copy of the reference
project whose tool allows 20 calls per context, so that preparation stays a small part of it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.harness import Server, latency_row, quantiles, run_json, started, summed_counts
from bench.runtime import (
    APP_TOKEN,
    ARGUMENTS,
    CONSUMER,
    LOAD_TOKEN_ENV,
    OBJECTIVE,
    PROFILE_ENV,
    REFERENCE,
    TOOL,
    Request,
    Setup,
    _cpu_sets,
    _own_cpu,
    check_ready,
    closed_loop,
    cores,
    cpu_delta,
    cpu_seconds,
    executor_argv,
    get_json,
    per_request_us,
    prepare_setup,
    receipt_problem,
    runtime_argv,
    stored_intents,
    summary,
)
from bench.runtime import AnswerCheck as Check

MODES = ("execute", "stateless", "session")
NAMES = {
    "execute": ("POST /v1/context/tools/execute", "seif HTTP API"),
    "stateless": ("MCP tools/call, 2026-07-28 stateless", "seif MCP"),
    "session": ("MCP tools/call, 2025-11-25 session", "seif MCP"),
}
TARGET_RATIO = 0.7
"""Each MCP revision's ``tools/call`` rate must reach this fraction of execute's."""
CONTEXTS_PER_PHASE = 900
"""At most this many contexts per timed phase: the runtime keeps at most 1,000 MCP contexts per
credential (``servers.mcp.contexts.MAX_CONTEXTS_PER_CREDENTIAL``), oldest dropped first."""
STATELESS, SESSIONED = "2026-07-28", "2025-11-25"
CALL_ID_META = "io.seif/callId"
CLIENT_INFO = {"name": "seif-bench", "version": "1"}
ACCEPT = "application/json, text/event-stream"


@dataclass(frozen=True, slots=True)
class Load:
    connections: int
    rounds: int
    contexts_per_phase: int
    duration_s: float
    warmup_contexts: int


FULL = Load(connections=16, rounds=4, contexts_per_phase=900, duration_s=10.0, warmup_contexts=50)
QUICK = Load(connections=16, rounds=1, contexts_per_phase=100, duration_s=5.0, warmup_contexts=10)


# ================================================================ the load generator


def rpc_messages(kind: str, data: bytes) -> list[Any]:
    """The JSON-RPC messages of an answer: one JSON object, or the ``data`` of SSE events."""
    if kind.startswith("text/event-stream"):
        messages = []
        for event in data.replace(b"\r\n", b"\n").split(b"\n\n"):
            lines = [line[5:].lstrip(b" ") for line in event.split(b"\n") if line[:5] == b"data:"]
            if lines:
                messages.append(json.loads(b"\n".join(lines)))
        return messages
    return [json.loads(data)] if data else []


def _rpc_result(status: int, kind: str, data: bytes, rpc_id: int) -> Any:
    """The ``result`` of the JSON-RPC response ``rpc_id``, or a string saying what was wrong."""
    if status != 200:
        return f"HTTP {status}"
    try:
        messages = rpc_messages(kind, data)
    except ValueError:
        return f"HTTP {status} not JSON ({kind})"
    for message in messages:
        if isinstance(message, dict) and message.get("id") == rpc_id:
            if "result" in message:
                return message["result"]
            return f"JSON-RPC error {message.get('error', {}).get('code')}"
    return "no JSON-RPC response"


def _check_call(rpc_id: int, call_id: str) -> Check:
    def check(status: int, kind: str, data: bytes) -> str | None:
        result = _rpc_result(status, kind, data, rpc_id)
        if isinstance(result, str):
            return result
        structured = result.get("structuredContent") or {}
        if result.get("isError") is not False:
            receipt = (result.get("_meta") or {}).get("io.seif/receipt") or {}
            return f"isError {receipt.get('status')} {receipt.get('reason')}"
        if result.get("_meta", {}).get(CALL_ID_META) != call_id or "ref" not in structured:
            return "not this call's output"
        return None

    return check


def _check_receipt(status: int, _kind: str, data: bytes) -> str | None:
    return receipt_problem(status, data)


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


class Target:
    """One target's contexts and requests: ``prepare`` them (untimed), ``call`` ``i`` (the
    ``i``-th call uses context ``i // per_context``), ``close`` them (untimed)."""

    def __init__(self, base: str, mode: str, tool_name: str, per_context: int) -> None:
        self.base, self.mode, self.tool_name, self.per = base, mode, tool_name, per_context
        self.slots: list[Any] = []
        self.tag = ""

    def _query(self, k: int) -> str:
        return f"consumer={CONSUMER}&deployment=bench-{self.mode}-{self.tag}-{k}"

    async def prepare(self, session: Any, tag: str, count: int, connections: int) -> None:
        self.tag = tag
        self.slots = [None] * count
        ready: Counter[str] = Counter()

        async def one(k: int) -> None:
            try:
                self.slots[k] = await self._open(session, k)
            except (AssertionError, ValueError, KeyError) as exc:
                ready[f"{type(exc).__name__}: {exc}"[:200]] += 1

        await _gather_bounded([lambda k=k: one(k) for k in range(count)], connections)
        if ready:
            raise RuntimeError(f"preparing {self.mode} contexts failed: {dict(ready)}")

    async def _post(self, session: Any, url: str, headers: dict[str, str], body: Any) -> Any:
        async with session.post(url, data=_dumps(body), headers=headers) as response:
            data = await response.read()
            return response.status, response.headers, data

    async def _open(self, session: Any, k: int) -> Any:
        if self.mode == "execute":
            body = {"objective": OBJECTIVE, "consumer": CONSUMER}
            body["deployment"] = f"bench-{self.mode}-{self.tag}-{k}"
            status, _, data = await self._post(
                session,
                self.base + "/v1/context/resolve",
                {"Content-Type": "application/json"},
                body,
            )
            assert status == 200, f"resolve HTTP {status}: {data[:200]!r}"
            return json.loads(data)["contextRef"]
        url = f"{self.base}/mcp/{OBJECTIVE}?{self._query(k)}"
        if self.mode == "stateless":
            headers = self._stateless_headers("tools/list")
            status, answer, data = await self._post(
                session, url, headers, self._stateless("tools/list", 0, {})
            )
            self._listed(status, answer, data, 0)
            return url
        headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
        hello = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": SESSIONED, "capabilities": {}, "clientInfo": CLIENT_INFO},
        }
        status, answer, data = await self._post(session, url, headers, hello)
        result = _rpc_result(status, answer.get("Content-Type", ""), data, 0)
        assert isinstance(result, dict), f"initialize: {result}"
        assert result.get("protocolVersion") == SESSIONED, f"initialize: {result}"
        headers = {
            **headers,
            "Mcp-Session-Id": answer["Mcp-Session-Id"],
            "Mcp-Protocol-Version": SESSIONED,
        }
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        status, _, data = await self._post(session, url, headers, note)
        assert status == 202, f"notifications/initialized HTTP {status}: {data[:200]!r}"
        listed = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        self._listed(*(await self._post(session, url, headers, listed)), 1)
        return url, headers

    def _listed(self, status: int, answer: Any, data: bytes, rpc_id: int) -> None:
        result = _rpc_result(status, answer.get("Content-Type", ""), data, rpc_id)
        assert isinstance(result, dict), f"tools/list: {result}"
        names = [tool["name"] for tool in result.get("tools", ())]
        assert self.tool_name in names, f"tools/list lists {names}"

    def _stateless_headers(self, method: str) -> dict[str, str]:
        headers = {
            "Accept": ACCEPT,
            "Content-Type": "application/json",
            "Mcp-Protocol-Version": STATELESS,
            "Mcp-Method": method,
        }
        if method == "tools/call":
            headers["Mcp-Name"] = self.tool_name
        return headers

    def _stateless(self, method: str, rpc_id: int, meta: dict[str, Any], **params: Any) -> Any:
        """A request of the stateless revision, as the official client builds it."""
        meta = {
            **meta,
            "io.modelcontextprotocol/protocolVersion": STATELESS,
            "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        return {
            "jsonrpc": "2.0",
            "id": rpc_id,
            "method": method,
            "params": {"_meta": meta, **params},
        }

    def call(self, i: int) -> Request:
        slot = self.slots[i // self.per]
        call_id = f"bench-{self.mode}-{self.tag}-{i}"
        if self.mode == "execute":
            body = {"contextRef": slot, "tool": TOOL, "callId": call_id, "arguments": ARGUMENTS}
            url = self.base + "/v1/context/tools/execute"
            return "POST", url, {"Content-Type": "application/json"}, _dumps(body), _check_receipt
        rpc_id = i + 2
        if self.mode == "stateless":
            body = self._stateless(
                "tools/call",
                rpc_id,
                {CALL_ID_META: call_id},
                name=self.tool_name,
                arguments=ARGUMENTS,
            )
            headers = self._stateless_headers("tools/call")
            return "POST", slot, headers, _dumps(body), _check_call(rpc_id, call_id)
        url, headers = slot
        params = {"_meta": {CALL_ID_META: call_id}, "name": self.tool_name, "arguments": ARGUMENTS}
        body = {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": params}
        return "POST", url, headers, _dumps(body), _check_call(rpc_id, call_id)

    async def close(self, session: Any, connections: int) -> None:
        if self.mode != "session":
            return
        failed: Counter[int] = Counter()

        async def one(slot: Any) -> None:
            url, headers = slot
            async with session.delete(url, headers=headers) as response:
                await response.read()
                if response.status != 200:
                    failed[response.status] += 1

        await _gather_bounded([lambda s=s: one(s) for s in self.slots], connections)
        if failed:
            raise RuntimeError(f"closing sessions failed: {dict(failed)}")


async def _gather_bounded(jobs: list[Callable[[], Awaitable[None]]], connections: int) -> None:
    queue = iter(jobs)

    async def worker() -> None:
        for job in queue:
            await job()

    await asyncio.gather(*(worker() for _ in range(connections)))


def _executions(url: str) -> int:
    return int(get_json(url + "/_stats")["executions"].get(TOOL, 0))


async def _load(args: argparse.Namespace) -> dict[str, Any]:
    import aiohttp

    config = json.loads(args.config)
    load = Load(**config["load"])
    modes: list[str] = config["modes"]
    per = config["calls_per_context"]
    watch = config["watch"]
    token = os.environ.get(LOAD_TOKEN_ENV, "")
    connector = aiohttp.TCPConnector(limit=load.connections)
    timeout = aiohttp.ClientTimeout(total=60)
    phases: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    latencies: dict[str, list[int]] = {mode: [] for mode in modes}
    async with aiohttp.ClientSession(
        connector=connector,
        headers={"Authorization": f"Bearer {token}"},
        timeout=timeout,
        trust_env=False,
    ) as session:
        targets = {m: Target(config["url"], m, config["tool_name"], per) for m in modes}
        for round_ in range(load.rounds + 1):  # round 0: the warm-up, not counted
            warm = round_ == 0
            contexts = load.warmup_contexts if warm else load.contexts_per_phase
            order = modes[round_ % len(modes) :] + modes[: round_ % len(modes)]
            for mode in order:
                target = targets[mode]
                await target.prepare(session, f"r{round_}", contexts, load.connections)
                executed = _executions(config["executor"])
                cpu = cpu_seconds(watch) if watch else None
                loop = cpu_seconds(watch, watch) if watch else None
                own = _own_cpu()
                found = await closed_loop(
                    session, target.call, range(contexts * per), load.connections, load.duration_s
                )
                own = _own_cpu() - own
                cpu_after = cpu_seconds(watch) if watch else None
                loop_after = cpu_seconds(watch, watch) if watch else None
                dispatched = _executions(config["executor"]) - executed
                await target.close(session, load.connections)
                phase = {
                    "round": round_,
                    **found.counts(),
                    "elapsed_s": round(found.elapsed_ns / 1e9, 3),
                    "rps": round(len(found.latencies_ns) / (found.elapsed_ns / 1e9), 1),
                    "dispatched": dispatched,
                    "server_cpu_s": cpu_delta(cpu, cpu_after),
                    "server_loop_thread_cpu_s": cpu_delta(loop, loop_after),
                    "loadgen_cpu_s": round(own, 3),
                }
                phases[mode].append(phase)
                if not warm:
                    latencies[mode] += found.latencies_ns
    return {mode: _summed(phases[mode], latencies[mode]) for mode in modes}


def _summed(phases: list[dict[str, Any]], latencies: list[int]) -> dict[str, Any]:
    timed = [p for p in phases if p["round"] > 0]
    ok = sum(p["ok"] for p in timed)
    elapsed = sum(p["elapsed_s"] for p in timed)

    def per_request(key: str) -> dict[str, float] | None:
        spent = [p[key] for p in timed if p[key] is not None]
        if not ok or len(spent) != len(timed):
            return None
        return per_request_us(sum(s[0] for s in spent), sum(s[1] for s in spent), ok)

    return {
        "ok": ok,
        "sent": sum(p["sent"] for p in timed),
        "errors": summed_counts(p["errors"] for p in timed),
        "elapsed_s": round(elapsed, 3),
        "rps": round(ok / elapsed, 1) if elapsed else 0.0,
        **quantiles(latencies),
        "server_cpu_us_per_request": per_request("server_cpu_s"),
        "server_loop_thread_cpu_us_per_request": per_request("server_loop_thread_cpu_s"),
        "dispatched": sum(p["dispatched"] for p in timed),
        "loadgen_cpu_us_per_request": round(sum(p["loadgen_cpu_s"] for p in timed) / ok * 1e6, 1)
        if ok
        else None,
        "ok_with_warmup": sum(p["ok"] for p in phases),
        "phases": phases,
    }


def load_main(argv: list[str]) -> int:
    """``python -m bench.mcp load --config JSON``: the warm-up round and the timed rounds;
    prints one JSON object. The bearer token comes from ``SEIF_BENCH_LOAD_TOKEN``."""
    parser = argparse.ArgumentParser(prog="python -m bench.mcp load")
    parser.add_argument("--config", required=True)
    result = asyncio.run(_load(parser.parse_args(argv)))
    json.dump(result, sys.stdout)
    print()
    return 0


# ================================================================ the processes and the run


def mcp_tool_name() -> str:
    """The MCP name (the function name) of :data:`TOOL` in the reference project."""
    project = json.loads(REFERENCE.read_text())
    return str(next(t["name"] for t in project["tools"] if t["id"] == TOOL))


def generate(
    runtime: Server,
    executor_url: str,
    setup: Setup,
    load: Load,
    modes: tuple[str, ...],
    cpus: set[int] | None,
) -> dict[str, Any]:
    """Run the load generator in a subprocess; its JSON result."""
    config = {
        "url": runtime.url,
        "executor": executor_url,
        "tool_name": mcp_tool_name(),
        "calls_per_context": setup.calls_per_context,
        "watch": runtime.pid,
        "modes": list(modes),
        "load": asdict(load),
    }
    argv = [sys.executable, "-m", "bench.mcp", "load", "--config", json.dumps(config)]
    env = {**setup.env, LOAD_TOKEN_ENV: APP_TOKEN}
    limit = 300 + (load.rounds + 1) * len(modes) * (load.duration_s + 60)
    return run_json(argv, env, cpus, timeout=limit, name="the load generator")


def setup_with_max_calls(work: Path, max_calls: int) -> Setup:
    """The run's files as :func:`bench.runtime.prepare_setup` writes them, but for a copy of
    the reference project whose :data:`TOOL` allows ``max_calls`` calls per context (for the
    profile only: so that preparing contexts does not swamp the calls)."""
    project = json.loads(REFERENCE.read_text())
    next(t for t in project["tools"] if t["id"] == TOOL)["maxCalls"] = max_calls
    work.mkdir(parents=True, exist_ok=True)
    (work / "project.json").write_text(json.dumps(project))
    return prepare_setup(work, work / "project.json")


def measure(
    load: Load,
    modes: tuple[str, ...] = MODES,
    *,
    profile_to: Path | None = None,
    max_calls: int | None = None,
) -> dict[str, Any]:
    """Start the executor and ``seif serve --mcp``, run the load, read the store back."""
    server_cpus, other_cpus = _cpu_sets()
    with tempfile.TemporaryDirectory(prefix="seif-bench-mcp-") as tmp:
        work = Path(tmp)
        setup = prepare_setup(work) if max_calls is None else setup_with_max_calls(work, max_calls)
        if profile_to is not None:
            setup.env[PROFILE_ENV] = str(profile_to)
        with started("executor", executor_argv(), setup.env, setup.work / "executor.log") as ex:
            ex.pin(other_cpus)
            setup.write(ex.url)
            argv = [*runtime_argv(setup, profiled=profile_to is not None), "--mcp"]
            runtime = Server("runtime", argv, setup.env, setup.work / "runtime.log")
            try:
                runtime.wait_listening()
                runtime.pin(server_cpus)
                check_ready(runtime.url)
                results = generate(runtime, ex.url, setup, load, modes, other_cpus)
            finally:
                code = runtime.stop()
            if code != 0:
                raise RuntimeError(f"runtime exited {code}: {runtime.tail()}")
            intents = stored_intents(setup.data)
    return {
        "results": results,
        "intents": intents,
        "pinned": server_cpus is not None,
        "calls_per_context": setup.calls_per_context,
    }


def run(*, quick: bool = False) -> dict[str, Any]:
    load = QUICK if quick else FULL
    measured = measure(load)
    return report(load, measured, quick=quick)


def report(load: Load, measured: dict[str, Any], *, quick: bool) -> dict[str, Any]:
    results: dict[str, Any] = measured["results"]
    rows, targets = [], {}
    for mode in MODES:
        result = results[mode]
        rows.append(latency_row(*NAMES[mode], result))
        targets[mode] = {k: v for k, v in result.items() if k != "phases"}
        targets[mode]["phases"] = [_phase_summary(p) for p in result["phases"]]
        targets[mode]["phase_rps"] = [p["rps"] for p in result["phases"] if p["round"] > 0]
    base = results["execute"]["rps"] or math.nan
    ratios = {
        "mcp stateless / http execute rps": round(results["stateless"]["rps"] / base, 3),
        "mcp session / http execute rps": round(results["session"]["rps"] / base, 3),
    }
    succeeded = sum(results[m]["ok_with_warmup"] for m in MODES)
    intents = measured["intents"]
    recorded = intents.get("SUCCEEDED", 0) >= succeeded and not intents.get("PENDING")
    once = all(results[m]["dispatched"] == results[m]["ok"] for m in MODES)
    met = {
        "stateless": ratios["mcp stateless / http execute rps"] >= TARGET_RATIO,
        "session": ratios["mcp session / http execute rps"] >= TARGET_RATIO,
    }
    out = {
        "config": {
            **asdict(load),
            "cores": 2 if measured["pinned"] else cores(),
            "pinned": measured["pinned"],
            "calls_per_context": measured["calls_per_context"],
            "tool": TOOL,
            "objective": OBJECTIVE,
        },
        "targets": targets,
        "rows": rows,
        "ratios": ratios,
        "goal": {"ratio": TARGET_RATIO, "met": met},
        "store": {"intents": intents, "succeeded": succeeded, "recorded": recorded},
        "dispatched_once": once,
    }
    out["notes"] = notes(out, quick=quick)
    return out


def _phase_summary(phase: dict[str, Any]) -> dict[str, Any]:
    """One phase: its round (0: the warm-up), rate, successes and the runtime's CPU per
    success."""
    cpu, ok = phase["server_cpu_s"], phase["ok"]
    return {
        "round": phase["round"],
        "rps": phase["rps"],
        "ok": ok,
        "errors": phase["errors"],
        "server_cpu_us_per_request": round(sum(cpu) / ok * 1e6, 1) if cpu and ok else None,
    }


def notes(out: dict[str, Any], *, quick: bool) -> list[str]:
    config, targets = out["config"], out["targets"]
    lines = [
        f"{config['connections']} connections; {config['rounds']} rounds of the 3 targets "
        f"(order rotating) after a warm-up round, each phase {config['contexts_per_phase']} "
        f"contexts x {config['calls_per_context']} calls (inspect-context maxCalls) or "
        f"{config['duration_s']:.0f} s; "
        f"{config['cores']} cores, "
        + (
            "runtime on core 0, load generator and executor on core 1"
            if config["pinned"]
            else "no pinning"
        ),
        "contexts resolved untimed before each phase: execute by POST /v1/context/resolve, "
        "stateless by a tools/list per `deployment` coordinate (one context per credential, "
        "objective and coordinates), session by initialize + initialized + tools/list per "
        "session (closed by DELETE after the phase)",
    ]
    for mode in MODES:
        t = targets[mode]
        cpu = t["server_cpu_us_per_request"] or {}
        loop = t["server_loop_thread_cpu_us_per_request"] or {}
        lines.append(
            f"{mode}: {t['rps']:.0f} req/s (phases {t['phase_rps']}), p50 {t['p50_ms']:.2f} ms, "
            f"p99 {t['p99_ms']:.2f} ms; runtime CPU {cpu.get('total')} us/req "
            f"({loop.get('total')} event loop), load generator {t['loadgen_cpu_us_per_request']} "
            f"us/req; dispatched {t['dispatched']} of {t['ok']}"
            + (f"; ERRORS {t['errors']}" if t["errors"] else "")
        )
    ratios = out["ratios"]
    lines.append(
        f"target MCP tools/call >= {TARGET_RATIO} x execute rps: stateless (the official "
        f"client's default revision) {ratios['mcp stateless / http execute rps']:.2f} x -> "
        + ("met" if out["goal"]["met"]["stateless"] else "NOT met")
        + f"; session {ratios['mcp session / http execute rps']:.2f} x -> "
        + ("met" if out["goal"]["met"]["session"] else "NOT met")
    )
    store = out["store"]
    lines.append(
        f"every success dispatched once: {out['dispatched_once']}; every success a SUCCEEDED "
        f"intent in the store: {store['recorded']} ({store['intents']})"
    )
    if quick:
        lines.append("--quick: a smoke run, the figures are not meaningful")
    return lines


# ================================================================ profiling


_PYDANTIC = "pydantic_core._pydantic_core.Schema"
SUMMARY_LOOP = (
    ("loop: MCP handle (seif's HTTP boundary)", "servers/mcp/app.py", "handle"),
    ("loop:   bridge.serve (the SDK's ASGI app)", "servers/mcp/bridge.py", "serve"),
    ("loop:   _call_tool", "servers/mcp/app.py", "_call_tool"),
    ("loop:     calls.call", "servers/mcp/calls.py", "call"),
    ("loop:     call_result", "servers/mcp/results.py", "call_result"),
    ("loop:   Contexts.get", "servers/mcp/contexts.py", "get"),
    ("loop: POST execute handler", "servers/http/app.py", "execute"),
    ("loop: Runtime.execute", "servers/runtime/service.py", "execute"),
    (
        "loop: pydantic validation",
        "~",
        f"<method 'validate_python' of '{_PYDANTIC}Validator' objects>",
    ),
    (
        "loop: pydantic serialisation",
        "~",
        f"<built-in method to_json of {_PYDANTIC}Serializer object>",
    ),
    ("loop: epoll (idle or waiting on sockets)", "~", "<method 'poll' of 'select.epoll' objects>"),
)


def profile(
    mode: str, requests: int, max_calls: int, top: int = 40, keep: Path | None = None
) -> None:
    """One target against a runtime under cProfile; where the time goes per call. With
    ``max_calls`` other than 3, the tool allows that many calls per context (a copy of the
    reference project), so that the untimed preparation of contexts, which the profile cannot
    leave out, is a small part of it."""
    import pstats

    load = Load(
        connections=16,
        rounds=1,
        contexts_per_phase=min(CONTEXTS_PER_PHASE, -(-requests // max_calls)),
        duration_s=60.0,
        warmup_contexts=max(1, 30 // max_calls),
    )
    with tempfile.TemporaryDirectory(prefix="seif-bench-mcp-profile-") as tmp:
        out = Path(tmp) / "runtime.prof"
        measured = measure(load, (mode,), profile_to=out, max_calls=max_calls)
        result = measured["results"][mode]
        calls = result["ok_with_warmup"]
        shown = {k: result[k] for k in ("rps", "p50_ms", "p99_ms", "ok", "errors")}
        print(f"== {mode} under cProfile (slower than unprofiled): {shown}")
        if keep is not None:
            keep.write_bytes(out.read_bytes())
        stats = pstats.Stats(str(out), stream=sys.stdout)
        print(
            f"== where the time goes, per call ({calls}, warm-up included; the loop thread also "
            "served the untimed preparation of the contexts)"
        )
        for line in summary(stats, SUMMARY_LOOP, calls):
            print("  ", line)
        print("== event loop thread, by internal time")
        stats.strip_dirs().sort_stats("tottime").print_stats(top)
        print("== event loop thread, by cumulative time")
        stats.strip_dirs().sort_stats("cumulative").print_stats(top)


def main(argv: list[str]) -> int:
    if argv and argv[0] == "load":
        return load_main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m bench.mcp",
        description="python -m bench mcp [--json] [--quick] runs the benchmark; this entry "
        "point profiles one target, or runs the load generator (load)",
    )
    parser.add_argument("--profile", action="store_true", help="profile one target")
    parser.add_argument("--mode", choices=MODES, default="stateless")
    parser.add_argument("--requests", type=int, default=2_700)
    parser.add_argument("--max-calls", type=int, default=3, help="the tool's maxCalls (3)")
    parser.add_argument("--keep", type=Path, help="also write the profile (pstats) here")
    args = parser.parse_args(argv)
    if args.profile:
        profile(args.mode, args.requests, args.max_calls, keep=args.keep)
        return 0
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
