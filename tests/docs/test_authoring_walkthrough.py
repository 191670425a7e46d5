"""docs/authoring.md, followed as written: add a tool, include and protect it, check a call,
release, run a starter, bind it, and see the real runtime ready (then a call FAILED with the
placeholder's NOT_IMPLEMENTED)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import ROOT
from tests.support.runtime_harness import _read_url, listening, seif_command, stop

INSPECT_TOKEN = "inspect-secret-walkthrough"
TICKET = {"title": "Printer jammed", "description": "Floor 2", "priority": "low"}


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [*seif_command(), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode in (0, 1), done.stderr
    return done


def node() -> str:
    found = shutil.which("node")
    if found is None:
        (pytest.fail if os.environ.get("CI") else pytest.skip)("node is not installed")
    return str(found)


def request(url: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    headers = {"content-type": "application/json"} if data else {}
    if token:
        headers["authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def spawn(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        args,
        cwd=cwd,
        env={"PATH": os.environ["PATH"], **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def author(tmp_path: Path) -> tuple[Path, str]:
    """The command-line half: the project changed, checked, released; the build's directory."""
    project = tmp_path / "p.seif"
    shutil.copy(ROOT / "reference" / "agent-tools" / "context-project.seif", project)
    run(
        "tool",
        "new",
        "--project",
        "p.seif",
        "--template",
        "ticket-creation",
        "--id",
        "open-ticket",
        cwd=tmp_path,
    )
    run(
        "tool",
        "include",
        "--project",
        "p.seif",
        "--tool",
        "open-ticket",
        "--profile",
        "authoring",
        cwd=tmp_path,
    )
    assert (
        "added 3 guard(s)"
        in run(
            "tool", "protect", "--project", "p.seif", "--tool", "open-ticket", cwd=tmp_path
        ).stdout
    )
    check = run(
        "tool",
        "check-call",
        "--project",
        "p.seif",
        "--objective",
        "authoring",
        "--tool",
        "open-ticket",
        "--arguments",
        json.dumps(TICKET),
        "--approved",
        cwd=tmp_path,
    )
    assert check.returncode == 0 and check.stdout.startswith("ALLOWED")
    release = run(
        "release",
        "--project",
        "p.seif",
        "--registry",
        "registry",
        "--environment",
        "staging",
        "--json",
        cwd=tmp_path,
    )
    document = json.loads(release.stdout)
    assert document["promoted"] is False and document["deployed"] is False
    return project, str(document["entry"])


def test_the_authoring_walkthrough_ends_with_a_ready_runtime(tmp_path: Path) -> None:
    node()
    _, build = author(tmp_path)
    run(
        "starter",
        "--build",
        build,
        "--tool",
        "open-ticket",
        "--lang",
        "node",
        "--out",
        "ticket-executor",
        cwd=tmp_path,
    )
    token, app = "executor-secret-walkthrough", "app-secret-walkthrough"
    executor = spawn(
        ["./run", "--port", "0"], tmp_path / "ticket-executor", {"SEIF_EXECUTOR_TOKEN": token}
    )
    runtime = synthetic = None
    try:
        url = _read_url(executor, "executor listening on ", time.monotonic() + 30)
        synthetic = spawn(
            [sys.executable, str(ROOT / "examples" / "reference-tools" / "executor.py"),
             "--port", "0"],
            tmp_path,
            {"CONTEXT_TOOL_INSPECT_CONTEXT_TOKEN": INSPECT_TOKEN},
        )  # fmt: skip
        reference = _read_url(synthetic, "reference executor listening on ", time.monotonic() + 30)
        bindings_path = tmp_path / "bindings.staging.json"
        bindings = json.loads(bindings_path.read_text())
        entry = bindings["tools"]["open-ticket"]
        inspect = bindings["tools"]["inspect-context"]  # required by both profiles: bound
        bindings["tools"] = {
            "open-ticket": {**entry, "endpoint": url},
            "inspect-context": {**inspect, "endpoint": f"{reference}/inspect-context"},
        }  # the others: unbound
        bindings_path.write_text(json.dumps(bindings, indent=2))
        shown = run(
            "tool",
            "show",
            "--project",
            "p.seif",
            "--tool",
            "open-ticket",
            "--bindings",
            "bindings.staging.json",
            cwd=tmp_path,
        ).stdout
        assert f"  configured: {url} (environment staging, revision 1" in shown
        (tmp_path / "credentials.json").write_text(
            json.dumps(
                {
                    "credentials": [
                        {
                            "id": "app",
                            "tokenRef": "env:SEIF_APP_TOKEN",
                            "scopes": ["context.resolve", "tools.execute"],
                        }
                    ]
                }
            )
        )
        env = {
            "CONTEXT_TOOL_OPEN_TICKET_TOKEN": token,
            "CONTEXT_TOOL_INSPECT_CONTEXT_TOKEN": INSPECT_TOKEN,
            "SEIF_APP_TOKEN": app,
            "SEIF_CONTEXT_TOOL_APPROVAL_TOKEN": "approval-secret-walkthrough",
            "PYTHONPATH": str(ROOT),
        }
        runtime = spawn(
            [
                *seif_command(),
                "serve",
                "--build",
                build,
                "--bindings",
                "bindings.staging.json",
                "--credentials",
                "credentials.json",
                "--data",
                "data",
                "--port",
                "0",
            ],
            tmp_path,
            env,
        )
        base = listening(runtime)
        status, ready = request(f"{base}/v1/ready")
        assert status == 200 and ready["ready"] is True
        assert ready["tools"] == {"inspect-context": "READY", "open-ticket": "READY"}
    finally:
        for proc in (runtime, executor, synthetic):
            if proc is not None:
                stop(proc)


def test_an_unedited_bindings_template_shows_placeholders(tmp_path: Path) -> None:
    """The released bindings template, unedited, names placeholders: shown as such."""
    author(tmp_path)
    shown = run(
        "tool",
        "show",
        "--project",
        "p.seif",
        "--tool",
        "open-ticket",
        "--bindings",
        "bindings.staging.json",
        cwd=tmp_path,
    ).stdout
    assert "  placeholder: https://executor.example/open-ticket" in shown
