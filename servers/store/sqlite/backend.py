"""One runtime's backend: a data directory it owns (locked), holding the SQLite dispatch store
and the decision-log file, opened, checked and reconciled by ``servers.store.sqlite.opening``; its
turns are kept in memory (:class:`~servers.store.memory.MemoryTurns`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from servers.log.decision_log import DecisionLog
from servers.store.interface import Clock, HeldStore, TurnStore
from servers.store.memory import LocalHeld, MemoryTurns
from servers.store.rows import Reconciled
from servers.store.sqlite.datadir import DataDir
from servers.store.sqlite.opening import OpenedData, open_data
from servers.store.sqlite.store import Store
from servers.wire.answers import StoreState


@dataclass(eq=False)
class LocalBackend:
    """A :class:`~servers.store.interface.Backend` of one data directory."""

    data: DataDir
    store: Store
    log: DecisionLog
    fingerprint_key: bytes = field(repr=False)
    reconciled: Reconciled = field(default_factory=Reconciled)
    """What the start-up reconciliation put back into the store from the log."""
    turns: TurnStore = field(default_factory=MemoryTurns)
    held: HeldStore = field(default_factory=LocalHeld)
    shared: bool = False

    @classmethod
    def open(cls, data: DataDir, *, trace_key: bytes | None, now_ms: int) -> LocalBackend:
        """The store and log of ``data`` (owned), checked and reconciled; on a refusal the
        data directory is released again."""
        try:
            opened: OpenedData = open_data(data, trace_key=trace_key, now_ms=now_ms)
            data.on_close(opened.log.close)  # closed last, after the store's final writes
            data.on_close(opened.store.close)
        except BaseException:
            data.close()
            raise
        return cls(data, opened.store, opened.log, opened.key, opened.reconciled)

    @contextlib.asynccontextmanager
    async def exclusive(self, name: str, wait_s: float = 10.0) -> AsyncIterator[None]:
        del name, wait_s  # no other process writes the store: nothing to hold
        yield

    def state(self) -> StoreState | None:
        return None

    async def upkeep(self, clock: Clock) -> None:
        del clock  # nothing to renew

    async def aclose(self) -> None:
        self.store.close()  # its last batches still log
        self.log.close()

    def close(self) -> None:
        self.data.close()
