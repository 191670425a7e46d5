"""`seif prove` end to end, as `make run` runs it: the reference project validated, tested,
built, registered and bundled; the bundle's own runtime, the synthetic executor and the approval
server started from a delivery directory outside the repository; an agent turn through the
public SDK, an exact approval, a suppressed duplicate, an offline replay and a blocked promotion,
each recorded with what it observed. And a proof that breaks stops honestly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from policy.json.strict import loads
from seif.cli import main
from seif.proof import steps as proof_steps
from seif.proof.steps import STEPS, Delivery
from tests.support.paths import ROOT as REPO


class Recorded(Delivery):
    """A :class:`Delivery` the test can look at afterwards (its tokens, its servers)."""

    made: list[Recorded] = []  # noqa: RUF012  # the instances of one test

    def __post_init__(self) -> None:
        super().__post_init__()
        Recorded.made.append(self)


def _git_status() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--ignored=no"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    ).stdout


def _prove(monkeypatch: pytest.MonkeyPatch, output: Path, *extra: str) -> tuple[int, Any]:
    """``seif prove`` in process, its delivery directory made under ``output``'s directory
    (pytest's, outside the repository, removed with it)."""
    Recorded.made.clear()
    monkeypatch.setattr(proof_steps, "Delivery", Recorded)  # `seif prove` loads it from there
    monkeypatch.setattr(tempfile, "tempdir", str(output.parent))
    code = main(["prove", "--output", str(output), *extra])
    return code, loads(output.read_bytes())


def test_the_proof_proves_the_delivery_and_its_log_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _git_status()
    code, evidence = _prove(monkeypatch, tmp_path / "evidence.json", "--keep")
    assert code == 0, evidence
    [delivery] = Recorded.made
    root = Path(evidence["deliveryDirectory"])
    assert root.is_absolute() and root == delivery.root and root.is_dir()
    assert not root.is_relative_to(REPO)
    assert evidence["ok"] is True and evidence["failedStep"] is None
    assert [c["id"] for c in evidence["checks"]] == [step[0] for step in STEPS]
    for check in evidence["checks"]:  # what was seen, never a bare true
        assert check["ok"] is True and isinstance(check["observed"], dict) and check["observed"]
    assert evidence["unmeasured"] == ["setup effort", "answer quality improvement", "saved labor"]
    assert evidence["buildDigest"].startswith("blake3:")

    checks = {c["id"]: c["observed"] for c in evidence["checks"]}
    assert checks["runtime"]["interpreter"].startswith(str(root / "bundle" / ".venv"))
    assert "propose_change" not in checks["learner-withheld"]["tools"]
    assert checks["approval"]["shownArguments"] == checks["approval"]["sentArguments"]
    assert checks["approval"]["approver"] == "ops-proof"
    assert checks["duplicate"]["executorDispatches"] == 1
    assert checks["replay"]["replay"]["mismatched"] == 0
    assert "learner-never-sees-proposals" in checks["promotion-blocked"]["removedTests"]

    # every process stopped; no token in the evidence nor anywhere in the delivery directory
    assert all(s.proc.poll() is not None for s in delivery.servers.values())
    text = (tmp_path / "evidence.json").read_bytes()
    files = [p for p in root.rglob("*") if p.is_file() and ".venv" not in p.parts]
    for token in delivery.tokens.values():
        assert token.encode() not in text
        assert not any(token.encode() in p.read_bytes() for p in files), token
    # the kept delivery directory's decision log replays exactly, again, from outside
    replay = ["replay", "--build", "build", "--log", "decisions.cbor", "--json"]
    again = subprocess.run(
        [sys.executable, "-m", "seif.cli", *replay],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert again.returncode == 0 and loads(again.stdout)["replay"]["mismatched"] == 0
    assert _git_status() == before  # the repository is left as it was


def test_a_broken_step_stops_the_proof_with_exit_1_and_says_what_it_saw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the scripted model sends a write the tool's schema refuses: the turn is not what it must be
    monkeypatch.setattr(proof_steps, "WRITE", {**proof_steps.WRITE, "kind": "rewrite-everything"})
    code, evidence = _prove(monkeypatch, tmp_path / "evidence.json")
    assert code == 1
    assert evidence["ok"] is False and evidence["failedStep"] == "agent-turn"
    *passed, failed = evidence["checks"]
    assert all(c["ok"] for c in passed) and failed["id"] == "agent-turn" and not failed["ok"]
    seen = failed["observed"]
    assert "receipts differ" in seen["error"]
    assert ["call-write-1", "DENIED", "ARGUMENTS_INVALID"] in seen["receipts"]
    [delivery] = Recorded.made
    assert all(s.proc.poll() is not None for s in delivery.servers.values())
    assert set(delivery.servers) == {"executor", "runtime", "approval-server"}
    assert not delivery.root.exists()  # without --keep: removed


def _processes_in(root: Path) -> list[int]:
    """The processes whose working directory is ``root`` (every server the proof starts)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if Path(entry / "cwd").resolve() == root:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_sigterm_mid_proof_stops_everything_and_says_so(tmp_path: Path) -> None:
    """Stopped by SIGTERM (a CI timeout, `kill`) once the runtime runs: the evidence names the
    step it was in, the exit status is 1, no server is left running and, without ``--keep``,
    the delivery directory is gone."""
    output = tmp_path / "evidence.json"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "seif.cli", "prove", "--output", str(output)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    root = Path(proc.stdout.readline().split(": ", 1)[1].strip())
    for line in proc.stdout:
        if line.startswith("[ 7/14]"):  # done: the executor and the bundle's runtime run
            break
    assert len(_processes_in(root)) >= 2
    proc.send_signal(signal.SIGTERM)
    proc.stdout.read()
    assert proc.wait(60) == 1
    evidence = loads(output.read_bytes())
    later = [step[0] for step in STEPS[7:]]  # the step it was in when the signal came
    assert evidence["ok"] is False and evidence["failedStep"] in later
    *done, last = evidence["checks"]
    assert all(c["ok"] for c in done) and last["id"] == evidence["failedStep"]
    assert last["observed"]["error"].startswith("interrupted")
    assert evidence["stopFailures"] == []
    assert _processes_in(root) == [] and not root.exists()
