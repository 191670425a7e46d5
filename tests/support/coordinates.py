"""The project the coordinate tests share: the project-test corpus's reference project with
rules on each coordinate (``corpus/project-tests/reference-coordinates.json``), written as JSON
or as `.seif`, and calls of it; and `seif` run as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from compiler.seif.printer import to_seif
from tests.support.paths import ROOT

CASE = ROOT / "corpus" / "project-tests" / "reference-coordinates.json"
PROPOSAL = {
    "target": "course/data-literacy/module-2/lesson-3",
    "kind": "correct",
    "summary": "State that extreme values can shift the median in very small samples.",
}
READ = {"ref": "course/data-literacy/module-2/lesson-3"}


def coordinates_doc() -> dict[str, Any]:
    """A fresh copy of the project document (its last two tests fail on purpose)."""
    found: dict[str, Any] = json.loads(CASE.read_text(encoding="utf-8"))["project"]
    return found


def write_project(directory: Path, doc: dict[str, Any], suffix: str) -> Path:
    """``doc`` written as ``project.json`` or ``project.seif`` in ``directory``."""
    target = directory / f"project{suffix}"
    target.write_text(json.dumps(doc, indent=2) if suffix == ".json" else to_seif(doc))
    return target


def seif(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m seif ARGS``, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "seif", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
