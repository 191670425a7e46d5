"""Turns kept in a shared store, so that every replica knows a turn started on any.

One runtime keeps its turns in memory (``servers.http.app``, bounded). Replicas on one
PostgreSQL store keep them in its ``turns`` table instead: a turn started through one replica
is live on all, and is completed once whichever replica completes it (the row's outcome is set
only while it is unset). Each credential keeps its newest ``MAX_TURNS_PER_CREDENTIAL`` turns
(``servers.http.app``; starting one more forgets its oldest); turns are forgotten an hour past
their expiry (``servers.store.pg_held.HeldTable.tidy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from servers.store.rows import StoreError, TurnRow

if TYPE_CHECKING:
    from servers.store.postgres import PgStore


class StoredTurns:
    def __init__(self, store: PgStore) -> None:
        self._store = store

    def start(self, turn_id: str, credential_id: str, expires_at: int, per_credential: int) -> None:
        self._store.save_turn(TurnRow(turn_id=turn_id, credential_id=credential_id,
                                      expires_at=expires_at))  # fmt: skip
        self._store.trim_turns(credential_id, per_credential)

    def get(self, turn_id: str) -> TurnRow | None:
        return self._store.turn(turn_id)

    def complete(self, turn_id: str, outcome: str) -> bool | None:
        """True once, False when it was completed already, None for no such turn."""
        try:
            return self._store.complete_turn(turn_id, outcome)
        except StoreError:
            if self._store.turn(turn_id) is None:
                return None  # no such turn
            raise  # the store did not answer: 503, not "completed already"
