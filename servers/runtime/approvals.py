"""Approvals: approve, reject, the approval status an application reads, the calls held for
approval (:class:`~servers.runtime.held.HeldCalls`) and the ``APPROVAL_EXPIRED`` records
of what ran out unused. Every decision is still the engine's (an approval is recorded through
``ContextState.record_approval``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from policy import reasons as R
from policy.engine.decision import Decision
from policy.engine.state import Call
from policy.json.canonical import EncodingError
from servers.identity.principal import Authenticated
from servers.runtime import events
from servers.runtime.contexts import Contexts
from servers.runtime.held import HeldCalls, waiting
from servers.runtime.records import Recorder
from servers.runtime.values import Exclusive
from servers.store.rows import ApprovalRow, ContextRow, HeldCall, StoreError
from servers.support.tasks import Background
from servers.wire.answers import Approval, ApprovalStatus, Rejection
from servers.wire.errors import ErrorCode, Refused
from servers.wire.paging import Listed, Page
from servers.wire.requests import DecisionRequest

if TYPE_CHECKING:
    from policy.ir import Project


LOG = logging.getLogger("seif.runtime")
APPROVAL_DENIALS = frozenset({R.APPROVAL_REQUIRED, R.APPROVAL_INVALID, R.APPROVAL_EXPIRED})


class Approvals:
    """Approve and reject (one at a time), approval status, held calls and their expiries."""

    def __init__(
        self,
        *,
        contexts: Contexts,
        recorder: Recorder,
        held: HeldCalls,
        exclusive: Exclusive,
        background: Background,
    ) -> None:
        self._contexts = contexts
        self.store = contexts.store
        self._recorder = recorder
        self.clock = recorder.clock
        self.held = held
        """The calls held for approval, with their arguments, bounded and swept on expiry."""
        self.exclusive = exclusive
        """One holder of a name at a time across replicas: one approve or reject of a call."""
        self._background = background
        self._deciding = asyncio.Lock()
        """Held by one approve or reject at a time."""
        self._watch_expiries()  # expiries of held calls and approvals are logged

    @property
    def ir(self) -> Project:
        return self._contexts.ir

    def _by_id(self, request: DecisionRequest) -> DecisionRequest:
        """The request with its ``tool`` as the tool id: an approver may name the tool by the
        function name the model saw, as an application may when it executes."""
        tool = request.tool
        if tool in self.ir.tool_by_id:
            return request
        return replace(request, tool=self.ir.tool_id_by_name.get(tool, tool))

    async def approve(self, request: DecisionRequest, approver: str) -> Approval:
        request = self._by_id(request)
        async with self._one_decision(request):  # one approve or reject at a time
            row, fp, now = self._decidable(request)
            tool, call_id = request.tool, request.call_id
            if await self._was_rejected(row.context_ref, call_id):
                message = "the call was rejected: it is not approvable"
                raise Refused(ErrorCode.CALL_REJECTED, message)
            if self._decided(row, call_id, now, fp):
                message = "these exact arguments are approved, or the call has run"
                raise Refused(ErrorCode.CALL_DECIDED, message)
            if self.held.requester_gone((row.context_ref, call_id)):
                message = "the request that asked for this call has gone: nobody can run it"
                raise Refused(ErrorCode.REQUESTER_GONE, message)
            return await self._approve(row, tool, call_id, fp, now, approver)

    @contextlib.asynccontextmanager
    async def _one_decision(self, request: DecisionRequest) -> AsyncIterator[None]:
        """One approve or reject at a time in this process (neither overtakes), and of one
        call at a time across every replica of a shared store."""
        name = json.dumps(["decide", request.context_ref, request.call_id])
        async with self.exclusive(name), self._deciding:  # the call's lock first: a wait for
            yield  # another replica's decision of it holds up no other call's

    def _decided(
        self, row: ContextRow, call_id: str, now: int, fingerprint: str | None = None
    ) -> bool:
        """Whether the call has run, or has an unexpired approval (of these exact arguments,
        given their ``fingerprint``)."""
        if self.store.intent(row.context_ref, call_id) is not None:
            return True
        return any(
            a.call_id == call_id
            and a.expires_at > now
            and (fingerprint is None or a.fingerprint == fingerprint)
            for a in self.store.approvals(row.context_ref)
        )

    def _decidable(self, request: DecisionRequest) -> tuple[ContextRow, str, int]:
        """The live context of an approve or reject, the arguments' fingerprint, and now."""
        row = self._contexts.row(request.context_ref)
        now = self.clock()
        if row is None:
            raise Refused(ErrorCode.CONTEXT_UNKNOWN)
        if now >= row.expires_at:
            raise Refused(ErrorCode.CONTEXT_EXPIRED)
        state = self._contexts.state_of(row)
        if request.tool not in state.disclosure.tool_ids:
            raise Refused(ErrorCode.TOOL_NOT_DISCLOSED)
        try:
            fp = state.fingerprint(request.arguments)
        except EncodingError:
            raise Refused(ErrorCode.ARGUMENTS_INVALID) from None
        return row, fp, now

    async def _approve(
        self, row: ContextRow, tool: str, call_id: str, fp: str, now: int, approver: str
    ) -> Approval:
        state = self._contexts.state_of(row)
        approval_id = "apr_" + secrets.token_urlsafe(18)
        approval = state.record_approval(
            approval_id, tool=tool, call_id=call_id, fingerprint=fp, now=now
        ).approvals[approval_id]
        stored = ApprovalRow(
            approval_id=approval_id,
            context_ref=row.context_ref,
            tool=tool,
            call_id=call_id,
            fingerprint=fp,
            expires_at=approval.expires_at,
            approver_id=approver,
        )
        approved = self._recorder.prepared(
            "APPROVED",
            row.context_ref,
            row.coordinates,
            tool=tool,
            callId=call_id,
            fingerprint=fp,
            approver=approver,
            approvalId=approval_id,
            expiresAt=approval.expires_at,
        )
        await self.store.save_approval_async(stored, record=approved)  # saved, then logged
        self.held.approved(row.context_ref, call_id, tool, fp)
        self._watch_expiries()
        self.held.watch_approval(approval_id, (row.context_ref, call_id), approval.expires_at)
        self.held.keep_swept(self.clock)
        return {"approvalId": approval_id, "expiresAt": events.iso(approval.expires_at)}

    async def reject(self, request: DecisionRequest, approver: str) -> Rejection:
        """Record that an approver refused the call (``callId`` in its context, whatever its
        arguments): it is no longer held nor approvable. The reason is never kept. 409
        ``CALL_REJECTED`` when it was rejected already, ``CALL_DECIDED`` when it has an
        unexpired approval or has been dispatched."""
        request = self._by_id(request)
        async with self._one_decision(request):
            row, fp, now = self._decidable(request)
            tool, call_id = request.tool, request.call_id
            key = (row.context_ref, call_id)
            if await self._was_rejected(row.context_ref, call_id):
                raise Refused(ErrorCode.CALL_REJECTED)
            if self._decided(row, call_id, now):
                raise Refused(ErrorCode.CALL_DECIDED)
            self.held.rejected(key)  # remembered first: from now on it is not approvable
            await self._recorder.write(
                "REJECTED",
                row.context_ref,
                row.coordinates,
                tool=tool,
                callId=call_id,
                fingerprint=fp,
                approver=approver,
            )
        return {"state": "REJECTED", "callId": call_id, "approver": approver}

    async def _was_rejected(self, context_ref: str, call_id: str) -> bool:
        """Rejected, as this process remembers it or, after a restart or once forgotten, as
        the decision log (durable) recorded it."""
        if self.held.outcome((context_ref, call_id)) == "REJECTED":
            return True

        def rejected(records: list[dict[str, Any]]) -> bool:
            return any(r.get("event") == "REJECTED" and r.get("callId") == call_id for r in records)

        if await self._recorder.log.trace_async(context_ref, rejected):
            self.held.remember((context_ref, call_id), "REJECTED")
            return True
        return False

    async def approval_status(
        self, context_ref: str, call_id: str, credential: Authenticated
    ) -> ApprovalStatus:
        """``GET /v1/context/tools/approvals/{contextRef}/{callId}``: ``REJECTED`` after a
        reject; ``APPROVED`` while an unexpired approval of the call exists and the call has
        not run; ``PENDING`` while it is held; ``EXPIRED`` when it (held, or approved) ran out
        unused; ``NONE`` otherwise. 404 ``CONTEXT_UNKNOWN`` for a context another credential
        resolved."""
        if self._contexts.owned(context_ref, credential) is None:
            raise Refused(ErrorCode.CONTEXT_UNKNOWN)
        now = self.clock()
        await self._sweep(now)
        key = (context_ref, call_id)
        if self.held.outcome(key) == "REJECTED":
            return {"state": "REJECTED"}
        if self.store.intent(context_ref, call_id) is not None:
            return {"state": "NONE"}  # it has run: nothing is waiting
        held = self.held.get(context_ref, call_id)
        approvals = [a for a in self.store.approvals(context_ref) if a.call_id == call_id]
        live = [
            a
            for a in approvals
            if a.expires_at > now and (held is None or a.fingerprint == held.fingerprint)
        ]
        if live:
            return {
                "state": "APPROVED",
                "approvalId": live[-1].approval_id,
                "expiresAt": events.iso(live[-1].expires_at),
            }
        if held is not None:
            return {"state": "PENDING", "expiresAt": events.iso(held.expires_at)}
        if await self._was_rejected(context_ref, call_id):
            return {"state": "REJECTED"}
        if self.held.outcome(key) == "EXPIRED" or approvals:
            return {"state": "EXPIRED"}
        return {"state": "NONE"}

    async def _sweep(self, now: int) -> None:
        """Drop what expired by ``now`` and wait for the ``APPROVAL_EXPIRED`` records that
        logs, so a status read after an expiry finds it logged."""
        self._watch_expiries()
        before = set(self._background.tasks)
        self.held.sweep(now)
        logging = [t for t in self._background.tasks if t not in before]
        if logging:
            await asyncio.gather(*[asyncio.shield(t) for t in logging], return_exceptions=True)

    def _watch_expiries(self) -> None:
        """Have the pending calls tell this runtime of expiries, to log them."""
        if self.held.on_expired is None:
            self.held.on_expired = self._expired_call
            self.held.on_approval_expired = self._expired_approval

    def _expired_call(self, item: HeldCall) -> None:
        self._log_soon(
            item.context_ref,
            tool=item.tool,
            callId=item.call_id,
            fingerprint=item.fingerprint,
            expired="PENDING",
        )

    def _expired_approval(self, approval_id: str, key: tuple[str, str]) -> None:
        if self.store.intent(*key) is not None:
            return  # used (or the call ran otherwise): nothing expired unused
        self.held.remember(key, "EXPIRED")
        self._log_soon(key[0], callId=key[1], approvalId=approval_id, expired="APPROVAL")

    def _log_soon(self, context_ref: str, **fields: Any) -> None:
        """Log ``APPROVAL_EXPIRED`` from a sweep (a plain call): a task the drain waits for."""
        coords = self._contexts.coordinates(context_ref)
        expired = self._recorder.write("APPROVAL_EXPIRED", context_ref, coords, **fields)
        self._background.spawn(expired)

    def pending_page(self, page: Page) -> Listed:
        """A page of the calls still approvable now (expired ones are dropped first), oldest
        first (:mod:`servers.wire.paging`). A dispatched call is no longer held: the
        dispatch forgets it in the same step in which the intents view learns of it, so no
        later denial can hold it again."""
        coordinates = self._contexts.coordinates
        return events.pending_page(self.held, self.clock(), coordinates, page, self._described)

    def pending_one(self, context_ref: str, call_id: str) -> Listed:
        """The page of one call, if it is still approvable now."""
        key = (context_ref, call_id)
        coordinates = self._contexts.coordinates
        return events.pending_one(self.held, self.clock(), coordinates, key, self._described)

    def _described(self, item: HeldCall) -> str:
        """The held call's tool's description in the build."""
        tool = self.ir.tool_by_id.get(item.tool)
        return tool.description if tool is not None else ""

    def denied(self, row: ContextRow, call: Call, decision: Decision) -> None:
        """A call the engine denied in ``row``: held, with its arguments (encoded), while it is
        approvable, if it was denied for want of an approval; counted against the credential
        that resolved its context."""
        if decision.reason not in APPROVAL_DENIALS:
            return
        now = self.clock()
        item = waiting(row.context_ref, call, decision, now, row.expires_at)
        if item is not None:
            assert row.credential_id is not None  # execute reached it through `owned`
            self.held.add(item, now, row.credential_id)
            self.held.keep_swept(self.clock)

    def dispatched(self, context_ref: str, call: Call) -> None:
        """A dispatched call's arguments are no longer held, nor, once its tool is used up in
        the context, any of that tool's. Best effort: a shared store that does not answer
        now leaves them to its tidying (never keeps the call from running)."""
        try:
            self.held.ran((context_ref, call.call_id), call.tool)
            self._forget_exhausted(context_ref, call.tool)
        except StoreError as exc:
            LOG.warning("held calls not forgotten after a dispatch: %s", type(exc).__name__)

    def _forget_exhausted(self, context_ref: str, tool_id: str) -> None:
        """A tool that used its ``maxCalls`` in a context can approve nothing more there."""
        if tool_id not in self.ir.approval_tools or not self.held.holds(context_ref):
            return  # the common case: nothing of it can be held
        used = sum(i.tool == tool_id for i in self._contexts.known_intents(context_ref))
        if used >= self.ir.tool_by_id[tool_id].max_calls:
            self.held.discard_tool(context_ref, tool_id)

    async def drain(self) -> None:
        """Stop sweeping: nothing expires once the runtime stops."""
        self.held.stop_sweeping()
