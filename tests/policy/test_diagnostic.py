"""One located diagnostic (policy.diagnostic): the renderer's three forms as golden strings,
and, for each place that once wrote ``FILE:WHERE: CODE: message`` by hand, the exact lines the
command prints now (the same as before, but where the old ones disagreed with each other)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from compiler import CompileError, load_build, write_build
from compiler.driver import compile_project, compile_seif
from policy.diagnostic import (
    Diagnostic,
    DiagnosticError,
    Location,
    did_you_mean,
    headline,
    nearest,
    render,
    render_lines,
)
from seif.cli import main
from servers.config.tls import CaFileProblem
from servers.store.sqlite.datadir import DataDir, DataDirError
from tests.support.paths import REFERENCE
from tests.support.runtime_harness import ENV, bindings_document, seif_command, write_config

SOURCE = "project p {\n  tool x {\n    efect read\n  }\n}\n"


def diagnostic(**location: Any) -> Diagnostic:
    return Diagnostic(code="X", message="m", location=Location(**location))


# --- the renderer ---------------------------------------------------------------------------------


def test_a_pointer_location_renders_file_pointer_code_message() -> None:
    assert render(diagnostic(pointer="/a/0"), "f.json") == "f.json:/a/0: X: m"
    assert render(diagnostic(pointer=""), "f.json") == "f.json: X: m"  # the document's root
    assert render(diagnostic(), "f.json") == "f.json: X: m"  # the file as a whole
    assert render(diagnostic(pointer="/a"), None) == "/a: X: m"
    assert render(diagnostic()) == "X: m"


def test_a_line_location_renders_line_column_and_a_caret_under_it() -> None:
    located = diagnostic(pointer="/tools/0/effect", line=3, column=5, cite="line")
    assert render(located, "p.seif") == "p.seif:3:5: X: m"
    assert render_lines(located, "p.seif", SOURCE) == [
        "p.seif:3:5: X: m",
        "        efect read",
        "        ^",
    ]
    assert (
        render(diagnostic(line=9, column=1), "p.seif", SOURCE) == "p.seif:9:1: X: m"
    )  # past the end


def test_a_json_location_cites_its_pointer_and_its_line_rides_along() -> None:
    resolved = diagnostic(pointer="/tools", line=3, column=12, end_line=3, end_column=13)
    assert render(resolved, "p.json", '{\n  "id": 1,\n  "tools": 3\n}') == "p.json:/tools: X: m"
    assert resolved.to_json() == {
        "code": "X",
        "severity": "error",
        "pointer": "/tools",
        "line": 3,
        "column": 12,
        "message": "m",
    }


def test_a_diagnostic_that_names_its_file_and_a_hint() -> None:
    refused = Diagnostic(
        code="KEY_INVALID", message="m", location=Location(file="d/runtime.key"), hint="restore it"
    )
    assert render_lines(refused, "ignored") == [
        "d/runtime.key: KEY_INVALID: m",
        "d/runtime.key: remedy: restore it",
    ]
    assert render(refused.moved(file="other")) == "other: KEY_INVALID: m\nother: remedy: restore it"
    assert refused.to_json("d") == {
        "file": "d",
        "code": "KEY_INVALID",
        "severity": "error",
        "message": "m",
        "hint": "restore it",
    }


def test_the_json_form_has_the_keys_its_location_has() -> None:
    assert diagnostic(pointer="/a").to_json() == {
        "code": "X",
        "severity": "error",
        "pointer": "/a",
        "message": "m",
    }
    assert diagnostic(line=2, column=4).to_json() == {
        "code": "X",
        "severity": "error",
        "line": 2,
        "column": 4,
        "message": "m",
    }
    assert diagnostic().to_json("f") == {
        "file": "f",
        "code": "X",
        "severity": "error",
        "message": "m",
    }


def test_a_location_on_its_own_and_a_diagnostic_quoted_in_another() -> None:
    assert (str(Location()), str(Location(pointer="")), str(Location(pointer="/k"))) == (
        "/",
        "/",
        "/k",
    )
    assert str(Location(line=2, column=3)) == "2:3"
    assert headline(diagnostic(pointer="/a", line=1, column=1)) == "X: m"


def test_a_refusal_reads_as_its_first_diagnostic_and_how_many_more() -> None:
    assert str(DiagnosticError([])) == "failed"
    assert str(DiagnosticError([diagnostic(file="f", pointer="/a")])) == "f:/a: X: m"
    many = [diagnostic(line=1, column=2, cite="line"), diagnostic(), diagnostic()]
    assert str(CompileError(many)) == "1:2: X: m (and 2 more)"
    assert str(CaFileProblem("CA_FILE_INVALID", "`ca.pem` holds no certificate")) == (
        "CA_FILE_INVALID: `ca.pem` holds no certificate"
    )
    key = DataDirError(Path("d/runtime.key"), "KEY_INVALID", "too short", "restore it")
    assert str(key) == "d/runtime.key: KEY_INVALID: too short"
    assert key.diagnostics[0].hint == "restore it"


def test_one_did_you_mean() -> None:
    assert nearest("inclde", ["include", "exclude"]) == "include"
    assert nearest("include", ["include"]) == "include"
    assert nearest("zzz", ["include"]) is None
    assert did_you_mean("proflies", ["profiles", "tools"]) == "; did you mean `profiles`?"
    assert did_you_mean("zzz", ["profiles"]) == ""


# --- JSON project diagnostics carry their line and column -----------------------------------------


def test_validate_json_gives_each_pointer_its_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = json.loads(REFERENCE.read_text())
    document["tools"][2]["approval"] = "none"
    path = tmp_path / "p.json"
    path.write_text(json.dumps(document, indent=2))
    text = path.read_text()
    assert main(["validate", "--project", str(path), "--json"]) == 1
    [found] = json.loads(capsys.readouterr().out)["diagnostics"]
    assert (found["code"], found["pointer"]) == ("WRITE_WITHOUT_APPROVAL", "/tools/2/approval")
    line = text.splitlines()[found["line"] - 1]
    assert line[found["column"] - 1 :] == '"none",'  # where the value is written
    assert main(["validate", "--project", str(path)]) == 1  # the text form keeps the pointer
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:/tools/2/approval: WRITE_WITHOUT_APPROVAL: ")


def test_a_seif_project_keeps_citing_its_line() -> None:
    text = REFERENCE.with_suffix(".seif").read_text().replace("approval required", "approval none")
    [found] = compile_seif(text).diagnostics
    assert (found.code, found.pointer) == ("WRITE_WITHOUT_APPROVAL", "/tools/2/approval")
    assert found.location.cites_line and (found.line, found.column) == (112, 12)
    assert render_lines(found, "p.seif", text) == [
        "p.seif:112:12: WRITE_WITHOUT_APPROVAL: writes always require approval; remove"
        " `approval` or set it to `required`",
        "    " + text.splitlines()[111],
        "    " + " " * 11 + "^",
    ]


# --- every former hand rendering, as the command prints it ----------------------------------------


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], list[str]]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


def test_whole_file_problems_of_the_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`seif build` (OUT_REFUSED), `convert` (FILE_UNREADABLE, FILE_UNWRITABLE), `design`
    (FILE_UNREADABLE) and `prove` (OUTPUT_UNWRITABLE): ``FILE: CODE: message``."""
    monkeypatch.chdir(tmp_path)
    Path("afile").touch()
    assert run(capsys, "build", "--project", str(REFERENCE), "--out", "afile")[2] == [
        "afile: OUT_REFUSED: `afile` is a file: give a directory for the build; nothing was written"
    ]
    assert run(capsys, "convert", "missing.seif", "--to", "json")[2] == [
        "missing.seif: FILE_UNREADABLE: No such file or directory"
    ]
    assert run(capsys, "convert", str(REFERENCE), "--to", "seif", "--out", "no/x.seif")[2] == [
        "no/x.seif: FILE_UNWRITABLE: No such file or directory"
    ]
    assert run(capsys, "design", "--project", "nodir")[2] == [
        "nodir: FILE_UNREADABLE: not a file; give a `.json` or `.seif` project"
    ]
    assert run(capsys, "prove", "--output", "afile/x.json")[2] == [
        "afile/x.json: OUTPUT_UNWRITABLE: File exists"
    ]


def test_registry_commands_render_at_their_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`seif register` (the refusal and its JSON, the file first), `registry list` (an entry that
    does not verify, quoting the load's diagnostic) and `seif replay` (the same, joined)."""
    monkeypatch.chdir(tmp_path)
    Path("broken").mkdir()
    missing = "broken: BUILD_NOT_FOUND: no `build.cbor` and `manifest.json` in this directory"
    assert run(capsys, "register", "--build", "broken", "--registry", "reg")[2] == [missing]
    code, out, _ = run(capsys, "register", "--build", "broken", "--registry", "reg", "--json")
    assert (code, json.loads("\n".join(out))["diagnostics"]) == (
        2,
        [
            {
                "file": "broken",
                "code": "BUILD_NOT_FOUND",
                "severity": "error",
                "message": "no `build.cbor` and `manifest.json` in this directory",
            }
        ],
    )
    write_build(compile_project(REFERENCE), "build")
    assert run(capsys, "register", "--build", "build", "--registry", "reg")[0] == 0
    [entry] = Path("reg/builds").iterdir()
    with (entry / "build.cbor").open("ab") as fh:
        fh.write(b"x")
    _, _, err = run(capsys, "registry", "list", "--registry", "reg")
    digest = f"blake3:{entry.name}"
    assert err[0].startswith(
        f"reg/builds/{entry.name}: REGISTRY_ENTRY_CORRUPT: the stored build `{digest}` does not"
        " verify: BUILD_DIGEST_MISMATCH: `build.cbor` hashes to `blake3:"
    )
    assert run(capsys, "replay", "--build", "broken", "--log", "none.cbor")[2] == [
        "seif replay: broken: BUILD_UNREADABLE: cannot read the build in `broken`: No such file"
        " or directory"
    ]


def test_release_renders_the_bindings_file_s_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`seif release`: a bindings file's problems at their pointers (a quoted syntax error at
    its line and column), and a failing test as TESTS_FAILED at the project."""
    monkeypatch.chdir(tmp_path)
    release = ("release", "--project", str(REFERENCE), "--registry", "reg", "--environment", "dev")
    Path("syntax.json").write_text("{\n")
    assert run(capsys, *release, "--bindings", "syntax.json")[2] == [
        "syntax.json:2:1: BINDINGS_INVALID: JSON_SYNTAX: not valid JSON: expecting property name"
        " enclosed in double quotes",
        f"{REFERENCE}: not released: nothing was registered or written",
    ]
    Path("bad.json").write_text('{"environment": "dev", "revision": "x", "tools": {}}')
    assert run(capsys, *release, "--bindings", "bad.json")[2] == [
        "bad.json:/revision: BINDINGS_INVALID: not an integer in 0..9007199254740991",
        f"{REFERENCE}: not released: nothing was registered or written",
    ]
    code, out, _ = run(capsys, *release, "--bindings", "bad.json", "--json")
    assert code == 1
    [found] = json.loads("\n".join(out))["diagnostics"]
    assert found == {
        "file": "bad.json",
        "code": "BINDINGS_INVALID",
        "severity": "error",
        "pointer": "/revision",
        "line": 1,
        "column": 36,
        "message": "not an integer in 0..9007199254740991",
    }


def test_promote_renders_broken_obligations_at_the_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    document = json.loads(REFERENCE.read_text())
    write_build(compile_project(document), "b0")
    document["tests"] = document["tests"][1:]
    write_build(compile_project(document), "b1")
    for build in ("b0", "b1"):
        assert run(capsys, "register", "--build", build, "--registry", "reg")[0] == 0
    baseline, candidate = load_build("b0").digest, load_build("b1").digest
    assert run(capsys, "promote", "--registry", "reg", "--candidate", baseline)[0] == 0
    test_id = json.loads(REFERENCE.read_text())["tests"][0]["id"]
    assert run(capsys, "promote", "--registry", "reg", "--candidate", candidate)[2] == [
        f"{baseline}:/tests/0: PROMOTION_BLOCKED: test `{test_id}` is missing",
        f"{candidate}: PROMOTION_BLOCKED: 1 obligation of the baseline {baseline} broken;"
        " not promoted",
    ]


def test_approval_server_renders_its_configuration_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    approvers = tmp_path / "approvers.json"
    approvers.write_text('{"approvers": [{"id": "Ana", "tokenRef": "keychain:x"}]}')
    command = ("approval-server", "--approvers", str(approvers))
    assert run(capsys, *command, "--runtime", "http://example.com")[2] == [
        "--runtime: ENDPOINT_HTTP_NOT_LOOPBACK: plain `http://` is only for loopback hosts, not"
        " `example.com`; use `https://`"
    ]
    assert run(capsys, *command, "--runtime", "http://127.0.0.1:9")[2] == [
        f"{approvers}:/approvers/0/id: INVALID_ID: `Ana` does not match `^[a-z][a-z0-9-]{{0,63}}$`",
        f"{approvers}:/approvers/0/tokenRef: APPROVER_TOKEN_REF_INVALID: this value is not an"
        " approver's token reference; use `env:SEIF_APPROVER_NAME`",
    ]


def serve(tmp_path: Path, *argv: str, env: dict[str, str] | None = None) -> list[str]:
    done = subprocess.run(
        [*seif_command(), "serve", *argv, "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, **(ENV if env is None else env)},
        check=False,
    )
    assert done.returncode in (2, 3), done.stderr
    return done.stderr.splitlines()


def test_serve_renders_every_file_s_problems_each_at_its_file(tmp_path: Path) -> None:
    """The build's diagnostics at the build directory (a shadow build's at its own), the
    configuration files' at theirs, a configuration file that is not JSON at its line."""
    document = bindings_document("http://127.0.0.1:9")
    document["tools"]["inspect-contxt"] = document["tools"].pop("inspect-context")
    config = write_config(tmp_path, "http://127.0.0.1:9", bindings=document)
    files = ("--bindings", "bindings.json", "--credentials", "credentials.json", "--data", "d")
    (tmp_path / "broken").mkdir()
    assert serve(tmp_path, "--build", "broken", *files) == [
        "broken: BUILD_UNREADABLE: cannot read the build in `broken`: No such file or directory",
        "seif serve: not started, 1 problem; nothing was created",
    ]
    assert serve(tmp_path, "--build", "build", *files) == [
        "bindings.json:/tools/inspect-contxt: UNKNOWN_TOOL: tool `inspect-contxt` is not"
        " declared; did you mean `inspect-context`?",
        "seif serve: not started, 1 problem; nothing was created",
    ]
    config.bindings.write_text(json.dumps(bindings_document("http://127.0.0.1:9")))
    assert serve(tmp_path, "--build", "build", *files, "--shadow", "broken") == [
        "broken: BUILD_UNREADABLE: cannot read the build in `broken`: No such file or directory",
        "seif serve: not started, 1 problem; nothing was created",
    ]  # once named at the served build's directory
    config.credentials.write_text('{"credentials": \n')
    assert serve(tmp_path, "--build", "build", *files)[:1] == [
        "credentials.json:2:1: JSON_SYNTAX: not valid JSON: expecting value"
    ]


def test_serve_renders_a_data_directory_refusal_with_its_remedy(tmp_path: Path) -> None:
    write_config(tmp_path, "http://127.0.0.1:9")
    files = ("--build", "build", "--bindings", "bindings.json", "--credentials", "credentials.json")
    data = tmp_path / "d"
    data.mkdir(mode=0o700)
    (data / "runtime.key").write_bytes(b"k" * 31)
    (data / "runtime.key").chmod(0o600)
    key = data / "runtime.key"
    assert serve(tmp_path, *files, "--data", "d") == [
        f"{key}: KEY_INVALID: `{key}` holds 31 bytes, not 32",
        f"{key}: remedy: restore `runtime.key` from a backup of this data directory (a 32-byte"
        " file, mode 0600, owned by this user; `chmod 600` mends the mode); every fingerprint in"
        " the store and the log was made with it",
    ]
    (data / "runtime.key").unlink()
    with DataDir.open(data):  # another owner: the directory as it was given, and the remedy
        lines = serve(tmp_path, *files, "--data", "d/")
    assert lines[0].startswith(f"d/: DATA_DIR_LOCKED: data directory `{data}` is owned by pid ")
    assert lines[1:] == ["d/: remedy: stop the owner first"]


def test_tool_and_starter_render_at_the_file_they_were_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "p.json"
    project.write_text(REFERENCE.read_text())
    new = ("tool", "new", "--project", str(project), "--template", "custom")
    assert run(capsys, *new, "--id", "search-knowledge")[2] == [
        f"{project}:/tools: TOOL_EXISTS: `search-knowledge` is already a tool of this project:"
        " choose another id (e.g. `search-knowledge-2`), or edit the existing tool",
        f"{project}: nothing was written",
    ]
    assert run(
        capsys, "starter", "--build", str(tmp_path), "--tool", "x", "--lang", "python", "--out", "o"
    )[2] == [f"{tmp_path}: BUILD_NOT_FOUND: no `build.cbor` and `manifest.json` in this directory"]


def test_the_demo_renders_at_the_reference_project(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from seif.demo import walkthrough as demo

    refused = CompileError([diagnostic(pointer="/tools"), diagnostic(pointer="")])

    def compile_project(_path: object) -> None:
        raise refused

    monkeypatch.setattr(demo, "compile_project", compile_project)
    assert demo.main() == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{demo.REFERENCE}:/tools: X: m",
        f"{demo.REFERENCE}: X: m",  # at the root: `FILE: CODE`, as every other command says it
    ]
