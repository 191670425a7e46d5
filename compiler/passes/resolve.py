"""The `resolve` pass: ids unique within their kind, and every reference names something.

Works on the raw declaration and reads only what is well-formed; malformed parts were reported by
the structure pass already.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from compiler.diagnostics import Collector
from policy.diagnostic import did_you_mean
from policy.json.pointer import join
from policy.reasons import REASON_CODES

PASS = "resolve"


def items(node: Any, key: str, pointer: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(pointer, object) of each object in the array ``node[key]``; skips malformed parts."""
    seq = node.get(key) if isinstance(node, Mapping) else None
    if not isinstance(seq, list):
        return
    for i, item in enumerate(seq):
        if isinstance(item, Mapping):
            yield join(pointer, key, i), dict(item)


def _str(node: Mapping[str, Any], key: str) -> str | None:
    value = node.get(key)
    return value if isinstance(value, str) else None


def _unique(pairs: list[tuple[str, str]], code: str, what: str, out: Collector) -> None:
    seen: dict[str, str] = {}
    for pointer, value in pairs:
        if value in seen:
            out.error(code, pointer, f"{what} `{value}` is already used at `{seen[value]}`")
        else:
            seen[value] = pointer


def _ids(doc: Mapping[str, Any], key: str) -> list[tuple[str, str]]:
    return [(join(p, "id"), v) for p, o in items(doc, key, "") if (v := _str(o, "id"))]


def _messages(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [
        (join(mp, "id"), v)
        for pp, prof in items(doc, "profiles", "")
        for mp, msg in items(prof, "context", pp)
        if (v := _str(msg, "id"))
    ]


def check_references(doc: Mapping[str, Any], out: Collector) -> None:
    """Uniqueness and references across the whole declaration."""
    for key, what in (
        ("objectives", "objective id"),
        ("profiles", "profile id"),
        ("tools", "tool id"),
        ("tests", "test id"),
    ):
        _unique(_ids(doc, key), "DUPLICATE_ID", what, out)
    _unique(_messages(doc), "DUPLICATE_ID", "context message id", out)
    names = [(join(p, "name"), v) for p, o in items(doc, "tools", "") if (v := _str(o, "name"))]
    _unique(names, "DUPLICATE_NAME", "function name", out)
    profiles = {v for _, v in _ids(doc, "profiles")}
    tools = {v for _, v in _ids(doc, "tools")}
    for pointer, objective in items(doc, "objectives", ""):
        _ref(objective, "profile", profiles, "UNKNOWN_PROFILE", "profile", pointer, out)
    for pointer, profile in items(doc, "profiles", ""):
        _check_rules(profile, pointer, tools, out)
    fixtures = doc.get("toolFixtures")
    if isinstance(fixtures, Mapping):
        _check_fixture_keys(fixtures, "/toolFixtures", tools, out)
    _check_tests(doc, tools, out)


def _ref(
    node: Mapping[str, Any],
    key: str,
    known: set[str],
    code: str,
    what: str,
    pointer: str,
    out: Collector,
) -> None:
    value = _str(node, key)
    if value is not None and value not in known:
        out.error(
            code,
            join(pointer, key),
            f"{what} `{value}` is not declared{did_you_mean(value, known)}",
        )


def _check_rules(profile: Mapping[str, Any], pointer: str, tools: set[str], out: Collector) -> None:
    seen: dict[str, str] = {}
    for rp, rule in items(profile, "toolRules", pointer):
        _ref(rule, "tool", tools, "UNKNOWN_TOOL", "tool", rp, out)
        tool = _str(rule, "tool")
        if tool is not None and tool in seen:
            out.error(
                "DUPLICATE_TOOL_RULE",
                join(rp, "tool"),
                f"tool `{tool}` already has a rule at `{seen[tool]}`; keep one rule per tool",
            )
        elif tool is not None:
            seen[tool] = rp
        if rule.get("participation") == "exclude" and rule.get("required") is True:
            out.error(
                "EXCLUDED_TOOL_REQUIRED",
                join(rp, "required"),
                "an excluded tool cannot be required; remove `required` or include the tool",
            )


READY_FIXTURE_KEYS = ("version", "contractDigest")
"""What a READY fixture must name besides its state: the contract it serves."""


def _check_fixture_keys(
    fixtures: Mapping[str, Any], pointer: str, tools: set[str], out: Collector
) -> None:
    for tool_id, fixture in fixtures.items():
        if isinstance(fixture, Mapping) and fixture.get("state") == "READY":
            for needed in READY_FIXTURE_KEYS:
                if needed not in fixture:
                    out.error(
                        "MISSING_KEY",
                        join(pointer, tool_id),
                        f"missing key `{needed}`: a READY fixture names the contract it serves",
                    )
        if tool_id not in tools:
            hint = did_you_mean(tool_id, tools)
            message = f"fixture for tool `{tool_id}`, which is not declared{hint}"
            out.error("UNKNOWN_TOOL", join(pointer, tool_id), message)


def _check_tests(doc: Mapping[str, Any], tools: set[str], out: Collector) -> None:
    objectives = {v for _, v in _ids(doc, "objectives")}
    messages = {v for _, v in _messages(doc)}
    for tp, test in items(doc, "tests", ""):
        _ref(test, "objective", objectives, "UNKNOWN_OBJECTIVE", "objective", tp, out)
        fixtures = test.get("fixtures")
        if isinstance(fixtures, Mapping):
            _check_fixture_keys(fixtures, join(tp, "fixtures"), tools, out)
        expect = test.get("expect")
        if isinstance(expect, Mapping):
            _check_expectation(expect, join(tp, "expect"), tools, messages, out)
        principal = test.get("principal")
        claims = principal.get("claims") if isinstance(principal, Mapping) else None
        if isinstance(claims, Mapping):
            _check_claims(claims, join(tp, "principal", "claims"), out)


MAX_CLAIMS = 16
"""As many claims as an issuer may allowlist (docs/identity.md)."""


def _check_claims(claims: Mapping[str, Any], pointer: str, out: Collector) -> None:
    """A test's claims are what an issuer's token may give: each a string, a number, a boolean
    or a list of strings; at most :data:`MAX_CLAIMS` of them."""
    if len(claims) > MAX_CLAIMS:
        out.error("OUT_OF_RANGE", pointer, f"{len(claims)} claims: at most {MAX_CLAIMS}")
    for name, value in claims.items():
        strings = isinstance(value, list) and all(isinstance(v, str) for v in value)
        if value is None or isinstance(value, Mapping) or (isinstance(value, list) and not strings):
            out.error(
                "WRONG_TYPE",
                join(pointer, name),
                "a claim is a string, a number, a boolean or a list of strings",
            )


def _id_list(node: Any, key: str, pointer: str) -> Iterator[tuple[str, str]]:
    seq = node.get(key) if isinstance(node, Mapping) else None
    if isinstance(seq, list):
        for i, value in enumerate(seq):
            if isinstance(value, str):
                yield join(pointer, key, i), value


def _check_expectation(
    expect: Mapping[str, Any], pointer: str, tools: set[str], messages: set[str], out: Collector
) -> None:
    for cp, code in _id_list(expect, "causes", pointer):
        _known_reason(code, cp, out)
    context = expect.get("context")
    for key in ("include", "exclude"):
        for mp, mid in _id_list(context, key, join(pointer, "context")):
            if mid not in messages:
                out.error(
                    "UNKNOWN_CONTEXT_MESSAGE",
                    mp,
                    f"context message `{mid}` is not declared{did_you_mean(mid, messages)}",
                )
    section = expect.get("tools")
    for key in ("include", "exclude"):
        for tp, tid in _id_list(section, key, join(pointer, "tools")):
            if tid not in tools:
                out.error(
                    "UNKNOWN_TOOL", tp, f"tool `{tid}` is not declared{did_you_mean(tid, tools)}"
                )
    for cp, call in items(section, "calls", join(pointer, "tools")):
        _ref(call, "tool", tools, "UNKNOWN_TOOL", "tool", cp, out)
        reason = _str(call, "reason")
        if reason is not None:
            _known_reason(reason, join(cp, "reason"), out)


def _known_reason(code: str, pointer: str, out: Collector) -> None:
    if code not in REASON_CODES:
        out.error(
            "UNKNOWN_REASON_CODE",
            pointer,
            f"`{code}` is not a reason code{did_you_mean(code.upper(), set(REASON_CODES))}",
        )
