"""The chain of record digests (record format 2): every tampering named at its `seq` by
`seif trace verify` (CBOR and JSON Lines), by the runtime's pass at open (which refuses the log)
and by replay (tests/seif/cli/test_replay_runtime.py); a log of format 1 read and continued; exit
codes 0, 1 and 2; `seif trace export` keeping the chain; `GET /v1/traces/head` on a real runtime
agreeing with `seif trace verify`, its scope enforced; and a property over any log the writer
writes: it verifies, and any change to one record or its removal is seen where it must be."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy.json.canonical import canonical_cbor
from policy.json.strict import dump_bytes, loads
from seif.cli import main
from seif.tracefile import TraceFileError, open_log
from servers.log.chain import Verified, record_digest
from servers.log.decision_log import (
    EVENTS,
    ChainBroken,
    DamagedRecord,
    DecisionLog,
    cbor_items,
    read_records,
)
from servers.log.reading import scan
from servers.store.sqlite.datadir import DataDir, DataDirError
from servers.store.sqlite.opening import open_data
from tests.support.runtime_harness import (
    BEARER,
    ENV,
    EXECUTOR,
    OPERATOR_TOKEN,
    READ_ARGS,
    READER_TOKEN,
    TOOL_TOKENS,
    Config,
    bindings_document,
    prepare_config,
    run_async,
    running_stack,
    runtime_stack,
    serving,
    write_config,
)

NOW = 1_800_000_000_000
COUNT = 8


def event(i: int) -> dict[str, Any]:
    return {"event": "REPORTED", "at": NOW + i, "contextRef": f"ctx_{i}", "tools": ["t" * i]}


def written(path: Path, count: int = COUNT) -> list[dict[str, Any]]:
    """A log of ``count`` records as the writer writes them; its records."""
    with DecisionLog.open(path, fsync_every=0) as log:
        for i in range(count):
            log.append(event(i))
    return list(read_records(path))


def stored(path: Path) -> list[tuple[int, bytes, Any]]:
    with path.open("rb") as fp:
        return list(cbor_items(fp))


def as_file(records: list[dict[str, Any]], path: Path, fmt: str) -> Path:
    """The records as a CBOR log (canonical CBOR: the bytes as stored) or a JSON Lines one."""
    if fmt == "cbor":
        path.write_bytes(b"".join(canonical_cbor(r) for r in records))
    else:
        path.write_bytes(b"".join(dump_bytes(r) + b"\n" for r in records))
    return path


def verify(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    """`seif trace verify ARGS --json`: its exit code and its document."""
    capsys.readouterr()
    code = main(["trace", "verify", *args, "--json"])
    return code, loads(capsys.readouterr().out)


def verify_text(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["trace", "verify", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def forged(records: list[dict[str, Any]], after: int, seq: int) -> dict[str, Any]:
    """A valid-looking record whose ``prev`` names ``records[after]`` exactly."""
    prev = record_digest(canonical_cbor(records[after]))
    return {**event(99), "v": 2, "seq": seq, "prev": prev}


def _modified(r: list[dict[str, Any]]) -> int:
    r[2]["contextRef"] = "ctx_forged"  # seq 3: still a valid record
    return 4


def _removed(r: list[dict[str, Any]]) -> int:
    del r[2]  # seq 3
    return 4


def _removed_first(r: list[dict[str, Any]]) -> int:
    del r[0]
    return 2


def _inserted(r: list[dict[str, Any]]) -> int:
    r.insert(2, forged(r, 1, 3))  # after seq 2, linked to it and claiming seq 3
    return 3  # the original seq 3 no longer links to the record before it


def _inserted_unlinked(r: list[dict[str, Any]]) -> int:
    r.insert(2, forged(r, 0, 3))  # linked to seq 1, not to seq 2 before it
    return 3


def _reordered(r: list[dict[str, Any]]) -> int:
    r[2], r[3] = r[3], r[2]  # 1, 2, 4, 3, 5, ...
    return 4


def _truncated_in_the_middle(r: list[dict[str, Any]]) -> int:
    del r[3:6]  # seq 4, 5 and 6: cut, then the later ones appended
    return 7


def _version_1_after_2(r: list[dict[str, Any]]) -> int:
    del r[4]["prev"]
    r[4]["v"] = 1
    return 5


def _null_prev_mid_log(r: list[dict[str, Any]]) -> int:
    r[4]["prev"] = None
    return 5


TAMPERS: dict[str, Callable[[list[dict[str, Any]]], int]] = {
    "modified": _modified,
    "removed": _removed,
    "removed first": _removed_first,
    "inserted": _inserted,
    "inserted unlinked": _inserted_unlinked,
    "reordered": _reordered,
    "truncated in the middle": _truncated_in_the_middle,
    "version 1 after 2": _version_1_after_2,
    "null prev mid-log": _null_prev_mid_log,
}


# --- seif trace verify ---------------------------------------------------------------------


def test_an_intact_log_verifies_as_written_and_as_exported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    log = data / "decisions.cbor"
    records = written(log)
    assert records[0]["prev"] is None and all(r["v"] == 2 for r in records)
    head = DecisionLog.open(log)
    expected = {"seq": COUNT, "digest": record_digest(stored(log)[-1][1])}
    assert head.head.to_json() == expected
    head.close()
    # canonical CBOR gives the stored bytes back: a JSON Lines export verifies alike
    assert as_file(records, tmp_path / "again.cbor", "cbor").read_bytes() == log.read_bytes()
    jsonl = as_file(records, tmp_path / "log.jsonl", "jsonl")
    document = {"ok": True, "records": COUNT, "chained": COUNT, "unchained": 0}
    for args in (["--data", str(data)], ["--log", str(log)], ["--log", str(jsonl)]):
        code, found = verify(capsys, *args)
        assert code == 0 and found == {**document, "head": expected, "broken": None}, args
    code, out, err = verify_text(capsys, "--log", str(log))
    assert code == 0 and err == ""
    assert f"head: seq {COUNT} {expected['digest']}" in out
    assert f"OK: {COUNT} records, the chain holds" in out


@pytest.mark.parametrize("fmt", ["cbor", "jsonl"])
@pytest.mark.parametrize("name", sorted(TAMPERS))
def test_every_tampering_is_named_at_its_seq(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, fmt: str
) -> None:
    records = written(tmp_path / "decisions.cbor")
    expected = TAMPERS[name](records)
    path = as_file(records, tmp_path / f"tampered.{fmt}", fmt)
    code, found = verify(capsys, "--log", str(path))
    assert code == 1 and found["ok"] is False, found
    assert found["broken"]["seq"] == expected, found
    # everything before the break links; the head is that of the last record before it
    assert found["head"]["seq"] is None or found["head"]["seq"] <= expected
    code, out, _err = verify_text(capsys, "--log", str(path))
    assert code == 1 and f"FAIL: the chain breaks at seq {expected}: " in out
    if fmt == "cbor":  # the runtime's own pass at open names the same seq
        with path.open("rb") as fp, pytest.raises(ChainBroken) as refused:
            scan(fp)
        assert refused.value.seq == expected


def test_problems_say_what_broke(tmp_path: Path) -> None:
    records = written(tmp_path / "decisions.cbor")
    cases = {
        "removed first": "records before it are missing",
        "version 1 after 2": "a record of version 1 (no `prev`) after one of version 2",
        "null prev mid-log": "`prev` is null, but seq 4 is before it",
        "modified": "`prev` is not the digest of the record before it (seq 3)",
    }
    for name, problem in cases.items():
        copy = [dict(r) for r in records]
        TAMPERS[name](copy)
        verified = open_log(as_file(copy, tmp_path / "t.cbor", "cbor")).verify()
        assert verified.broken is not None and problem in verified.broken.problem, name


def test_unreadable_logs_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    garbage = tmp_path / "garbage.cbor"
    garbage.write_bytes(b"not a log at all")
    no_prev = as_file([{**event(1), "v": 2, "seq": 1}], tmp_path / "no-prev.cbor", "cbor")
    bad_prev = as_file(
        [{**event(1), "v": 2, "seq": 1, "prev": "blake3:XY"}], tmp_path / "p", "cbor"
    )
    empty_dir = tmp_path / "no-log"
    empty_dir.mkdir()
    for args in (
        ["--log", str(garbage)],
        ["--log", str(no_prev)],
        ["--log", str(bad_prev)],
        ["--log", str(tmp_path / "missing.cbor")],
        ["--data", str(empty_dir)],
    ):
        code, found = verify(capsys, *args)
        assert code == 2 and found["ok"] is False, args
        assert found["error"]["code"] == "LOG_UNREADABLE"
        code, out, err = verify_text(capsys, *args)
        assert code == 2 and out == "" and err.startswith("seif trace verify: "), args
    # a record that swallows the ones after it (a length widened) is damage, not a torn tail
    log = tmp_path / "decisions.cbor"
    written(log)
    whole = bytearray(log.read_bytes())
    whole[stored(log)[2][0]] = 0xBA  # the third record's map header: a 4-byte count
    log.write_bytes(bytes(whole))
    code, found = verify(capsys, "--log", str(log))
    assert code == 2 and "intact record starts at byte" in found["error"]["message"]


def test_a_torn_final_record_is_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "decisions.cbor"
    written(log)
    last = stored(log)[-1][1]
    with log.open("ab") as fp:
        fp.write(last[: len(last) // 2])
    code, found = verify(capsys, "--log", str(log))
    assert code == 0 and found["records"] == COUNT and found["head"]["seq"] == COUNT
    code, out, _err = verify_text(capsys, "--log", str(log))
    assert code == 0 and f"left out a final record still being written ({len(last) // 2}" in out


def test_an_empty_log_verifies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.cbor").write_bytes(b"")
    code, found = verify(capsys, "--log", str(tmp_path / "empty.cbor"))
    assert code == 0 and found["records"] == 0
    assert found["head"] == {"seq": None, "digest": None} and found["broken"] is None


# --- a log of format 1 ----------------------------------------------------------------------


def _version_1_log(path: Path, count: int) -> list[bytes]:
    raws = [canonical_cbor({**event(i), "v": 1, "seq": i + 1}) for i in range(count)]
    path.write_bytes(b"".join(raws))
    return raws


def test_a_version_1_log_is_read_and_continued(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "decisions.cbor"
    raws = _version_1_log(log, 3)
    code, found = verify(capsys, "--log", str(log))  # unchained, not broken
    assert code == 0 and (found["chained"], found["unchained"]) == (0, 3)
    assert found["head"] == {"seq": 3, "digest": record_digest(raws[-1])}
    code, out, _err = verify_text(capsys, "--log", str(log))
    assert code == 0 and "all 3 records of version 1, unchained" in out
    with DecisionLog.open(log) as writer:
        assert writer.head.to_json() == {"seq": 3, "digest": record_digest(raws[-1])}
        assert writer.append(event(3)) == 4 and writer.append(event(4)) == 5
    records = list(read_records(log))
    assert [r["v"] for r in records] == [1, 1, 1, 2, 2]
    assert records[3]["prev"] == record_digest(raws[-1])  # the last record of format 1
    assert "prev" not in records[2]
    code, found = verify(capsys, "--data", str(tmp_path))
    assert code == 0 and (found["records"], found["chained"], found["unchained"]) == (5, 2, 3)
    code, out, _err = verify_text(capsys, "--log", str(log))
    assert "3 records of version 1 before the chain begins: unchained" in out
    # the last record of format 1 is covered by the first of format 2; the earlier ones not
    whole = log.read_bytes()
    changed = canonical_cbor({**event(7), "v": 1, "seq": 3})
    at = len(raws[0]) + len(raws[1])
    (tmp_path / "last.cbor").write_bytes(whole[:at] + changed + whole[at + len(raws[2]) :])
    assert verify(capsys, "--log", str(tmp_path / "last.cbor"))[1]["broken"]["seq"] == 4
    changed = canonical_cbor({**event(7), "v": 1, "seq": 1})
    (tmp_path / "first.cbor").write_bytes(changed + whole[len(raws[0]) :])
    assert verify(capsys, "--log", str(tmp_path / "first.cbor"))[0] == 0


# --- the runtime's pass at open ---------------------------------------------------------------


def test_the_runtime_refuses_to_open_a_broken_chain(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    owner = DataDir.open(data)
    try:
        opened = open_data(owner, trace_key=None, now_ms=NOW)
        for i in range(COUNT):
            opened.log.append(event(i))
        opened.store.close()
        opened.log.close()
    finally:
        owner.close()
    log = data / "decisions.cbor"
    records = list(read_records(log))
    _reordered(records)
    as_file(records, log, "cbor")
    before = log.read_bytes()
    with pytest.raises(ChainBroken) as broken:
        DecisionLog.open(log)
    assert broken.value.seq == 4 and isinstance(broken.value, DamagedRecord)
    owner = DataDir.open(data)
    try:
        with pytest.raises(DataDirError) as refused:
            open_data(owner, trace_key=None, now_ms=NOW)
    finally:
        owner.close()
    assert refused.value.code == "LOG_CHAIN_BROKEN"
    assert "breaks at seq 4 (byte" in refused.value.message
    assert "as evidence" in refused.value.remedy
    assert log.read_bytes() == before  # kept exactly, as evidence


def test_a_log_cut_before_the_store_s_mark_fails_verify_as_the_runtime_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 29: `seif trace verify --data` said OK on a log cut in half while the store in
    the same directory had seen a later seq (the runtime refused that directory)."""

    async def calls() -> Config:
        async with running_stack(tmp_path) as s:
            for i in range(3):
                ctx = (await s.resolve(objective="learner", consumer="tutor-app"))["contextRef"]
                receipt = await s.execute(ctx, "inspect-context", f"r{i}", READ_ARGS)
                assert receipt["status"] == "SUCCEEDED"
            code, serving = verify(capsys, "--data", str(s.config.data))  # while it serves
            assert code == 0 and serving["storeMark"] <= serving["head"]["seq"], serving
            return s.config

    config = run_async(calls())
    data, log = config.data, config.data / "decisions.cbor"
    files = sorted(p.name for p in data.iterdir())
    code, found = verify(capsys, "--data", str(data))
    assert sorted(p.name for p in data.iterdir()) == files  # read only: no -wal, no -shm
    mark = found["storeMark"]
    assert code == 0 and mark == found["head"]["seq"] == 9, found  # 3 x DISCLOSED, INTENT, RESULT
    whole = log.read_bytes()
    log.write_bytes(whole[: len(whole) // 2])  # in half: whole records, then a part of one
    code, found = verify(capsys, "--data", str(data))
    assert code == 1 and found["ok"] is False and found["broken"] is None, found
    assert found["error"]["code"] == "LOG_TRUNCATED" and found["storeMark"] == mark
    lost = found["error"]["message"]
    assert f"ends at seq {found['head']['seq']} (and " in lost and f"reach seq {mark}:" in lost
    code, out, err = verify_text(capsys, "--data", str(data))
    assert code == 1 and err == "" and f"FAIL: LOG_TRUNCATED: {lost}" in out
    assert f"the store (`dispatch.sqlite`) saw the log reach seq {mark}" in out
    assert verify(capsys, "--log", str(log))[0] == 0  # the log alone: its chain holds
    with pytest.raises(DataDirError) as refused:  # the runtime: the same check, the same words
        prepare_config(config)
    assert (refused.value.code, refused.value.message) == ("LOG_TRUNCATED", lost)
    assert log.read_bytes() == whole[: len(whole) // 2]  # neither changed the log


# --- export -----------------------------------------------------------------------------------


def test_export_keeps_the_chain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    data.mkdir()
    written(data / "decisions.cbor")
    with DecisionLog.open(data / "decisions.cbor") as log:
        head = log.head
    capsys.readouterr()
    for fmt in ("cbor", "jsonl"):
        out = tmp_path / f"export.{fmt}"
        args = ["trace", "export", "--data", str(data), "--out", str(out), "--format", fmt]
        assert main(args) == 0
        assert f"head: seq {head.seq} {head.digest}" in capsys.readouterr().out
        code, found = verify(capsys, "--log", str(out))
        assert code == 0 and found["head"] == head.to_json() and found["chained"] == COUNT
    assert (tmp_path / "export.cbor").read_bytes() == (data / "decisions.cbor").read_bytes()
    lines = (tmp_path / "export.jsonl").read_bytes().splitlines()
    written_prevs = [r["prev"] for r in read_records(data / "decisions.cbor")]
    assert [loads(line)["prev"] for line in lines] == written_prevs  # as written


# --- GET /v1/traces/head ----------------------------------------------------------------------


def test_the_head_route_agrees_with_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def scenario() -> None:
        async with running_stack(tmp_path) as s:
            empty = await s.call("GET", "/v1/traces/head")
            assert empty.status == 200 and empty.body == {"seq": None, "digest": None}
            ctx = (await s.resolve(objective="learner", consumer="tutor-app"))["contextRef"]
            assert (await s.execute(ctx, "inspect-context", "r1", READ_ARGS))["status"] == (
                "SUCCEEDED"
            )
            reply = await s.call("GET", "/v1/traces/head")
            operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
            assert (await s.call("GET", "/v1/traces/head", headers=operator)).body == reply.body
            assert reply.status == 200 and reply.body["seq"] == 3  # DISCLOSED, INTENT, RESULT
            assert re.fullmatch(r"blake3:[0-9a-f]{64}", reply.body["digest"])
            # exported and verified while the runtime serves: the same head
            out = tmp_path / "export.cbor"
            assert main(["trace", "export", "--data", str(s.config.data), "--out", str(out)]) == 0
            code, found = verify(capsys, "--log", str(out))
            assert code == 0 and found["head"] == reply.body and found["chained"] == 3
            assert verify(capsys, "--data", str(s.config.data))[1]["head"] == reply.body
            # the scope, as for the traces: a credential without traces.read is refused
            reader = {"Authorization": f"Bearer {READER_TOKEN}"}
            refused = await s.call("GET", "/v1/traces/head", headers=reader)
            assert refused.status == 403 and refused.body["error"]["code"] == "FORBIDDEN"
            assert "traces.read" in refused.body["error"]["message"]
            assert (await s.call("GET", "/v1/traces/head", headers={})).status == 401
            # "head" is never taken for a contextRef: the trace of a context still answers
            trace = await s.call("GET", f"/v1/traces/{ctx}", headers=BEARER)
            assert [e["event"] for e in trace.body["events"]] == ["DISCLOSED", "INTENT", "RESULT"]

    run_async(scenario())


def test_the_head_route_on_postgres_names_the_tables_last_record(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table is not chained (record format 1): its head is the record of the highest seq,
    and an export of it verifies as unchained records with that head."""

    async def scenario() -> None:
        executor_app = EXECUTOR.create_app(tokens=TOOL_TOKENS, knobs={})
        async with serving(executor_app) as executor_url:
            keyed = {**bindings_document(executor_url), "traceKeyRef": "env:CONTEXT_TOOL_TRACE_KEY"}
            config = write_config(tmp_path, executor_url, bindings=keyed)
            env = {**ENV, "CONTEXT_TOOL_TRACE_KEY": "the-chain-tests-trace-key-0123456789"}
            stack = runtime_stack(
                config, executor_url, executor_app, env=env, store_url=pg_url, replica_id="r0"
            )
            async with stack as s:
                assert (await s.call("GET", "/v1/traces/head")).body == {
                    "seq": None,
                    "digest": None,
                }
                await s.resolve()
                await s.resolve(objective="learner", consumer="tutor-app")
                reply = await s.call("GET", "/v1/traces/head")
                out = tmp_path / "store.cbor"
                assert main(["trace", "export", "--store", pg_url, "--out", str(out)]) == 0
                code, found = verify(capsys, "--log", str(out))
                assert code == 0 and found["head"] == reply.body and reply.body["seq"] == 2
                assert (found["chained"], found["unchained"]) == (0, 2)
                assert all(r["v"] == 1 and "prev" not in r for r in read_records(out))

    run_async(scenario())


# --- the property ---------------------------------------------------------------------------

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    _TEXT,
    st.lists(_TEXT, max_size=3),
)
RECORDS = st.lists(
    st.fixed_dictionaries(
        {"event": st.sampled_from(sorted(EVENTS)), "contextRef": _TEXT, "n": _VALUE}
    ),
    min_size=1,
    max_size=8,
)


def _walk(path: Path) -> Verified | int:
    """The verify walk, or the byte where an unreadable log is damaged."""
    try:
        return open_log(path).verify()
    except TraceFileError as exc:
        found = re.search(r": byte (\d+): ", str(exc))
        assert found is not None, exc
        return int(found.group(1))


def _flip_outcome(path: Path, original: Verified, k: int, start: int, within_prev: bool) -> None:
    """One bit flipped inside record ``k`` (1-based), which starts at byte ``start``."""
    walked = _walk(path)
    if isinstance(walked, int):  # damage the format sees: never before the record
        assert walked >= start, (walked, start)
    elif walked.broken is not None:  # at the record after it; at it, for its own `prev`
        assert walked.broken.seq == (k if within_prev else k + 1), (walked.broken, k)
    else:  # only a change of the last record leaves the chain whole: the head tells
        assert k == original.records and walked.head != original.head, (k, walked)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(RECORDS, st.data())
def test_any_change_to_one_record_is_seen_where_it_must_be(
    records: list[dict[str, Any]], data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "decisions.cbor"
        with DecisionLog.open(log, fsync_every=0) as writer:
            for record in records:
                writer.append(record)
        items = stored(log)
        original = open_log(log).verify()
        n = len(items)
        assert original.ok and original.records == n == original.chained
        assert original.head.to_json() == {"seq": n, "digest": record_digest(items[-1][1])}
        k = data.draw(st.integers(1, n), label="record")
        whole = log.read_bytes()
        offset, raw, value = items[k - 1]
        # removed: seen at the record after it; the last one, by the head alone
        cut = Path(tmp) / "removed.cbor"
        cut.write_bytes(whole[:offset] + whole[offset + len(raw) :])
        removed = open_log(cut).verify()
        if k < n:
            assert removed.broken is not None and removed.broken.seq == k + 1, removed
        else:
            assert removed.ok and removed.head.seq == (n - 1 if n > 1 else None), removed
        # a value changed, re-encoded canonically: seen at the record after it
        changed = canonical_cbor({**value, "n": ["changed", value.get("n")]})
        edited = Path(tmp) / "edited.cbor"
        edited.write_bytes(whole[:offset] + changed + whole[offset + len(raw) :])
        walked = open_log(edited).verify()
        if k < n:
            assert walked.broken is not None and walked.broken.seq == k + 1, walked
            with edited.open("rb") as fp, pytest.raises(ChainBroken) as refused:
                scan(fp)
            assert refused.value.seq == k + 1
        else:
            assert walked.ok and walked.head != original.head
        # one bit flipped anywhere in it: damage, a break where it must be, or a new head
        at = offset + data.draw(st.integers(0, len(raw) - 1), label="byte")
        flipped = bytearray(whole)
        flipped[at] ^= 1 << data.draw(st.integers(0, 7), label="bit")
        bent = Path(tmp) / "flipped.cbor"
        bent.write_bytes(bytes(flipped))
        prev = value["prev"]
        place = raw.find(prev.encode()) if prev is not None else -1
        within_prev = place >= 0 and offset + place <= at < offset + place + len(prev)
        _flip_outcome(bent, original, k, offset, within_prev)
