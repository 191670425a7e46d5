"""The CEL conformance tests of google/cel-spec, run through tests/support/cel_conformance.py.

The suite is read in place (``SEIF_CEL_SPEC``, by default ``../shared/conformance/cel-spec``).
Tests per file, in scope in parentheses (commit 508bd98): basic 43 (34), comparisons 406 (209),
conversions 109 (72), fields 60 (37), fp_math 30 (30), integer_math 64 (42), logic 30 (30),
macros 44 (44), namespace 14 (0), parse 219 (128), plumbing 5 (5): 1,024 tests, 631 in scope.
Out of scope: uint 169, bytes 102, protobuf messages 98, namespaces 19, timestamps and
durations 5.

``python -m tests.support.cel_conformance [celpython|fast]`` prints the whole report.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support import cel_conformance as cc
from tests.support.cel_conformance import Case, Ident, Message, TextProtoError

if not cc.TESTDATA.is_dir():
    pytest.skip(
        f"cel-spec conformance tests not found at {cc.TESTDATA}; set SEIF_CEL_SPEC",
        allow_module_level=True,
    )

MIN_TESTS = 1000
CELPYTHON_MIN_PASS_RATE = 0.85  # 556 of 631 (88.1%): every failure is in celpython_deviations()
FAST_MIN_PASS_RATE = 0.97


@pytest.mark.parametrize("path", cc.spec_files(), ids=lambda path: path.name)
def test_every_file_parses(path: Path) -> None:
    spec = cc.load_file(path)
    assert spec.cases, f"{spec.name} has no tests"


def test_the_files_hold_over_a_thousand_distinct_tests() -> None:
    counts = {spec.name: len(spec.cases) for spec in cc.load_files()}
    print(counts)
    assert sum(counts.values()) > MIN_TESTS
    ids = [case.id for case in cc.all_cases()]
    assert len(ids) == len(set(ids)), "case ids must be unique"


def test_every_case_is_in_scope_or_out_of_scope_for_a_documented_reason() -> None:
    assert set(cc.OUT_OF_SCOPE_FILES.values()) <= cc.OUT_OF_SCOPE_REASONS.keys()
    for case in cc.all_cases():
        if case.out_of_scope is None:
            assert case.expects in {"value", "error"}, case.id
        else:
            assert case.out_of_scope in cc.OUT_OF_SCOPE_REASONS, case.id


def _assert_failures_are(report: cc.Report, known: Mapping[str, str]) -> None:
    failing = {result.case.id: result for result in report.failed}
    new = [
        f"{case_id}: `{r.case.expr}` expected {cc.describe_expected(r.case)}, "
        f"got {cc.describe_outcome(r.outcome)}"
        for case_id, r in failing.items()
        if case_id not in known
    ]
    assert not new, f"{len(new)} new failures:\n" + "\n".join(new)
    fixed = sorted(known.keys() - failing.keys())
    assert not fixed, "these pass (or no longer exist): remove them from the list:\n" + "\n".join(
        fixed
    )


def test_the_cel_python_reference_fails_only_where_it_departs_from_the_spec() -> None:
    report = cc.run_cases(cc.celpython_evaluator, "celpython")
    print(report.render(cc.celpython_deviations()))
    _assert_failures_are(report, cc.celpython_deviations())
    assert report.pass_rate >= CELPYTHON_MIN_PASS_RATE


SUMMARY: list[str] = []
"""Lines `tests/conftest.py` prints at the end of the run: the pass rates, in `make test`."""


def test_the_fast_evaluator_passes_the_suite() -> None:
    report = cc.run_cases(cc.fast_evaluator, "fast")
    print(report.render(cc.KNOWN_FAILURES))
    SUMMARY.append(
        f"CEL conformance (cel-spec, policy.cel.program): "
        f"{len(report.passed)}/{len(report.results)} in-scope cases pass "
        f"({report.pass_rate:.1%}); {len(report.out_of_scope)} out of scope"
    )
    _assert_failures_are(report, cc.KNOWN_FAILURES)
    assert report.pass_rate >= FAST_MIN_PASS_RATE


# --------------------------------------------------------------------------------------------
# The text-format parser


def _only(source: str, name: str) -> object:
    message = cc.parse_textproto(source)
    assert list(message.fields) == [name]
    (value,) = message.repeated(name)
    return value


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (r'''expr: "'\\''"''', b"'\\''"),  # an escaped backslash then a quote
        (r"""expr: '"\\a\\"\\\'"'""", b'"\\a\\"\\\'"'),  # escaped quotes of both kinds
        (r'''expr: "\"it's\""''', b'"it\'s"'),
        (r'''expr: "a" 'b'  "c"''', b"abc"),  # adjacent literals concatenate
        ('expr: "x"\n  # a comment between the parts\n  " y"', b"x y"),
        (r'expr: "\303\277 \0 \12"', b"\xc3\xbf \x00 \n"),  # octal, 1 to 3 digits
        (r'expr: "\xe2\x9c\x8c\xF"', "✌".encode() + b"\x0f"),  # hex, 1 or 2 digits
        (r'expr: "\u270c\U0001f431"', "✌🐱".encode()),
        (r'expr: "\a\b\f\n\r\t\v\?"', b"\a\b\f\n\r\t\v?"),
        ('expr: "ÿ # not a comment"', "ÿ # not a comment".encode()),
    ],
)
def test_strings_unescape_to_bytes(source: str, expected: bytes) -> None:
    assert _only(source, "expr") == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("n: 42", 42),
        ("n: -9223372036854775808", -9223372036854775808),
        ("n: 0x55555555", 0x55555555),
        ("n: 1e12", 1e12),
        ("n: -9.007199254740992e15", -9.007199254740992e15),
        ("n: .5", 0.5),
        ("n: 2.5f", 2.5),
        ("n: -inf", -math.inf),
        ("n: NULL_VALUE", Ident("NULL_VALUE")),
        ("n: true", Ident("true")),
    ],
)
def test_scalars(source: str, expected: object) -> None:
    assert _only(source, "n") == expected


def test_inf_and_nan_read_as_doubles() -> None:
    assert cc.as_float(Ident("inf")) == math.inf
    assert cc.as_float(Ident("Infinity")) == math.inf
    assert math.isnan(cc.as_float(Ident("nan")))
    assert cc.as_float(7) == 7.0
    with pytest.raises(TextProtoError):
        cc.as_float(Ident("NULL_VALUE"))


def test_nested_and_repeated_fields() -> None:
    document = cc.parse_textproto(
        """
        # proto-message: SimpleTestFile
        name: "f"
        section {
          name: "s"
          test {
            name: "a"
            value: { list_value { values: { int64_value: 1 } values { int64_value: 2 } } }
          }
          test: < name: 'b'; eval_error { errors: { message: "boom" } } >
          test {
            name: "c",
            value { map_value { entries { key { string_value: "k" } value { null_value: 0 } } } }
          }
        }
        section { name: "t" tags: [1, -2, 3] }
        """
    )
    first, second = document.repeated("section")
    names = [t.text("name") for t in first.repeated("test")]
    assert names == ["a", "b", "c"]
    a, b, c = first.repeated("test")
    assert cc.convert_value(a.message("value")) == [1, 2]
    assert b.message("eval_error").message("errors").text("message") == "boom"
    assert cc.convert_value(c.message("value")) == {"k": None}
    assert second.repeated("tags") == [1, -2, 3]


def test_any_expansions_and_extension_names_are_fields() -> None:
    value = _only("object_value { [type.googleapis.com/a.b.T] { as: true } }", "object_value")
    assert isinstance(value, Message)
    assert list(value.fields) == ["[type.googleapis.com/a.b.T]"]


@pytest.mark.parametrize(
    "source",
    [
        'section { name: "s"',  # unterminated message
        'expr: "\\q"',  # unknown escape
        'expr: "no end',  # unterminated string
        "name 42",  # a scalar needs a colon
        "name: }",
        "n: -NULL_VALUE",
        "n: @",
    ],
)
def test_malformed_text_is_an_error(source: str) -> None:
    with pytest.raises(TextProtoError):
        cc.parse_textproto(source)


# --------------------------------------------------------------------------------------------
# Values, scope and comparison


def _value(source: str) -> object:
    return cc.convert_value(cc.parse_textproto(source))


def test_values_convert_to_plain_python() -> None:
    assert _value("uint64_value: 7") == cc.Uint(7)
    assert type(_value("uint64_value: 7")) is cc.Uint
    assert _value(r'bytes_value: "\000\377"') == b"\x00\xff"
    assert _value(r'string_value: "\xe2\x9c\x8c"') == "✌"
    assert _value("double_value: 0") == 0.0 and type(_value("double_value: 0")) is float
    assert _value("bool_value: false") is False
    assert _value("null_value: 0") is None
    assert _value('type_value: "int"') == cc.CelType("int")
    assert _value("map_value {}") == {} and _value("list_value: {}") == []
    with pytest.raises(cc.Unsupported):
        _value("object_value { [type.googleapis.com/a.T] {} }")
    with pytest.raises(TextProtoError):
        _value("int64_value: 1 bool_value: true")  # a Value has one kind


@pytest.mark.parametrize(
    ("expected", "got", "same"),
    [
        (1, 1, True),
        (1, 1.0, False),
        (1, True, False),
        (True, 1, False),
        (1, cc.Uint(1), False),
        (math.nan, math.nan, True),
        (0.0, -0.0, True),
        ([1, [2.0]], [1, [2.0]], True),
        ([1, [2.0]], [1, [2]], False),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, True),
        ({1: "x"}, {1.0: "x"}, False),
        (None, None, True),
        ("a", b"a", False),
    ],
)
def test_same_value_compares_types_exactly(expected: object, got: object, same: bool) -> None:
    assert cc.same_value(expected, got) is same


def test_strip_literals_keeps_only_code() -> None:
    assert cc.strip_literals("x == '1u' // uint(\n && 2") == ("x == '' \n && 2", False)
    assert cc.strip_literals("b'\\'' + r'\\' + '''a'b'''") == ("'' + '' + ''", True)
    assert cc.strip_literals('size(bR"x") == br"y"') == ("size('') == ''", True)


def _case(expr: str, **changes: object) -> Case:
    case = Case(file="f.textproto", section="s", name="t", expr=expr, bindings={}, expects="value")
    return replace(case, **changes)  # type: ignore[arg-type]  # test data


@pytest.mark.parametrize(
    ("expr", "changes", "kind"),
    [
        ("1 + 1 == 2", {}, None),
        ("'replace' + 'b\"x\"' == '1u'", {}, None),  # words inside strings do not count
        ("x.exists_one(e, e > 1)", {}, None),
        ("TestAllTypes{single_int64: 1}.single_int64", {}, "protobuf messages"),
        ("google.protobuf.Int32Value{value: 1} == 1", {}, "protobuf messages"),
        ("y", {"bindings": {"x.y": True}}, "namespaces"),
        ("[1].exists(y, .y == 1)", {}, "namespaces"),
        ("timestamp(0) == timestamp(0)", {}, "timestamps and durations"),
        ("'a'.lowerAscii()", {}, "extensions"),
        ("math.greatest(1, 2)", {}, "extensions"),
        ("x.?y", {}, "extensions"),
        ("b'a' == b'a'", {}, "bytes"),
        ("x", {"bindings": {"x": b"\x00"}}, "bytes"),
        ("1u == 1u", {}, "uint"),
        ("uint(1) == x", {}, "uint"),
        ("type(x)", {"value": cc.CelType("uint")}, "uint"),
        ("x", {"bindings": {"x": {1: "a"}}}, "non-JSON bindings"),
    ],
)
def test_classify(expr: str, changes: dict[str, object], kind: str | None) -> None:
    assert cc.classify(_case(expr, **changes)) == kind


def test_a_container_is_out_of_scope() -> None:
    assert cc.classify(_case("y"), container="com.example") == "namespaces"
    assert cc.classify(_case("y"), container="cel.expr.conformance.proto3") == "protobuf messages"


def test_an_eval_error_case_passes_on_any_error_and_a_value_case_only_on_the_value() -> None:
    error_case = _case("1 / 0", expects="error", errors=("divide by zero",))
    assert cc.judge(error_case, ("error", "whatever")).how == "eval error"
    assert cc.judge(error_case, ("compile_error", "E: no")).how == "compile error"
    assert not cc.judge(error_case, ("value", 1)).passed
    assert not cc.judge(error_case, ("crash", "TypeError")).passed
    value_case = _case("1", value=1)
    assert cc.judge(value_case, ("value", 1)).passed
    assert not cc.judge(value_case, ("compile_error", "E: no")).passed
    assert not cc.judge(value_case, ("value", 1.0)).passed


def test_a_case_without_a_matcher_expects_true() -> None:
    test = cc.parse_textproto(
        'name: "t" expr: "x <= 2" bindings { key: "x" value { value { int64_value: 1 } } }'
    )
    case = cc.build_case("f", "s", test)
    assert (case.expects, case.value, case.bindings, case.out_of_scope) == (
        "value", True, {"x": 1}, None,
    )  # fmt: skip


def test_an_unknown_binding_or_matcher_is_out_of_scope() -> None:
    unknown = cc.parse_textproto('name: "t" expr: "x" bindings { key: "x" value { unknown {} } }')
    assert cc.build_case("f", "s", unknown).out_of_scope == "unknown/any-of results"
    typed = cc.parse_textproto('name: "t" expr: "1" typed_result { result { int64_value: 1 } }')
    assert cc.build_case("f", "s", typed).out_of_scope == "type checking only"
    whole_file = cc.parse_textproto('name: "t" expr: "1" value { int64_value: 1 }')
    assert cc.build_case("proto3", "s", whole_file).out_of_scope == "protobuf messages"
