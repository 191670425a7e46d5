"""Runtime replicas as real processes: `seif serve --store postgresql://... --replica-id ID` on
one fresh database (``pg_url``, a real PostgreSQL server) and one synthetic executor process,
whose ``/_stats`` counts are what was dispatched. Every process is started by this module and
killed by its own handle.

- 100 concurrent executes of one call id spread over three replicas dispatch once, every other
  answer is a duplicate of the one receipt, and every replica reads the same trace afterwards.
  A repeat through another replica waits for the original and has its status (once broken).
- A replica SIGKILLed while the executor holds its call: after the lease the call is ``UNKNOWN``
  (``REPLICA_LOST``, logged once) through the others, and never dispatched again; a replica
  stopped (SIGSTOP) past its lease claims nothing when it resumes.
- Three replicas starting together on an empty database apply each migration once; a database
  newer than the runtime is refused (exit 2) and left as it was.
- After executes and an approval flow, no table holds an argument value, an approval reason,
  the trace key or any credential's token.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
import pytest

from servers.store.postgres.schema import PG_SCHEMA_VERSION
from tests.support.runtime_harness import (
    APP_TOKEN,
    APPROVAL,
    APPROVAL_TOKEN,
    BEARER,
    ENV,
    HOST,
    OPERATOR_TOKEN,
    OTHER_APP_TOKEN,
    PROPOSAL,
    READ_ARGS,
    READER_TOKEN,
    ROOT,
    TOOL_TOKENS,
    Config,
    bindings_document,
    listening,
    run_async,
    seif_command,
    start_executor_process,
    stop,
    write_config,
)

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

TRACE_KEY = "replica-processes-share-this-trace-key-5e1f"
TRACE_ENV = {**ENV, "CONTEXT_TOOL_TRACE_KEY": TRACE_KEY}
LEASE_S = 2.0  # --lease-timeout: renewed every third of it
RENEW_S = LEASE_S / 3
SEARCH_ARGS: dict[str, Any] = {"query": "median", "limit": 2}


# --- processes ------------------------------------------------------------------------------------


def _config(root: Path, executor_url: str) -> Config:
    """A build, bindings naming the shared trace key, and credentials, for ``executor_url``."""
    document = {**bindings_document(executor_url), "traceKeyRef": "env:CONTEXT_TOOL_TRACE_KEY"}
    return write_config(root, executor_url, bindings=document)


def _replica_args(config: Config, url: str, replica_id: str) -> list[str]:
    return [
        *seif_command(), "serve", "--build", str(config.build), "--bindings",
        str(config.bindings), "--credentials", str(config.credentials), "--store", url,
        "--replica-id", replica_id, "--lease-timeout", str(LEASE_S), "--host", HOST,
        "--port", "0",
    ]  # fmt: skip


def _spawn_replica(config: Config, url: str, replica_id: str) -> subprocess.Popen[str]:
    """`seif serve` on the store of ``url`` as replica ``replica_id`` (not waited for)."""
    with (config.data.parent / f"{replica_id}.err").open("w") as err:
        return subprocess.Popen(
            _replica_args(config, url, replica_id),
            cwd=ROOT,
            env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), **TRACE_ENV},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )


class Processes:
    """The processes a test started, each stopped (SIGKILL, by its handle) at the end."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []
        self.by_name: dict[str, subprocess.Popen[str]] = {}
        """The replicas, by replica id."""

    def executor(self, root: Path, *knob_args: str) -> str:
        proc, url = start_executor_process(root, *knob_args)
        self.procs.append(proc)
        return url

    def replicas(self, config: Config, url: str, names: list[str]) -> dict[str, str]:
        """Start a replica per name at once (none waited for before all are started); each
        one's base URL once all listen."""
        started = {name: _spawn_replica(config, url, name) for name in names}
        self.procs.extend(started.values())
        found: dict[str, str] = {}
        for name, proc in started.items():
            try:
                found[name] = listening(proc, timeout=60)
            except AssertionError:
                err = (config.data.parent / f"{name}.err").read_text()
                raise AssertionError(f"replica {name} did not start: {err}") from None
        self.by_name.update(started)
        return found

    def stop_all(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):  # stop the others all the same
                stop(proc)


@contextlib.contextmanager
def processes() -> Iterator[Processes]:
    held = Processes()
    try:
        yield held
    finally:
        held.stop_all()


def _terminate(proc: subprocess.Popen[str]) -> int:
    """A graceful stop (SIGTERM) and its exit code."""
    proc.send_signal(signal.SIGTERM)
    return proc.wait(20)


# --- HTTP -----------------------------------------------------------------------------------------


async def _post(
    session: aiohttp.ClientSession,
    url: str,
    body: Any,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    async with session.post(url, json=body, headers=headers or BEARER) as r:
        assert r.status == 200, (url, r.status, await r.text())
        found: dict[str, Any] = await r.json()
        return found


async def _get(session: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with session.get(url, headers=BEARER) as r:
        assert r.status == 200, (url, r.status, await r.text())
        found: dict[str, Any] = await r.json()
        return found


async def _resolve(session: aiohttp.ClientSession, runtime: str) -> str:
    body = {"objective": "authoring", "consumer": "course-authoring"}
    ref: str = (await _post(session, runtime + "/v1/context/resolve", body))["contextRef"]
    return ref


def _call(ref: str, tool: str, call_id: str, arguments: Any, **extra: Any) -> dict[str, Any]:
    return {"contextRef": ref, "tool": tool, "callId": call_id, "arguments": arguments, **extra}


async def _execute(
    session: aiohttp.ClientSession, runtime: str, body: dict[str, Any]
) -> dict[str, Any]:
    return await _post(session, runtime + "/v1/context/tools/execute", body)


async def _trace(session: aiohttp.ClientSession, runtime: str, ref: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = (await _get(session, f"{runtime}/v1/traces/{ref}"))["events"]
    return events


async def _stats(session: aiohttp.ClientSession, executor: str) -> dict[str, Any]:
    async with session.get(executor + "/_stats") as r:
        found: dict[str, Any] = await r.json()
        return found


async def _wait_for_call(session: aiohttp.ClientSession, executor: str, call_id: str) -> None:
    """Until the executor has acted on ``call_id`` (it then holds the answer: ``delay_ms``)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if (await _stats(session, executor))["byCallId"].get(call_id):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"`{call_id}` never reached the executor")


# --- the database ---------------------------------------------------------------------------------


def _intent(url: str, ref: str, call_id: str) -> tuple[Any, ...]:
    with psycopg.connect(url) as db:
        row = db.execute(
            "SELECT status, reason, replica_id, completed_at FROM intents"
            " WHERE context_ref = %s AND call_id = %s",
            (ref, call_id),
        ).fetchone()
    assert row is not None, (ref, call_id)
    return tuple(row)


def _tables(db: psycopg.Connection[Any]) -> list[str]:
    found = db.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        " ORDER BY table_name"
    ).fetchall()
    return [str(r[0]) for r in found]


def _dump(url: str) -> dict[str, list[str]]:
    """Every row of every table of the public schema as text: the row cast to text, and each
    value of it (a bytea decoded as latin-1, so that no byte is lost)."""
    dumped: dict[str, list[str]] = {}
    with psycopg.connect(url) as db:
        for table in _tables(db):
            texts: list[str] = []
            for (whole,) in db.execute(f'SELECT t::text FROM "{table}" AS t ORDER BY 1'):
                texts.append(str(whole))
            for row in db.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    if isinstance(value, memoryview | bytes | bytearray):
                        texts.append(bytes(value).decode("latin-1"))
                    else:
                        texts.append(str(value))
            dumped[table] = sorted(texts)
    return dumped


# --- 1. once-only dispatch over three processes ---------------------------------------------------


def test_one_call_id_over_three_replica_processes_dispatches_once(
    tmp_path: Path, pg_url: str
) -> None:
    with processes() as held:
        # the executor acts, then holds its answer: the other executes arrive while it runs
        ex = held.executor(
            tmp_path, "inspect-context:delay_ms=1500", "inspect-context:routes=execute"
        )
        config = _config(tmp_path, ex)
        names = ["r0", "r1", "r2"]
        urls = held.replicas(config, pg_url, names)
        order = [urls[n] for n in names]
        owners: list[str] = []  # the replica that answered the original receipt

        async def scenario() -> None:
            connector = aiohttp.TCPConnector(limit=0)
            async with aiohttp.ClientSession(connector=connector) as session:
                ref = await _resolve(session, urls["r1"])  # one context, resolved on r1
                body = _call(ref, "inspect-context", "same", READ_ARGS)
                answered = await asyncio.gather(
                    *(_execute(session, order[i % 3], body) for i in range(100))
                )
                receipts = list(answered)
                stats = await _stats(session, ex)
                assert stats["byCallId"] == {"same": 1}, stats
                assert stats["requests"] == {"inspect-context": 1}, stats
                first = [r for r in receipts if not r["duplicate"]]
                assert len(first) == 1, first
                owners.append(names[receipts.index(first[0]) % 3])
                assert first[0]["status"] == "SUCCEEDED" and first[0]["outputAvailable"] is True
                for receipt in receipts:
                    if receipt is first[0]:
                        continue
                    assert receipt["duplicate"] is True, receipt
                    assert (receipt["callId"], receipt["tool"]) == ("same", "inspect-context")
                    assert receipt["outputAvailable"] is False and "output" not in receipt
                    # the original's status: a repeat waits for it, on whichever replica
                    assert (receipt["status"], receipt["reason"]) == ("SUCCEEDED", None), receipt
                # every replica reads the same trace: one intent, one result
                traces = [await _trace(session, u, ref) for u in order]
                assert all(t == traces[0] for t in traces), traces
                same = [(e["event"], e.get("status")) for e in traces[0] if e.get("callId")]
                assert same == [("INTENT", None), ("RESULT", "SUCCEEDED")], same
                assert (await _stats(session, ex))["byCallId"] == {"same": 1}

        run_async(scenario())
        with psycopg.connect(pg_url) as db:
            rows = db.execute("SELECT replica_id, status FROM intents").fetchall()
        assert rows == [(owners[0], "SUCCEEDED")], (rows, owners)  # claimed by that replica


# Once broken: replica B, whose in-memory view of a context predated a call replica A claimed,
# took the repeat for a new call and left an event in `_inflight` that nothing ever set: every
# repeat through B waited the tool's whole timeout and answered UNKNOWN `IN_FLIGHT`, long after
# A's call SUCCEEDED. A repeat waits for the original (reading the store) and has its status.
def test_a_repeat_through_another_replica_has_the_original_s_status(
    tmp_path: Path, pg_url: str
) -> None:
    with processes() as held:
        ex = held.executor(
            tmp_path, "inspect-context:delay_ms=1000", "inspect-context:routes=execute"
        )
        config = _config(tmp_path, ex)
        urls = held.replicas(config, pg_url, ["a", "b"])

        async def scenario() -> None:
            async with aiohttp.ClientSession() as session:
                ref = await _resolve(session, urls["a"])
                warm = _call(ref, "search-knowledge", "warm", SEARCH_ARGS)  # B reads the context
                assert (await _execute(session, urls["b"], warm))["status"] == "SUCCEEDED"
                body = _call(ref, "inspect-context", "x", READ_ARGS)
                original = asyncio.ensure_future(_execute(session, urls["a"], body))
                await _wait_for_call(session, ex, "x")  # A's call is in flight
                started = time.monotonic()
                during = await _execute(session, urls["b"], body)
                waited = time.monotonic() - started
                first = await original
                assert first["status"] == "SUCCEEDED" and not first["duplicate"]
                assert (during["status"], during["duplicate"]) == ("SUCCEEDED", True), (
                    during,
                    f"after {waited:.2f} s",
                )
                started = time.monotonic()
                after = await _execute(session, urls["b"], body)  # the original is done
                assert (after["status"], after["duplicate"]) == ("SUCCEEDED", True), after
                assert time.monotonic() - started < 2, "the repeat waited for a finished call"
                assert (await _stats(session, ex))["byCallId"] == {"warm": 1, "x": 1}

        run_async(scenario())


# --- 2. a replica killed mid-dispatch -------------------------------------------------------------


def test_a_replica_killed_mid_dispatch_leaves_its_call_unknown_and_never_redone(
    tmp_path: Path, pg_url: str
) -> None:
    with processes() as held:
        # inspect-context: acted on at once, answered 4 s later (A is dead by then)
        ex = held.executor(
            tmp_path, "inspect-context:delay_ms=4000", "inspect-context:routes=execute"
        )
        config = _config(tmp_path, ex)
        urls = held.replicas(config, pg_url, ["a", "b", "c"])
        a = held.by_name["a"]

        async def scenario() -> None:
            async with aiohttp.ClientSession() as session:
                ref = await _resolve(session, urls["b"])
                body = _call(ref, "inspect-context", "k1", READ_ARGS)
                background = asyncio.ensure_future(_execute(session, urls["a"], body))
                await _wait_for_call(session, ex, "k1")  # the executor acted, and holds it
                status, reason, owner, _ = _intent(pg_url, ref, "k1")
                assert (status, reason, owner) == ("PENDING", None, "a")
                a.send_signal(signal.SIGKILL)
                a.wait(10)
                killed_at = time.monotonic()
                done = await asyncio.gather(background, return_exceptions=True)
                assert isinstance(done[0], aiohttp.ClientError), done  # A died mid-request

                # after the lease and a renew period, another replica has reaped it
                deadline = killed_at + LEASE_S + RENEW_S + 5
                while _intent(pg_url, ref, "k1")[0] == "PENDING":
                    assert time.monotonic() < deadline, "the dead replica's call stayed PENDING"
                    await asyncio.sleep(0.1)
                status, reason, owner, completed_at = _intent(pg_url, ref, "k1")
                assert (status, reason, owner) == ("UNKNOWN", "REPLICA_LOST", "a")
                with psycopg.connect(pg_url) as db:
                    lease = db.execute(
                        "SELECT lease_expires_at, reaped_at FROM replicas WHERE replica_id = 'a'"
                    ).fetchone()
                assert lease is not None and lease[1] is not None
                assert completed_at >= lease[0], (completed_at, lease)  # not before it lapsed

                for runtime in (urls["b"], urls["c"], urls["b"]):  # never dispatched again
                    receipt = await _execute(session, runtime, body)
                    assert (receipt["status"], receipt["duplicate"]) == ("UNKNOWN", True)
                    assert receipt["reason"] == "REPLICA_LOST" and "output" not in receipt
                stats = await _stats(session, ex)
                assert stats["byCallId"] == {"k1": 1}, stats
                assert stats["requests"] == {"inspect-context": 1}, stats

                # the decision log: the intent (by A), then UNKNOWN, REPLICA_LOST, once
                for runtime in (urls["b"], urls["c"]):
                    events = await _trace(session, runtime, ref)
                    k1 = [(e["event"], e.get("reason")) for e in events if e.get("callId") == "k1"]
                    assert k1 == [("INTENT", None), ("UNKNOWN", "REPLICA_LOST")], k1
                    lost = next(e for e in events if e["event"] == "UNKNOWN")
                    assert lost["status"] == "UNKNOWN" and lost["tool"] == "inspect-context"
                with psycopg.connect(pg_url) as db:
                    logged = db.execute(
                        "SELECT event, replica FROM decision_log WHERE context_ref = %s"
                        " AND event IN ('INTENT', 'UNKNOWN') ORDER BY seq",
                        (ref,),
                    ).fetchall()
                assert [e for e, _ in logged] == ["INTENT", "UNKNOWN"], logged
                assert logged[0][1] == "a" and logged[1][1] in ("b", "c"), logged

                # the survivors still dispatch new calls
                search = _call(ref, "search-knowledge", "k2", SEARCH_ARGS)
                assert (await _execute(session, urls["c"], search))["status"] == "SUCCEEDED"
                stats = await _stats(session, ex)
                assert stats["byCallId"] == {"k1": 1, "k2": 1}, stats

        run_async(scenario())
        assert a.returncode == -signal.SIGKILL


def test_a_replica_stalled_past_its_lease_claims_nothing_when_it_resumes(
    tmp_path: Path, pg_url: str
) -> None:
    with processes() as held:
        ex = held.executor(tmp_path)
        config = _config(tmp_path, ex)
        urls = held.replicas(config, pg_url, ["live", "stalled"])
        stalled = held.by_name["stalled"]

        async def scenario() -> None:
            async with aiohttp.ClientSession() as session:
                ref = await _resolve(session, urls["stalled"])
                stalled.send_signal(signal.SIGSTOP)  # no renewal while stopped
                try:
                    deadline = time.monotonic() + LEASE_S + RENEW_S + 5
                    while True:  # until the live replica has reaped it
                        with psycopg.connect(pg_url) as db:
                            row = db.execute(
                                "SELECT reaped_at FROM replicas WHERE replica_id = 'stalled'"
                            ).fetchone()
                        if row is not None and row[0] is not None:
                            break
                        assert time.monotonic() < deadline, "the stalled replica was not reaped"
                        await asyncio.sleep(0.1)
                finally:
                    stalled.send_signal(signal.SIGCONT)
                for call_id in ("z1", "z2"):
                    body = _call(ref, "inspect-context", call_id, READ_ARGS)
                    url = urls["stalled"] + "/v1/context/tools/execute"
                    async with session.post(url, json=body, headers=BEARER) as r:
                        assert r.status == 503, await r.text()
                        assert (await r.json())["error"]["code"] == "STORE_UNAVAILABLE"
                assert (await _stats(session, ex))["byCallId"] == {}  # nothing dispatched
                async with session.get(urls["stalled"] + "/v1/ready") as r:  # none sent to it
                    assert r.status == 503 and (await r.json())["store"] == "LEASE_LOST"
                with psycopg.connect(pg_url) as db:
                    assert db.execute("SELECT count(*) FROM intents").fetchone() == (0,)
                body = _call(ref, "inspect-context", "z1", READ_ARGS)  # the live one runs it
                assert (await _execute(session, urls["live"], body))["status"] == "SUCCEEDED"
                assert (await _stats(session, ex))["byCallId"] == {"z1": 1}

        run_async(scenario())


# --- 3. migrations --------------------------------------------------------------------------------


def test_replicas_starting_together_migrate_once_and_a_newer_database_is_refused(
    tmp_path: Path, pg_url: str
) -> None:
    with psycopg.connect(pg_url) as db:
        assert _tables(db) == []  # a fresh, empty database
    with processes() as held:
        ex = held.executor(tmp_path)
        config = _config(tmp_path, ex)
        urls = held.replicas(config, pg_url, ["m0", "m1", "m2"])  # started at the same moment

        async def ready() -> list[int]:
            async with aiohttp.ClientSession() as session:
                codes = []
                for u in urls.values():
                    async with session.get(u + "/v1/ready") as r:
                        codes.append(r.status)
                ref = await _resolve(session, urls["m0"])
                receipt = await _execute(
                    session, urls["m2"], _call(ref, "inspect-context", "m", READ_ARGS)
                )
                assert receipt["status"] == "SUCCEEDED"
                return codes

        assert run_async(ready()) == [200, 200, 200]
        with psycopg.connect(pg_url) as db:
            versions = db.execute(
                "SELECT version, count(*) FROM schema_version GROUP BY version ORDER BY version"
            ).fetchall()
            names = db.execute("SELECT replica_id FROM replicas ORDER BY 1").fetchall()
        assert versions == [(v, 1) for v in range(1, PG_SCHEMA_VERSION + 1)], versions
        assert [n for (n,) in names] == ["m0", "m1", "m2"]
        for name in ("m0", "m1", "m2"):
            assert _terminate(held.by_name[name]) == 0, name

    newer = PG_SCHEMA_VERSION + 1
    with psycopg.connect(pg_url) as db:
        db.execute("INSERT INTO schema_version (version) VALUES (%s)", (newer,))
    before = _dump(pg_url)
    refused = subprocess.run(
        _replica_args(config, pg_url, "late"),
        cwd=ROOT,
        env={**os.environ, **TRACE_ENV},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2, refused.stderr
    assert "STORE_UNAVAILABLE" in refused.stderr, refused.stderr
    assert f"schema version {newer}, newer than this runtime's {PG_SCHEMA_VERSION}" in (
        refused.stderr
    )
    assert "seif runtime listening" not in refused.stdout and "Traceback" not in refused.stderr
    assert _dump(pg_url) == before  # nothing changed: no migration, no replica registered


# --- 4. nothing raw in the database ---------------------------------------------------------------


def test_no_table_holds_an_argument_a_reason_the_trace_key_or_a_token(
    tmp_path: Path, pg_url: str
) -> None:
    marker = "raw-argument-marker-4c9e1b7d"
    reason_marker = "approver-reason-marker-83fa02"
    with processes() as held:
        ex = held.executor(tmp_path)
        config = _config(tmp_path, ex)
        urls = held.replicas(config, pg_url, ["p0", "p1"])

        async def scenario() -> None:
            async with aiohttp.ClientSession() as session:
                ref = await _resolve(session, urls["p0"])
                read = _call(ref, "inspect-context", "n-1", {"ref": f"course/{marker}"})
                failed = await _execute(session, urls["p1"], read)
                assert failed["status"] == "FAILED"  # dispatched: the executor knows no such ref
                search = _call(ref, "search-knowledge", "n-2", {"query": marker, "limit": 3})
                assert (await _execute(session, urls["p0"], search))["status"] == "SUCCEEDED"
                proposal = {**PROPOSAL, "summary": f"Summarise {marker}."}
                change = _call(ref, "propose-change", "n-3", proposal)
                held_call = await _execute(session, urls["p0"], change)
                assert held_call["reason"] == "APPROVAL_REQUIRED", held_call
                approval = await _post(
                    session,
                    urls["p0"] + "/v1/context/tools/approve",
                    {**change, "reason": f"checked: {reason_marker}"},
                    headers=APPROVAL,
                )
                body = {**change, "approvalId": approval["approvalId"]}
                done = await _execute(session, urls["p1"], body)  # used through the other
                assert done["status"] == "SUCCEEDED", done
                # one call held and never decided (its arguments still held at the dump), one
                # held and rejected with a reason, in contexts of their own (one change each)
                for call_id in ("n-4", "n-5"):
                    second = await _resolve(session, urls["p1"])
                    other = _call(
                        second, "propose-change", call_id, {**proposal, "kind": "correct"}
                    )
                    held_call = await _execute(session, urls["p1"], other)
                    assert held_call["reason"] == "APPROVAL_REQUIRED", held_call
                refusal = {**other, "reason": f"no: {reason_marker}"}
                rejected = await _post(
                    session, urls["p1"] + "/v1/context/tools/reject", refusal, headers=APPROVAL
                )
                assert rejected["state"] == "REJECTED", rejected
                stats = await _stats(session, ex)
                assert stats["byCallId"] == {"n-2": 1, "n-3": 1}, stats  # n-1: refused there
                assert stats["requests"] == {
                    "inspect-context": 1,
                    "search-knowledge": 1,
                    "propose-change": 1,
                }, stats

        run_async(scenario())
    dumped = _dump(pg_url)
    assert {"intents", "approvals", "decision_log", "contexts"} <= set(dumped), sorted(dumped)
    # the dump reads what the rows hold, the records' CBOR bytes included
    records = "".join(dumped["decision_log"])
    for event in ("DISCLOSED", "INTENT", "RESULT", "APPROVED", "REJECTED", "n-1", "n-4"):
        assert event in records, event
    assert {"p0", "p1"} <= {str(v) for v in dumped["replicas"]}
    secrets = {
        "argument": marker,
        "approval reason": reason_marker,
        "trace key": TRACE_KEY,
        **{f"token {t}": v for t, v in TOOL_TOKENS.items()},
        "app token": APP_TOKEN,
        "reader token": READER_TOKEN,
        "other app token": OTHER_APP_TOKEN,
        "operator token": OPERATOR_TOKEN,
        "approval token": APPROVAL_TOKEN,
    }
    for table, texts in dumped.items():
        for text in texts:
            for what, secret in secrets.items():
                assert secret not in text, f"{what} in table {table}"
                assert secret.encode().hex() not in text, f"{what} (hex) in table {table}"
