"""The `seif` command as a user runs it: a subprocess in a working directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def seif(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m seif.cli ARGS`` in ``cwd``, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "seif.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
