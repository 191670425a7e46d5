"""The policy IR: immutable values compiled from a project declaration.

Every class is a frozen, slotted dataclass; collections are tuples and JSON documents are frozen
(:mod:`policy.json.value`). Field metadata names the declaration key of each field and the rule it
follows (:mod:`policy.constraints`), so the IR's encoding *is* the normalized declaration: the
compiler can re-check a decoded build with the same passes as a source file. Fields marked
``DERIVED`` (contract digests, compiled validators and CEL programs, token estimates) are
computed once on construction and take part neither in equality nor in the encoding.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policy.cel.expression import CompiledExpression, compile_expression
from policy.constraints import (
    DERIVED,
    DESCRIPTOR_DIGEST,
    ID,
    NAME,
    SEMVER,
    Exactly,
    JsonAny,
    JsonObject,
    Length,
    OneOf,
    Range,
    key,
)
from policy.explain import Explanation
from policy.json.canonical import canonical_json_bytes
from policy.json.digest import contract_digest
from policy.json.value import EMPTY_MAP, FrozenMap, JsonValue
from policy.schema.validator import Validator, compile_validator

PROJECT_FORMAT = "seif.context-project.v1"
ROLES = ("system", "developer", "user", "assistant")
PARTICIPATION = ("include", "exclude")
EFFECTS = ("read", "write")
APPROVALS = ("none", "required")
FIXTURE_STATES = ("READY", "UNAVAILABLE")
CONDITION_ACTIONS = ("DENY", "REQUIRE_APPROVAL")
EXPECT_OUTCOMES = ("ALLOW", "DENY")
RESOLUTIONS = ("RESOLVED", "BLOCKED")
COORDINATE_FIELDS = ("consumer", "environment", "deployment")
MAX_COORDINATE_LENGTH = 256
"""A coordinate is at most as long as the runtime accepts one (``servers.wire.limits``)."""


def _derived(**kw: Any) -> Any:
    return field(init=False, compare=False, repr=False, metadata=DERIVED, **kw)


def estimate_tokens(data: bytes) -> int:
    """The spec's estimate: ``ceil(utf8_bytes / 4)``."""
    return math.ceil(len(data) / 4)


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextMessage:
    id: str = field(metadata=key("id", ID))
    role: str = field(metadata=key("role", OneOf(ROLES)))
    text: str = field(metadata=key("text", Length(1, 1 << 20)))
    required: bool = field(default=True, metadata=key("required"))
    tokens: int = _derived()

    def __post_init__(self) -> None:
        object.__setattr__(self, "tokens", estimate_tokens(self.text.encode("utf-8")))


@dataclass(frozen=True, slots=True, kw_only=True)
class Condition:
    when: str = field(metadata=key("when", Length(1, 1 << 16)))
    then: str = field(metadata=key("then", OneOf(CONDITION_ACTIONS)))
    reason: str = field(default="", metadata=key("reason", Length(0, 1024)))
    program: CompiledExpression = _derived()

    def __post_init__(self) -> None:
        object.__setattr__(self, "program", compile_expression(self.when, "call"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolRule:
    tool: str = field(metadata=key("tool", ID))
    participation: str = field(metadata=key("participation", OneOf(PARTICIPATION)))
    required: bool = field(default=False, metadata=key("required"))
    when: str | None = field(default=None, metadata=key("when", Length(1, 1 << 16)))
    conditions: tuple[Condition, ...] = field(default=(), metadata=key("conditions"))
    when_program: CompiledExpression | None = _derived()

    def __post_init__(self) -> None:
        program = None if self.when is None else compile_expression(self.when, "disclosure")
        object.__setattr__(self, "when_program", program)


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    id: str = field(metadata=key("id", ID))
    token_ceiling: int = field(metadata=key("tokenCeiling", Range(1, 1_000_000), optional=True))
    context: tuple[ContextMessage, ...] = field(default=(), metadata=key("context"))
    tool_rules: tuple[ToolRule, ...] = field(default=(), metadata=key("toolRules"))
    rule_index: FrozenMap = _derived()
    """tool id -> index of its rule in ``tool_rules``."""
    rule_by_tool: FrozenMap = _derived()
    """tool id -> its rule."""

    def __post_init__(self) -> None:
        index = FrozenMap((rule.tool, i) for i, rule in enumerate(self.tool_rules))
        object.__setattr__(self, "rule_index", index)
        object.__setattr__(self, "rule_by_tool", FrozenMap((r.tool, r) for r in self.tool_rules))


@dataclass(frozen=True, slots=True, kw_only=True)
class Objective:
    id: str = field(metadata=key("id", ID))
    profile: str = field(metadata=key("profile", ID))
    description: str | None = field(default=None, metadata=key("description", Length(0, 4096)))


@dataclass(frozen=True, slots=True, kw_only=True)
class Upstream:
    """The pin of a tool imported from an upstream MCP server (docs/upstream-mcp.md): the
    server's id in the project and in bindings, the upstream tool's name, and the digest of its
    descriptor as the upstream listed it when imported."""

    server: str = field(metadata=key("server", ID))
    tool: str = field(metadata=key("tool", Length(1, 128)))
    descriptor_digest: str = field(metadata=key("descriptorDigest", DESCRIPTOR_DIGEST))

    def to_json(self) -> dict[str, str]:
        digest = self.descriptor_digest
        return {"server": self.server, "tool": self.tool, "descriptorDigest": digest}


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    id: str = field(metadata=key("id", ID))
    name: str = field(metadata=key("name", NAME))
    version: str = field(metadata=key("version", SEMVER))
    description: str = field(metadata=key("description", Length(1, 1024)))
    parameters: FrozenMap = field(metadata=key("parameters", JsonObject()))
    result: FrozenMap | None = field(default=None, metadata=key("result", JsonObject()))
    effect: str = field(metadata=key("effect", OneOf(EFFECTS)))
    approval: str = field(metadata=key("approval", OneOf(APPROVALS), optional=True))
    max_calls: int = field(metadata=key("maxCalls", Range(1, 20), optional=True))
    timeout_ms: int = field(metadata=key("timeoutMs", Range(100, 30000), optional=True))
    upstream: Upstream | None = field(default=None, metadata=key("upstream"))
    """Absent (None) for every tool not imported from an upstream MCP server, so that neither its
    encoding nor its contract digest changes."""
    contract_digest: str = _derived()
    model_schema: FrozenMap = _derived()
    tokens: int = _derived()
    validator: Validator = _derived()
    result_validator: Validator | None = _derived()

    def __post_init__(self) -> None:
        digest = contract_digest(
            id=self.id,
            name=self.name,
            version=self.version,
            parameters=self.parameters,
            result=self.result,
            upstream=None if self.upstream is None else self.upstream.to_json(),
        )
        model = FrozenMap(name=self.name, description=self.description, parameters=self.parameters)
        set_ = object.__setattr__
        set_(self, "contract_digest", digest)
        set_(self, "model_schema", model)
        set_(self, "tokens", estimate_tokens(canonical_json_bytes(model)))
        set_(self, "validator", compile_validator(self.parameters))
        set_(
            self,
            "result_validator",
            None if self.result is None else compile_validator(self.result),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Fixture:
    state: str = field(metadata=key("state", OneOf(FIXTURE_STATES)))
    version: str | None = field(default=None, metadata=key("version", SEMVER))
    contract_digest: str | None = field(
        default=None, metadata=key("contractDigest", Length(1, 200))
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TestCall:
    tool: str = field(metadata=key("tool", ID))
    arguments: JsonValue = field(default=EMPTY_MAP, metadata=key("arguments", JsonAny()))
    expect: str = field(metadata=key("expect", OneOf(EXPECT_OUTCOMES)))
    reason: str | None = field(default=None, metadata=key("reason", Length(1, 64)))
    approved: bool = field(default=False, metadata=key("approved"))
    call_id: str | None = field(default=None, metadata=key("callId", Length(1, 256)))


@dataclass(frozen=True, slots=True, kw_only=True)
class Membership:
    """``include`` / ``exclude`` id lists of a test expectation."""

    include: tuple[str, ...] = field(default=(), metadata=key("include"))
    exclude: tuple[str, ...] = field(default=(), metadata=key("exclude"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExpectation:
    include: tuple[str, ...] = field(default=(), metadata=key("include"))
    exclude: tuple[str, ...] = field(default=(), metadata=key("exclude"))
    calls: tuple[TestCall, ...] = field(default=(), metadata=key("calls"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Expectation:
    resolution: str = field(default="RESOLVED", metadata=key("resolution", OneOf(RESOLUTIONS)))
    causes: tuple[str, ...] = field(default=(), metadata=key("causes"))
    context: Membership | None = field(default=None, metadata=key("context"))
    tools: ToolExpectation | None = field(default=None, metadata=key("tools"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Coordinates:
    """The coordinates of a test's simulated context, as an application gives them when it
    resolves one: each optional; an absent one reads as the empty string in CEL's ``context``."""

    consumer: str | None = field(
        default=None, metadata=key("consumer", Length(0, MAX_COORDINATE_LENGTH))
    )
    environment: str | None = field(
        default=None, metadata=key("environment", Length(0, MAX_COORDINATE_LENGTH))
    )
    deployment: str | None = field(
        default=None, metadata=key("deployment", Length(0, MAX_COORDINATE_LENGTH))
    )

    def given(self) -> dict[str, str]:
        """The coordinates given, by name, in the order ``consumer, environment, deployment``."""
        values = (self.consumer, self.environment, self.deployment)
        return {k: v for k, v in zip(COORDINATE_FIELDS, values, strict=True) if v is not None}


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulatedPrincipal:
    """The principal of a test's simulated context and calls (what conditions read as
    ``principal``): each optional; an absent ``issuer``, ``subject`` or ``clientId`` reads as
    null, absent ``claims`` as none. Each claim is a string, a number, a boolean or a list of
    strings, as an issuer's allowlisted claims are (checked by the ``resolve`` pass)."""

    issuer: str | None = field(default=None, metadata=key("issuer", ID))
    subject: str | None = field(default=None, metadata=key("subject", Length(1, 512)))
    client_id: str | None = field(default=None, metadata=key("clientId", Length(1, 512)))
    claims: FrozenMap = field(default=EMPTY_MAP, metadata=key("claims", JsonObject()))

    def to_json(self) -> dict[str, Any]:
        """``{issuer, subject, clientId, claims}`` as the engine reads it."""
        return {
            "issuer": self.issuer,
            "subject": self.subject,
            "clientId": self.client_id,
            "claims": self.claims,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectTest:
    id: str = field(metadata=key("id", ID))
    objective: str = field(metadata=key("objective", ID))
    description: str | None = field(default=None, metadata=key("description", Length(0, 4096)))
    guard: bool = field(default=False, metadata=key("guard"))
    fixtures: str | Mapping[str, Fixture] | None = field(
        default=None, metadata=key("fixtures", OneOf(("current",)))
    )
    coordinates: Coordinates | None = field(default=None, metadata=key("coordinates"))
    """Absent (None) in every test written before tests had coordinates, so that their encoding,
    hence their build digest, is unchanged."""
    principal: SimulatedPrincipal | None = field(default=None, metadata=key("principal"))
    """Who the test's context is resolved and its calls made by; absent (None) in a test
    written before tests had one, which runs with no principal known (every field null)."""
    expect: Expectation = field(default=Expectation(), metadata=key("expect"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Project:
    """A compiled project: the root of the IR."""

    format: str = field(
        default=PROJECT_FORMAT,
        metadata=key("format", Exactly(PROJECT_FORMAT, "FORMAT_UNSUPPORTED"), required=True),
    )
    id: str = field(metadata=key("id", ID))
    version: str = field(metadata=key("version", SEMVER))
    description: str | None = field(default=None, metadata=key("description", Length(0, 4096)))
    objectives: tuple[Objective, ...] = field(metadata=key("objectives"))
    profiles: tuple[Profile, ...] = field(metadata=key("profiles"))
    tools: tuple[Tool, ...] = field(default=(), metadata=key("tools"))
    tool_fixtures: Mapping[str, Fixture] = field(default=EMPTY_MAP, metadata=key("toolFixtures"))
    tests: tuple[ProjectTest, ...] = field(default=(), metadata=key("tests"))
    tool_by_id: FrozenMap = _derived()
    tool_id_by_name: FrozenMap = _derived()
    """function name -> tool id (names are unique per project: ``DUPLICATE_NAME``), so a call
    may name its tool as the model saw it."""
    profile_by_id: FrozenMap = _derived()
    objective_by_id: FrozenMap = _derived()
    tool_position: FrozenMap = _derived()
    profile_position: FrozenMap = _derived()
    rule_explanations: FrozenMap = _derived()
    """profile id -> tool id -> the explanation of that tool rule (no detail), built once."""
    approval_explanations: FrozenMap = _derived()
    """tool id -> why a call of it needs approval, built once."""
    parameter_explanations: FrozenMap = _derived()
    """tool id -> the explanation of an argument refusal (its ``/parameters``), built once."""
    candidate_tools: FrozenMap = _derived()
    """objective id -> the tools its profile includes (the ones a resolution observes)."""
    disclosure_principal: FrozenMap = _derived()
    """objective id -> the fields of ``principal`` its disclosure reads (the ``when`` of its
    profile's included rules; ``*``: any): empty for most, whose disclosure no principal
    changes."""
    approval_tools: frozenset[str] = _derived()
    """The tools a call of which may need an approval in some profile (``approval:
    "required"``, or a rule with a ``REQUIRE_APPROVAL`` condition): for any other tool the
    approvals of a context cannot change a decision."""

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(
            self,
            "rule_explanations",
            FrozenMap(
                (
                    p.id,
                    FrozenMap(
                        (
                            r.tool,
                            Explanation(
                                pointer=f"/profiles/{i}/toolRules/{j}",
                                profile=p.id,
                                rule=j,
                                tool=r.tool,
                            ),
                        )
                        for j, r in enumerate(p.tool_rules)
                    ),
                )
                for i, p in enumerate(self.profiles)
            ),
        )
        set_(
            self,
            "approval_explanations",
            FrozenMap(
                (
                    t.id,
                    Explanation(
                        pointer=f"/tools/{i}",
                        tool=t.id,
                        detail=f"{t.effect} tool: approval required",
                    ),
                )
                for i, t in enumerate(self.tools)
            ),
        )
        set_(
            self,
            "parameter_explanations",
            FrozenMap(
                (t.id, Explanation(pointer=f"/tools/{i}/parameters", tool=t.id))
                for i, t in enumerate(self.tools)
            ),
        )
        conditional = {
            r.tool
            for p in self.profiles
            for r in p.tool_rules
            if any(c.then == "REQUIRE_APPROVAL" for c in r.conditions)
        }
        required = {t.id for t in self.tools if t.approval == "required"}
        set_(self, "approval_tools", frozenset(conditional | required))
        rules = {p.id: p.tool_rules for p in self.profiles}
        included = {
            o.id: tuple(r.tool for r in rules.get(o.profile, ()) if r.participation == "include")
            for o in self.objectives
        }
        set_(self, "candidate_tools", FrozenMap(included))
        reads = {
            p.id: frozenset().union(
                *(
                    r.when_program.principal
                    for r in p.tool_rules
                    if r.participation == "include" and r.when_program is not None
                )
            )
            for p in self.profiles
        }
        set_(
            self,
            "disclosure_principal",
            FrozenMap((o.id, reads.get(o.profile, frozenset())) for o in self.objectives),
        )
        set_(self, "tool_by_id", FrozenMap((t.id, t) for t in self.tools))
        set_(self, "tool_id_by_name", FrozenMap((t.name, t.id) for t in self.tools))
        set_(self, "profile_by_id", FrozenMap((p.id, p) for p in self.profiles))
        set_(self, "objective_by_id", FrozenMap((o.id, o) for o in self.objectives))
        set_(self, "tool_position", FrozenMap((t.id, i) for i, t in enumerate(self.tools)))
        set_(self, "profile_position", FrozenMap((p.id, i) for i, p in enumerate(self.profiles)))

    @property
    def has_tools(self) -> bool:
        return bool(self.tools)

    def tool(self, tool_id: str) -> Tool | None:
        found: Tool | None = self.tool_by_id.get(tool_id)
        return found
