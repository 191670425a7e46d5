"""`seif trace export` and the log reader: a consistent prefix, without the data directory's
lock, while a writer appends; written atomically; malformed logs refused."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import cbor2
import pytest

from policy.json.canonical import canonical_cbor
from policy.json.strict import loads
from seif.cli import main
from seif.tracefile import TraceFileError, export, open_log
from servers.log.decision_log import DecisionLog, read_records
from servers.store.sqlite.datadir import DataDir


def event(i: int) -> dict[str, Any]:
    return {"event": "REPORTED", "at": 1_000 + i, "contextRef": f"ctx_{i}", "tools": ["a" * i]}


def filled(root: Path, count: int) -> Path:
    data = root / "data"
    data.mkdir(exist_ok=True)
    with DecisionLog.open(data / "decisions.cbor", fsync_every=0) as log:
        for i in range(count):
            log.append(event(i))
    return data


def test_cbor_export_is_the_logs_own_bytes_and_jsonl_its_records(tmp_path: Path) -> None:
    data = filled(tmp_path, 5)
    assert main(["trace", "export", "--data", str(data), "--out", str(tmp_path / "a.cbor")]) == 0
    assert (tmp_path / "a.cbor").read_bytes() == (data / "decisions.cbor").read_bytes()
    args = ["trace", "export", "--data", str(data), "--out", str(tmp_path / "a.jsonl")]
    assert main([*args, "--format", "jsonl"]) == 0
    lines = (tmp_path / "a.jsonl").read_text().splitlines()
    assert [loads(line) for line in lines] == list(read_records(data / "decisions.cbor"))
    assert list(open_log(tmp_path / "a.jsonl").records()) == list(
        open_log(tmp_path / "a.cbor").records()
    )
    assert oct((tmp_path / "a.cbor").stat().st_mode & 0o777) == "0o600"
    # without --format, the output file's extension decides (a newcomer wrote x.jsonl and got
    # CBOR)
    assert main(["trace", "export", "--data", str(data), "--out", str(tmp_path / "b.jsonl")]) == 0
    assert (tmp_path / "b.jsonl").read_text() == (tmp_path / "a.jsonl").read_text()
    assert main(["trace", "export", "--data", str(data), "--out", str(tmp_path / "b.log")]) == 0
    assert (tmp_path / "b.log").read_bytes() == (tmp_path / "a.cbor").read_bytes()


def test_a_torn_final_record_is_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = filled(tmp_path, 3)
    whole = (data / "decisions.cbor").read_bytes()
    partial = canonical_cbor({**event(9), "v": 1, "seq": 4})[:-3]
    with (data / "decisions.cbor").open("ab") as fh:
        fh.write(partial)
    assert main(["trace", "export", "--data", str(data), "--out", str(tmp_path / "a.cbor")]) == 0
    assert (tmp_path / "a.cbor").read_bytes() == whole
    out = capsys.readouterr().out
    assert "exported 3 records (seq 1..3)" in out and f"({len(partial)} bytes)" in out


def test_export_takes_no_lock_and_changes_nothing(tmp_path: Path) -> None:
    data = filled(tmp_path, 2)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in data.iterdir())
    owner = DataDir.open(data)  # the runtime's lock, held
    try:
        done = export(data, tmp_path / "out.cbor", "cbor")
    finally:
        owner.close()
    assert done.records == 2
    after = sorted((p.name, p.stat().st_mtime_ns) for p in data.iterdir() if p.name != "owner.lock")
    assert after == [b for b in before if b[0] != "owner.lock"]


def test_exports_while_a_writer_appends_are_consistent_prefixes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    log = DecisionLog.open(data / "decisions.cbor", fsync_every=0)
    done = threading.Event()

    def write() -> None:
        for i in range(600):
            log.append(event(i % 50))
            if i % 20 == 0:
                time.sleep(0.001)  # let the exporter in
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    seen: list[int] = []
    try:
        while not done.is_set() or len(seen) < 2:
            out = tmp_path / f"e{len(seen)}.cbor"
            exported = export(data, out, "cbor")
            seqs = [r["seq"] for r in open_log(out).records()]
            assert seqs == list(range(1, exported.records + 1))
            seen.append(exported.records)
    finally:
        writer.join()
        log.close()
    assert seen == sorted(seen) and seen[-1] > 0
    final = (data / "decisions.cbor").read_bytes()
    assert final.startswith((tmp_path / f"e{len(seen) - 1}.cbor").read_bytes())


def test_a_failed_export_leaves_the_previous_file(tmp_path: Path) -> None:
    data = filled(tmp_path, 2)
    with (data / "decisions.cbor").open("ab") as fh:
        fh.write(canonical_cbor({**event(1), "v": 1, "seq": 1}))  # seq goes back
    out = tmp_path / "out.cbor"
    out.write_bytes(b"previous")
    args = ["trace", "export", "--data", str(data), "--out", str(out)]
    assert main(args) == 2
    assert out.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "out.cbor"]


def test_missing_data_or_log_exits_2(tmp_path: Path) -> None:
    out = str(tmp_path / "out.cbor")
    assert main(["trace", "export", "--data", str(tmp_path / "nope"), "--out", out]) == 2
    assert main(["trace", "export", "--data", str(tmp_path), "--out", out]) == 2
    assert not (tmp_path / "out.cbor").exists()


BAD_JSONL = {
    "duplicate key": '{"v":1,"seq":1,"seq":2,"event":"REPORTED"}\n',
    "NaN": '{"v":1,"seq":1,"event":"REPORTED","at":NaN}\n',
    "version": '{"v":2,"seq":1,"event":"REPORTED"}\n',
    "seq": '{"v":1,"seq":2,"event":"REPORTED"}\n{"v":1,"seq":2,"event":"REPORTED"}\n',
    "not a map": '{"v":1,"seq":1}\n[1]\n',
    "broken line": '{"v":1,"seq":1,"event":"REPORTED"\n{"v":1,"seq":2,"event":"REPORTED"}\n',
}


@pytest.mark.parametrize("name", sorted(BAD_JSONL))
def test_malformed_jsonl_is_refused(tmp_path: Path, name: str) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text(BAD_JSONL[name])
    with pytest.raises(TraceFileError):
        list(open_log(path).records())


def test_jsonl_reader_leaves_out_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"v":1,"seq":1,"event":"REPORTED"}\n\n{"v":1,"seq":2,"ev')
    log = open_log(path)
    assert [r["seq"] for r in log.records()] == [1]
    assert log.torn == len('{"v":1,"seq":2,"ev')


def test_malformed_cbor_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "log.cbor"
    path.write_bytes(cbor2.dumps({"v": 1, "seq": 1}) + b"\xff\xff")
    with pytest.raises(TraceFileError, match="byte 9: not a CBOR item"):
        list(open_log(path).records())


def test_a_snapshot_does_not_see_later_appends(tmp_path: Path) -> None:
    data = filled(tmp_path, 2)
    log = open_log(data / "decisions.cbor")
    with DecisionLog.open(data / "decisions.cbor") as writer:
        writer.append(event(7))
    assert [r["seq"] for r in log.records()] == [1, 2]
    assert [r["seq"] for r in open_log(data / "decisions.cbor").records()] == [1, 2, 3]
    assert os.path.getsize(data / "decisions.cbor") > log.size
