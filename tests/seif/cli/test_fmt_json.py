"""`seif fmt` on a JSON project, as a user runs it: two-space indentation with the keys in
their order, stable, `--check` exit 1 until formatted; a file that is not well-formed JSON (a
syntax error, a duplicate key) is exit 2 with its line and column, and is left untouched."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import seif
from tests.support.paths import REFERENCE


def test_check_then_format_then_check_keeps_the_document_and_its_key_order(
    tmp_path: Path,
) -> None:
    compact = json.dumps(json.loads(REFERENCE.read_text()), separators=(",", ":"))
    project = tmp_path / "p.json"
    project.write_text(compact)
    first = seif("fmt", "p.json", "--check", cwd=tmp_path)
    assert first.returncode == 1 and first.stdout == "p.json: would be reformatted\n"
    assert project.read_text() == compact  # --check writes nothing
    done = seif("fmt", "p.json", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == "p.json: formatted\n", done.stderr
    formatted = project.read_text()
    assert formatted == json.dumps(json.loads(compact), indent=2, ensure_ascii=False) + "\n"
    assert list(json.loads(formatted)) == list(json.loads(compact))  # key order kept
    assert formatted.startswith('{\n  "format": "seif.context-project.v1",\n  "id": ')
    again = seif("fmt", "p.json", "--check", cwd=tmp_path)
    assert again.returncode == 0 and again.stdout == ""
    assert seif("fmt", "p.json", cwd=tmp_path).returncode == 0
    assert project.read_text() == formatted  # formatting twice changes nothing
    assert seif("validate", "p.json", cwd=tmp_path).returncode == 0


def test_a_structurally_invalid_project_is_still_formatted(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text('{"format": "seif.context-project.v1", "idd": "x"}')
    assert seif("fmt", "p.json", cwd=tmp_path).returncode == 0
    assert (tmp_path / "p.json").read_text() == (
        '{\n  "format": "seif.context-project.v1",\n  "idd": "x"\n}\n'
    )


def test_a_syntax_error_is_located_and_the_file_untouched(tmp_path: Path) -> None:
    text = '{\n  "format": "seif.context-project.v1",\n  "id": ,\n}\n'
    (tmp_path / "bad.json").write_text(text)
    for args in (("fmt", "bad.json"), ("fmt", "bad.json", "--check")):
        done = seif(*args, cwd=tmp_path)
        assert done.returncode == 2 and done.stdout == "", args
        head, line, caret, verdict = done.stderr.splitlines()
        assert head.startswith("bad.json:3:9: JSON_SYNTAX: ")
        assert line.strip() == '"id": ,' and caret.index("^") == line.index(",")
        assert verdict == "bad.json: not formatted; the file is unchanged"
        assert (tmp_path / "bad.json").read_text() == text


def test_a_duplicate_key_is_located_by_line_and_column(tmp_path: Path) -> None:
    text = '{"id": "a",\n "objectives": [{"id": "o", "profile": "p",\n   "id": "o2"}]}'
    (tmp_path / "dup.json").write_text(text)
    done = seif("fmt", "dup.json", cwd=tmp_path)
    assert done.returncode == 2
    head = done.stderr.splitlines()[0]
    assert (
        head.startswith("dup.json:2:") and "DUPLICATE_KEY: key `id` appears more than once" in head
    )
    assert (tmp_path / "dup.json").read_text() == text


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    (tmp_path / "latin.json").write_bytes(b'{"id": "caf\xe9"}')
    done = seif("fmt", "latin.json", cwd=tmp_path)
    assert done.returncode == 2 and "FILE_UNREADABLE" in done.stderr
    assert seif("fmt", "missing.json", cwd=tmp_path).returncode == 2
