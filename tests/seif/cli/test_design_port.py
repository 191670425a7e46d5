"""`seif design`'s default port is cli.md's 8789, and nothing the docs start listens there: the
synthetic executor of the docs and examples, the runtime and the approval server each have
their own port, so following a guide never finds the Design page's port taken."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from seif.cli import build_parser

ROOT = Path(__file__).resolve().parents[3]
DESIGN_PORT = 8789


def test_design_listens_on_8789_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["design", "--project", "p.json"])
    assert args.port == DESIGN_PORT
    with pytest.raises(SystemExit):
        build_parser().parse_args(["design", "--help"])
    shown = capsys.readouterr().out
    assert "(default: 8789)" in shown and "http://127.0.0.1:8789/" in shown


def _texts() -> list[tuple[Path, str]]:
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    paths += sorted((ROOT / "examples").rglob("*.py"))
    return [(p, p.read_text(encoding="utf-8")) for p in paths]


def test_no_executor_or_server_of_the_docs_listens_on_the_design_port() -> None:
    listening = re.compile(
        r"(?:--port[ =\"']+|127\.0\.0\.1:|localhost:|default=)\$?\{?\w*:?-?(\d{4,5})"
    )
    found = []
    for path, text in _texts():
        for line_no, line in enumerate(text.splitlines(), 1):
            if "seif design" in line:
                continue  # the Design workstation itself
            found += [
                (path.name, line_no) for port in listening.findall(line) if int(port) == DESIGN_PORT
            ]
    assert found == []
    executor = (ROOT / "examples" / "reference-tools" / "executor.py").read_text(encoding="utf-8")
    default = re.search(r"default=(\d+)", executor.split('"--port"', 1)[1])
    assert default is not None and int(default.group(1)) != DESIGN_PORT
