"""`seif convert` and `seif fmt` as a user runs them (subprocesses): JSON -> `.seif` -> JSON
gives the same document; `fmt --check` exits 1 until the file is formatted, then 0; a file
that does not parse is exit 2 with its line, column and caret; `seif validate | test | build`
read `.seif`."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import seif
from tests.support.paths import ROOT

REFERENCE = ROOT / "reference" / "agent-tools"


def test_convert_both_ways_gives_the_same_document(tmp_path: Path) -> None:
    source = REFERENCE / "context-project.json"
    to_seif = seif("convert", str(source), "--to", "seif", "--out", "p.seif", cwd=tmp_path)
    assert to_seif.returncode == 0, to_seif.stderr
    back = seif("convert", "p.seif", "--to", "json", cwd=tmp_path)
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout) == json.loads(source.read_text())
    shipped = (REFERENCE / "context-project.seif").read_text()
    assert (tmp_path / "p.seif").read_text() == shipped  # the shipped file is the conversion


def test_fmt_check_then_format_then_check(tmp_path: Path) -> None:
    messy = tmp_path / "m.seif"
    messy.write_text(
        "project   p 1.0.0 # the header\nobjective o uses pr\n\n\n"
        "profile pr {   token_ceiling 100 }\n"
    )
    first = seif("fmt", "m.seif", "--check", cwd=tmp_path)
    assert first.returncode == 1 and "would be reformatted" in first.stdout
    assert seif("fmt", "m.seif", cwd=tmp_path).returncode == 0
    formatted = messy.read_text()
    assert "# the header" in formatted and "profile pr {\n  token_ceiling 100\n}" in formatted
    assert seif("fmt", "m.seif", "--check", cwd=tmp_path).returncode == 0
    assert messy.read_text() == formatted  # formatting twice changes nothing


def test_a_file_that_does_not_parse_is_located(tmp_path: Path) -> None:
    (tmp_path / "bad.seif").write_text("project p 1.0.0\nprofile pr {\n  inclde t\n}\n")
    for args in (("convert", "bad.seif", "--to", "json"), ("fmt", "bad.seif")):
        done = seif(*args, cwd=tmp_path)
        assert done.returncode == 2, args
        head, line, caret = done.stderr.splitlines()[:3]
        assert head.startswith("bad.seif:3:3: SEIF_UNKNOWN_KEYWORD:") and "`include`" in head
        assert line.strip() == "inclde t" and caret.index("^") == line.index("inclde")


def test_validate_test_and_build_read_seif(tmp_path: Path) -> None:
    project = str(REFERENCE / "context-project.seif")
    assert seif("validate", "--project", project, cwd=tmp_path).returncode == 0
    tested = seif("test", "--project", project, cwd=tmp_path)
    assert tested.returncode == 0 and "passed" in tested.stdout
    built = seif("build", "--project", project, "--out", "b", cwd=tmp_path)
    reference = seif(
        "build", "--project", project.replace(".seif", ".json"), "--out", "j", cwd=tmp_path
    )
    assert built.returncode == 0 and built.stdout == reference.stdout  # one build digest
