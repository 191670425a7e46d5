"""The runtime's dispatch to an executor and the recording of its outcome: the call run by
its bound executor once the tool's descriptor matches its contract, then its result stored
(and logged) before the receipt is answered; a result the store did not take is stored again
once it answers, and the caller is told ``UNKNOWN`` meanwhile.

A mixin of :class:`servers.runtime.service.Runtime`, which provides what is named under
``TYPE_CHECKING`` below.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from policy.engine.state import Call
from servers.executor.interface import Dispatch, idempotency_key
from servers.runtime import events
from servers.store.rows import ContextRow, IntentUnknown, StoreError
from servers.wire import reasons
from servers.wire.answers import Receipt

if TYPE_CHECKING:
    from compiler.builds.build import Build
    from policy.ir import Project, Tool
    from servers.executor.interface import Executors
    from servers.log.decision_log import Admitted
    from servers.runtime.metrics import Metrics
    from servers.runtime.values import IntentsView
    from servers.store.interface import DispatchStore

LOG = logging.getLogger("seif.runtime")


class Outcomes:
    """Run a claimed call, and record its outcome."""

    if TYPE_CHECKING:  # provided by the Runtime dataclass
        build: Build
        store: DispatchStore
        executors: Executors
        metrics: Metrics | None
        _intents: IntentsView
        _retries: set[asyncio.Task[None]]

        @property
        def ir(self) -> Project: ...
        def clock(self) -> int: ...
        async def observe(self, tool_id: str) -> dict[str, Any]: ...
        def _prepared(
            self, event: str, ref: str | None, coords: Mapping[str, Any], **kw: Any
        ) -> Admitted: ...

    async def _run(self, row: ContextRow, call: Call, fp: str) -> Receipt:
        tool: Tool = self.ir.tool_by_id[call.tool]
        executor = self.executors.get(tool.id)
        probe = await self.observe(tool.id) if executor is not None else {"state": "UNAVAILABLE"}
        if (probe.get("state"), probe.get("version"), probe.get("contractDigest")) != (
            "READY",
            tool.version,
            tool.contract_digest,
        ) or executor is None:
            ready = probe.get("state") == "READY"
            reason = reasons.TOOL_INCOMPATIBLE if ready else reasons.TOOL_UNAVAILABLE
            return await self._complete(row, call, fp, "FAILED", reason, None, probe)
        outcome = await executor.dispatch(
            Dispatch(
                tool=tool,
                arguments=call.arguments,
                call_id=call.call_id,
                idempotency_key=idempotency_key(self.build.digest, row.context_ref, call.call_id),
                coordinates={
                    "build": self.build.digest,
                    **events.coordinates(row.coordinates),
                    "context": row.context_ref,
                },
            )
        )
        return await self._complete(
            row,
            call,
            fp,
            outcome.status,
            outcome.reason,
            outcome.output,
            probe,
            executor_error=outcome.error_code,
        )

    async def _complete(
        self,
        row: ContextRow,
        call: Call,
        fp: str,
        status: str,
        reason: str | None,
        output: Any,
        probe: Mapping[str, Any],
        *,
        executor_error: str | None = None,
    ) -> Receipt:
        event = "UNKNOWN" if status == "UNKNOWN" else "RESULT"
        result = self._prepared(
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
        now = self.clock()
        try:
            if await self.store.complete_intent_async(
                row.context_ref, call.call_id, status, reason, now, record=result
            ):
                self._intents.completed(row.context_ref, call.call_id, status, reason, now)
        except StoreError:  # it ran, and its outcome is not stored yet: UNKNOWN to the caller
            self._record_later(row, call, (status, reason, now), result)
            unanswered = reasons.STORE_UNAVAILABLE
            return events.receipt(call.call_id, call.tool, "UNKNOWN", reason=unanswered)
        if self.metrics is not None:
            self.metrics.dispatched(call.tool, status)
        ok = status == "SUCCEEDED"
        return events.receipt(
            call.call_id,
            call.tool,
            events.receipt_status(status),
            reason=reason,
            output=output,
            output_available=ok,
            executor_error=executor_error,
        )

    def _record_later(
        self, row: ContextRow, call: Call, outcome: tuple[str, str | None, int], record: Admitted
    ) -> None:
        """Store a call's outcome once the store answers again (tried every few seconds, for
        as long as its context lives); until then its repeats say it is in flight."""
        LOG.error("a call's outcome went unrecorded by the store: recording it again later")

        async def again() -> None:
            status, reason, now = outcome
            wait = 0.5
            while self.clock() < row.expires_at:
                await asyncio.sleep(wait)
                try:
                    await self.store.complete_intent_async(
                        row.context_ref, call.call_id, status, reason, now, record=record
                    )
                except IntentUnknown:  # nothing of it to record
                    return
                except StoreError:
                    wait = min(10.0, wait * 2)
                    continue
                self._intents.completed(row.context_ref, call.call_id, status, reason, now)
                return

        task = asyncio.ensure_future(again())
        self._retries.add(task)
        task.add_done_callback(self._retries.discard)
