"""Shared fixtures: the reference project's IR; the run's summary lines."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hypothesis import settings

from tests.support.paths import REFERENCE

# `pg_url`: a fresh database on a real PostgreSQL server
pytest_plugins = ["tests.support.pg_support"]

settings.register_profile("ci", deadline=None, print_blob=True)
settings.load_profile("ci")


@pytest.fixture(scope="session")
def reference_ir():  # type: ignore[no-untyped-def]  # pytest fixture
    from compiler import compile_project

    return compile_project(REFERENCE)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Figures some tests report (the CEL conformance pass rate), after the run."""
    found = sys.modules.get("tests.policy.cel.test_cel_conformance")
    for line in getattr(found, "SUMMARY", []):
        terminalreporter.write_line(line)
