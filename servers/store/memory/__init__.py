"""The parts of a runtime's store kept in its own memory: what one runtime on a data directory
shares with no one (its turns, its held calls), and need not keep across a restart."""

from servers.store.memory.held import LocalHeld
from servers.store.memory.turns import MAX_TURNS, MemoryTurns

__all__ = ["MAX_TURNS", "LocalHeld", "MemoryTurns"]
