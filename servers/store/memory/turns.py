"""Turns in memory (:class:`~servers.store.interface.TurnStore`), bounded per credential and
in all (:class:`servers.support.bounded.Owned`): one credential starting many turns drops its
own, finished ones first, never another's."""

from __future__ import annotations

from dataclasses import replace

from servers.store.rows import TurnRow
from servers.support import bounded

MAX_TURNS = 10_000
"""Turns held in memory at most, a last resort: the credential holding the most loses its
oldest (finished, that is completed or expired, ones are dropped first)."""


class MemoryTurns:
    def __init__(self, limit: int = MAX_TURNS) -> None:
        self._turns: bounded.Owned[str, TurnRow] = bounded.Owned()
        self.limit = limit
        """Turns kept at most, of every credential together."""

    @property
    def kept(self) -> bounded.Owned[str, TurnRow]:
        """The turns kept, oldest first (a read-only view: :meth:`start` and :meth:`complete`
        change them)."""
        return self._turns

    def start(self, row: TurnRow, *, per_credential: int, now_ms: int) -> None:
        self._turns.admit(
            row.turn_id,
            row,
            owner=row.credential_id,
            limit=self.limit,
            per_owner=per_credential,
            finished=lambda turn: turn.outcome is not None or now_ms >= turn.expires_at,
        )

    def get(self, turn_id: str) -> TurnRow | None:
        return self._turns.get(turn_id)

    def complete(self, turn_id: str, outcome: str) -> bool | None:
        turn = self._turns.get(turn_id)
        if turn is None:
            return None
        if turn.outcome is not None:
            return False
        self._turns.replace(turn_id, replace(turn, outcome=outcome))
        return True
