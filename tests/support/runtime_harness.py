"""Real servers for the runtime tests: the runtime (in process, or `seif serve` as a subprocess)
and the synthetic reference executor, on loopback ports. Nothing of the runtime is mocked.

- :func:`running_stack` starts an executor app and a runtime app in the current event loop
  (:func:`runtime_stack` the runtime alone, for an executor of the caller's);
  :func:`stack_in_thread` does the same in a background loop for synchronous tests, and
  :func:`run_on_fake_clock` runs a scenario against a runtime on a :class:`FakeClock`.
- :func:`write_config` writes a build, bindings and credentials for a given executor URL;
  :func:`prepare_config` prepares a runtime from them.
- :func:`start_executor_process` and :func:`start_serve` run both as subprocesses
  (:func:`executor_process` the executor for the span of a ``with`` block).
- :data:`COORDS`, :func:`execute_request` and :class:`PlainBinding`: what the executor client
  is given, for the tests that call it directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Generic, TypeVar

import aiohttp
from aiohttp import web

from compiler import compile_project
from compiler.builds.build import write_build
from policy.ir import Project, Tool
from policy.json.strict import loads
from servers.executor import client as executor_client
from servers.executor import interface as executor_interface
from servers.http.app import RUNTIME, create_app
from servers.http.serving import GuardedSite, Limits
from servers.runtime.service import Runtime
from servers.runtime.startup import Clock, Prepared, prepare, wall_clock
from tests.support.paths import ROOT

REFERENCE = ROOT / "reference" / "agent-tools" / "context-project.json"
EXECUTOR_SCRIPT = ROOT / "examples" / "reference-tools" / "executor.py"
HOST = "127.0.0.1"

APP_TOKEN = "app-token-3f9c1d7e5a"
READER_TOKEN = "reader-token-8b2e4c6a0d"  # context.resolve only
OTHER_APP_TOKEN = "other-app-token-5c7e9a1b3d"  # another application: resolve, execute, traces
OPERATOR_TOKEN = "operator-token-2e6a8c0f4b"  # traces.read alone: an operator's
APPROVAL_TOKEN = "approval-token-6d0a2f8c4e"
TOOL_TOKENS = {
    "inspect-context": "inspect-secret-1a2b3c4d5e",
    "search-knowledge": "search-secret-6f7a8b9c0d",
    "propose-change": "propose-secret-e1f2a3b4c5",
}
TOOL_ENV = {
    "inspect-context": "CONTEXT_TOOL_INSPECT_TOKEN",
    "search-knowledge": "CONTEXT_TOOL_SEARCH_TOKEN",
    "propose-change": "CONTEXT_TOOL_PROPOSE_TOKEN",
}
ENV: dict[str, str] = {
    "SEIF_APP_TOKEN": APP_TOKEN,
    "SEIF_READER_TOKEN": READER_TOKEN,
    "SEIF_OTHER_APP_TOKEN": OTHER_APP_TOKEN,
    "SEIF_OPERATOR_TOKEN": OPERATOR_TOKEN,
    "SEIF_CONTEXT_TOOL_APPROVAL_TOKEN": APPROVAL_TOKEN,
    **{TOOL_ENV[t]: v for t, v in TOOL_TOKENS.items()},
}
CREDENTIALS: dict[str, Any] = {
    "credentials": [
        {
            "id": "tutor-app",
            "tokenRef": "env:SEIF_APP_TOKEN",
            "scopes": ["context.resolve", "tools.execute", "traces.read", "metrics.read"],
        },
        {"id": "reader", "tokenRef": "env:SEIF_READER_TOKEN", "scopes": ["context.resolve"]},
        {
            "id": "other-app",
            "tokenRef": "env:SEIF_OTHER_APP_TOKEN",
            "scopes": ["context.resolve", "tools.execute", "traces.read"],
        },
        {"id": "operator", "tokenRef": "env:SEIF_OPERATOR_TOKEN", "scopes": ["traces.read"]},
    ]
}
BEARER = {"Authorization": f"Bearer {APP_TOKEN}"}
APPROVAL = {"x-seif-tool-approval": APPROVAL_TOKEN}

READ_ARGS: dict[str, Any] = {"ref": "course/data-literacy/module-2/lesson-3"}
PROPOSAL: dict[str, Any] = {
    "target": "course/data-literacy/module-2/lesson-3",
    "kind": "clarify",
    "summary": "Define the median before the outlier example.",
}
OTHER_PROPOSAL: dict[str, Any] = {**PROPOSAL, "kind": "correct"}


def _load_executor() -> ModuleType:
    """The example executor is a script in a folder with a dash: load it as a module of its
    own (registered, so its dataclasses resolve their annotations)."""
    name = "seif_reference_executor"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, EXECUTOR_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    # each executor app compiles the reference project; compile it once per test session
    module.__dict__["compile_project"] = functools.lru_cache(maxsize=4)(compile_project)
    return module


EXECUTOR = _load_executor()


@functools.lru_cache(maxsize=1)
def reference_project() -> Project:
    return compile_project(REFERENCE)


def knobs(**kw: Any) -> Any:
    """An executor ``Knobs`` value."""
    return EXECUTOR.Knobs(**kw)


def idempotency_key(build: str, context_ref: str, call_id: str) -> str:
    """The spec's derivation, written out again here rather than imported from the runtime."""
    return hashlib.sha256(f"{build}|{context_ref}|{call_id}".encode()).hexdigest()


class FakeClock:
    """An injectable clock (integer milliseconds) that tests move by hand."""

    def __init__(self, now: int = 1_800_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


# --- configuration files ---------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    build: Path
    bindings: Path
    credentials: Path
    data: Path


def bindings_document(
    executor_url: str, overrides: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """Every reference tool bound to the executor; ``overrides`` maps tool id -> fields."""
    tools: dict[str, Any] = {}
    for tool, var in TOOL_ENV.items():
        tools[tool] = {"endpoint": f"{executor_url}/{tool}", "secretRef": f"env:{var}"}
        tools[tool].update((overrides or {}).get(tool, {}))
    return {"environment": "test", "revision": 7, "tools": tools}


def write_config(
    root: Path,
    executor_url: str,
    *,
    bindings: Mapping[str, Any] | None = None,
    credentials: Mapping[str, Any] | None = None,
    data: str = "data",
) -> Config:
    root.mkdir(parents=True, exist_ok=True)
    build = root / "build"
    if not (build / "build.cbor").exists():
        write_build(reference_project(), build)
    bindings_path = root / "bindings.json"
    bindings_path.write_text(json.dumps(bindings or bindings_document(executor_url)))
    credentials_path = root / "credentials.json"
    credentials_path.write_text(json.dumps(credentials or CREDENTIALS))
    return Config(build, bindings_path, credentials_path, root / data)


def prepare_config(
    config: Config,
    *,
    env: Mapping[str, str] = ENV,
    require_turn: bool = False,
    clock: Clock = wall_clock,
    store_url: str | None = None,
    replica_id: str | None = None,
    shadow: Mapping[str, Any] | None = None,
) -> Prepared:
    """The runtime's ``prepare`` on the files of ``config`` (its data directory, or the
    PostgreSQL store of ``store_url`` as replica ``replica_id``); ``shadow``: ``prepare``'s
    ``shadow_dir`` and ``shadow_backlog``, if given."""
    return prepare(
        build_dir=config.build,
        bindings_path=config.bindings,
        credentials_path=config.credentials,
        data_dir=config.data if store_url is None else None,
        store_url=store_url,
        replica_id=replica_id,
        env=env,
        require_turn=require_turn,
        clock=clock,
        **(shadow or {}),
    )


# --- in-process servers ----------------------------------------------------------------------


@asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[str]:
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, HOST, 0).start()
    try:
        yield f"http://{HOST}:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


@dataclass
class Guarded:
    """A runtime app served by :class:`~servers.http.serving.GuardedSite`, as `seif serve`
    serves it (the production listener: connection limits, header deadline)."""

    url: str
    host: str
    port: int
    site: GuardedSite


@asynccontextmanager
async def serving_guarded(app: web.Application, limits: Limits) -> AsyncIterator[Guarded]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = GuardedSite(runner, HOST, 0, limits)
    await site.start()
    try:
        port = runner.addresses[0][1]
        yield Guarded(f"http://{HOST}:{port}", HOST, port, site)
    finally:
        await runner.cleanup()


@dataclass
class Reply:
    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Stack:
    """A running runtime and executor, and a client session to talk to both."""

    runtime: str
    executor: str
    executor_app: web.Application
    prepared: Prepared
    config: Config
    http: aiohttp.ClientSession
    runtime_app: web.Application
    """The runtime's application (its ``RUNTIME``, ``TURNS``, ...)."""
    guarded: Guarded | None = None
    """The production listener, when the runtime is served under limits."""

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: Mapping[str, str] | None = None,
        raw: bytes | None = None,
    ) -> Reply:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        async with self.http.request(
            method,
            self.runtime + path,
            data=data,
            headers=dict(BEARER if headers is None else headers),
        ) as r:
            text = await r.read()
            try:
                parsed = loads(text)
            except ValueError:
                parsed = text
            return Reply(r.status, parsed, dict(r.headers))

    async def resolve(
        self, objective: str = "authoring", consumer: str = "course-authoring", **extra: Any
    ) -> dict[str, Any]:
        reply = await self.call(
            "POST", "/v1/context/resolve", {"objective": objective, "consumer": consumer, **extra}
        )
        assert reply.status == 200, reply
        body: dict[str, Any] = reply.body
        return body

    async def execute(
        self,
        context_ref: str,
        tool: str,
        call_id: str,
        arguments: Any,
        approval_id: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        body = {"contextRef": context_ref, "tool": tool, "callId": call_id, "arguments": arguments}
        if approval_id is not None:
            body["approvalId"] = approval_id
        reply = await self.call("POST", "/v1/context/tools/execute", {**body, **extra})
        assert reply.status == 200, reply
        receipt: dict[str, Any] = reply.body
        return receipt

    async def approve(
        self,
        context_ref: str,
        tool: str,
        call_id: str,
        arguments: Any,
        reason: str = "checked against the lesson",
        *,
        path: str = "/v1/context/tools/approve",
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        body = {
            "contextRef": context_ref,
            "tool": tool,
            "callId": call_id,
            "arguments": arguments,
            "reason": reason,
        }
        return await self.call("POST", path, body, headers=APPROVAL if headers is None else headers)

    async def approval_id(self, context_ref: str, tool: str, call_id: str, arguments: Any) -> str:
        reply = await self.approve(context_ref, tool, call_id, arguments)
        assert reply.status == 200, reply
        approval: str = reply.body["approvalId"]
        return approval

    async def stats(self) -> dict[str, Any]:
        async with self.http.get(self.executor + "/_stats") as r:
            found: dict[str, Any] = await r.json()
            return found

    def set_knobs(self, tool: str, **kw: Any) -> None:
        self.executor_app[EXECUTOR.STATE].knobs[tool] = knobs(**kw)


@asynccontextmanager
async def runtime_stack(
    config: Config,
    executor_url: str,
    executor_app: web.Application,
    *,
    env: Mapping[str, str] = ENV,
    require_turn: bool = False,
    clock: Clock = wall_clock,
    limits: Limits | None = None,
    mcp: Any = None,
    store_url: str | None = None,
    replica_id: str | None = None,
    shadow: Mapping[str, Any] | None = None,
) -> AsyncIterator[Stack]:
    """The runtime (``prepare`` + ``create_app``) of ``config`` on a loopback port, with the
    executor ``executor_app`` at ``executor_url``; under ``limits`` it is served as `seif serve`
    serves it. Its data directory is closed at the end."""
    prepared = prepare_config(
        config,
        env=env,
        require_turn=require_turn,
        clock=clock,
        store_url=store_url,
        replica_id=replica_id,
        shadow=shadow,
    )
    try:
        app = create_app(prepared)
        if mcp is not None:  # servers.mcp.app.McpOptions: MCP mounted, as `seif serve --mcp`
            from servers.mcp.app import mount

            mount(app, mcp)
        async with contextlib.AsyncExitStack() as held:
            guarded = None
            if limits is None:
                url = await held.enter_async_context(serving(app))
            else:
                guarded = await held.enter_async_context(serving_guarded(app, limits))
                url = guarded.url
            http = await held.enter_async_context(aiohttp.ClientSession())
            yield Stack(url, executor_url, executor_app, prepared, config, http, app, guarded)
    finally:
        prepared.close()


@asynccontextmanager
async def running_stack(
    root: Path,
    *,
    clock: Clock = wall_clock,
    require_turn: bool = False,
    executor_knobs: Mapping[str, Any] | None = None,
    tool_overrides: Mapping[str, Mapping[str, Any]] | None = None,
    env: Mapping[str, str] | None = None,
    bindings_extra: Mapping[str, Any] | None = None,
    limits: Limits | None = None,
    mcp: Any = None,
    shadow: Mapping[str, Any] | None = None,
    credentials: Mapping[str, Any] | None = None,
) -> AsyncIterator[Stack]:
    """An executor and a runtime (``prepare`` + ``create_app``) on loopback ports; with
    ``mcp`` (``McpOptions``), MCP mounted too; ``shadow``: see :func:`prepare_config`;
    ``credentials``: the credentials file's document (default :data:`CREDENTIALS`)."""
    executor_app = EXECUTOR.create_app(tokens=TOOL_TOKENS, knobs=dict(executor_knobs or {}))
    async with serving(executor_app) as executor_url:
        document = {**bindings_document(executor_url, tool_overrides), **(bindings_extra or {})}
        config = write_config(root, executor_url, bindings=document, credentials=credentials)
        async with runtime_stack(
            config,
            executor_url,
            executor_app,
            env=ENV if env is None else env,
            require_turn=require_turn,
            clock=clock,
            limits=limits,
            mcp=mcp,
            shadow=shadow,
        ) as stack:
            yield stack


@asynccontextmanager
async def guarded_stack(root: Path, limits: Limits) -> AsyncIterator[tuple[Stack, Guarded]]:
    """:func:`running_stack`, with the runtime served under ``limits``."""
    async with running_stack(root, limits=limits) as stack:
        assert stack.guarded is not None
        yield stack, stack.guarded


RuntimeScenario = Callable[[Stack, Runtime, FakeClock], Awaitable[None]]
"""A scenario run by :func:`run_on_fake_clock`: given the stack, the runtime's service (its
pending calls, caches, ...) and the clock it reads."""


def run_on_fake_clock(root: Path, scenario: RuntimeScenario) -> None:
    """Run ``scenario`` against a :func:`running_stack` whose runtime reads a new
    :class:`FakeClock`."""
    clock = FakeClock()

    async def on_stack() -> None:
        async with running_stack(root, clock=clock) as s:
            await scenario(s, s.runtime_app[RUNTIME], clock)

    run_async(on_stack())


T = TypeVar("T")


S = TypeVar("S")


class Threaded(Generic[S]):
    """A stack (``stack``) whose event loop runs in a background thread."""

    def __init__(self, stack: S, loop: asyncio.AbstractEventLoop) -> None:
        self.stack = stack
        self.loop = loop

    def run(self, coro: Awaitable[T], timeout: float = 30) -> T:
        async def wrapped() -> T:
            return await coro

        return asyncio.run_coroutine_threadsafe(wrapped(), self.loop).result(timeout)


ThreadedStack = Threaded[Stack]


@contextlib.contextmanager
def in_thread(manager: AbstractAsyncContextManager[S], name: str) -> Iterator[Threaded[S]]:
    """Enter ``manager`` on an event loop of a thread of its own, for blocking clients."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name=name, daemon=True)
    thread.start()
    try:
        stack = asyncio.run_coroutine_threadsafe(manager.__aenter__(), loop).result(60)
        try:
            yield Threaded(stack, loop)
        finally:
            asyncio.run_coroutine_threadsafe(manager.__aexit__(None, None, None), loop).result(60)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def stack_in_thread(root: Path, **options: Any) -> contextlib.AbstractContextManager[ThreadedStack]:
    return in_thread(running_stack(root, **options), "runtime-loop")


# --- subprocesses ----------------------------------------------------------------------------


def seif_command() -> list[str]:
    script = Path(sys.executable).parent / "seif"
    return [str(script)] if script.exists() else [sys.executable, "-m", "seif.cli"]


def _read_url(proc: subprocess.Popen[str], prefix: str, deadline: float) -> str:
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:
            break  # the process closed stdout: it exited
        if line.startswith(prefix):
            return line[len(prefix) :].strip()
    raise AssertionError(f"no `{prefix}` line (exit code {proc.poll()})")


def spawn(args: list[str], env: Mapping[str, str], stderr: Path) -> subprocess.Popen[str]:
    """A process of ours (`seif`, mostly) run from the repository's root, its stdout a pipe,
    its stderr written to ``stderr``."""
    with stderr.open("w") as err:
        return subprocess.Popen(
            args,
            cwd=ROOT,
            env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), **env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )


def start_executor_process(root: Path, *knob_args: str) -> tuple[subprocess.Popen[str], str]:
    """The reference executor as a subprocess (tokens from :data:`ENV`); its base URL."""
    args = [sys.executable, str(EXECUTOR_SCRIPT), "--host", HOST, "--port", "0"]
    if knob_args:
        args += ["--knob", *knob_args]
    proc = spawn(args, ENV, root / "executor.err")
    try:
        return proc, _read_url(proc, "reference executor listening on ", time.monotonic() + 30)
    except BaseException:
        stop(proc)
        raise


@contextlib.contextmanager
def executor_process(root: Path, *knob_args: str) -> Iterator[str]:
    """:func:`start_executor_process` for the span of the block, stopped at its end; its base
    URL."""
    proc, url = start_executor_process(root, *knob_args)
    try:
        yield url
    finally:
        stop(proc)


def serve_args(config: Config, *extra: str) -> list[str]:
    return [
        *seif_command(),
        "serve",
        "--build",
        str(config.build),
        "--bindings",
        str(config.bindings),
        "--credentials",
        str(config.credentials),
        "--data",
        str(config.data),
        "--host",
        HOST,
        "--port",
        "0",
        *extra,
    ]


def start_serve(
    config: Config, *extra: str, env: Mapping[str, str] | None = None, name: str = "serve"
) -> subprocess.Popen[str]:
    """`seif serve` as a subprocess (not waited for: see :func:`listening`)."""
    return spawn(
        serve_args(config, *extra), ENV if env is None else env, config.data.parent / f"{name}.err"
    )


def listening(proc: subprocess.Popen[str], timeout: float = 30, name: str = "runtime") -> str:
    """The URL of the ``seif NAME listening on URL`` line a seif server prints once it accepts
    (``name``: ``runtime``, ``approval-server``)."""
    return _read_url(proc, f"seif {name} listening on ", time.monotonic() + timeout)


def stop(proc: subprocess.Popen[str], timeout: float = 10) -> int:
    """Kill one process we started (by its own handle) and reap it."""
    if proc.poll() is None:
        proc.kill()
    code = proc.wait(timeout)
    if proc.stdout is not None:
        proc.stdout.close()
    return code


def run_async(coro: Awaitable[T]) -> T:
    async def wrapped() -> T:
        return await coro

    return asyncio.run(wrapped())


# --- what the executor client is given -------------------------------------------------------

COORDS: dict[str, Any] = {
    "build": "sha256:" + "ab" * 32,
    "consumer": "tutor-app",
    "objective": "learner",
    "environment": "test",
    "deployment": "local",
    "trace": "trace-1",
    "context": "ctx-1",
}
"""The coordinates of an execute request sent by the executor client on its own."""


def execute_request(
    tool: Tool, arguments: Any, call_id: str = "c1", **coords: Any
) -> dict[str, Any]:
    """The client's ``execute_body`` for ``tool`` at :data:`COORDS` (``coords`` replacing some),
    with the client's idempotency key of ``call_id``."""
    key = executor_interface.idempotency_key(COORDS["build"], COORDS["context"], call_id)
    return executor_client.execute_body(tool, arguments, call_id, key, {**COORDS, **coords})


@dataclass(frozen=True)
class PlainBinding:
    """A binding as the executor client reads it (``servers.executor.client.BindingLike``, the
    shape of ``servers.config.files.Binding``), without TLS, with defaults of its own."""

    tool: str
    endpoint: str
    timeout_ms: int = 2000
    max_bytes: int = 65536
    secret: str | None = field(default=None, repr=False)


ON_ASYNCIO = (
    "import sys; sys.modules['uvloop'] = None; from seif.cli import main; raise SystemExit(main())"
)
"""`seif` with uvloop hidden: ``seif.serve.runtime.run_loop`` then runs asyncio's own event loop."""


def start_serve_on(
    event_loop: str, config: Config, *extra: str, name: str = "serve"
) -> subprocess.Popen[str]:
    """:func:`start_serve` on ``event_loop``: ``"uvloop"`` (the default of `seif serve` where
    it is installed) or ``"asyncio"`` (asyncio's own loop, uvloop hidden from the process)."""
    if event_loop == "uvloop":
        return start_serve(config, *extra, name=name)
    assert event_loop == "asyncio", event_loop
    command = seif_command()
    args = [sys.executable, "-c", ON_ASYNCIO, *serve_args(config, *extra)[len(command) :]]
    return spawn(args, ENV, config.data.parent / f"{name}.err")


# --- the SDK's tests -------------------------------------------------------------------------

BRIEFING = "briefing"
"""An objective that discloses messages and no tool (see :func:`write_briefing_build`)."""


def write_briefing_build(root: Path) -> None:
    """Write ``root/build``: the reference project plus the objective :data:`BRIEFING`, whose
    profile excludes every tool. Written before :func:`write_config` (or
    :func:`running_stack`) runs on ``root``, it is the build they use; the reference executor
    serves it unchanged (the tools are the same)."""
    document = json.loads(REFERENCE.read_text(encoding="utf-8"))
    document["objectives"].append(
        {"id": BRIEFING, "profile": BRIEFING, "description": "Context only: no tools."}
    )
    document["profiles"].append(
        {
            "id": BRIEFING,
            "tokenCeiling": 1000,
            "context": [
                {
                    "id": "briefing-role",
                    "role": "system",
                    "text": "Brief the author on the course's review rules.",
                    "required": True,
                }
            ],
            "toolRules": [{"tool": t["id"], "participation": "exclude"} for t in document["tools"]],
        }
    )
    root.mkdir(parents=True, exist_ok=True)
    project = root / "briefing-project.json"
    project.write_text(json.dumps(document), encoding="utf-8")
    write_build(compile_project(project), root / "build")
