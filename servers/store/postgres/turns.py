"""Turns kept in a shared store (:class:`~servers.store.interface.TurnStore`), so that every
replica knows a turn started on any.

Replicas on one PostgreSQL store keep them in its ``turns`` table: a turn started through one
replica is live on all, and is completed once whichever replica completes it (the row's outcome
is set only while it is unset). Each credential keeps its newest ``per_credential`` turns
(starting one more forgets its oldest); turns are forgotten an hour past their expiry
(``servers.store.postgres.held.HeldTable.tidy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from servers.store.rows import StoreError, TurnRow

if TYPE_CHECKING:
    from servers.store.postgres.store import PgStore


class StoredTurns:
    def __init__(self, store: PgStore) -> None:
        self._store = store

    def start(self, row: TurnRow, *, per_credential: int, now_ms: int) -> None:
        del now_ms  # the newest turns stay, whatever their state: the table keeps no order else
        self._store.save_turn(row)
        self._store.trim_turns(row.credential_id, per_credential)

    def get(self, turn_id: str) -> TurnRow | None:
        return self._store.turn(turn_id)

    def complete(self, turn_id: str, outcome: str) -> bool | None:
        try:
            return self._store.complete_turn(turn_id, outcome)
        except StoreError:
            if self._store.turn(turn_id) is None:
                return None  # no such turn
            raise  # the store did not answer: 503, not "completed already"
