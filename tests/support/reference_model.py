"""A deliberately naive reference model of disclosure and call decisions, read off `engine.md`.

It works on the plain declaration dict (defaults are filled in here, from the spec's table), uses
plain loops, jsonschema for argument validity and :mod:`policy.json.canonical` for argument
identity, and nothing of ``policy.engine.disclosure`` or ``policy.engine.decision``. CEL is not
re-implemented: the strategies draw expressions from the two tables below, each with its meaning
written in Python (``None`` = the evaluation fails). The principal (who resolves and calls) is
a plain dict ``{issuer, subject, clientId, claims}``, absent fields null (claims: none).
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import jsonschema

from policy.json.canonical import canonical_cbor, integral

CONTEXT_TTL = 15 * 60 * 1000
APPROVAL_TTL = 5 * 60 * 1000

WHEN = {  # a rule's `when`, over the disclosure context and the principal
    "true": lambda c, p: True,
    "false": lambda c, p: False,
    "context.environment != 'production'": lambda c, p: c["environment"] != "production",
    "context.consumer == 'trial'": lambda c, p: c["consumer"] == "trial",
    "context.objective == 'o0'": lambda c, p: c["objective"] == "o0",
    "context.consumer + 1 == 2": lambda c, p: None,  # a string plus an int: no overload
    "has(principal.claims.groups) && 'support' in principal.claims.groups": lambda c, p: (
        "groups" in p["claims"] and "support" in p["claims"]["groups"]
    ),
    "principal.subject == 'u1'": lambda c, p: p["subject"] == "u1",
    "principal.claims.level > 2": lambda c, p: (  # absent, or not a number: an error
        p["claims"]["level"] > 2 if _number(p["claims"].get("level")) else None
    ),
}
CONDITIONS = {  # a condition's `when`, over (args, context, call, principal)
    "true": lambda a, c, k, p: True,
    "false": lambda a, c, k, p: False,
    "call.count >= 1": lambda a, c, k, p: k["count"] >= 1,
    "call.count >= 2": lambda a, c, k, p: k["count"] >= 2,
    "call.callId == 'c1'": lambda a, c, k, p: k["callId"] == "c1",
    "context.consumer == 'trial'": lambda a, c, k, p: c["consumer"] == "trial",
    "args.n > 5": lambda a, c, k, p: a["n"] > 5 if "n" in a else None,
    "has(args.n) && args.n > 5": lambda a, c, k, p: "n" in a and a["n"] > 5,
    "args.s == 'x'": lambda a, c, k, p: a["s"] == "x" if "s" in a else None,
    "has(args.s) && size(args.s) > 2": lambda a, c, k, p: "s" in a and len(a["s"]) > 2,
    "'support' in principal.claims.groups": lambda a, c, k, p: (
        "support" in p["claims"]["groups"] if "groups" in p["claims"] else None
    ),
    "principal.issuer == null || principal.clientId == 'web'": lambda a, c, k, p: (
        p["issuer"] is None or p["clientId"] == "web"
    ),
}


def _number(value: Any) -> bool:
    return type(value) in (int, float)


def principal_of(given: dict[str, Any] | None) -> dict[str, Any]:
    """The principal as conditions read it: every field, absent ones null, claims a map."""
    given = given or {}
    fields = {k: given.get(k) for k in ("issuer", "subject", "clientId")}
    return {**fields, "claims": dict(given.get("claims") or {})}


def tokens(text: str) -> int:
    return math.ceil(len(text.encode("utf-8")) / 4)


def tool_tokens(tool: dict[str, Any]) -> int:
    schema = {
        "name": tool["name"],
        "description": tool["description"],
        "parameters": tool["parameters"],
    }
    return tokens(json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False))


def digest(tool: dict[str, Any]) -> str:
    contract = {
        "id": tool["id"],
        "name": tool["name"],
        "version": tool["version"],
        "arguments": tool["parameters"],
        "result": tool.get("result"),
    }
    return "sha256:" + hashlib.sha256(canonical_cbor(contract)).hexdigest()


def identity(arguments: Any) -> bytes:
    return canonical_cbor(integral(arguments))


def closed(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with the subset's default written out: objects are closed."""
    out = dict(schema)
    if out["type"] == "object":
        out.setdefault("additionalProperties", False)
        out["properties"] = {k: closed(v) for k, v in out.get("properties", {}).items()}
    if out["type"] == "array" and "items" in out:
        out["items"] = closed(out["items"])
    return out


def valid(tool: dict[str, Any], arguments: Any) -> bool:
    return jsonschema.Draft202012Validator(closed(tool["parameters"])).is_valid(arguments)


def context_of(objective: str, given: dict[str, str] | None) -> dict[str, str]:
    given = given or {}
    out = {k: given.get(k) or "" for k in ("consumer", "environment", "deployment")}
    return {"objective": objective, **out}


def find(items: list[dict[str, Any]], id_: str) -> tuple[int, dict[str, Any] | None]:
    for i, item in enumerate(items):
        if item["id"] == id_:
            return i, item
    return -1, None


def resolution(
    status: str,
    reason: str | None,
    messages: list[str],
    tools: list[str],
    omitted: list[Any],
    causes: list[Any],
    figures: tuple[int, int, int],
) -> dict[str, Any]:
    """A disclosure: (kind, id, reason, pointer) rows for omissions and causes; token figures
    are (messages, tools, ceiling)."""
    return {
        "status": status,
        "reason": reason,
        "messages": messages,
        "tools": tools,
        "omitted": omitted,
        "causes": causes,
        "tokens": figures,
    }


def declared(omission: tuple[str, str, str, str]) -> tuple[bool, int]:
    """Declared order: messages in context order, then tools in rule order."""
    return omission[0] == "tool", int(omission[3].rsplit("/", 1)[1])


def disclose(
    doc: dict[str, Any],
    objective: str,
    observations: dict[str, Any],
    context: dict[str, str] | None = None,
    principal: dict[str, Any] | None = None,
) -> dict[str, Any]:
    who = principal_of(principal)
    _, chosen = find(doc["objectives"], objective)
    if chosen is None:
        return resolution("BLOCKED", "OBJECTIVE_UNKNOWN", [], [], [], [], (0, 0, 0))
    p, profile = find(doc["profiles"], chosen["profile"])
    assert profile is not None
    ctx = context_of(objective, context)
    omitted, causes, ready = [], [], []
    for r, rule in enumerate(profile.get("toolRules", [])):
        if rule["participation"] != "include":
            continue
        _, tool = find(doc["tools"], rule["tool"])
        assert tool is not None
        required = rule.get("required", False)
        where = f"/profiles/{p}/toolRules/{r}"
        reason = None
        if "when" in rule:
            value = WHEN[rule["when"]](ctx, who)
            reason = {True: None, False: "CONDITION_NOT_MET", None: "CONDITION_ERROR"}[value]
        if reason is None:
            obs = observations.get(tool["id"])
            if obs is None or obs.get("state") != "READY":
                reason = "TOOL_UNAVAILABLE"
            elif obs.get("version") != tool["version"] or obs.get("contractDigest") != digest(tool):
                reason = "TOOL_INCOMPATIBLE"
        if reason is None:
            ready.append((tool, required, where))
        elif required and reason != "CONDITION_NOT_MET":
            causes.append(("tool", tool["id"], reason, where))
        else:
            omitted.append(("tool", tool["id"], reason, where))
    ceiling = profile.get("tokenCeiling", 8192)
    used = {"messages": 0, "tools": 0}
    messages, tools = [], []
    for required in (True, False):
        misses = causes if required else omitted
        for m, message in enumerate(profile.get("context", [])):
            if message.get("required", True) != required:
                continue
            size = tokens(message["text"])
            if used["messages"] + used["tools"] + size <= ceiling:
                used["messages"] += size
                messages.append(message["id"])
            else:
                misses.append(
                    (
                        "message",
                        message["id"],
                        "TOKEN_BUDGET_EXCEEDED",
                        f"/profiles/{p}/context/{m}",
                    )
                )
        for tool, tool_required, where in ready:
            if tool_required != required:
                continue
            size = tool_tokens(tool)
            if used["messages"] + used["tools"] + size <= ceiling:
                used["tools"] += size
                tools.append(tool["id"])
            else:
                misses.append(("tool", tool["id"], "TOKEN_BUDGET_EXCEEDED", where))
    omitted.sort(key=declared)
    causes.sort(key=declared)
    if causes:
        return resolution("BLOCKED", "RESOLUTION_BLOCKED", [], [], omitted, causes, (0, 0, ceiling))
    message_order = [m["id"] for m in profile.get("context", [])]
    tool_order = [t["id"] for t, _, _ in ready]
    messages.sort(key=message_order.index)
    tools.sort(key=tool_order.index)
    figures = (used["messages"], used["tools"], ceiling)
    return resolution("RESOLVED", None, messages, tools, omitted, [], figures)


def open_context(
    doc: dict[str, Any],
    disclosure: dict[str, Any],
    objective: str,
    now: int,
    context: dict[str, str] | None = None,
) -> dict[str, Any]:
    _, chosen = find(doc["objectives"], objective)
    assert chosen is not None
    return {
        "expires": now + CONTEXT_TTL,
        "tools": list(disclosure["tools"]),
        "profile": chosen["profile"],
        "context": context_of(objective, context),
        "dispatched": {},
        "approvals": {},
    }


def record_dispatch(state: dict[str, Any], call_id: str, tool: str, arguments: Any) -> None:
    state["dispatched"][call_id] = (tool, identity(arguments))


def record_approval(
    state: dict[str, Any], approval_id: str, tool: str, call_id: str, arguments: Any, now: int
) -> None:
    state["approvals"][approval_id] = (tool, call_id, identity(arguments), now + APPROVAL_TTL)


def disclosed_id(doc: dict[str, Any], state: dict[str, Any], sent: str) -> str | None:
    """The disclosed tool that ``sent`` names: a tool id first, then a function name."""
    if sent in state["tools"]:
        return sent
    for tool in doc["tools"]:
        if tool["name"] == sent and tool["id"] in state["tools"]:
            return str(tool["id"])
    return None


def decide(
    doc: dict[str, Any],
    state: dict[str, Any] | None,
    tool_id: str,
    call_id: str,
    arguments: Any,
    approval_id: str | None,
    now: int,
    principal: dict[str, Any] | None = None,
) -> tuple[str, str | None, str | None]:
    """(outcome, reason, pointer of the deciding condition or None), the call made by
    ``principal``."""
    if state is None:
        return "DENY", "CONTEXT_UNKNOWN", None
    if now >= state["expires"]:
        return "DENY", "CONTEXT_EXPIRED", None
    found = disclosed_id(doc, state, tool_id)
    if found is None:
        return "DENY", "TOOL_NOT_DISCLOSED", None
    tool_id = found
    _, tool = find(doc["tools"], tool_id)
    assert tool is not None
    same = (tool_id, identity(arguments))
    if call_id in state["dispatched"]:
        if state["dispatched"][call_id] == same:
            return "DUPLICATE", "DUPLICATE_CALL", None
        return "DENY", "CALL_CONFLICT", None
    if not valid(tool, arguments):
        return "DENY", "ARGUMENTS_INVALID", None
    count = sum(1 for t, _ in state["dispatched"].values() if t == tool_id)
    approval = tool.get("approval", "required" if tool["effect"] == "write" else "none")
    needs_approval = approval == "required"
    p, profile = find(doc["profiles"], state["profile"])
    assert profile is not None
    for r, rule in enumerate(profile["toolRules"]):
        if rule["tool"] != tool_id:
            continue
        for c, condition in enumerate(rule.get("conditions", [])):
            call = {"tool": tool_id, "callId": call_id, "count": count}
            value = CONDITIONS[condition["when"]](
                arguments, state["context"], call, principal_of(principal)
            )
            where = f"/profiles/{p}/toolRules/{r}/conditions/{c}"
            if value is None:
                return "DENY", "CONDITION_ERROR", where
            if value and condition["then"] == "DENY":
                return "DENY", "CONDITION_DENIED", where
            if value:
                needs_approval = True
    if count >= tool.get("maxCalls", 1 if tool["effect"] == "write" else 3):
        return "DENY", "CALL_LIMIT_EXCEEDED", None
    if needs_approval:
        if approval_id is None:
            return "DENY", "APPROVAL_REQUIRED", None
        granted = state["approvals"].get(approval_id)
        if granted is None or granted[:3] != (tool_id, call_id, same[1]):
            return "DENY", "APPROVAL_INVALID", None
        if now >= granted[3]:
            return "DENY", "APPROVAL_EXPIRED", None
    return "ALLOW", None, None
