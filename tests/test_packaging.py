"""What an application installs: the engine, the compiler and the SDK, with version ranges; the
server stack is the `server` extra; the test environment is pinned exactly by constraints.txt.
The offline commands run without the server stack, a server command says what to install, and
the docs' install line works from a wheel built from the repository."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

from seif.bundle.wheels import project_wheel
from seif.cli import SERVER_MODULES
from tests.support.paths import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]
REFERENCE = "reference/agent-tools/context-project.json"
SERVER_DISTRIBUTIONS = {
    "httptools", "uvloop", "keyring", "mcp", "psycopg", "psycopg-pool", "cryptography",
    "prometheus-client", "joserfc",
}  # fmt: skip
BLOCKED = f"""
import sys
BLOCK = {sorted(SERVER_MODULES)!r}
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCK:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Block())
"""


def _name(requirement: str) -> str:
    found = re.match(r"[A-Za-z0-9_.-]+", requirement)
    assert found is not None, requirement
    return found.group(0).lower().replace("_", "-")


def test_applications_get_ranges_and_the_server_stack_is_an_extra() -> None:
    extras = PROJECT["optional-dependencies"]
    applications = [*PROJECT["dependencies"], *extras["server"], *extras["langchain"]]
    applications += [*extras["openai-agents"], *extras["langgraph"]]
    assert all("==" not in r and re.search(r">=", r) and "<" in r for r in applications)
    assert {_name(r) for r in extras["server"]} == SERVER_DISTRIBUTIONS
    assert not {_name(r) for r in PROJECT["dependencies"]} & SERVER_DISTRIBUTIONS


def test_the_test_environment_is_pinned_exactly() -> None:
    pins = {
        _name(line): line.split("==")[1].strip()
        for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    }
    wanted = [*PROJECT["dependencies"], *PROJECT["optional-dependencies"]["server"]]
    wanted += PROJECT["optional-dependencies"]["dev"]
    for requirement in wanted:
        assert _name(requirement) in pins, requirement


def _blocked(*argv: str) -> subprocess.CompletedProcess[str]:
    """``seif ARGV`` in a process that cannot import any module of the server stack."""
    run = "from seif.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", BLOCKED + run, *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ("validate", "--project", REFERENCE),
        ("test", "--project", REFERENCE),
        ("tool", "show", "--project", REFERENCE, "--tool", "inspect-context"),
        ("eval", "--project", REFERENCE, "--objective", "learner", "--environment", "staging"),
        ("replay", "--help"),
        ("trace", "verify", "--help"),
        ("schema", "project"),
        ("fmt", "--check", REFERENCE.replace(".json", ".seif")),
        ("init", "--help"),
    ],
)
def test_the_engine_and_the_offline_commands_need_no_server_stack(argv: tuple[str, ...]) -> None:
    assert _blocked(*argv).returncode == 0


def test_the_sdk_imports_without_the_server_stack() -> None:
    code = BLOCKED + "from seif import RuntimeClient, SyncRuntimeClient\nimport seif.formats\n"
    code += "from policy import decide\nfrom compiler import compile_project\n"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_a_server_command_without_the_server_stack_says_what_to_install(tmp_path: Path) -> None:
    done = _blocked("serve", "--build", "b", "--bindings", "b", "--credentials", "c", "--data", "d")
    assert done.returncode == 2
    assert "SERVER_STACK_MISSING" in done.stderr and "pip install 'seif[server]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_install_line_works_from_a_wheel_built_from_the_repository(tmp_path: Path) -> None:
    """`pip install seif` from a wheel of this repository, into an empty virtual environment
    (dependencies from the package index, at the test environment's versions): the engine, the
    compiler, the SDK and `seif validate` work, and the server stack is not installed."""
    wheels = tmp_path / "wheels"
    project_wheel(ROOT, wheels)  # as `seif bundle` builds it: from a copy, the checkout untouched
    [wheel] = wheels.glob("seif-*.whl")
    env_dir = tmp_path / "app"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    constraints = str(ROOT / "constraints.txt")
    installed = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "-c", constraints, str(wheel)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    seif = str(env_dir / "bin" / "seif")
    clean = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    validated = subprocess.run(
        [seif, "validate", "--project", str(ROOT / REFERENCE)],
        capture_output=True, text=True, timeout=120, check=False, env=clean, cwd=tmp_path,
    )  # fmt: skip
    assert validated.returncode == 0, validated.stderr
    probe = (
        "import importlib.util\nfrom seif import RuntimeClient\nfrom policy import decide\n"
        "print(importlib.util.find_spec('httptools') is None)"
    )
    imported = subprocess.run(
        [python, "-c", probe], capture_output=True, text=True, check=False, env=clean, cwd=tmp_path
    )
    assert imported.returncode == 0 and imported.stdout.strip() == "True", imported.stderr
