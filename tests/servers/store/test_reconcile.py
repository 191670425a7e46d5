"""Start-up reconciliation of the dispatch store with the decision log, against the real
runtime (``prepare`` + ``create_app``) and the synthetic executor on loopback: a store that
lost commits (restored from an older backup, rebuilt empty) never dispatches a logged call
again, and the refusals when the log, the store or the key has lost history."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from policy.json.value import thaw
from servers.log.decision_log import DecisionLog, admit, read_records
from servers.store.keycheck import check_value
from servers.store.sqlite import reconcile
from servers.store.sqlite.datadir import DataDir, DataDirError
from servers.store.sqlite.opening import open_data
from servers.store.sqlite.store import RECONCILED, UNKNOWN, Store
from tests.support.runtime_harness import (
    PROPOSAL,
    READ_ARGS,
    Stack,
    prepare_config,
    run_async,
    running_stack,
    write_config,
)

LEARNER = {"objective": "learner", "consumer": "tutor-app"}


def _backup(data: Path, to: Path) -> None:
    """A consistent copy of the live store (SQLite's online backup), as an operator takes."""
    source = sqlite3.connect(data / "dispatch.sqlite")
    target = sqlite3.connect(to)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def _restore(data: Path, backup: Path) -> None:
    """Put the backup in place of the store, without the newer store's -wal and -shm."""
    for suffix in ("", "-wal", "-shm"):
        (data / f"dispatch.sqlite{suffix}").unlink(missing_ok=True)
    os.replace(backup, data / "dispatch.sqlite")


def _call_events(data: Path, ctx: str, call: str) -> list[tuple[str, Any]]:
    return [
        (r["event"], r.get("reason"))
        for r in read_records(data / "decisions.cbor")
        if r.get("contextRef") == ctx and r.get("callId") == call
    ]


def test_an_approved_write_is_not_dispatched_again_from_an_older_store(tmp_path: Path) -> None:
    """The store is restored from a backup taken after the approval and before the dispatch:
    the approval is there, the intent is not. The log has the INTENT and the RESULT."""
    backup = tmp_path / "backup.sqlite"

    async def first() -> tuple[str, str]:
        async with running_stack(tmp_path) as s:
            ctx = (await s.resolve())["contextRef"]
            approval = await s.approval_id(ctx, "propose-change", "w1", PROPOSAL)
            _backup(s.config.data, backup)
            done = await s.execute(ctx, "propose-change", "w1", PROPOSAL, approval)
            assert done["status"] == "SUCCEEDED"
            assert (await s.stats())["byCallId"] == {"w1": 1}
            return ctx, approval

    ctx, approval = run_async(first())
    data = tmp_path / "data"
    _restore(data, backup)

    async def second() -> None:
        async with running_stack(tmp_path) as s:  # a new executor: it counts from zero
            assert s.prepared.reconciled.calls == 1
            again = await s.execute(ctx, "propose-change", "w1", PROPOSAL, approval)
            assert (again["status"], again["duplicate"], again["reason"]) == (
                "UNKNOWN",
                True,
                RECONCILED,
            )
            assert "output" not in again
            assert (await s.stats())["byCallId"] == {}  # never sent again
            events = (await s.call("GET", f"/v1/traces/{ctx}")).body["events"]
            w1 = [(e["event"], e.get("reason")) for e in events if e.get("callId") == "w1"]
            assert w1[0][0] == "APPROVED"
            assert w1[1:] == [("INTENT", None), ("RESULT", None), ("UNKNOWN", RECONCILED)]

    run_async(second())

    async def third() -> None:
        async with running_stack(tmp_path) as s:  # reconciled once: nothing left to do
            assert s.prepared.reconciled.calls == 0

    run_async(third())
    logged = _call_events(data, ctx, "w1")
    assert logged[1:] == [("INTENT", None), ("RESULT", None), ("UNKNOWN", RECONCILED)]


async def _resolve_and_read(s: Stack) -> str:
    ctx: str = (await s.resolve(**LEARNER))["contextRef"]
    done = await s.execute(ctx, "inspect-context", "r1", READ_ARGS)
    assert done["status"] == "SUCCEEDED"
    return ctx


@pytest.mark.parametrize("how", ["backup before the resolve", "an empty file"])
def test_a_store_that_lost_the_context_gets_it_back(tmp_path: Path, how: str) -> None:
    backup = tmp_path / "backup.sqlite"

    async def first() -> str:
        async with running_stack(tmp_path) as s:
            _backup(s.config.data, backup)
            return await _resolve_and_read(s)

    ctx = run_async(first())
    if how == "an empty file":
        backup.write_bytes(b"")  # the documented rebuild: `touch dispatch.sqlite`
        backup.chmod(0o600)
    _restore(tmp_path / "data", backup)

    async def second() -> None:
        async with running_stack(tmp_path) as s:
            assert (s.prepared.reconciled.contexts, s.prepared.reconciled.calls) == (1, 1)
            again = await s.execute(ctx, "inspect-context", "r1", READ_ARGS)
            assert (again["status"], again["duplicate"]) == ("UNKNOWN", True)
            search = {"query": "median", "limit": 2}
            other = await s.execute(ctx, "search-knowledge", "r2", search)
            assert other["status"] == "SUCCEEDED", other  # the context is usable as it was
            assert (await s.stats())["byCallId"] == {"r2": 1}
            row = s.prepared.store.context(ctx)
            assert row is not None and row.credential_id == "tutor-app"  # its owner, put back

    run_async(second())


# --- refusals: the log, the store or the key lost history ---------------------------------


def _history(tmp_path: Path) -> Path:
    """A data directory with a context, a dispatched read and an approval."""

    async def session() -> None:
        async with running_stack(tmp_path) as s:
            ctx = await _resolve_and_read(s)
            authoring = (await s.resolve())["contextRef"]
            await s.approval_id(authoring, "propose-change", "w1", PROPOSAL)
            assert ctx

    run_async(session())
    return tmp_path / "data"


def _open(data: Path, *, trace_key: bytes | None = None) -> None:
    owner = DataDir.open(data)
    try:
        opened = open_data(owner, trace_key=trace_key, now_ms=1_800_000_000_000)
        opened.store.close()
        opened.log.close()
    finally:
        owner.close()


def _drop_last_record(log: Path) -> None:
    records = list(read_records(log))
    whole = log.read_bytes()
    with DecisionLog.open(tmp := log.with_name("cut.cbor"), fsync_every=0) as cut:
        for record in records[:-1]:
            fields = {k: v for k, v in record.items() if k not in ("v", "seq", "prev")}
            cut.append(fields)
    assert len(tmp.read_bytes()) < len(whole)
    os.replace(tmp, log)


DAMAGES = {
    "LOG_MISSING": lambda d: (d / "decisions.cbor").unlink(),
    "LOG_TRUNCATED": lambda d: _drop_last_record(d / "decisions.cbor"),
    "LOG_TRUNCATED (emptied)": lambda d: (d / "decisions.cbor").write_bytes(b""),
    "STORE_MISSING": lambda d: [
        (d / f"dispatch.sqlite{s}").unlink(missing_ok=True) for s in ("", "-wal", "-shm")
    ],
    "KEY_MISSING": lambda d: (d / "runtime.key").unlink(),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_lost_history_is_refused_and_nothing_changes(tmp_path: Path, damage: str) -> None:
    data = _history(tmp_path)
    DAMAGES[damage](data)
    before = {p.name: p.read_bytes() for p in data.iterdir() if p.name != "owner.lock"}
    with pytest.raises(DataDirError) as info:
        _open(data)
    assert info.value.code == damage.split(maxsplit=1)[0]
    assert info.value.remedy and info.value.file.parent == data
    after = {p.name: p.read_bytes() for p in data.iterdir() if p.name != "owner.lock"}
    assert after == before  # refused before anything was created, cut or written


def test_a_key_from_the_bindings_needs_no_runtime_key(tmp_path: Path) -> None:
    data = _history(tmp_path)
    key = (data / "runtime.key").read_bytes()
    (data / "runtime.key").unlink()
    _open(data, trace_key=key)  # the key that made the fingerprints is the bindings'
    assert not (data / "runtime.key").exists()


def test_no_fingerprints_yet_a_missing_key_is_created(tmp_path: Path) -> None:
    async def session() -> None:
        async with running_stack(tmp_path) as s:
            await s.resolve()

    run_async(session())
    data = tmp_path / "data"
    (data / "runtime.key").unlink()
    _open(data)
    assert (data / "runtime.key").stat().st_size == 32
    new = check_value((data / "runtime.key").read_bytes())  # nothing was made with the old one
    assert (data / "key.check").read_text() == new + "\n"


@pytest.mark.parametrize("damage", ["not hex", "a symbolic link", "0644"])
def test_a_bad_key_check_is_refused_before_anything_is_opened(tmp_path: Path, damage: str) -> None:
    data = _history(tmp_path)
    check = data / "key.check"
    if damage == "not hex":
        check.write_bytes(b"z" * 64 + b"\n")
    elif damage == "a symbolic link":
        (data / "elsewhere").write_bytes(check.read_bytes())
        check.unlink()
        check.symlink_to(data / "elsewhere")
    else:
        check.chmod(0o644)
    before = {p.name: p.read_bytes() for p in data.iterdir() if p.name != "owner.lock"}
    with pytest.raises(DataDirError) as info:
        _open(data)
    assert info.value.code == "KEY_INVALID" and info.value.file == check
    assert "key.check" in info.value.remedy
    after = {p.name: p.read_bytes() for p in data.iterdir() if p.name != "owner.lock"}
    assert after == before


def test_an_empty_store_beside_an_empty_log_is_a_fresh_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    (data / "decisions.cbor").write_bytes(b"")
    _open(data)
    (data / "decisions.cbor").unlink()  # a store without history and no log: the log is new
    _open(data)
    assert (data / "decisions.cbor").exists()


# --- the store's mark of the log ------------------------------------------------------------


def test_the_mark_follows_the_log_and_tolerates_the_crash_window(tmp_path: Path) -> None:
    """A write committed whose record never reached the log (a crash between the two) is not
    mistaken for a lost log; the mark only covers records that were durable."""
    log = DecisionLog.open(tmp_path / "decisions.cbor")
    store = Store.open(tmp_path / "dispatch.sqlite")
    store.attach_log(log)
    log.append({"event": "DENIED", "contextRef": "ctx_1"})
    fp = "a" * 64
    claim = store.begin_intent_async("ctx_1", "c1", "t", fp, 1, decide=lambda _i: True)
    asyncio.run(claim)  # no record: "crash"
    assert store.log_mark == 1
    store.close()
    log.close()
    data = DataDir.open(tmp_path)
    try:
        opened = open_data(data, trace_key=bytes(32), now_ms=5)
        try:
            assert opened.store.log_mark == 1 and opened.log.last_seq == 1
            (lost,) = opened.store.intents("ctx_1")
            assert (lost.status, lost.reason) == (UNKNOWN, "INTERRUPTED")
            assert opened.reconciled.calls == 0
        finally:
            opened.store.close()
            opened.log.close()
    finally:
        data.close()


def test_a_schema_1_store_is_migrated_and_reconciled_from_the_whole_log(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "dispatch.sqlite")
    store.close()
    db = sqlite3.connect(tmp_path / "dispatch.sqlite")
    db.execute("DROP TABLE log_mark")  # as a version 1 store was: no mark, no owners
    db.execute("ALTER TABLE contexts DROP COLUMN principal")
    db.execute("ALTER TABLE contexts DROP COLUMN credential_id")
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    with DecisionLog.open(tmp_path / "decisions.cbor") as log:
        intent = {"contextRef": "ctx_9", "callId": "c9", "tool": "t", "fingerprint": "b" * 64}
        log.write_now([admit({"event": "INTENT", **intent})])
    data = DataDir.open(tmp_path)
    try:
        opened = open_data(data, trace_key=bytes(32), now_ms=7)
        try:
            (found,) = opened.store.intents("ctx_9")
            assert (found.status, found.reason, found.fingerprint) == (
                UNKNOWN,
                RECONCILED,
                "b" * 64,
            )
            assert opened.store.log_mark == 2  # the INTENT and the UNKNOWN it was logged as
            assert [r["event"] for r in read_records(tmp_path / "decisions.cbor")] == [
                "INTENT",
                "UNKNOWN",
            ]
        finally:
            opened.store.close()
            opened.log.close()
    finally:
        data.close()


def test_prepare_refuses_and_releases_the_directory(tmp_path: Path) -> None:
    """A refusal at start leaves the data directory unowned (the next start may try again)."""
    data = _history(tmp_path)
    (data / "decisions.cbor").unlink()
    config = write_config(tmp_path, "http://127.0.0.1:9")
    with pytest.raises(DataDirError, match="LOG_MISSING"):
        prepare_config(config)
    DataDir.open(data).close()  # not locked


def test_a_bad_key_is_refused_before_any_file_is_created(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    (data / "runtime.key").write_bytes(b"k" * 16)
    (data / "runtime.key").chmod(0o600)
    with pytest.raises(DataDirError) as info:
        _open(data)
    assert info.value.code == "KEY_INVALID" and "16 bytes" in info.value.message
    assert sorted(p.name for p in data.iterdir()) == ["owner.lock", "runtime.key"]


def test_a_context_put_back_keeps_who_resolved_it() -> None:
    """A context put back from its ``DISCLOSED`` record belongs to the subject that resolved
    it (the record's fingerprint), as it did; a record whose principal is not a map gives no
    context (it stays unknown: fail closed)."""
    recorded = {
        "issuer": "corp",
        "clientId": "web",
        "subject": "hmac-sha256:" + "c" * 32,
        "claims": {"groups": ["support"]},
    }
    record = {
        "event": "DISCLOSED",
        "contextRef": "ctx_1",
        "build": "blake3:" + "0" * 64,
        "objective": "learner",
        "resolvedAt": 5,
        "coordinates": {"consumer": "", "environment": "", "deployment": "", "trace": ""},
        "observations": {},
        "credential": "corp:web",
        "principal": recorded,
    }
    row = reconcile._context_row(record)
    assert row is not None and thaw(row.principal) == recorded
    assert row.owned_by("corp:web", recorded["subject"]) and not row.owned_by("corp:web")
    assert reconcile._context_row({**record, "principal": "alice"}) is None
    static = reconcile._context_row({k: v for k, v in record.items() if k != "principal"})
    assert static is not None and static.principal is None and static.owned_by("corp:web")
