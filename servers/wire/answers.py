"""The answers of the runtime's routes, as the ``TypedDict``\\ s the service layer returns and
the HTTP layer encodes (key for key: these are the JSON objects on the wire).

Not ``from __future__ import annotations``: ``NotRequired`` must be seen when each class is made.
"""

from typing import Annotated, Any, Literal, NotRequired, TypedDict

from servers.wire.requests import TurnOutcome
from servers.wire.schema import Schema

Instant = Annotated[str, Schema({"format": "date-time"})]
"""RFC 3339 UTC with milliseconds: ``2026-01-01T00:00:00.000Z``."""
ReceiptStatus = Literal["SUCCEEDED", "FAILED", "UNKNOWN", "DENIED"]
ApprovalState = Literal["PENDING", "APPROVED", "REJECTED", "EXPIRED", "NONE"]
ToolState = Literal["READY", "INCOMPATIBLE", "UNAVAILABLE", "UNBOUND"]
"""``UNBOUND``: a tool some objective's profile requires that the bindings do not bind."""
StoreState = Literal["READY", "LEASE_LOST"]
"""A replica's share of a shared store: ``LEASE_LOST`` once its lease lapsed."""


# -- errors -------------------------------------------------------------------------------------


class ErrorDetail(TypedDict):
    code: str
    message: str


class Error(TypedDict):
    """Every refusal: ``{"error": {"code", "message"}}``, sometimes with more fields."""

    error: ErrorDetail


class Explanation(TypedDict):
    """The deciding declaration, and where it stands in the project."""

    pointer: str
    profile: NotRequired[str]
    rule: NotRequired[int]
    condition: NotRequired[int]
    tool: NotRequired[str]
    detail: NotRequired[str]


class Omission(TypedDict):
    """A tool or message the policy did not disclose, and why."""

    id: str
    kind: str
    reason: str
    explanation: Explanation


class Blocked(TypedDict):
    """409 ``RESOLUTION_BLOCKED``: why nothing could be disclosed."""

    error: ErrorDetail
    causes: list[Omission]
    omitted: list[Omission]


# -- health, readiness, capabilities, this document ----------------------------------------------


class Health(TypedDict):
    status: Literal["ok"]


class RequiredTool(TypedDict):
    """A tool some objective's profile requires that is not ``READY``: every resolve of those
    objectives is blocked (``RESOLUTION_BLOCKED``) while it stays so."""

    tool: str
    state: ToolState
    objectives: list[str]


class Ready(TypedDict):
    """Each bound tool's state, and each required one's (``UNBOUND`` when it is not bound);
    ``blocking``, when any, the required tools that are not ``READY``; a replica's lease state
    too."""

    ready: bool
    tools: dict[str, ToolState]
    reasons: NotRequired[dict[str, str]]
    """Why a tool is not ``READY``, when its observation says (``UPSTREAM_CHANGED``: an
    upstream tool whose pin no longer matches)."""
    blocking: NotRequired[list[RequiredTool]]
    store: NotRequired[StoreState]


class ExecutorSupport(TypedDict):
    contract: str
    transports: list[str]


class SchemaSubset(TypedDict):
    keywords: list[str]
    limits: dict[str, int]


class McpMount(TypedDict):
    path: str
    revisions: list[str]


class Integrations(TypedDict):
    native: list[str]
    documented: list[str]
    mcp: NotRequired[McpMount]


class Capabilities(TypedDict):
    runtimeContracts: list[str]
    buildFormats: list[str]
    executor: ExecutorSupport
    schemaSubset: SchemaSubset
    integrations: Integrations


class Document(TypedDict):
    """The OpenAPI 3.1 document itself."""

    openapi: str
    info: dict[str, Any]
    paths: dict[str, Any]
    components: dict[str, Any]


# -- turns ---------------------------------------------------------------------------------------


class Turn(TypedDict):
    turnId: str
    expiresAt: Instant


class TurnCompleted(TypedDict):
    turnId: str
    outcome: TurnOutcome


# -- a context -----------------------------------------------------------------------------------


class Message(TypedDict):
    id: str
    role: str
    text: str


class Contract(TypedDict):
    id: str
    name: str
    version: str
    contractDigest: str
    effect: str
    approval: str
    maxCalls: int


class Tokens(TypedDict):
    messages: int
    tools: int
    total: int
    ceiling: int
    estimated: bool


class ToolSchema(TypedDict):
    """A disclosed tool as the model sees it: exactly what its contract digest covers."""

    name: str
    description: str
    parameters: dict[str, Any]


class Resolved(TypedDict):
    """200 of ``POST /v1/context/resolve``: what the policy disclosed, for 15 minutes."""

    contextRef: str
    build: str
    objective: str
    expiresAt: Instant
    messages: list[Message]
    tools: list[ToolSchema]
    contracts: list[Contract]
    omitted: list[Omission]
    tokens: Tokens


class Accepted(TypedDict):
    accepted: Literal[True]


# -- a call --------------------------------------------------------------------------------------


class SchemaError(TypedDict):
    pointer: str
    keyword: str
    message: str


class Decision(TypedDict):
    """The engine's decision of a denied call."""

    outcome: str
    reason: str | None
    tool: str
    callId: str
    approvalRequired: bool
    explanation: Explanation | None
    errors: NotRequired[list[SchemaError]]


class UpstreamError(TypedDict, total=False):
    """An upstream MCP server's own error (docs/upstream-mcp.md): the code of its JSON-RPC
    error (``UPSTREAM_ERROR``), or the text of its ``isError`` result (``UPSTREAM_TOOL_ERROR``,
    at most 1,000 characters). Returned in the live receipt only: never stored or logged."""

    code: str
    message: str


class Receipt(TypedDict):
    """What happened to one call (``docs/runtime.md``, "Receipts")."""

    callId: str
    tool: str
    status: ReceiptStatus
    reason: str | None
    duplicate: bool
    outputAvailable: bool
    output: NotRequired[Any]
    executorError: NotRequired[str]
    """The executor's own error code when it said ``ok: false`` (never its message)."""
    error: NotRequired[UpstreamError]
    decision: NotRequired[Decision]


# -- approvals -----------------------------------------------------------------------------------


class Approval(TypedDict):
    approvalId: str
    expiresAt: Instant


class Rejection(TypedDict):
    state: Literal["REJECTED"]
    callId: str
    approver: str


class ApprovalStatus(TypedDict):
    state: ApprovalState
    approvalId: NotRequired[str]
    expiresAt: NotRequired[Instant]


class Coordinates(TypedDict):
    objective: str
    consumer: str
    environment: str
    deployment: str


class PendingCall(TypedDict):
    """A call held for approval, with the exact arguments that will run; ``expiresAt``: when it
    stops being approvable and leaves the list."""

    contextRef: str
    tool: str
    toolDescription: str
    """The tool's ``description`` in the build's contract (what it does)."""
    callId: str
    arguments: Any
    reason: str
    requestedAt: Instant
    expiresAt: Instant
    contextExpiresAt: Instant
    coordinates: Coordinates
    application: str
    """The id of the credential that resolved the call's context: the application that asked."""
    requesterGone: bool
    """True when nobody can take the call's answer any more: the request that asked for it
    ended before its answer reached its client, and no later request can name the call (an MCP
    ``tools/call`` with a call id of its own, whose client left). It stays listed until it
    expires and may be rejected; an approve is ``409 REQUESTER_GONE``."""


class PendingList(TypedDict):
    """A page of the calls held for approval (:mod:`servers.wire.paging`)."""

    pending: list[PendingCall]
    next: str | None
    """The cursor of the next page (``?after=``); null on the last."""


# -- traces --------------------------------------------------------------------------------------


TraceEventKind = Literal[
    "DISCLOSED",
    "REPORTED",
    "DENIED",
    "APPROVED",
    "REJECTED",
    "APPROVAL_EXPIRED",
    "INTENT",
    "RESULT",
    "UNKNOWN",
    "SHADOW",
]


class TraceEvent(TypedDict):
    """One decision-log record of the context (``docs/data-directory.md``, "The decision log"):
    its envelope, typed here, and the event's own fields beside it (open: new fields may appear
    within a format version)."""

    v: Literal[1, 2]
    seq: Annotated[int, Schema({"minimum": 1})]
    at: int
    event: TraceEventKind
    prev: NotRequired[Annotated[str | None, Schema({"pattern": "^blake3:[0-9a-f]{64}$"})]]
    """Format 2: the digest of the record before it (null on the first); format 1 has none."""
    contextRef: NotRequired[str]


class Trace(TypedDict):
    contextRef: str
    events: list[TraceEvent]


class TraceHead(TypedDict):
    """The decision log's last record, both null for an empty log."""

    seq: Annotated[int | None, Schema({"minimum": 1})]
    digest: Annotated[str | None, Schema({"pattern": "^blake3:[0-9a-f]{64}$"})]


class ResourceMetadata(TypedDict):
    """This runtime, or the MCP endpoint of an objective, as an OAuth 2.0 protected resource
    (RFC 9728): its resource URL, the issuers of the tokens it accepts, the token scope values
    it needs, and how a token is presented (the ``Authorization`` header only)."""

    resource: str
    authorization_servers: list[str]
    scopes_supported: list[str]
    bearer_methods_supported: list[Literal["header"]]


COMPONENTS: tuple[type, ...] = (
    Error,
    Blocked,
    Explanation,
    Omission,
    Health,
    Ready,
    Capabilities,
    Turn,
    TurnCompleted,
    Resolved,
    Receipt,
    Approval,
    PendingList,
    Rejection,
    ApprovalStatus,
    Trace,
    TraceHead,
    ResourceMetadata,
)
"""The answers the document names (``#/components/schemas/NAME``); the others are inline."""
CLOSED: frozenset[type] = frozenset(
    {Health, Ready, Turn, TurnCompleted, Rejection, ApprovalStatus, TraceHead, Accepted}
)
"""The answers that never carry a key beyond their own (``additionalProperties: false``)."""
