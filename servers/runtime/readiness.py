"""Readiness (``GET /v1/ready``): each bound tool's state, and each tool an objective requires.

A tool rule that includes a tool with ``required: true`` blocks every resolution of its
profile's objectives while the tool is not available (``RESOLUTION_BLOCKED``, the engine's
disclosure); a runtime that serves such a build is not ready, whether the tool is bound and
unavailable, bound to another contract, or not bound at all (``UNBOUND``). A required rule with
a ``when`` condition counts too: it blocks the resolutions where its condition holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from policy.ir import Project
from servers.wire.answers import RequiredTool, ToolState


@dataclass(frozen=True, slots=True)
class Readiness:
    """Each bound (or required) tool's state, and the reason of each not ``READY`` whose
    observation names one (``UPSTREAM_CHANGED``: an upstream tool whose pin no longer matches;
    an executor's or an upstream's short code for ``UNAVAILABLE``)."""

    states: dict[str, ToolState]
    reasons: dict[str, str] = field(default_factory=dict)


def required_tools(ir: Project) -> dict[str, list[str]]:
    """Each tool some objective's profile requires, with those objectives, in declared order."""
    found: dict[str, list[str]] = {}
    for objective in ir.objectives:
        profile = ir.profile_by_id.get(objective.profile)
        for rule in profile.tool_rules if profile is not None else ():
            if rule.required and rule.participation == "include":
                found.setdefault(rule.tool, []).append(objective.id)
    return found


def blocking(ir: Project, states: Mapping[str, ToolState]) -> list[RequiredTool]:
    """The required tools that are not ``READY``, each with its state and the objectives whose
    resolutions it blocks."""
    return [
        {"tool": tool, "state": states.get(tool, "UNBOUND"), "objectives": objectives}
        for tool, objectives in required_tools(ir).items()
        if states.get(tool) != "READY"
    ]
