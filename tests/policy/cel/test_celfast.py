"""The compiled CEL evaluator (``policy.cel.program``) against cel-python, the reference: unit cases
of the semantics that matter to conditions, and a differential property test on generated
expressions of the accepted grammar and generated arguments. Where cel-python departs from the
CEL specification (heterogeneous numeric equality, NaN), the specification is the oracle, case
by case (``SPEC_OVER_CELPYTHON``)."""

from __future__ import annotations

import json
import math
import threading
from typing import Any

import celpy
import celpy.adapter
import celpy.celtypes
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.cel.program import CelCompileError, compile_program
from policy.cel.values import CelEvalError

_CELPY = celpy.Environment()


def fast(text: str, activation: dict[str, Any] | None = None) -> tuple[str, Any]:
    try:
        return "value", compile_program(text).evaluate(activation or {})
    except CelEvalError as exc:
        return "error", exc.code


def reference(text: str, activation: dict[str, Any] | None = None) -> tuple[str, Any]:
    """cel-python's answer, as plain values."""
    try:
        program = _CELPY.program(_CELPY.compile(text))
        bound = {k: celpy.adapter.json_to_cel(v) for k, v in (activation or {}).items()}
        result = program.evaluate(bound)
    except Exception:  # cel-python raises many unrelated types for an error
        return "error", None
    if isinstance(result, Exception):
        return "error", None
    return "value", _plain(result)


def _plain(value: Any) -> Any:
    if isinstance(value, celpy.celtypes.BoolType) or type(value) is bool:
        return bool(value)
    if isinstance(value, celpy.celtypes.IntType | celpy.celtypes.UintType):
        return int(value)
    if isinstance(value, celpy.celtypes.DoubleType):
        return float(value)
    if isinstance(value, celpy.celtypes.StringType):
        return str(value)
    if isinstance(value, celpy.celtypes.ListType):
        return [_plain(v) for v in value]
    if isinstance(value, celpy.celtypes.MapType):
        return {_plain(k): _plain(v) for k, v in value.items()}
    return value


def same(a: tuple[str, Any], b: tuple[str, Any]) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] == "error":
        return True
    return json.dumps(a[1], sort_keys=True) == json.dumps(b[1], sort_keys=True) and type(
        a[1]
    ) is type(b[1])


ARGS = {
    "args": {
        "count": 5,
        "ratio": 0.5,
        "name": "lesson-3",
        "tags": ["a", "b"],
        "items": [{"n": 1}, {"n": 3}],
        "flag": True,
        "nested": {"k": "v"},
    },
    "context": {"environment": "prod", "consumer": "tutor-app"},
    "call": {"tool": "propose-change", "callId": "c1", "count": 0},
}

CASES = [
    ("args.count > 3 && context.environment == 'prod'", ("value", True)),
    ("args.count > 3 && args.missing", ("error", "NO_SUCH_KEY")),
    ("args.missing && false", ("value", False)),  # an error absorbed by the deciding side
    ("false && args.missing", ("value", False)),
    ("args.missing || true", ("value", True)),
    ("args.items.all(i, i.n < 5)", ("value", True)),
    ("args.items.exists(i, i.n > 2)", ("value", True)),
    ("args.items.exists_one(i, i.n > 0)", ("value", False)),
    ("args.tags.map(t, t + '!') == ['a!', 'b!']", ("value", True)),
    ("args.tags.filter(t, t != 'a') == ['b']", ("value", True)),
    ("'a' in args.tags && !('c' in args.tags)", ("value", True)),
    ("has(args.nested.k) && !has(args.nested.z)", ("value", True)),
    ("size(args.name) == 8 && args.name.startsWith('lesson')", ("value", True)),
    ("args.name.matches('^lesson-[0-9]+$')", ("value", True)),
    ("args.flag ? args.count : 0", ("value", 5)),
    ("1 == 1.0 && 1u == 1 && 2.0 > 1", ("value", True)),  # heterogeneous numbers (the spec)
    ("true == 1", ("value", False)),
    ("[1, 'a'] == [1, 'a'] && {'a': 1} == {'a': 1.0}", ("value", True)),
    ("9223372036854775807 + 1 > 0", ("error", "OVERFLOW")),
    ("1 / 0 == 0", ("error", "DIVISION_BY_ZERO")),
    ("-7 / 2 == -3 && -7 % 3 == -1", ("value", True)),
    ("int('42') + int(3.9) == 45 && string(-4.5e-3) == '-0.0045'", ("value", True)),
    ("type(args.count) == int && type(args.ratio) == double", ("value", True)),
    ("args.count + args.ratio", ("error", "NO_MATCHING_OVERLOAD")),
    ("double('nan') == double('nan')", ("value", False)),
    ("call.count < 1 && call.tool == 'propose-change'", ("value", True)),
    ("args.name.lowerAscii() == 'x'", ("error", "NO_SUCH_FUNCTION")),  # CEL's runtime says so
    ("args.name.lowerAscii() == 'x' || true", ("value", True)),
    ("size(1, 2) == 0", ("error", "NO_SUCH_FUNCTION")),
    ("timestamp('2020-01-01T00:00:00Z') == 1", ("error", "NO_SUCH_FUNCTION")),
    ("{'content-type': 'json'}.`content-type` == 'json'", ("value", True)),
    ("has(args.nested.`k`) && 'a`b' == 'a' + '`b'", ("value", True)),
    ("'\\? \\` \\X41 \\101 \\u00e9' == '? ` A A é'", ("value", True)),
]


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[c[0] for c in CASES])
def test_semantics(text: str, expected: tuple[str, Any]) -> None:
    assert fast(text, ARGS) == expected


def test_unsupported_constructs_are_compile_errors() -> None:
    for text, code in (
        ("Msg{a: 1}", "CEL_UNSUPPORTED"),
        ("has(args)", "CEL_ARGUMENT"),
        ("`name` == 1", "CEL_SYNTAX"),  # a backquoted name only selects a field
        ("1 +", "CEL_SYNTAX"),
        ("9223372036854775808", "CEL_SYNTAX"),
    ):
        with pytest.raises(CelCompileError) as refused:
            compile_program(text)
        assert refused.value.code == code, text


def test_arguments_are_read_as_they_are_and_never_changed() -> None:
    activation = json.loads(json.dumps(ARGS))
    before = json.dumps(activation, sort_keys=True)
    assert fast("args.tags.map(t, t + 'x').size() == 2", activation) == ("value", True)
    assert json.dumps(activation, sort_keys=True) == before


def test_one_program_is_safe_to_share_between_threads() -> None:
    program = compile_program("args.items.all(i, i.n < limit)")
    failures: list[str] = []

    def worker(limit: int) -> None:
        for _ in range(2_000):
            got = program.evaluate({"args": ARGS["args"], "limit": limit})
            if got is not (limit > 3):
                failures.append(f"{limit}: {got}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in (2, 4, 3, 10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


# --- the differential property test --------------------------------------------------------------

INTS = st.integers(-20, 20).map(str)
STRINGS = st.sampled_from(["'a'", "'b'", "'lesson'", "''", "args.name", "context.environment"])
INT_ATOMS = st.one_of(INTS, st.sampled_from(["args.count", "call.count", "size(args.tags)"]))
LISTS = st.sampled_from(["args.tags", "['a', 'b']", "[]"])


def _int_expr() -> st.SearchStrategy[str]:
    return st.recursive(
        INT_ATOMS,
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-", "*"]), inner).map(" ".join),
            inner.map(lambda x: f"-({x})"),
            st.tuples(st.sampled_from(["true", "false"]), inner, inner).map(
                lambda t: f"({t[0]} ? {t[1]} : {t[2]})"
            ),
        ),
        max_leaves=6,
    )


def _bool_atoms() -> st.SearchStrategy[str]:
    ints, ops = _int_expr(), st.sampled_from(["<", "<=", ">", ">=", "==", "!="])
    return st.one_of(
        st.tuples(ints, ops, ints).map(" ".join),
        st.tuples(STRINGS, st.sampled_from(["==", "!=", "<"]), STRINGS).map(" ".join),
        st.tuples(STRINGS, st.sampled_from(["startsWith", "endsWith", "contains"]), STRINGS).map(
            lambda t: f"{t[0]}.{t[1]}({t[2]})"
        ),
        st.tuples(STRINGS, LISTS).map(lambda t: f"{t[0]} in {t[1]}"),
        st.tuples(LISTS, STRINGS).map(lambda t: f"{t[0]}.exists(x, x == {t[1]})"),
        st.tuples(LISTS, STRINGS).map(lambda t: f"{t[0]}.all(x, x != {t[1]})"),
        st.sampled_from(["args.flag", "true", "false", "has(args.nested.k)"]),
        st.sampled_from(  # errors: a missing key, no overload, division by zero, out of range
            ["args.missing", "args.name < 1", "10 / (args.count - 5) > 0", "args.tags[2] == 'a'"]
        ),
    )


def _bool_expr() -> st.SearchStrategy[str]:
    return st.recursive(
        _bool_atoms(),
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(["&&", "||"]), inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"
            ),
            inner.map(lambda x: f"!({x})"),
        ),
        max_leaves=8,
    )


ACTIVATIONS = st.fixed_dictionaries(
    {
        "args": st.fixed_dictionaries(
            {
                "count": st.integers(-5, 20),
                "name": st.sampled_from(["lesson-3", "a", ""]),
                "tags": st.lists(st.sampled_from(["a", "b", "lesson"]), max_size=3),
                "flag": st.booleans(),
                "nested": st.sampled_from([{"k": "v"}, {}]),
            }
        ),
        "context": st.fixed_dictionaries({"environment": st.sampled_from(["prod", "a", "b"])}),
        "call": st.fixed_dictionaries({"count": st.integers(0, 3)}),
    }
)


@settings(max_examples=400, deadline=None)
@given(text=_bool_expr(), activation=ACTIVATIONS)
def test_the_fast_evaluator_agrees_with_cel_python(text: str, activation: dict[str, Any]) -> None:
    assert same(fast(text, activation), reference(text, activation)), text


@settings(max_examples=200, deadline=None)
@given(a=st.integers(-(2**63), 2**63 - 1), b=st.floats(allow_nan=True, allow_infinity=True))
def test_mixed_numbers_follow_the_spec(a: int, b: float) -> None:
    """Where cel-python departs from the spec (it refuses ``1 == 1.0``; NaN), the spec decides,
    as its conformance tests and cel-go read it: an int meets a double as a double (so
    ``9223372036854775807 < 9223372036854775808.0`` is false), and NaN equals and orders
    nothing."""
    activation, x = {"a": a, "b": b}, float(a)
    ok = not math.isnan(b)
    assert fast("a == b", activation) == ("value", ok and x == b)
    assert fast("a != b", activation) == ("value", not (ok and x == b))
    assert fast("a < b", activation) == ("value", ok and x < b)
    assert fast("b >= a", activation) == ("value", ok and b >= x)


# --- as conditions: the checker and the cost bound ------------------------------------------


def test_the_condition_checker_refuses_what_could_only_fail() -> None:
    from policy.cel.expression import MAX_DEPTH, check_expression

    def codes(text: str, stage: str = "call") -> list[str]:
        return [p.code for p in check_expression(text, stage)]

    assert codes("args.ref.split('/').size() > 1") == ["CEL_UNKNOWN_FUNCTION"]
    assert codes("size(args.a, 1) > 0") == ["CEL_UNKNOWN_FUNCTION"]
    assert codes("args.a.exists(x, args.b.all(y, x == y))") == []  # two deep: allowed
    assert codes("[[1]].exists(a, a.exists(b, [b].all(c, c == 1)))") == ["CEL_TOO_COMPLEX"]
    deep = "(" * (MAX_DEPTH // 8) + "true" + ")" * (MAX_DEPTH // 8)
    assert codes(deep) == ["CEL_TOO_COMPLEX"]
    assert codes("has(args.`content-type`) && args.`content-type` == 'json'") == []
    [located] = check_expression("args.x &&\n  args.y.lowerAscii() == 'a'", "call")
    assert (located.code, located.line) == ("CEL_UNKNOWN_FUNCTION", 2)


def test_an_evaluation_past_its_step_budget_fails_closed() -> None:
    from policy.cel.closures import MAX_ITERATIONS
    from policy.cel.expression import compile_expression, evaluate

    nested = compile_expression("args.a.all(x, args.a.all(y, x != y || x == y))", "call")
    side = int(MAX_ITERATIONS**0.5) // 2
    assert evaluate(nested, {"args": {"a": list(range(side))}}).value is True
    big = evaluate(nested, {"args": {"a": list(range(2 * side + 10))}})
    assert (big.value, big.error) == (None, "COST_EXCEEDED")
    flat = compile_expression("args.a.exists(x, x < 0)", "call")
    assert evaluate(flat, {"args": {"a": list(range(MAX_ITERATIONS))}}).value is False
    over = evaluate(flat, {"args": {"a": list(range(MAX_ITERATIONS + 1))}})
    assert over.error == "COST_EXCEEDED"
