"""``SyncRuntimeClient``: the async client's methods, blocking, for scripts.

Each client runs one :class:`~seif.sdk.client.RuntimeClient` on a private event loop in a
daemon thread of its own; a method submits its coroutine there and waits for it. So it works
from plain synchronous code and also from code that already runs an event loop (a notebook):
the caller's thread blocks, the private loop does the I/O. A ``run_agent_turn`` handler runs in
the caller's thread, and its ``turn.execute`` blocks like every other method.

Close it with ``close()`` or a ``with`` block; one left open is closed at interpreter exit.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterable, Mapping
from types import TracebackType
from typing import Any, TypeVar

from policy.json.value import FrozenMap
from seif.sdk import turns
from seif.sdk.client import Clock, RuntimeClient, Sleep
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


class _LoopThread:
    """An event loop running forever in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="seif-sdk", daemon=True)
        self.thread.start()
        self.closed = False

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self.closed:
            coro.close()
            raise RuntimeError("this SyncRuntimeClient is closed")
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("a SyncRuntimeClient cannot be called from its own event loop")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self, client: RuntimeClient) -> None:
        if self.closed:
            return
        try:
            if self.thread.is_alive():
                asyncio.run_coroutine_threadsafe(client.close(), self.loop).result(10)
        finally:
            self.closed = True
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            if not self.thread.is_alive():
                self.loop.close()


class SyncTurn(turns.TurnView):
    """A blocking :class:`~seif.sdk.turns.Turn`: the same view, and a blocking ``execute``."""

    def __init__(self, client: SyncRuntimeClient, record: turns.TurnRecord) -> None:
        super().__init__(record)
        self._client = client

    def execute(
        self, name: str, call_id: str, arguments: Any, *, approval_id: str | None = None
    ) -> Receipt:
        tool, slot = self._open(name)
        receipt = self._client.execute(
            self._record.context.context_ref,
            tool,
            call_id,
            arguments,
            approval_id=approval_id,
            turn_id=self._record.turn_id,
        )
        self._record.fill(slot, receipt)
        return receipt

    def approval_status(self, call_id: str) -> ApprovalStatus:
        """The approval status of the call ``call_id`` of this turn's context."""
        return self._client.approval_status(self._record.context.context_ref, call_id)

    def wait_for_approval(
        self, call_id: str, *, timeout_s: float, **polling: float
    ) -> ApprovalStatus:
        """:meth:`seif.sdk.turns.Turn.wait_for_approval`, blocking."""
        return self._client.wait_for_approval(
            self._record.context.context_ref, call_id, timeout_s=timeout_s, **polling
        )


class SyncBoundTool:
    """A gateway's tool for a blocking agent: ``tool(call_id, arguments)`` returns a receipt."""

    __slots__ = ("_turn", "description", "name", "parameters")

    def __init__(self, schema: ToolSchema, turn: SyncTurn) -> None:
        self.name: str = schema.name
        self.description: str = schema.description
        self.parameters: FrozenMap = schema.parameters
        self._turn = turn

    def __call__(self, call_id: str, arguments: Any, *, approval_id: str | None = None) -> Receipt:
        return self._turn.execute(self.name, call_id, arguments, approval_id=approval_id)


class SyncRuntimeClient:
    """``SyncRuntimeClient(base_url, token, *, timeout_s=30.0)``: every method of
    :class:`~seif.sdk.client.RuntimeClient`, blocking."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout_s: float = 30.0,
        sleep: Sleep = asyncio.sleep,
        clock: Clock | None = None,
    ) -> None:
        options: dict[str, Any] = {"timeout_s": timeout_s, "sleep": sleep}
        if clock is not None:
            options["clock"] = clock
        self._async = RuntimeClient(base_url, token, **options)
        self._loop = _LoopThread()
        self._finalizer = weakref.finalize(self, self._loop.close, self._async)

    def __repr__(self) -> str:
        return f"SyncRuntimeClient({self._async.base_url!r})"

    @property
    def base_url(self) -> str:
        return self._async.base_url

    def close(self) -> None:
        self._finalizer()

    def __enter__(self) -> SyncRuntimeClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._loop.run(coro)

    # --- the methods of RuntimeClient, blocking -------------------------------------------------

    def resolve(
        self,
        objective: str,
        *,
        consumer: str | None = None,
        environment: str | None = None,
        deployment: str | None = None,
        trace_id: str | None = None,
        turn_id: str | None = None,
    ) -> Context:
        return self._run(
            self._async.resolve(
                objective,
                consumer=consumer,
                environment=environment,
                deployment=deployment,
                trace_id=trace_id,
                turn_id=turn_id,
            )
        )

    def resolve_context(
        self,
        objective: str,
        *,
        consumer: str | None = None,
        environment: str | None = None,
        deployment: str | None = None,
        trace_id: str | None = None,
        turn_id: str | None = None,
    ) -> tuple[Message, ...]:
        return self._run(
            self._async.resolve_context(
                objective,
                consumer=consumer,
                environment=environment,
                deployment=deployment,
                trace_id=trace_id,
                turn_id=turn_id,
            )
        )

    def execute(
        self,
        context_ref: str,
        tool: str,
        call_id: str,
        arguments: Any,
        *,
        approval_id: str | None = None,
        turn_id: str | None = None,
    ) -> Receipt:
        return self._run(
            self._async.execute(
                context_ref, tool, call_id, arguments, approval_id=approval_id, turn_id=turn_id
            )
        )

    def execute_tool_by_name(
        self,
        context: Context,
        name: str,
        call_id: str,
        arguments: Any,
        *,
        approval_id: str | None = None,
        turn_id: str | None = None,
    ) -> Receipt:
        tool = context.tool_id(name)  # raised here, in the caller's thread: nothing sent
        return self.execute(
            context.context_ref, tool, call_id, arguments, approval_id=approval_id, turn_id=turn_id
        )

    def start_turn(self) -> str:
        return self._run(self._async.start_turn())

    def complete_turn(self, turn_id: str, outcome: str) -> None:
        self._run(self._async.complete_turn(turn_id, outcome))

    def report_disclosure(
        self, context_ref: str, tools: Iterable[str], *, turn_id: str | None = None
    ) -> None:
        names = turns.checked_names(tools)
        self._run(self._async.report_disclosure(context_ref, names, turn_id=turn_id))

    def approval_status(self, context_ref: str, call_id: str) -> ApprovalStatus:
        return self._run(self._async.approval_status(context_ref, call_id))

    def wait_for_approval(
        self,
        context_ref: str,
        call_id: str,
        *,
        timeout_s: float,
        interval_s: float = 0.5,
        max_interval_s: float = 5.0,
        backoff: float = 1.5,
    ) -> ApprovalStatus:
        return self._run(
            self._async.wait_for_approval(
                context_ref,
                call_id,
                timeout_s=timeout_s,
                interval_s=interval_s,
                max_interval_s=max_interval_s,
                backoff=backoff,
            )
        )

    def run_agent_turn(
        self, request: TurnRequest | Mapping[str, Any], handler: Callable[[SyncTurn], T]
    ) -> Delivery[T]:
        """As :meth:`RuntimeClient.run_agent_turn`; ``handler(turn)`` runs in the caller's
        thread."""
        record = self._run(turns.open_turn(self._async, request))
        try:
            result = handler(SyncTurn(self, record))
        except Exception as exc:
            errors, _ = self._finish(record, "FAILED")
            turns.note_errors(exc, errors)
            raise
        errors, reported = self._finish(record, "COMPLETED")
        return record.delivery(result, errors, reported)

    def _finish(
        self, record: turns.TurnRecord, outcome: turns.Outcome
    ) -> tuple[list[ReportingError], tuple[str, ...] | None]:
        return self._run(turns.finish(self._async, record, outcome))
