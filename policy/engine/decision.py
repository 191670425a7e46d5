"""Call decisions: ``decide(ir, context_state, call, now, principal) -> Decision``.

Seven checks in the spec's order, the first failure deciding: the context, disclosure,
duplicates and conflicts, arguments, CEL conditions, the call limit, approval. A decision is a
value that says why; a denied call leaves no trace in the state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from policy import reasons as R
from policy.cel.expression import evaluate
from policy.engine.explanations import condition_explanation, rule_explanation, tool_explanation
from policy.engine.principal import PrincipalValue, principal_value
from policy.engine.state import Call, ContextState, Instant, millis
from policy.explain import Explanation
from policy.ir import Project, Tool
from policy.json.canonical import EncodingError, integral
from policy.schema.parsed import SchemaError

ALLOW, DENY, DUPLICATE = "ALLOW", "DENY", "DUPLICATE"


class Decision(NamedTuple):
    """The decision on one call: its outcome, reason code, explanation and fingerprint.

    Immutable. A named tuple rather than a frozen dataclass because one is built per call and
    a frozen dataclass's ``__init__`` costs about a microsecond more; build it with keywords.
    """

    outcome: str
    reason: str | None
    tool: str
    call_id: str
    explanation: Explanation | None = None
    fingerprint: str | None = None
    approval_required: bool = False
    errors: tuple[SchemaError, ...] = ()

    @property
    def allowed(self) -> bool:
        return self.outcome == ALLOW

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "outcome": self.outcome,
            "reason": self.reason,
            "tool": self.tool,
            "callId": self.call_id,
            "approvalRequired": self.approval_required,
            "explanation": self.explanation.to_json() if self.explanation else None,
        }
        if self.errors:
            out["errors"] = [
                {"pointer": e.pointer, "keyword": e.keyword, "message": e.message}
                for e in self.errors
            ]
        return out


def _deny(call: Call, reason: str, explanation: Explanation | None = None, **kw: Any) -> Decision:
    return Decision(
        outcome=DENY,
        reason=reason,
        tool=call.tool,
        call_id=call.call_id,
        explanation=explanation,
        **kw,
    )


def decide(
    ir: Project,
    context_state: ContextState | None,
    call: Call,
    now: Instant,
    principal: Mapping[str, Any] | None = None,
) -> Decision:
    """Decide one call against one context at ``now`` (int ms or an aware datetime), made by
    ``principal`` (what conditions read as ``principal``: JSON or
    :func:`~policy.engine.principal.principal_value`; None: no one known, every field null)."""
    t = millis(now)
    if context_state is None:
        return _deny(call, R.CONTEXT_UNKNOWN)
    if t >= context_state.expires_at:
        return _deny(call, R.CONTEXT_EXPIRED, detail_of(f"expired at {context_state.expires_at}"))
    profile = context_state.disclosure.profile or ""
    disclosed = context_state.disclosure.tool_ids
    if call.tool not in disclosed:  # a tool id first, then the function name the model saw
        named = ir.tool_id_by_name.get(call.tool)
        if named not in disclosed:
            return _deny(call, R.TOOL_NOT_DISCLOSED, _not_disclosed(ir, context_state, call.tool))
        call = Call(
            tool=named, call_id=call.call_id, arguments=call.arguments, approval_id=call.approval_id
        )
    tool: Tool = ir.tool_by_id[call.tool]
    try:
        fp = context_state.fingerprint(call.arguments)
    except EncodingError as exc:  # NaN, infinity, a non-string key: not JSON, never one call
        return _not_json(ir, call, tool, exc)
    prior = context_state.dispatched.get(call.call_id)
    if prior is not None:
        if prior.tool == call.tool and prior.fingerprint == fp:
            return Decision(
                outcome=DUPLICATE,
                reason=R.DUPLICATE_CALL,
                tool=call.tool,
                call_id=call.call_id,
                fingerprint=fp,
                explanation=rule_explanation(ir, profile, call.tool),
            )
        return _deny(
            call, R.CALL_CONFLICT, rule_explanation(ir, profile, call.tool), fingerprint=fp
        )
    return _after_identity(ir, context_state, call, tool, fp, t, principal)


def _not_json(ir: Project, call: Call, tool: Tool, exc: EncodingError) -> Decision:
    errors = tool.validator.errors(call.arguments) or (
        SchemaError(pointer=exc.pointer, keyword="type", message=exc.message),
    )
    why = ir.parameter_explanations[tool.id]
    return _deny(call, R.ARGUMENTS_INVALID, why, errors=errors)


def detail_of(text: str) -> Explanation:
    return Explanation(pointer="", detail=text)


SHOWN = 64
"""How much of a tool the client sent, neither an id nor a name, a denial repeats."""


def _not_disclosed(ir: Project, state: ContextState, sent: str) -> Explanation | None:
    profile = state.disclosure.profile
    if profile is None:
        return None
    tool_id = sent if sent in ir.tool_by_id else ir.tool_id_by_name.get(sent)
    if tool_id is None:
        names = ", ".join(t.name for t in state.disclosure.tools) or "none"
        shown = sent if len(sent) <= SHOWN else f"{sent[:SHOWN]}…(+{len(sent) - SHOWN})"
        return Explanation(
            pointer="/tools",
            tool=shown,
            detail=f"no tool has the id or function name `{shown}`; this context discloses: "
            f"{names}",
        )
    for omission in state.disclosure.omitted:
        if omission.id == tool_id and omission.kind == "tool":
            return Explanation(
                pointer=omission.explanation.pointer,
                profile=profile,
                rule=omission.explanation.rule,
                tool=tool_id,
                detail=f"omitted: {omission.reason}",
            )
    return rule_explanation(ir, profile, tool_id)


def _after_identity(
    ir: Project,
    state: ContextState,
    call: Call,
    tool: Tool,
    fp: str,
    t: int,
    principal: Mapping[str, Any] | None,
) -> Decision:
    profile = state.disclosure.profile or ""
    if not tool.validator.is_valid(call.arguments):
        return _deny(
            call,
            R.ARGUMENTS_INVALID,
            ir.parameter_explanations[tool.id],
            fingerprint=fp,
            errors=tool.validator.errors(call.arguments),
        )
    why_approval: Explanation | None = None
    if tool.approval == "required":
        why_approval = ir.approval_explanations[tool.id]
    rule = ir.profile_by_id[profile].rule_by_tool[tool.id]  # a disclosed tool has a rule
    if rule.conditions:
        who = principal if type(principal) is PrincipalValue else principal_value(principal)
        verdict = _conditions(ir, state, call, profile, rule.conditions, who)
        if isinstance(verdict, Decision):
            return verdict
        why_approval = why_approval or verdict
    explanation = ir.rule_explanations[profile][tool.id]
    if state.counts.get(tool.id, 0) >= tool.max_calls:
        return _deny(
            call,
            R.CALL_LIMIT_EXCEEDED,
            tool_explanation(ir, tool.id, "/maxCalls", f"{tool.max_calls} calls per context"),
            fingerprint=fp,
        )
    if why_approval is not None:
        refusal = _approval(state, call, fp, t)
        if refusal is not None:
            return _deny(call, refusal, why_approval, fingerprint=fp, approval_required=True)
    return Decision(
        outcome=ALLOW,
        reason=None,
        tool=call.tool,
        call_id=call.call_id,
        explanation=explanation,
        fingerprint=fp,
        approval_required=why_approval is not None,
    )


def _conditions(
    ir: Project,
    state: ContextState,
    call: Call,
    profile: str,
    conditions: tuple[Any, ...],
    principal: PrincipalValue,
) -> Decision | Explanation | None:
    """A denial, or the first condition that made approval required (None: none did)."""
    activation = {
        "principal": principal,
        "args": integral(call.arguments),  # one call, one view: 8.0 is 8 here too
        "context": state.coordinates,
        "call": {
            "tool": call.tool,
            "callId": call.call_id,
            "count": state.counts.get(call.tool, 0),
        },
    }
    require: Explanation | None = None
    for i, condition in enumerate(conditions):
        result = evaluate(condition.program, activation)
        if result.value is None:
            why = condition_explanation(
                ir, profile, call.tool, i, f"evaluation failed: {result.error}"
            )
            return _deny(call, R.CONDITION_ERROR, why)
        if result.value and condition.then == "DENY":
            why = condition_explanation(ir, profile, call.tool, i, condition.reason)
            return _deny(call, R.CONDITION_DENIED, why)
        if result.value and require is None:
            require = condition_explanation(ir, profile, call.tool, i, condition.reason)
    return require


def _approval(state: ContextState, call: Call, fp: str, t: int) -> str | None:
    if call.approval_id is None:
        return R.APPROVAL_REQUIRED
    approval = state.approvals.get(call.approval_id)
    if approval is None or (approval.tool, approval.call_id, approval.fingerprint) != (
        call.tool,
        call.call_id,
        fp,
    ):
        return R.APPROVAL_INVALID
    if t >= approval.expires_at:
        return R.APPROVAL_EXPIRED
    return None
