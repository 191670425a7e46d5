"""``seif tool new`` and ``seif tool include``: a tool from a template, and explicit inclusion.

A new tool is included nowhere: the edit names the profiles that do not include it and how to
include one (``include_tool``, the same change ``seif tool include`` makes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from compiler.authoring.edits import add_element, set_rule
from compiler.authoring.source import AuthoringError, Edit, ProjectSource, checked, refused
from compiler.authoring.templates import (
    FIELD_TYPES,
    TEMPLATES,
    parameters_from_fields,
    tool_from_template,
)
from policy.diagnostic import Diagnostic, Location

__all__ = ["FIELD_TYPES", "TEMPLATES", "include_tool", "new_tool"]


def _items(document: Mapping[str, Any], key: str) -> list[Any]:
    value = document.get(key)
    return value if isinstance(value, list) else []


def _ids(document: Mapping[str, Any], key: str) -> list[str]:
    return [i["id"] for i in _items(document, key) if isinstance(i, dict) and "id" in i]


def new_tool(
    source: ProjectSource,
    *,
    template: str,
    tool_id: str,
    fields: Sequence[str] = (),
    schema: Mapping[str, Any] | None = None,
    name: str | None = None,
    description: str | None = None,
    version: str | None = None,
    effect: str | None = None,
) -> Edit:
    """Add a tool from ``template`` (``fields`` ``name:type[:required]`` or ``schema`` replace
    its arguments), included nowhere. ``details``: ``{"tool": id, "notIncludedBy": [...]}``."""
    try:
        declaration = _declaration(
            source, template, tool_id, fields, schema, name, description, version, effect
        )
    except AuthoringError as exc:
        return refused(source, exc)
    text = add_element(source, "tools", declaration)
    profiles = _ids(source.document, "profiles")
    notes = [f"added tool `{tool_id}` ({template}) to {source.path.name}"]
    notes += _inclusion_notes(source, tool_id, profiles)
    return checked(
        source, text, tuple(notes), tool=tool_id, notIncludedBy=profiles, declaration=declaration
    )


def _declaration(
    source: ProjectSource,
    template: str,
    tool_id: str,
    fields: Sequence[str],
    schema: Mapping[str, Any] | None,
    name: str | None,
    description: str | None,
    version: str | None,
    effect: str | None,
) -> dict[str, Any]:
    if tool_id in _ids(source.document, "tools"):
        raise AuthoringError(
            [
                Diagnostic(
                    code="TOOL_EXISTS",
                    location=Location(pointer="/tools"),
                    message=f"`{tool_id}` is already a tool of this project: choose another id "
                    f"(e.g. `{tool_id}-2`), or edit the existing tool",
                )
            ]
        )
    if fields and schema is not None:
        raise AuthoringError(
            [
                Diagnostic(
                    code="ARGUMENTS_TWICE",
                    message="give the arguments as fields or as a schema, not both",
                )
            ]
        )
    if effect is not None and effect not in ("read", "write"):
        raise AuthoringError(
            [
                Diagnostic(
                    code="INVALID_VALUE",
                    message=f"`{effect}` is not an effect: write `read` or `write`",
                )
            ]
        )
    parameters = parameters_from_fields(fields) if fields else schema
    return tool_from_template(
        template,
        tool_id,
        parameters=parameters,
        name=name,
        description=description,
        version=version,
        effect=effect,
    )


def _inclusion_notes(source: ProjectSource, tool_id: str, profiles: list[str]) -> list[str]:
    if not profiles:
        return ["no profile includes it (the project has no profiles yet)"]
    file = str(source.path)
    return [
        f"included nowhere: profiles {', '.join(profiles)} do not include it",
        f"to include it: seif tool include --project {file} --tool {tool_id} --profile "
        f"{profiles[0]}"
        + (" (or add `include " + tool_id + "` to that profile)" if source.kind == "seif" else ""),
        f"then protect its audience: seif tool protect --project {file} --tool {tool_id}",
    ]


def include_tool(
    source: ProjectSource, *, tool_id: str, profile_id: str, required: bool = False
) -> Edit:
    """Make ``profile_id`` include ``tool_id`` (replacing an ``exclude`` rule for it)."""
    problems = []
    if tool_id not in _ids(source.document, "tools"):
        known = ", ".join(_ids(source.document, "tools")) or "none"
        problems.append(
            Diagnostic(
                code="UNKNOWN_TOOL",
                location=Location(pointer="/tools"),
                message=f"`{tool_id}` is not a tool of this project (tools: {known})",
            )
        )
    profiles = _ids(source.document, "profiles")
    if profile_id not in profiles:
        problems.append(
            Diagnostic(
                code="UNKNOWN_PROFILE",
                location=Location(pointer="/profiles"),
                message=f"`{profile_id}` is not a profile of this project "
                f"(profiles: {', '.join(profiles) or 'none'})",
            )
        )
    if problems:
        return refused(source, AuthoringError(problems))
    index = profiles.index(profile_id)
    current = _rule(source.document, index, tool_id)
    rule: dict[str, Any] = {"tool": tool_id, "participation": "include"}
    if current is not None and current.get("participation") == "include":
        rule = {**current}  # keeps its `when` and conditions
        rule.pop("required", None)
    if required:
        rule["required"] = True
    elif current is not None and current.get("required") is False:
        rule["required"] = False  # an explicit optional stays written as it was
    if current == rule:
        notes = (f"profile `{profile_id}` already includes `{tool_id}`: nothing changed",)
        return checked(source, source.text, notes, tool=tool_id, profile=profile_id)
    text = set_rule(source, index, rule)
    if current is None:
        what = "added the rule"
    elif current.get("participation") == "exclude":
        what = "replaced its exclude rule"
    else:
        what = "now required" if required else "no longer required"
    notes = (f"profile `{profile_id}` now includes `{tool_id}` ({what})",)
    return checked(source, text, notes, tool=tool_id, profile=profile_id)


def _rule(document: Mapping[str, Any], profile: int, tool_id: str) -> dict[str, Any] | None:
    rules = document["profiles"][profile].get("toolRules")
    found = [r for r in rules or [] if isinstance(r, dict) and r.get("tool") == tool_id]
    return found[0] if found else None
