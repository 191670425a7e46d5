"""A session recorded by the real runtime, exported while it runs, replayed with the executor
stopped and the network refused: `seif trace export` and `seif replay` end to end."""

from __future__ import annotations

import asyncio
import itertools
import json
import runpy
import socket
from pathlib import Path
from typing import Any

import pytest

from compiler.builds.build import load_build, write_build
from policy import disclose
from policy.json.canonical import canonical_cbor
from policy.json.strict import loads
from seif.cli import main
from servers.log.chain import record_digest
from servers.log.decision_log import read_records
from tests.support.paths import ROOT
from tests.support.replay_support import (
    REFERENCE,
    Session,
    ready,
    record_session,
    without_search_for_learner,
)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Session, Path]:
    """The session, and an export taken while the runtime still held the data directory."""
    root = tmp_path_factory.mktemp("session")
    live = root / "live.cbor"

    async def export_while_serving() -> None:
        assert main(["trace", "export", "--data", str(root / "data"), "--out", str(live)]) == 0

    session = asyncio.run(record_session(root, export_while_serving))
    assert session.objectives == [
        ("learner", 200),
        ("authoring", 200),
        ("learner", 200),
        ("learner", 200),
        ("authoring", 200),
        ("authoring", 200),
        ("learner", 409),
        ("learner", 200),
    ]
    return session, live


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No network at all: any connection attempt fails the test."""

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("replay tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def export(session: Session, out: Path, fmt: str = "cbor") -> Path:
    args = ["trace", "export", "--data", str(session.data), "--out", str(out), "--format", fmt]
    assert main(args) == 0
    return out


def run_replay(
    capsys: pytest.CaptureFixture[str], build: Path, log: Path, *extra: str
) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(["replay", "--build", str(build), "--log", str(log), "--json", *extra])
    document: dict[str, Any] = loads(capsys.readouterr().out)
    return code, document


def test_the_export_taken_while_serving_is_a_prefix_of_the_log(
    recorded: tuple[Session, Path],
) -> None:
    session, live = recorded
    log = (session.data / "decisions.cbor").read_bytes()
    taken = live.read_bytes()
    assert taken and log.startswith(taken)
    assert [r["seq"] for r in read_records(live)] == list(range(1, 12))


@pytest.mark.parametrize("fmt", ["cbor", "jsonl"])
def test_a_recorded_session_replays_exactly_offline(
    recorded: tuple[Session, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    offline: None,
    fmt: str,
) -> None:
    session, _ = recorded
    log = export(session, tmp_path / f"log.{fmt}", fmt)
    code, document = run_replay(capsys, session.build, log)
    assert code == 0 and document["ok"] is True
    found = document["replay"]
    assert found["build"] == session.digest
    assert (found["records"], found["disclosed"], found["reproduced"]) == (11, 8, 8)
    assert found["otherEvents"] == 3 and found["mismatches"] == []
    assert document["log"]["format"] == fmt


def test_text_output_says_ok(
    recorded: tuple[Session, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session, _ = recorded
    log = export(session, tmp_path / "log.cbor")
    capsys.readouterr()
    assert main(["replay", "--build", str(session.build), "--log", str(log)]) == 0
    assert "OK: all 8 disclosures reproduce exactly" in capsys.readouterr().out


def _tampered(session: Session, out: Path, seq: int, change: Any, *, rechain: bool = True) -> Path:
    """The export with record ``seq`` changed; ``rechain``: every ``prev`` after it written
    again, as a forger would (the chain is not keyed: only an anchored head tells)."""
    lines = export(session, out, "jsonl").read_text().splitlines()
    records = [loads(line) for line in lines]
    change(records[seq - 1])
    if rechain:
        for before, record in itertools.pairwise(records):
            record["prev"] = record_digest(canonical_cbor(before))
    out.write_text("".join(json.dumps(r) + "\n" for r in records))
    return out


TAMPERS = {
    # seq 1 resolved learner with every tool ready: say search-knowledge was down
    "observation": (1, lambda r: r["observations"]["search-knowledge"].update(state="UNAVAILABLE")),
    # seq 10 is the learner resolution that was blocked: say it resolved
    "outcome": (10, lambda r: r["disclosure"].update(status="RESOLVED")),
    "omission reason": (
        6,
        lambda r: r["disclosure"]["omitted"][1].update(reason="TOOL_UNAVAILABLE"),
    ),
}


@pytest.mark.parametrize("name", sorted(TAMPERS))
def test_tampering_is_detected(
    recorded: tuple[Session, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    offline: None,
    name: str,
) -> None:
    session, _ = recorded
    seq, change = TAMPERS[name]
    log = _tampered(session, tmp_path / "tampered.jsonl", seq, change)
    code, document = run_replay(capsys, session.build, log)
    assert code == 1 and document["ok"] is False
    mismatches = document["replay"]["mismatches"]
    assert [m["seq"] for m in mismatches] == [seq]
    assert mismatches[0]["differences"]
    capsys.readouterr()
    assert main(["replay", "--build", str(session.build), "--log", str(log)]) == 1
    text = capsys.readouterr().out
    assert f"MISMATCH seq {seq} " in text and "FAIL: 1 of 8 disclosures" in text


def test_tampering_without_forging_the_chain_is_refused_before_any_replay(
    recorded: tuple[Session, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    offline: None,
) -> None:
    session, _ = recorded
    seq, change = TAMPERS["observation"]
    log = _tampered(session, tmp_path / "tampered.jsonl", seq, change, rechain=False)
    code, document = run_replay(capsys, session.build, log)
    assert code == 2 and document["ok"] is False and "replay" not in document
    error = document["error"]
    assert error["code"] == "LOG_CHAIN_BROKEN" and f"seq {seq + 1}:" in error["message"]
    capsys.readouterr()
    assert main(["replay", "--build", str(session.build), "--log", str(log)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and f"breaks at seq {seq + 1}" in captured.err


def test_a_candidate_changes_exactly_the_expected_records(
    recorded: tuple[Session, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    offline: None,
) -> None:
    session, _ = recorded
    candidate = write_build(without_search_for_learner(), tmp_path / "candidate")
    log = export(session, tmp_path / "log.cbor")
    code, document = run_replay(
        capsys, session.build, log, "--candidate", str(tmp_path / "candidate")
    )
    assert code == 0
    found = document["whatIf"]
    assert found["candidate"] == candidate.digest and found["considered"] == 8
    changes = {c["seq"]: c for c in found["changes"]}
    # learner with search-knowledge disclosed (1, 3, 11): withheld; learner with it
    # unavailable (4): no longer an omission; blocked learner (10) and authoring: unchanged
    assert sorted(changes) == [1, 3, 4, 11]
    for seq in (1, 3, 11):
        assert changes[seq]["newlyWithheld"] == [{"id": "search-knowledge", "reason": None}]
    assert changes[4]["newlyWithheld"] == []
    assert changes[4]["omissions"] == [
        {
            "id": "search-knowledge",
            "kind": "tool",
            "baseline": "TOOL_UNAVAILABLE",
            "candidate": None,
        }
    ]
    summary = found["summary"]
    assert summary["recordsChanged"] == 4
    assert summary["newlyWithheld"] == {"search-knowledge": 3}
    assert summary["newlyDisclosed"] == {} and summary["statusChanges"] == {}
    assert summary["budget"]["recordsChanged"] == 3
    capsys.readouterr()
    args = ["replay", "--build", str(session.build), "--log", str(log)]
    assert main([*args, "--candidate", str(tmp_path / "candidate")]) == 0
    text = capsys.readouterr().out
    assert "summary: 4 of 8 records change" in text
    assert "newly withheld: search-knowledge (3)" in text


def test_records_of_another_build_are_reported_not_mixed_in(
    recorded: tuple[Session, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session, _ = recorded
    other = "blake3:" + "0" * 64
    log = _tampered(session, tmp_path / "mixed.jsonl", 2, lambda r: r.update(build=other))
    code, document = run_replay(capsys, session.build, log)
    assert code == 0
    assert document["replay"]["otherBuilds"] == {other: 1}
    assert document["replay"]["disclosed"] == 7 and document["replay"]["skippedOtherBuild"] == 1
    # a log with no disclosure of the build verifies nothing: exit 1
    candidate = tmp_path / "candidate"
    write_build(without_search_for_learner(), candidate)
    code, document = run_replay(capsys, candidate, export(session, tmp_path / "log.cbor"))
    assert code == 1 and document["replay"]["skippedOtherBuild"] == 8


def test_unreadable_inputs_exit_2(
    recorded: tuple[Session, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session, _ = recorded
    garbage = tmp_path / "garbage.cbor"
    garbage.write_bytes(b"\xa1\x61v\x02")  # a record of version 2
    code, document = run_replay(capsys, session.build, garbage)
    assert code == 2 and document["error"]["code"] == "LOG_UNREADABLE"
    code, document = run_replay(capsys, tmp_path / "no-build", garbage)
    assert code == 2 and document["error"]["code"] == "BUILD_UNREADABLE"
    code, document = run_replay(capsys, session.build, tmp_path / "missing.cbor")
    assert code == 2 and document["error"]["code"] == "LOG_UNREADABLE"


def test_the_worked_examples_candidate_builds_and_withholds_the_tool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = ROOT / "examples" / "replay" / "exclude_tool.py"
    candidate = tmp_path / "candidate.json"
    namespace = runpy.run_path(str(script))
    assert namespace["main"](
        ["--project", str(REFERENCE), "--profile", "learner", "--tool", "search-knowledge",
         "--out", str(candidate)]
    ) == 0  # fmt: skip
    assert main(["build", "--project", str(candidate), "--out", str(tmp_path / "build")]) == 0
    built = load_build(tmp_path / "build").project
    expected = without_search_for_learner()
    for objective in ("learner", "authoring"):
        seen = ready(expected)
        assert disclose(built, objective, seen) == disclose(expected, objective, seen)
