"""`seif serve` as a real process on damaged or lost data: refused at start with exit 2, a
message naming the file, its code and the remedy, nothing changed on disk; the lock held on
the directory itself; and a store whose WAL lost its tail never dispatching a logged call
again. The executor runs as a separate process; every process is stopped by its own handle."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from policy.json.canonical import canonical_cbor
from servers.log.decision_log import cbor_items, read_records
from servers.store.sqlite.datadir import DataDir, DataDirError
from servers.store.sqlite.opening import open_data
from tests.support.runtime_harness import (
    APPROVAL,
    BEARER,
    PROPOSAL,
    READ_ARGS,
    Config,
    executor_process,
    listening,
    run_async,
    running_stack,
    start_serve,
    stop,
    write_config,
)

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
NOWHERE = "http://127.0.0.1:9"  # refused runtimes never reach an executor
STORE = "dispatch.sqlite"


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with a context, a dispatched read and an approval, cleanly closed."""
    root = tmp_path_factory.mktemp("history")

    async def session() -> None:
        async with running_stack(root) as s:
            ctx = (await s.resolve(objective="learner", consumer="tutor-app"))["contextRef"]
            assert (await s.execute(ctx, "inspect-context", "r1", READ_ARGS))["status"] == (
                "SUCCEEDED"
            )
            authoring = (await s.resolve())["contextRef"]
            await s.approval_id(authoring, "propose-change", "w1", PROPOSAL)

    run_async(session())
    return root / "data"


def _flip_second_record_header(data: Path) -> None:
    log = data / "decisions.cbor"
    with log.open("rb") as fp:
        offsets = [offset for offset, _raw, _value in cbor_items(fp)]
    whole = bytearray(log.read_bytes())
    whole[offsets[1]] ^= 0x01  # the map header: one pair more or fewer
    log.write_bytes(bytes(whole))


def _widen_a_middle_length(data: Path) -> None:
    """One changed byte: the second record's map header becomes a 4-byte count, so the record
    claims more than the file holds and reads to its end, as a torn tail would; the records
    after it are intact (and some are past the store's mark: DENIED records need no store
    write)."""
    log = data / "decisions.cbor"
    with log.open("rb") as fp:
        offsets = [offset for offset, _raw, _value in cbor_items(fp)]
    assert len(offsets) >= 4
    whole = bytearray(log.read_bytes())
    assert 0xA4 <= whole[offsets[1]] <= 0xB7
    whole[offsets[1]] = 0xBA
    log.write_bytes(bytes(whole))


def _rewrite_the_second_record(data: Path) -> None:
    """The second record's `at` changed, re-encoded canonically: a valid record that the
    chain of record digests sees at the third (its `prev` names the original bytes)."""
    log = data / "decisions.cbor"
    with log.open("rb") as fp:
        items = [(offset, raw, value) for offset, raw, value in cbor_items(fp)]
    assert len(items) >= 3 and items[2][2]["seq"] == 3
    offset, raw, value = items[1]
    changed = canonical_cbor({**value, "at": value["at"] + 1})
    whole = log.read_bytes()
    log.write_bytes(whole[:offset] + changed + whole[offset + len(raw) :])


def _garbage_page(data: Path) -> None:
    store = data / "dispatch.sqlite"
    whole = bytearray(store.read_bytes())
    assert len(whole) >= 3 * 4096
    whole[4096 : 2 * 4096] = random.Random(7).randbytes(4096)  # page 2, a table's root
    store.write_bytes(bytes(whole))


def _drop_last_record(data: Path) -> None:
    log = data / "decisions.cbor"
    with log.open("rb") as fp:
        last = [offset for offset, _raw, _value in cbor_items(fp)][-1]
    os.truncate(log, last)  # a record boundary: no torn tail, one record fewer


def _append(path: Path, data: bytes) -> None:
    with path.open("ab") as fp:
        fp.write(data)


def _header(path: Path) -> None:
    with path.open("r+b") as fp:
        fp.write(b"not a database!!")


Damage = Callable[[Path], Any]
DAMAGES: dict[str, tuple[str, str, Damage]] = {
    # name: (code, file named, damage)
    "garbage log tail": (
        "LOG_DAMAGED",
        "decisions.cbor",
        lambda d: _append(d / "decisions.cbor", b"garbage!"),
    ),
    "flipped log byte": ("LOG_DAMAGED", "decisions.cbor", _flip_second_record_header),
    "damaged length mid-log": ("LOG_DAMAGED", "decisions.cbor", _widen_a_middle_length),
    "rewritten log record": ("LOG_CHAIN_BROKEN", "decisions.cbor", _rewrite_the_second_record),
    "bad sqlite header": (
        "STORE_DAMAGED",
        "dispatch.sqlite",
        lambda d: _header(d / "dispatch.sqlite"),
    ),
    "garbage sqlite page": ("STORE_DAMAGED", "dispatch.sqlite", _garbage_page),
    "short runtime.key": (
        "KEY_INVALID",
        "runtime.key",
        lambda d: os.truncate(d / "runtime.key", 16),
    ),
    "0644 runtime.key": ("KEY_INVALID", "runtime.key", lambda d: (d / "runtime.key").chmod(0o644)),
    "log deleted": ("LOG_MISSING", "decisions.cbor", lambda d: (d / "decisions.cbor").unlink()),
    "log truncated": ("LOG_TRUNCATED", "decisions.cbor", _drop_last_record),
    "store deleted": (
        "STORE_MISSING",
        "dispatch.sqlite",
        lambda d: (d / "dispatch.sqlite").unlink(),
    ),
    "key deleted": ("KEY_MISSING", "runtime.key", lambda d: (d / "runtime.key").unlink()),
}


def _files(data: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(data.iterdir()) if p.name != "owner.lock"}


def test_damaged_or_lost_data_is_refused_with_exit_2(tmp_path: Path, history: Path) -> None:
    """Every case starts at once (independent processes), then each is checked."""
    started: dict[str, tuple[subprocess.Popen[str], Config, dict[str, bytes]]] = {}
    try:
        for name, (_code, _file, damage) in DAMAGES.items():
            config = write_config(tmp_path / name.replace(" ", "-"), NOWHERE)
            shutil.copytree(history, config.data)
            damage(config.data)
            started[name] = (start_serve(config), config, _files(config.data))
        deadline = time.monotonic() + 60
        for name, (proc, config, before) in started.items():
            code, file, _damage = DAMAGES[name]
            rc = proc.wait(max(1.0, deadline - time.monotonic()))
            err = (config.data.parent / "serve.err").read_text()
            assert rc == 2, (name, rc, err)
            assert f"{code}:" in err and file in err and "remedy:" in err, (name, err)
            assert "Traceback" not in err, (name, err)
            assert _files(config.data) == before, name  # nothing cut, created or repaired
            if name == "damaged length mid-log":  # the remedy must not be to cut the file
                assert "intact record starts at byte" in err and "do not cut" in err, err
            if name == "rewritten log record":  # named by seq; the log kept as evidence
                assert "breaks at seq 3 (byte" in err and "as evidence" in err, err
    finally:
        for proc, _config, _before in started.values():
            stop(proc)


def test_a_torn_final_record_is_cut_and_the_runtime_starts(tmp_path: Path, history: Path) -> None:
    """What a crash mid-append leaves (a prefix of a record) is tolerated, as always."""
    config = write_config(tmp_path, NOWHERE)
    shutil.copytree(history, config.data)
    log = config.data / "decisions.cbor"
    whole = log.read_bytes()
    with log.open("rb") as fp:
        *_, (_offset, last, _value) = cbor_items(fp)
    torn = last[: len(last) // 2]
    _append(log, torn)  # half of a record like the last one
    proc = start_serve(config)
    try:
        url = listening(proc)

        async def health() -> int:
            async with aiohttp.ClientSession() as session, session.get(url + "/v1/health") as r:
                return r.status

        assert run_async(health()) == 200
        assert log.read_bytes() == whole  # the torn tail is cut, nothing else
        side = config.data / f"decisions.cbor.torn-{len(whole)}"  # and saved, not destroyed
        assert side.read_bytes() == torn and side.stat().st_mode & 0o777 == 0o600
    finally:
        stop(proc)


def test_a_damaged_length_past_the_store_mark_is_refused_not_cut(
    tmp_path: Path, executor: str
) -> None:
    """The finding: DENIED records are logged without a store write, so after a crash they lie
    past the store's mark. One changed length byte in the first of them made the next start
    cut it and every record after it, silently. Now the start is refused (exit 2,
    LOG_DAMAGED) and the log is left exactly as it was."""
    config = write_config(tmp_path, executor)
    first = start_serve(config, name="first")
    procs = [first]
    try:
        rt = listening(first)
        ctx = _authoring_context(rt)
        for n in range(5):  # a write without an approval: DENIED, nothing in the store
            call = {"contextRef": ctx, "tool": "propose-change", "callId": f"w{n}"}
            denied = run_async(
                _post(rt + "/v1/context/tools/execute", {**call, "arguments": PROPOSAL}, BEARER)
            )
            assert denied["status"] == "DENIED", denied
        first.send_signal(signal.SIGKILL)  # no clean close: the mark stays behind the denials
        first.wait(10)
        log = config.data / "decisions.cbor"
        with log.open("rb") as fp:
            items = [(offset, value) for offset, _raw, value in cbor_items(fp)]
        denials = [offset for offset, value in items if value["event"] == "DENIED"]
        assert len(denials) == 5
        whole = bytearray(log.read_bytes())
        assert 0xA4 <= whole[denials[0]] <= 0xB7
        whole[denials[0]] = 0xBA  # the map header becomes a 4-byte count: beyond the file
        log.write_bytes(bytes(whole))

        second = start_serve(config, name="second")
        procs.append(second)
        assert second.wait(30) == 2
        err = (tmp_path / "second.err").read_text()
        assert "LOG_DAMAGED:" in err and f"byte {denials[0]}" in err, err
        assert f"intact record starts at byte {denials[1]}" in err and "Traceback" not in err
        assert log.read_bytes() == bytes(whole)  # nothing cut (the store recovers its WAL)
        assert not list(config.data.glob("decisions.cbor.*"))  # and no side file
    finally:
        for proc in procs:
            stop(proc)


# --- the lock on the directory itself -------------------------------------------------------


def test_unlinked_owner_lock_still_keeps_a_second_runtime_out(tmp_path: Path) -> None:
    config = write_config(tmp_path, NOWHERE)
    first = start_serve(config, name="first")
    procs = [first]
    try:
        listening(first)
        (config.data / "owner.lock").unlink()
        second = start_serve(config, name="second")
        procs.append(second)
        assert second.wait(30) == 3
        err = (tmp_path / "second.err").read_text()
        assert "DATA_DIR_LOCKED" in err and "Traceback" not in err, err
        assert not (config.data / "owner.lock").exists()  # the refused one created nothing
        first.send_signal(signal.SIGTERM)
        assert first.wait(20) == 0
        third = start_serve(config, name="third")  # released on exit: a new owner starts
        procs.append(third)
        listening(third)
        assert (config.data / "owner.lock").exists()
    finally:
        for proc in procs:
            stop(proc)


# --- a lost WAL tail ------------------------------------------------------------------------


@pytest.fixture
def executor(tmp_path: Path) -> Iterator[str]:
    with executor_process(tmp_path) as url:
        yield url


def _authoring_context(runtime: str) -> str:
    """A resolved authoring context of the runtime at ``runtime``: its contextRef."""
    body = {"objective": "authoring", "consumer": "course-authoring"}
    ref: str = run_async(_post(runtime + "/v1/context/resolve", body, BEARER))["contextRef"]
    return ref


async def _post(url: str, body: Any, headers: dict[str, str]) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, json=body, headers=headers) as r,
    ):
        assert r.status == 200, await r.text()
        found: dict[str, Any] = await r.json()
        return found


async def _stats(executor: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as session, session.get(executor + "/_stats") as r:
        found: dict[str, Any] = await r.json()
        return found


def test_a_lost_wal_tail_never_dispatches_an_approved_write_again(
    tmp_path: Path, executor: str
) -> None:
    """The runtime is killed after an approved write; the store's WAL then loses the frames
    written since the approval (the intent and its completion), as a disk that lied about a
    sync would. The log holds the INTENT and the RESULT: the write is never sent again."""
    config = write_config(tmp_path, executor)
    wal = config.data / "dispatch.sqlite-wal"
    first = start_serve(config, name="first")
    procs = [first]
    try:
        rt = listening(first)
        ctx = _authoring_context(rt)
        call = {"contextRef": ctx, "tool": "propose-change", "callId": "w1", "arguments": PROPOSAL}
        approved = run_async(
            _post(rt + "/v1/context/tools/approve", {**call, "reason": "ok"}, APPROVAL)
        )
        approved_size = wal.stat().st_size  # every frame up to the approval's commit
        done = run_async(
            _post(
                rt + "/v1/context/tools/execute",
                {**call, "approvalId": approved["approvalId"]},
                BEARER,
            )
        )
        assert done["status"] == "SUCCEEDED", done
        assert wal.stat().st_size > approved_size
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        os.truncate(wal, approved_size)  # the tail is lost
        (config.data / "dispatch.sqlite-shm").unlink()  # rebuilt from the WAL on open

        second = start_serve(config, name="second")
        procs.append(second)
        rt = listening(second)
        again = run_async(
            _post(
                rt + "/v1/context/tools/execute",
                {**call, "approvalId": approved["approvalId"]},
                BEARER,
            )
        )
        assert (again["status"], again["duplicate"], again["reason"]) == (
            "UNKNOWN",
            True,
            "RECONCILED",
        )
        assert run_async(_stats(executor))["byCallId"] == {"w1": 1}  # sent once, ever
        second.send_signal(signal.SIGTERM)
        assert second.wait(20) == 0
    finally:
        for proc in procs:
            stop(proc)
    w1 = [
        (r["event"], r.get("reason"))
        for r in read_records(config.data / "decisions.cbor")
        if r.get("callId") == "w1" and r["event"] != "APPROVED"
    ]
    assert w1 == [("INTENT", None), ("RESULT", None), ("UNKNOWN", "RECONCILED")]


# --- every flipped byte, in process ----------------------------------------------------------


def test_a_flipped_log_byte_is_refused_or_harmless_never_a_crash(
    tmp_path: Path, history: Path
) -> None:
    """A sample of single-bit flips over the whole log: each start refuses with a typed error
    (never another exception): one the format cannot see (inside a string or a number: most
    of these, whose records are mostly digests, ids and explanations) breaks the chain of
    record digests at the next record (``LOG_CHAIN_BROKEN``). Only a flip inside the last
    record starts (nothing follows it: its digest, the head, is what an operator anchors)."""
    whole = (history / "decisions.cbor").read_bytes()
    with (history / "decisions.cbor").open("rb") as fp:
        last = [offset for offset, _raw, _value in cbor_items(fp)][-1]
    rng = random.Random(3)
    positions = sorted(rng.sample(range(len(whole)), min(150, len(whole))))
    codes: dict[str, int] = {}
    for n, position in enumerate(positions):
        data = tmp_path / f"d{n}"
        shutil.copytree(history, data)
        flipped = bytearray(whole)
        flipped[position] ^= 1 << rng.randrange(8)
        (data / "decisions.cbor").write_bytes(bytes(flipped))
        owner = DataDir.open(data)
        try:
            opened = open_data(owner, trace_key=None, now_ms=1_800_000_000_000)
            opened.store.close()
            opened.log.close()
            assert position >= last, position  # only the last record's flips start
            codes["started"] = codes.get("started", 0) + 1
        except DataDirError as exc:
            assert exc.code in ("LOG_DAMAGED", "LOG_TRUNCATED", "LOG_CHAIN_BROKEN"), exc
            codes[exc.code] = codes.get(exc.code, 0) + 1
        finally:
            owner.close()
        shutil.rmtree(data)
    assert codes.get("LOG_DAMAGED", 0) >= 10 and codes.get("LOG_CHAIN_BROKEN", 0) >= 10, codes
