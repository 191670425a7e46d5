"""The repository's root and the reference project, for tests at any depth."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "reference" / "agent-tools" / "context-project.json"
