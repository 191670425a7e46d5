"""Tools imported from an upstream MCP server in the authoring commands that write or read a
bindings file: `seif bindings template` writes an `upstreams` skeleton and binds each pinned tool
to its server, `seif release` keeps the upstreams filled in, `seif tool show` and the Design
workstation's binding form show an upstream-bound tool's upstream (docs/upstream-mcp.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from compiler.authoring.bindings import placeholder_command, secret_env
from compiler.authoring.release import prepare_release
from compiler.authoring.show import show_tool, text_lines
from compiler.authoring.source import AuthoringError, load_source
from compiler.builds.build import write_build
from compiler.driver import compile_project
from policy.json.strict import loads
from seif.cli import build_parser
from servers.config.files import ConfigError, load_bindings
from servers.config.upstreams import StdioUpstream, UpstreamBinding
from servers.design import bindingform
from tests.compiler.authoring.test_release_guided import project_doc, release_args, tool

Cap = pytest.CaptureFixture[str]
DIGEST = "sha256:" + "cd" * 32


def pinned(tool_id: str, server: str) -> dict[str, Any]:
    return {
        **tool(tool_id),
        "upstream": {
            "server": server,
            "tool": tool_id.replace("-", "_"),
            "descriptorDigest": DIGEST,
        },
    }


def project(*tools: dict[str, Any]) -> dict[str, Any]:
    doc = project_doc(*(t["id"] for t in tools))
    return {**doc, "tools": list(tools)}


@pytest.fixture
def work(tmp_path: Path) -> Path:
    doc = project(tool("alpha"), pinned("fs-read", "fs"), pinned("fs-list", "fs"))
    (tmp_path / "project.json").write_text(json.dumps(doc))
    return tmp_path


def cli(capsys: Cap, *argv: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(list(argv))
    code: int = args.run(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_template_writes_an_upstreams_skeleton_and_binds_pinned_tools(
    work: Path, capsys: Cap
) -> None:
    write_build(compile_project(work / "project.json"), work / "build")
    code, out, err = cli(capsys, "bindings", "template", "--build", str(work / "build"))
    assert code == 0
    document = loads(out)
    assert document["upstreams"] == {"fs": {"command": [placeholder_command("fs")]}}
    assert document["tools"]["fs-read"] == {"upstream": "fs", "timeoutMs": 5000, "maxBytes": 65536}
    assert document["tools"]["alpha"]["endpoint"] == "https://executor.example/alpha"
    assert f"fs-read is served by upstream fs: its tool fs_read must list as {DIGEST}" in err
    target = work / "out" / "bindings.json"
    code, out, _ = cli(
        capsys, "bindings", "template", "--build", str(work / "build"), "--out", str(target)
    )
    assert code == 0 and "placeholder command of each upstream (fs)" in out
    contracts = loads((target.parent / "contracts.json").read_text())
    served = {t["id"]: t.get("upstream") for t in contracts["tools"]}
    assert served["fs-read"] == {"server": "fs", "tool": "fs_read", "descriptorDigest": DIGEST}
    assert served["alpha"] is None


def test_a_template_not_filled_in_is_refused_and_filled_in_loads(work: Path) -> None:
    """The placeholder command names no program: the runtime refuses it at its pointer rather
    than start anything; with the server's command it loads into upstream bindings."""
    release = prepare_release(work / "project.json", work / "reg", "staging")
    ir = compile_project(work / "project.json")
    env = {secret_env("alpha"): "alpha-secret"}
    with pytest.raises(ConfigError) as excinfo:
        load_bindings(release.bindings, ir, env, keyring_get=lambda _s, _n: None)
    [problem] = excinfo.value.diagnostics
    assert (problem.code, problem.pointer) == ("COMMAND_NOT_FOUND", "/upstreams/fs/command/0")
    assert problem.line is not None
    filled = loads(release.bindings.read_text())
    filled["upstreams"]["fs"] = {"command": [sys.executable, "-m", "fs_server"]}
    release.bindings.write_text(json.dumps(filled))
    bindings = load_bindings(release.bindings, ir, env, keyring_get=lambda _s, _n: None)
    assert bindings.tools["fs-list"] == UpstreamBinding("fs-list", "fs", 5000, 65536)
    assert bindings.upstreams["fs"] == StdioUpstream("fs", (sys.executable, "-m", "fs_server"))


def test_release_says_what_to_fill_in_for_an_upstream(work: Path, capsys: Cap) -> None:
    code, out, _ = cli(capsys, "release", *release_args(work))
    assert code == 0
    assert "    upstream: fs: replace the placeholder command of upstreams.fs" in out
    release = prepare_release(work / "project.json", work / "reg", "staging")
    fs_read = next(t for t in release.tools if t.id == "fs-read")
    assert (fs_read.upstream, fs_read.endpoint, fs_read.placeholder) == ("fs", None, True)
    assert fs_read.to_json()["upstream"] == "fs" and "describe" not in fs_read.to_json()


def test_the_next_revision_keeps_filled_in_upstreams(work: Path) -> None:
    first = prepare_release(work / "project.json", work / "reg", "staging")
    filled = loads(first.bindings.read_text())
    filled["upstreams"]["fs"] = {
        "url": "https://fs.example/mcp",
        "secretRef": "env:CONTEXT_TOOL_FS_TOKEN",
    }
    filled["tools"]["fs-read"]["timeoutMs"] = 3000
    first.bindings.write_text(json.dumps(filled))
    # alpha is now imported from `tickets`; fs-list is gone; fs-read stays
    doc = project(pinned("alpha", "tickets"), pinned("fs-read", "fs"))
    (work / "project.json").write_text(json.dumps(doc))
    second = prepare_release(work / "project.json", work / "reg", "staging")
    document = loads(second.bindings.read_text())
    assert document["upstreams"] == {
        "tickets": {"command": [placeholder_command("tickets")]},
        "fs": filled["upstreams"]["fs"],
    }
    assert document["tools"] == {
        "alpha": {"upstream": "tickets", "timeoutMs": 5000, "maxBytes": 65536},
        "fs-read": {"upstream": "fs", "timeoutMs": 3000, "maxBytes": 65536},
    }
    alpha, fs_read = second.tools
    assert not alpha.kept and alpha.placeholder
    assert fs_read.kept and not fs_read.placeholder
    assert fs_read.secret_env == "CONTEXT_TOOL_FS_TOKEN"
    assert "`alpha` is now bound to its upstream: its binding is a placeholder" in second.notes
    assert "upstream `tickets` is new in this build: its command is a placeholder" in second.notes
    # and the other way: an upstream no contract names any longer is dropped
    (work / "project.json").write_text(json.dumps(project(tool("alpha"))))
    third = prepare_release(work / "project.json", work / "reg", "staging")
    document = loads(third.bindings.read_text())
    assert "upstreams" not in document and "endpoint" in document["tools"]["alpha"]
    assert "upstream `fs` was dropped: no contract of the build names it" in third.notes


def test_a_file_whose_upstreams_is_not_an_object_is_refused(work: Path) -> None:
    first = prepare_release(work / "project.json", work / "reg", "staging")
    broken = {**loads(first.bindings.read_text()), "upstreams": ["fs"]}
    first.bindings.write_text(json.dumps(broken))
    with pytest.raises(AuthoringError) as excinfo:
        prepare_release(work / "project.json", work / "reg", "staging")
    [problem] = excinfo.value.diagnostics
    assert (problem.code, problem.pointer) == ("BINDINGS_INVALID", "/upstreams")


def test_tool_show_names_the_upstream(work: Path) -> None:
    release = prepare_release(work / "project.json", work / "reg", "staging")
    filled = loads(release.bindings.read_text())
    filled["upstreams"]["fs"] = {"command": ["node", "/opt/fs/index.js", "--token-file=/x"]}
    source = load_source(work / "project.json")
    report = show_tool(source, tool_id="fs-read", bindings=filled)
    connection = report["connection"]
    assert connection["state"] == "configured" and connection["upstream"] == "fs"
    assert connection["command"] == "node" and connection["url"] is None
    assert "  configured: upstream fs node (environment staging, revision 1, secret None)" in (
        text_lines(report)
    )
    assert all("--token-file" not in line for line in text_lines(report))
    placeholder = show_tool(source, tool_id="fs-read", bindings=loads(release.bindings.read_text()))
    assert placeholder["connection"]["state"] == "placeholder"
    missing = {**filled, "upstreams": {}}
    assert (
        show_tool(source, tool_id="fs-read", bindings=missing)["connection"]["state"] == "unbound"
    )


def test_the_binding_form_shows_an_upstream_bound_tool_read_only(work: Path) -> None:
    release = prepare_release(work / "project.json", work / "reg", "staging")
    form = bindingform.form(work / "project.json", release.bindings)
    rows = {row["id"]: row for row in form["tools"]}
    assert rows["fs-read"]["upstream"] == "fs" and rows["fs-read"]["endpoint"] is None
    assert rows["alpha"]["upstream"] is None
    before = release.bindings.read_bytes()
    with pytest.raises(AuthoringError) as excinfo:
        bindingform.save(
            work / "project.json", release.bindings, "fs-read", "https://x.example/fs", None
        )
    [problem] = excinfo.value.diagnostics
    assert (problem.code, problem.pointer) == (
        "BINDING_UPSTREAM_READ_ONLY",
        "/tools/fs-read/upstream",
    )
    assert release.bindings.read_bytes() == before
    saved = bindingform.save(
        work / "project.json", release.bindings, "alpha", "http://127.0.0.1:9000/a", None
    )
    assert saved["saved"] == "alpha"
