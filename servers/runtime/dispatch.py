"""A call, from the engine's decision to its receipt: decided (pure), its intent committed
durably by the store (which decides again, in the claiming transaction, on the intents
committed by then), run once by its tool's executor, and its outcome stored and logged before
the receipt is answered.

Guarantees: one call id of a context is dispatched once, whatever runs concurrently (the
store's transaction arbitrates, never a Python lock); a repeat waits for the first request's
outcome and says so (``duplicate``); a call is never retried; cancelling the caller neither
cancels the executor's request nor loses its receipt (it runs in a task of its own, awaited
through a shield, and the runtime waits for it at shutdown); what this process cannot know is
``UNKNOWN``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from policy import reasons as R
from policy.engine.decision import ALLOW, DUPLICATE, Decision, decide
from policy.engine.disclosure import availability
from policy.engine.state import Call, ContextState, with_history
from policy.ir import Project
from servers.executor.interface import Dispatch, Executors, Outcome, idempotency_key
from servers.identity.principal import Authenticated
from servers.runtime import events
from servers.runtime.approvals import Approvals
from servers.runtime.callers import Caller
from servers.runtime.contexts import Contexts
from servers.runtime.metrics import Metrics
from servers.runtime.peers import PeerWaits
from servers.runtime.records import Recorder
from servers.runtime.shadow import CallJob
from servers.runtime.shadowing import Shadowing
from servers.runtime.values import Seen
from servers.store.rows import ContextRow, IntentRow, IntentUnknown, StoreError, StoreUnanswered
from servers.support.tasks import Background
from servers.wire import reasons
from servers.wire.answers import Receipt, ReceiptStatus, UpstreamError
from servers.wire.requests import ExecuteRequest

LOG = logging.getLogger("seif.runtime")
Key = tuple[str, str]


class Dispatcher:
    """Execute calls: decide, claim, run, record."""

    def __init__(
        self,
        *,
        contexts: Contexts,
        recorder: Recorder,
        approvals: Approvals,
        shadowing: Shadowing,
        executors: Executors,
        background: Background,
        metrics: Metrics | None,
        peers: PeerWaits | None,
    ) -> None:
        self._contexts = contexts
        self._store = contexts.store
        self._recorder = recorder
        self._clock = recorder.clock
        self._approvals = approvals
        self._shadowing = shadowing
        self._executors = executors
        self._background = background
        self._metrics = metrics
        self._peers = peers
        """Set when other processes write the store (replicas): a duplicate of a call running
        elsewhere reads its intent until it is final. None for one runtime, whose own calls in
        flight wake their duplicates."""
        self._inflight: dict[Key, asyncio.Event] = {}
        self._retries: set[asyncio.Task[None]] = set()
        """Outcomes being stored again (:meth:`_record_later`)."""

    @property
    def ir(self) -> Project:
        return self._contexts.ir

    # ------------------------------------------------------------------ deciding

    async def execute(self, request: ExecuteRequest, credential: Authenticated) -> Receipt:
        """The receipt of one call, made by ``credential`` (what its conditions read as
        ``principal``); a context it did not resolve is unknown."""
        call = Call(
            tool=request.tool,
            call_id=request.call_id,
            arguments=request.arguments,
            approval_id=request.approval_id,
        )
        caller = self._contexts.caller(credential)
        row = self._contexts.owned(request.context_ref, caller)
        if row is None:
            decision, job = self._decide(None, None, call, self._clock(), caller)
            return await self._denied(None, call, decision, {}, job, caller)
        intents = self._contexts.known_intents(row.context_ref)
        wanted = self.ir.approval_tools  # by id, or by the function name the model saw
        approvals = (  # for other tools the context's approvals cannot change the decision
            self._store.approvals(row.context_ref)
            if call.tool in wanted or self.ir.tool_id_by_name.get(call.tool) in wanted
            else []
        )
        now = self._clock()
        subject = credential.principal.subject
        state = self._contexts.state_of(row, intents, approvals, subject)
        decision, job = self._decide(row, state, call, now, caller)
        if decision.tool != call.tool:  # called by its function name: the id from here on
            call = replace(call, tool=decision.tool)
        if decision.outcome == DUPLICATE:
            return await self._duplicate(row, call)
        if decision.outcome != ALLOW:
            return await self._denied(row, call, decision, row.coordinates, job, caller)
        assert decision.fingerprint is not None
        seen = Seen(intents, approvals, now)
        return await self._claim(row, call, decision, seen, job, caller, subject)

    def _decide(
        self,
        row: ContextRow | None,
        state: ContextState | None,
        call: Call,
        now: int,
        caller: Caller,
    ) -> tuple[Decision, CallJob | None]:
        """The engine's decision of a call made by ``caller``, counted
        (``seif_decisions_total``), and its job for the shadow build, if one is loaded
        (compared once its record is logged)."""
        decision = decide(self.ir, state, call, now, caller.principal)
        if self._metrics is not None:
            self._metrics.decided(decision.outcome, decision.reason)
        return decision, self._shadowing.call(row, state, call, now, decision, caller.principal)

    async def _denied(
        self,
        row: ContextRow | None,
        call: Call,
        decision: Decision,
        coords: Mapping[str, Any],
        job: CallJob | None,
        caller: Caller,
    ) -> Receipt:
        if row is not None:
            self._approvals.denied(row, call, decision)  # held, if it waits for an approval
        fields, mark = self._recorder.decision_fields(decision), self._shadowing.mark(job)
        ref = row.context_ref if row else None
        await self._recorder.write("DENIED", ref, coords, **fields, **caller.fields(), **mark)
        self._shadowing.put(job, mark)
        return events.receipt(
            call.call_id, call.tool, "DENIED", reason=decision.reason, decision=decision
        )

    # ------------------------------------------------------------------ repeats

    async def _duplicate(self, row: ContextRow, call: Call) -> Receipt:
        """A repeat of a call made before: the first request's outcome, once it is known
        (``UNKNOWN`` ``IN_FLIGHT`` past the tool's timeout)."""
        event = self._inflight.get((row.context_ref, call.call_id))
        tool = self.ir.tool_by_id[call.tool]
        try:
            async with asyncio.timeout(tool.timeout_ms / 1000):
                if event is not None:
                    await event.wait()
                if self._peers is not None:  # it may run on another replica (also when the
                    await self._peers.final(row.context_ref, call.call_id)  # event's owner lost)
        except TimeoutError:
            return events.receipt(
                call.call_id, call.tool, "UNKNOWN", duplicate=True, reason=reasons.IN_FLIGHT
            )
        status, reason = self._intent_status(row.context_ref, call.call_id)
        return events.receipt(call.call_id, call.tool, status, reason=reason, duplicate=True)

    def _intent_status(self, context_ref: str, call_id: str) -> tuple[ReceiptStatus, str | None]:
        for intent in self._store.intents(context_ref):
            if intent.call_id == call_id:
                return events.receipt_status(intent.status), intent.reason
        return "UNKNOWN", None

    async def receipt_of(
        self, context_ref: str, call_id: str, credential: Authenticated
    ) -> Receipt | None:
        """The duplicate receipt of a call made before in a context ``credential`` resolved
        (once the first request's outcome is known, if it is still running); None when no
        such call was made there."""
        row = self._contexts.owned(context_ref, credential)
        intent = self._store.intent(context_ref, call_id) if row is not None else None
        if row is None or intent is None:
            return None
        return await self._duplicate(row, Call(tool=intent.tool, call_id=call_id, arguments={}))

    async def made_before(
        self, request: ExecuteRequest, credential: Authenticated, objective: str
    ) -> Receipt | None:
        """The receipt of a call id ``credential`` made before for ``objective`` in another
        context of this build (an MCP client's call id names one call across its sessions):
        the duplicate receipt when the tool and arguments are the same, else ``DENIED``
        ``CALL_CONFLICT`` (logged); None when it made no such call elsewhere. The engine
        decides, on that context as it was while it lived."""
        call = Call(tool=request.tool, call_id=request.call_id, arguments=request.arguments)
        caller = self._contexts.caller(credential)
        subject = credential.principal.subject
        for intent in self._store.intents_with_call(call.call_id):
            row = self._contexts.owned(intent.context_ref, caller)
            if intent.context_ref == request.context_ref or row is None:
                continue
            if row.objective != objective:
                continue
            then = min(self._clock(), row.expires_at - 1)
            state = self._contexts.state_of(row, subject=subject)
            decision, job = self._decide(row, state, call, then, caller)
            if decision.outcome == DUPLICATE:
                return await self._duplicate(row, replace(call, tool=decision.tool))
            if decision.reason == R.CALL_CONFLICT:
                return await self._denied(row, call, decision, row.coordinates, job, caller)
        return None

    async def _lost_the_race(
        self, row: ContextRow, call: Call, caller: Caller, subject: str | None
    ) -> Receipt:
        """Another request claimed this call first: decide again on the stored state."""
        state = self._contexts.state_of(row, subject=subject)
        decision, job = self._decide(row, state, call, self._clock(), caller)
        if decision.outcome == DUPLICATE:
            return await self._duplicate(row, call)
        return await self._denied(row, call, decision, row.coordinates, job, caller)

    # ------------------------------------------------------------------ claiming

    async def _claim(
        self,
        row: ContextRow,
        call: Call,
        decision: Decision,
        seen: Seen,
        job: CallJob | None,
        caller: Caller,
        subject: str | None,
    ) -> Receipt:
        """Commit the intent durably (the store arbitrates: it decides again on the intents
        committed by then, unless they are the ``seen`` ones), then run the call."""
        fp = decision.fingerprint or ""
        base = self._contexts.resolved_state(row, subject)  # here: the writer touches no cache
        ir, who = self.ir, caller.principal

        def still_allowed(intents: list[IntentRow]) -> bool:
            state = with_history(base, intents, seen.approvals)
            return decide(ir, state, call, seen.now, who).outcome == ALLOW

        key = (row.context_ref, call.call_id)
        mark = self._shadowing.mark(job)
        created = key not in self._inflight
        event = self._inflight.setdefault(key, asyncio.Event())
        intent = self._recorder.prepared(
            "INTENT",
            row.context_ref,
            row.coordinates,
            **self._recorder.decision_fields(decision),
            **caller.fields(),
            **mark,
        )
        try:
            inserted, existing = await self._store.begin_intent_async(  # once durably committed
                row.context_ref,
                call.call_id,
                call.tool,
                fp,
                seen.now,
                decide=still_allowed,
                seen=seen.intents,
                record=intent,
            )
        except StoreError as exc:  # not claimed (503: retry), or claimed perhaps: UNKNOWN
            if created:
                self._settled(key, event)
            if not isinstance(exc, StoreUnanswered):
                raise
            LOG.error("a claim went unanswered by the store: the call is UNKNOWN")
            unanswered = reasons.STORE_UNAVAILABLE
            return events.receipt(call.call_id, call.tool, "UNKNOWN", reason=unanswered)
        if not inserted:
            # the event made here is this request's alone: no request of this process runs the
            # call (a PENDING row is another replica's, whose end duplicates read from the store)
            if created:
                self._settled(key, event)
            return await self._lost_the_race(row, call, caller, subject)
        self._shadowing.put(job, mark)  # its INTENT record is logged
        if existing is not None:
            self._contexts.intents.begun(existing)
        task = self._background.spawn(self._run(row, call, fp))  # first: the claim committed
        task.add_done_callback(lambda _done: self._settled(key, event))
        self._approvals.dispatched(row.context_ref, call)
        return await asyncio.shield(task)

    def _settled(self, key: Key, event: asyncio.Event) -> None:
        """The request owning ``event`` for the call is done: its duplicates read the store."""
        self._inflight.pop(key, None)
        event.set()

    # ------------------------------------------------------------------ running

    async def _run(self, row: ContextRow, call: Call, fp: str) -> Receipt:
        """Run a claimed call by its tool's executor, once its descriptor matches the tool's
        contract (``FAILED`` ``TOOL_UNAVAILABLE``, ``TOOL_INCOMPATIBLE`` or ``UPSTREAM_CHANGED``
        otherwise, never
        sent), and record its outcome."""
        tool = self.ir.tool_by_id[call.tool]
        executor = self._executors.get(tool.id)
        probe: Mapping[str, Any] = (
            await self._contexts.observe(tool.id)
            if executor is not None
            else {"state": "UNAVAILABLE"}
        )
        refused = reasons.TOOL_UNAVAILABLE if executor is None else availability(tool, probe)
        if executor is None or refused is not None:
            return await self._complete(row, call, fp, ("FAILED", refused, None, None), probe)
        build = self._recorder.build.digest
        outcome = await executor.dispatch(
            Dispatch(
                tool=tool,
                arguments=call.arguments,
                call_id=call.call_id,
                idempotency_key=idempotency_key(build, row.context_ref, call.call_id),
                coordinates={
                    "build": build,
                    **events.coordinates(row.coordinates),
                    "context": row.context_ref,
                },
            )
        )
        ended = (outcome.status, outcome.reason, outcome.output, outcome.error_code)
        return await self._complete(row, call, fp, ended, probe, error=_upstream_error(outcome))

    async def _complete(
        self,
        row: ContextRow,
        call: Call,
        fp: str,
        ended: tuple[str, str | None, Any, str | None],
        probe: Mapping[str, Any],
        *,
        error: UpstreamError | None = None,
    ) -> Receipt:
        """Store and log how the call ended (``ended``: its status, reason, output and the
        executor's own error code), then answer its receipt; a store that does not take it
        makes the receipt ``UNKNOWN`` ``STORE_UNAVAILABLE`` and the outcome is stored later.
        ``error`` (an upstream's own error) is in this receipt only, never stored or logged."""
        status, reason, output, executor_error = ended
        event = "UNKNOWN" if status == "UNKNOWN" else "RESULT"
        result = self._recorder.prepared(
            event,
            row.context_ref,
            row.coordinates,
            tool=call.tool,
            callId=call.call_id,
            fingerprint=fp,
            status=status,
            reason=reason,
            observation=dict(probe),
        )
        now = self._clock()
        try:
            if await self._store.complete_intent_async(
                row.context_ref, call.call_id, status, reason, now, record=result
            ):
                self._contexts.intents.completed(row.context_ref, call.call_id, status, reason, now)
        except StoreError:  # it ran, and its outcome is not stored yet: UNKNOWN to the caller
            self._record_later(row, call, (status, reason, now), result)
            unanswered = reasons.STORE_UNAVAILABLE
            return events.receipt(call.call_id, call.tool, "UNKNOWN", reason=unanswered)
        if self._metrics is not None:
            self._metrics.dispatched(call.tool, status)
        return events.receipt(
            call.call_id,
            call.tool,
            events.receipt_status(status),
            reason=reason,
            output=output,
            output_available=status == "SUCCEEDED",
            executor_error=executor_error,
            error=error,
        )

    def _record_later(
        self, row: ContextRow, call: Call, outcome: tuple[str, str | None, int], record: Any
    ) -> None:
        """Store a call's outcome once the store answers again (tried every few seconds, for
        as long as its context lives); until then its repeats say it is in flight."""
        LOG.error("a call's outcome went unrecorded by the store: recording it again later")

        async def again() -> None:
            status, reason, now = outcome
            wait = 0.5
            while self._clock() < row.expires_at:
                await asyncio.sleep(wait)
                try:
                    await self._store.complete_intent_async(
                        row.context_ref, call.call_id, status, reason, now, record=record
                    )
                except IntentUnknown:  # nothing of it to record
                    return
                except StoreError:
                    wait = min(10.0, wait * 2)
                    continue
                self._contexts.intents.completed(row.context_ref, call.call_id, status, reason, now)
                return

        task = asyncio.ensure_future(again())
        self._retries.add(task)
        task.add_done_callback(self._retries.discard)

    # ------------------------------------------------------------------ starting and stopping

    async def log_interrupted(self, intents: tuple[IntentRow, ...]) -> None:
        """Record, once, the intents a crash left without a receipt: they are UNKNOWN now."""
        for intent in intents:
            await self._recorder.write(
                "UNKNOWN",
                intent.context_ref,
                self._contexts.coordinates(intent.context_ref),
                tool=intent.tool,
                callId=intent.call_id,
                fingerprint=intent.fingerprint,
                status="UNKNOWN",
                reason=intent.reason or reasons.INTERRUPTED,
            )

    def stop_retrying(self) -> None:
        """Stop recording outcomes the store did not take (they are UNKNOWN at the next start,
        or once this replica's lease lapses)."""
        for task in list(self._retries):
            task.cancel()


def _upstream_error(outcome: Outcome) -> UpstreamError | None:
    """An upstream MCP server's own error, for the receipt: its JSON-RPC error's code, or its
    ``isError`` text (never stored or logged)."""
    if outcome.message is not None:
        return {"message": outcome.message}
    if outcome.reason == reasons.UPSTREAM_ERROR and outcome.error_code is not None:
        return {"code": outcome.error_code}
    return None
