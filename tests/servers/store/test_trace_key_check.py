"""A changed fingerprint key is refused at start (issue 29's attack pass): a runtime started
with another `traceKeyRef` secret accepted it silently, and then every earlier call id answered
`CALL_CONFLICT` (its fingerprint no longer matched). The data directory remembers a keyed check
value of its key (`key.check`, never the key), written at the first start and at the next start
of a directory written before it existed; `seif serve` with another key exits 2 with
`TRACE_KEY_CHANGED` on stderr, changing nothing. Replicas on PostgreSQL share the check value
the first replica recorded (schema version 4), and one started with another key is refused the
same way, against the real server."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import blake3
import psycopg
import pytest
import requests

from servers.config.files import TRACE_KEY_CONTEXT
from servers.log.decision_log import cbor_items
from servers.store.keycheck import LABEL, KeyChanged, check_value
from servers.store.postgres.store import PgStore
from tests.support import pg_support
from tests.support.runtime_harness import (
    BEARER,
    ENV,
    HOST,
    READ_ARGS,
    ROOT,
    Config,
    bindings_document,
    executor_process,
    listening,
    run_async,
    running_stack,
    seif_command,
    start_serve,
    stop,
    write_config,
)

pg_url = pg_support.pg_url  # the fixture: a new empty database per test

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

SECRET = "trace-key-check-secret-4d1f9b"
OTHER = "trace-key-check-other-secret-7a2c"
NOW = 1_800_000_000_000


def _derived(secret: str) -> bytes:
    """The fingerprint key a `traceKeyRef` secret gives (``servers.config.files``)."""
    return blake3.blake3(secret.encode(), derive_key_context=TRACE_KEY_CONTEXT).digest()


def _keyed(root: Path, executor: str) -> Config:
    document = {**bindings_document(executor), "traceKeyRef": "env:CONTEXT_TOOL_TRACE_KEY"}
    return write_config(root, executor, bindings=document)


def _env(secret: str) -> dict[str, str]:
    return {**ENV, "CONTEXT_TOOL_TRACE_KEY": secret}


def _a_call(base: str, call_id: str = "k1") -> dict[str, Any]:
    resolve = {"objective": "learner", "consumer": "tutor-app"}
    ref = requests.post(f"{base}/v1/context/resolve", json=resolve, headers=BEARER, timeout=30)
    body = {
        "contextRef": ref.json()["contextRef"],
        "tool": "inspect-context",
        "callId": call_id,
        "arguments": READ_ARGS,
    }
    execute = f"{base}/v1/context/tools/execute"
    receipt: dict[str, Any] = requests.post(execute, json=body, headers=BEARER, timeout=30).json()
    return {"body": body, "receipt": receipt}


def _files(data: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(data.iterdir()) if p.name != "owner.lock"}


def _refused_start(config: Config, env: dict[str, str], name: str) -> str:
    """`seif serve` that must not start: its stderr, once it exited 2."""
    proc = start_serve(config, env=env, name=name)
    try:
        assert proc.wait(60) == 2
    finally:
        stop(proc)
    return (config.data.parent / f"{name}.err").read_text()


def test_the_first_start_records_the_key_and_a_start_with_another_is_refused(
    tmp_path: Path,
) -> None:
    with executor_process(tmp_path) as executor:
        config = _keyed(tmp_path, executor)
        first = start_serve(config, env=_env(SECRET), name="first")
        try:
            base = listening(first)
            check = config.data / "key.check"
            written = check.read_bytes()  # written before the runtime listens
            assert written == (check_value(_derived(SECRET)) + "\n").encode()
            assert written[:-1] == blake3.blake3(LABEL, key=_derived(SECRET)).hexdigest().encode()
            assert check.stat().st_mode & 0o777 == 0o600
            assert SECRET.encode() not in written and _derived(SECRET).hex().encode() not in written
            call = _a_call(base)
            assert call["receipt"]["status"] == "SUCCEEDED", call
            first.send_signal(signal.SIGTERM)  # a clean stop: the store checkpointed
            assert first.wait(20) == 0
        finally:
            stop(first)
        log = config.data / "decisions.cbor"
        with log.open("rb") as fh:
            *_, (_at, last, _record) = cbor_items(fh)
        with log.open("ab") as fh:  # a torn record too: refused before the log's tail is cut
            fh.write(last[: len(last) // 2])
        before = _files(config.data)
        err = _refused_start(config, _env(OTHER), "other")
        assert f"{config.data / 'key.check'}: TRACE_KEY_CHANGED: " in err, err
        assert "CALL_CONFLICT" in err and f"{config.data / 'key.check'}: remedy: " in err, err
        assert "Traceback" not in err and OTHER not in err and SECRET not in err
        assert _files(config.data) == before  # nothing written, cut or created
        again = start_serve(config, env=_env(SECRET), name="again")  # the right key: it starts
        try:
            base = listening(again)
            execute = f"{base}/v1/context/tools/execute"
            repeat = requests.post(execute, json=call["body"], headers=BEARER, timeout=30).json()
            assert (repeat["status"], repeat["duplicate"]) == ("SUCCEEDED", True), repeat
        finally:
            stop(again)


def test_a_directory_without_a_check_value_gets_one_at_its_next_start(tmp_path: Path) -> None:
    """A data directory an earlier runtime wrote (no `key.check`; `runtime.key` made its
    fingerprints) gets the check value of the key it starts with; a later start with the
    bindings' `traceKeyRef` key instead is refused."""

    async def history() -> Config:
        async with running_stack(tmp_path) as s:
            ctx = (await s.resolve(objective="learner", consumer="tutor-app"))["contextRef"]
            receipt = await s.execute(ctx, "inspect-context", "h1", READ_ARGS)
            assert receipt["status"] == "SUCCEEDED"
            return s.config

    config = run_async(history())
    check = config.data / "key.check"
    check.unlink()  # as a runtime before the check left the directory
    runtime_key = (config.data / "runtime.key").read_bytes()
    with executor_process(tmp_path) as executor:
        config = write_config(tmp_path, executor)
        proc = start_serve(config, name="next")
        try:
            listening(proc)
            assert check.read_bytes() == (check_value(runtime_key) + "\n").encode()
        finally:
            stop(proc)
        config = _keyed(tmp_path, executor)
        err = _refused_start(config, _env(SECRET), "keyed")
        assert f"{check}: TRACE_KEY_CHANGED: " in err, err


# --- replicas on PostgreSQL ---------------------------------------------------------------------


def test_a_store_records_the_first_key_and_refuses_another(pg_url: str) -> None:
    first = PgStore.open(pg_url, replica_id="r0", now_ms=NOW, key_check=check_value(b"a" * 32))
    first.close()
    with pytest.raises(KeyChanged) as refused:
        PgStore.open(pg_url, replica_id="r1", now_ms=NOW, key_check=check_value(b"b" * 32))
    assert "start every replica with the same `traceKeyRef` secret" in refused.value.message
    with psycopg.connect(pg_url) as db:
        replicas = db.execute("SELECT replica_id FROM replicas").fetchall()
        recorded = db.execute("SELECT value FROM key_check").fetchall()
    assert replicas == [("r0",)]  # the refused replica registered nothing
    assert recorded == [(check_value(b"a" * 32),)]
    PgStore.open(pg_url, replica_id="r2", now_ms=NOW, key_check=check_value(b"a" * 32)).close()


def test_replicas_starting_together_with_two_keys_one_key_wins(pg_url: str) -> None:
    keys = [bytes([n]) * 32 for n in range(6)]
    outcomes: dict[int, str] = {}

    def start(n: int) -> None:
        try:
            store = PgStore.open(
                pg_url, replica_id=f"t{n}", now_ms=NOW, key_check=check_value(keys[n % 2])
            )
        except KeyChanged:
            outcomes[n] = "refused"
        else:
            store.close()
            outcomes[n] = "started"

    threads = [threading.Thread(target=start, args=(n,)) for n in range(len(keys))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    with psycopg.connect(pg_url) as db:
        [(recorded,)] = db.execute("SELECT value FROM key_check").fetchall()
    winner = [check_value(k) for k in keys[:2]].index(recorded)
    assert outcomes == {n: "started" if n % 2 == winner else "refused" for n in range(6)}


def _replica(config: Config, url: str, name: str, secret: str) -> subprocess.Popen[str]:
    args = [
        *seif_command(), "serve", "--build", str(config.build), "--bindings",
        str(config.bindings), "--credentials", str(config.credentials), "--store", url,
        "--replica-id", name, "--host", HOST, "--port", "0",
    ]  # fmt: skip
    with (config.data.parent / f"{name}.err").open("w") as err:
        return subprocess.Popen(
            args,
            cwd=ROOT,
            env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), **_env(secret)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )


def test_a_replica_started_with_another_key_is_refused(tmp_path: Path, pg_url: str) -> None:
    with executor_process(tmp_path) as executor:
        config = _keyed(tmp_path, executor)
        first = _replica(config, pg_url, "k0", SECRET)
        try:
            call = _a_call(listening(first, timeout=60))
            assert call["receipt"]["status"] == "SUCCEEDED", call
            other = _replica(config, pg_url, "k1", OTHER)
            assert other.wait(60) == 2
            stop(other)
            err = (tmp_path / "k1.err").read_text()
            assert f"{config.bindings}:/traceKeyRef: TRACE_KEY_CHANGED: " in err, err
            assert "CALL_CONFLICT" in err and "Traceback" not in err and OTHER not in err
            with psycopg.connect(pg_url) as db:
                names = db.execute("SELECT replica_id FROM replicas ORDER BY 1").fetchall()
            assert names == [("k0",)]  # refused before it registered
        finally:
            stop(first)
