"""The decision log: a CBOR sequence of canonical records, continued across reopenings,
tolerant of a torn tail, readable while it is written."""

from __future__ import annotations

import asyncio
import io
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import blake3
import cbor2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy.json.canonical import canonical_cbor
from servers.log import encoding
from servers.log.decision_log import (
    EVENTS,
    DamagedRecord,
    DecisionLog,
    DecisionLogError,
    LogScan,
    TailNotSaved,
    admit,
    fragment,
    read_records,
    record_fields_allowed,
)

NOW = 1_700_000_000_000


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "decisions.cbor"


def _raw_items(path: Path) -> list[bytes]:
    data = path.read_bytes()
    stream = io.BytesIO(data)
    decoder = cbor2.CBORDecoder(stream)
    out, pos = [], 0
    while pos < len(data):
        decoder.decode()
        out.append(data[pos : stream.tell()])
        pos = stream.tell()
    return out


def test_round_trip(path: Path) -> None:
    with DecisionLog.open(path) as log:
        assert log.append({"event": "INTENT", "at": NOW, "tool": "t", "callId": "c1"}) == 1
        assert log.append({"event": "RESULT", "at": NOW + 1, "status": "SUCCEEDED"}) == 2
        assert log.last_seq == 2
    records = list(read_records(path))
    first = _raw_items(path)[0]
    assert records == [
        {"v": 2, "seq": 1, "at": NOW, "event": "INTENT", "tool": "t", "callId": "c1", "prev": None},
        {
            "v": 2,
            "seq": 2,
            "at": NOW + 1,
            "event": "RESULT",
            "status": "SUCCEEDED",
            "prev": "blake3:" + blake3.blake3(first).hexdigest(),  # the first record's bytes
        },
    ]
    assert _raw_items(path) == [canonical_cbor(r) for r in records]  # canonical, one by one
    assert path.stat().st_mode & 0o077 == 0


def test_every_event_and_nested_values(path: Path) -> None:
    nested = {"observations": {"t": {"state": "READY", "version": "1.0.0"}}, "n": [1, 2.5, None]}
    with DecisionLog.open(path) as log:
        for event in sorted(EVENTS):
            log.append({"event": event, **nested})
    records = list(read_records(path))
    assert [r["event"] for r in records] == sorted(EVENTS)
    assert all(r["observations"] == nested["observations"] for r in records)
    assert all(isinstance(r["at"], int) for r in records)


def test_reopen_continues_seq(path: Path) -> None:
    with DecisionLog.open(path) as log:
        log.append({"event": "INTENT"})
        log.append({"event": "RESULT"})
    with DecisionLog.open(path) as log:
        assert log.last_seq == 2
        assert log.append({"event": "UNKNOWN"}) == 3
    assert [r["seq"] for r in read_records(path)] == [1, 2, 3]


def test_torn_tail_is_tolerated_and_cut_on_reopen(path: Path) -> None:
    with DecisionLog.open(path) as log:
        log.append({"event": "INTENT", "tool": "t"})
        log.append({"event": "RESULT", "status": "SUCCEEDED"})
    whole = path.read_bytes()
    last = _raw_items(path)[-1]
    for cut in range(1, len(last)):
        path.write_bytes(whole[:-cut])
        assert [r["seq"] for r in read_records(path)] == [1]
        with pytest.raises(DecisionLogError, match="torn"):
            list(read_records(path, tolerate_partial_tail=False))
    with DecisionLog.open(path) as log:
        assert log.dropped_tail == 1  # the last cut left one byte of the record
        assert log.append({"event": "UNKNOWN"}) == 2
    assert [(r["seq"], r["event"]) for r in read_records(path)] == [(1, "INTENT"), (2, "UNKNOWN")]


def test_empty_and_missing_files(path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        list(read_records(path))
    DecisionLog.open(path).close()
    assert list(read_records(path)) == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff", "not a CBOR item"),
        (cbor2.dumps([1, 2]), "must be a map"),
        (cbor2.dumps({"v": 3, "seq": 1}), "version"),
        (canonical_cbor({"v": 2, "seq": 1}), "without `prev`"),
        (canonical_cbor({"v": 2, "seq": 1, "prev": "blake3:00"}), "`prev` must be"),
        (canonical_cbor({"v": 1, "seq": 1}) * 2, "seq"),
        (cbor2.dumps({"seq": 1, "v": 1}), "canonical"),  # keys not in canonical order
        (b"\xa2avavava\x01", "Duplicate"),
    ],
)
def test_corrupt_records_are_errors(path: Path, content: bytes, message: str) -> None:
    path.write_bytes(content)
    with pytest.raises(DecisionLogError, match=message):
        list(read_records(path))
    with pytest.raises(DecisionLogError):
        DecisionLog.open(path)
    assert path.read_bytes() == content  # never repaired away


@pytest.mark.parametrize(
    "record",
    [
        {"event": "INTENT", "arguments": {"q": "VALUE"}},
        {"event": "RESULT", "output": "VALUE"},
        {"event": "APPROVED", "reason_text": "VALUE"},
        {"event": "APPROVED", "reasonText": "VALUE"},
        {"event": "INTENT", "call": {"Secret": "VALUE"}},
        {"event": "INTENT", "items": [{"token": "VALUE"}]},
    ],
)
def test_forbidden_fields_are_refused(path: Path, record: dict[str, object]) -> None:
    with pytest.raises(DecisionLogError) as info:
        record_fields_allowed(record)
    assert "VALUE" not in str(info.value)  # names the key, never the value
    with DecisionLog.open(path) as log, pytest.raises(DecisionLogError):
        log.append(record)
    assert path.read_bytes() == b""


def test_allowed_fields_pass() -> None:
    record_fields_allowed(
        {"event": "RESULT", "outputAvailable": False, "tokens": {"total": 3}, "reason": "X"}
    )


@pytest.mark.parametrize(
    "record",
    [
        {"tool": "t"},
        {"event": "SOMETHING"},
        {"event": "INTENT", "v": 2},
        {"event": "INTENT", "seq": 9},
        {"event": "INTENT", "prev": None},
        {"event": "INTENT", "prev": "blake3:" + "0" * 64},
        {"event": "INTENT", "at": "now"},
        {"event": "INTENT", "x": float("nan")},
        {"event": "INTENT", "x": b"bytes"},
    ],
)
def test_bad_records_are_refused_without_writing(path: Path, record: dict[str, object]) -> None:
    with DecisionLog.open(path) as log:
        with pytest.raises(DecisionLogError):
            log.append(record)
        assert log.append({"event": "INTENT"}) == 1
    assert len(list(read_records(path))) == 1


def test_closed_log_refuses(path: Path) -> None:
    log = DecisionLog.open(path)
    log.close()
    log.close()
    with pytest.raises(DecisionLogError, match="closed"):
        log.append({"event": "INTENT"})


def test_fsync_policy(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    with DecisionLog.open(path) as log:
        log.append({"event": "INTENT"})
        log.append({"event": "INTENT"})
    assert len(synced) == 2
    synced.clear()
    with DecisionLog.open(path, fsync_every=0) as log:
        log.append({"event": "INTENT"})
        log.append({"event": "INTENT"})
        assert synced == []
        log.flush()
        assert len(synced) == 1
        log.append({"event": "INTENT"})
    assert len(synced) == 2  # close syncs what is pending
    with pytest.raises(ValueError):
        DecisionLog.open(path, fsync_every=-1)


def test_threads_appending_get_distinct_ordered_seqs(path: Path) -> None:
    seqs: list[int] = []
    with DecisionLog.open(path, fsync_every=0) as log:

        def work() -> None:
            for _ in range(100):
                seqs.append(log.append({"event": "INTENT"}))

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(seqs) == list(range(1, 801))
    assert [r["seq"] for r in read_records(path)] == list(range(1, 801))


def test_reader_during_appends_sees_only_complete_records(path: Path) -> None:
    """A reader in another thread, with no lock, sees a growing prefix of complete records."""
    total = 3000
    padding = "p" * 5000  # records larger than a page and than the reader's first chunk
    done = threading.Event()
    snapshots: list[int] = []
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            while not done.is_set():
                seqs = [r["seq"] for r in read_records(path)]
                assert seqs == list(range(1, len(seqs) + 1))
                snapshots.append(len(seqs))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    log = DecisionLog.open(path, fsync_every=0)
    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(total):
            log.append({"event": "INTENT", "callId": f"c{i}", "pad": padding[: i % 5000]})
            if i % 600 == 599:  # let the reader read mid-way: a loaded machine may starve it
                _wait_for_more(snapshots, len(snapshots))
    finally:
        done.set()
        thread.join()
        log.close()
    assert not errors
    assert len(snapshots) > 1 and snapshots == sorted(snapshots)
    assert len(list(read_records(path))) == total


def test_readable_with_plain_cbor2(path: Path) -> None:
    """The documented five-line reader."""
    with DecisionLog.open(path) as log:
        log.append({"event": "DENIED", "at": NOW, "reason": "CALL_LIMIT_EXCEEDED"})
    with open(path, "rb") as fp:
        decoder = cbor2.CBORDecoder(fp, allow_duplicate_keys=False)
        records = []
        while fp.peek(1):
            records.append(decoder.decode())
    assert records == list(read_records(path))


def test_group_commit_every_append_is_durable_when_it_returns(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Threads appending at once share fsyncs, and none returns before one covered it."""
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    early: list[int] = []
    with DecisionLog.open(path) as log:

        def work() -> None:
            for _ in range(40):
                seq = log.append({"event": "INTENT"})
                if log._synced < seq:  # the durability this test is about
                    early.append(seq)

        threads = [threading.Thread(target=work) for _ in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert early == []
    assert 1 <= len(synced) <= 480
    assert [r["seq"] for r in read_records(path)] == list(range(1, 481))


def test_append_async_is_ordered_durable_and_shares_fsyncs(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd)))

    async def scenario(log: DecisionLog) -> list[int]:
        async def one(i: int) -> int:
            seq = await log.append_async({"event": "RESULT", "callId": f"c{i}", "at": NOW})
            assert log._synced >= seq  # durable when it returns
            return seq

        return list(await asyncio.gather(*(one(i) for i in range(200))))

    with DecisionLog.open(path) as log:
        seqs = asyncio.run(scenario(log))
    assert seqs == list(range(1, 201))  # written in the order of the calls
    assert [r["callId"] for r in read_records(path)] == [f"c{i}" for i in range(200)]
    assert len(synced) < 200


def test_append_async_refuses_like_append(path: Path) -> None:
    async def scenario(log: DecisionLog) -> None:
        with pytest.raises(DecisionLogError, match="arguments"):
            await log.append_async({"event": "INTENT", "arguments": {"q": "VALUE"}})
        with pytest.raises(DecisionLogError, match="encodable"):
            await log.append_async({"event": "INTENT", "x": b"bytes"})
        assert await log.append_async({"event": "INTENT"}) == 1
        log.close()
        with pytest.raises(DecisionLogError, match="closed"):
            await log.append_async({"event": "INTENT"})

    asyncio.run(scenario(DecisionLog.open(path)))
    assert [r["seq"] for r in read_records(path)] == [1]


def test_a_cancelled_append_async_is_written_all_the_same(path: Path) -> None:
    async def scenario(log: DecisionLog) -> None:
        task = asyncio.ensure_future(log.append_async({"event": "INTENT", "callId": "gone"}))
        await asyncio.sleep(0)  # the record is queued
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert await log.append_async({"event": "RESULT"}) == 2

    with DecisionLog.open(path) as log:
        asyncio.run(scenario(log))
    assert [r["event"] for r in read_records(path)] == ["INTENT", "RESULT"]


_KEYS = st.sampled_from(
    ["a", "tool", "observations", "claims", "token", "Reason-Text", "outputs", "x"]
)
_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.binary(max_size=2),
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(_KEYS, st.integers(0, 2)), inner, max_size=3),
    ),
    max_leaves=12,
)


@given(st.dictionaries(_KEYS, _VALUES, max_size=4))
def test_the_fast_path_accepts_only_what_the_exact_checks_accept(record: dict[str, Any]) -> None:
    """``plain`` is a shortcut: whatever it lets through, the forbidden-key check and
    ``canonical_cbor`` accept too, and the bytes written are ``canonical_cbor``'s."""
    fields = {**record, "event": "INTENT", "at": NOW}
    if not encoding.plain(fields):
        return
    record_fields_allowed(fields)
    assert encoding.encoded(dict(fields), 7) == canonical_cbor({**fields, "seq": 7})


@given(st.dictionaries(_KEYS, _VALUES, max_size=4), st.data())
def test_fragments_change_nothing_but_the_work(record: dict[str, Any], data: st.DataObject) -> None:
    """A record with some fields given as fragments is refused exactly when the plain record
    is, and otherwise written byte for byte as the plain record."""
    fields = {**record, "event": "INTENT", "at": NOW}
    chosen = data.draw(st.sets(st.sampled_from(sorted(record)))) if record else set()
    try:
        expected: bytes | None = encoding.encoded(encoding.admit(fields, NOW), 7)
    except DecisionLogError:
        expected = None
    try:
        with_fragments = {k: fragment(k, v) if k in chosen else v for k, v in fields.items()}
        got: bytes | None = encoding.encoded(encoding.admit(with_fragments, NOW), 7)
    except DecisionLogError:
        got = None
    assert got == expected


def test_a_fragment_is_taken_only_under_its_own_field(path: Path) -> None:
    summary = fragment("disclosure", {"tools": ["a"]})
    with DecisionLog.open(path) as log:
        with pytest.raises(DecisionLogError, match="fragment of `disclosure` given as `other`"):
            log.append({"event": "DISCLOSED", "at": NOW, "other": summary})
        log.append({"event": "DISCLOSED", "at": NOW, "disclosure": summary})
    assert next(iter(read_records(path)))["disclosure"] == {"tools": ["a"]}
    with pytest.raises(DecisionLogError, match="/disclosure/token"):
        fragment("disclosure", {"token": "x"})
    assert fragment("observations", {"token": {"state": "READY"}}).field == "observations"
    claims = {"claims": {"token": "t-1", "output": ["a"]}, "subject": "hmac-sha256:" + "0" * 32}
    assert fragment("principal", claims).field == "principal"  # claim names are ids
    with pytest.raises(DecisionLogError, match="/principal/token"):
        fragment("principal", {"token": "x"})  # the principal's own fields are not
    with pytest.raises(DecisionLogError, match="not encodable at `/disclosure/a`"):
        fragment("disclosure", {"a": float("nan")})


# --- garbage at the end, and the traces index -------------------------------------------------


@pytest.mark.parametrize("garbage", [b"garbage!", b"\x00", b"\x9b\x00\x00", b"\x7f\x61"])
def test_garbage_at_the_end_is_damage_not_a_torn_tail(path: Path, garbage: bytes) -> None:
    """A torn record starts like a record (a map header); other bytes at the end, even when
    they decode as the start of some other CBOR item, are refused and left in place."""
    with DecisionLog.open(path) as log:
        log.append({"event": "INTENT", "tool": "t"})
    whole = path.read_bytes() + garbage
    path.write_bytes(whole)
    with pytest.raises(DamagedRecord) as info:
        DecisionLog.open(path)
    assert info.value.offset == len(whole) - len(garbage)
    with pytest.raises(DecisionLogError):
        list(read_records(path))
    assert path.read_bytes() == whole


def test_accept_sees_the_pass_before_the_torn_tail_is_cut(path: Path) -> None:
    with DecisionLog.open(path) as log:
        log.append({"event": "INTENT", "tool": "t"})
        log.append({"event": "RESULT", "status": "SUCCEEDED"})
    whole, last = path.read_bytes(), _raw_items(path)[-1]
    path.write_bytes(whole[:-3])

    def refuse(scan: LogScan) -> None:
        torn = len(last) - 3
        assert (scan.records, scan.last_seq, scan.torn) == (1, 1, torn)
        raise RuntimeError("refused")

    with pytest.raises(RuntimeError, match="refused"):
        DecisionLog.open(path, accept=refuse)
    assert path.read_bytes() == whole[:-3]  # nothing cut


def _random_record(rng: random.Random, refs: list[Any]) -> dict[str, Any]:
    record: dict[str, Any] = {"event": rng.choice(sorted(EVENTS)), "n": rng.randrange(10**6)}
    ref = rng.choice(refs)
    if ref is not None:
        record["contextRef"] = ref
    if rng.random() < 0.3:
        record["blob"] = "x" * rng.randrange(1, 300)
    return record


def test_trace_is_exactly_read_records_filtered(path: Path) -> None:
    """Across a reopen (the index built during the pass at open) and every way of appending
    (``append``, ``write_now``, ``append_async``), a trace is the filtered full read."""
    rng = random.Random(11)
    refs: list[Any] = ["ctx_a", "ctx_b", "ctx_c", None, 7, "", "ctx_é"]
    with DecisionLog.open(path, fsync_every=0) as log:
        for _ in range(300):
            log.append(_random_record(rng, refs))
    with DecisionLog.open(path, fsync_every=0) as log:
        log.write_now([admit(_random_record(rng, refs)) for _ in range(200)])

        async def more() -> None:
            await asyncio.gather(*(log.append_async(_random_record(rng, refs)) for _ in range(50)))

        asyncio.run(more())
        log.append(_random_record(rng, refs))
        everything = list(read_records(path))
        for ref in [r for r in refs if isinstance(r, str)] + ["ctx_unknown"]:
            expected = [r for r in everything if r.get("contextRef") == ref]
            assert log.trace(ref) == expected, ref
        assert sum(len(log.trace(r)) for r in refs if isinstance(r, str)) > 300


def test_trace_async_renders_off_the_loop_thread(path: Path) -> None:
    with DecisionLog.open(path) as log:
        log.append({"event": "DENIED", "contextRef": "ctx_1"})
        loop_thread = threading.get_ident()

        def render(events: list[dict[str, Any]]) -> tuple[int, int]:
            return len(events), threading.get_ident()

        count, rendered_in = asyncio.run(log.trace_async("ctx_1", render))
        assert count == 1 and rendered_in != loop_thread
    with pytest.raises(DecisionLogError, match="closed"):
        log.trace("ctx_1")


def test_a_log_changed_under_its_writer_fails_the_trace(path: Path) -> None:
    with DecisionLog.open(path) as log:
        log.append({"event": "DENIED", "contextRef": "ctx_1"})
        log.append({"event": "DENIED", "contextRef": "ctx_2"})
        whole = path.read_bytes()
        path.write_bytes(whole.replace(b"ctx_1", b"ctx_9"))  # same length, another context
        with pytest.raises(DamagedRecord, match="changed"):
            log.trace("ctx_1")


# --- what is a torn tail, and what is damage (a damaged length) -----------------------------


def _six_records(path: Path) -> list[tuple[int, bytes]]:
    """A log of six records; their offsets and bytes."""
    with DecisionLog.open(path) as log:
        for i in range(6):
            log.append({"event": "DENIED", "at": NOW, "contextRef": f"ctx_{i}", "rule": "r" * 40})
    data, out, pos = path.read_bytes(), [], 0
    for raw in _raw_items(path):
        out.append((pos, raw))
        pos += len(raw)
    assert pos == len(data)
    return out


def _text_length_claims_more(raw: bytes) -> bytes:
    """The record with its 40-character string's length header widened: it now claims
    0x28xx bytes, more than any file here holds."""
    at = raw.index(b"\x78\x28" + b"r" * 40)
    return raw[:at] + b"\x79" + raw[at + 1 :]


def _map_header_claims_more(raw: bytes) -> bytes:
    """The record's map header made a 4-byte count (the next bytes): pairs beyond the file."""
    assert 0xA4 <= raw[0] <= 0xB7
    return b"\xba" + raw[1:]


@pytest.mark.parametrize("damage", [_text_length_claims_more, _map_header_claims_more])
@pytest.mark.parametrize("which", [2, 4])
def test_a_damaged_length_before_intact_records_is_refused_and_nothing_cut(
    path: Path, damage: Any, which: int
) -> None:
    """One changed length byte in record 3 (or 5) of 6: the record reads to the end of the file,
    as a torn tail would, but intact records start inside it. Refused at the damaged record,
    naming the next intact one; the file is left exactly as it is, and no side file made."""
    records = _six_records(path)
    offset, raw = records[which]
    whole = bytearray(path.read_bytes())
    whole[offset : offset + len(raw)] = damage(raw)
    path.write_bytes(bytes(whole))
    with pytest.raises(DamagedRecord) as info:
        DecisionLog.open(path)
    assert (info.value.offset, info.value.intact_at) == (offset, records[which + 1][0])
    with pytest.raises(DecisionLogError, match="intact record"):
        list(read_records(path))
    assert path.read_bytes() == bytes(whole)
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_a_damaged_length_longer_than_any_record_is_refused_without_reading_on(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More bytes after the damaged record than the largest record the writer writes: damage,
    found without reading the rest of the file into memory, and the intact record named."""
    records = _six_records(path)
    monkeypatch.setattr(encoding, "MAX_RECORD_BYTES", 250)  # records here are ~100 bytes
    offset, raw = records[1]
    whole = bytearray(path.read_bytes())
    whole[offset : offset + len(raw)] = _text_length_claims_more(raw)
    path.write_bytes(bytes(whole))
    with pytest.raises(DamagedRecord, match="more than 250 bytes, longer than any") as info:
        DecisionLog.open(path)
    assert (info.value.offset, info.value.intact_at) == (offset, records[2][0])
    assert path.read_bytes() == bytes(whole)


def test_a_genuine_torn_tail_is_cut_and_its_bytes_saved_beside_the_log(path: Path) -> None:
    records = _six_records(path)
    whole = path.read_bytes()
    torn = records[-1][1][:-7]  # a crash mid-append: a prefix of a record like the last one
    path.write_bytes(whole + torn)
    with DecisionLog.open(path) as log:
        assert log.dropped_tail == len(torn)
        side = path.with_name(f"decisions.cbor.torn-{len(whole)}")
        assert log.saved_tail == side
        assert log.append({"event": "UNKNOWN"}) == 7
    assert side.read_bytes() == torn  # not one byte destroyed
    assert side.stat().st_mode & 0o777 == 0o600
    assert path.read_bytes().startswith(whole) and len(list(read_records(path))) == 7
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name, side.name])


def test_a_side_file_already_saved_is_kept_and_one_with_other_bytes_refused(path: Path) -> None:
    records = _six_records(path)
    whole = path.read_bytes()
    torn = records[-1][1][:20]
    side = path.with_name(f"decisions.cbor.torn-{len(whole)}")
    side.write_bytes(b"something else")
    path.write_bytes(whole + torn)
    with pytest.raises(TailNotSaved):
        DecisionLog.open(path)
    assert path.read_bytes() == whole + torn and side.read_bytes() == b"something else"
    side.write_bytes(torn)  # an earlier start saved it and stopped before the cut
    with DecisionLog.open(path) as log:
        assert log.saved_tail == side
    assert path.read_bytes() == whole and side.read_bytes() == torn


def test_the_writer_writes_no_record_longer_than_a_tail_may_be(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record longer than MAX_RECORD_BYTES is refused before it is written (no seq used), so
    an incomplete final record that long is damage, not a tear."""
    with DecisionLog.open(path) as log:
        log.append({"event": "INTENT", "tool": "t"})
        log.append({"event": "DENIED", "rule": "x" * 400})
    whole = path.read_bytes()
    monkeypatch.setattr(encoding, "MAX_RECORD_BYTES", 300)
    with DecisionLog.open(path.with_name("other.cbor")) as log:
        with pytest.raises(DecisionLogError, match="at most 300"):
            log.append({"event": "DENIED", "rule": "x" * 400})
        assert log.append({"event": "DENIED"}) == 1
    path.write_bytes(whole[:-10])  # the long record torn: 400+ bytes, longer than any record
    with pytest.raises(DamagedRecord, match="longer than any"):
        DecisionLog.open(path)
    assert path.read_bytes() == whole[:-10]


def _wait_for_more(snapshots: list[int], seen: int, timeout_s: float = 5.0) -> None:
    """Until the reader took another snapshot (or ``timeout_s`` passed)."""
    deadline = time.monotonic() + timeout_s
    while len(snapshots) == seen and time.monotonic() < deadline:
        time.sleep(0.001)
