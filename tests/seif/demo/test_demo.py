"""`make demo` (`python -m seif.demo`) runs and reads as a newcomer needs it: what a profile, a
disclosure and an approval are, each decision with its reason in parentheses (no trailing
blank, no `DUPLICATE DUPLICATE_CALL`), the runtime's receipts, and what to try next."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT


def test_the_demo_explains_itself_and_ends_with_what_next(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "seif.demo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert any(line.startswith("A profile says which context messages") for line in lines)
    assert "  propose-change -> DENY (TOOL_NOT_DISCLOSED)" in lines
    assert "  propose-change (the same call again) -> DUPLICATE (DUPLICATE_CALL)" in lines
    assert not [line for line in lines if line != line.rstrip()]
    assert lines[-3].startswith("Next: `make run` proves a whole delivery")
