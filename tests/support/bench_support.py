"""Running one benchmark as `python -m bench NAME --quick --json`, for the smoke tests."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from policy.json.strict import loads
from tests.support.paths import ROOT as REPO


def run_bench(name: str, timeout: float = 300) -> dict[str, Any]:
    """The quick run's report of benchmark ``name``; fails the test on a non-zero exit."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "bench", name, "--quick", "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = loads(done.stdout)
    assert report["quick"] is True
    result: dict[str, Any] = report["benchmarks"][name]
    return result
