"""Shared fixtures: the repository root and the reference project; the run's summary lines."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

pytest_plugins = ["pg_support"]  # `pg_url`: a fresh database on a real PostgreSQL server

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "reference" / "agent-tools" / "context-project.json"

settings.register_profile("ci", deadline=None, print_blob=True)
settings.load_profile("ci")


@pytest.fixture(scope="session")
def reference_ir():  # type: ignore[no-untyped-def]  # pytest fixture
    from compiler import compile_project

    return compile_project(REFERENCE)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Figures some tests report (the CEL conformance pass rate), after the run."""
    found = sys.modules.get("test_cel_conformance")
    for line in getattr(found, "SUMMARY", []):
        terminalreporter.write_line(line)
