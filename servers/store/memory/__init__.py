"""What a runtime keeps in its own memory: one runtime's turns and held calls (shared with no
one), and a whole store in memory (``seif serve --store memory:``), which keeps nothing across a
restart."""

from servers.store.memory.backend import MemoryBackend
from servers.store.memory.dispatch import MemoryLog, MemoryStore
from servers.store.memory.held import LocalHeld
from servers.store.memory.turns import MAX_TURNS, MemoryTurns

__all__ = ["MAX_TURNS", "LocalHeld", "MemoryBackend", "MemoryLog", "MemoryStore", "MemoryTurns"]
