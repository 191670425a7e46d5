"""The runtime's routes, in one table: method, path, credential, request body, answers by
status, and the error codes each can answer. The HTTP layer registers exactly these routes
(``servers.http.app``), and the OpenAPI document is generated from them
(:mod:`servers.wire.openapi`), each route's statuses derived from its error codes.

A route's errors are its own (:attr:`Route.refuses`), plus what its credential can answer
(:class:`Auth`) and, when it takes a body, what reading one can answer (:data:`BODY_ERRORS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from http import HTTPStatus
from typing import Any, Final

from servers.wire import answers as a
from servers.wire import requests as r
from servers.wire.errors import ErrorCode as E
from servers.wire.fields import ID_SCHEMA
from servers.wire.paging import DEFAULT_LIMIT, MAX_CURSOR, MAX_LIMIT

OK, ACCEPTED, UNAVAILABLE, CONFLICT = (
    HTTPStatus.OK,
    HTTPStatus.ACCEPTED,
    HTTPStatus.SERVICE_UNAVAILABLE,
    HTTPStatus.CONFLICT,
)
BODY_ERRORS: Final = (E.BAD_REQUEST, E.BODY_INCOMPLETE, E.BODY_TIMEOUT, E.TOO_LARGE)
"""What reading any request body can answer (``servers.http.bodies.read_json``)."""


class Auth(Enum):
    """Who may call a route."""

    NONE = ()
    BEARER = (E.UNAUTHENTICATED, E.TOKEN_INVALID)
    """An application's bearer token (any credential, or one with :attr:`Route.scope`): a
    static credential's, or an issuer's access token (docs/identity.md)."""
    APPROVAL = (E.UNAUTHENTICATED, E.BAD_REQUEST)
    """The runner approval credential in ``x-seif-tool-approval`` (and ``x-seif-approver``,
    which must be UTF-8 text)."""

    def __init__(self, *errors: E) -> None:
        self.errors = errors


class Text:
    """An answer in the Prometheus text format (``GET /metrics``), not JSON."""


@dataclass(frozen=True, slots=True)
class Query:
    """A query parameter a route reads (always optional): its name, its JSON Schema, what it
    says."""

    name: str
    schema: dict[str, Any]
    description: str


@dataclass(frozen=True, slots=True)
class Route:
    """One route: ``handler`` names its function in ``servers.http.app``."""

    method: str
    path: str
    handler: str
    summary: str
    answers: dict[HTTPStatus, Any]
    auth: Auth = Auth.NONE
    scope: str | None = None
    body: type | None = None
    refuses: tuple[E, ...] = ()
    query: tuple[Query, ...] = ()

    def errors(self) -> tuple[E, ...]:
        """Every error code the route can answer, each once."""
        scoped = (E.FORBIDDEN, E.INSUFFICIENT_SCOPE) if self.scope is not None else ()
        read = BODY_ERRORS if self.body is not None else ()
        return tuple(dict.fromkeys((*read, *self.auth.errors, *scoped, *self.refuses)))

    def parameters(self) -> tuple[str, ...]:
        """The names of its path parameters, in order."""
        return tuple(part[1:-1] for part in self.path.split("/") if part.startswith("{"))


def _approval(path: str, handler: str, summary: str, answer: type) -> Route:
    return Route(
        "POST",
        path,
        handler,
        summary,
        {OK: answer},
        auth=Auth.APPROVAL,
        body=r.DecisionRequest,
        refuses=(
            *(E.ARGUMENTS_INVALID, E.CONTEXT_UNKNOWN, E.CONTEXT_EXPIRED, E.TOOL_NOT_DISCLOSED),
            *(E.CALL_REJECTED, E.CALL_DECIDED, E.REQUESTER_GONE),
        ),
    )


APPROVE = "approve exactly one call (runner approval credential; `x-seif-approver` names the human)"
REJECT = (
    "reject one call: no longer approvable (runner approval credential; `x-seif-approver`"
    " names the human; the reason is never kept)"
)
BEARER = Auth.BEARER

ROUTES: Final = (
    Route("GET", "/v1/health", "health", "liveness", {OK: a.Health}),
    Route(
        "GET",
        "/v1/ready",
        "ready",
        "every bound descriptor matches its contract and every tool an objective requires is"
        " bound and ready (503 with each tool's state if not)",
        {OK: a.Ready, UNAVAILABLE: a.Ready},
    ),
    Route(
        "GET",
        "/v1/capabilities",
        "capabilities",
        "what this runtime supports (any credential)",
        {OK: a.Capabilities},
        auth=BEARER,
    ),
    Route("GET", "/v1/openapi.json", "openapi_doc", "this document", {OK: a.Document}),
    Route(
        "POST",
        "/v1/turns",
        "start_turn",
        "start a turn (context.resolve)",
        {OK: a.Turn},
        auth=BEARER,
        scope="context.resolve",
        refuses=(E.TOO_LARGE,),  # a declared body past the limit, though none is read
    ),
    Route(
        "POST",
        "/v1/turns/{turnId}/complete",
        "complete_turn",
        "report technical completion (context.resolve)",
        {OK: a.TurnCompleted},
        auth=BEARER,
        scope="context.resolve",
        body=r.CompleteTurnRequest,
        refuses=(E.TURN_UNKNOWN, E.TURN_COMPLETED),
    ),
    Route(
        "POST",
        "/v1/context/resolve",
        "resolve",
        "resolve an objective: messages, tool schemas, contracts (context.resolve)",
        {OK: a.Resolved, CONFLICT: a.Blocked},
        auth=BEARER,
        scope="context.resolve",
        body=r.ResolveRequest,
        refuses=(
            *(E.OBJECTIVE_FORBIDDEN, E.OBJECTIVE_UNKNOWN),
            *(E.TURN_REQUIRED, E.RESOLUTION_BLOCKED),
        ),
    ),
    Route(
        "POST",
        "/v1/context/tools/execute",
        "execute",
        "decide and dispatch one call; answers with a receipt (tools.execute)",
        {OK: a.Receipt},
        auth=BEARER,
        scope="tools.execute",
        body=r.ExecuteRequest,
        refuses=(E.TURN_REQUIRED,),
    ),
    _approval("/v1/context/tools/approve", "approve", APPROVE, a.Approval),
    _approval("/runtime/v1/context/tools/approve", "approve", APPROVE, a.Approval),
    _approval("/v1/context/tools/reject", "reject", REJECT, a.Rejection),
    _approval("/runtime/v1/context/tools/reject", "reject", REJECT, a.Rejection),
    Route(
        "GET",
        "/v1/context/tools/approvals/{contextRef}/{callId}",
        "approval_status",
        "the approval state of one call of a context this credential resolved (tools.execute)",
        {OK: a.ApprovalStatus},
        auth=BEARER,
        scope="tools.execute",
        refuses=(E.BAD_REQUEST, E.CONTEXT_UNKNOWN),
    ),
    Route(
        "GET",
        "/v1/context/tools/pending",
        "pending",
        "calls waiting for approval, a page at a time, oldest first: follow `next` until it is"
        " null; or the one call `contextRef` and `callId` name (runner approval credential)",
        {OK: a.PendingList},
        auth=Auth.APPROVAL,
        refuses=(E.BAD_REQUEST,),
        query=(
            Query(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT},
                "calls per page at most",
            ),
            Query(
                "after",
                {"type": "string", "pattern": f"^[A-Za-z0-9._~-]{{1,{MAX_CURSOR}}}$"},
                "the `next` of the page before",
            ),
            Query("contextRef", ID_SCHEMA, "with `callId`: only this call, if it is held"),
            Query("callId", ID_SCHEMA, "with `contextRef`: only this call, if it is held"),
        ),
    ),
    Route(
        "POST",
        "/v1/context/disclosures",
        "report",
        "report the schemas the application bound (context.resolve)",
        {ACCEPTED: a.Accepted},
        auth=BEARER,
        scope="context.resolve",
        body=r.ReportRequest,
        refuses=(E.CONTEXT_UNKNOWN,),
    ),
    Route(  # before the next: "head" is no contextRef
        "GET",
        "/v1/traces/head",
        "traces_head",
        "the last record of the decision log, its seq and digest, to anchor elsewhere"
        " (traces.read)",
        {OK: a.TraceHead},
        auth=BEARER,
        scope="traces.read",
    ),
    Route(
        "GET",
        "/v1/traces/{contextRef}",
        "traces",
        "trace events of one context (traces.read; an application's credential reads only the"
        " contexts it resolved)",
        {OK: a.Trace},
        auth=BEARER,
        scope="traces.read",
        refuses=(E.BAD_REQUEST, E.CONTEXT_UNKNOWN),
    ),
    Route(
        "GET",
        "/.well-known/oauth-protected-resource",
        "resource_metadata",
        "this runtime as an OAuth protected resource (RFC 9728): its `resource` (the issuers'"
        " `audience`), the issuers, the token scope values; no credential (404 without issuers)",
        {OK: a.ResourceMetadata},
        refuses=(E.NOT_FOUND,),
    ),
    Route(
        "GET",
        "/.well-known/oauth-protected-resource/mcp/{objective}",
        "mcp_resource_metadata",
        "the MCP endpoint of an objective as an OAuth protected resource (RFC 9728), what an MCP"
        " client discovers from its 401; no credential (404 without issuers, MCP or the"
        " objective)",
        {OK: a.ResourceMetadata},
        refuses=(E.NOT_FOUND, E.OBJECTIVE_NOT_MOUNTED),
    ),
    Route(
        "GET",
        "/metrics",
        "metrics",
        "Prometheus metrics (metrics.read)",
        {OK: Text},
        auth=BEARER,
        scope="metrics.read",
    ),
)
"""Every route of the runtime (the MCP mount adds ``/mcp/{objective}``: ``servers.mcp``)."""
