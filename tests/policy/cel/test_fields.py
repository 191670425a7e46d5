"""The fields a condition reads, checked against the tool's parameters and the coordinates
(``policy.cel.fields``): unknown fields are errors with the nearest name, unguarded reads of
optional arguments are warnings with the fix, and nothing declared is refused."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy.cel.expression import check_expression, compile_expression, evaluate
from policy.cel.fields import CONTEXT_SCHEMA, check_fields
from policy.engine.disclosure import disclosure_context

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "ref": {"type": "string"},
        "depth": {"type": "integer"},
        "filter": {
            "type": "object",
            "properties": {"kind": {"type": "string"}, "since": {"type": "integer"}},
            "required": ["kind"],
        },
        "tags": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "weight": {"type": "integer"}},
                "required": ["name"],
            },
        },
        "labels": {"type": "array", "items": {"type": "string"}},
        "extra": {"type": "object", "additionalProperties": True},
        "content-type": {"type": "string"},
    },
    "required": ["ref", "tags", "content-type"],
}


def found(text: str, stage: str = "call") -> list[tuple[str, str, int, int, str]]:
    return [
        (d.code, d.severity, d.line or 0, d.column or 0, d.message)
        for d in check_fields(text, stage, PARAMETERS, "read-entry")
    ]


def test_a_misspelled_argument_is_an_error_naming_the_parameter_it_meant() -> None:
    assert check_expression("args.dept > 2", "call") == []  # the old check let it through
    assert found("args.dept > 2") == [
        (
            "CEL_UNKNOWN_FIELD",
            "error",
            1,
            6,
            "`args.dept`: the tool `read-entry` has no parameter `dept`; did you mean `depth`?",
        )
    ]
    # the place of the field in a longer, multi-line expression
    [(_code, _sev, line, column, _msg)] = found("has(args.depth) &&\n  args.depht > 2")
    assert (line, column) == (2, 8)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("has(args.filter) && args.filter.knd == 'a'", "`args.filter` has no field `knd`; "
         "did you mean `kind`?"),
        ("args.tags[0].nme == 'a'", "`args.tags[0]` has no field `nme`; did you mean `name`?"),
        ("args.tags.exists(t, t.nme == 'a')", "`t` has no field `nme`; did you mean `name`?"),
        ("args.tags.name == 'a'", "`args.tags` is a list and has no field `name`; its items "
         "do: `args.tags[0].name`, `args.tags.all(x, x.name ...)`"),
        ("has(args.labels) && args.labels.name == 'a'", "`args.labels` is a list and has no "
         "field `name`"),
        ("args.`content-type`.x == 'a'", "`args.`content-type`` is a string and has no field"),
        ("has(args.depth) && args['depth'].x == 1", "`args.depth` is an integer"),
        ("args.ref.kind == 'a'", "`args.ref` is a string and has no field `kind`"),
        ("args['rf'] == 'a'", "has no parameter `rf`; did you mean `ref`?"),
        ("has(args.dept)", "has no parameter `dept`; did you mean `depth`?"),
        ("args.zzz == 1", "has no parameter `zzz` (it has `content-type`, `depth`, `extra`"),
        ("args.`content-typ` == 'a'", "`args.`content-typ``: the tool `read-entry` has no "
         "parameter `content-typ`; did you mean `content-type`?"),
        ("context.enviroment == 'p'", "`context` has no field `enviroment`; did you mean "
         "`environment`?"),
        ("call.cont > 1", "`call` has no field `cont`; did you mean `count`?"),
    ],
)  # fmt: skip
def test_unknown_fields_are_errors_with_the_nearest_name(text: str, message: str) -> None:
    [(code, severity, _line, _column, written)] = found(text)
    assert (code, severity) == ("CEL_UNKNOWN_FIELD", "error")
    assert message in written


def test_the_column_is_where_the_field_is_written_even_after_a_backquoted_name() -> None:
    text = "args.`content-type` == 'a' && args.dpth > 1"
    [(_code, _severity, _line, column, _message)] = found(text)
    assert text[column - 1 :].startswith("dpth")


def test_context_fields_are_checked_at_both_stages_and_args_only_at_the_call() -> None:
    for field in ("objective", "consumer", "environment", "deployment"):
        assert found(f"context.{field} == ''", "disclosure") == []
        assert found(f"context.{field} == ''", "call") == []
    assert found("context.enviroment == ''", "disclosure")[0][0] == "CEL_UNKNOWN_FIELD"
    assert found("call.tool == '' && call.callId == '' && call.count > 1") == []
    # `args` and `call` are unknown identifiers at disclosure: that check reports them
    assert found("args.dept > 1", "disclosure") == []


def test_an_open_object_and_an_unknown_tool_are_not_checked() -> None:
    assert found("has(args.extra) && args.extra.anything.at.all == 1") == []
    assert check_fields("args.whatever > 1", "call", None, None) == []
    assert check_fields("args.whatever > 1", "call", {"type": "string"}, "t") == []
    assert check_fields("args.dept > 1", "call", {"type": "object", "properties": {}}, "t")[
        0
    ].message.endswith("(it has none)")


GUARDED = [
    "has(args.depth) && args.depth > 2",
    "args.depth > 2 && has(args.depth)",
    "args.ref == 'a' && has(args.depth) && args.depth > 2",
    "!has(args.depth) || args.depth < 3",
    "args.depth < 3 || !has(args.depth)",
    "has(args.depth) ? args.depth > 2 : false",
    "!has(args.depth) ? true : args.depth > 2",
    "(has(args.depth) && args.depth > 2) || args.ref == ''",
    "!(has(args.depth) && args.depth > 2)",
    "has(args.filter) && args.filter.kind == 'x'",
    "has(args.filter) && has(args.filter.since) && args.filter.since > 1",
    "has(args.filter.since) && args.filter.since > 1 && has(args.filter)",
    "!has(args.filter) || !has(args.filter.since) || args.filter.since > 1",
    "args.tags.all(t, has(t.weight) && t.weight > 1)",
    "args.ref == 'a' && args.tags.size() > 0 && args.`content-type` == 'x'",
    "args.tags[0].name == 'a' && args.tags.all(t, t.name != '')",
]


@pytest.mark.parametrize("text", GUARDED)
def test_guarded_and_required_reads_do_not_warn(text: str) -> None:
    assert check_expression(text, "call") == []
    assert found(text) == []


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("args.depth > 2", "args.depth"),
        ("has(args.depth) || args.depth > 2", "args.depth"),
        ("has(args.depth) ? false : args.depth > 2", "args.depth"),
        ("args.ref == 'a' || args.depth > 2", "args.depth"),
        ("args.filter.kind == 'a'", "args.filter"),
        ("has(args.filter) && args.filter.since > 1", "args.filter.since"),
        ("has(args.filter.since) && args.filter.since > 1", "args.filter"),
        ("args.tags.all(t, t.weight > 1)", "t.weight"),
        ("size(args.labels) > 1", "args.labels"),
    ],
)
def test_an_unguarded_optional_read_is_a_warning_with_the_fix(text: str, path: str) -> None:
    [(code, severity, _line, column, message)] = found(text)
    assert (code, severity) == ("CEL_OPTIONAL_WITHOUT_HAS", "warning")
    assert message.startswith(f"`{path}` is optional: a call without it is denied CONDITION_ERROR")
    assert f"write `has({path}) && ...` (or `!has({path}) || ...`)" in message
    assert text[column - 1 :].startswith(path.rsplit(".", 1)[-1])


def test_the_warning_is_true_a_call_without_the_argument_fails_and_the_fix_holds() -> None:
    bare = compile_expression("args.depth > 2", "call")
    assert evaluate(bare, {"args": {"ref": "a"}}).error == "NO_SUCH_KEY"
    fixed = compile_expression("has(args.depth) && args.depth > 2", "call")
    assert evaluate(fixed, {"args": {"ref": "a"}}).value is False
    assert evaluate(fixed, {"args": {"ref": "a", "depth": 3}}).value is True


def test_one_warning_per_path_per_expression() -> None:
    assert len(found("args.depth > 1 && args.depth < 3")) == 1


# --- every declared field is accepted -----------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "depth", "x_y", "kind", "content-type", "n2", "in_"])
SCALAR = st.sampled_from(["string", "integer", "number", "boolean", "null"]).map(
    lambda t: {"type": t}
)


def _object(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        properties = draw(st.dictionaries(NAMES, children, min_size=1, max_size=4))
        required = [n for n in properties if draw(st.booleans())]
        return {"type": "object", "properties": properties, "required": required}

    return build()


SCHEMAS = st.recursive(
    SCALAR,
    lambda inner: _object(inner) | inner.map(lambda i: {"type": "array", "items": i}),
    max_leaves=10,
)


def _step(name: str) -> str:
    return f".{name}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else f".`{name}`"


def declared_paths(schema: dict[str, Any], path: str) -> list[str]:
    """Every path the schema declares below ``path``: fields, and the first item of a list."""
    out = []
    if schema["type"] == "object":
        for name, child in schema["properties"].items():
            below = path + _step(name)
            out += [below, *declared_paths(child, below)]
    elif schema["type"] == "array":
        out += declared_paths(schema["items"], path + "[0]")
    return out


def guarded(path: str) -> str:
    """``path`` read under ``has()`` of every field on its way."""
    prefixes = [path[: m.end()] for m in re.finditer(r"\.(`[^`]*`|[A-Za-z_][A-Za-z0-9_]*)", path)]
    guards = " && ".join(f"has({p})" for p in prefixes)
    return f"{guards} && {path} == {path}"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_object(SCHEMAS))
def test_every_declared_field_is_accepted(parameters: dict[str, Any]) -> None:
    paths = declared_paths(parameters, "args")
    assert paths
    for path in paths:
        text = guarded(path)
        assert check_expression(text, "call") == [], text
        assert check_fields(text, "call", parameters, "t") == [], text


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_object(SCHEMAS))
def test_a_field_no_object_declares_is_refused(parameters: dict[str, Any]) -> None:
    for path in declared_paths(parameters, "args"):
        wrong = path + ".undeclared_zz"
        codes = {d.code for d in check_fields(f"has({wrong})", "call", parameters, "t")}
        assert "CEL_UNKNOWN_FIELD" in codes, wrong


def test_the_context_fields_checked_are_those_the_engine_binds() -> None:
    """`policy.cel` sits below the IR, so it names the context's fields itself: they must stay
    exactly the fields of the engine's CEL `context`."""
    bound = disclosure_context("o", {"consumer": "c", "environment": "e", "deployment": "d"})
    assert set(CONTEXT_SCHEMA["properties"]) == set(bound) == set(CONTEXT_SCHEMA["required"])


# --- the principal ---------------------------------------------------------------------------


@pytest.mark.parametrize("stage", ["disclosure", "call"])
def test_principal_fields_are_checked_at_both_stages(stage: str) -> None:
    assert found("principal.subject == 'a' && principal.issuer == null", stage) == []
    assert found("principal.clientId in ['web', 'app']", stage) == []
    [(code, severity, line, column, message)] = found("principal.subjet == 'a'", stage)
    assert (code, severity, line, column) == ("CEL_UNKNOWN_FIELD", "error", 1, 11)
    assert (
        message == "`principal.subjet`: `principal` has no field `subjet`; did you mean `subject`?"
    )
    [(code, *_rest, message)] = found("principal.client_id == 'web'", stage)
    assert code == "CEL_UNKNOWN_FIELD" and "did you mean `clientId`?" in message


@pytest.mark.parametrize(
    "text",
    [
        "has(principal.claims.groups) && 'support' in principal.claims.groups",
        "!has(principal.claims.tenant) || principal.claims.tenant == 'acme'",
        "has(principal.claims.level) ? principal.claims.level > 2 : false",
        "principal.claims.exists(name, name == 'groups')",  # a macro over the map: its keys
        "size(principal.claims) > 0",
        "principal.claims.any_name_at_all != null && has(principal.claims.any_name_at_all)",
    ],
)
def test_claims_are_an_open_map_and_a_guarded_read_does_not_warn(text: str) -> None:
    assert found(text, "disclosure") == [] and found(text, "call") == []


def test_an_unguarded_claim_is_a_warning_with_the_fix() -> None:
    """A token may not carry a claim (and a static credential carries none): reading one
    without has() fails the condition then, as an optional argument does."""
    [(code, severity, _line, column, message)] = found("'support' in principal.claims.groups")
    assert (code, severity, column) == ("CEL_OPTIONAL_WITHOUT_HAS", "warning", 31)
    assert message.startswith(
        "`principal.claims.groups` is absent when the token has no such claim (and always for "
        "a static credential): the condition fails then (CONDITION_ERROR)"
    )
    assert "write `has(principal.claims.groups) && ...`" in message
    [(code, *_rest)] = found("principal.claims['tenant'] == 'acme'", "disclosure")
    assert code == "CEL_OPTIONAL_WITHOUT_HAS"
    bare = compile_expression("'support' in principal.claims.groups", "call")
    no_claims = {"issuer": None, "subject": None, "clientId": "app", "claims": {}}
    assert evaluate(bare, {"principal": no_claims}).error == "NO_SUCH_KEY"


def test_the_principal_fields_checked_are_those_the_engine_binds() -> None:
    from policy.cel.fields import PRINCIPAL_SCHEMA
    from policy.engine.principal import NO_PRINCIPAL

    assert set(PRINCIPAL_SCHEMA["properties"]) == set(NO_PRINCIPAL)
    assert set(PRINCIPAL_SCHEMA["required"]) == set(NO_PRINCIPAL)


@pytest.mark.parametrize(
    ("text", "fields"),
    [
        ("principal.subject == 'a'", {"subject"}),
        ("principal.`subject` == 'a'", {"subject"}),
        ("principal['subject'] == 'a'", {"subject"}),
        ("has(principal.subject)", {"subject"}),
        ("has(principal.claims.groups) && principal.issuer == 'corp'", {"claims", "issuer"}),
        ("principal.exists(k, k == 'subject')", {"*"}),  # the whole of it: the subject too
        ("principal == {}", {"*"}),
        ("context.consumer == 'x'", set()),
    ],
)
def test_what_an_expression_reads_of_the_principal(text: str, fields: set[str]) -> None:
    compiled = compile_expression(text, "call")
    assert compiled.principal == fields
    assert compiled.reads_subject == bool(fields & {"subject", "*"})
