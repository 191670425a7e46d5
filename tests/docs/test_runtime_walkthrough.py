"""docs/runtime-walkthrough.md's "Walkthrough with curl" stays true: the steps of its example
`walkthrough` (its ``sh`` blocks marked ``<!-- example: walkthrough -->``, found as every
guide's examples are: tests/support/guide_examples.py) run in order in one bash, in a temporary
directory (the executor and ``seif serve`` started in the background as the page says, on free
ports), and each answer is the JSON the page shows under its command.

A string of the page with ``…`` in it stands for any string with the same text around the
``…``; an instant (``at``, ``expiresAt``...) for any of its type. Everything else is compared
exactly, so a drift of the page or of the runtime fails here."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.guide_examples import blocks, free_port, stop_group
from tests.support.paths import ROOT

DOC = ROOT / "docs" / "runtime-walkthrough.md"
MARK = "@@walkthrough step@@"
INSTANTS = frozenset({"at", "resolvedAt", "expiresAt", "requestedAt", "contextExpiresAt"})
RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def steps() -> list[tuple[str, Any]]:
    """(commands, the answer shown or None) for each step of the page's example `walkthrough`
    (:mod:`tests.support.guide_examples`), in order: a ``json`` block right after a step is
    its answer."""
    found: list[tuple[str, Any]] = []
    previous = None
    for block in blocks(DOC):
        if block.example == "walkthrough":
            found.append((block.text, None))
        elif block.lang == "json" and previous is not None and previous.example == "walkthrough":
            found[-1] = (found[-1][0], json.loads(block.text))
        previous = block
    return found


def mismatches(want: Any, got: Any, path: str = "") -> list[str]:
    """Where ``got`` differs from ``want`` (the page's), as JSON paths."""
    if isinstance(want, str) and "…" in want:
        head, _, tail = want.partition("…")
        ok = isinstance(got, str) and len(got) > len(head) + len(tail)
        if ok and got.startswith(head) and got.endswith(tail):
            return []
    elif path.rpartition("/")[2] in INSTANTS and type(got) is type(want):
        if not isinstance(got, str) or RFC3339.fullmatch(got):
            return []
    elif isinstance(want, dict) and isinstance(got, dict):
        if want.keys() != got.keys():
            return [f"{path or '/'}: keys {sorted(got)}, the page says {sorted(want)}"]
        return [m for key in want for m in mismatches(want[key], got[key], f"{path}/{key}")]
    elif isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        pairs = enumerate(zip(want, got, strict=True))
        return [m for i, (w, g) in pairs for m in mismatches(w, g, f"{path}/{i}")]
    elif type(want) is type(got) and want == got:
        return []
    return [f"{path or '/'}: {json.dumps(got)[:200]}, the page says {json.dumps(want)[:200]}"]


def run(found: list[tuple[str, Any]], where: Path) -> list[str]:
    """Every step's standard output, the steps run in order in one bash in ``where``."""
    links = {".venv": Path(sys.prefix), "reference": ROOT / "reference"}
    for name, target in {**links, "examples": ROOT / "examples"}.items():
        (where / name).symlink_to(target, target_is_directory=True)  # the page's paths
    script = "set -e -o pipefail\n" + "".join(f"echo; echo {MARK}\n{cmd}" for cmd, _ in found)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SEIF_", "CONTEXT_TOOL_")) and "proxy" not in k.lower()
    }
    env.update(SEIF_PORT=str(free_port()), EXECUTOR_PORT=str(free_port()))
    proc = subprocess.Popen(
        ["bash", "-c", script],
        cwd=where,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, background servers included
    )
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        stop_group(proc)
        out, err = proc.communicate()
        pytest.fail(f"the walkthrough did not finish in 60 s\n{out[-3000:]}\n{err[-3000:]}")
    finally:
        stop_group(proc)
    logs = "".join(f"\n{p.name}: {p.read_text()}" for p in (where / "out").glob("*.log"))
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out[-3000:]}\n{err[-3000:]}{logs}"
    outputs = out.split(f"\n{MARK}\n")[1:]
    assert len(outputs) == len(found), out
    return outputs


def test_the_walkthrough_runs_as_written(tmp_path: Path) -> None:
    if shutil.which("curl") is None:
        pytest.skip("the walkthrough needs curl")
    assert (Path(sys.prefix) / "bin" / "seif").exists(), "run from the project's venv"
    found = steps()
    assert sum(answer is not None for _, answer in found) >= 12, "the page's answers"
    problems = []
    for n, ((cmd, want), out) in enumerate(zip(found, run(found, tmp_path), strict=True)):
        if want is None:
            continue
        step = f"step {n}: " + next((ln for ln in cmd.splitlines() if "curl" in ln), cmd)
        try:
            got = json.loads(out)
        except ValueError:
            problems.append(f"{step}\n  not one JSON document: {out[:500]!r}")
            continue
        problems += [f"{step}\n  {m}" for m in mismatches(want, got)]
    assert not problems, "\n".join(problems)
