"""A candidate build in shadow (``seif serve --shadow CANDIDATE_BUILD_DIR``): every decision the
runtime logs is compared, off the response path, with what the candidate would decide.

The event loop only appends a job to a bounded backlog (:meth:`ShadowWorker.submit`: a deque
append, no lock, no wake-up; a full backlog drops the job and counts it); one daemon thread
takes what has gathered every :data:`POLL_S` (so a busy runtime wakes it a few hundred times
a second, not once per decision) and compares
(:class:`policy.offline.shadow.Shadow`, pure) and hands each difference back to the loop,
which logs it as a ``SHADOW`` record. A comparison that raises is counted, named by its
exception's type in the server's log and in a ``SHADOW`` record of kind ``failed``; nothing
of it reaches a response. The candidate never calls an executor: it sees the observations the
promoted build's resolution made.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from compiler.builds.build import Build
from policy.engine.decision import Decision
from policy.engine.principal import PrincipalValue
from policy.engine.state import Call, ContextState
from policy.json.canonical import decode_canonical_cbor
from policy.json.value import thaw
from policy.offline.recorded import Inputs, Summary
from policy.offline.shadow import CACHE_SIZE, CALL, DISCLOSURE, FAILED, Shadow
from servers.log.decision_log import Admitted, DecisionLogError, Fragment, fragment
from servers.runtime.callers import resolver_of
from servers.runtime.metrics import ShadowMetrics
from servers.runtime.redact import shortened
from servers.store.rows import ContextRow

LOG = logging.getLogger("seif.runtime.shadow")
BACKLOG = 1024
"""Decisions waiting to be compared, at most; beyond, a decision is not compared (counted)."""
JOIN_S = 10.0
"""How long a shutdown waits for the backlog to be compared."""


@dataclass(frozen=True, slots=True)
class ResolveJob:
    """A resolution: its context (None when blocked), the record's coordinates, the engine's
    inputs and the promoted build's summary."""

    context_ref: str | None
    coords: Mapping[str, Any]
    at: int
    inputs: Inputs
    baseline: Summary


@dataclass(frozen=True, slots=True)
class CallJob:
    """A call decision: the context's row and state as the promoted build saw them (None for
    an unknown context), the call and the promoted build's decision."""

    row: ContextRow | None
    state: ContextState | None
    call: Call
    at: int
    decision: Decision
    principal: PrincipalValue | None = None
    """Who made the call (what its conditions read as ``principal``)."""

    @property
    def context_ref(self) -> str | None:
        return self.row.context_ref if self.row is not None else None

    @property
    def coords(self) -> Mapping[str, Any]:
        return self.row.coordinates if self.row is not None else {}


Job = ResolveJob | CallJob
Make = Callable[[Job, dict[str, Any]], Admitted]
"""The ``SHADOW`` record of a job's difference (its own fields given), admitted for the log;
called on the shadow's thread."""
WriteNow = Callable[[list[Admitted]], list[int | Exception]]
"""A log written from the calling thread (``DecisionLog.write_now``)."""
WriteLater = Callable[[list[Admitted]], None]
"""Records handed to the event loop to be appended (a log with no synchronous append)."""
BATCH = 256
"""Jobs compared, and their records written, at most per batch."""
POLL_S = 0.005
"""How long the thread sleeps when the backlog is empty."""


def _written(write: WriteNow, records: list[Admitted]) -> None:
    """Write ``records`` now; a record the log did not take is reported in the server's log."""
    for result in write(records):
        if isinstance(result, Exception):
            LOG.warning("a SHADOW record was not logged: %s", type(result).__name__)


def resolution_inputs(row: ContextRow) -> Inputs:
    """A stored context's resolution inputs (its recorded observations, decoded, and its
    recorded principal, whose subject is a fingerprint)."""
    observations = thaw(decode_canonical_cbor(row.observations))
    return Inputs(row.objective, row.coordinates, observations, resolver_of(row))


class ShadowWorker:
    """The queue and the thread that compares its jobs with ``candidate``."""

    def __init__(
        self,
        candidate: Build,
        metrics: ShadowMetrics | None = None,
        backlog: int = BACKLOG,
    ) -> None:
        if type(backlog) is not int or backlog < 1:
            raise ValueError("the shadow backlog must be an integer >= 1")
        self.candidate = candidate
        self.digest = candidate.digest
        self.mark: dict[str, Any] = {"shadow": candidate.digest}
        """The field a decision record carries when its decision was handed to the shadow."""
        self.metrics = metrics
        self._shadow = Shadow(candidate.project)
        self.backlog = backlog
        self._jobs: deque[Job] = deque()
        self._stopping = threading.Event()
        self._make: Make | None = None
        self._write: Callable[[list[Admitted]], object] | None = None
        self._thread: threading.Thread | None = None
        self._encoded: dict[int, tuple[Mapping[str, Any], Fragment]] = {}
        self._closed = False
        self.dropped = 0

    def start(self, make: Make, now: WriteNow | None, later: WriteLater) -> None:
        """Compare from now on; each difference's record (``make``) is written from the
        shadow's thread with ``now`` if given (the file log: the event loop is not involved),
        else handed to the running loop's ``later``."""
        loop = asyncio.get_running_loop()
        self._make = make
        if now is not None:
            self._write = partial(_written, now)
        else:
            self._write = lambda records: loop.call_soon_threadsafe(later, records)
        self._thread = threading.Thread(target=self._run, name="seif-shadow", daemon=True)
        self._thread.start()

    def reserve(self) -> Mapping[str, Any]:
        """Room for one job, without waiting: the mark for its decision's record (``shadow``:
        the candidate's digest), or nothing when it will not be compared (the backlog is full:
        counted). The job is handed over by :meth:`put` once its record is logged."""
        if self._thread is None or self._closed:
            return {}
        if len(self._jobs) >= self.backlog:
            self.dropped += 1
            if self.metrics is not None:
                self.metrics.dropped.inc()
            return {}
        return self.mark

    def put(self, job: Job) -> None:
        """Queue a job :meth:`reserve` made room for (a deque append: atomic, the thread pops
        from the other end; the jobs reserved at once may pass the bound by as many)."""
        if not self._closed:
            self._jobs.append(job)

    def _run(self) -> None:
        while True:
            batch = self._next_batch()
            if not batch:
                if self._stopping.is_set():
                    return
                self._stopping.wait(POLL_S)
                continue
            try:
                self._compare_batch(batch)
            except RuntimeError:  # the loop is closed: nothing more can be logged
                return
            except Exception as exc:  # never the thread's end: the next batch is compared
                LOG.warning("a batch of shadow comparisons failed: %s", type(exc).__name__)

    def _compare_batch(self, batch: list[Job]) -> None:
        records = []
        for job in batch:
            record = self._recorded(job)
            if record is not None:
                records.append(record)
        if records:
            assert self._write is not None
            self._write(records)

    def _next_batch(self) -> list[Job]:
        """The oldest jobs of the backlog, at most :data:`BATCH` (none: it is empty)."""
        batch: list[Job] = []
        jobs = self._jobs
        while jobs and len(batch) < BATCH:
            batch.append(jobs.popleft())
        return batch

    def _recorded(self, job: Job) -> Admitted | None:
        """The ``SHADOW`` record of ``job``'s difference, or None; one that cannot be made
        is reported in the server's log."""
        fields = self._compared(job)
        if fields is None:
            return None
        assert self._make is not None
        try:
            return self._make(job, fields)
        except DecisionLogError as exc:
            LOG.warning("a SHADOW record was refused by the log: %s", type(exc).__name__)
            return None

    def _compared(self, job: Job) -> dict[str, Any] | None:
        """The ``SHADOW`` fields of ``job``'s difference, or None; a failure is one too."""
        kind = DISCLOSURE if isinstance(job, ResolveJob) else CALL
        try:
            found = self._difference(job)
        except Exception as exc:  # the candidate's failure is reported, never raised
            LOG.warning("a shadow comparison failed: %s", type(exc).__name__)
            if self.metrics is not None:
                self.metrics.failures.inc()
            return {"kind": FAILED, "of": kind, "error": type(exc).__name__, **self._about(job)}
        if self.metrics is not None:
            self.metrics.compared.labels(kind).inc()
        if found is None:
            return None
        if self.metrics is not None:
            self.metrics.differences.labels(kind).inc()
        return {"kind": kind, kind: found, **self._about(job)}

    def _difference(self, job: Job) -> Mapping[str, Any] | Fragment | None:
        if isinstance(job, ResolveJob):
            change = self._shadow.resolution(job.inputs, job.baseline, job.context_ref)
            return None if change is None else self._fragment(change)
        row = job.row
        inputs = partial(resolution_inputs, row) if row is not None else None
        call = self._shadow.call(job.state, inputs, job.call, job.at, job.decision, job.principal)
        if call is None:
            return None
        return {**call.to_json(), "tool": shortened(call.tool)}  # as the client sent it

    def _fragment(self, change: Mapping[str, Any]) -> Fragment:
        """``change`` as the record field ``disclosure``, encoded once for every record of an
        equal resolution (the comparer hands out the same object for those)."""
        found = self._encoded.get(id(change))
        if found is not None and found[0] is change:
            return found[1]
        encoded = fragment(DISCLOSURE, change)
        if len(self._encoded) >= CACHE_SIZE:
            self._encoded.clear()
        self._encoded[id(change)] = (change, encoded)
        return encoded

    def _about(self, job: Job) -> dict[str, Any]:
        about: dict[str, Any] = {"candidate": self.digest, "at": job.at}
        if isinstance(job, ResolveJob):
            about["objective"] = job.inputs.objective
        return about

    async def close(self) -> None:
        """Compare what is queued (for at most :data:`JOIN_S`), then stop. Idempotent."""
        if self._closed:
            return
        self._closed = True
        thread = self._thread
        if thread is None:
            return
        await asyncio.get_running_loop().run_in_executor(None, self._stop, thread)
        await asyncio.sleep(0)  # the differences handed back run now

    def _stop(self, thread: threading.Thread) -> None:
        self._stopping.set()  # the thread ends once the backlog is empty
        thread.join(JOIN_S)
        if thread.is_alive():  # a comparison that does not end: left behind (a daemon)
            LOG.warning("the shadow did not finish its backlog: %d decisions", len(self._jobs))
