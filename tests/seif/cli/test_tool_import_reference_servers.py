"""`seif tool import` against the reference MCP servers, pinned from npm and started by the test:
the filesystem server over stdio (on a directory the test creates) and the everything server over
Streamable HTTP, and ``mcp-server-git`` (PyPI, the dev extra) over stdio on a repository the test
creates. What each imports, narrows, drops and refuses is what its real listing says;
the pins match the listing as the official client reads it; JSON and `.seif` projects."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from compiler.driver import compile_project
from tests.support.coordinates import seif, write_project
from tests.support.reference_servers import everything_over_http, filesystem_command

BASE = {
    "format": "seif.context-project.v1",
    "id": "files",
    "version": "1.0.0",
    "objectives": [{"id": "ask", "profile": "ask"}],
    "profiles": [{"id": "ask", "toolRules": []}],
}


@pytest.fixture(params=[".json", ".seif"])
def project(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return write_project(tmp_path, BASE, request.param)


def run_import(project: Path, *args: str) -> tuple[int, Any, str]:
    done = seif("tool", "import", "--project", str(project), "--json", *args)
    return done.returncode, json.loads(done.stdout), done.stderr


def test_the_filesystem_server_over_stdio(project: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    command = filesystem_command(root)
    code, doc, err = run_import(project, "--server", "fs", "--", *command)
    assert code == 1, err  # read_media_file's result is a union: refused, the others written
    assert doc["server"]["name"] == "secure-filesystem-server"
    effects = {t["id"]: t["effect"] for t in doc["tools"]}
    assert effects["fs-read-text-file"] == "read" and effects["fs-list-directory"] == "read"
    assert effects["fs-write-file"] == "write" and effects["fs-edit-file"] == "write"
    refused = {(r["tool"], r["code"]) for r in doc["refused"]}
    assert refused == {("read_media_file", "UPSTREAM_SCHEMA_UNSUPPORTED")}
    write = next(t for t in doc["tools"] if t["id"] == "fs-write-file")
    assert "/inputSchema/$schema" in write["dropped"]
    tools = {t.id: t for t in compile_project(project).tools}
    assert set(tools) == set(effects)
    pinned = tools["fs-write-file"]
    assert pinned.upstream is not None and pinned.upstream.server == "fs"
    assert pinned.upstream.tool == "write_file" and pinned.approval == "required"
    assert pinned.upstream.descriptor_digest == write["descriptorDigest"]

    before = project.read_bytes()
    again, doc, _ = run_import(project, "--server", "fs", "--tool", "write_file", "--", *command)
    assert (again, doc["tools"]) == (1, [])  # already imported: only --update re-imports it
    assert [(r["tool"], r["code"]) for r in doc["refused"]] == [("write_file", "DUPLICATE_ID")]
    assert project.read_bytes() == before
    same, doc, err = run_import(
        project, "--server", "fs", "--update", "--tool", "write_file", "--", *command
    )
    assert same == 0, err
    assert compile_project(project).tool("fs-write-file") == pinned  # nothing changed upstream


def test_the_everything_server_over_streamable_http(project: Path) -> None:
    with everything_over_http() as url:
        code, doc, err = run_import(project, "--server", "every", "--url", url)
    assert code == 1, err  # gzip-file-as-resource's `format`: refused
    assert doc["server"]["name"] == "mcp-servers/everything"
    assert [(r["tool"], r["pointer"]) for r in doc["refused"]] == [
        ("gzip-file-as-resource", "/inputSchema/properties/data/format")
    ]
    effects = {t["id"]: t["effect"] for t in doc["tools"]}
    assert effects["every-echo"] == "read" and effects["every-get-sum"] == "read"
    assert effects["every-toggle-simulated-logging"] == "write"  # no readOnlyHint
    tools = compile_project(project).tools
    assert {t.id for t in tools} == set(effects)
    assert all(t.upstream is not None and t.upstream.server == "every" for t in tools)


def test_the_git_server_over_stdio(project: Path, tmp_path: Path) -> None:
    server = shutil.which("mcp-server-git", path=str(Path(sys.executable).parent))
    if server is None:  # a real component: missing fails the run under CI
        message = "mcp-server-git is missing: it is in the dev extra (make .venv/.installed)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    repository = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repository)], check=True, timeout=30)
    command = ["--", server, "--repository", str(repository)]
    code, doc, err = run_import(project, "--server", "git", "--prefix", "repo", *command)
    assert code == 0, err
    assert doc["server"]["name"] == "mcp-git"
    effects = {t["id"]: t["effect"] for t in doc["tools"]}
    assert effects["repo-git-status"] == "read" and effects["repo-git-log"] == "read"
    assert effects["repo-git-commit"] == "write" and effects["repo-git-add"] == "write"
    log = next(t for t in doc["tools"] if t["id"] == "repo-git-log")
    assert "/inputSchema/properties/start_timestamp/anyOf" in log["narrowed"]  # optional | null
    tools = {t.id: t for t in compile_project(project).tools}
    assert tools["repo-git-status"].name == "repo_git_status"
    assert tools["repo-git-log"].upstream is not None
    assert tools["repo-git-log"].upstream.tool == "git_log"
