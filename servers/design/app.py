"""The Design workstation's aiohttp application: ``design_app(project, registry=, token=)``.

A local page over one project file (docs/authoring.md, "The Design workstation"). The page and
its two files are served to anyone who can reach the port (they hold no data); every
``/api/...`` request must carry the page's local token (``Authorization: Bearer TOKEN``,
compared in constant time). Every request must name the bound loopback address in its ``Host``
header (a page of another site that a DNS name rebinds to 127.0.0.1 is refused), and a
``POST`` whose ``Origin`` is not the page's own is refused. Every answer carries a strict
Content-Security-Policy and ``Cache-Control: no-store``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import TextIO

from aiohttp import web

from servers.design import actions, connect
from servers.design.workspace import WORKSPACE, Workspace
from servers.http.middleware import errors
from servers.http.pages import no_icon, secured
from servers.http.serving import GuardedSite, Limits
from servers.wire.errors import ErrorCode, Refused
from servers.wire.limits import MAX_BODY_BYTES

PAGE = {  # path -> (file of servers/design/page, content type)
    "/": ("index.html", "text/html"),
    "/app.js": ("app.js", "text/javascript"),
    "/cards.js": ("cards.js", "text/javascript"),
    "/app.css": ("app.css", "text/css"),
}
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

TOKEN: web.AppKey[str] = web.AppKey("token", str)
TOKEN_DIGEST: web.AppKey[bytes] = web.AppKey("token_digest", bytes)
HOSTS: web.AppKey[set[str]] = web.AppKey("hosts", set)


def _digest(token: str) -> bytes:
    # equal-length digests keep the token's length out of the comparison's timing too
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


@web.middleware
async def guarded(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The bound host, the page's own origin for a change, the local token for the API."""
    hosts = request.app[HOSTS]
    host = request.headers.get("Host", "").lower()
    if host not in hosts:
        raise Refused(ErrorCode.HOST_REFUSED)
    if request.method not in SAFE_METHODS:
        origin = request.headers.get("Origin")
        if origin is not None and origin.lower() != f"http://{host}":
            raise Refused(ErrorCode.ORIGIN_REFUSED)
        if request.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
            raise Refused(ErrorCode.ORIGIN_REFUSED)
    if request.path.startswith("/api/"):
        _authenticate(request)
    return await handler(request)


def _authenticate(request: web.Request) -> None:
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    expected = request.app[TOKEN_DIGEST]
    matches = hmac.compare_digest(_digest(presented.strip()), expected)
    if scheme.lower() != "bearer" or not presented or not matches:
        raise Refused(ErrorCode.UNAUTHENTICATED, "open the page at the URL `seif design` printed")


def _page_file(path: str) -> Handler:
    name, content_type = PAGE[path]
    body = resources.files("servers.design").joinpath("page", name).read_bytes()

    async def serve(_request: web.Request) -> web.Response:
        return web.Response(body=body, content_type=content_type, charset="utf-8")

    return serve


def design_app(
    project: Path, *, registry: Path | None, token: str, hosts: Iterable[str] = ()
) -> web.Application:
    """The workstation over ``project``; ``hosts`` are the ``Host`` values it answers (see
    :func:`allow_hosts`, which the runner calls once the port is known)."""
    if not token:
        raise ValueError("the Design workstation needs a local token")
    app = web.Application(middlewares=[secured, errors, guarded], client_max_size=MAX_BODY_BYTES)
    app[TOKEN] = token  # for the URL the runner prints; requests are checked against its digest
    app[TOKEN_DIGEST] = _digest(token)
    app[HOSTS] = {h.lower() for h in hosts}
    app[WORKSPACE] = Workspace(project=Path(project), registry=registry)
    app.router.add_get("/favicon.ico", no_icon)
    for path in PAGE:
        app.router.add_get(path, _page_file(path))
    actions.add_routes(app.router)
    connect.add_routes(app.router)
    return app


def allow_hosts(app: web.Application, host: str, port: int) -> None:
    """Answer requests naming ``host:port`` (and the loopback names, for a loopback bind)."""
    names = {host.lower(), *LOOPBACK_NAMES} if _loopback(host) else {host.lower()}
    app[HOSTS].update(f"{name}:{port}" for name in names)


def _loopback(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1", "[::1]") or host.startswith("127.")


def page_url(host: str, port: int, token: str) -> str:
    """The URL to open: the token in the fragment, which a browser never sends to a server."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    if host in ("0.0.0.0", "::", ""):
        shown = "127.0.0.1"
    return f"http://{shown}:{port}/#token={token}"


@asynccontextmanager
async def serving(app: web.Application, host: str, port: int) -> AsyncIterator[str]:
    """Serve ``app`` on ``host:port`` (0: any free port); yields the page's URL with its token
    once it accepts connections."""
    token = app[TOKEN]
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = GuardedSite(runner, host, port, Limits(max_connections=64))
        await site.start()
        bound = runner.addresses[0][1]
        allow_hosts(app, host, bound)
        if host in ("0.0.0.0", "::", ""):
            allow_hosts(app, "127.0.0.1", bound)
        yield page_url(host, bound, token)
    finally:
        await runner.cleanup()


async def run_design(
    project: Path, registry: Path | None, host: str, port: int, token: str, out: TextIO
) -> None:
    """Serve the workstation, print ``seif design listening on URL`` to ``out`` once it accepts
    requests, and return after SIGINT or SIGTERM."""
    app = design_app(project, registry=registry, token=token)
    async with serving(app, host, port) as url:
        out.write(f"seif design listening on {url}\n")
        out.flush()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
