"""`seif serve`: the runtime server."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web

from policy.diagnostic import Diagnostic, render_lines
from seif.cli.output import EXIT_LOCKED, EXIT_OK, EXIT_USAGE
from seif.serve.log import configure, listening, refused, status
from servers.http.app import create_app
from servers.http.serving import (
    HEADER_TIMEOUT_S,
    MAX_CONNECTIONS,
    WRITE_TIMEOUT_S,
    GuardedSite,
    Limits,
)
from servers.mcp.origins import is_loopback
from servers.runtime.shadow import BACKLOG
from servers.runtime.startup import MEMORY, Prepared, StartRefused, prepare
from servers.store.rows import StoreError
from servers.store.sqlite.datadir import DataDirError, DataDirLocked

if TYPE_CHECKING:  # the mcp SDK is loaded only when MCP is served
    from servers.mcp.mounted import McpOptions

T = TypeVar("T")
RESERVED_DESCRIPTORS = 64
"""File descriptors kept for what is not a connection: stdio, the store, the log, the lock."""


def cmd_serve(args: argparse.Namespace) -> int:
    configure(getattr(args, "log_format", "text"))
    if getattr(args, "mcp", False) and args.require_turn:
        refused(
            "seif serve: --mcp cannot be served with --require-turn: MCP clients start no turns"
        )
        return EXIT_USAGE
    where = store_of(args)
    if isinstance(where, str):
        refused(f"seif serve: {where}")
        return EXIT_USAGE
    try:
        prepared = prepare(
            build_dir=args.build,
            bindings_path=args.bindings,
            credentials_path=args.credentials,
            data_dir=where.data_dir,
            store_url=where.url,
            replica_id=getattr(args, "replica_id", None),
            lease_ms=round(getattr(args, "lease_timeout", 15.0) * 1000),
            env=os.environ,
            require_turn=args.require_turn,
            shadow_dir=getattr(args, "shadow", None),
            shadow_backlog=getattr(args, "shadow_backlog", BACKLOG),
            upstream_stderr=getattr(args, "upstream_stderr", None),
        )
    except StartRefused as exc:  # every problem of every file, then exit
        _report(exc.diagnostics)
        n = len(exc.diagnostics)
        refused(f"seif serve: not started, {n} problem{'s' if n != 1 else ''}; nothing was created")
        return EXIT_USAGE
    except StoreError as exc:  # a shared store that cannot be opened (no password is named)
        refused(f"seif serve: STORE_UNAVAILABLE: {exc}")
        return EXIT_USAGE
    except DataDirLocked as exc:  # named as given, not as the absolute path it was opened at
        _report(d.moved(file=where.data_dir) for d in exc.diagnostics)
        return EXIT_LOCKED
    except DataDirError as exc:  # damage or loss found at start: nothing was changed
        _report(exc.diagnostics)
        return EXIT_USAGE
    if where.url == MEMORY:
        status("warnings")(
            "seif runtime: the store is in memory (--store memory:): nothing is kept across a "
            "restart, and a call id may run again after one"
        )
    try:
        run_loop(_serve(prepared, args, _limits(args)))
    except OSError as exc:
        refused(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
        return EXIT_USAGE
    finally:
        prepared.close()
    return EXIT_OK


@dataclass(frozen=True)
class StoreChoice:
    """The one store asked for: a SQLite data directory, or a PostgreSQL database's URL (or
    ``memory:``)."""

    data_dir: str | None = None
    url: str | None = None


def store_of(args: argparse.Namespace) -> StoreChoice | str:
    """``--data DIR``, ``--store sqlite:DIR``, ``--store postgresql://...`` or ``--store
    memory:``; exactly one (a problem is the message saying what is wrong, never quoting a URL,
    which may hold a password)."""
    data, store = getattr(args, "data", None), getattr(args, "store", None)
    if (data is None) == (store is None):
        return "give exactly one store: --data DATA_DIR, or --store sqlite:DIR|postgresql://..."
    if data is not None:
        return StoreChoice(data_dir=data)
    assert store is not None
    if store.startswith("sqlite:") and len(store) > len("sqlite:"):
        return StoreChoice(data_dir=store[len("sqlite:") :])
    if store.startswith(("postgresql://", "postgres://")) or store == MEMORY:
        return StoreChoice(url=store)
    return "--store must be sqlite:DATA_DIR, a postgresql:// URL or memory:"


def _report(diagnostics: Iterable[Diagnostic]) -> None:
    """Each problem as ``FILE:WHERE: CODE: message`` (and ``FILE: remedy: ...``), a line of
    the log each."""
    for d in diagnostics:
        for line in render_lines(d):
            refused(line)


def run_loop(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` on uvloop (libuv's event loop: the same asyncio API, less CPU per request)
    where it is installed, else on asyncio's own loop."""
    try:
        import uvloop  # noqa: PLC0415 -- optional: not installed on Windows
    except ImportError:  # asyncio's loop does the same, slower
        return asyncio.run(main)
    return uvloop.run(main)


class _WithheldDetails(logging.Filter):
    """aiohttp logs a malformed request with its raw header lines, which may carry a bearer
    token, and the MCP SDK logs session ids and handler exceptions: keep the event, drop
    every detail."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = f"{record.name}: {record.levelname.lower()} (details withheld)"
        record.args = ()
        record.exc_info = None
        record.exc_text = None
        return True


def _quiet_http_layer() -> None:
    names = ["aiohttp.server", "aiohttp.web", "aiohttp.access", "aiohttp.internal"]
    # the MCP SDK's modules, each with its own logger (a filter does not reach a child's)
    names += [n for n in logging.root.manager.loggerDict if n == "mcp" or n.startswith("mcp.")]
    for name in names:
        logging.getLogger(name).addFilter(_WithheldDetails())


def _limits(args: argparse.Namespace) -> Limits:
    """The connection limits asked for (``seif.cli`` checked their ranges), the connection
    limit lowered to what the process's file-descriptor limit can hold."""
    wanted = Limits(
        header_timeout_s=getattr(args, "header_timeout", None) or HEADER_TIMEOUT_S,
        max_connections=getattr(args, "max_connections", None) or MAX_CONNECTIONS,
        write_timeout_s=getattr(args, "write_timeout", None) or WRITE_TIMEOUT_S,
    )
    fits = _descriptors_for(wanted.max_connections)
    if fits < wanted.max_connections:
        status("start")(
            f"--max-connections lowered to {fits}: the file-descriptor limit (ulimit -Hn) "
            f"holds no more (each connection may also need one to its executor)"
        )
        return replace(wanted, max_connections=fits)
    return wanted


def _descriptors_for(connections: int) -> int:
    """Raise the soft file-descriptor limit towards what ``connections`` client connections
    and as many executor connections need; the connections it then holds."""
    try:
        import resource  # noqa: PLC0415 -- POSIX only: Windows has no such limit to raise
    except ImportError:
        return connections
    need = 2 * connections + RESERVED_DESCRIPTORS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError):
            pass
    if soft == resource.RLIM_INFINITY or soft >= need:
        return connections
    return max(1, (soft - RESERVED_DESCRIPTORS) // 2)


async def _serve(prepared: Prepared, args: argparse.Namespace, limits: Limits) -> None:
    from seif.serve.status import announce, readiness  # noqa: PLC0415

    announce(prepared, status("start"))
    app = create_app(prepared)
    if getattr(args, "mcp", False):
        from servers.mcp.app import mount  # noqa: PLC0415 -- loads the mcp SDK

        mount(app, mcp_options(args, limits))
        status("start")("seif serve: MCP at /mcp/{objective} (docs/mcp.md)")
    gc.collect()
    gc.freeze()  # what start-up made lives as long as the process: no collection scans it
    await serve_app(
        app, "runtime", args.host, args.port, limits, lambda: readiness(app, status("readiness"))
    )


def mcp_options(args: argparse.Namespace, limits: Limits) -> McpOptions:
    """``--mcp``'s options: the approval wait asked for, MCP's budgets of requests being
    answered within the connection limit (``servers.mcp.streams``), and the origins allowed
    (``servers.mcp.origins``: the ones given, and the loopback ones on a loopback ``--host``)."""
    from servers.mcp.app import McpOptions  # noqa: PLC0415 -- loads the mcp SDK

    return McpOptions.within(
        limits.max_connections,
        approval_wait_s=args.mcp_approval_wait,
        allowed_origins=frozenset(args.mcp_allowed_origin),
        loopback=is_loopback(args.host),
    )


async def serve_app(
    app: web.Application,
    name: str,
    host: str,
    port: int,
    limits: Limits,
    background: Callable[[], Coroutine[Any, Any, None]] | None = None,
) -> None:
    """Serve ``app`` under ``limits``, print ``seif NAME listening on http://HOST:PORT`` once
    it accepts connections (then run ``background`` beside it), and return after SIGINT or
    SIGTERM (a clean shutdown)."""
    _quiet_http_layer()
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = GuardedSite(runner, host, port, limits)
        await site.start()
        bound = runner.addresses[0]
        shown = f"[{bound[0]}]" if ":" in str(bound[0]) else bound[0]
        sys.stdout.write(f"seif {name} listening on http://{shown}:{bound[1]}\n")
        sys.stdout.flush()
        listening(f"seif {name} listening on http://{shown}:{bound[1]}")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        task = asyncio.ensure_future(background()) if background is not None else None
        await stop.wait()
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    finally:
        await runner.cleanup()
