"""The `seif` command: output shapes and exit codes of validate, test and build."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from compiler import load_build
from policy.json.strict import loads
from seif.cli import main
from tests.support.paths import REFERENCE


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, doc: object, name: str = "p.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return str(path)


def test_validate_reference_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", "--project", str(REFERENCE))
    assert code == 0
    assert "valid, 3 tools" in out
    assert "inspect-context 1.0.0 sha256:" in out


def test_validate_json_lists_contract_digests(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", "--project", str(REFERENCE), "--json")
    doc = loads(out)
    assert code == 0 and doc["ok"] is True and doc["diagnostics"] == []
    assert [t["id"] for t in doc["tools"]] == [
        "inspect-context",
        "search-knowledge",
        "propose-change",
    ]
    assert all(t["contractDigest"].startswith("sha256:") for t in doc["tools"])


def test_validate_invalid_prints_pointer_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = loads(REFERENCE.read_text())
    doc["tools"][2]["approval"] = "none"
    doc["profiles"][0]["toolRules"][2]["required"] = True
    path = write(tmp_path, doc)
    code, out, err = run(capsys, "validate", "--project", path)
    assert code == 1
    lines = err.splitlines()  # diagnostics on stderr, the verdict on stdout
    assert lines[0] == (
        f"{path}:/profiles/0/toolRules/2/required: EXCLUDED_TOOL_REQUIRED: an "
        "excluded tool cannot be required; remove `required` or include the tool"
    )
    assert lines[1].startswith(f"{path}:/tools/2/approval: WRITE_WITHOUT_APPROVAL: ")
    assert out.splitlines() == [f"{path}: invalid, 2 errors"]


def test_validate_json_syntax_error_has_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, '{\n  "format": "seif.context-project.v1",\n  "id": }')
    code, out, _ = run(capsys, "validate", "--project", path, "--json")
    doc = loads(out)
    assert code == 1 and doc["ok"] is False
    assert doc["diagnostics"] == [
        {
            "code": "JSON_SYNTAX",
            "severity": "error",
            "line": 3,
            "column": 9,
            "message": "not valid JSON: expecting value",
        }
    ]


def test_unreadable_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "validate", "--project", str(tmp_path / "missing.json"))
    assert code == 2
    assert "FILE_UNREADABLE" in err and "FILE_UNREADABLE" not in out


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["validate"])
    assert exc.value.code == 2


def test_test_command_reports_separate_figures(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "test", "--project", str(REFERENCE))
    assert code == 0
    assert "context: 16/16 passed, tools: 67/67 passed" in out


def test_broken_expectation_fails_with_expected_and_actual(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = loads(REFERENCE.read_text())
    doc["tests"][0]["expect"]["tools"]["include"].append("propose-change")
    path = write(tmp_path, doc)
    code, out, _ = run(capsys, "test", "--project", path)
    assert code == 1
    assert (
        f"{path}:/tests/0/expect/tools/include/1: FAIL learner-never-sees-proposals: "
        "include tool propose-change: expected disclosed, actual not disclosed"
    ) in out
    code, out, _ = run(capsys, "test", "--project", path, "--json")
    report = loads(out)
    assert code == 1 and report["ok"] is False
    assert report["tools"]["total"] == report["tools"]["passed"] + 1


def test_build_writes_artifacts_and_prints_digest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "build", "--project", str(REFERENCE), "--out", str(tmp_path / "b"))
    assert code == 0
    digest = out.strip()
    assert digest.startswith("blake3:")
    assert load_build(tmp_path / "b").digest == digest
    manifest = loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["format"] == "seif.build.v2"
    assert manifest["requiresRuntime"] == "seif.context-runtime.v2"


def test_build_refuses_failing_tests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = loads(REFERENCE.read_text())
    doc["tests"][0]["expect"]["tools"]["exclude"] = ["inspect-context"]
    code, _, err = run(
        capsys, "build", "--project", write(tmp_path, doc), "--out", str(tmp_path / "b")
    )
    assert code == 1
    assert "tests failed, no build written" in err
    assert not (tmp_path / "b").exists()


def test_diagnostics_doc_is_in_sync() -> None:
    from compiler.docs import render
    from tests.support.paths import ROOT

    assert (ROOT / "docs" / "diagnostics.md").read_text() == render(), (
        "run: python -m compiler.docs > docs/diagnostics.md"
    )


def test_the_project_is_also_taken_positionally(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", str(REFERENCE))
    assert code == 0 and out.splitlines()[0].endswith("valid, 3 tools")
    with pytest.raises(SystemExit) as twice:
        main(["validate", str(REFERENCE), "--project", str(REFERENCE)])
    assert twice.value.code == 2 and "give the project once" in capsys.readouterr().err
    with pytest.raises(SystemExit) as none:
        main(["test"])
    assert none.value.code == 2 and "seif test FILE" in capsys.readouterr().err


def test_build_out_refuses_a_file_or_a_directory_of_other_things(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("keep me")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "notes.txt").write_text("keep me")
    for out in ("file", "dir"):
        code, stdout, err = run(capsys, "build", str(REFERENCE), "--out", str(tmp_path / out))
        assert (code, stdout) == (2, "") and "OUT_REFUSED" in err and "nothing was written" in err
    assert (tmp_path / "file").read_text() == "keep me"
    assert sorted(p.name for p in (tmp_path / "dir").iterdir()) == ["notes.txt"]
    first = run(capsys, "build", str(REFERENCE), "--out", str(tmp_path / "b"))
    again = run(capsys, "build", str(REFERENCE), "--out", str(tmp_path / "b"))  # a build: replaced
    assert first[0] == again[0] == 0 and first[1] == again[1]


def test_python_dash_m_seif_and_every_command_s_help_shows_an_example() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "seif", "validate", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and "example:\n  seif validate" in done.stdout
    commands = ("test", "build", "serve", "approval-server", "prove", "convert", "fmt", "init")
    for command in (*commands, "schema", "trace", "replay", "register", "promote", "bundle"):
        helped = subprocess.run(
            [sys.executable, "-m", "seif", command, "--help"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert f"example:\n  seif {command}" in helped.stdout


def test_one_misspelled_section_is_one_problem_not_twenty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(REFERENCE.read_text())
    doc["proflies"] = doc.pop("profiles")
    code, out, err = run(capsys, "validate", write(tmp_path, doc))
    lines = err.splitlines()
    assert code == 1 and out.splitlines()[-1].endswith("invalid, 2 errors")
    assert "MISSING_KEY: missing key `profiles`" in lines[0]
    assert "UNKNOWN_KEY: unknown key `proflies`; did you mean `profiles`?" in lines[1]


def test_every_option_of_every_command_says_what_it_is() -> None:
    import argparse

    from seif.cli import build_parser

    bare: list[str] = []

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        for action in parser._actions:  # argparse keeps no public list
            if isinstance(action, argparse._SubParsersAction):  # idem
                for name, sub in action.choices.items():
                    walk(sub, [*path, name])
            elif not action.help and action.dest != "help":
                bare.append(f"seif {' '.join(path)} {action.option_strings or action.dest}")

    walk(build_parser(), [])
    assert bare == []


def test_the_command_line_starts_without_the_server_framework() -> None:
    """Every `seif` command builds the whole parser first: it must not load aiohttp (nor the
    proof's steps), which only the servers, the SDK and `seif prove` need."""
    probe = (
        "import sys; from seif.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('aiohttp', 'seif.proof.steps', 'compiler.authoring.release') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
