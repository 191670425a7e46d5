"""Shared fixtures: the repository root and the reference project."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "reference" / "agent-tools" / "context-project.json"

settings.register_profile("ci", deadline=None, print_blob=True)
settings.load_profile("ci")


@pytest.fixture(scope="session")
def reference_ir():  # type: ignore[no-untyped-def]  # pytest fixture
    from compiler import compile_project

    return compile_project(REFERENCE)
