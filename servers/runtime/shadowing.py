"""The runtime's side of a shadow build: each logged decision handed to the shadow worker
(``servers.runtime.shadow``), and each difference it finds logged as a ``SHADOW`` record.

Without a shadow build every method here is a no-op returning no mark.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from functools import partial
from typing import Any

from policy.engine.decision import DUPLICATE, Decision
from policy.engine.principal import PrincipalValue
from policy.engine.state import Call, ContextState
from policy.offline.recorded import Inputs, Summary
from servers.log.decision_log import Admitted, Fragment, admit
from servers.runtime import events
from servers.runtime.records import Recorder
from servers.runtime.shadow import BACKLOG, CallJob, Job, ResolveJob, ShadowWorker
from servers.store.rows import ContextRow

LOG = logging.getLogger("seif.runtime.shadow")
NO_MARK: Mapping[str, Any] = {}


class Shadowing:
    """Hand decisions to the shadow; log what it finds."""

    def __init__(self, shadow: ShadowWorker | None, recorder: Recorder) -> None:
        self.shadow = shadow
        """A candidate build every logged decision is compared with (``--shadow``), if any."""
        self._recorder = recorder
        self._writes: set[asyncio.Task[int]] = set()

    def start(self) -> None:
        """Start comparing (on the running loop), if a shadow build is loaded: a log that can
        be written from the shadow's thread is (the file log), any other from the loop."""
        if self.shadow is not None:
            now = getattr(self._recorder.log, "write_now", None)  # not fsynced: the next one's is
            later = partial(now, sync=False) if now is not None else None
            self.shadow.start(self._shadow_record, later, self._shadow_append)

    def resolution(
        self,
        context_ref: str | None,
        coords: Mapping[str, Any],
        at: int,
        observations: Mapping[str, Mapping[str, Any]],
        baseline: Summary | Fragment,
        principal: PrincipalValue | None = None,
    ) -> ResolveJob | None:
        """A resolution's job for the shadow: its inputs as its ``DISCLOSED`` record holds them
        (what a what-if reads back) and the promoted build's summary. None without a shadow:
        nothing is built then."""
        if self.shadow is None:
            return None
        inputs = Inputs(coords["objective"], events.coordinates(coords), observations, principal)
        summary = baseline.value if isinstance(baseline, Fragment) else baseline
        return ResolveJob(context_ref, dict(coords), at, inputs, summary)

    def call(
        self,
        row: ContextRow | None,
        state: ContextState | None,
        call: Call,
        at: int,
        decision: Decision,
        principal: PrincipalValue | None = None,
    ) -> CallJob | None:
        """A call decision's job for the shadow (made by ``principal``): None without one, and
        for a duplicate (it is not logged: it answers from the first call's record)."""
        if self.shadow is None or decision.outcome == DUPLICATE:
            return None
        return CallJob(row, state, call, at, decision, principal)

    def mark(self, job: Job | None) -> Mapping[str, Any]:
        """Room for ``job`` in the shadow's backlog: the mark its decision's record carries
        (nothing when it is not compared). Only a decision that is logged is compared: the
        caller hands the job over with :meth:`put` once its record is."""
        if job is None or self.shadow is None:
            return NO_MARK
        return self.shadow.reserve()

    def put(self, job: Job | None, mark: Mapping[str, Any]) -> None:
        """Compare ``job``, its decision's record (marked ``mark``) being logged."""
        if job is not None and mark and self.shadow is not None:
            self.shadow.put(job)

    def _shadow_record(self, job: Job, fields: dict[str, Any]) -> Admitted:
        """A difference's ``SHADOW`` record, admitted (on the shadow's thread)."""
        return admit(self._recorder.record("SHADOW", job.context_ref, job.coords, **fields))

    def _shadow_append(self, records: list[Admitted]) -> None:
        """On the loop: append the records (a failure is reported in the server's log); with
        :data:`~servers.runtime.shadow.BACKLOG` appends in flight already (a slow database),
        a record is dropped and counted instead."""
        for record in records:
            if len(self._writes) >= BACKLOG:
                LOG.warning("a SHADOW record was dropped: too many appends in flight")
                if self.shadow is not None and self.shadow.metrics is not None:
                    self.shadow.metrics.dropped.inc()
                continue
            task = asyncio.ensure_future(self._recorder.log.append_admitted(record))
            self._writes.add(task)
            task.add_done_callback(self._shadow_written)

    def _shadow_written(self, task: asyncio.Task[int]) -> None:
        self._writes.discard(task)
        if not task.cancelled() and task.exception() is not None:
            LOG.warning("a SHADOW record was not logged: %s", type(task.exception()).__name__)

    async def close(self) -> None:
        """Compare the backlog, then wait for its records to be logged."""
        if self.shadow is None:
            return
        await self.shadow.close()
        if self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)
