"""The SDK's values: immutable (frozen dataclasses; JSON objects inside them are read-only
``dict``s, arrays tuples), read from the runtime's answers.

Each ``from_wire`` reads one answer of the HTTP API and raises ``ValueError`` naming the field
when the answer is not what the API says (the client turns that into ``INVALID_RESPONSE``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any, Generic, Literal, TypeVar

from policy.json.value import EMPTY_MAP, FrozenMap, freeze, thaw

ReceiptStatus = Literal["SUCCEEDED", "FAILED", "UNKNOWN", "DENIED"]
ApprovalState = Literal["PENDING", "APPROVED", "REJECTED", "EXPIRED", "NONE"]
RECEIPT_STATUSES: frozenset[str] = frozenset({"SUCCEEDED", "FAILED", "UNKNOWN", "DENIED"})
APPROVAL_STATES: frozenset[str] = frozenset({"PENDING", "APPROVED", "REJECTED", "EXPIRED", "NONE"})
APPROVAL_REASONS: frozenset[str] = frozenset(
    {"APPROVAL_REQUIRED", "APPROVAL_INVALID", "APPROVAL_EXPIRED"}
)
"""The ``DENIED`` reasons that list the call for an operator's approval."""

T = TypeVar("T")


# --- reading answers ---------------------------------------------------------------------------


def _get(body: Mapping[str, Any], name: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = body.get(name)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{where}: `{name}` is missing or not of the expected type")
    return value


def _optional_str(body: Mapping[str, Any], name: str, where: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{where}: `{name}` is not a string")
    return value


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{where} is not a JSON object")
    return value


def _list(body: Mapping[str, Any], name: str, where: str) -> list[Any]:
    value = body.get(name)
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{where}: `{name}` is missing or not an array")
    return list(value)


def parse_instant(text: str, where: str) -> datetime:
    """An RFC 3339 instant (``2026-01-01T00:00:00.000Z``) as an aware UTC datetime."""
    try:
        instant = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise ValueError(f"{where} is not an RFC 3339 instant") from None
    if instant.tzinfo is None:
        raise ValueError(f"{where} has no time zone")
    return instant.astimezone(UTC)


# --- a context -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Message:
    """One disclosed context message, in the order the policy gives it."""

    id: str
    role: str
    """``system``, ``developer``, ``user`` or ``assistant``."""
    text: str


@dataclass(frozen=True, slots=True)
class ToolSchema:
    """The model-facing schema of one disclosed tool, exactly as the contract digest covers it:
    ``parameters`` is the JSON Schema object as the runtime sent it (read-only)."""

    name: str
    description: str
    parameters: FrozenMap


@dataclass(frozen=True, slots=True)
class Contract:
    """A disclosed tool's contract: its id (what the runtime dispatches) and function name
    (what the model sees), version, digest, effect, approval and call limit."""

    id: str
    name: str
    version: str
    contract_digest: str
    effect: str
    approval: str
    max_calls: int


@dataclass(frozen=True, slots=True)
class Omission:
    """Something the policy did not disclose, and why."""

    id: str
    kind: str
    reason: str
    explanation: FrozenMap


@dataclass(frozen=True, slots=True)
class Tokens:
    messages: int
    tools: int
    total: int
    ceiling: int
    estimated: bool


@dataclass(frozen=True, slots=True)
class Context:
    """A resolved context: what the policy disclosed for one objective, for 15 minutes."""

    context_ref: str
    build: str
    objective: str
    expires_at: datetime
    """An aware UTC datetime."""
    messages: tuple[Message, ...]
    tools: tuple[ToolSchema, ...]
    contracts: tuple[Contract, ...]
    omitted: tuple[Omission, ...]
    tokens: Tokens

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The function names of the disclosed tools, in order."""
        return tuple(t.name for t in self.tools)

    def tool_id(self, name: str) -> str:
        """The tool id of the function ``name`` the model used; ``ValueError`` naming the
        names this context discloses when it discloses no such function."""
        for contract in self.contracts:
            if contract.name == name:
                return contract.id
        shown = ", ".join(f"`{n}`" for n in self.tool_names) or "none"
        raise ValueError(
            f"context {self.context_ref} discloses no function `{str(name)[:64]}`; "
            f"it discloses: {shown}"
        )

    def to_wire(self) -> dict[str, Any]:
        """The resolve answer this context was read from, as JSON values (``from_wire`` reads
        it back equal): what an application keeps to resume a turn on this context in another
        process (``RuntimeClient.resume_agent_turn``). It holds the context's messages and
        schemas, no secret."""
        return {
            "contextRef": self.context_ref,
            "build": self.build,
            "objective": self.objective,
            "expiresAt": self.expires_at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "messages": [{"id": m.id, "role": m.role, "text": m.text} for m in self.messages],
            "tools": [
                {"name": t.name, "description": t.description, "parameters": thaw(t.parameters)}
                for t in self.tools
            ],
            "contracts": [
                {
                    "id": c.id,
                    "name": c.name,
                    "version": c.version,
                    "contractDigest": c.contract_digest,
                    "effect": c.effect,
                    "approval": c.approval,
                    "maxCalls": c.max_calls,
                }
                for c in self.contracts
            ],
            "omitted": [
                {"id": o.id, "kind": o.kind, "reason": o.reason, "explanation": thaw(o.explanation)}
                for o in self.omitted
            ],
            "tokens": {
                "messages": self.tokens.messages,
                "tools": self.tokens.tools,
                "total": self.tokens.total,
                "ceiling": self.tokens.ceiling,
                "estimated": self.tokens.estimated,
            },
        }

    @classmethod
    def from_wire(cls, body: Any) -> Context:
        """A ``POST /v1/context/resolve`` 200 answer."""
        body = _object(body, "the resolve answer")
        where = "the resolve answer"
        tokens = _object(body.get("tokens"), f"{where}: `tokens`")
        return cls(
            context_ref=_get(body, "contextRef", str, where),
            build=_get(body, "build", str, where),
            objective=_get(body, "objective", str, where),
            expires_at=parse_instant(_get(body, "expiresAt", str, where), f"{where}: `expiresAt`"),
            messages=tuple(
                _message(_object(m, f"{where}: a message")) for m in _list(body, "messages", where)
            ),
            tools=tuple(_tool(_object(t, f"{where}: a tool")) for t in _list(body, "tools", where)),
            contracts=tuple(
                _contract(_object(c, f"{where}: a contract"))
                for c in _list(body, "contracts", where)
            ),
            omitted=tuple(
                _omission(_object(o, f"{where}: an omission"))
                for o in _list(body, "omitted", where)
            ),
            tokens=Tokens(
                messages=_get(tokens, "messages", int, "`tokens`"),
                tools=_get(tokens, "tools", int, "`tokens`"),
                total=_get(tokens, "total", int, "`tokens`"),
                ceiling=_get(tokens, "ceiling", int, "`tokens`"),
                estimated=_get(tokens, "estimated", bool, "`tokens`"),
            ),
        )


def _message(m: Mapping[str, Any]) -> Message:
    where = "a message"
    return Message(
        _get(m, "id", str, where), _get(m, "role", str, where), _get(m, "text", str, where)
    )


def _tool(t: Mapping[str, Any]) -> ToolSchema:
    where = "a tool schema"
    parameters = _object(t.get("parameters"), f"{where}: `parameters`")
    return ToolSchema(
        name=_get(t, "name", str, where),
        description=_get(t, "description", str, where),
        parameters=freeze(parameters),
    )


def _contract(c: Mapping[str, Any]) -> Contract:
    where = "a contract"
    return Contract(
        id=_get(c, "id", str, where),
        name=_get(c, "name", str, where),
        version=_get(c, "version", str, where),
        contract_digest=_get(c, "contractDigest", str, where),
        effect=_get(c, "effect", str, where),
        approval=_get(c, "approval", str, where),
        max_calls=_get(c, "maxCalls", int, where),
    )


def _omission(o: Mapping[str, Any]) -> Omission:
    where = "an omission"
    explanation = o.get("explanation")
    return Omission(
        id=_get(o, "id", str, where),
        kind=_get(o, "kind", str, where),
        reason=_get(o, "reason", str, where),
        explanation=freeze(explanation) if isinstance(explanation, Mapping) else EMPTY_MAP,
    )


# --- a receipt -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Receipt:
    """What happened to one call. ``status``: ``SUCCEEDED`` (the executor said ok), ``FAILED``
    (it said not ok, or the call was not dispatched), ``UNKNOWN`` (no one can say: lost,
    timed out, interrupted), ``DENIED`` (the policy refused; ``reason`` carries the code and
    ``decision`` the engine's decision with its explanation).

    The runtime's reasons are documented in ``docs/runtime.md``; the SDK adds its own when no
    receipt came back (``detail`` then says what happened): ``CLIENT_TIMEOUT``,
    ``CONNECTION_LOST``, ``RUNTIME_ERROR`` and ``INVALID_RESPONSE`` (all ``UNKNOWN``: the call
    may have run), and ``CONNECT_FAILED`` (``FAILED``: no connection, nothing was sent)."""

    call_id: str
    tool: str
    status: ReceiptStatus
    reason: str | None = None
    duplicate: bool = False
    output_available: bool = False
    output: Any = None
    """The executor's output (read-only JSON) when ``output_available``, else None."""
    decision: FrozenMap | None = None
    executor_error: str | None = None
    """The executor's own error code when it said ``ok: false`` (never its message)."""
    error: FrozenMap | None = None
    """An upstream MCP server's own error (read-only): ``{"code"}`` of its JSON-RPC error, or
    ``{"message"}``, its ``isError`` text; in the answer that ran the call only."""
    detail: str | None = None
    """The SDK's explanation of a receipt it made itself (no receipt came back)."""

    @property
    def succeeded(self) -> bool:
        return self.status == "SUCCEEDED"

    @property
    def needs_approval(self) -> bool:
        """Denied until an operator approves this exact call (see ``wait_for_approval``)."""
        return self.status == "DENIED" and self.reason in APPROVAL_REASONS

    @classmethod
    def from_wire(cls, body: Any) -> Receipt:
        """A ``POST /v1/context/tools/execute`` 200 answer."""
        where = "the receipt"
        body = _object(body, where)
        status = _get(body, "status", str, where)
        if status not in RECEIPT_STATUSES:
            raise ValueError(f"{where}: `status` {status[:32]!r} is not a receipt status")
        decision = body.get("decision")
        available = body.get("outputAvailable") is True
        return cls(
            call_id=_get(body, "callId", str, where),
            tool=_get(body, "tool", str, where),
            status=status,
            reason=_optional_str(body, "reason", where),
            duplicate=body.get("duplicate") is True,
            output_available=available,
            output=freeze(body.get("output")) if available else None,
            decision=freeze(decision) if isinstance(decision, Mapping) else None,
            executor_error=_optional_str(body, "executorError", where),
            error=freeze(error) if isinstance(error := body.get("error"), Mapping) else None,
        )


# --- approvals -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ApprovalStatus:
    """An approval's state as the runtime reports it to the application: ``PENDING`` (an
    operator has not decided), ``APPROVED`` (with ``approval_id`` to pass to execute, valid
    until ``expires_at``), ``REJECTED``, ``EXPIRED``, or ``NONE`` (nothing is asked for this
    call: execute it first). The application reads approvals; it can never grant them."""

    context_ref: str
    call_id: str
    state: ApprovalState
    approval_id: str | None = None
    expires_at: datetime | None = None

    @property
    def approved(self) -> bool:
        return self.state == "APPROVED"

    @property
    def settled(self) -> bool:
        """No longer waiting on an operator (anything but ``PENDING``)."""
        return self.state != "PENDING"

    @classmethod
    def from_wire(cls, context_ref: str, call_id: str, body: Any) -> ApprovalStatus:
        where = "the approval status"
        body = _object(body, where)
        state = _get(body, "state", str, where)
        if state not in APPROVAL_STATES:
            raise ValueError(f"{where}: `state` {state[:32]!r} is not an approval state")
        expires = _optional_str(body, "expiresAt", where)
        approval_id = _optional_str(body, "approvalId", where)
        if state == "APPROVED" and approval_id is None:
            raise ValueError(f"{where}: APPROVED without `approvalId`")
        return cls(
            context_ref=context_ref,
            call_id=call_id,
            state=state,
            approval_id=approval_id,
            expires_at=None if expires is None else parse_instant(expires, f"{where}: expiresAt"),
        )


# --- turns -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TurnRequest:
    """What ``run_agent_turn`` resolves: the objective and the optional coordinates."""

    objective: str
    consumer: str | None = None
    environment: str | None = None
    deployment: str | None = None
    trace_id: str | None = None

    @classmethod
    def of(cls, request: TurnRequest | Mapping[str, Any]) -> TurnRequest:
        """``request`` itself, or the mapping's fields (``ValueError`` naming an unknown key
        or a missing objective)."""
        if isinstance(request, TurnRequest):
            return request
        if not isinstance(request, Mapping):
            raise ValueError("the turn request must be a mapping or a seif.TurnRequest")
        names = {f.name for f in fields(cls)}
        unknown = sorted(str(k) for k in request if k not in names)
        if unknown:
            raise ValueError(
                f"the turn request has unknown keys {unknown}; it takes {sorted(names)}"
            )
        if not isinstance(request.get("objective"), str) or not request["objective"]:
            raise ValueError("the turn request needs an `objective` (a non-empty string)")
        for name in names - {"objective"}:
            value = request.get(name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"the turn request's `{name}` must be a string or None")
        return cls(**request)


@dataclass(frozen=True, slots=True)
class ReportingError:
    """A failure to report the disclosure (``step`` ``report_disclosure``) or to complete the
    turn (``complete_turn``) after the handler had its result: listed, never raised."""

    step: Literal["report_disclosure", "complete_turn"]
    error: Exception

    def __str__(self) -> str:
        return f"{self.step}: {self.error}"


@dataclass(frozen=True, slots=True)
class Delivery(Generic[T]):
    """The outcome of one agent turn."""

    result: T
    """What the handler returned."""
    context_ref: str
    turn_id: str
    receipts: tuple[Receipt, ...]
    """Every receipt the turn's ``execute`` returned, in the order the calls were made."""
    reporting_errors: tuple[ReportingError, ...] = ()
    reported: tuple[str, ...] | None = None
    """The function names reported as bound for the model (None: the report failed)."""
