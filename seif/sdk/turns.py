"""Agent turns: ``run_agent_turn`` and ``ContextDeliveryGateway``, for the async client (the
blocking ones, in :mod:`seif.sdk.sync`, share :class:`TurnRecord`).

A turn: start it (``POST /v1/turns``), resolve with its id, hand the handler the messages, the
exact schemas and an ``execute``; then report the disclosure, complete the turn ``COMPLETED``
(or ``FAILED`` when the handler raised, and re-raise), and return a :class:`Delivery`. A failure
to report or complete never replaces the handler's result: it is listed in
``Delivery.reporting_errors`` (or, when the handler raised, added as a note to its exception).
``resume_agent_turn`` runs a turn the same way on a context resolved earlier (a call held for
approval there runs once approved, from another process too). A turn reads the approvals of its
context (``approval_status``, ``wait_for_approval``); it never grants one.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from policy.json.value import FrozenMap
from seif.sdk.types import (
    ApprovalStatus,
    Context,
    Delivery,
    Message,
    Receipt,
    ReportingError,
    ToolSchema,
    TurnRequest,
)

T = TypeVar("T")
Outcome = Literal["COMPLETED", "FAILED"]


class TurnClient(Protocol):
    """What a turn needs of the client it runs on: the calls of a turn and the approval reads.
    :class:`~seif.sdk.client.RuntimeClient` is one (it runs its turns with this module, which
    therefore does not import it)."""

    async def start_turn(self) -> str: ...

    async def resolve(
        self,
        objective: str,
        *,
        consumer: str | None = None,
        environment: str | None = None,
        deployment: str | None = None,
        trace_id: str | None = None,
        turn_id: str | None = None,
    ) -> Context: ...

    async def execute(
        self,
        context_ref: str,
        tool: str,
        call_id: str,
        arguments: Any,
        *,
        approval_id: str | None = None,
        turn_id: str | None = None,
    ) -> Receipt: ...

    async def report_disclosure(
        self, context_ref: str, tools: Iterable[str], *, turn_id: str | None = None
    ) -> None: ...

    async def complete_turn(self, turn_id: str, outcome: str) -> None: ...

    async def approval_status(self, context_ref: str, call_id: str) -> ApprovalStatus: ...

    async def wait_for_approval(
        self,
        context_ref: str,
        call_id: str,
        *,
        timeout_s: float,
        interval_s: float = 0.5,
        max_interval_s: float = 5.0,
        backoff: float = 1.5,
    ) -> ApprovalStatus: ...


def checked_names(names: Iterable[str]) -> tuple[str, ...]:
    """A list of function names (``ValueError`` for a bare string or a non-string name)."""
    if isinstance(names, str | bytes):
        raise ValueError("tools must be a list of function names, not one string")
    out = tuple(names)
    for name in out:
        if not isinstance(name, str) or not name:
            raise ValueError(f"tools must be non-empty strings, not {name!r:.64}")
    return out


class TurnRecord:
    """What one turn keeps: its context and id, its receipts in call order, and the names the
    handler said it bound (None: all of the context's)."""

    def __init__(self, context: Context, turn_id: str) -> None:
        self.context = context
        self.turn_id = turn_id
        self.reported: tuple[str, ...] | None = None
        self._slots: list[Receipt | None] = []

    def open_slot(self) -> int:
        """Reserve the place of a call in the order the calls were made."""
        self._slots.append(None)
        return len(self._slots) - 1

    def fill(self, slot: int, receipt: Receipt) -> None:
        self._slots[slot] = receipt

    @property
    def receipts(self) -> tuple[Receipt, ...]:
        return tuple(r for r in self._slots if r is not None)

    def report(self, names: Iterable[str]) -> None:
        self.reported = checked_names(names)

    def names_to_report(self, outcome: Outcome) -> tuple[str, ...] | None:
        """What to report as bound: the handler's own set; when it returned without one, every
        disclosed name; when it raised without one, nothing (never more than the SDK saw)."""
        if self.reported is not None:
            return self.reported
        return self.context.tool_names if outcome == "COMPLETED" else None

    def delivery(
        self, result: T, errors: list[ReportingError], reported: tuple[str, ...] | None
    ) -> Delivery[T]:
        return Delivery(
            result=result,
            context_ref=self.context.context_ref,
            turn_id=self.turn_id,
            receipts=self.receipts,
            reporting_errors=tuple(errors),
            reported=reported,
        )


def note_errors(exc: BaseException, errors: list[ReportingError]) -> None:
    for error in errors:
        exc.add_note(f"seif: the turn could not be closed cleanly ({error})")


class TurnView:
    """What every turn shows its handler, async or blocking: ``context``, its ``messages`` and
    ``tools`` (the exact schemas), ``turn_id``, the ``receipts`` so far, and
    ``report_disclosure``; the subclasses add ``execute``."""

    def __init__(self, record: TurnRecord) -> None:
        self._record = record

    @property
    def context(self) -> Context:
        return self._record.context

    @property
    def messages(self) -> tuple[Message, ...]:
        return self._record.context.messages

    @property
    def tools(self) -> tuple[ToolSchema, ...]:
        return self._record.context.tools

    @property
    def turn_id(self) -> str:
        return self._record.turn_id

    @property
    def receipts(self) -> tuple[Receipt, ...]:
        """The receipts so far, in the order the calls were made."""
        return self._record.receipts

    def _open(self, name: str) -> tuple[str, int]:
        """The tool id of the function ``name`` (``ValueError`` naming the disclosed ones) and
        the receipt slot of the call about to be made, so receipts stay in call order."""
        return self._record.context.tool_id(name), self._record.open_slot()

    def report_disclosure(self, names: Iterable[str]) -> None:
        """Say which function names the application bound for the model (a narrower set than
        ``tools``); the SDK reports them when the handler returns."""
        self._record.report(names)


class Turn(TurnView):
    """What a ``run_agent_turn`` handler is given: a :class:`TurnView` and ``execute``."""

    def __init__(self, client: TurnClient, record: TurnRecord) -> None:
        super().__init__(record)
        self._client = client

    async def execute(
        self, name: str, call_id: str, arguments: Any, *, approval_id: str | None = None
    ) -> Receipt:
        """Execute the function ``name`` the model called, with the model's ``call_id``. A name
        the context does not disclose is a ``ValueError`` naming those it does (nothing sent)."""
        tool, slot = self._open(name)
        receipt = await self._client.execute(
            self._record.context.context_ref,
            tool,
            call_id,
            arguments,
            approval_id=approval_id,
            turn_id=self._record.turn_id,
        )
        self._record.fill(slot, receipt)
        return receipt

    async def approval_status(self, call_id: str) -> ApprovalStatus:
        """The approval status of the call ``call_id`` of this turn's context."""
        return await self._client.approval_status(self._record.context.context_ref, call_id)

    async def wait_for_approval(
        self, call_id: str, *, timeout_s: float, **polling: float
    ) -> ApprovalStatus:
        """Wait until an approver decided on the call ``call_id`` of this turn's context, or
        ``timeout_s`` passed: the client's ``wait_for_approval`` (``polling``: its
        ``interval_s``, ``max_interval_s`` and ``backoff``), which returns the last status read
        (``PENDING`` when the time ran out). The application reads approvals; it never grants
        them."""
        return await self._client.wait_for_approval(
            self._record.context.context_ref, call_id, timeout_s=timeout_s, **polling
        )


async def finish(
    client: TurnClient, record: TurnRecord, outcome: Outcome
) -> tuple[list[ReportingError], tuple[str, ...] | None]:
    """Report the disclosure, then complete the turn; every failure listed, none raised."""
    errors: list[ReportingError] = []
    names = record.names_to_report(outcome)
    reported = None
    if names is not None:
        try:
            await client.report_disclosure(
                record.context.context_ref, list(names), turn_id=record.turn_id
            )
            reported = names
        except Exception as exc:  # telemetry: listed, never raised over the result
            errors.append(ReportingError("report_disclosure", exc))
    try:
        await client.complete_turn(record.turn_id, outcome)
    except Exception as exc:  # idem
        errors.append(ReportingError("complete_turn", exc))
    return errors, reported


async def open_turn(client: TurnClient, request: TurnRequest | Mapping[str, Any]) -> TurnRecord:
    """Start a turn and resolve with its id; a resolve that fails completes the turn
    ``FAILED`` (best effort) and raises."""
    wanted = TurnRequest.of(request)
    turn_id = await client.start_turn()
    try:
        context = await client.resolve(
            wanted.objective,
            consumer=wanted.consumer,
            environment=wanted.environment,
            deployment=wanted.deployment,
            trace_id=wanted.trace_id,
            turn_id=turn_id,
        )
    except Exception as exc:
        try:
            await client.complete_turn(turn_id, "FAILED")
        except Exception as error:  # the resolve's error is the one to raise
            note_errors(exc, [ReportingError("complete_turn", error)])
        raise
    return TurnRecord(context, turn_id)


async def run_agent_turn(
    client: TurnClient,
    request: TurnRequest | Mapping[str, Any],
    handler: Callable[[Turn], Awaitable[T]] | Callable[[Turn], T],
) -> Delivery[T]:
    return await run_turn(client, await open_turn(client, request), handler)


async def resume_agent_turn(
    client: TurnClient,
    context: Context,
    handler: Callable[[Turn], Awaitable[T]] | Callable[[Turn], T],
) -> Delivery[T]:
    """A turn on a context resolved earlier (by this process or another, which kept it with
    ``Context.to_wire``): start a turn and run ``handler`` as ``run_agent_turn`` does, without
    resolving again, so that call ids and approvals keep referring to that context."""
    return await run_turn(client, TurnRecord(context, await client.start_turn()), handler)


async def run_turn(
    client: TurnClient,
    record: TurnRecord,
    handler: Callable[[Turn], Awaitable[T]] | Callable[[Turn], T],
) -> Delivery[T]:
    """Run ``handler`` on the started turn ``record``, then report and complete it."""
    try:
        value = handler(Turn(client, record))
        result: T = await value if inspect.isawaitable(value) else value
    except Exception as exc:
        errors, _ = await finish(client, record, "FAILED")
        note_errors(exc, errors)
        raise
    errors, reported = await finish(client, record, "COMPLETED")
    return record.delivery(result, errors, reported)


# --- the gateway -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BoundTool:
    """One disclosed tool as a gateway hands it to an agent: the exact schema, and a call that
    executes it through the turn (``await tool(call_id, arguments)`` returns a receipt)."""

    name: str
    description: str
    parameters: FrozenMap
    _turn: Turn

    async def __call__(
        self, call_id: str, arguments: Any, *, approval_id: str | None = None
    ) -> Receipt:
        return await self._turn.execute(self.name, call_id, arguments, approval_id=approval_id)


def bound_tools(turn: Turn) -> tuple[BoundTool, ...]:
    return tuple(BoundTool(t.name, t.description, t.parameters, turn) for t in turn.tools)


async def forward_agent(
    client: TurnClient,
    request: TurnRequest | Mapping[str, Any],
    agent: Callable[[tuple[Message, ...], tuple[BoundTool, ...]], Awaitable[T]]
    | Callable[[tuple[Message, ...], tuple[BoundTool, ...]], T],
) -> Delivery[T]:
    async def handler(turn: Turn) -> T:
        value = agent(turn.messages, bound_tools(turn))
        result: T = await value if inspect.isawaitable(value) else value
        return result

    return await run_agent_turn(client, request, handler)
