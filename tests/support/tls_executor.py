"""Executors over TLS on loopback for the tests: a test PKI made with ``trustme`` and the
reference executor served with it, in this event loop or in a thread of its own.

An executor in a thread of its own runs while the test's event loop is blocked, so it can close
a kept-alive connection that the client's event loop has not yet seen closing: the race of a
request that reuses a connection the server is closing, made deterministic.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trustme
from aiohttp import web

from tests.support.runtime_harness import EXECUTOR, HOST, TOOL_TOKENS


@dataclass(frozen=True)
class Pki:
    """A private CA with a certificate for the loopback names, and what goes wrong: a second
    CA nobody trusts, and a certificate of the trusted CA for another host name."""

    ca: trustme.CA
    loopback: trustme.LeafCert
    stranger: trustme.CA
    stranger_loopback: trustme.LeafCert
    other_name: trustme.LeafCert

    def write_ca(self, path: Path, ca: trustme.CA | None = None) -> Path:
        (ca or self.ca).cert_pem.write_to_path(str(path))
        return path


def make_pki() -> Pki:
    ca, stranger = trustme.CA(), trustme.CA()
    return Pki(
        ca=ca,
        loopback=ca.issue_cert(HOST, "localhost"),
        stranger=stranger,
        stranger_loopback=stranger.issue_cert(HOST, "localhost"),
        other_name=ca.issue_cert("executor.other.example"),
    )


def server_context(cert: trustme.LeafCert) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(context)
    return context


def reference_app(**knobs: Any) -> web.Application:
    """The reference executor (every tool, the harness's tokens)."""
    return EXECUTOR.create_app(tokens=TOOL_TOKENS, knobs=knobs)


def calls(app: web.Application) -> dict[str, int]:
    """How many ``describe`` and ``execute`` requests reached the executor, in all."""
    stats = app[EXECUTOR.STATE].stats()
    return {
        "describe": sum(stats["describes"].values()),
        "execute": sum(stats["requests"].values()),
    }


async def _start(
    app: web.Application, tls: ssl.SSLContext | None, keepalive_timeout: float
) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, keepalive_timeout=keepalive_timeout, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, HOST, 0, ssl_context=tls).start()
    scheme = "https" if tls is not None else "http"
    return runner, f"{scheme}://{HOST}:{runner.addresses[0][1]}"


@asynccontextmanager
async def serving_tls(
    app: web.Application, tls: ssl.SSLContext | None, keepalive_timeout: float = 75.0
) -> AsyncIterator[str]:
    """``app`` on a loopback port of this event loop, over TLS when ``tls`` is given."""
    runner, base = await _start(app, tls, keepalive_timeout)
    try:
        yield base
    finally:
        await runner.cleanup()


async def _stop(runner: web.AppRunner) -> None:
    await runner.cleanup()
    await asyncio.sleep(0.05)  # the closed transports' sockets are closed a loop turn later


class ThreadedExecutor:
    """An executor app served by an event loop in a thread of its own."""

    def __init__(self, loop: asyncio.AbstractEventLoop, runner: web.AppRunner, base: str) -> None:
        self.loop = loop
        self.runner = runner
        self.base = base

    def connections_closed(self, timeout: float = 5) -> None:
        """Wait (blocking the caller's thread) until the executor has closed every connection
        (its keep-alive timeout closes idle ones on its own), and a little more for the close
        to reach the socket. Over TLS the executor's ``close_notify`` is sent at once; its FIN
        waits for the peer's ``close_notify`` (or a timeout)."""
        deadline = time.monotonic() + timeout
        server = self.runner.server
        assert server is not None
        while any(handler.transport is not None for handler in server.connections):
            assert time.monotonic() < deadline, "the executor kept its connections"
            time.sleep(0.01)
        time.sleep(0.05)

    def stop(self, timeout: float = 10) -> None:
        """Close every connection and stop listening; returns once done (blocking the caller's
        thread, so that the caller's event loop sees none of it happen)."""
        done = asyncio.run_coroutine_threadsafe(_stop(self.runner), self.loop)
        done.result(timeout)


@contextlib.contextmanager
def executor_in_thread(
    app: web.Application, tls: ssl.SSLContext | None, keepalive_timeout: float
) -> Iterator[ThreadedExecutor]:
    """``app`` in a background loop; it closes a connection idle ``keepalive_timeout`` s."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="tls-executor", daemon=True)
    thread.start()
    try:
        started = asyncio.run_coroutine_threadsafe(_start(app, tls, keepalive_timeout), loop)
        runner, base = started.result(30)
        executor = ThreadedExecutor(loop, runner, base)
        try:
            yield executor
        finally:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(30)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
