"""`seif release` (compiler.authoring.release, seif.cli.release): validate, build, register, and
write the next revision of an environment's bindings file; never promote.

The CLI is exercised in process through ``seif``'s own parser (:func:`seif.cli.build_parser`).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from compiler.authoring.bindings import placeholder_endpoint, secret_env
from compiler.authoring.release import (
    NOTHING_PROMOTED,
    Release,
    ReleaseError,
    prepare_release,
)
from compiler.authoring.source import AuthoringError
from compiler.builds.registry import Registry
from compiler.driver import compile_project
from policy.json.strict import loads
from seif.cli import build_parser
from servers.config.files import load_bindings

Cap = pytest.CaptureFixture[str]
Doc = dict[str, Any]


def tool(tool_id: str, timeout_ms: int = 5000) -> Doc:
    return {
        "id": tool_id,
        "name": tool_id.replace("-", "_"),
        "version": "1.0.0",
        "description": f"The {tool_id} tool.",
        "parameters": {"type": "object", "properties": {}},
        "effect": "read",
        "timeoutMs": timeout_ms,
    }


def project_doc(*tool_ids: str) -> Doc:
    return {
        "format": "seif.context-project.v1",
        "id": "release-demo",
        "version": "1.0.0",
        "objectives": [{"id": "helper", "profile": "helper"}],
        "profiles": [
            {
                "id": "helper",
                "tokenCeiling": 10_000,
                "toolRules": [{"tool": t, "participation": "include"} for t in tool_ids],
            }
        ],
        "tools": [tool(t) for t in tool_ids],
        "tests": [
            {
                "id": "helper-sees-its-tools",
                "objective": "helper",
                "fixtures": "current",
                "expect": {"tools": {"include": list(tool_ids)}},
            }
        ],
    }


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "project.json").write_text(json.dumps(project_doc("alpha", "beta")))
    return tmp_path


def write(path: Path, doc: Doc) -> None:
    path.write_text(json.dumps(doc, indent=2))


def cli(capsys: Cap, *argv: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(["release", *argv])
    code: int = args.run(args)
    out, err = capsys.readouterr()
    return code, out, err


def release_args(work: Path, *more: str) -> list[str]:
    return [
        "--project",
        str(work / "project.json"),
        "--registry",
        str(work / "reg"),
        "--environment",
        "staging",
        *more,
    ]


def nothing_released(work: Path) -> None:
    assert not (work / "reg").exists()
    assert not (work / "bindings.staging.json").exists()
    assert not (work / "contracts.json").exists()


# A first release.
def test_a_release_registers_writes_revision_1_and_promotes_nothing(work: Path) -> None:
    release = prepare_release(work / "project.json", work / "reg", "staging")
    target = work / "bindings.staging.json"
    assert release.bindings == target and release.revision == 1
    assert release.previous_revision is None and not release.already_registered
    document = loads(target.read_text())
    assert document["environment"] == "staging" and document["revision"] == 1
    assert list(document["tools"]) == ["alpha", "beta"]
    assert document["tools"]["alpha"] == {
        "endpoint": placeholder_endpoint("alpha"),
        "secretRef": f"env:{secret_env('alpha')}",
        "timeoutMs": 5000,
        "maxBytes": 65536,
    }
    registry = Registry(work / "reg")
    assert [e.build.digest for e in registry.entries() if e.build] == [release.digest]
    assert registry.history() == [] and registry.current() is None
    assert not registry.history_path.exists()
    contracts = loads((work / "contracts.json").read_text())
    assert contracts["build"] == release.digest
    assert [t.placeholder and not t.kept for t in release.tools] == [True, True]
    assert [t.secret_env for t in release.tools] == [
        "CONTEXT_TOOL_ALPHA_TOKEN",
        "CONTEXT_TOOL_BETA_TOKEN",
    ]


def test_the_written_template_loads_as_a_bindings_file(work: Path) -> None:
    release = prepare_release(work / "project.json", work / "reg", "staging")
    ir = compile_project(work / "project.json")
    env = {secret_env(t.id): f"secret-of-{t.id}" for t in ir.tools}
    bindings = load_bindings(release.bindings, ir, env, keyring_get=lambda _s, _n: None)
    assert bindings.environment == "staging" and bindings.revision == 1
    assert sorted(bindings.tools) == ["alpha", "beta"]


def test_the_cli_says_what_to_fill_in_and_that_nothing_was_promoted(
    work: Path, capsys: Cap
) -> None:
    code, out, err = cli(capsys, *release_args(work))
    assert code == 0 and err == ""
    lines = out.splitlines()
    digest = Registry(work / "reg").entries()[0].build.digest  # type: ignore[union-attr]
    assert lines[0] == f"{digest} registered in {work / 'reg'}"
    assert lines[1] == f"wrote {work / 'bindings.staging.json'}: environment staging, revision 1"
    assert f"    endpoint: replace the placeholder {placeholder_endpoint('alpha')}" in out
    assert "    secret: set CONTEXT_TOOL_ALPHA_TOKEN where the runtime runs" in out
    assert "is configured, not ready" in out and "GET /v1/ready" in out
    assert f"next: seif promote --registry {work / 'reg'} --candidate {digest}" in lines
    assert lines[-1] == NOTHING_PROMOTED == "nothing was promoted or deployed"


# The next revision.
def test_a_second_release_keeps_what_was_filled_in_and_drops_removed_tools(work: Path) -> None:
    first = prepare_release(work / "project.json", work / "reg", "staging")
    target = first.bindings
    filled = loads(target.read_text())
    filled["traceKeyRef"] = "env:CONTEXT_TOOL_TRACE_KEY"
    filled["tools"]["alpha"] = {
        "endpoint": "https://alpha.internal.example/seif",
        "secretRef": "keychain:context-tool-alpha",
        "timeoutMs": 4000,
        "maxBytes": 1000,
        "caFile": "ca/root.pem",
    }
    write(target, filled)
    doc = project_doc("alpha", "gamma")
    write(work / "project.json", doc)
    second = prepare_release(work / "project.json", work / "reg", "staging")
    assert second.revision == 2 and second.previous_revision == 1
    assert second.digest != first.digest and not second.already_registered
    document = loads(target.read_text())
    assert document["revision"] == 2 and document["traceKeyRef"] == "env:CONTEXT_TOOL_TRACE_KEY"
    assert document["tools"]["alpha"] == filled["tools"]["alpha"]
    assert document["tools"]["gamma"]["endpoint"] == placeholder_endpoint("gamma")
    assert "beta" not in document["tools"] and second.dropped == ("beta",)
    alpha, gamma = second.tools
    assert alpha.kept and not alpha.placeholder and alpha.secret_env is None
    assert gamma.placeholder and not gamma.kept
    assert "`beta` was dropped: the build no longer declares it" in second.notes
    assert "`gamma` is new in this build: its binding is a placeholder" in second.notes
    registry = Registry(work / "reg")
    assert len(registry.entries()) == 2 and registry.history() == []


def test_an_unchanged_project_is_already_registered_and_still_bumps_the_revision(
    work: Path, capsys: Cap
) -> None:
    first = prepare_release(work / "project.json", work / "reg", "staging")
    code, out, _ = cli(capsys, *release_args(work))
    assert code == 0
    assert out.splitlines()[0] == f"{first.digest} already registered in {work / 'reg'}"
    assert "revision 2 (was 1)" in out
    assert loads(first.bindings.read_text())["revision"] == 2


def test_a_kept_timeout_above_a_lowered_declared_one_is_lowered(work: Path) -> None:
    first = prepare_release(work / "project.json", work / "reg", "staging")
    doc = project_doc("alpha", "beta")
    doc["tools"][0]["timeoutMs"] = 2000
    write(work / "project.json", doc)
    second = prepare_release(work / "project.json", work / "reg", "staging")
    assert loads(first.bindings.read_text())["tools"]["alpha"]["timeoutMs"] == 2000
    assert "`alpha`: timeoutMs 5000 lowered to the tool's declared 2000" in second.notes


def test_bindings_elsewhere_and_a_tool_free_project(tmp_path: Path) -> None:
    doc = project_doc()
    del doc["tools"], doc["tests"]
    doc["profiles"][0].pop("toolRules")
    doc["profiles"][0]["context"] = [{"id": "role", "role": "system", "text": "Be brief."}]
    write(tmp_path / "p.json", doc)
    out = tmp_path / "deploy" / "staging" / "bindings.json"
    release = prepare_release(tmp_path / "p.json", tmp_path / "reg", "staging", out)
    assert release.bindings == out and release.tools == ()
    assert loads(out.read_text()) == {"environment": "staging", "revision": 1, "tools": {}}
    assert (out.parent / "contracts.json").is_file()


# Refusals: nothing registered, nothing written.
def test_an_invalid_project_registers_and_writes_nothing(work: Path, capsys: Cap) -> None:
    doc = project_doc("alpha")
    doc["profiles"][0]["toolRules"][0]["tool"] = "alpah"
    write(work / "project.json", doc)
    with pytest.raises(ReleaseError) as caught:
        prepare_release(work / "project.json", work / "reg", "staging")
    assert isinstance(caught.value, AuthoringError)
    assert "UNKNOWN_TOOL" in {d.code for d in caught.value.diagnostics}
    nothing_released(work)
    code, out, err = cli(capsys, *release_args(work))
    assert code == 1 and out == ""
    assert f"{work / 'project.json'}:/profiles/0/toolRules/0/tool: UNKNOWN_TOOL" in err
    assert err.splitlines()[-1].endswith("not released: nothing was registered or written")
    nothing_released(work)


def test_failing_tests_register_and_write_nothing(work: Path, capsys: Cap) -> None:
    doc = project_doc("alpha", "beta")
    doc["tests"][0]["expect"]["tools"] = {"exclude": ["beta"]}
    write(work / "project.json", doc)
    with pytest.raises(ReleaseError) as caught:
        prepare_release(work / "project.json", work / "reg", "staging")
    assert {d.code for d in caught.value.diagnostics} == {"TESTS_FAILED"}
    assert caught.value.report is not None and not caught.value.report.passed
    nothing_released(work)
    code, out, err = cli(capsys, *release_args(work))
    assert code == 1 and out == "" and "FAIL helper-sees-its-tools" in err
    assert "TESTS_FAILED" in err.splitlines()[-1]
    nothing_released(work)


def test_a_bindings_file_of_another_environment_is_refused_unchanged(
    work: Path, capsys: Cap
) -> None:
    other = work / "bindings.staging.json"
    text = json.dumps({"environment": "production", "revision": 7, "tools": {}})
    other.write_text(text)
    with pytest.raises(ReleaseError) as caught:
        prepare_release(work / "project.json", work / "reg", "staging")
    assert [d.code for d in caught.value.diagnostics] == ["BINDINGS_ENVIRONMENT_MISMATCH"]
    code, out, err = cli(capsys, *release_args(work))
    assert code == 2 and out == ""
    assert f"{other}:/environment: BINDINGS_ENVIRONMENT_MISMATCH" in err
    assert other.read_text() == text and not (work / "reg").exists()


@pytest.mark.parametrize(
    ("content", "pointer"),
    [
        ('{"environment": "staging", "revision": 1, "tools": {}', None),
        ('{"environment": "staging", "revision": 1}', ""),
        ('{"environment": "staging", "revision": true, "tools": {}}', "/revision"),
        ('{"environment": "staging", "revision": 1, "tools": {"alpha": {}}}', "/tools/alpha"),
        ('{"environment": "staging", "revision": 1, "tools": {}, "extra": 1}', "/extra"),
    ],
)
def test_a_file_that_is_not_a_bindings_file_is_refused_unchanged(
    work: Path, content: str, pointer: str | None
) -> None:
    target = work / "bindings.staging.json"
    target.write_text(content)
    with pytest.raises(ReleaseError) as caught:
        prepare_release(work / "project.json", work / "reg", "staging")
    first = caught.value.diagnostics[0]
    assert first.code == "BINDINGS_INVALID" and first.pointer == pointer
    assert target.read_text() == content and not (work / "reg").exists()


@pytest.mark.parametrize("name", ["Staging", "", "a" * 65, "staging/../x"])
def test_an_environment_that_is_not_an_id_is_refused(work: Path, capsys: Cap, name: str) -> None:
    args = release_args(work)
    args[args.index("staging")] = name
    code, out, err = cli(capsys, *args)
    assert code == 2 and out == "" and "ENVIRONMENT_INVALID" in err
    nothing_released(work)


def test_the_bindings_path_may_not_be_the_project_or_contracts(work: Path) -> None:
    for path in (work / "project.json", work / "contracts.json"):
        with pytest.raises(ReleaseError) as caught:
            prepare_release(work / "project.json", work / "reg", "staging", path)
        assert [d.code for d in caught.value.diagnostics] == ["BINDINGS_PATH_REFUSED"]
    assert loads((work / "project.json").read_text()) == project_doc("alpha", "beta")
    nothing_released(work)


# JSON.
def test_json_output(work: Path, capsys: Cap) -> None:
    code, out, _ = cli(capsys, *release_args(work, "--json"))
    doc = loads(out)
    assert code == 0 and doc["ok"] is True
    assert doc["promoted"] is False and doc["deployed"] is False
    assert set(doc) == {
        "ok", "digest", "registry", "entry", "alreadyRegistered", "bindings", "contracts",
        "environment", "revision", "previousRevision", "tools", "dropped", "notes", "readiness",
        "promoted", "deployed",
    }  # fmt: skip
    assert doc["environment"] == "staging" and doc["revision"] == 1
    alpha = doc["tools"][0]
    assert alpha["id"] == "alpha" and alpha["placeholder"] is True and alpha["kept"] is False
    assert alpha["secretEnv"] == "CONTEXT_TOOL_ALPHA_TOKEN"
    assert alpha["describe"]["tool"]["contractDigest"] == alpha["contractDigest"]
    assert Path(doc["entry"]).is_dir() and (Path(doc["entry"]) / "build.cbor").is_file()
    assert "configured, not ready" in doc["readiness"]


def test_json_refusal(work: Path, capsys: Cap) -> None:
    doc = copy.deepcopy(project_doc("alpha"))
    doc["tests"][0]["expect"]["tools"] = {"exclude": ["alpha"]}
    write(work / "project.json", doc)
    code, out, _ = cli(capsys, *release_args(work, "--json"))
    refused = loads(out)
    assert code == 1 and refused["ok"] is False and refused["promoted"] is False
    assert refused["registered"] is None
    assert refused["diagnostics"][0]["code"] == "TESTS_FAILED"
    assert refused["diagnostics"][0]["file"] == str(work / "project.json")
    assert refused["tests"]["ok"] is False
    nothing_released(work)


def test_a_release_is_a_frozen_value(work: Path) -> None:
    release = prepare_release(work / "project.json", work / "reg", "staging")
    assert isinstance(release, Release)
    with pytest.raises(AttributeError):
        release.revision = 9  # type: ignore[misc]


def test_a_bindings_path_that_is_a_directory_is_unreadable(work: Path, capsys: Cap) -> None:
    (work / "bindings.staging.json").mkdir()
    code, out, err = cli(capsys, *release_args(work))
    assert code == 2 and out == "" and "BINDINGS_UNREADABLE" in err
    assert not (work / "reg").exists()


def test_a_bindings_file_that_cannot_be_written_says_the_build_was_registered(
    work: Path, capsys: Cap
) -> None:
    target = work / "project.json" / "bindings.json"  # under a file: it cannot be created
    code, out, err = cli(capsys, *release_args(work, "--bindings", str(target)))
    digest = Registry(work / "reg").entries()[0].build.digest  # type: ignore[union-attr]
    assert code == 2 and out == "" and "BINDINGS_WRITE_FAILED" in err
    assert f"{digest} was registered, the bindings file was not written" in err
    assert Registry(work / "reg").history() == []


def test_a_bindings_file_changed_during_the_release_is_not_overwritten(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from compiler.authoring import release as module

    target = work / "bindings.staging.json"
    register = module.register_build

    def register_and_edit(project: Any, registry: Registry) -> Any:
        target.write_text("edited meanwhile")
        return register(project, registry)

    monkeypatch.setattr(module, "register_build", register_and_edit)
    with pytest.raises(ReleaseError) as caught:
        prepare_release(work / "project.json", work / "reg", "staging")
    assert [d.code for d in caught.value.diagnostics] == ["BINDINGS_CHANGED"]
    assert caught.value.registered is not None
    assert target.read_text() == "edited meanwhile" and not (work / "contracts.json").exists()
