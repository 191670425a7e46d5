"""The approval server's aiohttp application: ``create_app(config) -> web.Application``.

Approvers authenticate with their own bearer tokens (every approver compared, in constant
time), or with an access token of an approvers' issuer (:mod:`servers.approval.approvers`);
approvers can see who they are signed in as, list, approve and reject (each only the calls
within its ``objectives`` and ``applications``), and nothing else: there is no route to
resolve, execute or read traces. The page and its files are served
with a strict Content-Security-Policy (no inline script or style, nothing from elsewhere) and
``X-Frame-Options: DENY``; every answer carries ``Cache-Control: no-store``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from importlib import resources

from aiohttp import web

from servers.approval.approvers import Approver, Gate
from servers.approval.desk import Clock, Desk, check_reason
from servers.approval.upstream import Upstream
from servers.config.approvers import Approvers
from servers.http.bodies import json_response, read_json
from servers.http.middleware import errors
from servers.http.pages import no_icon, secured
from servers.wire.approving import Me
from servers.wire.errors import ErrorCode, Refused
from servers.wire.limits import MAX_BODY_BYTES, MAX_ID_LENGTH
from servers.wire.paging import page_of

PAGE = {  # path -> (file of servers/approval/page, content type)
    "/": ("index.html", "text/html"),
    "/app.js": ("app.js", "text/javascript"),
    "/text.js": ("text.js", "text/javascript"),
    "/view.js": ("view.js", "text/javascript"),
    "/app.css": ("app.css", "text/css"),
}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def wall_clock() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class ApprovalConfig:
    """What the approval server runs with (see ``seif approval-server``)."""

    runtime_url: str
    approvers: Approvers
    runner_token: str = field(repr=False)
    clock: Clock = wall_clock
    timeout_s: float = 10.0


DESK: web.AppKey[Desk] = web.AppKey("desk", Desk)
GATE: web.AppKey[Gate] = web.AppKey("gate", Gate)


async def _approver(request: web.Request) -> Approver:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    return await request.app[GATE].approver(token if scheme.lower() == "bearer" else None)


async def health(_request: web.Request) -> web.Response:
    return json_response({"ok": True})


async def me(request: web.Request) -> web.Response:
    """Who the bearer token signs in: the page shows it."""
    approver = await _approver(request)
    body: Me = {"approver": approver.id, "name": approver.name}
    return json_response(body)


async def pending(request: web.Request) -> web.Response:
    approver = await _approver(request)
    body = await request.app[DESK].pending(page_of(request.query), approver.narrowing)
    return web.Response(body=body, content_type="application/json")


def _decision(kind: str) -> Handler:
    async def decide(request: web.Request) -> web.StreamResponse:
        approver = await _approver(request)
        reason = check_reason(await read_json(request))
        pending_id = request.match_info["pendingId"]
        if len(pending_id) > MAX_ID_LENGTH:
            raise Refused(ErrorCode.PENDING_UNKNOWN)
        desk = request.app[DESK]
        decided = await desk.decide(kind, pending_id, approver.id, reason, approver.narrowing)
        return json_response(decided)

    return decide


def _page_file(path: str) -> Handler:
    name, content_type = PAGE[path]
    body = resources.files("servers.approval").joinpath("page", name).read_bytes()

    async def serve(_request: web.Request) -> web.Response:
        return web.Response(body=body, content_type=content_type, charset="utf-8")

    return serve


def create_app(config: ApprovalConfig) -> web.Application:
    app = web.Application(middlewares=[secured, errors], client_max_size=MAX_BODY_BYTES)
    upstream = Upstream(config.runtime_url, config.runner_token, timeout_s=config.timeout_s)
    app[DESK] = Desk(upstream, config.runner_token, config.clock)
    app[GATE] = gate = Gate(config.approvers, config.runner_token, config.clock)

    async def closing(_app: web.Application) -> AsyncIterator[None]:
        await gate.start()  # each approvers' issuer's key set fetched once, bounded
        try:
            yield
        finally:
            await upstream.close()
            await gate.aclose()

    app.cleanup_ctx.append(closing)
    app.router.add_get("/v1/health", health)
    app.router.add_get("/favicon.ico", no_icon)
    app.router.add_get("/v1/me", me)
    app.router.add_get("/v1/pending", pending)
    app.router.add_post("/v1/pending/{pendingId}/approve", _decision("approve"))
    app.router.add_post("/v1/pending/{pendingId}/reject", _decision("reject"))
    for path in PAGE:
        app.router.add_get(path, _page_file(path))
    return app
