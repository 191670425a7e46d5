"""A runtime replica's backend: its share of a PostgreSQL store (``seif serve --store
postgresql://...``), a :class:`~servers.store.interface.Backend`.

The replica is named (``--replica-id``, by default host and pid) in the store's replica table
and in every record it logs; it holds a lease the store renews every third of its length,
and an intent of a replica whose lease lapsed is made ``UNKNOWN`` by the others
(``servers.store.postgres.store``). The fingerprint key must come from the bindings'
``traceKeyRef``: every replica must compute the same fingerprints, so a replica without one is
refused, and so is one whose key is not the one the store records (``TRACE_KEY_CHANGED``,
``servers.store.keycheck``)."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

import psycopg

from policy.diagnostic import Diagnostic, Location
from servers.config.files import Bindings, ConfigError, refusal
from servers.store import keycheck
from servers.store.interface import Clock, TurnStore
from servers.store.postgres.held import HeldTable
from servers.store.postgres.sealing import Sealer
from servers.store.postgres.store import PgDecisionLog, PgStore
from servers.store.postgres.turns import StoredTurns
from servers.store.rows import Reconciled, StoreError
from servers.wire.answers import StoreState

LOG = logging.getLogger("seif.runtime")
LEASE_MS = 15_000
"""How long a replica's lease lasts unrenewed by default (``--lease-timeout``): its intents
become ``UNKNOWN`` after that. It is renewed every third of it."""
MIN_LEASE_MS = 1_000


@dataclass(eq=False)
class ReplicaBackend:
    """The replica's store and log, open until :meth:`close`, its turns and the calls it holds
    for approval shared through the store (arguments sealed with a key derived from the trace
    key)."""

    store: PgStore
    log: PgDecisionLog
    fingerprint_key: bytes = field(repr=False)
    replica_id: str = ""
    lease_ms: int = LEASE_MS
    shared: bool = True
    reconciled: Reconciled = field(default_factory=Reconciled)  # nothing to reconcile: one database
    turns: TurnStore = field(init=False)
    held: HeldTable = field(init=False)
    """The calls held for approval, every replica's."""

    def __post_init__(self) -> None:
        self.turns = StoredTurns(self.store)
        self.held = HeldTable(self.store, Sealer(self.fingerprint_key))

    def close(self) -> None:
        self.store.close()
        self.log.close()

    async def aclose(self) -> None:
        """Close from the event loop: the pool's connections too, the lease released."""
        await self.store.aclose()
        self.log.close()

    def state(self) -> StoreState:
        """``READY``, or ``LEASE_LOST`` once the lease lapsed (this replica claims no more:
        restart it; a new process takes a new lease)."""
        return "LEASE_LOST" if self.store.lease_lost else "READY"

    def exclusive(self, name: str, wait_s: float = 10.0) -> AbstractAsyncContextManager[None]:
        """``name`` held by this replica alone (``PgStore.exclusive``)."""
        return self.store.exclusive(name, wait_s)

    async def upkeep(self, clock: Clock) -> None:
        """Renew the lease every third of :attr:`lease_ms` and make the intents of replicas whose
        lease lapsed ``UNKNOWN`` (logged by the store), until cancelled. A lease found lapsed
        (this process stalled past it) stops here: the store refuses this replica's claims
        from then on, so nothing it no longer owns is dispatched."""
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            try:
                if not await self._upkeep(clock):
                    return
            except (StoreError, psycopg.Error) as exc:  # the store did not answer: next time
                LOG.error("replica %s: store upkeep failed: %s", self.replica_id,
                          type(exc).__name__)  # fmt: skip

    async def _upkeep(self, clock: Clock) -> bool:
        """One renewal, tidying and reaping; False once the lease was found lapsed."""
        if not await self.store.renew_lease_async(clock()):
            LOG.error("replica %s: its lease lapsed; it claims no more calls", self.replica_id)
            return False
        await asyncio.to_thread(self.held.tidy, clock())  # held calls of dead holders, outcomes
        reaped = await self.store.reap_async(clock())
        if reaped:
            LOG.warning("replica %s: %d intents of lost replicas are UNKNOWN now",
                        self.replica_id, len(reaped))  # fmt: skip
        return True


def default_replica_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def prepare_replica(
    url: str,
    replica_id: str | None,
    bindings: Bindings,
    bindings_file: str,
    now_ms: int,
    lease_ms: int = LEASE_MS,
) -> ReplicaBackend:
    """Open the store of ``url`` as replica ``replica_id``: migrations applied (once, whoever
    starts together), the lease taken, this replica's own ``PENDING`` intents of an earlier
    run made ``UNKNOWN``."""
    if bindings.trace_key is None:
        message = (
            "a PostgreSQL store needs the bindings' `traceKeyRef`: every replica must compute "
            "the same fingerprints"
        )
        raise refusal(bindings_file, ("TRACE_KEY_REQUIRED", message))
    if lease_ms < MIN_LEASE_MS:
        message = f"the lease must last {MIN_LEASE_MS / 1000:g} s at least"
        raise refusal("--lease-timeout", ("LEASE_TOO_SHORT", message))
    name = replica_id or default_replica_id()
    check = keycheck.check_value(bindings.trace_key)
    try:
        store = PgStore.open(
            url, replica_id=name, lease_ms=lease_ms, now_ms=now_ms, key_check=check
        )
    except keycheck.KeyChanged as exc:
        where = Location(file=bindings_file, pointer="/traceKeyRef")
        changed = Diagnostic(code=keycheck.TRACE_KEY_CHANGED, message=exc.message, location=where)
        raise ConfigError([changed]) from None
    return ReplicaBackend(store, store.log, bindings.trace_key, name, lease_ms)
