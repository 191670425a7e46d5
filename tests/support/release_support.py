"""Shared helpers of the release tests: variants of the reference project, builds, the CLI."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compiler import compile_project, write_build
from compiler.builds.build import Build
from policy.ir import Project
from policy.json.strict import loads
from seif.cli import main
from tests.support.paths import REFERENCE

Doc = dict[str, Any]


def reference_doc() -> Doc:
    doc: Doc = loads(REFERENCE.read_text())
    return doc


def variant(change: Callable[[Doc], object] | None = None) -> Doc:
    """A deep copy of the reference declaration, changed in place by ``change``."""
    doc = copy.deepcopy(reference_doc())
    if change is not None:
        change(doc)
    return doc


def project(doc: Doc) -> Project:
    return compile_project(doc)


def build_dir(doc: Doc, path: Path) -> Build:
    """Write the build of ``doc`` into ``path`` (its tests are not run here)."""
    return write_build(project(doc), path)


def find_test(doc: Doc, test_id: str) -> Doc:
    found: Doc = next(t for t in doc["tests"] if t["id"] == test_id)
    return found


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code, out, _ = run(capsys, *argv, "--json")
    return code, loads(out)
