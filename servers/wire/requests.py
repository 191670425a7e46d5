"""The request bodies of the runtime's routes, as typed values (:func:`servers.wire.fields.decode`
reads each from its JSON object; the MCP mount builds the same values)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from servers.wire.fields import Id, Names, Objective, Text, Value, choice

TurnOutcome = Literal["COMPLETED", "FAILED"]
TURN_OUTCOME = choice("COMPLETED", "FAILED")


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolveRequest:
    """``POST /v1/context/resolve``: an objective, and the optional coordinates."""

    objective: Objective
    consumer: Id | None = None
    environment: Id | None = None
    deployment: Id | None = None
    trace_id: Id | None = None
    turn_id: Id | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecuteRequest:
    """``POST /v1/context/tools/execute``: one call in a context."""

    context_ref: Id
    tool: Id = field(
        metadata={
            "doc": "the tool id, or the function name the model saw (a tool id wins); the"
            " receipt names the tool id"
        }
    )
    call_id: Id
    arguments: Value
    approval_id: Id | None = None
    turn_id: Id | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionRequest:
    """``POST /v1/context/tools/approve`` and ``/reject``: exactly one call, and the approver's
    reason (required, never kept)."""

    context_ref: Id
    tool: Id
    call_id: Id
    arguments: Value
    reason: Text


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportRequest:
    """``POST /v1/context/disclosures``: the function names the application bound."""

    context_ref: Id
    turn_id: Id | None = None
    tools: Names


@dataclass(frozen=True, slots=True, kw_only=True)
class CompleteTurnRequest:
    """``POST /v1/turns/{turnId}/complete``: the turn's technical outcome."""

    outcome: Annotated[TurnOutcome, TURN_OUTCOME]
