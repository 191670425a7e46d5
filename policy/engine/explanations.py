"""The explanation of a decision, found in the compiled project: a profile's rule, one of its
conditions, a tool (:class:`~policy.explain.Explanation` is the value)."""

from __future__ import annotations

from policy.explain import Explanation
from policy.ir import Project


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
