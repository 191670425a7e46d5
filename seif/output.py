"""Rendering for the CLI: one place for text and JSON output and exit codes."""

from __future__ import annotations

import sys
from typing import Any

from policy.strictjson import dumps

EXIT_OK = 0
EXIT_NOT_ACCEPTABLE = 1
EXIT_USAGE = 2
EXIT_LOCKED = 3


def emit_json(document: Any) -> None:
    """Exactly one JSON document on stdout."""
    sys.stdout.write(dumps(document, indent=2) + "\n")


def say(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def warn(text: str) -> None:
    sys.stderr.write(text + "\n")
