"""The `seif` command as a user runs it: a subprocess in a working directory."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def seif(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m seif.cli ARGS`` in ``cwd`` (``env`` added to the environment), its output
    captured."""
    return subprocess.run(
        [sys.executable, "-m", "seif.cli", *args],
        cwd=cwd,
        env=None if env is None else {**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
