"""A runtime whose store is its own memory (``seif serve --store memory:``): nothing is kept
across a restart. For trying seif and for tests; a runtime that must say ``UNKNOWN`` after a
crash, and never run a call id twice, needs a data directory or a database."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from servers.store.interface import Clock, HeldStore, TurnStore
from servers.store.memory.dispatch import MemoryLog, MemoryStore
from servers.store.memory.held import LocalHeld
from servers.store.memory.turns import MemoryTurns
from servers.store.rows import Reconciled
from servers.wire.answers import StoreState


@dataclass(eq=False)
class MemoryBackend:
    """A :class:`~servers.store.interface.Backend` in memory."""

    fingerprint_key: bytes = field(repr=False)
    log: MemoryLog = field(default_factory=MemoryLog)
    store: MemoryStore = field(init=False)
    turns: TurnStore = field(default_factory=MemoryTurns)
    held: HeldStore = field(default_factory=LocalHeld)
    reconciled: Reconciled = field(default_factory=Reconciled)
    shared: bool = False

    def __post_init__(self) -> None:
        self.store = MemoryStore(self.log)

    @classmethod
    def open(cls, trace_key: bytes | None) -> MemoryBackend:
        """A new, empty store; the fingerprint key the bindings' ``traceKeyRef``, else a
        random key of this process."""
        return cls(trace_key if trace_key is not None else os.urandom(32))

    @contextlib.asynccontextmanager
    async def exclusive(self, name: str, wait_s: float = 10.0) -> AsyncIterator[None]:
        del name, wait_s  # no other process writes the store: nothing to hold
        yield

    def state(self) -> StoreState | None:
        return None

    async def upkeep(self, clock: Clock) -> None:
        del clock  # nothing to renew

    async def aclose(self) -> None:
        self.store.close()
        self.log.close()

    def close(self) -> None:
        self.log.close()
