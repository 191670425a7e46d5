"""Explanations: which declaration decided, and where it stands in the source.

The value lives here, below the IR that carries the ones it precomputes; the helpers that find
the deciding declaration in a compiled project are ``policy.engine.explanations``.

Pointers are structural (``/profiles/1/toolRules/0``): they are the same for a project compiled
from JSON and for one loaded from a build, whatever the key order or whitespace of the source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Explanation:
    """The deciding declaration: a profile rule, a condition, a tool or a profile as a whole."""

    pointer: str
    profile: str | None = None
    rule: int | None = None
    condition: int | None = None
    tool: str | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pointer": self.pointer}
        for name in ("profile", "rule", "condition", "tool"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.detail:
            out["detail"] = self.detail
        return out
