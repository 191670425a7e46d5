"""What the runtime needs of a dispatch store and of a decision log, whichever backs them.

Two backends implement them: SQLite in a data directory (``servers.store.sqlite.store.Store`` and
``servers.log.decision_log.DecisionLog``, one runtime process, the embedded default) and
PostgreSQL (``servers.store.postgres.store``, runtime replicas on one database). The runtime's
service layer (``servers.runtime.service``) is written against these protocols only.

The contract both keep:

- reads are plain calls (the event loop's, kept cheap: contexts never change once saved and
  are cached) and see every write whose call has returned, in this process or another;
- writes are coroutines that return once the write is durable; a ``record`` given with a write
  reaches the decision log if and only if the write took effect (for ``begin_intent_async``:
  the intent was inserted), after its commit or in its transaction;
- ``begin_intent_async`` is the once-only arbiter: ``decide`` (pure) runs on the context's
  intents as they are inside the claiming transaction, and a call id is inserted at most once
  per context, whoever claims it concurrently, by a constraint of the store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, TypeVar

from servers.log.chain import LogHead
from servers.log.encoding import Admitted
from servers.store.rows import (
    ApprovalRow,
    Claim,
    ContextRow,
    HeldCall,
    IntentRow,
    Reconciled,
    TurnRow,
)
from servers.wire.answers import StoreState

T = TypeVar("T")


class DispatchStore(Protocol):
    """Contexts, intents and approvals (:mod:`servers.store.interface`)."""

    interrupted: tuple[IntentRow, ...]
    """The intents found ``PENDING`` at open and made ``UNKNOWN`` (``INTERRUPTED``)."""

    def context(self, context_ref: str) -> ContextRow | None: ...

    def intents(self, context_ref: str) -> list[IntentRow]: ...

    def intent(self, context_ref: str, call_id: str) -> IntentRow | None: ...

    def intents_with_call(self, call_id: str) -> list[IntentRow]: ...

    def approvals(self, context_ref: str) -> list[ApprovalRow]: ...

    async def save_context_async(
        self, row: ContextRow, *, record: Admitted | None = None
    ) -> None: ...

    async def begin_intent_async(
        self,
        context_ref: str,
        call_id: str,
        tool: str,
        fingerprint: str,
        now_ms: int,
        *,
        decide: Callable[[list[IntentRow]], bool],
        seen: list[IntentRow] | None = None,
        record: Admitted | None = None,
    ) -> Claim: ...

    async def complete_intent_async(
        self,
        context_ref: str,
        call_id: str,
        status: str,
        reason: str | None,
        now_ms: int,
        *,
        record: Admitted | None = None,
    ) -> bool: ...

    async def save_approval_async(
        self, row: ApprovalRow, *, record: Admitted | None = None
    ) -> None: ...

    def observe_commits(self, observe: Callable[[float], None]) -> None:
        """Tell ``observe`` the seconds of every durable write (a metric)."""

    def close(self) -> None: ...


class RecordLog(Protocol):
    """The decision log the runtime appends to and reads traces from."""

    async def append_async(self, record: Mapping[str, Any]) -> int: ...

    async def append_admitted(self, prepared: Admitted) -> int: ...

    async def trace_async(
        self, context_ref: str, render: Callable[[list[dict[str, Any]]], T]
    ) -> T: ...

    async def head_async(self) -> LogHead:
        """The last record written: its seq and digest (``GET /v1/traces/head``), read off
        the event loop where it needs a read."""
        ...

    def observe_fsyncs(self, observe: Callable[[float], None]) -> None:
        """Tell ``observe`` the seconds of every fsync of the log (a metric; none when the
        log is a database table, which syncs its own)."""

    def close(self) -> None: ...


class TurnStore(Protocol):
    """The turns applications start (``POST /v1/turns``): in memory for one runtime
    (:class:`servers.store.memory.MemoryTurns`, bounded), in the shared store for replicas, so
    that a turn started through one replica is live on all and completed once."""

    def start(self, row: TurnRow, *, per_credential: int, now_ms: int) -> None:
        """Keep a new turn; the credential keeps its newest ``per_credential`` at most (its
        finished ones are forgotten first where the store can tell)."""

    def get(self, turn_id: str) -> TurnRow | None: ...

    def complete(self, turn_id: str, outcome: str) -> bool | None:
        """Record the turn's outcome: True once, False when it was completed already, None
        for no such turn."""


HeldPage = tuple[list[tuple[HeldCall | None, str]], bool]
"""A page of held calls: each call (None for one that could not be read, never listed) with the
cursor just after it, and whether more calls follow."""


class HeldStore(Protocol):
    """Where the calls a runtime holds for approval are shared (``servers.runtime.held`` keeps
    its own in memory, bounded, and writes each through here). One runtime shares them with no
    one (:class:`servers.store.memory.LocalHeld`: every method is a no-op, and its own calls
    are all there are); replicas keep them in their database (``held_calls``, arguments
    sealed), where every replica lists, approves and rejects any of them."""

    @property
    def shared(self) -> bool:
        """Whether the store lists every process's held calls (then :meth:`page` and
        :meth:`get` are the truth), or this process holds all there are."""
        ...

    @property
    def poll_s(self) -> float | None:
        """How often a wait reads the approval status again unwoken: None when every decision
        is made in this process (and wakes it)."""
        ...

    def put(self, item: HeldCall) -> bool:
        """Hold ``item`` (replacing an earlier request of its call); False for a call rejected
        (by any process), which is never held again."""
        ...

    def drop(self, context_ref: str, call_id: str) -> None:
        """Forget the call, whichever process holds it (it ran)."""

    def drop_own(self, item: HeldCall) -> None:
        """Forget this process's hold ``item``, if it is still the one stored (not a newer
        request of the call, held by another process)."""

    def expire_own(self, item: HeldCall, now: int) -> bool:
        """This process's hold ran out: forgotten, ``EXPIRED`` noted; False when that hold was
        no longer stored (approved, run, rejected or asked again elsewhere)."""
        ...

    def drop_matching(self, context_ref: str, call_id: str, tool: str, fingerprint: str) -> None:
        """Forget the call only if it is held with exactly this tool and fingerprint."""

    def mark_gone(self, item: HeldCall) -> None:
        """This process's hold ``item`` has no requester any more: marked so for every
        process (:attr:`~servers.store.rows.HeldCall.requester_gone` of what :meth:`get` and
        :meth:`page` give), if it is still the one stored (not a newer request of the call,
        held by another process); :meth:`put` of a new request clears the mark."""

    def drop_tool(self, context_ref: str, tool: str) -> None:
        """Forget a context's calls of ``tool`` (it can run no more there)."""

    def reject(self, context_ref: str, call_id: str, now: int) -> None:
        """The call is rejected: forgotten by every process, and never held again."""

    def note(self, context_ref: str, call_id: str, outcome: str, now: int) -> None:
        """How the call's wait ended (``EXPIRED``: its approval ran out unused)."""

    def outcome(self, context_ref: str, call_id: str) -> str | None:
        """``REJECTED``, ``EXPIRED`` or None, as every process sees it."""
        ...

    def get(self, context_ref: str, call_id: str, now: int) -> HeldCall | None:
        """The call if another process holds it, unexpired at ``now``, and it has not run."""
        ...

    def holds(self, context_ref: str, now: int) -> bool:
        """Whether any process holds a call of the context."""
        ...

    def page(self, now: int, after: str | None, limit: int, max_bytes: int) -> HeldPage:
        """The calls approvable at ``now`` after the cursor ``after``, oldest first: ``limit``
        at most, the last the one that brings their arguments to ``max_bytes``
        (:class:`~servers.wire.paging.CursorInvalid` for an ``after`` that is no cursor)."""
        ...

    def tidy(self, now: int) -> None:
        """End what the store keeps of holders that are gone, and forget old outcomes."""


Clock = Callable[[], int]


class Backend(Protocol):
    """Everything a runtime keeps, from the one backend chosen at start
    (:func:`servers.runtime.startup.prepare`): a data directory of one runtime
    (:class:`servers.store.sqlite.backend.LocalBackend`, SQLite and a decision-log file) or a
    replica's share of a PostgreSQL database
    (:class:`servers.store.postgres.backend.ReplicaBackend`). Nothing above the store asks which one
    it is."""

    @property
    def store(self) -> DispatchStore: ...

    @property
    def log(self) -> RecordLog: ...

    @property
    def turns(self) -> TurnStore: ...

    @property
    def held(self) -> HeldStore: ...

    @property
    def fingerprint_key(self) -> bytes:
        """The keyed fingerprints' key (the bindings' ``traceKeyRef``, or the data directory's
        own ``runtime.key``)."""
        ...

    @property
    def reconciled(self) -> Reconciled:
        """What the start-up reconciliation put back into the store from the log."""
        ...

    @property
    def shared(self) -> bool:
        """Whether other processes write this store too (replicas): a duplicate of a call
        running in another reads its intent until it is final, and approvals are decided one
        at a time across all (:meth:`exclusive`)."""
        ...

    def exclusive(self, name: str, wait_s: float = 10.0) -> AbstractAsyncContextManager[None]:
        """``name`` held by one holder at a time across every process sharing the store
        (waiting ``wait_s`` at most, then a ``StoreError``); nothing to hold for one runtime."""
        ...

    def state(self) -> StoreState | None:
        """What the store says of this process's share of it for ``GET /v1/ready``:
        ``READY``, ``LEASE_LOST`` (a replica whose lease lapsed claims nothing: restart it), or
        None when there is nothing to say (one runtime: the data directory is its own)."""
        ...

    async def upkeep(self, clock: Clock) -> None:
        """What the store needs while the runtime serves, until cancelled (a replica renews
        its lease and reaps the calls of replicas that were lost; one runtime needs nothing
        and returns at once)."""
        ...

    async def aclose(self) -> None:
        """Close the store and the log from the event loop, after the last write."""
        ...

    def close(self) -> None:
        """Release everything (idempotent): the store and the log if still open, and the data
        directory's lock last."""
        ...
