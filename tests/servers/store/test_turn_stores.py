"""The two :class:`~servers.store.interface.TurnStore` implementations keep one contract: a
turn started is found, is completed once (True, then False), and an unknown turn is None; a
credential keeps its newest turns at most. One runtime keeps them in memory, replicas in the
shared PostgreSQL store (a real server: ``pg_url``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from servers.store.interface import TurnStore
from servers.store.memory import MemoryTurns
from servers.store.postgres.store import PgStore
from servers.store.postgres.turns import StoredTurns
from servers.store.rows import TurnRow

NOW = 1_790_000_000_000


@pytest.fixture(params=["memory", "postgresql"])
def turns(request: pytest.FixtureRequest) -> Iterator[TurnStore]:
    if request.param == "memory":
        yield MemoryTurns()
        return
    url = request.getfixturevalue("pg_url")
    store = PgStore.open(url, replica_id="r1", lease_ms=15_000, now_ms=NOW)
    try:
        yield StoredTurns(store)
    finally:
        store.close()


def _turn(turn_id: str, credential: str = "app", expires_at: int = NOW + 60_000) -> TurnRow:
    return TurnRow(turn_id=turn_id, credential_id=credential, expires_at=expires_at)


def test_a_turn_is_completed_once(turns: TurnStore) -> None:
    turns.start(_turn("t1"), per_credential=10, now_ms=NOW)
    assert turns.get("t1") == _turn("t1")
    assert turns.complete("t1", "COMPLETED") is True
    assert turns.complete("t1", "FAILED") is False
    found = turns.get("t1")
    assert found is not None and found.outcome == "COMPLETED"
    assert turns.complete("nope", "COMPLETED") is None
    assert turns.get("nope") is None


def test_a_credential_keeps_its_newest_turns(turns: TurnStore) -> None:
    for i in range(5):  # started a millisecond apart: each expires later than the one before
        turns.start(_turn(f"a{i}", expires_at=NOW + 60_000 + i), per_credential=3, now_ms=NOW + i)
    turns.start(_turn("b0", credential="other"), per_credential=3, now_ms=NOW)
    assert [turns.get(f"a{i}") is not None for i in range(5)] == [False, False, True, True, True]
    assert turns.get("b0") is not None  # another credential's turn stays
