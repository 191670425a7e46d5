"""The examples of the guides (README.md and docs/*.md), found and run as a user would run them.

Every shell or Python block of a guide (a fence of ``sh``, ``bash``, ``shell`` or ``python``) is
marked by an HTML comment on the line right above its fence (invisible on a rendered page):

- ``<!-- example: NAME -->``: a step of the page's example ``NAME``. The steps of one example
  run in page order, in one ``bash`` (``set -e -o pipefail``), in a fresh directory that links
  the repository's ``.venv``, ``reference`` and ``examples``, and ``tests/node``'s
  ``node_modules`` (so that ``npx`` runs the pinned MCP reference servers without the network,
  as it runs a project's own packages), with the project's ``.venv/bin``
  first on ``PATH`` and ``TMPDIR`` in that directory; a Python step runs with that ``python``
  (its standard input is the block). The page's loopback ports (8787 the runtime, 8788 the
  approval server, 8790 the executor, 8801 a starter executor) are replaced by free ones, so
  that runs never collide; everything else runs as written.
- ``<!-- not run: REASON -->``: a synopsis, a fragment or a block that needs what a test run
  does not have (a PostgreSQL server, the whole suite); ``REASON`` says which.

A block without either mark fails :func:`unmarked`, so a new example is run, or says why not.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.node_support import MODULES
from tests.support.paths import ROOT

GUIDES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
CODE = frozenset({"sh", "bash", "shell", "python"})
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", flags=re.M | re.S)
MARK = re.compile(r"<!-- (?:example: (?P<name>[a-z0-9-]+)|not run: (?P<reason>[^\n]+?)) -->")
PORTS = ("8787", "8788", "8790", "8801")
PY_END = "SEIF_EXAMPLE_PY"


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced block of a guide: where it starts, its language and text, and its mark (the
    example it is a step of, or why it is not run; both None: unmarked)."""

    guide: Path
    line: int
    lang: str
    text: str
    example: str | None
    reason: str | None

    @property
    def where(self) -> str:
        return f"{self.guide.relative_to(ROOT)}:{self.line}"


def blocks(guide: Path) -> list[Block]:
    """Every fenced block of ``guide``, in page order."""
    text = guide.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        above = text[: match.start()].rstrip("\n").rpartition("\n")[2]
        mark = MARK.fullmatch(above.strip())
        found.append(
            Block(
                guide,
                line,
                match.group(1),
                match.group(2),
                mark.group("name") if mark else None,
                mark.group("reason") if mark else None,
            )
        )
    return found


def code_blocks() -> list[Block]:
    """The shell and Python blocks of every guide."""
    return [b for guide in GUIDES for b in blocks(guide) if b.lang in CODE]


def unmarked() -> list[str]:
    """Where a shell or Python block of a guide has no mark."""
    return [b.where for b in code_blocks() if b.example is None and b.reason is None]


def examples() -> dict[tuple[str, str], list[Block]]:
    """(guide, example name) -> its steps, in page order."""
    found: dict[tuple[str, str], list[Block]] = {}
    for block in code_blocks():
        if block.example is not None:
            key = (str(block.guide.relative_to(ROOT)), block.example)
            found.setdefault(key, []).append(block)
    return found


def script(steps: list[Block], ports: dict[str, str]) -> str:
    """One bash script of the steps (a Python step fed to ``python``), the page's ports
    replaced by ``ports``."""
    parts = ["set -e -o pipefail\n"]
    for step in steps:
        body = (
            step.text if step.lang != "python" else f"python - <<'{PY_END}'\n{step.text}{PY_END}\n"
        )
        parts.append(f"# --- {step.where}\n{body}")
    text = "".join(parts)
    return re.sub(r"\b(" + "|".join(PORTS) + r")\b", lambda m: ports[m.group(1)], text)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def stop_group(proc: subprocess.Popen[str]) -> None:
    """End the bash and everything it started in the background (its process group)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            proc.poll()  # reaps the bash itself
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)


def run_example(steps: list[Block], where: Path, timeout: float = 180) -> tuple[int, str, str]:
    """Run an example's steps in ``where``: (exit code, stdout, stderr); 124 on a timeout."""
    links = {".venv": Path(sys.prefix), "node_modules": MODULES}
    for name in (".venv", "reference", "examples", "node_modules"):
        (where / name).symlink_to(links.get(name, ROOT / name), target_is_directory=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SEIF_", "CONTEXT_TOOL_")) and "proxy" not in k.lower()
    }
    env["PATH"] = f"{Path(sys.prefix) / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["TMPDIR"] = str(where)  # what an example makes with mktemp goes with its directory
    ports = {port: str(free_port()) for port in PORTS}
    out_file, err_file = where / ".example.out", where / ".example.err"
    with out_file.open("w") as out, err_file.open("w") as err:
        proc = subprocess.Popen(
            ["bash", "-c", script(steps, ports)],
            cwd=where,
            env=env,
            stdout=out,  # files, not pipes: a server left in the background holds no reader
            stderr=err,
            text=True,
            start_new_session=True,  # its own process group, background servers included
        )
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = 124
        finally:
            stop_group(proc)
    return code, out_file.read_text(), err_file.read_text()
