"""Turns: an application starts one, passes its ``turnId`` with the resolves and executes of
the turn, and reports its technical completion. With ``--require-turn`` resolve and execute
need a live turn of their credential. The turns are kept by the backend's
:class:`~servers.store.interface.TurnStore` (in memory for one runtime, shared by replicas).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

from servers.runtime.events import iso
from servers.store.interface import TurnStore
from servers.store.rows import TurnRow
from servers.wire.answers import Turn, TurnCompleted
from servers.wire.errors import ErrorCode, Refused
from servers.wire.requests import TurnOutcome

TURN_TTL_MS = 15 * 60 * 1000
MAX_TURNS_PER_CREDENTIAL = 1_000
"""Turns of one credential kept at most: starting one more forgets that credential's oldest."""
OUTCOMES = ("COMPLETED", "FAILED")


class Turns:
    def __init__(self, store: TurnStore, clock: Callable[[], int], *, required: bool) -> None:
        self.store = store
        self._clock = clock
        self.required = required
        """``--require-turn``: resolve and execute need a live turn."""

    def start(self, credential: str) -> Turn:
        """A new turn of ``credential``: ``{"turnId", "expiresAt"}``."""
        turn_id = "turn_" + secrets.token_urlsafe(18)
        now = self._clock()
        row = TurnRow(turn_id=turn_id, credential_id=credential, expires_at=now + TURN_TTL_MS)
        self.store.start(row, per_credential=MAX_TURNS_PER_CREDENTIAL, now_ms=now)
        return {"turnId": turn_id, "expiresAt": iso(row.expires_at)}

    def complete(self, credential: str, turn_id: str, outcome: TurnOutcome) -> TurnCompleted:
        """Record the turn's outcome, once: refused ``TURN_UNKNOWN`` for a turn of another
        credential or none, ``TURN_COMPLETED`` when it was completed already."""
        turn = self.store.get(turn_id)
        if turn is None or turn.credential_id != credential:
            raise Refused(ErrorCode.TURN_UNKNOWN)
        done = turn.outcome is None and self.store.complete(turn_id, outcome)
        if done is None:
            raise Refused(ErrorCode.TURN_UNKNOWN)
        if not done:
            raise Refused(ErrorCode.TURN_COMPLETED)
        return {"turnId": turn_id, "outcome": outcome}

    def live(self, credential: str, turn_id: str | None) -> str | None:
        """``turn_id`` when it names a live turn of ``credential``; None when none is given
        and none is required; else refused ``TURN_REQUIRED``."""
        if turn_id is None:
            if self.required:
                raise Refused(ErrorCode.TURN_REQUIRED)
            return None
        turn = self.store.get(turn_id)
        if (
            turn is None
            or turn.credential_id != credential
            or turn.outcome is not None
            or self._clock() >= turn.expires_at
        ):
            message = "`turnId` is not a live turn of this credential"
            raise Refused(ErrorCode.TURN_REQUIRED, message)
        return turn_id
