"""The Design workstation in tests: a copy of the reference project, the change the CLI makes
(:func:`cli_edit`), and ``seif design`` as a process (:func:`design_process`), stopped with
SIGTERM (and exit 0) at the end."""

from __future__ import annotations

import contextlib
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from compiler.authoring.source import Edit, ProjectSource, load_source, save
from tests.support.runtime_harness import ROOT, seif_command

REFERENCE = ROOT / "reference" / "agent-tools"
_CAPPED = (
    "import os, resource, sys; most = int(sys.argv[1]);"
    " resource.setrlimit(resource.RLIMIT_AS, (most, most)); os.execv(sys.argv[2], sys.argv[2:])"
)
"""A command's address space capped (``RLIMIT_AS``), then the command itself (``exec``)."""
LISTENING = re.compile(r"seif design listening on (http://127\.0\.0\.1:\d+)/#token=([\w-]{40,})\n")


def project_copy(tmp_path: Path, kind: str, name: str = "project") -> Path:
    target = tmp_path / f"{name}.{kind}"
    shutil.copyfile(REFERENCE / f"context-project.{kind}", target)
    return target


def cli_edit(path: Path, operation: Callable[[ProjectSource], Edit]) -> None:
    """What the CLI does for one change: read the file, compute the edit, save it."""
    edit = operation(load_source(path))
    assert edit.ok, edit.diagnostics
    save(edit)


@dataclass
class Running:
    url: str  # as printed, with the token in its fragment
    base: str
    token: str
    process: subprocess.Popen[str]


@contextlib.contextmanager
def design_process(
    project: Path, *options: str, cwd: Path | None = None, memory_cap: int | None = None
) -> Iterator[Running]:
    """``seif design --project PROJECT --port 0 OPTIONS...``, once it printed its URL;
    ``memory_cap``: the process's address space at most (bytes, ``RLIMIT_AS``)."""
    command = [*seif_command(), "design", "--project", str(project), "--port", "0"]
    if memory_cap is not None:
        command = [sys.executable, "-c", _CAPPED, str(memory_cap), *command]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [*command, *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
        cwd=cwd,
    )
    try:
        line = _first_line(process, time.monotonic() + 30)
        found = LISTENING.fullmatch(line)
        assert found, f"{line!r} {_stderr(process)}"
        base, token = found.groups()
        yield Running(f"{base}/#token={token}", base, token, process)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=20)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
    assert code == 0, code


def _stderr(process: subprocess.Popen[str]) -> str:
    if process.poll() is None or process.stderr is None:
        return ""
    return process.stderr.read()


def _first_line(process: subprocess.Popen[str], deadline: float) -> str:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))
    return process.stdout.readline() if ready else ""
