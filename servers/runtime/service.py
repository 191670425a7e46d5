"""The runtime's service layer: resolve, execute, approve, turns and traces.

Every policy decision is the engine's. This layer authenticates nothing (the handlers do), and
only loads state from the store, calls the engine, persists, logs and talks to executors. Time
comes from an injected clock (integer milliseconds), so tests can move it.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from compiler.builds.build import Build
from policy import reasons as R
from policy.engine.decision import ALLOW, DUPLICATE, Decision, decide
from policy.engine.disclosure import Disclosure, disclose, disclosure_context
from policy.engine.state import CONTEXT_TTL_MS, Call, ContextState, with_history
from policy.ir import Project
from policy.json.canonical import canonical_cbor, decode_canonical_cbor
from policy.json.value import thaw
from servers.config.files import Bindings
from servers.executor.interface import Executors
from servers.executor.observing import Observer
from servers.log.decision_log import Admitted, admit
from servers.runtime import events, redact
from servers.runtime.approvals import Approvals
from servers.runtime.events import receipt_status
from servers.runtime.metrics import Metrics
from servers.runtime.outcomes import Outcomes
from servers.runtime.peers import PeerWaits
from servers.runtime.pending import PendingCalls
from servers.runtime.resolved import Resolved, ResolvedCache
from servers.runtime.shadow import CallJob, ResolveJob, ShadowWorker
from servers.runtime.shadowing import Shadowing
from servers.runtime.turns import Turns
from servers.runtime.values import Exclusive, IntentsView, Seen, alone
from servers.store.interface import DispatchStore, RecordLog
from servers.store.rows import ApprovalRow, ContextRow, IntentRow, StoreError, StoreUnanswered
from servers.support import memo
from servers.wire import reasons
from servers.wire.answers import Receipt, ReceiptStatus, ToolState
from servers.wire.errors import ErrorCode, Refused
from servers.wire.requests import ExecuteRequest, ReportRequest, ResolveRequest

Clock = Callable[[], int]
LOG = logging.getLogger("seif.runtime")


@dataclass(frozen=True, slots=True)
class Opened:
    """A context just resolved: its ref, expiry, the resolution's input-determined parts, its
    coordinates and the fields of its ``DISCLOSED`` record."""

    context_ref: str
    expires_at: int
    resolved: Resolved
    coords: Mapping[str, Any]
    fields: Mapping[str, Any]
    shadow_job: ResolveJob | None = None
    """Its resolution's job for a shadow build, if one is loaded."""


APPROVAL_DENIALS = frozenset({R.APPROVAL_REQUIRED, R.APPROVAL_INVALID, R.APPROVAL_EXPIRED})


@dataclass
class Runtime(Approvals, Outcomes, Shadowing):
    build: Build
    bindings: Bindings
    store: DispatchStore
    log: RecordLog
    executors: Executors
    fingerprint_key: bytes
    clock: Clock
    turns: Turns
    """The turns applications start (``POST /v1/turns``)."""
    _disclosed: dict[str, Disclosure] = field(default_factory=dict)
    """Disclosures of contexts just resolved, until their state is first built."""
    _states: dict[str, ContextState] = field(default_factory=dict)
    _intents: IntentsView = field(default_factory=IntentsView)
    _resolved: ResolvedCache = field(default_factory=ResolvedCache)
    _inflight: dict[tuple[str, str], asyncio.Event] = field(default_factory=dict)
    pending: PendingCalls = field(default_factory=PendingCalls)
    """Calls waiting for approval, with their arguments, bounded and swept on expiry."""
    _tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    _retries: set[asyncio.Task[None]] = field(default_factory=set)
    """Outcomes being stored again (:meth:`_record_later`)."""
    _deciding: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held by one approve or reject at a time."""
    _observer: Observer = field(init=False)
    metrics: Metrics | None = None
    """The Prometheus instruments this runtime counts in (``GET /metrics``), if any."""
    exclusive: Exclusive = alone
    """One holder of a name at a time across replicas (one approve or reject of a call, one
    request of a named MCP call id); nothing to hold for one runtime."""
    peers: PeerWaits | None = None
    """Set when other processes write the store (replicas): a duplicate of a call running
    elsewhere reads its intent until it is final. None for one runtime, whose own calls in
    flight wake their duplicates."""
    shadow: ShadowWorker | None = None
    """A candidate build every logged decision is compared with (``--shadow``), if any."""
    _shadow_writes: set[asyncio.Task[int]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._observer = Observer(self.executors)
        self._watch_expiries()  # expiries of held calls and approvals are logged

    @property
    def ir(self) -> Project:
        return self.build.project

    async def observe(self, tool_id: str) -> dict[str, Any]:
        """The tool's availability now; concurrent refreshes of one tool share one request."""
        return await self._observer.observe(tool_id)

    async def readiness(self) -> dict[str, ToolState]:
        """Each bound tool's state: ``READY`` when its executor describes exactly the declared
        contract, ``INCOMPATIBLE`` when it describes another, ``UNAVAILABLE`` otherwise."""
        states: dict[str, ToolState] = {}
        for tool in self.ir.tools:
            if self.executors.get(tool.id) is not None:
                seen = await self.observe(tool.id)
                exact = (seen.get("state"), seen.get("version"), seen.get("contractDigest"))
                if exact == ("READY", tool.version, tool.contract_digest):
                    states[tool.id] = "READY"
                else:
                    ready = seen.get("state") == "READY"
                    states[tool.id] = "INCOMPATIBLE" if ready else "UNAVAILABLE"
        return states

    # ------------------------------------------------------------------ logging

    async def _log(
        self, event: str, context_ref: str | None, coords: Mapping[str, Any], **fields: Any
    ) -> None:
        record = self._record(event, context_ref, coords, **fields)
        await self.log.append_async(record)  # written and fsynced (grouped) off the loop

    def _prepared(
        self, event: str, ref: str | None, coords: Mapping[str, Any], **kw: Any
    ) -> Admitted:
        """A record checked now, for the store to log right after its write commits."""
        return admit(self._record(event, ref, coords, **kw))

    def _record(
        self, event: str, context_ref: str | None, coords: Mapping[str, Any], **fields: Any
    ) -> dict[str, Any]:
        record = {
            "event": event,
            "at": self.clock(),
            "build": self.build.digest,
            "environment": self.bindings.environment,
            "bindingRevision": self.bindings.revision,
            "coordinates": events.coordinates_field(coords),
            **fields,
        }
        if context_ref is not None:
            record["contextRef"] = context_ref
        return record

    # ------------------------------------------------------------------ resolve

    async def resolve(self, request: ResolveRequest, turn_id: str | None, credential: str) -> bytes:
        """The answer's JSON body; its input-determined parts are computed once (pure).
        ``credential`` (the resolving credential's id) owns the context: it is stored with
        it and named in its ``DISCLOSED`` record, and to any other credential the context
        does not exist."""
        opened = await self.open_context(request, turn_id, credential)
        return opened.resolved.body(
            context_ref=opened.context_ref, build=self.build.digest, expires_at=opened.expires_at
        )

    async def open_context(
        self, request: ResolveRequest, turn_id: str | None, credential: str
    ) -> Opened:
        """Resolve a new context (saved, then its ``DISCLOSED`` record logged): refused
        ``OBJECTIVE_UNKNOWN``, ``RESOLUTION_BLOCKED`` (logged too), or the context."""
        objective = request.objective
        coords = {
            "consumer": request.consumer or "",
            "environment": request.environment or "",
            "deployment": request.deployment or "",
            "trace": request.trace_id or "",
        }
        observations = await self._observer.observe_all(self.ir.candidate_tools.get(objective, ()))
        now = self.clock()
        found = self._resolved.get(self.ir, objective, observations, coords)
        disclosure = found.disclosure
        if disclosure.reason == R.OBJECTIVE_UNKNOWN:
            message = f"objective `{objective[:64]}` is not declared by this build"
            raise Refused(ErrorCode.OBJECTIVE_UNKNOWN, message)
        coords["objective"] = objective
        context_ref = "ctx_" + secrets.token_urlsafe(18) if disclosure.resolved else None
        job = self._shadow_resolution(context_ref, coords, now, observations, found.summary)
        mark = self._shadow_mark(job)
        fields = {
            "objective": objective,
            "resolvedAt": now,
            "observations": found.observations or observations,
            "disclosure": found.summary,
            "credential": credential,
        }
        disclosed = self._prepared("DISCLOSED", context_ref, coords, **fields, **mark)
        if context_ref is None:
            await self.log.append_admitted(disclosed)
            self._shadow_put(job, mark)
            causes, omitted = events.blocked_causes(disclosure)
            raise Refused(ErrorCode.RESOLUTION_BLOCKED, causes=causes, omitted=omitted)
        encoded = found.observations.cbor if found.observations else canonical_cbor(observations)
        row = self._context_row(context_ref, coords, encoded, now, turn_id, credential)
        await self.store.save_context_async(row, record=disclosed)  # saved, then logged
        self._shadow_put(job, mark)
        memo.keep(self._disclosed, context_ref, disclosure)
        self._intents.opened(context_ref)
        if self.metrics is not None:
            self.metrics.active.opened(row.expires_at)
        return Opened(context_ref, row.expires_at, found, coords, fields, job)

    def _context_row(
        self,
        context_ref: str,
        coords: Mapping[str, Any],
        observations: bytes,
        now: int,
        turn_id: str | None,
        credential: str,
    ) -> ContextRow:
        return ContextRow(
            context_ref=context_ref,
            build=self.build.digest,
            objective=coords["objective"],
            coordinates=coords,
            observations=observations,
            resolved_at=now,
            expires_at=now + CONTEXT_TTL_MS,
            binding_revision=self.bindings.revision,
            turn_id=turn_id,
            credential_id=credential,
        )

    async def log_disclosed_again(self, opened: Opened) -> None:
        """Log the ``DISCLOSED`` record of a context's disclosure once more (what it was
        resolved on, so it replays as the first did): a client shown the list again."""
        mark = self._shadow_mark(opened.shadow_job)  # compared again, as a what-if would
        await self.log.append_admitted(
            self._prepared("DISCLOSED", opened.context_ref, opened.coords, **opened.fields, **mark)
        )
        self._shadow_put(opened.shadow_job, mark)

    # ------------------------------------------------------------------ state

    def context_row(self, context_ref: str) -> ContextRow | None:
        row = self.store.context(context_ref)
        return row if row is not None and row.build == self.build.digest else None

    def owned_row(self, context_ref: str, credential: str) -> ContextRow | None:
        """The context of this build that ``credential`` resolved; None for any other (a
        leaked contextRef is no capability for another application)."""
        row = self.context_row(context_ref)
        return row if row is not None and row.owned_by(credential) else None

    def disclosure_of(self, row: ContextRow) -> Disclosure:
        """The context's disclosure, recomputed from its recorded observations (pure, so equal
        to what was disclosed) after a restart or an eviction, cached otherwise."""
        return self._resolved_state(row).disclosure

    def _resolved_state(self, row: ContextRow) -> ContextState:
        """The context as resolved, before any call: immutable, so kept (at most
        :data:`servers.support.memo.LIMIT` of them, the least recently used dropped first)."""
        found = memo.cached(self._states, row.context_ref)
        if found is None:
            disclosure = self._disclosed.pop(row.context_ref, None)
            if disclosure is None:
                observations = thaw(decode_canonical_cbor(row.observations))
                disclosure = disclose(self.ir, row.objective, observations, context=row.coordinates)
            found = ContextState(
                context_ref=row.context_ref,
                disclosure=disclosure,
                expires_at=row.expires_at,
                coordinates=disclosure_context(row.objective, row.coordinates),
                fingerprint_key=self.fingerprint_key,
            )
            memo.keep(self._states, row.context_ref, found)
        return found

    def state_of(
        self,
        row: ContextRow,
        intents: list[IntentRow] | None = None,
        approvals: list[ApprovalRow] | None = None,
    ) -> ContextState:
        """The engine's view of a stored context: as resolved, plus its intents and approvals."""
        intents = self.store.intents(row.context_ref) if intents is None else intents
        base = self._resolved_state(row)
        if approvals is None:
            approvals = self.store.approvals(row.context_ref)
        return with_history(base, intents, approvals)

    # ------------------------------------------------------------------ execute

    async def execute(self, request: ExecuteRequest, credential: str) -> Receipt:
        """The receipt of one call; a context ``credential`` did not resolve is unknown."""
        call = Call(
            tool=request.tool,
            call_id=request.call_id,
            arguments=request.arguments,
            approval_id=request.approval_id,
        )
        row = self.owned_row(request.context_ref, credential)
        if row is None:
            decision, job = self._decide(None, None, call, self.clock())
            return await self._denied(None, call, decision, {}, job)
        intents = self._intents.of(self.store, row.context_ref)
        wanted = self.ir.approval_tools  # by id, or by the function name the model saw
        approvals = (  # for other tools the context's approvals cannot change the decision
            self.store.approvals(row.context_ref)
            if call.tool in wanted or self.ir.tool_id_by_name.get(call.tool) in wanted
            else []
        )
        now = self.clock()
        decision, job = self._decide(row, self.state_of(row, intents, approvals), call, now)
        if decision.tool != call.tool:  # called by its function name: the id from here on
            call = replace(call, tool=decision.tool)
        if decision.outcome == DUPLICATE:
            return await self._duplicate(row, call)
        if decision.outcome != ALLOW:
            return await self._denied(row, call, decision, row.coordinates, job)
        assert decision.fingerprint is not None
        return await self._dispatch(row, call, decision, Seen(intents, approvals, now), job)

    def _decide(
        self, row: ContextRow | None, state: ContextState | None, call: Call, now: int
    ) -> tuple[Decision, CallJob | None]:
        """The engine's decision of a call, counted (``seif_decisions_total``), and its job for
        the shadow build, if one is loaded (compared once its record is logged)."""
        decision = decide(self.ir, state, call, now)
        if self.metrics is not None:
            self.metrics.decided(decision.outcome, decision.reason)
        return decision, self._shadow_call(row, state, call, now, decision)

    async def _denied(
        self,
        row: ContextRow | None,
        call: Call,
        decision: Decision,
        coords: Mapping[str, Any],
        job: CallJob | None,
    ) -> Receipt:
        if row is not None and decision.reason in APPROVAL_DENIALS:
            self._hold(row, call, decision)
        fields, mark = self._decision_fields(decision), self._shadow_mark(job)
        await self._log("DENIED", row.context_ref if row else None, coords, **fields, **mark)
        self._shadow_put(job, mark)
        return events.receipt(
            call.call_id, call.tool, "DENIED", reason=decision.reason, decision=decision
        )

    async def _duplicate(self, row: ContextRow, call: Call) -> Receipt:
        event = self._inflight.get((row.context_ref, call.call_id))
        tool = self.ir.tool_by_id[call.tool]
        try:
            async with asyncio.timeout(tool.timeout_ms / 1000):
                if event is not None:
                    await event.wait()
                if self.peers is not None:  # it may run on another replica (also when the
                    await self.peers.final(row.context_ref, call.call_id)  # event's owner lost)
        except TimeoutError:
            return events.receipt(
                call.call_id, call.tool, "UNKNOWN", duplicate=True, reason=reasons.IN_FLIGHT
            )
        status, reason = self._intent_status(row.context_ref, call.call_id)
        return events.receipt(call.call_id, call.tool, status, reason=reason, duplicate=True)

    async def receipt_of(self, context_ref: str, call_id: str, credential: str) -> Receipt | None:
        """The duplicate receipt of a call made before in a context ``credential`` resolved
        (once the first request's outcome is known, if it is still running); None when no
        such call was made there."""
        row = self.owned_row(context_ref, credential)
        intent = self.store.intent(context_ref, call_id) if row is not None else None
        if row is None or intent is None:
            return None
        return await self._duplicate(row, Call(tool=intent.tool, call_id=call_id, arguments={}))

    async def made_before(
        self, request: ExecuteRequest, credential: str, objective: str
    ) -> Receipt | None:
        """The receipt of a call id ``credential`` made before for ``objective`` in another
        context of this build (an MCP client's call id names one call across its sessions):
        the duplicate receipt when the tool and arguments are the same, else ``DENIED``
        ``CALL_CONFLICT`` (logged); None when it made no such call elsewhere. The engine
        decides, on that context as it was while it lived."""
        call = Call(tool=request.tool, call_id=request.call_id, arguments=request.arguments)
        for intent in self.store.intents_with_call(call.call_id):
            row = self.owned_row(intent.context_ref, credential)
            if intent.context_ref == request.context_ref or row is None:
                continue
            if row.objective != objective:
                continue
            then = min(self.clock(), row.expires_at - 1)
            decision, job = self._decide(row, self.state_of(row), call, then)
            if decision.outcome == DUPLICATE:
                return await self._duplicate(row, replace(call, tool=decision.tool))
            if decision.reason == R.CALL_CONFLICT:
                return await self._denied(row, call, decision, row.coordinates, job)
        return None

    def _intent_status(self, context_ref: str, call_id: str) -> tuple[ReceiptStatus, str | None]:
        for intent in self.store.intents(context_ref):
            if intent.call_id == call_id:
                return receipt_status(intent.status), intent.reason
        return "UNKNOWN", None

    async def _dispatch(
        self, row: ContextRow, call: Call, decision: Decision, seen: Seen, job: CallJob | None
    ) -> Receipt:
        """Commit the intent durably (the store arbitrates: it decides again on the intents
        committed by then, unless they are the ``seen`` ones), then talk to the executor."""
        fp = decision.fingerprint or ""

        base = self._resolved_state(row)  # here: the writer thread touches no cache

        def still_allowed(intents: list[IntentRow]) -> bool:
            state = with_history(base, intents, seen.approvals)
            return decide(self.ir, state, call, seen.now).outcome == ALLOW

        key = (row.context_ref, call.call_id)
        mark = self._shadow_mark(job)
        created = key not in self._inflight
        event = self._inflight.setdefault(key, asyncio.Event())
        try:
            inserted, existing = await self.store.begin_intent_async(  # once durably committed
                row.context_ref,
                call.call_id,
                call.tool,
                fp,
                seen.now,
                decide=still_allowed,
                seen=seen.intents,
                record=self._prepared(
                    "INTENT",
                    row.context_ref,
                    row.coordinates,
                    **self._decision_fields(decision),
                    **mark,
                ),
            )
        except StoreError as exc:  # not claimed (503: retry), or claimed perhaps: UNKNOWN
            if created:
                self._settled(key, event)
            if not isinstance(exc, StoreUnanswered):
                raise
            LOG.error("a claim went unanswered by the store: the call is UNKNOWN")
            unanswered = reasons.STORE_UNAVAILABLE
            return events.receipt(call.call_id, call.tool, "UNKNOWN", reason=unanswered)
        if inserted:
            self._shadow_put(job, mark)  # its INTENT record is logged
        if inserted and existing is not None:
            self._intents.begun(existing)
        if not inserted:
            # the event made here is this request's alone: no request of this process runs the
            # call (a PENDING row is another replica's, whose end duplicates read from the store)
            if created:
                self._settled(key, event)
            return await self.execute_again(row, call)
        task = asyncio.ensure_future(self._run(row, call, fp))  # first: the claim committed
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

        task.add_done_callback(lambda _done: self._settled(key, event))
        self._no_longer_held(row.context_ref, call)
        return await asyncio.shield(task)

    def _settled(self, key: tuple[str, str], event: asyncio.Event) -> None:
        """The request owning ``event`` for the call is done: its duplicates read the store."""
        self._inflight.pop(key, None)
        event.set()

    def _no_longer_held(self, context_ref: str, call: Call) -> None:
        """A dispatched call's arguments are no longer held, nor, once its tool is used up in
        the context, any of that tool's. Best effort: a shared store that does not answer
        now leaves them to its tidying (never keeps the call from running)."""
        try:
            self.pending.ran((context_ref, call.call_id), call.tool)
            self._forget_exhausted(context_ref, call.tool)
        except StoreError as exc:
            LOG.warning("held calls not forgotten after a dispatch: %s", type(exc).__name__)

    async def execute_again(self, row: ContextRow, call: Call) -> Receipt:
        """Lost the race to another request for this call: decide again on the stored state."""
        decision, job = self._decide(row, self.state_of(row), call, self.clock())
        if decision.outcome == DUPLICATE:
            return await self._duplicate(row, call)
        return await self._denied(row, call, decision, row.coordinates, job)

    async def log_interrupted(self, intents: tuple[IntentRow, ...]) -> None:
        """Record, once, the intents a crash left without a receipt: they are UNKNOWN now."""
        for intent in intents:
            row = self.store.context(intent.context_ref)
            await self._log(
                "UNKNOWN",
                intent.context_ref,
                row.coordinates if row is not None else {},
                tool=intent.tool,
                callId=intent.call_id,
                fingerprint=intent.fingerprint,
                status="UNKNOWN",
                reason=intent.reason or reasons.INTERRUPTED,
            )

    async def drain(self) -> None:
        """Wait for executions still running (their callers may have gone); stop sweeping,
        and stop recording outcomes the store did not take (they are UNKNOWN at the next
        start, or once this replica's lease lapses)."""
        for task in list(self._retries):
            task.cancel()
        self.pending.stop_sweeping()
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        await self.close_shadow()

    def _decision_fields(self, decision: Decision) -> dict[str, Any]:
        tool = self.ir.tool_by_id.get(decision.tool)
        parameters = tool.parameters if tool is not None else None
        fields = events.decision_fields(decision, parameters, self.fingerprint_key)
        if tool is None:  # neither a tool id nor a function name: what the client sent, cut
            fields["tool"] = redact.shortened(decision.tool)
        return fields

    async def report(self, request: ReportRequest, credential: str) -> None:
        row = self.owned_row(request.context_ref, credential)
        if row is None:
            raise Refused(ErrorCode.CONTEXT_UNKNOWN)
        disclosed = {t.name for t in self.disclosure_of(row).tools}
        names = list(request.tools)
        await self._log(  # names shortened and counted: redact.names_field
            "REPORTED",
            row.context_ref,
            row.coordinates,
            **redact.names_field("tools", names),
            **redact.names_field("undisclosed", [n for n in names if n not in disclosed]),
        )
