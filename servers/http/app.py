"""The runtime's aiohttp application: ``create_app(prepared) -> web.Application``.

Handlers authenticate, decode, ask the :class:`~servers.runtime.service.Runtime`, encode.
There is no policy logic here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from http import HTTPStatus

from aiohttp import web

from servers.config.files import Credential, Credentials
from servers.http import bodies
from servers.http.bodies import json_response
from servers.http.middleware import errors
from servers.http.scrape import METRICS, counted, scrape
from servers.identity import Authenticated, Identities, ProtectedResource, TokenRefused
from servers.runtime.held import HeldCalls
from servers.runtime.metrics import Metrics
from servers.runtime.readiness import blocking
from servers.runtime.service import Runtime
from servers.runtime.shadow import ShadowWorker
from servers.runtime.startup import Prepared
from servers.upstream import open_executors
from servers.wire import answers, openapi, paging
from servers.wire.capabilities import capabilities as capabilities_of
from servers.wire.errors import ErrorCode, Refused
from servers.wire.fields import decode
from servers.wire.limits import MAX_BODY_BYTES, MAX_ID_LENGTH
from servers.wire.paging import CursorInvalid
from servers.wire.requests import (
    CompleteTurnRequest,
    DecisionRequest,
    ExecuteRequest,
    ReportRequest,
    ResolveRequest,
)
from servers.wire.routes import ROUTES

LOG = logging.getLogger("seif.runtime")
RUNTIME: web.AppKey[Runtime] = web.AppKey("runtime", Runtime)
PREPARED: web.AppKey[Prepared] = web.AppKey("prepared", Prepared)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MCP_REVISIONS: web.AppKey[tuple[str, ...]] = web.AppKey("mcp_revisions", tuple)
"""The MCP revisions served at ``/mcp/{objective}`` (``servers.mcp`` mounts them), if any."""
APPROVAL: web.AppKey[Credentials] = web.AppKey("approval", Credentials)
"""The runner approval credential alone, compared as application tokens are."""
IDENTITIES: web.AppKey[Identities] = web.AppKey("identities", Identities)
"""The credentials file's static credentials and issuers (``servers.identity``)."""
AUTHENTICATED: web.RequestKey[Authenticated] = web.RequestKey("authenticated", Authenticated)
"""Who an authenticated request is: its scopes and its principal."""
CHALLENGE_HEADER = "WWW-Authenticate"
CHALLENGE = {CHALLENGE_HEADER: 'Bearer realm="seif"'}
INVALID_TOKEN = {CHALLENGE_HEADER: 'Bearer error="invalid_token"'}


async def bearer(request: web.Request, *scopes: str, resource: str | None = None) -> Authenticated:
    """Who the request's bearer token is, holding every one of ``scopes``: the one place the
    runtime's routes and the MCP mount authenticate and check scopes. 401 ``UNAUTHENTICATED``
    (no token, or none this runtime knows) and ``TOKEN_INVALID`` (an issuer's token failing a
    check), each with ``WWW-Authenticate``; 403 ``FORBIDDEN`` for a static credential without
    a scope, ``INSUFFICIENT_SCOPE`` for an issuer's token (naming the token scope values that
    would grant it). The caller is kept on the request (:data:`AUTHENTICATED`).

    ``resource``: the protected resource the route is, as a path under the issuers' audience
    (the MCP mount's ``mcp/{objective}``; empty: the runtime as a whole). A token for it is
    accepted, and with issuers every challenge names its metadata (``resource_metadata``,
    RFC 9728) and the token scope values it needs (``scope``); a token presented and refused,
    whatever it was, is then ``error="invalid_token"`` (RFC 6750)."""
    identities = request.app[IDENTITIES]
    header = request.headers.get("Authorization", "")
    token = header[7:] if header.startswith("Bearer ") else None
    try:
        found = await identities.authenticate(token, resource=resource)
    except TokenRefused:  # logged with the failed check by `Identities`
        raise Refused(
            ErrorCode.TOKEN_INVALID,
            headers=_challenge('error="invalid_token"', _protected(identities, resource, scopes)),
        ) from None
    if found is None:
        found_resource = _protected(identities, resource, scopes)
        if found_resource is None:
            raise Refused(ErrorCode.UNAUTHENTICATED, headers=CHALLENGE)
        error = 'error="invalid_token"' if token else None
        raise Refused(ErrorCode.UNAUTHENTICATED, headers=_challenge(error, found_resource))
    missing = [s for s in scopes if s not in found.scopes]
    if missing and found.granting is None:
        raise Refused(ErrorCode.FORBIDDEN, f"the credential lacks the `{missing[0]}` scope")
    if missing:
        assert found.granting is not None
        values = [v for s in missing for v in found.granting.get(s, ())]
        error = 'error="insufficient_scope"'
        if values:
            error += f', scope="{" ".join(values)}"'
        message = f"the token lacks the `{missing[0]}` scope"
        challenge = _challenge(error, _protected(identities, resource, scopes), scope=False)
        raise Refused(ErrorCode.INSUFFICIENT_SCOPE, message, headers=challenge)
    request[AUTHENTICATED] = found
    return found


def _protected(
    identities: Identities, resource: str | None, scopes: tuple[str, ...]
) -> ProtectedResource | None:
    """The metadata a challenge names: none for a route that is no resource of its own."""
    return None if resource is None else identities.protected(resource, scopes)


def _challenge(
    error: str | None, resource: ProtectedResource | None, *, scope: bool = True
) -> dict[str, str]:
    """``WWW-Authenticate``: ``Bearer`` with ``error`` (``error="..."``, and its ``scope``), then
    the resource's metadata URL and (``scope``) the token scope values it needs."""
    params = [error] if error else []
    where = resource.metadata_url if resource is not None else None
    if resource is not None and where is not None:
        params.append(f'resource_metadata="{where}"')
    if resource is not None and scope and resource.scopes_supported:
        params.append(f'scope="{" ".join(resource.scopes_supported)}"')
    return {CHALLENGE_HEADER: "Bearer " + ", ".join(params) if params else 'Bearer realm="seif"'}


def resolvable(credential: Authenticated, objective: str) -> None:
    """403 ``OBJECTIVE_FORBIDDEN`` unless ``credential`` may resolve ``objective`` (its
    ``objectives``): the one place that rule is checked, for ``POST /v1/context/resolve`` and
    the MCP endpoint ``/mcp/{objective}`` alike, before anything is resolved or opened. An
    objective the build does not declare is forbidden too, to a credential narrowed to others
    (it learns nothing of what the build declares)."""
    if not credential.may_resolve(objective):
        raise Refused(ErrorCode.OBJECTIVE_FORBIDDEN)


def _approver(request: web.Request) -> str:
    """The approval credential only, never a bearer token; the approver id is trusted only
    from that credential."""
    given = request.headers.get("x-seif-tool-approval", "")
    # keyed digests of equal length compared: neither the token nor its length shows in timing
    # (a header value that is not UTF-8 arrives surrogate-escaped and is hashed, never raised)
    if request.app[APPROVAL].authenticate(given) is None:
        raise Refused(
            ErrorCode.UNAUTHENTICATED,
            "the runner approval credential is required in `x-seif-tool-approval`",
        )
    approver = request.headers.get("x-seif-approver", "").strip()
    try:
        approver.encode("utf-8")  # it is stored and logged: text only, never undecodable bytes
    except UnicodeEncodeError:
        raise Refused(ErrorCode.BAD_REQUEST, "`x-seif-approver` is not UTF-8 text") from None
    return approver[:128] if approver else "runtime-approval-token"


def _live_turn(request: web.Request, credential: Authenticated, turn_id: str | None) -> str | None:
    return request.app[RUNTIME].turns.live(credential.id, turn_id)


async def health(_request: web.Request) -> web.Response:
    body: answers.Health = {"status": "ok"}
    return json_response(body)


async def ready(request: web.Request) -> web.Response:
    contexts = request.app[RUNTIME].contexts
    found = await contexts.readiness()
    tools = found.states
    ready = all(v == "READY" for v in tools.values())
    body: answers.Ready = {"ready": ready, "tools": tools}
    if found.reasons:  # UPSTREAM_CHANGED, or what an unavailable backend's observation says
        body["reasons"] = found.reasons
    blocked = blocking(contexts.ir, tools)
    if blocked:  # each required tool that blocks resolutions, named with its objectives
        body["blocking"] = blocked
    store = request.app[PREPARED].backend.state()
    if store is not None:  # a replica whose lease lapsed claims nothing: send it nothing
        body["store"] = store
        body["ready"] = ready = ready and store == "READY"
    return json_response(body, status=HTTPStatus.OK if ready else HTTPStatus.SERVICE_UNAVAILABLE)


async def capabilities(request: web.Request) -> web.Response:
    await bearer(request)
    revisions: tuple[str, ...] = request.app[MCP_REVISIONS]
    return json_response(capabilities_of(revisions))


MCP_SCOPES = ("context.resolve", "tools.execute")
"""What a credential needs at the MCP endpoint of an objective (``servers.mcp``)."""
METADATA_HEADERS = {"Access-Control-Allow-Origin": "*"}
"""Public metadata: a browser-based MCP client on any origin may read it (no credential)."""


async def resource_metadata(request: web.Request) -> web.Response:
    """This runtime as an OAuth protected resource (RFC 9728); 404 without issuers."""
    return _metadata(request, "", None)


async def mcp_resource_metadata(request: web.Request) -> web.Response:
    """The MCP endpoint of an objective as an OAuth protected resource (RFC 9728): what an MCP
    client discovers from the endpoint's 401. 404 without issuers, MCP or the objective."""
    if not request.app[MCP_REVISIONS]:
        raise Refused(ErrorCode.NOT_FOUND)
    objective = request.match_info["objective"]
    if objective not in request.app[PREPARED].build.project.objective_by_id:
        raise Refused(ErrorCode.OBJECTIVE_NOT_MOUNTED)
    return _metadata(request, f"mcp/{objective}", MCP_SCOPES)


def _metadata(request: web.Request, path: str, scopes: tuple[str, ...] | None) -> web.Response:
    found = request.app[IDENTITIES].protected(path, scopes)
    if found is None:
        raise Refused(ErrorCode.NOT_FOUND)
    answer = json_response(found.to_json())
    answer.headers.update(METADATA_HEADERS)
    return answer


async def openapi_doc(_request: web.Request) -> web.Response:
    # served without a credential: the generic document, never the build's objective ids
    return json_response(openapi.document())


async def start_turn(request: web.Request) -> web.Response:
    credential = await bearer(request, "context.resolve")
    return json_response(request.app[RUNTIME].turns.start(credential.id))


async def complete_turn(request: web.Request) -> web.Response:
    credential = await bearer(request, "context.resolve")
    asked = decode(CompleteTurnRequest, await bodies.read_json(request))
    turns, turn_id = request.app[RUNTIME].turns, request.match_info["turnId"]
    return json_response(turns.complete(credential.id, turn_id, asked.outcome))


async def resolve(request: web.Request) -> web.Response:
    credential = await bearer(request, "context.resolve")
    asked = decode(ResolveRequest, await bodies.read_json(request))
    resolvable(credential, asked.objective)
    turn = _live_turn(request, credential, asked.turn_id)
    answer = await request.app[RUNTIME].contexts.resolve(asked, turn, credential)
    return web.Response(body=answer, content_type="application/json")


async def execute(request: web.Request) -> web.Response:
    credential = await bearer(request, "tools.execute")
    asked = decode(ExecuteRequest, await bodies.read_json(request))
    _live_turn(request, credential, asked.turn_id)
    return json_response(await request.app[RUNTIME].dispatcher.execute(asked, credential))


async def approve(request: web.Request) -> web.Response:
    approver = _approver(request)
    asked = decode(DecisionRequest, await bodies.read_json(request))
    return json_response(await request.app[RUNTIME].approvals.approve(asked, approver))


async def reject(request: web.Request) -> web.Response:
    approver = _approver(request)
    asked = decode(DecisionRequest, await bodies.read_json(request))
    return json_response(await request.app[RUNTIME].approvals.reject(asked, approver))


async def approval_status(request: web.Request) -> web.Response:
    credential = await bearer(request, "tools.execute")
    ref, call_id = request.match_info["contextRef"], request.match_info["callId"]
    for name, value in (("contextRef", ref), ("callId", call_id)):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise Refused(ErrorCode.BAD_REQUEST, f"`{name}` is not Unicode text") from None
        if len(value) > MAX_ID_LENGTH:
            raise Refused(ErrorCode.CONTEXT_UNKNOWN)
    status = await request.app[RUNTIME].approvals.approval_status(ref, call_id, credential)
    return json_response(status)


async def pending(request: web.Request) -> web.Response:
    """A page of the calls held for approval (``servers.wire.paging``), or the one call
    ``?contextRef=&callId=`` name (an empty page when it is not held)."""
    _approver(request)
    page, call = paging.page_of(request.query), paging.call_of(request.query)
    approvals = request.app[RUNTIME].approvals
    try:
        listed = approvals.pending_one(*call) if call else approvals.pending_page(page)
    except CursorInvalid:
        message = "`after` must be the `next` of a page of this list"
        raise Refused(ErrorCode.BAD_REQUEST, message) from None
    return web.Response(body=paging.body(listed), content_type="application/json")


async def report(request: web.Request) -> web.Response:
    credential = await bearer(request, "context.resolve")
    asked = decode(ReportRequest, await bodies.read_json(request))
    await request.app[RUNTIME].contexts.report(asked, credential)
    body: answers.Accepted = {"accepted": True}
    return json_response(body, status=HTTPStatus.ACCEPTED)


APPLICATION_SCOPES = frozenset({"context.resolve", "tools.execute"})


async def traces(request: web.Request) -> web.Response:
    """The trace of one context. An application's credential (one that may resolve or
    execute) reads only the contexts it resolved, any other is 404 ``CONTEXT_UNKNOWN``; a
    credential holding ``traces.read`` alone (an operator's, a researcher's) reads any."""
    credential = await bearer(request, "traces.read")
    ref = request.match_info["contextRef"]
    try:
        head = b'{"contextRef":' + bodies.json_bytes(ref) + b',"events":['
    except ValueError:  # JsonError: not Unicode text (no record can name it)
        raise Refused(ErrorCode.BAD_REQUEST, "`contextRef` is not Unicode text") from None
    if credential.scopes & APPLICATION_SCOPES and (
        len(ref) > MAX_ID_LENGTH or request.app[RUNTIME].contexts.owned(ref, credential) is None
    ):
        raise Refused(ErrorCode.CONTEXT_UNKNOWN)

    def render(events: list[dict[str, object]]) -> bytes:
        # {"contextRef", "events"} one event at a time: no one call holds the GIL for long
        return head + b",".join(bodies.json_bytes(event) for event in events) + b"]}"

    # read from the log's index, and encoded, in the log's reader thread: the loop only waits
    body = await request.app[PREPARED].log.trace_async(ref, render)
    return web.Response(body=body, content_type="application/json")


async def traces_head(request: web.Request) -> web.Response:
    """The last record of the decision log: ``{"seq", "digest"}`` (both null for an empty log),
    for an operator to anchor elsewhere (any credential holding ``traces.read``)."""
    await bearer(request, "traces.read")
    head = await request.app[PREPARED].log.head_async()
    return json_response(head.to_json())


async def _resources(app: web.Application) -> AsyncIterator[None]:
    prepared = app[PREPARED]
    app[IDENTITIES] = identities = Identities(prepared.credentials, prepared.clock)
    await identities.start()  # each issuer's key set fetched once, bounded
    backend = prepared.backend  # opened, checked and reconciled by `prepare`
    executors = open_executors(
        prepared.bindings, prepared.build.project, stderr_dir=prepared.upstream_stderr
    )
    app[RUNTIME] = runtime = Runtime(
        build=prepared.build,
        bindings=prepared.bindings,
        backend=backend,
        executors=executors,
        clock=prepared.clock,
        held=HeldCalls(
            store=backend.held,
            clock=prepared.clock,
            approval_tools=prepared.build.project.approval_tools,
        ),
        require_turn=prepared.require_turn,
        metrics=app[METRICS],
        shadow=_shadow_of(prepared, app[METRICS]),
    )
    app[METRICS].watch(lambda: len(runtime.held), prepared.clock)
    backend.store.observe_commits(app[METRICS].commit_seconds.observe)
    backend.log.observe_fsyncs(app[METRICS].fsync_seconds.observe)
    await runtime.start()
    upkeep = asyncio.ensure_future(backend.upkeep(prepared.clock))
    try:
        yield
    finally:
        await runtime.drain()
        await executors.aclose()
        upkeep.cancel()
        await asyncio.gather(upkeep, return_exceptions=True)
        await backend.aclose()
        await identities.aclose()


def _shadow_of(prepared: Prepared, metrics: Metrics) -> ShadowWorker | None:
    """The worker comparing the candidate of ``--shadow``, if one was loaded."""
    if prepared.shadow is None:
        return None
    return ShadowWorker(prepared.shadow, metrics.shadow(), prepared.shadow_backlog)


def create_app(prepared: Prepared) -> web.Application:
    app = web.Application(middlewares=[counted, errors], client_max_size=MAX_BODY_BYTES)
    app[METRICS] = Metrics()
    app[PREPARED] = prepared
    app[MCP_REVISIONS] = ()  # none unless `servers.mcp` is mounted
    token = prepared.approval_token
    app[APPROVAL] = Credentials(
        [Credential("runner-approval", frozenset(), token)] if token else []
    )
    app.cleanup_ctx.append(_resources)
    handlers = HANDLERS | {"metrics": scrape(bearer)}
    for route in ROUTES:  # the route table of servers.wire, in its order; a GET takes HEAD
        add = {"GET": app.router.add_get, "POST": app.router.add_post}[route.method]
        add(route.path, handlers[route.handler])
    return app


HANDLERS: dict[str, Handler] = {
    "health": health,
    "ready": ready,
    "capabilities": capabilities,
    "openapi_doc": openapi_doc,
    "start_turn": start_turn,
    "complete_turn": complete_turn,
    "resolve": resolve,
    "execute": execute,
    "approve": approve,
    "reject": reject,
    "approval_status": approval_status,
    "pending": pending,
    "report": report,
    "traces_head": traces_head,
    "traces": traces,
    "resource_metadata": resource_metadata,
    "mcp_resource_metadata": mcp_resource_metadata,
}
"""The handler of each route of :data:`servers.wire.routes.ROUTES`, by name (``metrics``:
:func:`servers.http.scrape.scrape`)."""
