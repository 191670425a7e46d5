"""One contract, three dispatch stores: in memory (``servers.store.memory``), SQLite in a data
directory (``servers.store.sqlite``) and PostgreSQL (``servers.store.postgres``, a real server:
``pg_url``). Each claims a call id once whoever claims it concurrently, decides on the intents
as they are when it claims, logs a write's record if and only if the write took effect, makes a
completion final once, and reads back what it saved. The memory log writes the file log's bytes,
chained by the same digests."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from policy.json.value import thaw
from servers.log.decision_log import DecisionLog
from servers.log.encoding import admit
from servers.store.interface import DispatchStore, RecordLog
from servers.store.memory import MemoryLog, MemoryStore
from servers.store.postgres.store import PgStore
from servers.store.rows import ApprovalRow, ContextRow, IntentRow, IntentUnknown, StoreError
from servers.store.sqlite.store import Store

NOW = 1_790_000_000_000
FP = "a" * 64


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def stores(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[DispatchStore, RecordLog]]:
    if request.param == "memory":
        memory_log = MemoryLog()
        yield MemoryStore(memory_log), memory_log
    elif request.param == "sqlite":
        log = DecisionLog.open(tmp_path / "decisions.cbor")
        store = Store.open(tmp_path / "dispatch.sqlite")
        store.attach_log(log)
        yield store, log
        store.close()
        log.close()
    else:
        url = request.getfixturevalue("pg_url")
        pg = PgStore.open(url, replica_id="r1", lease_ms=15_000, now_ms=NOW)
        yield pg, pg.log
        pg.close()


def _context(ref: str = "ctx_1") -> ContextRow:
    return ContextRow(
        context_ref=ref,
        build="blake3:b",
        objective="learner",
        coordinates={"consumer": "app"},
        resolved_at=NOW,
        expires_at=NOW + 900_000,
        credential_id="cred",
    )


def _record(event: str, ref: str = "ctx_1", **fields: Any) -> Any:
    return admit({"event": event, "at": NOW, "contextRef": ref, **fields})


def _run(stores: tuple[DispatchStore, RecordLog], work: Any) -> Any:
    async def scenario() -> Any:
        return await work(*stores)

    return asyncio.run(scenario())


def test_a_call_id_is_claimed_once_and_its_record_logged_once(
    stores: tuple[DispatchStore, RecordLog],
) -> None:
    async def work(store: DispatchStore, log: RecordLog) -> tuple[list[bool], int]:
        await store.save_context_async(_context())
        claims = await asyncio.gather(
            *(
                store.begin_intent_async(
                    "ctx_1", "c1", "t", FP, NOW, decide=lambda _i: True, record=_record("INTENT")
                )
                for _ in range(20)
            )
        )
        intents = await log.trace_async("ctx_1", lambda r: [x["event"] for x in r])
        return [c.dispatch for c in claims], intents.count("INTENT")

    dispatched, logged = _run(stores, work)
    assert dispatched.count(True) == 1 and logged == 1


def test_the_claim_decides_on_the_intents_as_they_are(
    stores: tuple[DispatchStore, RecordLog],
) -> None:
    """A limit of two calls: the third claim's decision sees the two intents, and is refused
    with nothing inserted and nothing logged."""

    async def work(store: DispatchStore, log: RecordLog) -> tuple[list[Any], list[IntentRow], int]:
        await store.save_context_async(_context())

        def under_two(intents: list[IntentRow]) -> bool:
            return len(intents) < 2

        claims = [
            await store.begin_intent_async(
                "ctx_1", f"c{n}", "t", FP, NOW + n, decide=under_two, record=_record("INTENT")
            )
            for n in range(3)
        ]
        events = await log.trace_async("ctx_1", lambda r: [x["event"] for x in r])
        return [tuple(c) for c in claims], store.intents("ctx_1"), events.count("INTENT")

    claims, intents, logged = _run(stores, work)
    assert [c[0] for c in claims] == [True, True, False] and claims[2][1] is None
    assert [i.call_id for i in intents] == ["c0", "c1"] and logged == 2


def test_a_completion_is_final_once_and_an_unknown_one_is_refused(
    stores: tuple[DispatchStore, RecordLog],
) -> None:
    async def work(store: DispatchStore, _log: RecordLog) -> tuple[bool, bool, IntentRow | None]:
        await store.save_context_async(_context())
        await store.begin_intent_async("ctx_1", "c1", "t", FP, NOW, decide=lambda _i: True)
        first = await store.complete_intent_async("ctx_1", "c1", "SUCCEEDED", None, NOW + 1)
        again = await store.complete_intent_async("ctx_1", "c1", "FAILED", "X", NOW + 2)
        with pytest.raises(IntentUnknown):
            await store.complete_intent_async("ctx_1", "nope", "SUCCEEDED", None, NOW)
        return first, again, store.intent("ctx_1", "c1")

    first, again, intent = _run(stores, work)
    assert (first, again) == (True, False)
    assert intent is not None and (intent.status, intent.completed_at) == ("SUCCEEDED", NOW + 1)


def test_what_is_saved_reads_back_and_is_saved_once(
    stores: tuple[DispatchStore, RecordLog],
) -> None:
    approval = ApprovalRow(
        approval_id="apr_1",
        context_ref="ctx_1",
        tool="t",
        call_id="c1",
        fingerprint=FP,
        expires_at=NOW + 300_000,
        approver_id="ana",
    )

    async def work(store: DispatchStore, _log: RecordLog) -> None:
        await store.save_context_async(_context())
        with pytest.raises(StoreError):
            await store.save_context_async(_context())
        await store.save_approval_async(approval)
        await store.save_context_async(_context("ctx_2"))
        for ref in ("ctx_1", "ctx_2"):
            await store.begin_intent_async(ref, "same-id", "t", FP, NOW, decide=lambda _i: True)

    _run(stores, work)
    store = stores[0]
    assert store.context("ctx_1") == _context() and store.context("nope") is None
    assert store.approvals("ctx_1") == [approval] and store.approvals("ctx_2") == []
    assert sorted(i.context_ref for i in store.intents_with_call("same-id")) == ["ctx_1", "ctx_2"]


SUBJECT = "hmac-sha256:" + "d" * 32
PRINCIPAL = {
    "issuer": "corp",
    "clientId": "web",
    "subject": SUBJECT,
    "claims": {"groups": ["support", "oncall"], "tenant": "acme", "level": 2, "staff": True},
}


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_who_resolved_a_context_is_read_back_by_another_store(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The principal saved with a context (its subject a fingerprint) is what another store
    on the same data reads (another runtime after a restart, another replica): the context
    belongs to that subject of that client there too."""
    row = replace(_context(), credential_id="corp:web", principal=PRINCIPAL)

    async def save(store: DispatchStore) -> None:
        await store.save_context_async(row)

    if backend == "sqlite":
        first = Store.open(tmp_path / "dispatch.sqlite")
        asyncio.run(save(first))
        first.close()
        second = Store.open(tmp_path / "dispatch.sqlite")
        found = second.context("ctx_1")
        second.close()
    else:
        url = request.getfixturevalue("pg_url")
        one = PgStore.open(url, replica_id="r1", lease_ms=15_000, now_ms=NOW)
        asyncio.run(save(one))
        other = PgStore.open(url, replica_id="r2", lease_ms=15_000, now_ms=NOW)
        found = other.context("ctx_1")
        other.close()
        one.close()
    assert found is not None and thaw(found.principal) == PRINCIPAL and found == row
    assert found.owned_by("corp:web", SUBJECT)
    assert not found.owned_by("corp:web", "hmac-sha256:" + "e" * 32)  # another user of it
    assert not found.owned_by("corp:web") and not found.owned_by("cred", SUBJECT)


def test_the_memory_log_writes_the_file_log_s_bytes(tmp_path: Path) -> None:
    records = [_record("DISCLOSED"), _record("DENIED", reason="X"), _record("INTENT", "ctx_2")]
    file_log = DecisionLog.open(tmp_path / "decisions.cbor")
    memory = MemoryLog()

    async def append_all() -> None:
        for record in records:
            await file_log.append_admitted(dict(record))
            await memory.append_admitted(dict(record))

    asyncio.run(append_all())
    file_log.close()
    file_head, memory_head = asyncio.run(_heads(tmp_path, memory))
    assert memory_head == file_head and memory_head.seq == 3
    traced = asyncio.run(memory.trace_async("ctx_1", lambda r: [x["event"] for x in r]))
    assert traced == ["DISCLOSED", "DENIED"]


async def _heads(tmp_path: Path, memory: MemoryLog) -> tuple[Any, Any]:
    reopened = DecisionLog.open(tmp_path / "decisions.cbor")
    try:
        return await reopened.head_async(), await memory.head_async()
    finally:
        reopened.close()
