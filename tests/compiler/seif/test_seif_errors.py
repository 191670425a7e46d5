"""The `.seif` error corpus: one mistake per file, and the diagnostic it must give.

Each ``corpus/dsl-errors/NN-name.seif`` is ``00-valid.seif`` with one mistake; its
``NN-name.expect.json`` is ``{"line", "column", "code", "message_contains"}`` or a list of them,
which the first diagnostics must match in order. Messages must say what to write, in `.seif`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from compiler.seif.front import compile_seif_text
from tests.support.paths import ROOT

CORPUS = ROOT / "corpus" / "dsl-errors"
VALID = CORPUS / "00-valid.seif"
CASES = sorted(p for p in CORPUS.glob("*.seif") if p != VALID)
REPR_NOISE = ("Token(", "Tree(", "'$END'")
CLI_CASES = (
    "01-inclde",
    "47-include-unknown-tool",
    "73-condition-cel-unknown-identifier",
    "86-condition-args-unknown-field",
)


def expectations(case: Path) -> list[dict[str, Any]]:
    found = json.loads(case.with_suffix(".expect.json").read_text(encoding="utf-8"))
    return found if isinstance(found, list) else [found]


def diagnostics(case: Path) -> list[Any]:
    _, found = compile_seif_text(case.read_text(encoding="utf-8"))
    assert found, f"{case.name} compiles cleanly, but it is meant to hold one mistake"
    return found


def test_corpus_is_complete() -> None:
    assert len(CASES) >= 81  # numbered 01.. without a gap: a deleted case is noticed
    assert [int(p.name[:2]) for p in CASES] == list(range(1, len(CASES) + 1))
    for case in CASES:
        assert case.with_suffix(".expect.json").is_file(), f"{case.name} has no expectation"
    stray = {p.name.removesuffix(".expect.json") for p in CORPUS.glob("*.expect.json")}
    assert stray == {p.stem for p in CASES}


def test_valid_project_compiles_cleanly() -> None:
    parsed, found = compile_seif_text(VALID.read_text(encoding="utf-8"))
    assert found == []
    assert parsed is not None
    document = parsed.document
    assert [t["effect"] for t in document["tools"]] == ["read", "write"]
    assert len(document["profiles"]) == len(document["objectives"]) == len(document["tests"]) == 2
    assert set(document["toolFixtures"]) == {"read-entry", "propose-edit"}


@pytest.mark.parametrize("case", CASES, ids=[p.stem for p in CASES])
def test_case_gives_its_diagnostic(case: Path) -> None:
    wanted = expectations(case)
    found = diagnostics(case)
    assert len(found) >= len(wanted), [(d.code, d.message) for d in found]
    for want, got in zip(wanted, found, strict=False):
        where = f"{got.line}:{got.column} {got.code}: {got.message}"
        assert (got.line, got.column) == (want["line"], want["column"]), where
        assert got.code == want["code"], where
        assert want["message_contains"] in got.message, where


@pytest.mark.parametrize("case", CASES, ids=[p.stem for p in CASES])
def test_case_message_says_what_to_write(case: Path) -> None:
    for got in diagnostics(case):
        message = got.message
        assert message.strip(), f"{case.name}: empty message for {got.code}"
        assert len(message) < 200, f"{case.name}: {len(message)} characters: {message}"
        for noise in REPR_NOISE:
            assert noise not in message, f"{case.name}: Python repr in {message!r}"
        assert got.line is not None, f"{case.name}: {got.code} has no line"
        assert got.column is not None, f"{case.name}: {got.code} has no column"


@pytest.mark.parametrize("stem", CLI_CASES)
def test_cli_prints_location_source_line_and_caret(stem: str) -> None:
    relative = f"corpus/dsl-errors/{stem}.seif"
    (want, *_) = expectations(ROOT / relative)
    line, column = want["line"], want["column"]
    run = subprocess.run(
        [sys.executable, "-m", "seif.cli", "validate", "--project", relative],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert run.returncode != 0, run.stdout
    printed = run.stderr.splitlines()  # diagnostics on stderr, the verdict on stdout
    head = f"{relative}:{line}:{column}: {want['code']}: "
    assert printed[0].startswith(head), run.stdout
    assert want["message_contains"] in printed[0]
    source = (ROOT / relative).read_text(encoding="utf-8").splitlines()[line - 1]
    assert printed[1] == f"    {source}"
    caret = printed[2]
    assert caret.strip() == "^", caret
    assert caret.index("^") == 4 + column - 1, (caret, column)
    assert run.stdout.startswith(f"{relative}: invalid, "), run.stdout
