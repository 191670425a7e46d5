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


def refused(command: str, code: str, message: str, *, as_json: bool) -> int:
    """Report a refused input (``command: message`` on stderr; with ``as_json``, the document
    ``{"ok": false, "error": {code, message}}`` on stdout too) and return :data:`EXIT_USAGE`."""
    warn(f"{command}: {message}")
    if as_json:
        emit_json({"ok": False, "error": {"code": code, "message": message}})
    return EXIT_USAGE
