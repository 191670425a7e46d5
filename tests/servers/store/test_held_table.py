"""The shared store's parts replicas coordinate with, against a real PostgreSQL server: the
held calls' table (``servers.store.postgres.held``), the advisory locks (``PgStore.exclusive``) and
the write pool's recovery. Each case here once broke (a review of the replicas' sharing)."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator

import psycopg
import pytest

from servers.store.postgres.held import HeldTable
from servers.store.postgres.schema import MIGRATIONS, PG_SCHEMA_VERSION
from servers.store.postgres.sealing import Sealer
from servers.store.postgres.store import PgStore
from servers.store.rows import HeldCall, StoreError
from tests.support import pg_support

pg_url = pg_support.pg_url
NOW = 1_800_000_000_000
KEY = bytes(range(32))


def _open(url: str, replica: str, **kw: int) -> PgStore:
    return PgStore.open(url, replica_id=replica, lease_ms=60_000, now_ms=NOW, **kw)


@pytest.fixture
def two(pg_url: str) -> Iterator[tuple[PgStore, PgStore]]:
    a, b = _open(pg_url, "a"), _open(pg_url, "b")
    yield a, b
    a.close()
    b.close()


def _row(call_id: str, size: int = 10, at: int = NOW, tool: str = "propose-change") -> HeldCall:
    return HeldCall("ctx_1", tool, call_id, b'{"x":1}', "APPROVAL_REQUIRED", at, "a" * 64,
                    at + 300_000, at + 900_000, size, owner="app")  # fmt: skip


def test_pages_of_held_calls_visit_each_once_across_replicas_while_calls_come_and_go(
    two: tuple[PgStore, PgStore],
) -> None:
    """Keyset pages, ``(requested_at, context_ref, call_id)`` after the last call listed:
    read through either replica, with calls held, dropped, rejected and asked again between
    pages, every call held all along is listed once and nothing twice; a page stops at its
    limit or after the call that fills its bytes; a row that does not open is left out but
    passed."""
    a, b = (HeldTable(s, Sealer(KEY)) for s in two)
    for n in range(20):  # some at the same millisecond: the key orders them
        (a if n % 2 else b).put(_row(f"c{n:02}", size=10, at=NOW + n // 3))
    all_along = {f"c{n:02}" for n in range(20)} - {"c05", "c15", "c17"}
    seen: list[str] = []
    after: str | None = None
    for turn in range(40):
        rows, more = (a, b)[turn % 2].page(NOW, after, 3, 1 << 20)
        seen += [row.call_id for row, _ in rows if row is not None]
        after = rows[-1][1] if rows else after
        if turn == 0:
            a.drop("ctx_1", "c05")  # not listed yet: gone
            b.reject("ctx_1", "c15", NOW)
            a.put(_row("c17", size=10, at=NOW + 100))  # asked again: listed last
            b.put(_row("new", size=10, at=NOW + 50))
        if not more:
            break
    assert seen == [*sorted(all_along), "new", "c17"]  # each once, oldest first

    rows, more = a.page(NOW, None, 100, 25)  # bytes: up to the call that brings them to 25
    assert [row.call_id for row, _ in rows if row is not None] == ["c00", "c01", "c02"] and more
    foreign = HeldTable(two[0], Sealer(bytes(32)))  # another trace key: no row opens
    rows, more = foreign.page(NOW, None, 2, 1 << 20)
    assert [row for row, _ in rows] == [None, None] and more and foreign.unreadable == 2
    [(row, _)], _more = a.page(NOW, rows[-1][1], 1, 1 << 20)  # after the two unopened
    assert row is not None and row.call_id == "c02"


def test_a_hold_racing_a_rejection_is_never_listed_and_is_tidied(
    two: tuple[PgStore, PgStore], pg_url: str
) -> None:
    a, b = (HeldTable(s, Sealer(KEY)) for s in two)
    b.reject("ctx_1", "c1", NOW)
    assert a.put(_row("c1")) is False  # refused once the rejection is stored
    with psycopg.connect(pg_url, autocommit=True) as conn:  # as a put racing it would leave it
        conn.execute("INSERT INTO held_calls SELECT 'ctx_1', 'c1', tool, owner, fingerprint,"
                     " reason, requested_at, expires_at, context_expires_at, size, sealed,"
                     " replica_id FROM held_calls LIMIT 0")  # fmt: skip
        a.put(_row("c2"))
        conn.execute("UPDATE held_calls SET call_id = 'c1' WHERE call_id = 'c2'")
    assert a.page(NOW, None, 100, 1 << 20) == ([], False)
    assert a.get("ctx_1", "c1", NOW) is None
    assert not a.holds("ctx_1", NOW)
    a.tidy(NOW)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM held_calls").fetchone() == (0,)


def test_a_replica_s_stale_hold_never_removes_a_newer_one(two: tuple[PgStore, PgStore]) -> None:
    a, b = (HeldTable(s, Sealer(KEY)) for s in two)
    a.put(_row("c1", at=NOW))
    b.put(_row("c1", at=NOW + 60_000))  # asked again through b: b's hold replaces a's
    assert a.expire_own(_row("c1", at=NOW), NOW + 300_000) is False  # a's hold is gone
    a.drop_own(_row("c1", at=NOW))
    [(held, _cursor)], _more = a.page(NOW + 300_001, None, 100, 1 << 20)
    assert held is not None and held.requested_at == NOW + 60_000
    assert b.expire_own(_row("c1", at=NOW + 60_000), NOW + 360_000) is True
    assert b.outcome("ctx_1", "c1") == "EXPIRED"
    b.reject("ctx_1", "c1", NOW)
    b.note("ctx_1", "c1", "EXPIRED", NOW)
    assert a.outcome("ctx_1", "c1") == "REJECTED"  # never replaced


def test_a_cancelled_lock_user_releases_nothing_it_does_not_hold_and_leaks_nothing(
    two: tuple[PgStore, PgStore],
) -> None:
    a, b = two

    async def scenario() -> None:
        held = asyncio.Event()
        release = asyncio.Event()

        async def holder() -> None:
            async with a.exclusive("y"):
                held.set()
                await release.wait()

        task = asyncio.ensure_future(holder())
        await held.wait()
        for n in range(200):  # others on a, cancelled at every point of their try
            other = asyncio.ensure_future(_hold_briefly(a, f"x{n % 7}"))
            await asyncio.sleep(0.0005 * (n % 5))
            other.cancel()
            await asyncio.gather(other, return_exceptions=True)
        with pytest.raises(StoreError):  # "y" still held by a: b waits, then gives up
            async with b.exclusive("y", wait_s=0.3):
                pass
        for n in range(7):  # and no cancelled user left an "x" lock behind
            async with b.exclusive(f"x{n}", wait_s=2.0):
                pass
        release.set()
        await task
        async with b.exclusive("y", wait_s=2.0):  # released at the end of a's hold
            pass

    asyncio.run(scenario())


async def _hold_briefly(store: PgStore, name: str) -> None:
    async with store.exclusive(name):
        await asyncio.sleep(0.001)


def test_a_write_pool_that_could_not_open_opens_at_a_later_write(pg_url: str) -> None:
    """The pool opens at the first write: when the database refuses connections then, the
    write is a StoreError (503), and a later write opens the pool once it accepts again."""
    role = f"seif_limited_{secrets.token_hex(4)}"  # roles are the server's: one of its own
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {role}")
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT ALL ON SCHEMA public TO {role}")
    limited = pg_url.replace("postgres@", f"{role}@", 1)
    assert limited != pg_url
    store = _open(limited, "a", timeout_s=2)
    try:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"ALTER ROLE {role} CONNECTION LIMIT 0")

        async def writes() -> int:
            record = {"event": "DENIED", "contextRef": "ctx_1", "callId": "x"}
            with pytest.raises(StoreError):
                await store.log.append_async(record)
            with psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute(f"ALTER ROLE {role} CONNECTION LIMIT -1")
            return await store.log.append_async(record)

        assert asyncio.run(writes()) > 0
    finally:
        store.close()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"REASSIGN OWNED BY {role} TO postgres")
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


def test_a_requester_gone_mark_is_every_replica_s_until_a_new_request_clears_it(
    two: tuple[PgStore, PgStore],
) -> None:
    """The replica holding a call marks it (its requester left): every replica reads and lists
    the mark; a new request of the call, held by another replica, clears it, and the first
    replica's mark of its own earlier hold no longer reaches the call."""
    a, b = (HeldTable(s, Sealer(KEY)) for s in two)
    first = _row("c1")
    assert a.put(first) and a.put(_row("c2"))
    a.mark_gone(first)
    for table in (a, b):
        found = table.get("ctx_1", "c1", NOW)
        assert found is not None and found.requester_gone and found.arguments == b'{"x":1}'
        rows, _more = table.page(NOW, None, 10, 1 << 20)
        assert [(r.call_id, r.requester_gone) for r, _ in rows if r is not None] == [
            ("c1", True),
            ("c2", False),
        ]
    again = _row("c1", at=NOW + 5)  # asked again, through b: with a requester
    assert b.put(again)
    a.mark_gone(first)  # a's hold is no longer the one stored: nothing is marked
    for table in (a, b):
        found = table.get("ctx_1", "c1", NOW)
        assert found is not None and not found.requester_gone
    b.mark_gone(again)
    assert a.put(_row("c1", at=NOW + 9))  # and asked again through a: cleared again
    found = b.get("ctx_1", "c1", NOW)
    assert found is not None and not found.requester_gone


def test_a_database_of_the_previous_version_opens_keeping_its_held_calls(pg_url: str) -> None:
    """A database schema version 4 left (no ``requester_gone``), holding a call: opened, it
    is migrated, the call still listed and approvable with its requester, and a mark works."""
    held = _row("old")
    sealed = Sealer(KEY).seal(held.arguments, held.identity())
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_version (version integer PRIMARY KEY,"
                     " applied_at timestamptz NOT NULL DEFAULT now())")  # fmt: skip
        for version in range(1, 5):
            conn.execute(MIGRATIONS[version])
            conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))
        conn.execute(
            "INSERT INTO held_calls VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 'a')",
            (held.context_ref, held.call_id, held.tool, held.owner, held.fingerprint,
             held.reason, held.requested_at, held.expires_at, held.context_expires_at,
             held.size, sealed),
        )  # fmt: skip
    store = _open(pg_url, "a")
    try:
        table = HeldTable(store, Sealer(KEY))
        rows, more = table.page(NOW, None, 10, 1 << 20)
        assert [r for r, _ in rows] == [held] and not more  # requester_gone: False
        table.mark_gone(held)
        found = table.get("ctx_1", "old", NOW)
        assert found is not None and found.requester_gone
    finally:
        store.close()
    with psycopg.connect(pg_url) as conn:
        versions = conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
    assert versions == [(v,) for v in range(1, PG_SCHEMA_VERSION + 1)]
