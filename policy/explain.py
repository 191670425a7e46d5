"""Explanations: which declaration decided, and where it stands in the source.

Pointers are structural (``/profiles/1/toolRules/0``): they are the same for a project compiled
from JSON and for one loaded from a build, whatever the key order or whitespace of the source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from policy.ir import Project


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


def profile_pointer(ir: Project, profile_id: str) -> str:
    return f"/profiles/{ir.profile_position[profile_id]}"


def rule_explanation(ir: Project, profile_id: str, tool_id: str, detail: str = "") -> Explanation:
    """The profile's rule for ``tool_id``, or the profile's rule list when it has none."""
    if not detail:
        found: Explanation | None = ir.rule_explanations.get(profile_id, {}).get(tool_id)
        if found is not None:
            return found
    profile = ir.profile_by_id[profile_id]
    base = profile_pointer(ir, profile_id)
    index = profile.rule_index.get(tool_id)
    if index is None:
        return Explanation(
            pointer=f"{base}/toolRules",
            profile=profile_id,
            tool=tool_id,
            detail=detail or "no rule of this profile includes the tool",
        )
    return Explanation(
        pointer=f"{base}/toolRules/{index}",
        profile=profile_id,
        rule=index,
        tool=tool_id,
        detail=detail,
    )


def condition_explanation(
    ir: Project, profile_id: str, tool_id: str, condition: int, detail: str = ""
) -> Explanation:
    rule = rule_explanation(ir, profile_id, tool_id)
    return Explanation(
        pointer=f"{rule.pointer}/conditions/{condition}",
        profile=profile_id,
        rule=rule.rule,
        condition=condition,
        tool=tool_id,
        detail=detail,
    )


def tool_explanation(ir: Project, tool_id: str, suffix: str = "", detail: str = "") -> Explanation:
    return Explanation(
        pointer=f"/tools/{ir.tool_position[tool_id]}{suffix}", tool=tool_id, detail=detail
    )
