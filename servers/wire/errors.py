"""Every error a seif HTTP server answers: its wire code, its HTTP status, its default message.

A refusal is raised as :class:`Refused`, which carries an :class:`ErrorCode` (and a message, and
any extra fields of its answer), never an HTTP status: the status is looked up here, by the HTTP
layer's one error renderer (``servers.http.bodies.error_response``), which answers
``{"error": {"code", "message"}, ...extra}``.

One entry is one kind of refusal. Two entries may share a wire code when two servers answer it
with different statuses (``OBJECTIVE_UNKNOWN``: 400 from ``POST /v1/context/resolve``, 404 from
the MCP mount, where the objective names the route). The Design workstation also answers the
code of a diagnostic (the compiler's or the configuration's vocabulary) under :attr:`REFUSED`.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum, unique
from http import HTTPStatus
from typing import Any, Final

from servers.wire.limits import MAX_BODY_BYTES

S = HTTPStatus


@unique
class ErrorCode(Enum):
    """An error answer: ``code`` on the wire (the member's name unless given), ``status``,
    and the one-line ``message`` used when the refusal gives none."""

    code: str
    status: HTTPStatus
    message: str

    def __init__(self, status: HTTPStatus, message: str, code: str | None = None) -> None:
        self.status = status
        self.message = message
        self.code = code or self.name

    # -- the HTTP layer: every route (servers.http) ---------------------------------------------
    BAD_REQUEST = S.BAD_REQUEST, "the request is malformed"
    BODY_INCOMPLETE = S.BAD_REQUEST, "the connection closed before the body was complete"
    BODY_TIMEOUT = S.REQUEST_TIMEOUT, "the body did not arrive in time"
    TOO_LARGE = S.REQUEST_ENTITY_TOO_LARGE, f"the body exceeds {MAX_BODY_BYTES} bytes"
    NOT_FOUND = S.NOT_FOUND, "no such route"
    METHOD_NOT_ALLOWED = S.METHOD_NOT_ALLOWED, "the route does not take this method"
    HTTP_ERROR = S.BAD_REQUEST, "the request was refused by the HTTP layer"
    """Another refusal of aiohttp's own, answered with aiohttp's status."""
    UNAUTHENTICATED = S.UNAUTHORIZED, "a valid bearer token is required"
    TOKEN_INVALID = S.UNAUTHORIZED, "the bearer token is not valid"
    """An issuer's access token that failed a check (which one is logged, never answered)."""
    FORBIDDEN = S.FORBIDDEN, "the credential lacks a scope this route needs"
    INSUFFICIENT_SCOPE = S.FORBIDDEN, "the token lacks a scope this route needs"
    """An issuer's valid access token without the scope: ``WWW-Authenticate`` names the token
    scope values that would grant it."""
    OBJECTIVE_FORBIDDEN = S.FORBIDDEN, "the credential may not resolve this objective"
    """A credential or an issuer whose ``objectives`` do not hold the objective asked for:
    ``POST /v1/context/resolve`` and the MCP endpoint ``/mcp/{objective}``."""
    STORE_UNAVAILABLE = (
        S.SERVICE_UNAVAILABLE,
        "the store did not answer: retry (a call with the same `callId` runs once)",
    )
    TOO_MANY_CONNECTIONS = S.SERVICE_UNAVAILABLE, "the runtime is at its connection limit"
    INTERNAL = S.INTERNAL_SERVER_ERROR, "internal error"
    """A bug, never a client's doing: the answer says nothing about the data."""

    # -- the runtime's routes (servers.runtime, servers.http.app) -------------------------------
    TURN_REQUIRED = S.FORBIDDEN, "start a turn and pass its `turnId`"
    TURN_UNKNOWN = S.NOT_FOUND, "no such turn"
    TURN_COMPLETED = S.CONFLICT, "the turn was completed already"
    OBJECTIVE_UNKNOWN = S.BAD_REQUEST, "the objective is not declared by this build"
    RESOLUTION_BLOCKED = S.CONFLICT, "the resolution is blocked; see causes"
    CONTEXT_UNKNOWN = S.NOT_FOUND, "no such context"
    CONTEXT_EXPIRED = S.CONFLICT, "the context has expired"
    TOOL_NOT_DISCLOSED = S.CONFLICT, "the tool was not disclosed in this context"
    ARGUMENTS_INVALID = S.BAD_REQUEST, "the arguments are not JSON"
    CALL_REJECTED = S.CONFLICT, "the call was rejected already"
    CALL_DECIDED = S.CONFLICT, "the call was approved or has run already"
    REQUESTER_GONE = S.CONFLICT, "nobody can take this call's answer any more: reject it"

    # -- the MCP mount's HTTP boundary (servers.mcp) --------------------------------------------
    OBJECTIVE_NOT_MOUNTED = S.NOT_FOUND, "no such objective", "OBJECTIVE_UNKNOWN"
    """``/mcp/{objective}`` for an objective the build does not declare."""

    # -- the approval server (servers.approval) -------------------------------------------------
    UNKNOWN_FIELD = S.BAD_REQUEST, "the body has a field the route does not take"
    REASON_REQUIRED = S.BAD_REQUEST, "`reason` is required: say why"
    REASON_TOO_LONG = S.BAD_REQUEST, "`reason` is too long"
    PENDING_UNKNOWN = S.NOT_FOUND, "no such pending call"
    PENDING_EXPIRED = S.NOT_FOUND, "the call's approval window ran out"
    ALREADY_DECIDED = S.CONFLICT, "the call was already decided"
    RUNTIME_ERROR = S.BAD_GATEWAY, "the runtime's answer is not what its API describes"
    RUNTIME_UNAVAILABLE = S.SERVICE_UNAVAILABLE, "the runtime cannot be reached"

    # -- the Design workstation (servers.design) ------------------------------------------------
    HOST_REFUSED = S.MISDIRECTED_REQUEST, "this page answers only at its own loopback address"
    ORIGIN_REFUSED = S.FORBIDDEN, "a change must come from the page itself"
    """Also the MCP mount's, before authentication, with a message of its own: an ``Origin``
    not allowed, or a ``Host`` not a loopback name on a loopback runtime (servers.mcp.origins)."""
    UNSUPPORTED_MEDIA_TYPE = S.UNSUPPORTED_MEDIA_TYPE, "send the body as `application/json`"
    NOT_JSON = S.BAD_REQUEST, "a field is not strict JSON"
    REGISTRY_REQUIRED = S.BAD_REQUEST, "give a registry directory"
    NO_BINDINGS = S.NOT_FOUND, "no bindings file yet"
    CHANGE_INVALID = S.UNPROCESSABLE_ENTITY, "the change does not validate: nothing was written"
    BINDING_INVALID = S.UNPROCESSABLE_ENTITY, "the binding is not accepted: nothing was written"
    REFUSED = S.UNPROCESSABLE_ENTITY, "the operation was refused"
    """An operation refused for its diagnostics: answered with the first one's code."""
    FILE_CHANGED = S.CONFLICT, "the file changed under the operation"


class Refused(Exception):
    """A request refused: its :class:`ErrorCode`, a one-line message (the code's default when
    None) and any extra fields of the answer. ``code`` replaces the wire code of the entry
    (the Design workstation's diagnostic codes, under :attr:`ErrorCode.REFUSED`); ``headers``
    are set on the answer (``WWW-Authenticate``)."""

    def __init__(
        self,
        error: ErrorCode,
        message: str | None = None,
        *,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
        **extra: Any,
    ) -> None:
        self.error = error
        self.message = error.message if message is None else message
        self.code = error.code if code is None else code
        self.headers: Mapping[str, str] = headers or {}
        self.extra = extra
        super().__init__(self.message)

    def body(self) -> dict[str, Any]:
        """The answer's JSON: ``{"error": {"code", "message"}}`` and the extra fields."""
        out: dict[str, Any] = {"error": {"code": self.code, "message": self.message}}
        out.update(self.extra)
        return out


CODES: Final = frozenset(e.code for e in ErrorCode)
"""Every wire code of the table."""

CLIENT_GONE: Final = 499
"""The status of an answer nobody received (its client left first): never sent, only what a
handler returns to aiohttp."""

# JSON-RPC 2.0 error codes the MCP mount answers itself (the SDK answers the rest)
RPC_STATUS: Final = HTTPStatus.BAD_REQUEST
"""The HTTP status of a JSON-RPC error the MCP mount answers before the SDK sees a message."""
RPC_OVER_CREDENTIAL: Final = HTTPStatus.TOO_MANY_REQUESTS
"""... of an MCP request refused for its credential's budget of requests being answered."""
RPC_OVER_ALL: Final = HTTPStatus.SERVICE_UNAVAILABLE
"""... of an MCP request refused for MCP's share of the connections."""
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
