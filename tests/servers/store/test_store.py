"""The dispatch store: once-only dispatch and call limits under threads and processes,
crash recovery, idempotent completion, and no raw data on disk."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from policy import Call, ContextState, decide, disclose
from policy.engine.state import fingerprint
from policy.json.canonical import EncodingError, canonical_cbor
from policy.json.value import thaw
from servers.log.decision_log import DecisionLog
from servers.store.sqlite.store import (
    FAILED,
    INTERRUPTED,
    PENDING,
    SUCCEEDED,
    UNKNOWN,
    ApprovalRow,
    Claim,
    ContextRow,
    IntentRow,
    Store,
    StoreDamaged,
    StoreError,
)
from tests.support.paths import ROOT

KEY = bytes(range(32))
SENTINEL = "SENTINEL-ARGUMENT-7f3a9c-never-stored"
FP = fingerprint({"query": SENTINEL}, KEY)
NOW = 1_700_000_000_000


def fp(n: int) -> str:
    return fingerprint({"n": n}, KEY)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(tmp_path / "dispatch.sqlite")
    yield s
    s.close()


def begin(store: Store, *args: Any, **kw: Any) -> Claim:
    """A claim from a thread of its own (a loop each: the writer wakes it when committed)."""
    claim: Claim = asyncio.run(store.begin_intent_async(*args, **kw))
    return claim


def complete(store: Store, *args: Any, **kw: Any) -> bool:
    done: bool = asyncio.run(store.complete_intent_async(*args, **kw))
    return done


def save_context(store: Store, row: ContextRow) -> None:
    asyncio.run(store.save_context_async(row))


def save_approval(store: Store, row: ApprovalRow) -> None:
    asyncio.run(store.save_approval_async(row))


def _allow(_intents: list[IntentRow]) -> bool:
    return True


def _context(ref: str = "ctx_1", **kw: object) -> ContextRow:
    fields: dict[str, object] = {
        "context_ref": ref,
        "build": "sha256:b",
        "objective": "learner",
        "coordinates": {"consumer": "app", "environment": "staging"},
        "observations": canonical_cbor({"t": {"state": "UNAVAILABLE"}}),
        "resolved_at": NOW,
        "expires_at": NOW + 900_000,
        "binding_revision": 3,
        **kw,
    }
    return ContextRow(**fields)  # type: ignore[arg-type]


def _race(n: int, work: Callable[[int], Claim]) -> list[Claim]:
    barrier = threading.Barrier(n)
    results: list[Claim | None] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        results[i] = work(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r is not None for r in results)
    return [r for r in results if r is not None]


def test_pragmas_and_schema_version(store: Store, tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "dispatch.sqlite")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA user_version").fetchone()[0] == 5
    db.close()
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert (tmp_path / "dispatch.sqlite").stat().st_mode & 0o077 == 0


def test_one_call_id_from_fifty_threads_dispatches_once(store: Store) -> None:
    claims = _race(50, lambda _i: begin(store, "ctx_1", "c1", "t", FP, NOW, decide=_allow))
    winners = [c for c in claims if c.dispatch]
    assert len(winners) == 1
    assert all(c.existing and c.intent == winners[0].intent for c in claims if not c.dispatch)
    assert [i.call_id for i in store.intents("ctx_1")] == ["c1"]


def test_call_limit_holds_across_threads(store: Store) -> None:
    def under_limit(intents: list[IntentRow]) -> bool:
        return len(intents) < 1

    claims = _race(
        30, lambda i: begin(store, "ctx_1", f"c{i}", "t", fp(i), NOW, decide=under_limit)
    )
    assert sum(c.dispatch for c in claims) == 1
    assert sum(c.refused for c in claims) == 29
    assert len(store.intents("ctx_1")) == 1


def test_engine_limit_with_real_decide(store: Store, reference_ir) -> None:  # type: ignore[no-untyped-def]  # pytest fixture
    observations = {
        t.id: {"state": "READY", "version": t.version, "contractDigest": t.contract_digest}
        for t in reference_ir.tools
    }
    disclosure = disclose(reference_ir, "learner", observations)
    base = ContextState.open("ctx_1", disclosure, NOW, fingerprint_key=KEY)
    tool = reference_ir.tool_by_id["inspect-context"]
    assert tool.id in disclosure.tool_ids

    def attempt(i: int) -> Claim:
        call = Call(tool=tool.id, call_id=f"c{i}", arguments={"ref": f"course/{i}"})

        def still_allowed(intents: list[IntentRow]) -> bool:
            state = base
            for intent in intents:
                state = state.record_dispatch(intent.call_id, intent.tool, intent.fingerprint)
            return decide(reference_ir, state, call, NOW + 1).allowed

        return begin(
            store,
            "ctx_1",
            call.call_id,
            tool.id,
            base.fingerprint(call.arguments),
            NOW,
            decide=still_allowed,
        )

    claims = _race(20, attempt)
    assert sum(c.dispatch for c in claims) == tool.max_calls
    assert len(store.intents("ctx_1")) == tool.max_calls


PROCESS = """
import asyncio, sys, time
from pathlib import Path
from servers.store.sqlite.store import Store
path, go, call_id, fp = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
store = Store.open(Path(path))
print("ready", flush=True)
while not go.exists():
    time.sleep(0.001)
claim = asyncio.run(store.begin_intent_async(
    "ctx_1", call_id, "t", fp, 1, decide=lambda intents: len(intents) < 2
))
print("dispatch" if claim.dispatch else "no", flush=True)
"""


def _processes(tmp_path: Path, call_ids: list[str]) -> list[str]:
    """Each process opens the store, then all begin at once (the recovery on open would
    otherwise turn another process's PENDING intent into UNKNOWN: the store has one owner)."""
    path = tmp_path / "dispatch.sqlite"
    Store.open(path).close()
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PROCESS, str(path), str(go), c, fp(i)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i, c in enumerate(call_ids)
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    go.touch()
    out = []
    for p in procs:
        stdout, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        out.append(stdout.strip())
    return out


def test_one_call_id_from_several_processes_dispatches_once(tmp_path: Path) -> None:
    assert _processes(tmp_path, ["same"] * 6).count("dispatch") == 1


def test_call_limit_holds_across_processes(tmp_path: Path) -> None:
    assert _processes(tmp_path, [f"c{i}" for i in range(6)]).count("dispatch") == 2
    store = Store.open(tmp_path / "dispatch.sqlite")
    assert len(store.intents("ctx_1")) == 2
    store.close()


def test_claim_shapes(store: Store) -> None:
    seen: list[list[IntentRow]] = []

    def refuse(intents: list[IntentRow]) -> bool:
        seen.append(intents)
        return False

    assert begin(store, "ctx_1", "c1", "t", FP, NOW, decide=refuse) == (False, None)
    assert store.intents("ctx_1") == []
    ok, row = begin(store, "ctx_1", "c1", "t", FP, NOW, decide=_allow)
    assert ok and row is not None and row.status == PENDING and row.created_at == NOW
    again = begin(store, "ctx_1", "c1", "t", fp(2), NOW + 5, decide=_allow)
    assert again.existing and again.intent == row  # whatever decide says, no second insert
    begin(store, "ctx_1", "c1", "t", FP, NOW, decide=refuse)
    assert seen[-1] == [row]  # decide sees the earlier intent with this callId
    assert store.intent("ctx_1", "c1") == row
    assert store.intent("ctx_1", "nope") is None


def test_decide_that_raises_writes_nothing(store: Store) -> None:
    def boom(_intents: list[IntentRow]) -> bool:
        raise RuntimeError("engine failure")

    with pytest.raises(RuntimeError):
        begin(store, "ctx_1", "c1", "t", FP, NOW, decide=boom)
    assert store.intents("ctx_1") == []
    assert begin(store, "ctx_1", "c1", "t", FP, NOW, decide=_allow).dispatch


def test_intents_are_per_context_and_in_order(store: Store) -> None:
    for i in (3, 1, 2):
        begin(store, "ctx_a", f"c{i}", "t", fp(i), NOW + i, decide=_allow)
    begin(store, "ctx_b", "c1", "t", fp(9), NOW, decide=_allow)
    assert [i.call_id for i in store.intents("ctx_a")] == ["c3", "c1", "c2"]
    assert [i.fingerprint for i in store.intents("ctx_b")] == [fp(9)]


def test_pending_intent_becomes_unknown_on_reopen(tmp_path: Path) -> None:
    path = tmp_path / "dispatch.sqlite"
    store = Store.open(path)
    begin(store, "ctx_1", "lost", "t", fp(1), NOW, decide=_allow)
    begin(store, "ctx_1", "done", "t", fp(2), NOW, decide=_allow)
    complete(store, "ctx_1", "done", SUCCEEDED, None, NOW + 1)
    store.close()  # as good as a crash: the PENDING row is all a restart finds
    reopened = Store.open(path, now_ms=NOW + 99)
    lost, done = reopened.intents("ctx_1")
    assert (lost.status, lost.reason, lost.completed_at) == (UNKNOWN, INTERRUPTED, NOW + 99)
    assert (done.status, done.reason) == (SUCCEEDED, None)
    assert reopened.interrupted == (lost,)
    assert not complete(reopened, "ctx_1", "lost", SUCCEEDED, None, NOW + 100)
    assert not begin(reopened, "ctx_1", "lost", "t", fp(1), NOW, decide=_allow).dispatch
    reopened.close()
    assert Store.open(path).interrupted == ()


def test_complete_intent_is_final_once(store: Store) -> None:
    begin(store, "ctx_1", "c1", "t", FP, NOW, decide=_allow)
    assert complete(store, "ctx_1", "c1", FAILED, "RESULT_INVALID", NOW + 1)
    assert not complete(store, "ctx_1", "c1", SUCCEEDED, None, NOW + 2)
    assert not complete(store, "ctx_1", "c1", FAILED, "RESULT_INVALID", NOW + 3)
    row = store.intents("ctx_1")[0]
    assert (row.status, row.reason, row.completed_at, row.final) == (
        FAILED,
        "RESULT_INVALID",
        NOW + 1,
        True,
    )
    with pytest.raises(StoreError):
        complete(store, "ctx_1", "nope", SUCCEEDED, None, NOW)
    with pytest.raises(ValueError, match="status"):
        complete(store, "ctx_1", "c1", PENDING, None, NOW)
    with pytest.raises(ValueError, match="reason"):
        complete(store, "ctx_1", "c1", FAILED, "the backend said: secret stuff", NOW)


def test_complete_intent_from_many_threads_has_one_winner(store: Store) -> None:
    begin(store, "ctx_1", "c1", "t", FP, NOW, decide=_allow)
    wins: list[bool] = []

    def finish(i: int) -> None:
        wins.append(complete(store, "ctx_1", "c1", SUCCEEDED, None, NOW + i))

    threads = [threading.Thread(target=finish, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wins.count(True) == 1


def test_context_round_trip(store: Store) -> None:
    row = _context(turn_id="turn_1")
    save_context(store, row)
    assert store.context("ctx_1") == row
    assert store.context("ctx_2") is None
    with pytest.raises(StoreError, match="exists"):
        save_context(store, row)
    with pytest.raises(EncodingError):
        save_context(store, _context("ctx_3", observations=b"\xa2aa\x01aa\x02"))
    with pytest.raises(TypeError):
        row.coordinates["consumer"] = "x"  # type: ignore[index]  # frozen on purpose


def test_approvals_round_trip(store: Store) -> None:
    a = ApprovalRow(
        approval_id="apr_1",
        context_ref="ctx_1",
        tool="t",
        call_id="c1",
        fingerprint=FP,
        expires_at=NOW + 300_000,
        approver_id="ops-ana",
    )
    b = ApprovalRow(
        approval_id="apr_2",
        context_ref="ctx_1",
        tool="t",
        call_id="c2",
        fingerprint=fp(2),
        expires_at=NOW,
    )
    save_approval(store, a)
    save_approval(store, b)
    assert store.approvals("ctx_1") == [a, b]
    assert store.approvals("ctx_2") == []
    with pytest.raises(StoreError):
        save_approval(store, a)


@pytest.mark.parametrize(
    "bad",
    [SENTINEL, '{"query": "x"}', FP.upper(), FP[:-1], FP + "0"],
)
def test_only_fingerprints_are_accepted(store: Store, bad: str) -> None:
    with pytest.raises(ValueError, match="fingerprint"):
        begin(store, "ctx_1", "c1", "t", bad, NOW, decide=_allow)
    approval = ApprovalRow(
        approval_id="a", context_ref="ctx_1", tool="t", call_id="c1", fingerprint=bad, expires_at=1
    )
    with pytest.raises(ValueError, match="fingerprint"):
        save_approval(store, approval)


def test_sql_constraints_refuse_raw_text(store: Store, tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "dispatch.sqlite")
    with pytest.raises(sqlite3.IntegrityError):
        db.execute(
            "INSERT INTO intents VALUES ('c', 'i', 't', ?, 'PENDING', NULL, 1, NULL)", (SENTINEL,)
        )
    with pytest.raises(sqlite3.IntegrityError):
        db.execute(
            "INSERT INTO intents VALUES ('c', 'i', 't', ?, 'FAILED', ?, 1, NULL)",
            (FP, "free text reason"),
        )
    with pytest.raises(sqlite3.IntegrityError):
        db.execute("INSERT INTO intents VALUES ('c', 'i', 't', ?, 'DONE', NULL, 1, NULL)", (FP,))
    db.close()


EXPECTED_COLUMNS = {
    "contexts": [
        "context_ref",
        "build",
        "objective",
        "coordinates",
        "observations",
        "resolved_at",
        "expires_at",
        "binding_revision",
        "turn_id",
        "credential_id",
        "principal",
    ],
    "intents": [
        "context_ref",
        "call_id",
        "tool",
        "fingerprint",
        "status",
        "reason",
        "created_at",
        "completed_at",
    ],
    "approvals": [
        "approval_id",
        "context_ref",
        "tool",
        "call_id",
        "fingerprint",
        "expires_at",
        "approver_id",
    ],
    "turns": ["turn_id", "credential_id", "expires_at", "outcome"],
    "log_mark": ["id", "seq"],
}
RAW_WORDS = {"argument", "arguments", "args", "output", "result", "secret", "token", "text", "body"}


def test_schema_has_no_column_for_raw_data(store: Store, tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "dispatch.sqlite")
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    columns = {t: [r[1] for r in db.execute(f"PRAGMA table_info({t})")] for t in tables}
    db.close()
    assert columns == EXPECTED_COLUMNS  # a new column is a deliberate change to this test
    for names in columns.values():
        for name in names:
            assert not set(name.split("_")) & RAW_WORDS, name


def test_no_raw_argument_reaches_disk(tmp_path: Path) -> None:
    """The store only ever receives fingerprints: a whole lifecycle leaves no trace of the
    argument it fingerprinted, in the database or its WAL."""
    store = Store.open(tmp_path / "dispatch.sqlite")
    save_context(store, _context())
    save_approval(
        store,
        ApprovalRow(
            approval_id="apr_1",
            context_ref="ctx_1",
            tool="t",
            call_id="c1",
            fingerprint=FP,
            expires_at=NOW,
            approver_id="ops-ana",
        ),
    )
    begin(store, "ctx_1", "c1", "t", FP, NOW, decide=_allow)
    begin(store, "ctx_1", "c2", "t", FP, NOW, decide=_allow)
    wal = b"".join(p.read_bytes() for p in sorted(tmp_path.iterdir()))
    complete(store, "ctx_1", "c1", SUCCEEDED, None, NOW + 1)
    store.close()
    files = sorted(tmp_path.iterdir())
    data = wal + b"".join(p.read_bytes() for p in files)
    assert FP.encode() in data  # the scan sees what was stored
    assert SENTINEL.encode() not in data
    assert b"query" not in data


def test_concurrent_reads_during_writes(store: Store) -> None:
    stop = time.monotonic() + 0.5
    errors: list[BaseException] = []

    def read() -> None:
        try:
            while time.monotonic() < stop:
                store.intents("ctx_1")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    i = 0
    while time.monotonic() < stop:
        begin(store, "ctx_1", f"c{i}", "t", fp(i), NOW, decide=_allow)
        i += 1
    reader.join()
    assert not errors and len(store.intents("ctx_1")) == i


def _commits(store: Store) -> list[str]:
    """The COMMITs the store's writer connection runs from now on."""
    seen: list[str] = []
    store._db.set_trace_callback(lambda sql: seen.append(sql) if sql == "COMMIT" else None)
    return seen


def test_concurrent_claims_are_group_committed(store: Store) -> None:
    commits = _commits(store)

    def under_limit(intents: list[IntentRow]) -> bool:
        return len(intents) < 25

    claims = _race(
        40, lambda i: begin(store, "ctx_1", f"c{i}", "t", fp(i), NOW, decide=under_limit)
    )
    assert sum(c.dispatch for c in claims) == 25  # earlier claims of the batch count
    assert len(store.intents("ctx_1")) == 25
    assert 1 <= len(commits) <= 40


def test_async_claims_answer_after_the_commit(store: Store, tmp_path: Path) -> None:
    other = sqlite3.connect(tmp_path / "dispatch.sqlite")  # another reader: committed only

    def under_limit(intents: list[IntentRow]) -> bool:
        return len(intents) < 3

    async def claim(i: int) -> Claim:
        found = await store.begin_intent_async(
            "ctx_1", f"c{i}", "t", fp(i), NOW, decide=under_limit
        )
        if found.dispatch:
            sql = "SELECT status FROM intents WHERE call_id = ?"
            assert other.execute(sql, (f"c{i}",)).fetchall() == [(PENDING,)]
        return found

    async def scenario() -> list[Claim]:
        return list(await asyncio.gather(*(claim(i) for i in range(20))))

    claims = asyncio.run(scenario())
    other.close()
    assert sum(c.dispatch for c in claims) == 3 and sum(c.refused for c in claims) == 17


def test_a_decide_that_raises_fails_its_claim_only(store: Store) -> None:
    def decide_for(i: int) -> Callable[[list[IntentRow]], bool]:
        def decide(_intents: list[IntentRow]) -> bool:
            if i == 5:
                raise RuntimeError("engine failure")
            return True

        return decide

    outcomes: list[object] = [None] * 10

    def work(i: int) -> Claim:
        try:
            outcomes[i] = begin(store, "ctx_1", f"c{i}", "t", fp(i), NOW, decide=decide_for(i))
        except RuntimeError as exc:
            outcomes[i] = exc
        return Claim(False, None)

    _race(10, work)
    assert isinstance(outcomes[5], RuntimeError)
    assert all(isinstance(o, Claim) and o.dispatch for i, o in enumerate(outcomes) if i != 5)
    assert sorted(i.call_id for i in store.intents("ctx_1")) == sorted(
        f"c{i}" for i in range(10) if i != 5
    )


def test_seen_intents_spare_the_second_decide(store: Store) -> None:
    calls: list[int] = []

    def decide(intents: list[IntentRow]) -> bool:
        calls.append(len(intents))
        return True

    assert begin(store, "ctx_1", "c1", "t", fp(1), NOW, decide=decide, seen=[]).dispatch
    assert calls == []  # nothing changed since the caller's own engine run
    stale: list[IntentRow] = []  # the caller decided before c1 was committed
    assert begin(store, "ctx_1", "c2", "t", fp(2), NOW, decide=decide, seen=stale).dispatch
    assert calls == [1]


def test_reads_do_not_wait_for_the_write_lock(store: Store, tmp_path: Path) -> None:
    begin(store, "ctx_1", "c1", "t", FP, NOW, decide=_allow)
    holder = sqlite3.connect(tmp_path / "dispatch.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writing, for as long as it likes
    try:
        started = time.monotonic()
        assert [i.call_id for i in store.intents("ctx_1")] == ["c1"]
        assert store.approvals("ctx_1") == []
        assert time.monotonic() - started < 1.0
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_claim_cancelled_before_it_runs_writes_nothing(store: Store) -> None:
    running, gate = threading.Event(), threading.Event()
    blocker = store._writer.submit(lambda _db: (running.set(), gate.wait(10)))
    assert running.wait(10)  # the writer is busy with a batch of its own

    async def scenario() -> None:
        task = asyncio.ensure_future(
            store.begin_intent_async("ctx_1", "c1", "t", FP, NOW, decide=_allow)
        )
        await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        gate.set()
        await asyncio.wrap_future(blocker)

    asyncio.run(scenario())
    assert store.intents("ctx_1") == []


def test_closed_store_refuses_writes(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "dispatch.sqlite")
    begin(store, "ctx_1", "c1", "t", FP, NOW, decide=_allow)
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        begin(store, "ctx_1", "c2", "t", fp(2), NOW, decide=_allow)
    reopened = Store.open(tmp_path / "dispatch.sqlite")
    assert [i.call_id for i in reopened.intents("ctx_1")] == ["c1"]
    reopened.close()


def test_a_job_that_raises_after_writing_fails_its_whole_batch(store: Store) -> None:
    running, gate = threading.Event(), threading.Event()
    blocker = store._writer.submit(lambda _db: (running.set(), gate.wait(10)))
    assert running.wait(10)

    def writes_then_raises(db: sqlite3.Connection) -> None:
        db.execute("INSERT INTO turns VALUES ('turn_x', 'cred', 1, NULL)")
        raise RuntimeError("half done")

    bad = store._writer.submit(writes_then_raises)  # queued together with the claim below
    claim: list[BaseException] = []
    thread = threading.Thread(
        target=lambda: claim.extend(
            _raised(lambda: begin(store, "ctx_1", "c1", "t", FP, NOW, decide=_allow))
        )
    )
    thread.start()
    deadline = time.monotonic() + 10
    while store._writer._queue.qsize() < 2 and time.monotonic() < deadline:
        time.sleep(0.001)  # until the claim waits behind the bad job
    gate.set()
    thread.join()
    blocker.result()
    with pytest.raises(RuntimeError, match="half done"):
        bad.result()
    assert [type(e) for e in claim] == [RuntimeError]  # nothing of the batch is written
    assert not store.select("SELECT 1 FROM turns WHERE turn_id = 'turn_x'", ())
    assert store.intents("ctx_1") == []
    assert begin(store, "ctx_1", "c1", "t", FP, NOW, decide=_allow).dispatch


def _raised(work: Callable[[], object]) -> list[BaseException]:
    try:
        work()
    except Exception as exc:
        return [exc]
    return []


def test_claims_fail_when_another_process_holds_the_write_lock(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "dispatch.sqlite", busy_timeout_ms=100)
    holder = sqlite3.connect(tmp_path / "dispatch.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(sqlite3.OperationalError):
            begin(store, "ctx_1", "c1", "t", FP, NOW, decide=_allow)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert begin(store, "ctx_1", "c1", "t", FP, NOW, decide=_allow).dispatch
    store.close()


def test_group_commit_waits_only_while_writes_come_fast(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write at a low rate commits at once; while writes come fast, a batch waits up to
    ``linger_s`` for more (group-commit delay); after a quiet spell, no wait again."""
    from servers.store.sqlite import writer as store_writer

    sizes: list[int] = []
    real = store_writer._run_batch

    def counting(
        db: sqlite3.Connection, batch: list[object], on_batch: object = None, *more: object
    ) -> None:
        sizes.append(len(batch))
        real(db, batch, on_batch, *more)  # type: ignore[arg-type]  # the writer's own, passed on

    monkeypatch.setattr(store_writer, "_run_batch", counting)
    monkeypatch.setattr(store_writer, "QUIET_S", 0.2)
    db = sqlite3.connect(str(tmp_path / "w.sqlite"), isolation_level=None, check_same_thread=False)
    writer = store_writer.GroupWriter(db, linger_s=0.3)

    def timed_call() -> float:
        started = time.monotonic()
        writer.submit(lambda db: None).result()
        return time.monotonic() - started

    try:
        assert timed_call() < 0.25 and sizes == [1]  # no rate yet: no wait
        gate = threading.Event()
        writer.submit(lambda db: gate.wait())  # the writer is held while 60 writes queue up
        burst = [writer.submit(lambda db: None) for _ in range(60)]
        gate.set()
        for f in burst:
            f.result()
        first = writer.submit(lambda db: None)  # fast now: this batch waits for more
        time.sleep(0.05)
        second = writer.submit(lambda db: None)
        first.result(), second.result()
        assert sizes[-1] == 2, sizes  # the two arrived 50 ms apart and shared one commit
        time.sleep(0.3)
        assert timed_call() < 0.25 and sizes[-1] == 1  # after a quiet spell: no wait
    finally:
        writer.close()
        db.close()


def test_a_failure_past_the_transaction_fails_its_waiters_and_the_writer_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer thread once died when its own code raised after a commit (in the step that
    logs a batch's records), leaving every waiter of the batch, and every later one, hanging."""
    from servers.store.sqlite import writer as store_writer

    calls = 0
    real = store_writer._logged

    def failing_once(items: list[object], outcomes: list[object]) -> list[object]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("a bug after the commit")
        return real(items, outcomes)  # type: ignore[arg-type]  # passed through

    monkeypatch.setattr(store_writer, "_logged", failing_once)
    db = sqlite3.connect(str(tmp_path / "w.sqlite"), isolation_level=None, check_same_thread=False)
    writer = store_writer.GroupWriter(db, linger_s=0.0)
    try:
        with pytest.raises(RuntimeError, match="a bug after the commit"):
            writer.submit(lambda db: 1).result(timeout=5)
        assert writer.submit(lambda db: 2).result(timeout=5) == 2  # the thread still serves
    finally:
        writer.close()
        db.close()


# --- damage found at open, and the mark of the decision log ---------------------------------


def _filled(path: Path) -> None:
    s = Store.open(path)
    for i in range(300):
        save_context(s, _context(f"ctx_{i}"))
    s.close()


def test_schema_2_gets_the_owner_column_and_its_contexts_belong_to_no_one(tmp_path: Path) -> None:
    path = tmp_path / "dispatch.sqlite"
    s = Store.open(path)
    save_context(s, replace(_context("ctx_owned"), credential_id="tutor-app"))
    s.close()
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE contexts DROP COLUMN principal")
    db.execute("ALTER TABLE contexts DROP COLUMN credential_id")  # as a version 2 store was
    db.execute("PRAGMA user_version = 2")
    db.commit()
    db.close()
    s = Store.open(path)
    old = s.context("ctx_owned")
    assert old is not None and old.credential_id is None and not old.owned_by("tutor-app")
    save_context(s, replace(_context("ctx_new"), credential_id="tutor-app"))
    new = s.context("ctx_new")
    assert new is not None and new.owned_by("tutor-app") and not new.owned_by("other-app")
    s.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 5
    db.close()


def test_schema_4_gets_the_principal_column_and_its_contexts_belong_to_no_subject(
    tmp_path: Path,
) -> None:
    """A context resolved with a token before version 5 names its issuer and client only: it
    belongs to no subject (fail closed); one saved since keeps who resolved it, with the
    subject's fingerprint, and belongs to that subject alone."""
    path = tmp_path / "dispatch.sqlite"
    s = Store.open(path)
    save_context(s, replace(_context("ctx_old"), credential_id="corp:web"))
    s.close()
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE contexts DROP COLUMN principal")  # as a version 4 store was
    db.execute("PRAGMA user_version = 4")
    db.commit()
    db.close()
    s = Store.open(path)
    old = s.context("ctx_old")
    assert old is not None and old.principal is None and old.owned_by("corp:web")
    assert not old.owned_by("corp:web", "hmac-sha256:" + "a" * 32)
    recorded = {
        "issuer": "corp",
        "clientId": "web",
        "subject": "hmac-sha256:" + "a" * 32,
        "claims": {"groups": ["support"], "level": 3},
    }
    save_context(s, replace(_context("ctx_new"), credential_id="corp:web", principal=recorded))
    s.close()
    s = Store.open(path)  # read back from the file, not from the cache
    new = s.context("ctx_new")
    assert new is not None and thaw(new.principal) == recorded
    assert new.owned_by("corp:web", "hmac-sha256:" + "a" * 32)
    assert not new.owned_by("corp:web", "hmac-sha256:" + "b" * 32)
    assert not new.owned_by("corp:web") and not new.owned_by("corp:other", new.subject)
    s.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 5
    db.close()


def test_schema_3_gets_the_call_index_and_finds_a_call_in_any_context(tmp_path: Path) -> None:
    path = tmp_path / "dispatch.sqlite"
    s = Store.open(path)
    for ref in ("ctx_a", "ctx_b"):
        save_context(s, _context(ref))
    begin(s, "ctx_a", "call-7", "inspect-context", "a" * 64, 1, decide=lambda _i: True)
    begin(s, "ctx_b", "call-8", "inspect-context", "b" * 64, 2, decide=lambda _i: True)
    s.close()
    db = sqlite3.connect(path)
    db.execute("DROP INDEX intents_by_call")  # as a version 3 store was
    db.execute("ALTER TABLE contexts DROP COLUMN principal")
    db.execute("PRAGMA user_version = 3")
    db.commit()
    db.close()
    s = Store.open(path)
    assert [(i.context_ref, i.call_id) for i in s.intents_with_call("call-7")] == [
        ("ctx_a", "call-7")
    ]
    assert s.intents_with_call("call-9") == []
    s.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 5
    plan = db.execute(
        "EXPLAIN QUERY PLAN SELECT * FROM intents WHERE call_id = ?", ("call-7",)
    ).fetchall()
    assert any("intents_by_call" in str(row) for row in plan)  # a lookup, not a scan
    db.close()


@pytest.mark.parametrize("where", ["header", "page 2", "last page"])
def test_a_damaged_file_is_refused_at_open(tmp_path: Path, where: str) -> None:
    path = tmp_path / "dispatch.sqlite"
    _filled(path)
    data = bytearray(path.read_bytes())
    start = {"header": 0, "page 2": 4096, "last page": len(data) - 4096}[where]
    data[start : start + 4096] = bytes(range(256)) * 16
    path.write_bytes(bytes(data))
    with pytest.raises(StoreDamaged):
        Store.open(path)
    assert path.read_bytes() == bytes(data)  # never repaired


def test_a_busy_store_is_not_called_damaged(tmp_path: Path) -> None:
    path = tmp_path / "dispatch.sqlite"
    Store.open(path).close()
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(sqlite3.OperationalError) as info:
            Store.open(path, busy_timeout_ms=50)
        assert not isinstance(info.value, StoreDamaged)
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_the_log_mark_follows_durable_records_only(tmp_path: Path) -> None:
    log = DecisionLog.open(tmp_path / "decisions.cbor", fsync_every=0)  # nothing durable yet
    s = Store.open(tmp_path / "dispatch.sqlite")
    s.attach_log(log)
    log.append({"event": "DENIED"})
    save_context(s, _context("ctx_1"))
    assert (s.log_mark, log.durable_seq) == (0, 0)  # written, not synced: not marked
    log.flush()
    save_context(s, _context("ctx_2"))  # the next batch marks what is durable before it
    assert s.log_mark == 1
    log.append({"event": "DENIED"})
    log.flush()
    s.close()  # the last mark at close
    log.close()
    reopened = Store.open(tmp_path / "dispatch.sqlite")
    assert reopened.log_mark == 2
    reopened.close()


def test_schema_1_gets_the_mark_at_0(tmp_path: Path) -> None:
    path = tmp_path / "dispatch.sqlite"
    _filled(path)
    db = sqlite3.connect(path)
    db.execute("DROP TABLE log_mark")  # as a version 1 store was: no mark, no owners
    db.execute("ALTER TABLE contexts DROP COLUMN principal")
    db.execute("ALTER TABLE contexts DROP COLUMN credential_id")
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    s = Store.open(path)
    assert s.log_mark == 0 and s.context("ctx_7") is not None and s.has_rows()
    s.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 5
    db.execute("PRAGMA user_version = 6")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="newer runtime"):
        Store.open(path)
