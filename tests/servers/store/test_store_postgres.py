"""The PostgreSQL dispatch store against a real server: the SQLite store's semantics, once-only
claims and call limits across two replicas, records iff their writes committed, byte-exact
records, migrations applied once and never downwards, leases and reaping, and no raw data."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest

from policy.engine.state import fingerprint
from policy.json.canonical import canonical_cbor
from servers.log.decision_log import admit, read_records
from servers.log.encoding import encoded, unchained
from servers.store.postgres.log import REPLICA_LOST, renew
from servers.store.postgres.schema import MIGRATIONS, PG_SCHEMA_VERSION, redacted
from servers.store.postgres.store import PgStore
from servers.store.rows import (
    FAILED,
    INTERRUPTED,
    PENDING,
    SUCCEEDED,
    UNKNOWN,
    ApprovalRow,
    Claim,
    ContextRow,
    IntentRow,
    StoreError,
    TurnRow,
)
from tests.support import pg_support

pg_url = pg_support.pg_url  # the fixture: a new empty database per test

T = TypeVar("T")
KEY = bytes(range(32))
SENTINEL = "SENTINEL-ARGUMENT-5d1e0b-never-stored"
FP = fingerprint({"query": SENTINEL}, KEY)
NOW = 1_700_000_000_000
LEASE = 10_000


def fp(n: int) -> str:
    return fingerprint({"n": n}, KEY)


def _allow(_intents: list[IntentRow]) -> bool:
    return True


def _context(ref: str = "ctx_1") -> ContextRow:
    return ContextRow(
        context_ref=ref,
        build="sha256:b",
        objective="learner",
        coordinates={"consumer": "app", "environment": "staging", "trace": "t-1"},
        observations=canonical_cbor({"t": {"state": "READY"}}),
        resolved_at=NOW,
        expires_at=NOW + 900_000,
        binding_revision=3,
        credential_id="cred-1",
    )


def _record(event: str, ref: str | None = "ctx_1", **fields: Any) -> dict[str, Any]:
    record = {"event": event, "at": NOW, "build": "sha256:b", **fields}
    return admit({**record, "contextRef": ref} if ref is not None else record)


def _approval(n: int, call: str | None = None) -> ApprovalRow:
    return ApprovalRow(
        approval_id=f"apr_{n}",
        context_ref="ctx_1",
        tool="crm.update",
        call_id=call or f"call-{n}",
        fingerprint=fp(n),
        expires_at=NOW + 60_000,
        approver_id="ana",
    )


def _open(url: str, replica: str, now: int = NOW, lease_ms: int = LEASE, **kw: int) -> PgStore:
    return PgStore.open(url, replica_id=replica, lease_ms=lease_ms, now_ms=now, **kw)


@pytest.fixture
def store(pg_url: str) -> Iterator[PgStore]:
    opened = _open(pg_url, "r1")
    yield opened
    opened.close()


def _select(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description is not None else []


def _log(url: str) -> list[tuple[Any, ...]]:
    """(seq, replica, replica_seq, context_ref, event, record) of every row, in seq order."""
    columns = "seq, replica, replica_seq, context_ref, event, record"
    return _select(url, f"SELECT {columns} FROM decision_log ORDER BY seq")


def _events(url: str) -> list[str]:
    return [row[4] for row in _log(url)]


def _closing(*stores: PgStore, work: Callable[[], Awaitable[T]]) -> T:
    """Run ``work`` in a new event loop, closing the stores in it afterwards."""

    async def scenario() -> T:
        try:
            return await work()
        finally:
            for s in stores:
                await s.aclose()

    return asyncio.run(scenario())


def test_contexts_intents_approvals_and_turns(store: PgStore) -> None:
    row = _context()
    approvals = [_approval(n) for n in (2, 1, 3)]

    async def work() -> None:
        await store.save_context_async(row)
        with pytest.raises(StoreError, match="context `ctx_1` exists"):
            await store.save_context_async(row)
        for approval in approvals:
            await store.save_approval_async(approval)
        with pytest.raises(StoreError, match="approval `apr_2` exists"):
            await store.save_approval_async(approvals[0])
        for seen in (None, list[IntentRow]()):  # decided in a transaction, or in one statement
            with pytest.raises(StoreError, match="no context `ctx_2`"):
                await store.begin_intent_async(
                    "ctx_2", "c", "crm.read", FP, NOW, decide=_allow, seen=seen
                )
        claim = await store.begin_intent_async("ctx_1", "c1", "crm.read", FP, NOW, decide=_allow)
        assert claim.dispatch and claim.intent is not None and claim.intent.status == PENDING
        assert store.context("ctx_1") == row and store.context("nope") is None
        assert store.approvals("ctx_1") == approvals  # in insertion order
        assert store.intents("ctx_1") == [claim.intent] == store.intents_with_call("c1")
        assert store.intent("ctx_1", "c1") == claim.intent and store.intent("ctx_1", "x") is None
        assert store.has_rows() and store.has_fingerprints()

    assert not store.has_rows() and not store.has_fingerprints()
    _closing(store, work=work)


def test_turns(store: PgStore) -> None:
    turn = TurnRow(turn_id="turn-1", credential_id="cred-1", expires_at=NOW + 1)
    store.save_turn(turn)
    with pytest.raises(StoreError, match="turn `turn-1` exists"):
        store.save_turn(turn)
    complete = store.complete_turn
    assert complete("turn-1", "COMPLETED") is True and complete("turn-1", "FAILED") is False
    assert store.turn("turn-1") == replace(turn, outcome="COMPLETED")
    with pytest.raises(StoreError, match="no turn `turn-2`"):
        store.complete_turn("turn-2", "FAILED")


def test_claims_and_completions_as_the_sqlite_store(store: PgStore) -> None:
    begin = store.begin_intent_async
    seen: list[list[IntentRow]] = []

    def noted(intents: list[IntentRow]) -> bool:
        seen.append(intents)
        return True

    async def work() -> None:
        await store.save_context_async(_context())
        first = await begin("ctx_1", "a", "crm.read", FP, NOW, decide=_allow)
        assert first.intent is not None
        was = [first.intent]
        again = await begin("ctx_1", "a", "crm.read", fp(9), NOW + 5, decide=lambda _: False)
        seen_again = await begin("ctx_1", "a", "crm.read", FP, NOW, decide=noted, seen=was)
        refused = await begin("ctx_1", "b", "crm.read", FP, NOW, decide=lambda _: False)
        skipped = await begin("ctx_1", "c", "crm.read", FP, NOW, decide=noted, seen=was)
        decided = await begin("ctx_1", "d", "crm.read", FP, NOW, decide=noted, seen=was)
        done = await store.complete_intent_async("ctx_1", "a", SUCCEEDED, None, NOW + 9)
        twice = await store.complete_intent_async("ctx_1", "a", FAILED, "EXECUTOR_FAILED", NOW)
        with pytest.raises(StoreError, match="no intent `zz` in context `ctx_1`"):
            await store.complete_intent_async("ctx_1", "zz", FAILED, None, NOW)
        with pytest.raises(ValueError, match="reason"):
            await store.complete_intent_async("ctx_1", "c", FAILED, "not a code", NOW)
        final = store.intent("ctx_1", "a")
        assert final is not None and (final.status, final.reason) == (SUCCEEDED, None)
        assert [i.call_id for i in store.intents("ctx_1")] == ["a", "c", "d"]
        assert first.dispatch and again == Claim(False, first.intent) == seen_again
        assert refused == Claim(False, None) and skipped.dispatch and decided.dispatch
        assert [[i.call_id for i in s] for s in seen] == [["a", "c"]]  # not called for `c`
        assert done is True and twice is False

    _closing(store, work=work)


def _race(url: str, calls: list[str], decide: Callable[[list[IntentRow]], bool]) -> list[Claim]:
    """Every call claimed at once via two replicas, half in one statement (``seen``), half not."""
    one, two = _open(url, "r1", pool_min=8), _open(url, "r2", pool_min=8)  # all at once

    def claim(i: int, call: str) -> Awaitable[Claim]:
        seen: list[IntentRow] | None = [] if i % 4 < 2 else None
        record = _record("INTENT", callId=call)
        return (one, two)[i % 2].begin_intent_async(
            "ctx_1", call, "crm.update", FP, NOW, decide=decide, seen=seen, record=record
        )

    async def work() -> list[Claim]:
        await one.save_context_async(_context())
        return await asyncio.gather(*(claim(i, call) for i, call in enumerate(calls)))

    return _closing(one, two, work=work)


def test_one_claim_of_a_call_id_across_two_replicas(pg_url: str) -> None:
    claims = _race(pg_url, ["call-x"] * 50, _allow)
    winners = [c for c in claims if c.dispatch]
    assert len(winners) == 1
    assert all(c == Claim(False, winners[0].intent) for c in claims if not c.dispatch)
    assert _events(pg_url) == ["INTENT"]  # the winner's record, and no other


def test_a_call_limit_holds_across_two_replicas(pg_url: str) -> None:
    def under_limit(intents: list[IntentRow]) -> bool:
        return len(intents) < 3

    claims = _race(pg_url, [f"call-{i}" for i in range(40)], under_limit)
    assert sum(c.dispatch for c in claims) == 3 and sum(c.refused for c in claims) == 37
    assert _select(pg_url, "SELECT count(*) FROM intents") == [(3,)]
    assert _events(pg_url) == ["INTENT"] * 3


def test_the_primary_key_arbitrates_a_writer_that_takes_no_lock(
    store: PgStore, pg_url: str
) -> None:
    """The row lock orders the store's own claims; the key decides against any other."""
    columns = "context_ref, call_id, tool, fingerprint, status, created_at, replica_id"

    def meanwhile(_intents: list[IntentRow]) -> bool:
        sql = f"INSERT INTO intents ({columns}) VALUES ('ctx_1', 'a', 'x.y', %s, %s, %s, 'rX')"
        _select(pg_url, sql, FP, PENDING, NOW - 1)  # committed while the claim decides
        return True

    async def work() -> Claim:
        await store.save_context_async(_context())
        record = _record("INTENT", callId="a")
        return await store.begin_intent_async(
            "ctx_1", "a", "crm.read", FP, NOW, decide=meanwhile, record=record
        )

    claim = _closing(store, work=work)
    assert not claim.dispatch and claim.intent is not None
    assert (claim.intent.tool, claim.intent.created_at) == ("x.y", NOW - 1)
    assert _events(pg_url) == []  # nothing inserted, nothing logged


def test_a_record_is_logged_iff_its_write_committed(store: PgStore, pg_url: str) -> None:
    begin = store.begin_intent_async

    async def work() -> None:
        await store.save_context_async(_context(), record=_record("DISCLOSED"))
        with pytest.raises(StoreError):
            await store.save_context_async(_context(), record=_record("DISCLOSED", n=2))
        for call, decide in (("a", _allow), ("a", _allow), ("b", lambda _: False)):
            record = _record("INTENT", callId=call, attempt=len(_log(pg_url)))
            await begin("ctx_1", call, "crm.read", FP, NOW, decide=decide, record=record)
        await store.complete_intent_async(
            "ctx_1", "a", SUCCEEDED, None, NOW, record=_record("RESULT", callId="a")
        )
        await store.complete_intent_async(  # logged again, as the SQLite store does
            "ctx_1", "a", FAILED, None, NOW, record=_record("RESULT", callId="a", again=True)
        )
        with pytest.raises(StoreError):
            await store.complete_intent_async(
                "ctx_1", "zz", FAILED, None, NOW, record=_record("RESULT", callId="zz")
            )
        await store.save_approval_async(_approval(1, "b"), record=_record("APPROVED", callId="b"))
        await store.log.append_async({"event": "DENIED", "at": NOW, "callId": "c"})
        records = store.log.trace("ctx_1")
        assert [r["event"] for r in records] == ["DISCLOSED", "INTENT", *["RESULT"] * 2, "APPROVED"]
        assert records[1]["attempt"] == 1 and records[3]["again"] is True  # the first claim's

    _closing(store, work=work)
    rows = _log(pg_url)
    assert [r[4] for r in rows] == ["DISCLOSED", "INTENT", "RESULT", "RESULT", "APPROVED", "DENIED"]
    assert [r[2] for r in rows] == sorted(r[2] for r in rows) and {r[1] for r in rows} == {"r1"}
    assert [r[3] for r in rows] == ["ctx_1"] * 5 + [None]


def test_records_are_the_file_logs_bytes_at_every_seq_width(
    store: PgStore, pg_url: str, tmp_path: Path
) -> None:
    """Each row's bytes are ``encoded(record, seq)`` in record format 1 (``v`` 1, no ``prev``:
    the table is not chained); the rows in order are a log file; the table only grows."""
    fields = _record("DENIED", callId="c", nested={"seq": 0, "x": "cseq\x00"}, cseq="\x63seq\x00")
    log, seqs = store.log, list[int]()
    widths = [1, 23, 24, 255, 256, 65_535, 65_536, 2**32 - 1, 2**32, 2**62]

    async def work() -> None:
        for start in widths:
            _select(pg_url, "SELECT setval('decision_log_seq_seq', %s, false)", start)
            seqs.append(await log.append_admitted(dict(fields)))
        exported = tmp_path / "decisions.cbor"
        exported.write_bytes(b"".join(log.record_bytes()))
        assert list(read_records(exported, tolerate_partial_tail=False)) == list(log.records())

    _closing(store, work=work)
    rows = _log(pg_url)
    assert [r[0] for r in rows] == seqs == widths
    for seq, *_, raw in rows:
        assert bytes(raw) == encoded(unchained(fields), seq)
    assert all(r["v"] == 1 and "prev" not in r for r in read_records(tmp_path / "decisions.cbor"))
    for change in ("UPDATE decision_log SET event = 'X'", "DELETE FROM decision_log"):
        with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            _select(pg_url, change)
    assert _log(pg_url) == rows


def test_traces_off_the_loop(store: PgStore) -> None:
    log = store.log

    async def work() -> tuple[int, list[str]]:
        await store.save_context_async(_context(), record=_record("DISCLOSED"))
        await log.append_async({"event": "DENIED", "contextRef": "ctx_1", "callId": "x"})
        await log.append_async({"event": "DENIED", "contextRef": "ctx_2", "callId": "y"})
        here = threading.get_ident()
        return await log.trace_async(
            "ctx_1", lambda rs: (threading.get_ident() != here, [r["event"] for r in rs])
        )

    assert _closing(store, work=work) == (True, ["DISCLOSED", "DENIED"])


def test_migrations_run_once_when_two_replicas_start_together(pg_url: str) -> None:
    barrier = threading.Barrier(4)

    def start(n: int) -> PgStore:
        barrier.wait()
        return _open(pg_url, f"r{n}")

    with ThreadPoolExecutor(4) as starting:
        opened = list(starting.map(start, range(4)))  # none refused
    for s in opened:
        s.close()
    applied = _select(pg_url, "SELECT version FROM schema_version ORDER BY version")
    assert applied == [(v,) for v in range(1, PG_SCHEMA_VERSION + 1)]  # each once


def test_a_database_of_an_older_version_is_migrated_forwards_keeping_its_rows(
    pg_url: str,
) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:  # a database as version 1 left it
        conn.execute("CREATE TABLE schema_version (version integer PRIMARY KEY,"
                     " applied_at timestamptz NOT NULL DEFAULT now())")  # fmt: skip
        conn.execute(MIGRATIONS[1])
        conn.execute("INSERT INTO schema_version (version) VALUES (1)")
        conn.execute("INSERT INTO turns VALUES ('turn_1', 'app', 1, NULL)")
    store = _open(pg_url, "r1")
    try:
        assert store.turn("turn_1") is not None
    finally:
        store.close()
    applied = _select(pg_url, "SELECT version FROM schema_version ORDER BY version")
    assert applied == [(v,) for v in range(1, PG_SCHEMA_VERSION + 1)]
    assert _select(pg_url, "SELECT count(*) FROM held_calls") == [(0,)]


def test_a_newer_database_is_refused(pg_url: str) -> None:
    _open(pg_url, "r1").close()
    _select(pg_url, "INSERT INTO schema_version (version) VALUES (%s)", PG_SCHEMA_VERSION + 1)
    with pytest.raises(StoreError) as refused:
        _open(pg_url, "r2")
    assert f"schema version {PG_SCHEMA_VERSION + 1}" in str(refused.value)
    assert f"this runtime's {PG_SCHEMA_VERSION}" in str(refused.value)


def test_a_lapsed_replica_claims_nothing_and_is_reaped(pg_url: str) -> None:
    one = _open(pg_url, "r1", lease_ms=1_000)
    two = _open(pg_url, "r2", lease_ms=60_000)
    late = NOW + 1_500

    async def work() -> None:
        await one.save_context_async(_context())
        await two.save_context_async(_context("ctx_2"))
        for store, ref, call in ((one, "ctx_1", "a"), (one, "ctx_1", "b"), (two, "ctx_2", "c")):
            await store.begin_intent_async(ref, call, "crm.update", FP, NOW + 1, decide=_allow)
        await one.complete_intent_async("ctx_1", "b", SUCCEEDED, None, NOW + 2)
        with pytest.raises(StoreError, match="lost its lease"):
            await one.begin_intent_async("ctx_1", "d", "crm.update", FP, late, decide=_allow)
        assert two.reap(NOW + 500) == ()  # not lapsed yet
        reaped = await two.reap_async(late)
        (only,) = reaped
        assert (only.call_id, only.reason, only.completed_at) == ("a", REPLICA_LOST, late)
        statuses = [(i.call_id, i.status) for i in two.intents("ctx_1") + two.intents("ctx_2")]
        assert statuses == [("a", UNKNOWN), ("b", SUCCEEDED), ("c", PENDING)]
        (record,) = two.log.records()
        assert (record["event"], record["callId"], record["reason"]) == (UNKNOWN, "a", REPLICA_LOST)
        assert (record["contextRef"], record["build"], record["at"]) == ("ctx_1", "sha256:b", late)
        assert one.renew_lease(NOW + 100) is False  # reaped: lost for good, whatever the clock
        assert two.reap(late + 1) == ()  # reaped once

    _closing(one, two, work=work)


def test_a_reap_waits_for_a_claim_in_flight(pg_url: str) -> None:
    one = _open(pg_url, "r1", lease_ms=1_000)
    two = _open(pg_url, "r2", lease_ms=60_000)
    reaped: list[IntentRow] = []
    reaper = threading.Thread(target=lambda: reaped.extend(two.reap(NOW + 2_000)))
    waited: list[bool] = []

    def deciding(_intents: list[IntentRow]) -> bool:  # the claim holds its lease's row
        reaper.start()
        reaper.join(0.3)
        waited.append(reaper.is_alive())
        return True

    async def work() -> Claim:
        await one.save_context_async(_context())
        claim = await one.begin_intent_async(
            "ctx_1", "a", "crm.update", FP, NOW + 10, decide=deciding
        )
        await asyncio.to_thread(reaper.join, 10)
        seen = one.intents("ctx_1")
        with pytest.raises(StoreError, match="lost its lease"):  # reaped: by its clock, live
            await one.begin_intent_async(
                "ctx_1", "b", "crm.update", FP, NOW + 20, decide=_allow, seen=seen
            )
        return claim

    claim = _closing(one, two, work=work)
    assert claim.dispatch and waited == [True]
    assert [(i.call_id, i.status, i.reason) for i in reaped] == [("a", UNKNOWN, REPLICA_LOST)]


def test_renewal_keeps_a_lease_a_lapse_loses_it_and_a_close_releases_it(pg_url: str) -> None:
    one = _open(pg_url, "r1", lease_ms=1_000)
    try:
        assert one.renew_lease(NOW + 900) and one.renew_lease(NOW + 1_800)
        assert one.renew_lease(NOW + 5_000) is False and one.renew_lease(NOW + 5_001) is False
    finally:
        one.close()
    _open(pg_url, "r2", lease_ms=60_000).close()  # released: the same id starts again at once
    _open(pg_url, "r2", now=NOW + 1).close()


def test_a_restart_under_the_same_id_interrupts_what_it_left(pg_url: str) -> None:
    crashed = _open(pg_url, "r1")

    async def work() -> None:
        await crashed.save_context_async(_context())
        await crashed.begin_intent_async("ctx_1", "a", "crm.update", FP, NOW, decide=_allow)
        await crashed.log.append_async({"event": "DENIED", "callId": "z"})
        with pytest.raises(StoreError, match="replica `r1` holds a lease"):
            _open(pg_url, "r1", now=NOW + 1)  # its lease is live: presumed running
        again = _open(pg_url, "r1", now=NOW + LEASE + 1)  # lapsed: presumed dead
        try:
            (only,) = again.interrupted
            assert (only.call_id, only.status, only.reason) == ("a", UNKNOWN, INTERRUPTED)
            assert again.intent("ctx_1", "a") == only
            with pytest.raises(StoreError, match="lost its lease"):  # it was not dead after all
                await crashed.begin_intent_async("ctx_1", "b", "x.y", FP, NOW + 2, decide=_allow)
            with psycopg.connect(pg_url, autocommit=True) as conn:  # nor renew, nor in one go
                assert not renew(conn, "r1", crashed.incarnation, NOW + 3, LEASE)
                claim = "SELECT seif_claim('r1', %s, %s, 'ctx_1', 'b', 't', %s, '[]'" + ", NULL" * 6
                lost = conn.execute(claim + ")", (crashed.incarnation, NOW + 3, FP)).fetchone()
            assert lost == ("LEASE_LOST",) and crashed.renew_lease(NOW + 3) is False
            await crashed.aclose()  # releases nothing: the lease is not its own
            with pytest.raises(StoreError, match="replica `r1` holds a lease"):
                _open(pg_url, "r1", now=NOW + LEASE + 2)
            await again.log.append_async({"event": "DENIED"})
        finally:
            await again.aclose()

    asyncio.run(work())
    assert [r[2] for r in _log(pg_url)] == [1, 2]  # the replica's sequence goes on


def test_no_argument_value_is_stored(store: PgStore, pg_url: str) -> None:
    async def work() -> None:
        await store.save_context_async(_context(), record=_record("DISCLOSED"))
        record = _record("INTENT", callId="call-1", fingerprint=FP)
        await store.begin_intent_async(
            "ctx_1", "call-1", "crm.read", FP, NOW, decide=_allow, record=record
        )
        await store.complete_intent_async(
            "ctx_1", "call-1", SUCCEEDED, None, NOW, record=_record("RESULT", fingerprint=FP)
        )

    _closing(store, work=work)
    tables = _select(
        pg_url, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
    )
    values = [v for (t,) in tables for row in _select(pg_url, f'SELECT * FROM "{t}"') for v in row]
    texts = [v for v in values if isinstance(v, str)]
    blobs = [bytes(v) for v in values if isinstance(v, (bytes, memoryview))]
    assert len(texts) > 20 and len(blobs) >= 4  # observations and the three records
    assert not any(SENTINEL in t for t in texts) and not any(SENTINEL.encode() in b for b in blobs)
    assert {"intents", "decision_log", "contexts"} <= {t for (t,) in tables}
    columns = "context_ref, call_id, tool, fingerprint, status, reason, created_at, replica_id"
    insert = f"INSERT INTO intents ({columns}) VALUES ('c', 'i', 't', %s, 'FAILED', %s, 1, 'r')"
    for raw in ((SENTINEL, None), (FP, "free text reason")):  # refused by the CHECKs too
        with pytest.raises(psycopg.errors.CheckViolation):
            _select(pg_url, insert, *raw)


def test_the_password_stays_out_of_messages() -> None:
    url = "postgresql://seif:hunter2-secret@127.0.0.1:1/seifdb?connect_timeout=2"
    assert redacted(url) == "postgresql://seif@127.0.0.1:1/seifdb"
    with pytest.raises(StoreError) as refused:
        PgStore.open(url, replica_id="r1", timeout_s=2)
    assert "hunter2" not in str(refused.value) and "seif@127.0.0.1:1/seifdb" in str(refused.value)
