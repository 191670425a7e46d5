"""The idempotency store: ``idempotencyKey`` -> the answer it got.

MAKE THIS DURABLE BEFORE PRODUCTION. This one is in memory: a restart forgets every key, so a
call the runtime sent before the restart would run the action again if it came back, and two
processes behind one endpoint do not share it. Keep the same three operations on your database,
in the same transaction as the action where you can (for example a table ``idempotency(key
PRIMARY KEY, fingerprint, status, body, created_at)``: ``begin`` is an insert that does nothing
on conflict and returns the existing row, ``finish`` an update, ``abandon`` a delete), and
expire rows no sooner than a retained context can repeat a call (the runtime keeps contexts 15
minutes; a day is a comfortable margin).
"""

from __future__ import annotations

from dataclasses import dataclass

LIMIT = 10_000
"""Answers kept in memory; the oldest finished ones are forgotten first."""


@dataclass(frozen=True)
class Answer:
    """An HTTP answer exactly as sent: status and body bytes."""

    status: int
    body: bytes


@dataclass
class Record:
    fingerprint: str
    """sha256 of the arguments (canonical JSON): the same key with other arguments is refused."""
    answer: Answer | None = None
    """None while the handler runs."""


class IdempotencyStore:
    """In memory only (see the module's note)."""

    def __init__(self, limit: int = LIMIT) -> None:
        self._records: dict[str, Record] = {}
        self._limit = limit

    async def begin(self, key: str, fingerprint: str) -> Record | None:
        """None when ``key`` is new (it is now reserved: run the handler, then ``finish``);
        else the key's record (finished, or ``answer`` None while it runs)."""
        found = self._records.get(key)
        if found is not None:
            return found
        self._records[key] = Record(fingerprint)
        self._forget_old()
        return None

    async def finish(self, key: str, answer: Answer) -> None:
        self._records[key].answer = answer

    async def abandon(self, key: str) -> None:
        """The handler never answered (the server stopped): the key is free again."""
        self._records.pop(key, None)

    def _forget_old(self) -> None:
        if len(self._records) <= self._limit:
            return
        for key, record in list(self._records.items()):
            if record.answer is not None:
                del self._records[key]
                return
