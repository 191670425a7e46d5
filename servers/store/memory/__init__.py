"""The parts of a runtime's store kept in its own memory: what one runtime on a data directory
does not share with anyone (its turns), and need not keep across a restart."""

from servers.store.memory.turns import MAX_TURNS, MemoryTurns

__all__ = ["MAX_TURNS", "MemoryTurns"]
