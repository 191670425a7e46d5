"""Disclosure: which context messages and tool schemas a profile receives, and why.

``disclose(ir, objective, observations, context=..., principal=...)`` is pure: the availability
observations, the context coordinates and the principal (who resolves:
:mod:`policy.engine.principal`) are arguments, and the result says what was disclosed, what was
omitted and why, and the estimated token figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policy import reasons as R
from policy.cel.expression import evaluate
from policy.engine.explanations import profile_pointer, rule_explanation
from policy.engine.principal import principal_value
from policy.explain import Explanation
from policy.ir import (
    COORDINATE_FIELDS,
    ContextMessage,
    Fixture,
    Profile,
    Project,
    Tool,
    ToolRule,
)
from policy.json.value import FrozenMap

Observations = Mapping[str, Fixture | Mapping[str, Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Omission:
    """A candidate tool (or an optional message) that was not disclosed, and why."""

    id: str
    reason: str
    explanation: Explanation
    kind: str = "tool"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "reason": self.reason,
            "explanation": self.explanation.to_json(),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Tokens:
    messages: int = 0
    tools: int = 0
    ceiling: int = 0
    estimated: bool = True

    @property
    def total(self) -> int:
        return self.messages + self.tools

    def to_json(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "tools": self.tools,
            "total": self.total,
            "ceiling": self.ceiling,
            "estimated": self.estimated,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Disclosure:
    """What one resolution disclosed. ``status`` is ``RESOLVED`` or ``BLOCKED``; a blocked or
    unknown-objective resolution discloses nothing and lists its ``causes``."""

    objective: str
    status: str
    reason: str | None = None
    profile: str | None = None
    messages: tuple[ContextMessage, ...] = ()
    tools: tuple[Tool, ...] = ()
    omitted: tuple[Omission, ...] = ()
    causes: tuple[Omission, ...] = ()
    tokens: Tokens = field(default_factory=Tokens)
    tool_ids: frozenset[str] = frozenset()

    @property
    def resolved(self) -> bool:
        return self.status == "RESOLVED"

    def contracts(self) -> list[dict[str, Any]]:
        return [
            {
                "id": t.id,
                "name": t.name,
                "version": t.version,
                "contractDigest": t.contract_digest,
                "effect": t.effect,
                "approval": t.approval,
                "maxCalls": t.max_calls,
            }
            for t in self.tools
        ]

    def to_json(self) -> dict[str, Any]:
        """The provider-neutral result: messages, model-facing schemas, contracts, omissions."""
        out: dict[str, Any] = {
            "objective": self.objective,
            "status": self.status,
            "reason": self.reason,
            "profile": self.profile,
            "messages": [{"id": m.id, "role": m.role, "text": m.text} for m in self.messages],
            "tools": [dict(t.model_schema) for t in self.tools],
            "contracts": self.contracts(),
            "omitted": [o.to_json() for o in self.omitted],
            "tokens": self.tokens.to_json(),
        }
        if self.causes:
            out["causes"] = [o.to_json() for o in self.causes]
        return out


def availability(tool: Tool, observation: Fixture | Mapping[str, Any] | None) -> str | None:
    """None when ``observation`` shows ``tool`` ready with its declared contract; else the
    reason code (``TOOL_UNAVAILABLE``, ``TOOL_INCOMPATIBLE``; ``UPSTREAM_CHANGED`` for a tool
    pinned to an upstream MCP server whose observation says the upstream's descriptor changed)."""
    if observation is None:
        return R.TOOL_UNAVAILABLE
    if isinstance(observation, Fixture):
        state: Any = observation.state
        version: Any = observation.version
        digest: Any = observation.contract_digest
    else:
        state = observation.get("state")
        version, digest = observation.get("version"), observation.get("contractDigest")
    if state != "READY":
        return R.TOOL_UNAVAILABLE
    if version != tool.version or digest != tool.contract_digest:
        changed = (
            isinstance(observation, Mapping) and observation.get("detail") == R.UPSTREAM_CHANGED
        )
        return R.UPSTREAM_CHANGED if tool.upstream is not None and changed else R.TOOL_INCOMPATIBLE
    return None


def disclosure_context(objective: str, context: Mapping[str, Any] | None) -> FrozenMap:
    """The CEL ``context`` of a resolution: objective, consumer, environment, deployment."""
    given = context or {}
    return FrozenMap(
        objective=objective, **{name: str(given.get(name) or "") for name in COORDINATE_FIELDS}
    )


@dataclass(slots=True)
class _Admission:
    """The token budget, admitting items in the spec's order."""

    ceiling: int
    messages: int = 0
    tools: int = 0

    def fits(self, tokens: int) -> bool:
        return self.messages + self.tools + tokens <= self.ceiling


def _candidates(
    ir: Project, profile: Profile, observations: Observations, activation: Mapping[str, Any]
) -> tuple[list[tuple[Tool, ToolRule]], list[Omission]]:
    """Included tools that are available and whose rule applies, in rule order; and the
    omissions of the others."""
    ready: list[tuple[Tool, ToolRule]] = []
    omitted: list[Omission] = []
    for rule in profile.tool_rules:
        if rule.participation != "include":
            continue
        tool = ir.tool_by_id[rule.tool]
        reason = _rule_applies(rule, activation) or availability(tool, observations.get(tool.id))
        if reason is None:
            ready.append((tool, rule))
        else:
            omitted.append(
                Omission(
                    id=tool.id, reason=reason, explanation=rule_explanation(ir, profile.id, tool.id)
                )
            )
    return ready, omitted


def _rule_applies(rule: ToolRule, activation: Mapping[str, Any]) -> str | None:
    if rule.when_program is None:
        return None
    result = evaluate(rule.when_program, activation)
    if result.value is None:
        return R.CONDITION_ERROR
    return None if result.value else R.CONDITION_NOT_MET


def disclose(
    ir: Project,
    objective: str,
    observations: Observations,
    context: Mapping[str, Any] | None = None,
    principal: Mapping[str, Any] | None = None,
) -> Disclosure:
    """Resolve ``objective``: its profile's messages and the tools it may see, under budget.
    ``principal``: who resolves, as JSON or :func:`~policy.engine.principal.principal_value`
    (None: no one known, every field null)."""
    chosen = ir.objective_by_id.get(objective)
    if chosen is None:
        return Disclosure(objective=objective, status="BLOCKED", reason=R.OBJECTIVE_UNKNOWN)
    profile: Profile = ir.profile_by_id[chosen.profile]
    activation = {
        "context": disclosure_context(objective, context),
        "principal": principal_value(principal),
    }
    ready, omitted = _candidates(ir, profile, observations, activation)
    causes = [o for o in omitted if _is_required(profile, o.id) and o.reason != R.CONDITION_NOT_MET]
    omitted = [o for o in omitted if o not in causes]
    budget = _Admission(profile.token_ceiling)
    messages, tools, blocking, over = _admit(ir, profile, ready, budget)
    causes = _declared_order(profile, causes + blocking)
    omitted = _declared_order(profile, omitted + over)
    tokens = Tokens(messages=budget.messages, tools=budget.tools, ceiling=budget.ceiling)
    if causes:
        return Disclosure(
            objective=objective,
            status="BLOCKED",
            reason=R.RESOLUTION_BLOCKED,
            profile=profile.id,
            causes=tuple(causes),
            omitted=tuple(omitted),
            tokens=Tokens(ceiling=budget.ceiling),
        )
    order = {t.id: i for i, (t, _) in enumerate(ready)}
    tools.sort(key=lambda t: order[t.id])
    return Disclosure(
        objective=objective,
        status="RESOLVED",
        profile=profile.id,
        messages=tuple(messages),
        tools=tuple(tools),
        omitted=tuple(omitted),
        tokens=tokens,
        tool_ids=frozenset(t.id for t in tools),
    )


def _declared_order(profile: Profile, items: list[Omission]) -> list[Omission]:
    """Messages in context order, then tools in rule order."""
    position = {m.id: i for i, m in enumerate(profile.context)}

    def key(o: Omission) -> tuple[int, int]:
        if o.kind == "message":
            return (0, position[o.id])
        return (1, int(profile.rule_index[o.id]))

    return sorted(items, key=key)


def _is_required(profile: Profile, tool_id: str) -> bool:
    rule: ToolRule = profile.tool_rules[profile.rule_index[tool_id]]
    return rule.required


def _admit(
    ir: Project, profile: Profile, ready: list[tuple[Tool, ToolRule]], budget: _Admission
) -> tuple[list[ContextMessage], list[Tool], list[Omission], list[Omission]]:
    """Admit required messages, required tools, optional messages, optional tools, in that
    order. Returns what fit, the required items that did not (they block the resolution) and
    the optional ones that did not (they are omitted)."""
    messages: list[ContextMessage] = []
    tools: list[Tool] = []
    blocking: list[Omission] = []
    over: list[Omission] = []
    base = profile_pointer(ir, profile.id)
    for required in (True, False):
        misses = blocking if required else over
        for i, message in enumerate(profile.context):
            if message.required != required:
                continue
            if budget.fits(message.tokens):
                budget.messages += message.tokens
                messages.append(message)
                continue
            misses.append(
                Omission(
                    id=message.id,
                    reason=R.TOKEN_BUDGET_EXCEEDED,
                    kind="message",
                    explanation=Explanation(
                        pointer=f"{base}/context/{i}",
                        profile=profile.id,
                        detail=f"{message.tokens} estimated tokens",
                    ),
                )
            )
        for tool, rule in ready:
            if rule.required != required:
                continue
            if budget.fits(tool.tokens):
                budget.tools += tool.tokens
                tools.append(tool)
                continue
            misses.append(
                Omission(
                    id=tool.id,
                    reason=R.TOKEN_BUDGET_EXCEEDED,
                    explanation=rule_explanation(
                        ir, profile.id, tool.id, f"{tool.tokens} estimated tokens"
                    ),
                )
            )
    position = {m.id: i for i, m in enumerate(profile.context)}
    messages.sort(key=lambda m: position[m.id])
    return messages, tools, blocking, over
