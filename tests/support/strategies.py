"""Hypothesis strategies: small valid projects, availability observations and call histories.

Projects are plain declaration dicts (the JSON form) that compile; defaults are sometimes written
out and sometimes left to the compiler. CEL expressions come from the reference model's tables so
that the model knows what each one means.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import jsonschema
from hypothesis import strategies as st

from policy import contract_digest
from tests.support.reference_model import CONDITIONS, WHEN, closed

TEXT = st.text(st.sampled_from("ab é\U0001f600\n\"'"), min_size=1, max_size=12)
LONG_TEXT = st.builds(lambda t, k: (t * k)[:600], TEXT, st.integers(1, 60))

PROPERTY_SCHEMAS = {
    "s": st.fixed_dictionaries(
        {"type": st.just("string")},
        optional={"maxLength": st.integers(1, 6), "minLength": st.integers(0, 1)},
    ),
    "n": st.fixed_dictionaries(
        {"type": st.just("integer")},
        optional={"minimum": st.integers(0, 3), "maximum": st.integers(5, 12)},
    ),
    "flag": st.just({"type": "boolean"}),
    "tags": st.fixed_dictionaries(
        {"type": st.just("array"), "items": st.just({"type": "string"})},
        optional={"maxItems": st.integers(0, 3)},
    ),
    "ratio": st.fixed_dictionaries({"type": st.just("number")}, optional={"maximum": st.just(1.5)}),
}

VALUES = {  # valid and invalid values for each property, and for unknown keys
    "s": ["", "x", "yy", "zzzz", "é\U0001f600", "abcdefgh", 1, None],
    "n": [-1, 0, 3, 3.0, 5, 6, 7.0, 12, 13, 2.5, "3", True],
    "flag": [True, False, 0, None],
    "tags": [[], ["a"], ["a", "b"], ["a", "b", "c", "d"], ["a", 1], "a"],
    "ratio": [0, 0.5, 1.5, 1.50001, 2, False],
    "zz": [1, "x", [1.0]],
}


@st.composite
def parameters(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(sorted(PROPERTY_SCHEMAS)), unique=True, max_size=3))
    schema: dict[str, Any] = {"type": "object"}
    if names:
        schema["properties"] = {name: draw(PROPERTY_SCHEMAS[name]) for name in names}
        required = draw(st.lists(st.sampled_from(names), unique=True))
        if required:
            schema["required"] = required
    if draw(st.integers(0, 3)) == 0:
        schema["additionalProperties"] = draw(st.booleans())
    return schema


@st.composite
def tools(draw: st.DrawFn, index: int) -> dict[str, Any]:
    effect = draw(st.sampled_from(["read", "write"]))
    tool: dict[str, Any] = {
        "id": f"t{index}",
        "name": f"tool_{index}",
        "version": draw(st.sampled_from(["1.0.0", "1.2.0", "2.0.0-rc.1"])),
        "description": draw(st.one_of(TEXT, LONG_TEXT)),
        "parameters": draw(parameters()),
        "effect": effect,
    }
    if draw(st.booleans()):
        tool["result"] = {"type": "object", "additionalProperties": True}
    approvals = ["none", "required"] if effect == "read" else ["required"]
    optional = {
        "approval": st.sampled_from(approvals),
        "maxCalls": st.integers(1, 4),
        "timeoutMs": st.integers(100, 30000),
    }
    for key, values in optional.items():
        if draw(st.booleans()):
            tool[key] = draw(values)
    return tool


def readable(parameters: dict[str, Any]) -> list[str]:
    """The conditions of :data:`CONDITIONS` that read only arguments ``parameters`` declares
    (or admits): another one is ``CEL_UNKNOWN_FIELD``, and the project would not compile."""
    declared = set(parameters.get("properties", {}))
    return sorted(
        text
        for text in CONDITIONS
        if parameters.get("additionalProperties") is True
        or set(re.findall(r"args\.(\w+)", text)) <= declared
    )


@st.composite
def tool_rules(
    draw: st.DrawFn, catalogue: dict[str, dict[str, Any]], tight: bool
) -> list[dict[str, Any]]:
    """Rules for the tools of ``catalogue`` (id: parameter schema)."""
    tool_ids = list(catalogue)
    rules = []
    choices = (
        ["include", "include", "exclude", None] if tight else ["include"] * 6 + ["exclude", None]
    )
    for tool_id in draw(st.permutations(tool_ids)):
        participation = draw(st.sampled_from(choices))
        if participation is None:
            continue
        rule: dict[str, Any] = {"tool": tool_id, "participation": participation}
        if participation == "include":
            if draw(st.booleans()):
                rule["required"] = draw(st.booleans())
            if draw(st.integers(0, 3 if tight else 8)) == 0:
                rule["when"] = draw(st.sampled_from(sorted(WHEN)))
            conditions = draw(
                st.lists(
                    st.fixed_dictionaries(
                        {
                            "when": st.sampled_from(readable(catalogue[tool_id])),
                            "then": st.sampled_from(["DENY", "REQUIRE_APPROVAL"]),
                        },
                        optional={"reason": st.sampled_from(["", "why"])},
                    ),
                    max_size=2,
                )
            )
            if conditions:
                rule["conditions"] = conditions
        elif draw(st.booleans()):
            rule["required"] = False
        rules.append(rule)
    return rules


@st.composite
def profiles(
    draw: st.DrawFn, index: int, catalogue: dict[str, dict[str, Any]], tight: bool
) -> dict[str, Any]:
    profile: dict[str, Any] = {"id": f"p{index}"}
    if draw(st.integers(0, 3)) > 0:
        ceilings = st.integers(1, 400) | st.just(8192) if tight else st.integers(150, 2000)
        profile["tokenCeiling"] = draw(ceilings)
    messages = []
    for k in range(draw(st.integers(0, 3))):
        message = {
            "id": f"m{index}-{k}",
            "role": draw(st.sampled_from(["system", "developer", "user", "assistant"])),
            "text": draw(st.one_of(TEXT, LONG_TEXT)),
        }
        if draw(st.booleans()):
            message["required"] = draw(st.booleans())
        messages.append(message)
    if messages or draw(st.booleans()):
        profile["context"] = messages
    profile["toolRules"] = draw(tool_rules(catalogue, tight))
    return profile


@st.composite
def projects(draw: st.DrawFn, tight: bool = True) -> dict[str, Any]:
    """A small valid project: 1-4 tools, 1-3 profiles, one objective per profile (o0, o1...).
    When ``tight``, token ceilings often bind and tools are often left out; otherwise most
    tools are included and ceilings rarely bind (for call histories)."""
    catalogue = [draw(tools(i)) for i in range(draw(st.integers(1, 4)))]
    parameters = {t["id"]: t["parameters"] for t in catalogue}
    count = draw(st.integers(1, 3))
    return {
        "format": "seif.context-project.v1",
        "id": "generated",
        "version": "1.0.0",
        "objectives": [{"id": f"o{i}", "profile": f"p{i}"} for i in range(count)],
        "profiles": [draw(profiles(i, parameters, tight)) for i in range(count)],
        "tools": catalogue,
    }


@st.composite
def observations(draw: st.DrawFn, doc: dict[str, Any], ready_weight: int = 3) -> dict[str, Any]:
    """Availability of each tool: READY (current contract), READY with another version or
    digest, UNAVAILABLE, or missing. ``ready_weight`` makes READY more likely."""
    out: dict[str, Any] = {}
    kinds = ["ready"] * ready_weight + ["version", "digest", "unavailable", "missing"]
    for tool in doc["tools"]:
        kind = draw(st.sampled_from(kinds))
        current = {
            "state": "READY",
            "version": tool["version"],
            "contractDigest": contract_digest(tool),
        }
        if kind == "ready":
            out[tool["id"]] = current
        elif kind == "version":
            out[tool["id"]] = {**current, "version": "9.9.9"}
        elif kind == "digest":
            out[tool["id"]] = {**current, "contractDigest": "sha256:" + "0" * 64}
        elif kind == "unavailable":
            out[tool["id"]] = {"state": "UNAVAILABLE"}
    return out


def all_ready(doc: dict[str, Any]) -> dict[str, Any]:
    return {
        t["id"]: {"state": "READY", "version": t["version"], "contractDigest": contract_digest(t)}
        for t in doc["tools"]
    }


COORDINATES = st.fixed_dictionaries(
    {},
    optional={
        "consumer": st.sampled_from(["", "trial", "ops"]),
        "environment": st.sampled_from(["", "production", "staging"]),
    },
)

PRINCIPALS = st.sampled_from(
    [
        None,  # no one known
        {"clientId": "web"},  # a static credential's
        {"issuer": "corp", "subject": "u1", "clientId": "web", "claims": {"groups": ["support"]}},
        {"issuer": "corp", "subject": "u2", "clientId": "app", "claims": {"groups": []}},
        {"issuer": "corp", "subject": "u1", "claims": {"level": 3, "groups": ["ops"]}},
        {"issuer": "corp", "subject": "u3", "claims": {"level": "high"}},
    ]
)
"""Who resolves and calls, for the principal-reading rules of the reference model's tables."""

CALL_IDS = st.sampled_from(["c1", "c2", "c3", "c4"])
APPROVAL_IDS = st.sampled_from(["a1", "a2", "a3"])


def valid_values(schema: dict[str, Any], name: str) -> list[Any]:
    check = jsonschema.Draft202012Validator(closed(schema)).is_valid
    return [v for v in VALUES[name] if check(v)]


@st.composite
def arguments(draw: st.DrawFn, tool: dict[str, Any]) -> Any:
    """Arguments for ``tool``: often valid ones (every required property and some optional
    ones, with values that fit), otherwise any mix of its properties and an unknown key with
    valid or invalid values, rarely not an object at all."""
    properties = tool["parameters"].get("properties", {})
    mode = draw(st.integers(0, 19))
    if mode == 0:
        return draw(st.sampled_from([[], "x", None, 1]))
    if mode < 16:
        required = tool["parameters"].get("required", [])
        chosen = (
            draw(st.lists(st.sampled_from(sorted(properties)), unique=True)) if properties else []
        )
        names = draw(st.permutations(sorted(set(required) | set(chosen))))
        return {n: draw(st.sampled_from(valid_values(properties[n], n))) for n in names}
    names = draw(st.lists(st.sampled_from([*properties, "zz"]), unique=True, max_size=4))
    return {name: draw(st.sampled_from(VALUES[name])) for name in names}


@st.composite
def argument_pools(draw: st.DrawFn, doc: dict[str, Any]) -> dict[str, list[Any]]:
    """A few arguments per tool, so that histories repeat them (duplicates, conflicts)."""
    return {t["id"]: draw(st.lists(arguments(t), min_size=1, max_size=3)) for t in doc["tools"]}


APPROVALS = st.sampled_from(
    [None, None, "a1", "a2", "exact", "exact", "args", "callId", "tool", "expired", "edge"]
)
"""How a call is approved: not at all, by a pooled approval id recorded earlier, or by one
recorded just before it: exactly, for other arguments, callId or tool, or exactly but recorded
5 minutes ago (``expired``: it expires at this very instant) or 1 ms less (``edge``)."""


def steps(doc: dict[str, Any], disclosed: Sequence[str] = ()) -> st.SearchStrategy[list[Any]]:
    """A call history: calls (mostly of ``disclosed`` tools), approvals and clock advances,
    some of them to exactly the expiry of the context or of the last approval."""
    tool_ids = [t["id"] for t in doc["tools"]]
    targets = st.sampled_from([*disclosed, *disclosed, *disclosed, *tool_ids, "nope"])
    call = st.tuples(st.just("call"), targets, CALL_IDS, st.integers(0, 2), APPROVALS)
    approve = st.tuples(
        st.just("approve"), APPROVAL_IDS, st.sampled_from(tool_ids), CALL_IDS, st.integers(0, 2)
    )
    advance = st.tuples(
        st.just("advance"),
        st.one_of(
            st.integers(0, 60_000),
            st.integers(0, 60_000),
            st.integers(0, 60_000),
            st.sampled_from(["context", "context-1", "approval", "approval", "approval-1"]),
        ),
    )
    return st.lists(st.one_of(call, call, call, call, approve, advance), min_size=6, max_size=30)
