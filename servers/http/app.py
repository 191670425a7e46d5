"""The runtime's aiohttp application: ``create_app(prepared) -> web.Application``.

Handlers authenticate, decode, ask the :class:`~servers.runtime.service.Runtime`, encode.
There is no policy logic here.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from servers.config.files import Credential, Credentials
from servers.executor.client import ExecutorClient, new_transport
from servers.http import openapi, wire
from servers.http.middleware import errors
from servers.http.scrape import METRICS, counted, scrape
from servers.http.wire import json_response
from servers.runtime import paging
from servers.runtime.errors import HttpError
from servers.runtime.events import iso
from servers.runtime.metrics import Metrics
from servers.runtime.paging import CursorInvalid
from servers.runtime.peers import PeerWaits
from servers.runtime.pending import PendingCalls
from servers.runtime.service import Runtime
from servers.runtime.shadow import ShadowWorker
from servers.runtime.startup import Prepared
from servers.runtime.turns import StoredTurns
from servers.runtime.values import alone
from servers.support import bounded

LOG = logging.getLogger("seif.runtime")
RUNTIME: web.AppKey[Runtime] = web.AppKey("runtime", Runtime)
PREPARED: web.AppKey[Prepared] = web.AppKey("prepared", Prepared)
TURN_TTL_MS = 15 * 60 * 1000
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(slots=True)
class Turn:
    credential: str
    expires_at: int
    outcome: str | None = None


TURNS: web.AppKey[bounded.Owned[str, Turn]] = web.AppKey("turns", bounded.Owned)
STORED_TURNS: web.AppKey[StoredTurns | None] = web.AppKey("stored_turns")
"""The turns of replicas on a shared store (``servers.runtime.turns``), used instead of
:data:`TURNS` when set."""
MCP_REVISIONS: web.AppKey[tuple[str, ...]] = web.AppKey("mcp_revisions", tuple)
"""The MCP revisions served at ``/mcp/{objective}`` (``servers.mcp`` mounts them), if any."""
APPROVAL: web.AppKey[Credentials] = web.AppKey("approval", Credentials)
"""The runner approval credential alone, compared as application tokens are."""
MAX_TURNS = 10_000
"""Turns held in memory at most, a last resort: the credential holding the most loses its
oldest (finished, that is completed or expired, ones are dropped first)."""
MAX_TURNS_PER_CREDENTIAL = 1_000
"""Turns of one credential held at most: starting one more drops that credential's oldest."""


def bearer_credential(request: web.Request, scope: str | None) -> Credential:
    header = request.headers.get("Authorization", "")
    token = header[7:] if header.startswith("Bearer ") else None
    found = request.app[PREPARED].credentials.authenticate(token)
    if found is None:
        raise HttpError(401, "UNAUTHENTICATED", "a valid bearer token is required")
    if scope is not None and scope not in found.scopes:
        raise HttpError(403, "FORBIDDEN", f"the credential lacks the `{scope}` scope")
    return found


def _approver(request: web.Request) -> str:
    """The approval credential only, never a bearer token; the approver id is trusted only
    from that credential."""
    given = request.headers.get("x-seif-tool-approval", "")
    # keyed digests of equal length compared: neither the token nor its length shows in timing
    # (a header value that is not UTF-8 arrives surrogate-escaped and is hashed, never raised)
    if request.app[APPROVAL].authenticate(given) is None:
        raise HttpError(
            401,
            "UNAUTHENTICATED",
            "the runner approval credential is required in `x-seif-tool-approval`",
        )
    approver = request.headers.get("x-seif-approver", "").strip()
    try:
        approver.encode("utf-8")  # it is stored and logged: text only, never undecodable bytes
    except UnicodeEncodeError:
        raise HttpError(400, "BAD_REQUEST", "`x-seif-approver` is not UTF-8 text") from None
    return approver[:128] if approver else "runtime-approval-token"


def _live_turn(request: web.Request, credential: Credential, turn_id: str | None) -> str | None:
    runtime = request.app[RUNTIME]
    if turn_id is None:
        if request.app[PREPARED].require_turn:
            raise HttpError(403, "TURN_REQUIRED", "start a turn and pass its `turnId`")
        return None
    turn = _turn(request, turn_id)
    if (
        turn is None
        or turn.credential != credential.id
        or turn.outcome is not None
        or runtime.clock() >= turn.expires_at
    ):
        raise HttpError(403, "TURN_REQUIRED", "`turnId` is not a live turn of this credential")
    return turn_id


def _turn(request: web.Request, turn_id: str) -> Turn | None:
    stored = request.app[STORED_TURNS]
    if stored is None:
        return request.app[TURNS].get(turn_id)
    row = stored.get(turn_id)
    return Turn(row.credential_id, row.expires_at, row.outcome) if row is not None else None


async def health(_request: web.Request) -> web.Response:
    return json_response({"status": "ok"})


async def ready(request: web.Request) -> web.Response:
    tools = await request.app[RUNTIME].readiness()
    ready = all(v == "READY" for v in tools.values())
    body: dict[str, Any] = {"ready": ready, "tools": tools}
    replica = request.app[PREPARED].replica
    if replica is not None:  # a replica whose lease lapsed claims nothing: send it nothing
        body["store"] = replica.store_state()
        body["ready"] = ready = ready and body["store"] == "READY"
    return json_response(body, status=200 if ready else 503)


async def capabilities(request: web.Request) -> web.Response:
    bearer_credential(request, None)
    revisions: tuple[str, ...] = request.app[MCP_REVISIONS]
    return json_response(openapi.capabilities(revisions))


async def openapi_doc(_request: web.Request) -> web.Response:
    # served without a credential: the generic document, never the build's objective ids
    return json_response(openapi.document())


async def start_turn(request: web.Request) -> web.Response:
    credential = bearer_credential(request, "context.resolve")
    turn_id = "turn_" + secrets.token_urlsafe(18)
    now = request.app[RUNTIME].clock()
    expires = now + TURN_TTL_MS
    stored = request.app[STORED_TURNS]
    if stored is not None:
        stored.start(turn_id, credential.id, expires, MAX_TURNS_PER_CREDENTIAL)
        return json_response({"turnId": turn_id, "expiresAt": iso(expires)})
    request.app[TURNS].admit(  # finished turns go first, then this credential's oldest
        turn_id,
        Turn(credential.id, expires),
        owner=credential.id,
        limit=MAX_TURNS,
        per_owner=MAX_TURNS_PER_CREDENTIAL,
        finished=lambda turn: turn.outcome is not None or now >= turn.expires_at,
    )
    return json_response({"turnId": turn_id, "expiresAt": iso(expires)})


async def complete_turn(request: web.Request) -> web.Response:
    credential = bearer_credential(request, "context.resolve")
    body = wire.fields(await wire.read_json(request), wire.COMPLETE_TURN)
    if body["outcome"] not in ("COMPLETED", "FAILED"):
        raise wire.bad_request("`outcome` must be `COMPLETED` or `FAILED`")
    turn_id = request.match_info["turnId"]
    turn = _turn(request, turn_id)
    if turn is None or turn.credential != credential.id:
        raise HttpError(404, "TURN_UNKNOWN", "no such turn")
    stored = request.app[STORED_TURNS]
    if turn.outcome is not None or (stored and not stored.complete(turn_id, body["outcome"])):
        raise HttpError(409, "TURN_COMPLETED", "the turn was completed already")
    turn.outcome = body["outcome"]
    return json_response({"turnId": request.match_info["turnId"], "outcome": turn.outcome})


async def resolve(request: web.Request) -> web.Response:
    credential = bearer_credential(request, "context.resolve")
    body = wire.fields(await wire.read_json(request), wire.RESOLVE)
    turn = _live_turn(request, credential, body["turnId"])
    answer = await request.app[RUNTIME].resolve(body, turn, credential.id)
    return web.Response(body=answer, content_type="application/json")


async def execute(request: web.Request) -> web.Response:
    credential = bearer_credential(request, "tools.execute")
    body = wire.fields(await wire.read_json(request), wire.EXECUTE)
    _live_turn(request, credential, body["turnId"])
    return json_response(await request.app[RUNTIME].execute(body, credential.id))


async def approve(request: web.Request) -> web.Response:
    approver = _approver(request)
    body = wire.fields(await wire.read_json(request), wire.APPROVE)
    return json_response(await request.app[RUNTIME].approve(body, approver))


async def reject(request: web.Request) -> web.Response:
    approver = _approver(request)
    body = wire.fields(await wire.read_json(request), wire.REJECT)
    return json_response(await request.app[RUNTIME].reject(body, approver))


async def approval_status(request: web.Request) -> web.Response:
    credential = bearer_credential(request, "tools.execute")
    ref, call_id = request.match_info["contextRef"], request.match_info["callId"]
    for name, value in (("contextRef", ref), ("callId", call_id)):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise wire.bad_request(f"`{name}` is not Unicode text") from None
        if len(value) > wire.MAX_ID_LENGTH:
            raise HttpError(404, "CONTEXT_UNKNOWN", "no such context")
    status = await request.app[RUNTIME].approval_status(ref, call_id, credential.id)
    return json_response(status)


async def pending(request: web.Request) -> web.Response:
    """A page of the calls held for approval (``servers.runtime.paging``), or the one call
    ``?contextRef=&callId=`` name (an empty page when it is not held)."""
    _approver(request)
    page, call = wire.page_of(request.query), wire.call_of(request.query)
    runtime = request.app[RUNTIME]
    try:
        listed = runtime.pending_one(*call) if call else runtime.pending_page(page)
    except CursorInvalid:
        raise wire.bad_request("`after` must be the `next` of a page of this list") from None
    return web.Response(body=paging.body(listed), content_type="application/json")


async def report(request: web.Request) -> web.Response:
    credential = bearer_credential(request, "context.resolve")
    body = wire.fields(await wire.read_json(request), wire.REPORT)
    await request.app[RUNTIME].report(body, credential.id)
    return json_response({"accepted": True}, status=202)


APPLICATION_SCOPES = frozenset({"context.resolve", "tools.execute"})


async def traces(request: web.Request) -> web.Response:
    """The trace of one context. An application's credential (one that may resolve or
    execute) reads only the contexts it resolved, any other is 404 ``CONTEXT_UNKNOWN``; a
    credential holding ``traces.read`` alone (an operator's, a researcher's) reads any."""
    credential = bearer_credential(request, "traces.read")
    ref = request.match_info["contextRef"]
    try:
        head = b'{"contextRef":' + wire.json_bytes(ref) + b',"events":['
    except ValueError:  # JsonError: not Unicode text (no record can name it)
        raise wire.bad_request("`contextRef` is not Unicode text") from None
    if credential.scopes & APPLICATION_SCOPES and (
        len(ref) > wire.MAX_ID_LENGTH or request.app[RUNTIME].owned_row(ref, credential.id) is None
    ):
        raise HttpError(404, "CONTEXT_UNKNOWN", "no such context")

    def render(events: list[dict[str, object]]) -> bytes:
        # {"contextRef", "events"} one event at a time: no one call holds the GIL for long
        return head + b",".join(wire.json_bytes(event) for event in events) + b"]}"

    # read from the log's index, and encoded, in the log's reader thread: the loop only waits
    body = await request.app[PREPARED].log.trace_async(ref, render)
    return web.Response(body=body, content_type="application/json")


async def traces_head(request: web.Request) -> web.Response:
    """The last record of the decision log: ``{"seq", "digest"}`` (both null for an empty log),
    for an operator to anchor elsewhere (any credential holding ``traces.read``)."""
    bearer_credential(request, "traces.read")
    head = await request.app[PREPARED].log.head_async()
    return json_response(head.to_json())


async def _resources(app: web.Application) -> AsyncIterator[None]:
    prepared = app[PREPARED]
    transport = new_transport()
    # opened, checked and reconciled by `prepare`; a write's record is logged by the store's
    # writer, after its commit
    store, log = prepared.store, prepared.log
    replica = prepared.replica  # of a shared store, or None
    pending = (
        replica.pending_calls(prepared.clock, prepared.build.project.approval_tools)
        if replica is not None
        else None
    )
    app[RUNTIME] = Runtime(
        build=prepared.build,
        bindings=prepared.bindings,
        store=store,
        log=log,
        client=ExecutorClient(transport),
        fingerprint_key=prepared.fingerprint_key,
        clock=prepared.clock,
        pending=pending if pending is not None else PendingCalls(),
        peers=PeerWaits(store) if pending is not None else None,
        exclusive=replica.exclusive if replica is not None else alone,
        metrics=app[METRICS],
        shadow=_shadow_of(prepared, app[METRICS]),
    )
    runtime = app[RUNTIME]
    runtime.start_shadow()
    app[METRICS].watch(lambda: len(runtime.pending), prepared.clock)
    store.observe_commits(app[METRICS].commit_seconds.observe)
    log.observe_fsyncs(app[METRICS].fsync_seconds.observe)
    await app[RUNTIME].log_interrupted(store.interrupted)
    lease = asyncio.ensure_future(replica.keep_lease(prepared.clock)) if replica else None
    try:
        yield
    finally:
        await app[RUNTIME].drain()
        await transport.close()
        if lease is not None:
            lease.cancel()
            await asyncio.gather(lease, return_exceptions=True)
        if replica is not None:
            await replica.aclose()
        else:
            store.close()  # its last batches still log
            log.close()


def _shadow_of(prepared: Prepared, metrics: Metrics) -> ShadowWorker | None:
    """The worker comparing the candidate of ``--shadow``, if one was loaded."""
    if prepared.shadow is None:
        return None
    return ShadowWorker(prepared.shadow, metrics.shadow(), prepared.shadow_backlog)


def create_app(prepared: Prepared) -> web.Application:
    app = web.Application(middlewares=[counted, errors], client_max_size=wire.MAX_BODY_BYTES)
    app[METRICS] = Metrics()
    app[PREPARED] = prepared
    app[TURNS] = bounded.Owned()
    app[STORED_TURNS] = prepared.replica.turns() if prepared.replica is not None else None
    app[MCP_REVISIONS] = ()  # none unless `servers.mcp` is mounted
    token = prepared.approval_token
    app[APPROVAL] = Credentials(
        [Credential("runner-approval", frozenset(), token)] if token else []
    )
    app.cleanup_ctx.append(_resources)
    app.router.add_get("/v1/health", health)
    app.router.add_get("/v1/ready", ready)
    app.router.add_get("/v1/capabilities", capabilities)
    app.router.add_get("/v1/openapi.json", openapi_doc)
    app.router.add_post("/v1/turns", start_turn)
    app.router.add_post("/v1/turns/{turnId}/complete", complete_turn)
    app.router.add_post("/v1/context/resolve", resolve)
    app.router.add_post("/v1/context/tools/execute", execute)
    app.router.add_post("/v1/context/tools/approve", approve)
    app.router.add_post("/runtime/v1/context/tools/approve", approve)
    app.router.add_get("/v1/context/tools/pending", pending)
    app.router.add_post("/v1/context/tools/reject", reject)
    app.router.add_post("/runtime/v1/context/tools/reject", reject)
    app.router.add_get("/v1/context/tools/approvals/{contextRef}/{callId}", approval_status)
    app.router.add_post("/v1/context/disclosures", report)
    app.router.add_get("/v1/traces/head", traces_head)  # before: "head" is no contextRef
    app.router.add_get("/v1/traces/{contextRef}", traces)
    app.router.add_get("/metrics", scrape(bearer_credential))
    return app
