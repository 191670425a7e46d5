"""The binding template and the Runtime bundle.

The bundle test builds the reference project, makes its bundle (``pip wheel`` of this project
and of every runtime dependency: it needs pip's cache or a package index, and is skipped with
the reason when neither answers), copies it into a directory outside the repository and starts
its ``run`` script there with an environment that cannot see the repository or a package index:
a clean ``PATH``, ``HOME`` and ``cwd`` in that directory, ``PIP_NO_INDEX=1`` and an unreachable
``PIP_INDEX_URL``. The runtime must install offline, answer ``/v1/health`` and ``/v1/ready``,
and serve the reference flow against the synthetic executor (started from the repository).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

import pytest

from compiler.authoring.bindings import bindings_template, contracts_document, secret_env
from compiler.builds.build import BUILD_FILE, MANIFEST_FILE, Build, load_build
from policy.json.strict import loads
from seif.bundle.assemble import CONTENTS
from servers.config.files import load_bindings
from tests.support.paths import ROOT
from tests.support.release_support import build_dir, reference_doc, run

Cap = pytest.CaptureFixture[str]
EXECUTOR = ROOT / "examples" / "reference-tools" / "executor.py"
SECRETS = {
    "SEIF_APP_TOKEN": "app-token-7c1d0e55b1f94c4a",
    "SEIF_CONTEXT_TOOL_APPROVAL_TOKEN": "approval-token-2f9a64c0d3e8",
    **{
        secret_env(t): f"{t}-token-5e3b91a0c4"
        for t in ("inspect-context", "search-knowledge", "propose-change")
    },
}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Build]:
    path = tmp_path_factory.mktemp("reference") / "build"
    return path, build_dir(reference_doc(), path)


# The binding template.
def test_the_template_is_a_bindings_file_that_loads(
    reference: tuple[Path, Build], tmp_path: Path
) -> None:
    build = reference[1]
    path = tmp_path / "bindings.json"
    path.write_text(json.dumps(bindings_template(build.project)))
    env = {secret_env(t.id): f"secret-of-{t.id}" for t in build.project.tools}
    bindings = load_bindings(path, build.project, env, keyring_get=lambda _s, _n: None)
    assert sorted(bindings.tools) == sorted(t.id for t in build.project.tools)
    for tool in build.project.tools:
        bound = bindings.tools[tool.id]
        assert bound.endpoint == f"https://executor.example/{tool.id}"
        assert bound.timeout_ms == tool.timeout_ms and bound.secret == f"secret-of-{tool.id}"
    assert secret_env("inspect-context") == "CONTEXT_TOOL_INSPECT_CONTEXT_TOKEN"


def test_the_template_of_a_tool_free_build_has_no_entry(tmp_path: Path) -> None:
    doc = loads((ROOT / "corpus" / "builds" / "tool-free" / "project.json").read_text())
    build = build_dir(doc, tmp_path / "build")
    assert bindings_template(build.project)["tools"] == {}
    assert contracts_document(build)["tools"] == []


def test_bindings_template_cli(reference: tuple[Path, Build], tmp_path: Path, capsys: Cap) -> None:
    path, build = reference
    code, out, err = run(capsys, "bindings", "template", "--build", str(path))
    assert code == 0 and loads(out) == bindings_template(build.project)
    assert err.splitlines()[0] == (
        f"describe of inspect-context must answer 1.0.0 {build.project.tools[0].contract_digest}"
    )
    target = tmp_path / "handoff" / "bindings.template.json"
    code, out, _ = run(capsys, "bindings", "template", "--build", str(path), "--out", str(target))
    assert code == 0 and loads(target.read_text()) == bindings_template(build.project)
    contracts = loads((target.parent / "contracts.json").read_text())
    assert contracts["build"] == build.digest
    manifest = loads((path / MANIFEST_FILE).read_text())
    assert [t["describe"]["tool"] for t in contracts["tools"]] == manifest["tools"]
    assert {t["describe"]["contract"] for t in contracts["tools"]} == {"context-tool-executor.v1"}


def test_bindings_template_refuses_a_tampered_build(
    reference: tuple[Path, Build], tmp_path: Path, capsys: Cap
) -> None:
    shutil.copytree(reference[0], tmp_path / "build")
    (tmp_path / "build" / BUILD_FILE).write_bytes(
        b"\x00" + (reference[0] / BUILD_FILE).read_bytes()
    )
    code, out, err = run(capsys, "bindings", "template", "--build", str(tmp_path / "build"))
    assert code == 1 and out == "" and "BUILD_DIGEST_MISMATCH" in err


# Refusals of `seif bundle` (no network needed: they come first).
def test_bundle_refuses_a_build_that_does_not_verify(
    reference: tuple[Path, Build], tmp_path: Path, capsys: Cap
) -> None:
    shutil.copytree(reference[0], tmp_path / "build")
    manifest = loads((tmp_path / "build" / MANIFEST_FILE).read_text())
    manifest["project"]["version"] = "9.9.9"
    (tmp_path / "build" / MANIFEST_FILE).write_text(json.dumps(manifest))
    code, _, err = run(
        capsys, "bundle", "--build", str(tmp_path / "build"), "--out", str(tmp_path / "b")
    )
    assert code == 1 and "BUILD_MANIFEST_MISMATCH" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build"]


def test_bundle_refuses_an_existing_out(
    reference: tuple[Path, Build], tmp_path: Path, capsys: Cap
) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep").write_text("mine")
    code, _, err = run(
        capsys, "bundle", "--build", str(reference[0]), "--out", str(tmp_path / "out")
    )
    assert code == 2 and "BUNDLE_OUT_EXISTS" in err
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["keep"]


def test_bundle_refuses_a_missing_source(
    reference: tuple[Path, Build], tmp_path: Path, capsys: Cap
) -> None:
    argv = (
        "bundle",
        "--build",
        str(reference[0]),
        "--out",
        str(tmp_path / "b"),
        "--source",
        str(tmp_path),
    )
    code, _, err = run(capsys, *argv)
    assert code == 2 and "SOURCE_NOT_FOUND" in err and not (tmp_path / "b").exists()


# The bundle itself.
def _pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def bundle(reference: tuple[Path, Build], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`seif bundle` of the reference build, made with credentials in the environment."""
    out = tmp_path_factory.mktemp("delivery") / "bundle"
    env = {**os.environ, **SECRETS}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "seif.cli",
            "bundle",
            "--build",
            str(reference[0]),
            "--out",
            str(out),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0 and "WHEELS_FAILED" in done.stderr and not _pypi_reachable():
        pytest.skip(
            f"pip could not get the wheels and pypi.org is unreachable: {done.stderr[-300:]}"
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"bundle of {reference[1].digest} in {out.resolve()}"
    return out


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_the_bundle_holds_the_build_wheels_and_nothing_secret(
    bundle: Path, reference: tuple[Path, Build]
) -> None:
    assert {p.name for p in bundle.iterdir()} == CONTENTS
    assert load_build(bundle / "build").digest == reference[1].digest
    assert sorted(p.name for p in (bundle / "build").iterdir()) == [BUILD_FILE, MANIFEST_FILE]
    assert os.access(bundle / "run", os.X_OK)
    manifest = loads((bundle / "bundle.json").read_text())
    assert manifest["build"] == reference[1].digest
    names = {w["name"].lower().replace("_", "-") for w in manifest["wheels"]}
    assert {"seif", "lark", "cel-python", "aiohttp", "cbor2", "blake3", "keyring", "mcp"} <= names
    # (jsonschema is the mcp SDK's dependency, so the runtime's too)
    assert not names & {"pytest", "hypothesis", "mypy", "ruff", "cedarpy", "schemathesis"}
    requirements = (bundle / "wheels" / "requirements.txt").read_text().splitlines()
    assert (
        len(requirements) == len(manifest["wheels"]) == len(list((bundle / "wheels").glob("*.whl")))
    )
    assert all(" --hash=sha256:" in line for line in requirements)
    contents = [p.read_bytes() for p in _files(bundle)]
    seif_wheel = next((bundle / "wheels").glob("seif-*.whl"))
    with zipfile.ZipFile(seif_wheel) as wheel:
        contents += [wheel.read(name) for name in wheel.namelist()]
        assert not [n for n in wheel.namelist() if n.startswith(("tests/", "reference/", "out/"))]
    for value in SECRETS.values():
        assert not [c for c in contents if value.encode() in c]
    assert reference[1].digest in (bundle / "README.md").read_text()


def _base_python() -> str:
    """The interpreter this venv was made from: it has no seif and does not see the repo."""
    base = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    assert not base.is_relative_to(ROOT), base
    return str(base)


def _read_line(proc: subprocess.Popen[str], prefix: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([proc.stdout], [], [], left)[0]:
            break
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith(prefix):
            return line[len(prefix) :].strip()
    raise AssertionError(f"no `{prefix}` line (exit code {proc.poll()})")


def _stop(proc: subprocess.Popen[str]) -> int | None:
    if proc.poll() is None:
        proc.terminate()
        try:
            return proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
            return None
    return proc.returncode


def _http(url: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="GET" if body is None else "POST")
    request.add_header("content-type", "application/json")
    if token:
        request.add_header("authorization", f"Bearer {token}")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=30) as answer:
            return answer.status, loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, loads(exc.read() or b"null")


def _configure(bundle: Path, work: Path, executor: str) -> None:
    template = loads((bundle / "bindings.template.json").read_text())
    template["environment"] = "acceptance"
    for tool, entry in template["tools"].items():
        entry["endpoint"] = f"{executor}/{tool}"  # loopback http: the synthetic executor
    (work / "bindings.json").write_text(json.dumps(template))
    credentials = {
        "credentials": [
            {
                "id": "tutor-app",
                "tokenRef": "env:SEIF_APP_TOKEN",
                "scopes": ["context.resolve", "tools.execute"],
            }
        ]
    }
    (work / "credentials.json").write_text(json.dumps(credentials))


def _start_executor(work: Path) -> tuple[subprocess.Popen[str], str]:
    tokens = [
        f"{t}={secret_env(t)}" for t in ("inspect-context", "search-knowledge", "propose-change")
    ]
    proc = subprocess.Popen(
        [sys.executable, str(EXECUTOR), "--port", "0", "--token-env", *tokens],
        env={**os.environ, **SECRETS},
        stdout=subprocess.PIPE,
        stderr=(work / "executor.err").open("w"),
        stdin=subprocess.DEVNULL,
        text=True,
    )
    return proc, _read_line(proc, "reference executor listening on ", 30)


def _customer_env(home: Path) -> dict[str, str]:
    """No repository, no package index: only the system tools, the bundle and the secrets."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "SEIF_PYTHON": _base_python(),
        "PIP_NO_INDEX": "1",
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
        **SECRETS,
    }


def test_the_bundle_runs_outside_the_repository_without_an_index(
    bundle: Path, reference: tuple[Path, Build], tmp_path: Path
) -> None:
    work = tmp_path / "customer"
    shutil.copytree(bundle, work / "bundle", symlinks=True)
    assert not work.is_relative_to(ROOT)
    (work / "home").mkdir()
    executor, executor_url = _start_executor(tmp_path)
    runtime = None
    try:
        _configure(work / "bundle", work, executor_url)
        runtime = subprocess.Popen(
            [
                "bundle/run",
                "--bindings",
                "bindings.json",
                "--credentials",
                "credentials.json",
                "--data",
                "data",
                "--port",
                "0",
            ],
            cwd=work,
            env=_customer_env(work / "home"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=(tmp_path / "runtime.err").open("w"),
            text=True,
        )
        url = _read_line(runtime, "seif runtime listening on ", 180)
        _serve_the_reference_flow(url)
    finally:
        code = _stop(runtime) if runtime is not None else None
        _stop(executor)
    assert code == 0, (tmp_path / "runtime.err").read_text()
    seif_file = subprocess.run(
        [
            str(work / "bundle" / ".venv" / "bin" / "python"),
            "-I",
            "-c",
            "import seif; print(seif.__file__)",
        ],
        cwd=work,
        env=_customer_env(work / "home"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(seif_file).is_relative_to(work / "bundle" / ".venv")
    assert (work / "data").is_dir() and not (work / "bundle" / "data").exists()
    assert "installing the bundled wheels" in (tmp_path / "runtime.err").read_text()


def _serve_the_reference_flow(url: str) -> None:
    token = SECRETS["SEIF_APP_TOKEN"]
    assert _http(f"{url}/v1/health")[0] == 200
    status, ready = _http(f"{url}/v1/ready")
    assert status == 200, ready
    status, resolved = _http(
        f"{url}/v1/context/resolve", {"objective": "learner", "consumer": "tutor-app"}, token
    )
    assert status == 200, resolved
    names = [t["name"] for t in resolved["tools"]]
    assert names == ["inspect_context", "search_knowledge"]  # never propose_change
    call = {
        "contextRef": resolved["contextRef"],
        "tool": "inspect-context",
        "callId": "bundle-read-1",
        "arguments": {"ref": "course/data-literacy/module-2/lesson-3"},
    }
    status, receipt = _http(f"{url}/v1/context/tools/execute", call, token)
    assert status == 200 and receipt["status"] == "SUCCEEDED", receipt
    assert receipt["output"]["ref"] == "course/data-literacy/module-2/lesson-3"
    denied = {
        **call,
        "tool": "propose-change",
        "callId": "bundle-propose-1",
        "arguments": {
            "target": "course/data-literacy/module-2/lesson-3",
            "kind": "correct",
            "summary": "x",
        },
    }
    status, receipt = _http(f"{url}/v1/context/tools/execute", denied, token)
    assert status == 200 and receipt["status"] == "DENIED", receipt
    assert receipt["reason"] == "TOOL_NOT_DISCLOSED"
