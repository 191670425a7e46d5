"""The runtime's service layer: one :class:`Runtime` composed of the parts that do the work.

Every policy decision is the engine's. This layer authenticates nothing (the handlers do), and
only loads state from the store, calls the engine, persists, logs and talks to executors. Time
comes from an injected clock (integer milliseconds), so tests can move it.

The parts, each in a module of its own, with what it needs passed in:

- :class:`~servers.runtime.contexts.Contexts`: resolve a context, find it again, the engine's
  view of it, and the tools' availability;
- :class:`~servers.runtime.dispatch.Dispatcher`: a call from the engine's decision to its
  receipt (claimed once through the store, run by its executor, its outcome recorded);
- :class:`~servers.runtime.approvals.Approvals`: approve, reject, approval status, and the
  calls held for approval (:class:`~servers.runtime.held.HeldCalls`);
- :class:`~servers.runtime.turns.Turns`; :class:`~servers.runtime.shadowing.Shadowing` (a
  candidate build compared on live traffic); :class:`~servers.runtime.records.Recorder` (the
  decision log's records).
"""

from __future__ import annotations

from collections.abc import Callable

from compiler.builds.build import Build
from policy.ir import Project
from servers.config.files import Bindings
from servers.executor.interface import Executors
from servers.runtime.approvals import Approvals
from servers.runtime.contexts import Contexts, Opened
from servers.runtime.dispatch import Dispatcher
from servers.runtime.held import HeldCalls
from servers.runtime.metrics import Metrics
from servers.runtime.peers import PeerWaits
from servers.runtime.records import Recorder
from servers.runtime.shadow import ShadowWorker
from servers.runtime.shadowing import Shadowing
from servers.runtime.turns import Turns
from servers.store.interface import Backend
from servers.support.tasks import Background

Clock = Callable[[], int]
__all__ = ["Opened", "Runtime"]


class Runtime:
    """What the HTTP and MCP layers ask: its parts, composed once per runtime."""

    def __init__(
        self,
        *,
        build: Build,
        bindings: Bindings,
        backend: Backend,
        executors: Executors,
        clock: Clock,
        held: HeldCalls,
        require_turn: bool = False,
        metrics: Metrics | None = None,
        shadow: ShadowWorker | None = None,
    ) -> None:
        self.build = build
        self.clock = clock
        self.background = Background()
        """Work that outlives its request (dispatches, expiry records), drained at shutdown."""
        self.recorder = Recorder(build, bindings, backend.log, clock, backend.fingerprint_key)
        self.shadowing = Shadowing(shadow, self.recorder)
        self.contexts = Contexts(
            store=backend.store,
            recorder=self.recorder,
            shadowing=self.shadowing,
            executors=executors,
            metrics=metrics,
        )
        self.approvals = Approvals(
            contexts=self.contexts,
            recorder=self.recorder,
            held=held,
            exclusive=backend.exclusive,
            background=self.background,
        )
        self.dispatcher = Dispatcher(
            contexts=self.contexts,
            recorder=self.recorder,
            approvals=self.approvals,
            shadowing=self.shadowing,
            executors=executors,
            background=self.background,
            metrics=metrics,
            peers=PeerWaits(backend.store) if backend.shared else None,
        )
        self.turns = Turns(backend.turns, clock, required=require_turn)
        self.exclusive = backend.exclusive
        """One holder of a name at a time across replicas (one request of a named MCP call id,
        one approve or reject of a call); nothing to hold for one runtime."""

    @property
    def ir(self) -> Project:
        return self.build.project

    @property
    def held(self) -> HeldCalls:
        """The calls held for approval."""
        return self.approvals.held

    async def start(self) -> None:
        """Begin serving: the shadow's comparisons, and the records of the intents a crash
        left without a receipt (UNKNOWN now)."""
        self.shadowing.start()
        await self.dispatcher.log_interrupted(self.contexts.store.interrupted)

    async def drain(self) -> None:
        """Wait for executions still running (their callers may have gone); stop sweeping,
        and stop recording outcomes the store did not take (they are UNKNOWN at the next
        start, or once this replica's lease lapses)."""
        self.dispatcher.stop_retrying()
        await self.approvals.drain()
        await self.background.drain()
        await self.shadowing.close()
