"""The `check` pass: the semantic rules of tools, the schema subset, limits and CEL."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compiler.diagnostics import Collector
from compiler.passes.lower import tool_with_defaults
from compiler.passes.resolve import items
from compiler.passes.schema_subset import check_schema
from policy.cel.expression import check_expression
from policy.cel.fields import OPTIONAL_WITHOUT_HAS, UNKNOWN_FIELD, check_fields
from policy.diagnostic import Location
from policy.json.canonical import EncodingError, canonical_json_bytes
from policy.json.pointer import join

PASS = "check"
MAX_TOOLS = 32
MAX_CATALOGUE_BYTES = 65_536


def check_rules(doc: Mapping[str, Any], out: Collector) -> None:
    tools: dict[str, Mapping[str, Any]] = {}
    for pointer, tool in items(doc, "tools", ""):
        _check_tool(tool, pointer, out)
        if isinstance(tool.get("id"), str):
            tools.setdefault(tool["id"], tool)
    _check_catalogue(doc, out)
    for pointer, profile in items(doc, "profiles", ""):
        for rp, rule in items(profile, "toolRules", pointer):
            _check_rule_cel(rule, rp, tools.get(str(rule.get("tool"))), out)


def _check_tool(tool: Mapping[str, Any], pointer: str, out: Collector) -> None:
    if tool.get("effect") == "write" and tool.get("approval") == "none":
        out.error(
            "WRITE_WITHOUT_APPROVAL",
            join(pointer, "approval"),
            "writes always require approval; remove `approval` or set it to `required`",
        )
    if isinstance(tool.get("parameters"), Mapping):
        check_schema(tool["parameters"], join(pointer, "parameters"), out, root_must_be_object=True)
    if isinstance(tool.get("result"), Mapping):
        check_schema(tool["result"], join(pointer, "result"), out)


def _check_catalogue(doc: Mapping[str, Any], out: Collector) -> None:
    tools = doc.get("tools")
    if not isinstance(tools, list):
        return
    if len(tools) > MAX_TOOLS:
        out.error(
            "CATALOGUE_TOO_MANY_TOOLS",
            join("/tools", MAX_TOOLS),
            f"{len(tools)} tools are declared; a catalogue holds at most {MAX_TOOLS}",
        )
    try:
        normalized = [tool_with_defaults(t) if isinstance(t, Mapping) else t for t in tools]
        size = len(canonical_json_bytes(normalized))
    except EncodingError:
        return  # a value without a canonical form was reported where it stands
    if size > MAX_CATALOGUE_BYTES:
        out.error(
            "CATALOGUE_TOO_LARGE",
            "/tools",
            f"the catalogue's canonical JSON is {size} bytes; at most "
            f"{MAX_CATALOGUE_BYTES} are allowed",
        )


def _check_rule_cel(
    rule: Mapping[str, Any], pointer: str, tool: Mapping[str, Any] | None, out: Collector
) -> None:
    when = rule.get("when")
    if isinstance(when, str) and when:
        _check_cel(when, "disclosure", join(pointer, "when"), None, out)
    for cp, condition in items(rule, "conditions", pointer):
        text = condition.get("when")
        if isinstance(text, str) and text:
            _check_cel(text, "call", join(cp, "when"), tool, out)


_LOCATED = frozenset(
    {"CEL_SYNTAX", "CEL_UNKNOWN_IDENTIFIER", "CEL_UNKNOWN_FUNCTION", UNKNOWN_FIELD}
    | {OPTIONAL_WITHOUT_HAS}
)
"""The CEL codes whose message ends with where in the expression the problem is."""


def _check_cel(
    text: str, stage: str, pointer: str, tool: Mapping[str, Any] | None, out: Collector
) -> None:
    """The expression's problems, then (when it has none) the fields it reads, checked against
    the stage's variables and the parameter schema of the rule's ``tool`` (None: not known)."""
    problems = check_expression(text, stage)
    if not problems:
        parameters = tool.get("parameters") if tool is not None else None
        tool_id = str(tool.get("id")) if tool is not None else None
        problems = check_fields(text, stage, parameters, tool_id)
    for problem in problems:
        where = f" (at {problem.line}:{problem.column} of the expression)"
        column_info = where if problem.code in _LOCATED else ""
        location = Location(pointer=pointer)
        out.add(problem.code, problem.message + column_info, location, problem.severity)
