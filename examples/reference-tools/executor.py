"""A synthetic executor for the reference tools (``context-tool-executor.v1``).

Serves ``inspect-context``, ``search-knowledge`` and ``propose-change`` of
``reference/agent-tools/context-project.json`` under ``/{tool-id}/describe`` and
``/{tool-id}/execute``, so a binding endpoint is ``http://HOST:PORT/{tool-id}``::

    python examples/reference-tools/executor.py --port 0 [--host 127.0.0.1]
        [--token-env [TOOL=]VAR ...] [--consumer ID ...] [--knob TOOL:NAME[=VALUE] ...]

Everything is synthetic: a small in-memory course catalogue, proposals kept in memory only, no
real write anywhere. The executor authorizes from its own state, never from the model: bearer
tokens per tool (``CONTEXT_TOOL_INSPECT_TOKEN``, ``CONTEXT_TOOL_SEARCH_TOKEN``,
``CONTEXT_TOOL_PROPOSE_TOKEN``; an unset variable means that tool needs no token), a fixed
allowlist of consumers in the coordinates, and for ``propose-change`` its own allowlist of target
prefixes. ``GET /_stats`` reports counters for tests.

Test knobs (:class:`Knobs`, per tool, off by default) simulate misbehaving executors: a delay
after the action, a redirect, an oversized or invalid JSON response, credential reflection, a
changed contract digest, ``ok: false`` and an output that breaks the result schema.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import hmac
import ipaddress
import json
import os
import signal
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from compiler import compile_project
from policy.ir import Tool
from policy.json.strict import JsonError, loads

CONTRACT = "context-tool-executor.v1"
PROJECT = Path(__file__).resolve().parents[2] / "reference" / "agent-tools" / "context-project.json"
TOKEN_ENV = {
    "inspect-context": "CONTEXT_TOOL_INSPECT_TOKEN",
    "search-knowledge": "CONTEXT_TOOL_SEARCH_TOKEN",
    "propose-change": "CONTEXT_TOOL_PROPOSE_TOKEN",
}
DEFAULT_CONSUMERS = frozenset({"tutor-app", "course-authoring"})
PROPOSAL_TARGETS = ("course/data-literacy/",)
COORDINATES = ("build", "consumer", "objective", "environment", "deployment", "trace", "context")
MAX_BODY = 1 << 20
REDIRECT_TARGET = "/_redirect-target"

CATALOGUE: dict[str, tuple[str, str]] = {
    "course/data-literacy/module-2": (
        "Module 2: averages",
        "Means, medians and modes, and when each describes a typical case.",
    ),
    "course/data-literacy/module-1/overview": (
        "Course overview",
        "This synthetic course covers averages, spread and sampling in three modules.",
    ),
    "course/data-literacy/module-2/lesson-3": (
        "Mean, median and outliers",
        "The median is the middle value of sorted data. A few extreme values move the mean "
        "much more than the median.",
    ),
    "course/data-literacy/module-2/glossary": (
        "Glossary: averages",
        "Mean: the sum divided by the count. Median: the middle value of sorted data.",
    ),
    "course/data-literacy/module-3/overview": (
        "Sampling overview",
        "A sample is a subset of a population chosen to estimate its properties.",
    ),
    "course/data-literacy/module-3/exercise-1": (
        "Exercise: skewed samples",
        "Compute the mean and the median of 2, 3, 3, 4 and 40, then explain the gap.",
    ),
}


@dataclass(frozen=True, kw_only=True)
class Knobs:
    """Test-only misbehaviour of one tool; the defaults behave correctly.

    ``delay_ms``, ``redirect``, ``oversized_bytes``, ``invalid_json`` and ``reflect`` act on the
    routes in ``routes``; the action itself happens before the delay (a late answer, not a late
    action). ``reflect`` is ``"raw"`` (the token in the body), ``"escaped"`` (JSON ``\\u``
    escapes) or ``"header"``. ``changed_digest`` makes describe (and the execute contract check)
    use another digest. ``fail_code`` answers ``ok: false`` with that code without acting;
    ``invalid_output`` acts but answers an output that breaks the result schema.
    """

    delay_ms: int = 0
    redirect: bool = False
    oversized_bytes: int = 0
    invalid_json: bool = False
    reflect: str | None = None
    changed_digest: bool = False
    fail_code: str | None = None
    invalid_output: bool = False
    routes: frozenset[str] = frozenset({"describe", "execute"})


@dataclass
class ExecutorState:
    tools: dict[str, Tool]
    tokens: dict[str, str | None]
    consumers: frozenset[str]
    knobs: dict[str, Knobs]
    describes: Counter[str] = field(default_factory=Counter)
    requests: Counter[str] = field(default_factory=Counter)
    executions: Counter[str] = field(default_factory=Counter)
    by_key: Counter[str] = field(default_factory=Counter)
    by_call: Counter[str] = field(default_factory=Counter)
    redirect_hits: int = 0
    proposals: dict[str, dict[str, Any]] = field(default_factory=dict)
    """idempotencyKey -> {"output", "subject"} of the proposal it made (in memory only)."""

    def digest(self, tool: Tool) -> str:
        if self.knobs_of(tool.id).changed_digest:
            return tool.contract_digest[:-1] + ("0" if tool.contract_digest[-1] != "0" else "1")
        return tool.contract_digest

    def knobs_of(self, tool_id: str) -> Knobs:
        return self.knobs.get(tool_id, Knobs())

    def stats(self) -> dict[str, Any]:
        return {
            "describes": dict(self.describes),
            "requests": dict(self.requests),
            "executions": dict(self.executions),
            "byIdempotencyKey": dict(self.by_key),
            "byCallId": dict(self.by_call),
            "redirectTargetHits": self.redirect_hits,
            "proposals": len(self.proposals),
        }


STATE = web.AppKey("state", ExecutorState)


class Refusal(Exception):
    """An ``ok: false`` answer: HTTP status, code and a fixed message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message

    def document(self) -> dict[str, Any]:
        error = {"code": self.code, "message": self.message}
        return {"contract": CONTRACT, "ok": False, "error": error}


# --- synthetic tools -------------------------------------------------------------------------


def _inspect(arguments: Mapping[str, Any]) -> dict[str, Any]:
    ref = arguments["ref"]
    if ref not in CATALOGUE:
        raise Refusal(404, "NOT_FOUND", "no reviewed entry with this ref")
    title, text = CATALOGUE[ref]
    out: dict[str, Any] = {
        "ref": ref,
        "title": title,
        "reviewState": "reviewed",
        "revision": 1 + sum(ref.encode()) % 97,
        "text": text if "section" not in arguments else f"[{arguments['section']}] {text}",
    }
    depth = arguments.get("depth", 0)
    if depth:
        prefix = ref + "/"
        out["children"] = [
            {"ref": r, "title": t, "depth": r.count("/") - ref.count("/")}
            for r, (t, _) in CATALOGUE.items()
            if r.startswith(prefix) and r.count("/") - ref.count("/") <= depth
        ]
    return out


def _search(arguments: Mapping[str, Any]) -> dict[str, Any]:
    words = {w for w in arguments["query"].lower().split() if len(w) > 2}
    scored = []
    for ref, (title, text) in CATALOGUE.items():
        found = words & set((title + " " + text).lower().replace(".", " ").split())
        if found:
            scored.append((len(found) / len(words), ref, title, text))
    scored.sort(key=lambda s: (-s[0], s[1]))
    hits = [
        {"ref": ref, "title": title, "score": round(score, 3), "snippet": text[:200]}
        for score, ref, title, text in scored[: arguments["limit"]]
    ]
    return {"hits": hits, "total": len(scored), "truncated": len(scored) > len(hits)}


def _propose(state: ExecutorState, arguments: Mapping[str, Any], key: str) -> dict[str, Any]:
    if not arguments["target"].startswith(PROPOSAL_TARGETS):
        raise Refusal(403, "TARGET_NOT_ALLOWED", "this backend takes no proposal for the target")
    if key in state.proposals:  # the same dispatch again: the same answer, no new proposal
        output: dict[str, Any] = state.proposals[key]["output"]
        return output
    subject = (arguments["target"], arguments["summary"])
    open_same = any(p["subject"] == subject for p in state.proposals.values())
    output = {
        "proposalId": f"proposal-{len(state.proposals) + 1}",
        "status": "duplicate-of-open-proposal" if open_same else "pending-review",
        "reviewQueue": "data-literacy-review",
    }
    state.proposals[key] = {"output": output, "subject": subject}
    return output


def _act(state: ExecutorState, tool: Tool, body: Mapping[str, Any]) -> dict[str, Any]:
    arguments = body["arguments"]
    if tool.id == "inspect-context":
        output = _inspect(arguments)
    elif tool.id == "search-knowledge":
        output = _search(arguments)
    else:
        output = _propose(state, arguments, body["idempotencyKey"])
    state.executions[tool.id] += 1
    state.by_key[body["idempotencyKey"]] += 1
    state.by_call[body["callId"]] += 1
    return output


# --- request checks ----------------------------------------------------------------------------


def _tool(request: web.Request) -> Tool:
    tool = request.app[STATE].tools.get(request.match_info["tool"])
    if tool is None:
        raise Refusal(404, "UNKNOWN_TOOL", "no such tool here")
    return tool


def _authenticate(request: web.Request, tool: Tool) -> None:
    expected = request.app[STATE].tokens.get(tool.id)
    if expected is None:
        return
    given = request.headers.get("Authorization", "")
    if not hmac.compare_digest(given.encode(), f"Bearer {expected}".encode()):
        raise Refusal(401, "UNAUTHENTICATED", "missing or wrong bearer token")


async def _body(request: web.Request) -> dict[str, Any]:
    raw = bytearray()
    async for chunk in request.content.iter_chunked(65536):
        raw += chunk
        if len(raw) > MAX_BODY:
            raise Refusal(413, "TOO_LARGE", "the body is too large")
    try:
        value = loads(bytes(raw))
    except JsonError as exc:
        raise Refusal(400, "BAD_REQUEST", f"the body is not strict JSON: {exc}") from None
    if not isinstance(value, dict):
        raise Refusal(400, "BAD_REQUEST", "the body is not a JSON object")
    return value


def _consumer_refusal(state: ExecutorState, consumer: object) -> str:
    """The denial of a consumer outside the allowlist: the option that extends it, the consumers
    served, and the consumer asked for (JSON-quoted, at most 64 characters of it)."""
    if isinstance(consumer, str):
        shown = json.dumps(consumer[:64]) + ("..." if len(consumer) > 64 else "")
    else:
        shown = "given"
    served = ", ".join(sorted(state.consumers))
    return (
        f"this backend does not serve the consumer {shown} (it serves {served}); "
        "start the executor with --consumer NAME to serve another (the names given replace "
        "the default list)"
    )


def _check_body(state: ExecutorState, tool: Tool, body: Mapping[str, Any]) -> None:
    declared = body.get("tool")
    expected = {"id": tool.id, "version": tool.version, "contractDigest": state.digest(tool)}
    if body.get("contract") != CONTRACT or declared != expected:
        raise Refusal(409, "CONTRACT_MISMATCH", "the call does not match this tool's contract")
    for name in ("callId", "idempotencyKey"):
        value = body.get(name)
        if not isinstance(value, str) or not 0 < len(value) <= 256:
            raise Refusal(400, "BAD_REQUEST", f"`{name}` must be a short string")
    coordinates = body.get("coordinates")
    if not isinstance(coordinates, dict) or set(coordinates) != set(COORDINATES):
        raise Refusal(400, "BAD_REQUEST", "`coordinates` must carry the seven coordinates")
    consumer = coordinates["consumer"]
    if consumer not in state.consumers:
        raise Refusal(403, "CONSUMER_NOT_ALLOWED", _consumer_refusal(state, consumer))
    if not tool.validator.is_valid(body.get("arguments")):
        raise Refusal(400, "ARGUMENTS_INVALID", "the arguments break the tool's schema")


# --- answering, knobs included --------------------------------------------------------------


def _encode(document: dict[str, Any], knobs: Knobs, token: str | None) -> bytes:
    if knobs.reflect in ("raw", "escaped") and token:
        document = {**document, "echo": token}
    if knobs.oversized_bytes:
        document = {**document, "padding": "x" * knobs.oversized_bytes}
    text = json.dumps(document, separators=(",", ":"))
    if knobs.reflect == "escaped" and token:
        escaped = "".join(f"\\u{ord(c):04x}" for c in token)
        text = text.replace(json.dumps(token)[1:-1], escaped)
    if knobs.invalid_json:
        text = text[: len(text) // 2]
    return text.encode()


async def _answer(
    request: web.Request, route: str, document: dict[str, Any], status: int = 200
) -> web.StreamResponse:
    state = request.app[STATE]
    tool_id = request.match_info["tool"]
    knobs = state.knobs_of(tool_id) if route in state.knobs_of(tool_id).routes else Knobs()
    if knobs.delay_ms:
        await asyncio.sleep(knobs.delay_ms / 1000)
    if knobs.redirect:
        raise web.HTTPTemporaryRedirect(REDIRECT_TARGET)
    headers = {"Content-Type": "application/json"}
    token = state.tokens.get(tool_id)
    if knobs.reflect == "header" and token:
        headers["X-Echo"] = token
    body = _encode(document, knobs, token)
    response = web.StreamResponse(status=status, headers=headers)
    response.enable_chunked_encoding()
    with contextlib.suppress(ConnectionError):  # a client that stopped reading (size limit)
        await response.prepare(request)
        for start in range(0, len(body), 16384):
            await response.write(body[start : start + 16384])
        await response.write_eof()
    return response


async def describe(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    try:
        tool = _tool(request)
        state.describes[tool.id] += 1
        _authenticate(request, tool)
    except Refusal as refusal:
        return await _answer(request, "describe", refusal.document(), refusal.status)
    descriptor = {"id": tool.id, "version": tool.version, "contractDigest": state.digest(tool)}
    return await _answer(request, "describe", {"contract": CONTRACT, "tool": descriptor})


async def execute(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    try:
        tool = _tool(request)
        state.requests[tool.id] += 1
        _authenticate(request, tool)
        body = await _body(request)
        _check_body(state, tool, body)
        knobs = state.knobs_of(tool.id)
        if knobs.fail_code is not None:
            raise Refusal(200, knobs.fail_code, "simulated failure")
        output: Any = _act(state, tool, body)
        if knobs.invalid_output:
            output = {"unexpected": True}
    except Refusal as refusal:
        return await _answer(request, "execute", refusal.document(), refusal.status)
    return await _answer(request, "execute", {"contract": CONTRACT, "ok": True, "output": output})


async def stats(request: web.Request) -> web.Response:
    return web.json_response(request.app[STATE].stats())


async def redirect_target(request: web.Request) -> web.Response:
    request.app[STATE].redirect_hits += 1
    return web.json_response({"contract": CONTRACT, "ok": True, "output": {}})


def create_app(
    *,
    tokens: Mapping[str, str | None] | None = None,
    consumers: frozenset[str] = DEFAULT_CONSUMERS,
    knobs: Mapping[str, Knobs] | None = None,
    project: Path = PROJECT,
) -> web.Application:
    """The executor app. ``tokens`` maps tool id -> bearer token (None or absent: no token);
    ``knobs`` maps tool id -> :class:`Knobs` (``app[STATE].knobs`` may be changed later)."""
    tools = {t.id: t for t in compile_project(project).tools}
    app = web.Application()
    app[STATE] = ExecutorState(
        tools=tools,
        tokens={t: (tokens or {}).get(t) for t in tools},
        consumers=consumers,
        knobs=dict(knobs or {}),
    )
    app.router.add_get("/_stats", stats)
    app.router.add_route("*", REDIRECT_TARGET, redirect_target)
    app.router.add_get("/{tool}/describe", describe)
    app.router.add_post("/{tool}/execute", execute)
    return app


# --- command line ------------------------------------------------------------------------------


def tokens_from_env(token_env: list[str]) -> dict[str, str | None]:
    """Tool id -> token, from each tool's variable (``--token-env TOOL=VAR`` renames one)."""
    names = dict(TOKEN_ENV)
    for item in token_env:
        tool, _, var = item.rpartition("=")
        if not tool:
            tool = next((t for t, v in TOKEN_ENV.items() if v == var), "")
        if tool not in TOKEN_ENV or not var:
            raise ValueError(f"--token-env {item}: expected TOOL=VAR or one of the known names")
        names[tool] = var
    tokens: dict[str, str | None] = {}
    for tool, var in names.items():
        derived = template_env(tool)  # the name `seif bindings template` writes
        value = os.environ.get(var, os.environ.get(derived) if var == TOKEN_ENV[tool] else None)
        if value == "":
            raise ValueError(f"{var} is set but empty")
        tokens[tool] = value
    return tokens


def template_env(tool: str) -> str:
    """``CONTEXT_TOOL_<TOOL ID>_TOKEN``, as `seif bindings template` names a tool's secret: read
    when the short default name (``CONTEXT_TOOL_INSPECT_TOKEN``) is not set."""
    return "CONTEXT_TOOL_" + tool.upper().replace("-", "_").replace(".", "_") + "_TOKEN"


_KNOB_TYPES = {f.name: f.default for f in dataclasses.fields(Knobs)}


def parse_knobs(items: list[str]) -> dict[str, Knobs]:
    """``TOOL:NAME[=VALUE]`` (TOOL ``*`` for every tool) into per-tool knobs."""
    values: dict[str, dict[str, Any]] = {}
    for item in items:
        tool, _, rest = item.partition(":")
        name, has_value, raw = rest.partition("=")
        if name not in _KNOB_TYPES or (tool != "*" and tool not in TOKEN_ENV):
            raise ValueError(f"--knob {item}: unknown tool or knob")
        default = _KNOB_TYPES[name]
        if default is None and not has_value:
            raise ValueError(f"--knob {item}: `{name}` needs a value")
        value: Any = raw if has_value else True
        if isinstance(default, bool):
            value = value is True or raw.lower() in ("1", "true", "yes")
        elif isinstance(default, int):
            value = int(raw)
        elif isinstance(default, frozenset):
            value = frozenset(raw.split(","))
        for target in TOKEN_ENV if tool == "*" else (tool,):
            values.setdefault(target, {})[name] = value
    return {tool: Knobs(**kw) for tool, kw in values.items()}


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def serve(app: web.Application, host: str, port: int) -> None:
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    bound = runner.addresses[0][1]
    shown = f"[{host}]" if ":" in host else host
    print(f"reference executor listening on http://{shown}:{bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    defaults = ", ".join(sorted(DEFAULT_CONSUMERS))
    parser = argparse.ArgumentParser(
        description=(
            "Synthetic executor (context-tool-executor.v1) for the reference tools "
            f"({', '.join(TOKEN_ENV)}): each is served at http://HOST:PORT/TOOL-ID/describe "
            "and /TOOL-ID/execute, so a binding's endpoint is http://HOST:PORT/TOOL-ID. "
            "Everything is synthetic and in memory; GET /_stats reports counters."
        ),
        epilog=(
            "Prints 'reference executor listening on http://HOST:PORT' once it accepts "
            "requests; stops on SIGINT or SIGTERM. Exit code 2 for a bad option or port."
        ),
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: %(default)s); a host that is not loopback "
        "requires a token for every tool",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=8790,
        help="port to listen on, 0 for a free one (default: %(default)s)",
    )
    parser.add_argument(
        "--token-env",
        action="extend",
        nargs="+",
        default=[],
        metavar="[TOOL=]VAR",
        help="read TOOL's bearer token from the environment variable VAR instead of its "
        f"default ({', '.join(f'{t}: {v}' for t, v in TOKEN_ENV.items())}; a bare VAR "
        "must be one of these; when a default is unset, the name `seif bindings template` "
        "writes, CONTEXT_TOOL_<TOOL ID>_TOKEN, is read instead); a tool whose variable is "
        "unset needs no token, one set but empty is an error",
    )
    parser.add_argument(
        "--consumer",
        action="extend",
        nargs="+",
        default=[],
        metavar="ID",
        help=f"serve only these consumers (default: {defaults}); given, the list replaces "
        "the default one; a call whose coordinates name any other consumer (the one the "
        "application resolved its context with, '' when it named none) is refused: "
        "403 ok: false CONSUMER_NOT_ALLOWED, which the runtime reports as a FAILED receipt "
        "with executorError CONSUMER_NOT_ALLOWED",
    )
    parser.add_argument(
        "--knob",
        action="extend",
        nargs="+",
        default=[],
        metavar="TOOL:NAME[=VALUE]",
        help="test-only misbehaviour of TOOL (* for every tool): "
        f"{', '.join(_KNOB_TYPES)} (see Knobs in the source); off by default",
    )
    args = parser.parse_args(argv)
    try:
        tokens = tokens_from_env(args.token_env)
        knobs = parse_knobs(args.knob)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not _loopback(args.host) and None in tokens.values():
        print("error: every tool needs a token on a non-loopback host", file=sys.stderr)
        return 2
    consumers = frozenset(args.consumer) if args.consumer else DEFAULT_CONSUMERS
    app = create_app(tokens=tokens, consumers=consumers, knobs=knobs)
    try:
        asyncio.run(serve(app, args.host, args.port))
    except OSError as error:
        print(f"error: cannot listen on {args.host}:{args.port}: {error.strerror}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
