"""The decision corpus: ``corpus/decisions/<case>.json`` run through ``disclose`` and ``decide``.

One parametrized test over the files (format: ``corpus/decisions/README.md``). The loader is
strict: an unknown or duplicated key, a missing required key, or a case that asserts nothing
fails the case. ``corpus/decisions/skip.json`` maps a file name to the reason it is expected to
fail (an engine bug, named precisely); such a case runs as a strict xfail, so a fix shows up.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

import pytest

from compiler import compile_project
from policy import ALLOW, Call, ContextState, Decision, Disclosure, Project, decide, disclose
from policy.json.strict import JsonError, loads
from policy.reasons import REASON_CODES
from tests.support.paths import ROOT as REPO

CORPUS = REPO / "corpus" / "decisions"
SKIP = loads((CORPUS / "skip.json").read_text(encoding="utf-8"))
CASES = sorted(p.name for p in CORPUS.glob("*.json") if p.name != "skip.json")

TOP_KEYS = {
    "description",
    "project",
    "projectFile",
    "objective",
    "observations",
    "context",
    "contextOpened",
    "resolvedAt",
    "history",
    "call",
    "now",
    "expect",
}
CALL_ONLY_KEYS = {"contextOpened", "resolvedAt", "history", "now"}
CONTEXT_KEYS = {"consumer", "environment", "deployment"}
OBSERVATION_KEYS = {"state", "version", "contractDigest"}
CALL_KEYS = {"tool", "callId", "arguments", "approvalId"}
HISTORY_KEYS = {
    "dispatch": ({"op", "tool", "callId", "arguments"}, set()),
    "approve": ({"op", "approvalId", "tool", "callId", "arguments", "at"}, set()),
    "call": ({"op", "tool", "callId", "arguments", "at", "expect"}, {"approvalId"}),
}
DECISION_KEYS = {"outcome", "reason", "explanation", "errors", "approvalRequired", "disclosure"}
DISCLOSURE_KEYS = {
    "status",
    "reason",
    "profile",
    "tools",
    "messages",
    "omitted",
    "causes",
    "tokens",
}
EXPLANATION_KEYS = {"pointer", "profile", "rule", "condition", "tool", "detail"}
OMISSION_KEYS = {"id", "reason", "kind", "pointer"}
OUTCOMES = {"ALLOW", "DENY", "DUPLICATE"}
STATUSES = {"RESOLVED", "BLOCKED"}
TOKEN_KEYS = {"messages", "tools", "total", "ceiling", "estimated"}


class CaseError(ValueError):
    """The case file itself is malformed."""


def keys(
    where: str, value: Any, required: AbstractSet[str], optional: AbstractSet[str] = frozenset()
) -> None:
    if not isinstance(value, Mapping):
        raise CaseError(f"{where}: expected an object, got {value!r}")
    missing = required - value.keys()
    unknown = value.keys() - required - optional
    if missing or unknown:
        raise CaseError(f"{where}: missing {sorted(missing)}, unknown {sorted(unknown)}")


def load(name: str) -> dict[str, Any]:
    return parse_case((CORPUS / name).read_text(encoding="utf-8"))


def parse_case(text: str) -> dict[str, Any]:
    """A case file's content, checked strictly against the format of the README."""
    try:
        case = loads(text)
    except JsonError as exc:
        raise CaseError(f"not strict JSON: {exc}") from None
    keys("case", case, {"description", "objective", "observations", "expect"}, TOP_KEYS)
    if not isinstance(case["description"], str) or not case["description"].strip():
        raise CaseError("description: a non-empty string")
    if ("project" in case) == ("projectFile" in case):
        raise CaseError("exactly one of `project` and `projectFile`")
    if not isinstance(case.get("projectFile", ""), str):
        raise CaseError("projectFile: a path relative to the repository")
    if "context" in case:
        keys("context", case["context"], set(), CONTEXT_KEYS)
    if "call" in case:
        keys("case", case, {"resolvedAt", "now"}, TOP_KEYS)
        keys("call", case["call"], {"tool", "callId", "arguments"}, CALL_KEYS)
        if not isinstance(case.get("contextOpened", True), bool):
            raise CaseError("contextOpened: a boolean")
        check_history(case.get("history", []))
        check_decision_expect(case["expect"])
    else:
        if CALL_ONLY_KEYS & case.keys():
            raise CaseError(f"{sorted(CALL_ONLY_KEYS)} need a `call`")
        check_disclosure_expect("expect", case["expect"])
    return case


def check_history(history: Any) -> None:
    if not isinstance(history, list):
        raise CaseError("history: a list of ops")
    for i, op in enumerate(history):
        kind = op.get("op") if isinstance(op, Mapping) else None
        if kind not in HISTORY_KEYS:
            raise CaseError(f"history/{i}: op must be one of {sorted(HISTORY_KEYS)}")
        required, optional = HISTORY_KEYS[kind]
        keys(f"history/{i}", op, required, optional)
        if kind == "call":
            keys(f"history/{i}/expect", op["expect"], {"outcome", "reason"})
            check_outcome(f"history/{i}/expect", op["expect"])


def check_outcome(where: str, expect: Mapping[str, Any]) -> None:
    if expect["outcome"] not in OUTCOMES:
        raise CaseError(f"{where}/outcome: one of {sorted(OUTCOMES)}")
    if expect["reason"] is not None and expect["reason"] not in REASON_CODES:
        raise CaseError(f"{where}/reason: `{expect['reason']}` is not a reason code")
    if (expect["outcome"] == ALLOW) != (expect["reason"] is None):
        raise CaseError(f"{where}: an ALLOW has no reason, any other outcome has one")


def check_decision_expect(expect: Any) -> None:
    keys("expect", expect, {"outcome", "reason"}, DECISION_KEYS)
    check_outcome("expect", expect)
    if isinstance(expect.get("explanation"), Mapping):
        keys("expect/explanation", expect["explanation"], {"pointer"}, EXPLANATION_KEYS)
    for i, error in enumerate(expect.get("errors", [])):
        keys(f"expect/errors/{i}", error, {"pointer", "keyword"})
    if "errors" in expect and expect["reason"] != "ARGUMENTS_INVALID":
        raise CaseError("expect/errors: only for ARGUMENTS_INVALID")
    if "disclosure" in expect:
        check_disclosure_expect("expect/disclosure", expect["disclosure"], required=set())


def check_disclosure_expect(where: str, expect: Any, required: set[str] | None = None) -> None:
    keys(where, expect, {"status", "reason"} if required is None else required, DISCLOSURE_KEYS)
    if not expect:
        raise CaseError(f"{where}: asserts nothing")
    if "status" in expect and expect["status"] not in STATUSES:
        raise CaseError(f"{where}/status: one of {sorted(STATUSES)}")
    if expect.get("reason") is not None and expect["reason"] not in REASON_CODES:
        raise CaseError(f"{where}/reason: `{expect['reason']}` is not a reason code")
    for field in ("omitted", "causes"):
        for i, item in enumerate(expect.get(field, [])):
            keys(f"{where}/{field}/{i}", item, {"id", "reason"}, OMISSION_KEYS)
    if "tokens" in expect:
        keys(f"{where}/tokens", expect["tokens"], set(), TOKEN_KEYS)


@functools.cache
def project_file(path: str) -> Project:
    return compile_project(REPO / path)


def project_of(case: dict[str, Any]) -> Project:
    if "projectFile" in case:
        return project_file(case["projectFile"])
    return compile_project(case["project"])


def observations_of(ir: Project, given: Any) -> dict[str, Any]:
    def current(tool_id: str) -> dict[str, Any]:
        tool = ir.tool_by_id.get(tool_id)
        if tool is None:
            raise CaseError(f"observations: no tool `{tool_id}` in the project")
        return {"state": "READY", "version": tool.version, "contractDigest": tool.contract_digest}

    if given == "current":
        return {t.id: current(t.id) for t in ir.tools}
    if not isinstance(given, Mapping):
        raise CaseError("observations: `current` or an object")
    out: dict[str, Any] = {}
    for tool_id, observation in given.items():
        if observation == "current":
            out[tool_id] = current(tool_id)
        else:
            keys(f"observations/{tool_id}", observation, {"state"}, OBSERVATION_KEYS)
            out[tool_id] = dict(observation)
    return out


def instant(value: Any) -> int | dt.datetime:
    """Integer milliseconds, or an RFC 3339 string with an offset (an aware ``datetime``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        parsed = dt.datetime.fromisoformat(value)
        if parsed.tzinfo is not None:
            return parsed
    raise CaseError(f"time: integer milliseconds or an RFC 3339 string with offset, got {value!r}")


def to_call(spec: Mapping[str, Any]) -> Call:
    return Call(
        tool=spec["tool"],
        call_id=spec["callId"],
        arguments=spec["arguments"],
        approval_id=spec.get("approvalId"),
    )


def replay(ir: Project, state: ContextState, history: list[dict[str, Any]]) -> ContextState:
    for i, op in enumerate(history):
        fp = state.fingerprint(op["arguments"])
        if op["op"] == "dispatch":
            state = state.record_dispatch(op["callId"], op["tool"], fp)
        elif op["op"] == "approve":
            state = state.record_approval(
                op["approvalId"],
                tool=op["tool"],
                call_id=op["callId"],
                fingerprint=fp,
                now=instant(op["at"]),
            )
        else:
            decision = decide(ir, state, to_call(op), instant(op["at"]))
            got = {"outcome": decision.outcome, "reason": decision.reason}
            assert got == op["expect"], f"history/{i}: {got}"
            if decision.outcome == ALLOW:
                assert decision.fingerprint == fp
                state = state.record_dispatch(op["callId"], op["tool"], fp)
    return state


def check_explanation(actual: Any, expected: Any) -> None:
    if expected is None:
        assert actual is None
        return
    assert actual is not None, "no explanation"
    for name, value in expected.items():
        assert getattr(actual, name) == value, (name, actual)


def check_disclosure(d: Disclosure, expect: Mapping[str, Any]) -> None:
    def omissions(items: tuple[Any, ...], wanted: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for j, o in enumerate(items):
            given = wanted[j] if j < len(wanted) else {}
            item = {"id": o.id, "reason": o.reason}
            if "kind" in given:
                item["kind"] = o.kind
            if "pointer" in given:
                item["pointer"] = o.explanation.pointer
            out.append(item)
        return out

    actual: dict[str, Any] = {
        "status": d.status,
        "reason": d.reason,
        "profile": d.profile,
        "tools": [t.id for t in d.tools],
        "messages": [m.id for m in d.messages],
        "tokens": d.tokens.to_json(),
    }
    for name in ("status", "reason", "profile", "tools", "messages"):
        if name in expect:
            assert actual[name] == expect[name], (name, actual[name])
    if "tokens" in expect:
        got = {k: actual["tokens"][k] for k in expect["tokens"]}
        assert got == expect["tokens"], ("tokens", actual["tokens"])
    for name in ("omitted", "causes"):
        if name in expect:
            got = omissions(getattr(d, name), expect[name])
            assert got == expect[name], (name, got)
    if d.reason is not None:
        assert d.reason in REASON_CODES
    for o in (*d.omitted, *d.causes):
        assert o.reason in REASON_CODES


def check_decision(decision: Decision, expect: Mapping[str, Any]) -> None:
    assert decision.outcome == expect["outcome"], decision
    assert decision.reason == expect["reason"], decision
    if decision.reason is not None:
        assert decision.reason in REASON_CODES
    if "explanation" in expect:
        check_explanation(decision.explanation, expect["explanation"])
    if "approvalRequired" in expect:
        assert decision.approval_required == expect["approvalRequired"]
    if "errors" in expect:
        got = sorted((e.pointer, e.keyword) for e in decision.errors)
        assert got == sorted((e["pointer"], e["keyword"]) for e in expect["errors"]), got
        assert all(e.message for e in decision.errors)
    elif decision.reason == "ARGUMENTS_INVALID":
        assert decision.errors, "ARGUMENTS_INVALID without errors"


def run(case: dict[str, Any]) -> None:
    ir = project_of(case)
    observations = observations_of(ir, case["observations"])
    context = case.get("context")
    disclosure = disclose(ir, case["objective"], observations, context=context)
    again = disclose(ir, case["objective"], observations, context=context)
    assert disclosure.to_json() == again.to_json(), "disclose is not deterministic"
    expect = case["expect"]
    if "call" not in case:
        check_disclosure(disclosure, expect)
        return
    if "disclosure" in expect:
        check_disclosure(disclosure, expect["disclosure"])
    state = None
    if case.get("contextOpened", True) and disclosure.resolved:
        state = ContextState.open(
            "ctx-1", disclosure, instant(case["resolvedAt"]), coordinates=context
        )
        state = replay(ir, state, case.get("history", []))
    elif case.get("history"):
        raise CaseError("history needs an opened context")
    call, now = to_call(case["call"]), instant(case["now"])
    decision = decide(ir, state, call, now)
    again = decide(ir, state, call, now)
    assert again == decision and again.to_json() == decision.to_json(), "not deterministic"
    check_decision(decision, expect)


MINIMAL = {
    "description": "d",
    "projectFile": "p.json",
    "objective": "o",
    "observations": {},
    "expect": {"status": "RESOLVED", "reason": None},
}
MINIMAL_CALL = {
    **MINIMAL,
    "resolvedAt": 0,
    "now": 1,
    "call": {"tool": "t", "callId": "c", "arguments": {}},
    "expect": {"outcome": "ALLOW", "reason": None},
}


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({**MINIMAL, "extra": 1}),
        json.dumps({**MINIMAL, "expect": {}}),
        json.dumps({**MINIMAL, "expect": {"status": "RESOLVED", "reason": None, "tool": []}}),
        json.dumps({**MINIMAL, "now": 1}),
        json.dumps({**MINIMAL, "project": {}}),
        '{"description": "d", "description": "e"}',
        '{"description": NaN}',
        json.dumps({**MINIMAL_CALL, "expect": {"outcome": "ALLOW"}}),
        json.dumps({**MINIMAL_CALL, "expect": {"outcome": "DENY", "reason": "NOT_A_CODE"}}),
        json.dumps({**MINIMAL_CALL, "expect": {"outcome": "DENY", "reason": None}}),
        json.dumps(
            {**MINIMAL_CALL, "expect": {"outcome": "DENY", "reason": "CALL_CONFLICT", "errors": []}}
        ),
        json.dumps(
            {
                **MINIMAL_CALL,
                "expect": {"outcome": "ALLOW", "reason": None, "explanation": {"rule": 0}},
            }
        ),
        json.dumps(
            {**MINIMAL_CALL, "expect": {"outcome": "ALLOW", "reason": None, "disclosure": {}}}
        ),
        json.dumps({**MINIMAL_CALL, "history": [{"op": "undo"}]}),
        json.dumps({**MINIMAL_CALL, "history": [{"op": "dispatch", "tool": "t", "callId": "c"}]}),
        json.dumps(
            {**MINIMAL_CALL, "call": {"tool": "t", "callId": "c", "arguments": {}, "approval": "a"}}
        ),
    ],
)
def test_loader_is_strict(text: str) -> None:
    with pytest.raises(CaseError):
        parse_case(text)


def test_loader_accepts_minimal_cases() -> None:
    assert parse_case(json.dumps(MINIMAL))["objective"] == "o"
    assert parse_case(json.dumps(MINIMAL_CALL))["now"] == 1


def test_skip_list_names_cases_with_reasons() -> None:
    assert isinstance(SKIP, dict)
    for name, reason in SKIP.items():
        assert name in CASES, name
        assert isinstance(reason, str) and reason.strip(), name


def test_corpus_is_not_empty() -> None:
    assert len(CASES) >= 60


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(reason=SKIP[n], strict=True, raises=AssertionError))
        if n in SKIP
        else n
        for n in CASES
    ],
)
def test_decision_case(name: str) -> None:
    run(load(name))
