"""A runtime replica's hold on a PostgreSQL store (``seif serve --store postgresql://...``).

The replica is named (``--replica-id``, by default host and pid) in the store's replica table
and in every record it logs; it holds a lease the store renews every :data:`RENEW_EVERY_MS`,
and an intent of a replica whose lease lapsed is made ``UNKNOWN`` by the others
(``servers.store.postgres``). The fingerprint key must come from the bindings' ``traceKeyRef``:
every replica must compute the same fingerprints, so a replica without one is refused.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field

from servers.config.files import Bindings, ConfigError, Problem
from servers.store.postgres import PgDecisionLog, PgStore

LOG = logging.getLogger("seif.runtime")
LEASE_MS = 15_000
"""How long a replica's lease lasts unrenewed: its intents become ``UNKNOWN`` after that."""
RENEW_EVERY_MS = 5_000


@dataclass
class ReplicaHold:
    """The replica's store and log, open until :meth:`close`."""

    store: PgStore
    log: PgDecisionLog
    key: bytes = field(repr=False)
    replica_id: str = ""

    def close(self) -> None:
        self.store.close()
        self.log.close()

    async def aclose(self) -> None:
        """Close from the event loop: the pool's connections too, the lease released."""
        await self.store.aclose()
        self.log.close()

    async def keep_lease(self, clock: Callable[[], int]) -> None:
        """Renew the lease every :data:`RENEW_EVERY_MS` and make the intents of replicas whose
        lease lapsed ``UNKNOWN`` (logged by the store), until cancelled. A lease found lapsed
        (this process stalled past it) stops here: the store refuses this replica's claims
        from then on, so nothing it no longer owns is dispatched."""
        while True:
            await asyncio.sleep(RENEW_EVERY_MS / 1000)
            if not await self.store.renew_lease_async(clock()):
                LOG.error("replica %s: its lease lapsed; it claims no more calls", self.replica_id)
                return
            reaped = await self.store.reap_async(clock())
            if reaped:
                LOG.warning("replica %s: %d intents of lost replicas are UNKNOWN now",
                            self.replica_id, len(reaped))  # fmt: skip


def default_replica_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def prepare_replica(
    url: str, replica_id: str | None, bindings: Bindings, bindings_file: str, now_ms: int
) -> ReplicaHold:
    """Open the store of ``url`` as replica ``replica_id``: migrations applied (once, whoever
    starts together), the lease taken, this replica's own ``PENDING`` intents of an earlier
    run made ``UNKNOWN``."""
    if bindings.trace_key is None:
        message = (
            "a PostgreSQL store needs the bindings' `traceKeyRef`: every replica must compute "
            "the same fingerprints"
        )
        raise ConfigError([Problem("TRACE_KEY_REQUIRED", bindings_file, "", message)])
    name = replica_id or default_replica_id()
    store = PgStore.open(url, replica_id=name, lease_ms=LEASE_MS, now_ms=now_ms)
    return ReplicaHold(store, store.log, bindings.trace_key, name)
