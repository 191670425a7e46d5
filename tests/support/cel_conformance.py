"""The CEL conformance tests of google/cel-spec, run against a CEL evaluator.

The tests are read in place from ``SEIF_CEL_SPEC`` (by default
``../shared/conformance/cel-spec``, commit 508bd98); nothing of them is copied here. Each
``testdata/*.textproto`` is a ``SimpleTestFile`` message in protobuf text format
(``proto/simple.proto``), read by the small schema-less text-format parser below (the protobuf
library is not a dependency); a file that does not parse is an error, never a skip.

Each case is either in scope or out of scope with a kind from ``OUT_OF_SCOPE_REASONS``: seif
conditions receive JSON values (null, bool, int64, double, string, list, map with string keys)
through plain identifiers, so what cannot reach a condition is not tested. A case matching several
kinds counts under the first: its file's kind (``OUT_OF_SCOPE_FILES``), then the order of
``OUT_OF_SCOPE_REASONS``.

An evaluator is a callable ``(expr, bindings) -> outcome``, the outcome ``("value", v)``,
``("error", message)`` for an evaluation error or ``("compile_error", message)``; an evaluator
that raises counts as a ``crash``. A value case passes on an equal value of the same types (``1``
is neither ``1.0`` nor ``true``; NaN matches NaN; maps ignore order); an ``eval_error`` case on an
evaluation or a compile error. ``KNOWN_FAILURES`` (the fast evaluator) and
``celpython_deviations()`` (the cel-python reference) list the expected failures with reasons.

Run ``python -m tests.support.cel_conformance [celpython|fast] [--out-of-scope]`` from the
repository's root for the report.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

# the fast evaluator's value types, so that both evaluators and the expectations agree
from policy.cel.values import CelType, Uint
from tests.support.paths import ROOT as REPO

__all__ = [
    "TESTDATA", "CelType", "Uint", "Evaluator", "Outcome",
    "Ident", "Message", "TextProtoError", "as_bool", "as_float", "as_int", "as_text",
    "parse_textproto", "unquote",
    "Unsupported", "convert_value",
    "KNOWN_FAILURES", "OUT_OF_SCOPE_FILES", "OUT_OF_SCOPE_REASONS", "Case", "SpecFile",
    "all_cases", "build_case", "celpython_deviations", "classify", "load_file", "load_files",
    "spec_files", "strip_literals",
    "Report", "Result", "describe_expected", "describe_outcome", "judge", "run_case",
    "run_cases", "same_value", "show",
    "EVALUATORS", "celpython_evaluator", "fast_evaluator", "main",
]  # fmt: skip

SPEC = Path(os.environ.get("SEIF_CEL_SPEC", REPO.parent / "shared/conformance/cel-spec"))
TESTDATA = SPEC / "testdata"

Outcome = tuple[str, Any]
Evaluator = Callable[[str, Mapping[str, Any]], Outcome]

# --------------------------------------------------------------------------------------------
# Protobuf text format


class TextProtoError(ValueError):
    """A text-format document that does not parse, with its line and column."""


@dataclass(frozen=True, slots=True)
class Ident:
    """A bare identifier in value position: an enum value, ``true``, ``inf``..."""

    name: str


@dataclass(slots=True)
class Message:
    """A parsed message: each field name maps to its values in order (repeated or not).

    Scalars are ``bytes`` (strings: text-format strings are byte strings), ``int``, ``float``
    or ``Ident``; nested messages are ``Message``.
    """

    fields: dict[str, list[Any]] = field(default_factory=dict)

    def add(self, name: str, value: Any) -> None:
        self.fields.setdefault(name, []).append(value)

    def has(self, name: str) -> bool:
        return name in self.fields

    def repeated(self, name: str) -> list[Any]:
        return self.fields.get(name, [])

    def get(self, name: str, default: Any = None) -> Any:
        """A singular field's value: the last one given wins, as in protobuf."""
        values = self.fields.get(name)
        return values[-1] if values else default

    def text(self, name: str, default: str = "") -> str:
        value = self.get(name)
        return default if value is None else as_text(value)

    def message(self, name: str) -> Message | None:
        value = self.get(name)
        if value is not None and not isinstance(value, Message):
            raise TextProtoError(f"field `{name}` is not a message")
        return value


_TOKEN = re.compile(
    r"""
    (?P<skip>[ \t\r\n\f\v]+|\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<number>(?:0[xX][0-9a-fA-F]+|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fF]?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[{}<>\[\]:,;\-/.])
    """,
    re.VERBOSE,
)
_SIMPLE_ESCAPES = {
    "a": b"\a", "b": b"\b", "f": b"\f", "n": b"\n", "r": b"\r", "t": b"\t", "v": b"\v",
    "\\": b"\\", "'": b"'", '"': b'"', "?": b"?",
}  # fmt: skip
_ESCAPE = re.compile(
    r"\\(?:(?P<simple>[abfnrtv\\'\"?])|(?P<octal>[0-7]{1,3})|[xX](?P<hex>[0-9a-fA-F]{1,2})"
    r"|u(?P<u4>[0-9a-fA-F]{4})|U(?P<u8>[0-9a-fA-F]{8}))"
)
_CLOSING = {"{": "}", "<": ">"}


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str
    text: str
    line: int
    column: int


def _tokenize(source: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos, line, line_start = 0, 1, 0
    while pos < len(source):
        match = _TOKEN.match(source, pos)
        if match is None:
            raise TextProtoError(f"{line}:{pos - line_start + 1}: unexpected {source[pos]!r}")
        kind = match.lastgroup or ""
        if kind != "skip":
            tokens.append(_Token(kind, match.group(), line, pos - line_start + 1))
        newlines = match.group().count("\n")
        if newlines:
            line += newlines
            line_start = match.start() + match.group().rindex("\n") + 1
        pos = match.end()
    return tokens


def _escape_bytes(match: re.Match[str]) -> bytes:
    if match["simple"]:
        return _SIMPLE_ESCAPES[match["simple"]]
    if match["octal"]:
        return bytes([int(match["octal"], 8) & 0xFF])
    if match["hex"]:
        return bytes([int(match["hex"], 16)])
    return chr(int(match["u4"] or match["u8"], 16)).encode("utf-8", "surrogatepass")


def unquote(literal: str) -> bytes:
    """The bytes a quoted text-format string stands for (C escapes; other text as UTF-8)."""
    body, out, pos = literal[1:-1], bytearray(), 0
    while (backslash := body.find("\\", pos)) != -1:
        match = _ESCAPE.match(body, backslash)
        if match is None:
            raise TextProtoError(f"invalid escape {body[backslash : backslash + 2]!r} in string")
        out += body[pos:backslash].encode() + _escape_bytes(match)
        pos = match.end()
    return bytes(out + body[pos:].encode())


def as_text(value: Any) -> str:
    """A string field's value as text (the bytes must be UTF-8)."""
    if not isinstance(value, bytes):
        raise TextProtoError(f"expected a string, got {value!r}")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TextProtoError(f"a string that is not UTF-8: {value!r}") from error


class _Parser:
    def __init__(self, source: str) -> None:
        self.tokens = _tokenize(source)
        self.pos = 0

    def peek(self) -> _Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> _Token:
        token = self.peek()
        if token is None:
            raise TextProtoError("unexpected end of input")
        self.pos += 1
        return token

    def accept(self, text: str) -> bool:
        token = self.peek()
        if token is not None and token.kind == "punct" and token.text == text:
            self.pos += 1
            return True
        return False

    def fail(self, what: str) -> TextProtoError:
        token = self.peek()
        if token is None:
            return TextProtoError(f"unexpected end of input, expected {what}")
        return TextProtoError(f"{token.line}:{token.column}: expected {what}, got {token.text!r}")

    def message(self, closing: str | None) -> Message:
        """The fields up to ``closing`` (consumed), or up to the end when it is None."""
        message = Message()
        while True:
            if self.peek() is None and closing is not None:
                raise self.fail(f"`{closing}`")
            if self.peek() is None or (closing is not None and self.accept(closing)):
                return message
            self.field(message)

    def field(self, message: Message) -> None:
        name = self.field_name()
        colon = self.accept(":")
        token = self.peek()
        if token is not None and token.text in _CLOSING and token.kind == "punct":
            self.take()
            message.add(name, self.message(_CLOSING[token.text]))
        elif self.accept("["):
            for value in self.list_values():
                message.add(name, value)
        elif colon:
            message.add(name, self.scalar())
        else:
            raise self.fail(f"`:` or a message after `{name}`")
        self.accept(";") or self.accept(",")

    def field_name(self) -> str:
        if self.accept("["):  # an extension or Any type URL: [type.googleapis.com/a.b.C]
            parts = []
            while not self.accept("]"):
                parts.append(self.take().text)
            return f"[{''.join(parts)}]"
        token = self.take()
        if token.kind != "ident":
            self.pos -= 1
            raise self.fail("a field name")
        return token.text

    def list_values(self) -> list[Any]:
        values: list[Any] = []
        while not self.accept("]"):
            if values and not self.accept(","):
                raise self.fail("`,` or `]`")
            token = self.peek()
            if token is not None and token.kind == "punct" and token.text in _CLOSING:
                self.take()
                values.append(self.message(_CLOSING[token.text]))
            else:
                values.append(self.scalar())
        return values

    def scalar(self) -> Any:
        token = self.take()
        if token.kind == "string":
            parts = [unquote(token.text)]
            while (nxt := self.peek()) is not None and nxt.kind == "string":
                parts.append(unquote(self.take().text))  # adjacent literals concatenate
            return b"".join(parts)
        if token.kind == "number":
            return _number(token.text)
        if token.kind == "ident":
            return Ident(token.text)
        if token.text == "-":
            return _negate(self.take())
        self.pos -= 1
        raise self.fail("a value")


def _number(text: str) -> int | float:
    if text[:2] in {"0x", "0X"}:
        return int(text, 16)
    if re.fullmatch(r"0[0-7]+", text):
        return int(text, 8)
    if re.fullmatch(r"[0-9]+", text):
        return int(text)
    return float(text.rstrip("fF"))


def _negate(token: _Token) -> int | float:
    if token.kind == "number":
        return -_number(token.text)
    if token.kind == "ident" and token.text.lower() in {"inf", "infinity", "nan"}:
        return -float(token.text)
    raise TextProtoError(f"{token.line}:{token.column}: `-` before {token.text!r}")


def parse_textproto(source: str) -> Message:
    """Parse a protobuf text-format document into a schema-less ``Message``."""
    return _Parser(source).message(None)


def as_bool(value: Any) -> bool:
    if isinstance(value, Ident) and value.name in {"true", "True", "t"}:
        return True
    if isinstance(value, Ident) and value.name in {"false", "False", "f"}:
        return False
    if type(value) is int and value in {0, 1}:
        return bool(value)
    raise TextProtoError(f"expected a bool, got {value!r}")


def as_int(value: Any) -> int:
    if type(value) is not int:
        raise TextProtoError(f"expected an integer, got {value!r}")
    return value


def as_float(value: Any) -> float:
    if isinstance(value, Ident) and value.name.lower() in {"inf", "infinity", "nan"}:
        return float(value.name)
    if type(value) in {int, float}:
        return float(value)
    raise TextProtoError(f"expected a number, got {value!r}")


# --------------------------------------------------------------------------------------------
# cel-spec values


class Unsupported(Exception):
    """A value that has no plain Python form here; ``kind`` is an out-of-scope kind."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


def _null(value: Any) -> None:
    if value not in (Ident("NULL_VALUE"), 0):
        raise TextProtoError(f"expected NULL_VALUE, got {value!r}")


_SCALARS: dict[str, Callable[[Any], Any]] = {
    "null_value": _null,
    "bool_value": as_bool,
    "int64_value": as_int,
    "uint64_value": lambda v: Uint(as_int(v)),
    "double_value": as_float,
    "string_value": as_text,
    "bytes_value": lambda v: v if isinstance(v, bytes) else as_text(v),
    "type_value": lambda v: CelType(as_text(v)),
}
_UNSUPPORTED_VALUES = {"object_value": "protobuf messages", "enum_value": "enums"}


def convert_value(message: Any) -> Any:
    """A ``cel.expr.Value`` as a plain Python value; ``Unsupported`` for messages and enums."""
    if not isinstance(message, Message) or len(message.fields) != 1:
        raise TextProtoError(f"a Value has exactly one kind, got {message!r}")
    ((kind, values),) = message.fields.items()
    raw = values[-1]
    if kind in _UNSUPPORTED_VALUES:
        raise Unsupported(_UNSUPPORTED_VALUES[kind], kind)
    if kind == "list_value":
        return [convert_value(v) for v in raw.repeated("values")]
    if kind == "map_value":
        return _convert_map(raw)
    if kind not in _SCALARS:
        raise TextProtoError(f"unknown Value kind `{kind}`")
    return _SCALARS[kind](raw)


def _convert_map(message: Message) -> dict[Any, Any]:
    entries = message.repeated("entries")
    result = {convert_value(e.message("key")): convert_value(e.message("value")) for e in entries}
    if len(result) != len(entries):
        raise TextProtoError("a map_value with keys equal in Python (1 and true?)")
    return result


# --------------------------------------------------------------------------------------------
# Cases and their scope

OUT_OF_SCOPE_REASONS = {
    "unknown/any-of results": "an `unknown`, `any_unknowns` or `any_eval_errors` matcher (or an "
    "unknown or error binding) needs partial evaluation, which seif conditions do not do",
    "type checking only": "a `typed_result` or `check_only` case tests the type checker's "
    "deduced type, and seif checks conditions without a CEL type checker",
    "disable_macros": "parsing without macro expansion is a parser option seif never uses: "
    "conditions are always parsed with the standard macros",
    "protobuf messages": "message literals (`TestAllTypes{...}`), protobuf containers, "
    "`google.protobuf.*` types and `object_value` results need protobuf types, and a condition "
    "only sees JSON values",
    "enums": "protobuf enums come with protobuf messages, which a condition never sees",
    "namespaces": "a `container`, a dotted binding name (`a.b.c`) or a leading-dot identifier "
    "tests qualified name resolution, and seif binds only the plain names args, context, call",
    "timestamps and durations": "`timestamp`/`duration` values and functions: JSON has no such "
    "type and seif's context exposes none",
    "extensions": "functions outside standard CEL (string, math, list, set, encoder, optional "
    "extensions, two-variable comprehensions) are not part of seif's CEL",
    "bytes": "bytes values or `b'...'` literals and the `bytes` type: JSON has no bytes, so no "
    "condition input is bytes",
    "uint": "uint values, `1u` literals and `uint(...)`: JSON numbers reach a condition as int or "
    "double, never uint",
    "non-JSON bindings": "a binding seif cannot produce from JSON (a map with non-string keys)",
}

OUT_OF_SCOPE_FILES = {
    "proto2": "protobuf messages",
    "proto3": "protobuf messages",
    "proto2_ext": "protobuf messages",
    "wrappers": "protobuf messages",
    "dynamic": "protobuf messages",
    "enums": "enums",
    "namespace": "namespaces",
    "timestamps": "timestamps and durations",
    "unknowns": "unknown/any-of results",
    "type_deduction": "type checking only",
    "string_ext": "extensions",
    "math_ext": "extensions",
    "encoders_ext": "extensions",
    "bindings_ext": "extensions",
    "block_ext": "extensions",
    "optionals": "extensions",
    "macros2": "extensions",
    "networking_ext": "extensions",
}
"""cel-spec files out of scope as a whole (not all of them are in the shared copy)."""

KNOWN_FAILURES: dict[str, str] = {}
"""The in-scope cases the fast evaluator fails, by ``Case.id``, each with its reason."""

_CELPYTHON_DEVIATIONS: dict[str, dict[str, str]] = {
    "int and double do not compare (`dyn(1) == 1.0`, `dyn(1) < 2.0`): no matching overload": {
        "comparisons/eq_literal": "eq_int_double not_eq_int_double not_eq_int_double_nan "
        "eq_double_int not_eq_double_int eq_mixed_types eq_list_elem_mixed_types "
        "eq_dyn_int_double eq_dyn_double_int not_eq_dyn_int_double not_eq_dyn_double_int",
        "comparisons/ne_literal": "ne_int_double not_ne_int_double not_ne_int_double_nan "
        "ne_double_int not_ne_double_int",
        "comparisons/lt_literal": "lt_dyn_int_double not_lt_dyn_int_double "
        "not_lt_dyn_int_big_lossy_double lt_dyn_int_big_lossy_double not_lt_dyn_int_small_double "
        "not_lt_dyn_int_small_lossy_double",
        "comparisons/gt_literal": "gt_dyn_int_double not_gt_dyn_int_double "
        "not_gt_dyn_int_big_double not_gt_dyn_int_small_lossy_double "
        "gt_dyn_int_small_lossy_double_greater",
        "comparisons/lte_literal": "lte_dyn_int_double not_lte_dyn_int_double "
        "lte_dyn_int_big_double lte_dyn_int_small_lossy_double "
        "not_lte_dyn_int_small_lossy_double_less",
        "comparisons/gte_literal": "gte_dyn_int_double not_gte_dyn_int_double "
        "gte_dyn_int_big_lossy_double not_gte_dyn_int_big_double "
        "gte_dyn_int_small_lossy_double_equal gte_dyn_int_small_lossy_double_greater",
    },
    "double vs int beyond 2^63: `overflow`, or an exact comparison where cel-spec converts the "
    "int to double (`dyn(9223372036854775808.0) > 9223372036854775807` is false)": {
        "comparisons/lt_literal": "not_lt_dyn_small_double_int",
        "comparisons/gt_literal": "not_gt_dyn_small_double_int not_gt_dyn_big_double_int",
        "comparisons/lte_literal": "lte_dyn_small_double_int lte_dyn_big_double_int",
        "comparisons/gte_literal": "gte_dyn_small_double_int",
    },
    "equality across other types (`dyn(1) == null`, `1 == 'a'` in lists, maps and `exists`) "
    "raises instead of being false": {
        "comparisons/eq_literal": "not_eq_map_null eq_map_value_mixed_types "
        "not_eq_dyn_double_null not_eq_dyn_int_null not_eq_list_elem_null",
        "macros/exists": "list_elem_type_exhaustive map_key_type_exhaustive",
    },
    "NaN equals NaN (`0.0/0.0 == 0.0/0.0` is true)": {
        "comparisons/eq_literal": "not_eq_double_nan",
        "comparisons/ne_literal": "not_ne_double_nan ne_double_nan",
    },
    "`int(-9223372036854775808.0)` converts where cel-spec wants a range error": {
        "conversions/int": "double_int_min_range",
    },
    "backquoted field names (``{'a-b': 1}.`a-b` ``) do not parse": {
        "fields/quoted_map_fields": "field_access_slash field_access_dash field_access_dot "
        "has_field_slash has_field_dash has_field_dot",
    },
    "string escapes: `\\?` and `\\`` kept verbatim, `\\X41` not an escape, a newline inside a "
    "triple-quoted string dropped": {
        "parse/string_literals": "single_quoted_escaped_punctuation "
        "double_quoted_escaped_punctuation triple_single_quoted_escaped_punctuation "
        "triple_double_quoted_escaped_punctuation single_quoted_upper_x_escapes "
        "double_quoted_upper_x_escapes triple_single_quoted_upper_x_escapes "
        "triple_double_quoted_upper_x_escapes mixed_case_hex_single_quoted_escapes "
        "mixed_case_hex_double_quoted_escapes mixed_case_hex_triple_single_quoted_escapes "
        "mixed_case_hex_triple_double_quoted_escapes triple_single_quoted_unescaped_line_feed "
        "triple_double_quoted_unescaped_line_feed",
    },
}


def celpython_deviations() -> dict[str, str]:
    """The in-scope cases cel-python 0.5.0 fails, by ``Case.id``, each with its cause."""
    return {
        f"{where}/{name}": cause
        for cause, sections in _CELPYTHON_DEVIATIONS.items()
        for where, names in sections.items()
        for name in names.split()
    }


@dataclass(frozen=True, slots=True)
class Case:
    """One conformance test: where it is, its expression and bindings, and what it expects."""

    file: str
    section: str
    name: str
    expr: str
    bindings: Mapping[str, Any]
    expects: str  # "value", "error", or "" when out of scope
    value: Any = None
    errors: tuple[str, ...] = ()
    disable_check: bool = False
    out_of_scope: str | None = None

    @property
    def id(self) -> str:
        """``file/section/test``, the file without its extension: unique in cel-spec."""
        return f"{self.file.removesuffix('.textproto')}/{self.section}/{self.name}"


@dataclass(frozen=True, slots=True)
class SpecFile:
    """One parsed test file: its name and its cases."""

    name: str
    cases: tuple[Case, ...]


def spec_files() -> list[Path]:
    return sorted(TESTDATA.glob("*.textproto"))


@cache
def load_files() -> tuple[SpecFile, ...]:
    """Every test file, parsed; a file that does not parse raises ``TextProtoError``."""
    return tuple(load_file(path) for path in spec_files())


def load_file(path: Path) -> SpecFile:
    try:
        document = parse_textproto(path.read_text(encoding="utf-8"))
    except TextProtoError as error:
        raise TextProtoError(f"{path.name}: {error}") from error
    cases = [
        build_case(path.stem, section.text("name"), test)
        for section in document.repeated("section")
        for test in section.repeated("test")
    ]
    return SpecFile(path.name, tuple(cases))


def all_cases() -> list[Case]:
    return [case for spec in load_files() for case in spec.cases]


def build_case(stem: str, section: str, test: Message) -> Case:
    """The case of one ``SimpleTest`` message of file ``stem``, classified."""
    try:
        return _build_case(stem, section, test)
    except TextProtoError as error:
        raise TextProtoError(f"{stem}/{section}/{test.get('name')!r}: {error}") from error


def _build_case(stem: str, section: str, test: Message) -> Case:
    case = Case(
        file=f"{stem}.textproto",
        section=section,
        name=test.text("name"),
        expr=test.text("expr"),
        bindings={},
        expects="",
        disable_check=as_bool(test.get("disable_check", 0)),
    )
    kind = OUT_OF_SCOPE_FILES.get(stem) or _matcher_kind(test)
    if kind is not None:
        return replace(case, out_of_scope=kind)
    try:
        case = replace(case, bindings=_bindings(test), **_expectation(test))
    except Unsupported as unsupported:
        return replace(case, out_of_scope=unsupported.kind)
    return replace(case, out_of_scope=classify(case, test.text("container")))


def _bindings(test: Message) -> dict[str, Any]:
    bindings = {}
    for entry in test.repeated("bindings"):
        expr_value = entry.message("value")
        if expr_value is None or not expr_value.has("value"):
            raise Unsupported("unknown/any-of results", "an error or unknown binding")
        bindings[entry.text("key")] = convert_value(expr_value.message("value"))
    return bindings


_OTHER_MATCHERS = {
    "typed_result": "type checking only",
    "unknown": "unknown/any-of results",
    "any_unknowns": "unknown/any-of results",
    "any_eval_errors": "unknown/any-of results",
}


def _matcher_kind(test: Message) -> str | None:
    if as_bool(test.get("check_only", 0)):
        return "type checking only"
    for matcher, kind in _OTHER_MATCHERS.items():
        if test.has(matcher):
            return kind
    if as_bool(test.get("disable_macros", 0)):
        return "disable_macros"
    return None


def _expectation(test: Message) -> dict[str, Any]:
    if test.has("eval_error"):
        errors = test.message("eval_error") or Message()
        return {
            "expects": "error",
            "errors": tuple(e.text("message") for e in errors.repeated("errors")),
        }
    if test.has("value"):
        return {"expects": "value", "value": convert_value(test.message("value"))}
    return {"expects": "value", "value": True}  # no matcher: the result must be true


# Scope rules on the expression, read without its string literals and comments.
_MESSAGE_LITERAL = re.compile(r"\b[A-Z]\w*\s*\{|\bgoogle\.protobuf\.|\bTestAllTypes\b")
_ENUM = re.compile(r"\b\w*Enum\b")
_LEADING_DOT = re.compile(r"(?:^|[(\[{,:?!&|=<>+\-*/%])\s*\.[A-Za-z_]")
_TIME = re.compile(
    r"\b(?:timestamp|duration)\b|\.get(?:FullYear|Month|Date|DayOfMonth|DayOfWeek|DayOfYear"
    r"|Hours|Minutes|Seconds|Milliseconds)\s*\("
)
_EXTENSION = re.compile(
    r"\.(?:charAt|indexOf|lastIndexOf|lowerAscii|upperAscii|replace|split|substring|trim|join"
    r"|format|quote|reverse|slice|flatten|sort|sortBy|distinct|transformList|transformMap"
    r"|transformMapEntry|orValue|hasValue|optMap|optFlatMap)\s*\("
    r"|\b(?:math|strings|base64|sets|optional|lists|cel|net)\.\w+\s*\("
    r"|\.\?|\[\?|\{\s*\?|,\s*\?"
    r"|\.(?:all|exists|exists_one|existsOne)\(\s*\w+\s*,\s*\w+\s*,"
)
_UINT = re.compile(r"\b(?:[0-9]+|0[xX][0-9a-fA-F]+)[uU]\b|\buint\b")
_BYTES_TYPE = re.compile(r"\bbytes\b")


def classify(case: Case, container: str = "") -> str | None:
    """The out-of-scope kind of a case whose values all convert, or None when in scope."""
    code, has_bytes_literal = strip_literals(case.expr)
    values = list(_walk([case.value, *case.bindings.values()]))
    types = {value.name for value in values if isinstance(value, CelType)}
    time_types = {t for t in types if t.endswith(("Timestamp", "Duration"))}
    checks = {
        "protobuf messages": bool(_MESSAGE_LITERAL.search(code))
        or "proto" in container
        or any("." in t for t in types - time_types),
        "enums": bool(_ENUM.search(code)),
        "namespaces": bool(container)
        or any("." in name for name in case.bindings)
        or bool(_LEADING_DOT.search(code)),
        "timestamps and durations": bool(_TIME.search(code) or time_types),
        "extensions": bool(_EXTENSION.search(code)),
        "bytes": has_bytes_literal
        or bool(_BYTES_TYPE.search(code))
        or "bytes" in types
        or any(type(value) is bytes for value in values),
        "uint": bool(_UINT.search(code))
        or "uint" in types
        or any(type(value) is Uint for value in values),
        "non-JSON bindings": any(
            isinstance(value, dict) and any(type(key) is not str for key in value)
            for value in _walk(list(case.bindings.values()))
        ),
    }
    return next((kind for kind, hit in checks.items() if hit), None)


def _walk(values: list[Any]) -> Iterator[Any]:
    """The values and, recursively, the elements, keys and values inside them."""
    for value in values:
        yield value
        if isinstance(value, list):
            yield from _walk(value)
        elif isinstance(value, dict):
            yield from _walk([*value.keys(), *value.values()])


_STRING_PREFIXES = {"r", "b", "br", "rb"}
_WORD = re.compile(r"\w+")


def strip_literals(expr: str) -> tuple[str, bool]:
    """The expression with each string literal replaced by ``''`` and without its comments,
    and whether it has a bytes literal."""
    out: list[str] = []
    pos, has_bytes = 0, False
    while pos < len(expr):
        word = _WORD.match(expr, pos)
        prefix = word.group().lower() if word else ""
        if word and not (prefix in _STRING_PREFIXES and expr[word.end() : word.end() + 1] in "'\""):
            out.append(word.group())
            pos = word.end()
        elif word or expr[pos] in "'\"":
            has_bytes |= "b" in prefix
            pos = _skip_string(expr, pos + len(prefix), raw="r" in prefix)
            out.append("''")
        elif expr.startswith("//", pos):
            end = expr.find("\n", pos)
            pos = len(expr) if end == -1 else end
        else:
            out.append(expr[pos])
            pos += 1
    return "".join(out), has_bytes


def _skip_string(expr: str, start: int, *, raw: bool) -> int:
    quote = expr[start : start + 3] if expr[start : start + 3] in {"'''", '"""'} else expr[start]
    pos = start + len(quote)
    while pos < len(expr) and not expr.startswith(quote, pos):
        pos += 1 if raw or expr[pos] != "\\" else 2
    return min(pos + len(quote), len(expr))


# --------------------------------------------------------------------------------------------
# Running and comparing


def same_value(expected: Any, got: Any) -> bool:
    """Equal with the same types: 1 is not 1.0 nor true; NaN matches NaN; maps ignore order."""
    if type(expected) is not type(got):
        return False
    if isinstance(expected, float):
        return expected == got or (math.isnan(expected) and math.isnan(got))
    if isinstance(expected, list):
        return len(expected) == len(got) and all(map(same_value, expected, got))
    if isinstance(expected, dict):
        return len(expected) == len(got) and all(
            any(same_value(k, gk) and same_value(v, gv) for gk, gv in got.items())
            for k, v in expected.items()
        )
    return bool(expected == got)


@dataclass(frozen=True, slots=True)
class Result:
    """One in-scope case run: what the evaluator gave, and whether (and how) it passed."""

    case: Case
    outcome: Outcome
    passed: bool
    how: str  # "value", "eval error", "compile error", or "" when failed


def judge(case: Case, outcome: Outcome) -> Result:
    kind, payload = outcome
    if case.expects == "value":
        passed = kind == "value" and same_value(case.value, payload)
        return Result(case, outcome, passed, "value" if passed else "")
    how = {"error": "eval error", "compile_error": "compile error"}.get(kind, "")
    return Result(case, outcome, bool(how), how)


def run_case(evaluator: Evaluator, case: Case) -> Result:
    try:
        outcome = evaluator(case.expr, case.bindings)
    except Exception as error:  # an evaluator that raises is reported, not fatal
        outcome = ("crash", f"{type(error).__name__}: {error}")
    return judge(case, outcome)


@dataclass(frozen=True, slots=True)
class Report:
    """A run of every case: the in-scope results and the out-of-scope cases."""

    evaluator: str
    files: int
    results: tuple[Result, ...]
    out_of_scope: tuple[Case, ...]

    @property
    def total(self) -> int:
        return len(self.results) + len(self.out_of_scope)

    @property
    def passed(self) -> list[Result]:
        return [r for r in self.results if r.passed]

    @property
    def failed(self) -> list[Result]:
        return [r for r in self.results if not r.passed]

    @property
    def pass_rate(self) -> float:
        return len(self.passed) / len(self.results) if self.results else 0.0

    def out_of_scope_by_kind(self) -> dict[str, list[Case]]:
        grouped: dict[str, list[Case]] = {kind: [] for kind in OUT_OF_SCOPE_REASONS}
        for case in self.out_of_scope:
            grouped[case.out_of_scope or ""].append(case)
        return {kind: cases for kind, cases in grouped.items() if cases}

    def passed_by(self) -> Counter[str]:
        return Counter(r.how for r in self.passed)

    def failures_by_file(self) -> dict[str, list[Result]]:
        grouped: dict[str, list[Result]] = {}
        for result in self.failed:
            grouped.setdefault(result.case.file, []).append(result)
        return grouped

    def render(
        self, known: Mapping[str, str] | None = None, *, list_out_of_scope: bool = False
    ) -> str:
        """The report; with ``known`` (id -> reason), each failure says whether it is known."""
        return "\n".join(_render(self, known, list_out_of_scope=list_out_of_scope))


def run_cases(evaluator: Evaluator, name: str | None = None) -> Report:
    """Run every in-scope case through ``evaluator``."""
    cases = all_cases()
    return Report(
        evaluator=name or str(getattr(evaluator, "__name__", evaluator)),
        files=len(load_files()),
        results=tuple(run_case(evaluator, c) for c in cases if c.out_of_scope is None),
        out_of_scope=tuple(c for c in cases if c.out_of_scope is not None),
    )


def show(value: Any) -> str:
    """A value in CEL syntax, so that 1, 1.0, 1u and true read apart."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, Uint):
        return f"{int(value)}u"
    if isinstance(value, CelType):
        return f"type({value.name})"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"double('{value}')"
    if isinstance(value, list):
        return "[" + ", ".join(map(show, value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{show(k)}: {show(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _shorten(text: str, limit: int = 110) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_expected(case: Case) -> str:
    return show(case.value) if case.expects == "value" else f"error {case.errors!r}"


def describe_outcome(outcome: Outcome) -> str:
    kind, payload = outcome
    return show(payload) if kind == "value" else f"{kind.replace('_', ' ')}: {payload}"


def _render(
    report: Report, known: Mapping[str, str] | None, *, list_out_of_scope: bool
) -> Iterator[str]:
    yield f"CEL conformance ({SPEC}), evaluator {report.evaluator}"
    yield (
        f"{report.files} files, {report.total} tests: {len(report.results)} in scope, "
        f"{len(report.out_of_scope)} out of scope"
    )
    for kind, cases in report.out_of_scope_by_kind().items():
        yield f"  {len(cases):4d}  {kind}: {OUT_OF_SCOPE_REASONS[kind]}"
        if list_out_of_scope:
            yield from (f"          {case.id}: {_shorten(case.expr, 60)}" for case in cases)
    by = ", ".join(f"{count} by {how}" for how, count in sorted(report.passed_by().items()))
    yield (
        f"passed {len(report.passed)} of {len(report.results)} ({report.pass_rate:.1%}): {by}; "
        f"failed {len(report.failed)}"
    )
    for file, results in report.failures_by_file().items():
        yield f"{file} ({len(results)} failures)"
        for r in results:
            yield f"  {r.case.section}/{r.case.name}: {_shorten(r.case.expr, 70)}"
            if known is not None:
                yield f"    known: {known[r.case.id]}" if r.case.id in known else "    NEW failure"
            yield f"    expected {describe_expected(r.case)}"
            yield f"    got      {_shorten(describe_outcome(r.outcome))}"


# --------------------------------------------------------------------------------------------
# Evaluators


@cache
def _celpy_environment() -> Any:
    import celpy

    return celpy.Environment()


def celpython_evaluator(expr: str, bindings: Mapping[str, Any]) -> Outcome:
    """The reference: cel-python's interpreted runner, its values mapped to plain Python."""
    import celpy.evaluation

    env = _celpy_environment()
    try:
        program = env.program(env.compile(expr))
    except Exception as error:  # CELParseError, and anything else the compiler raises
        return ("compile_error", f"{type(error).__name__}: {error}")
    try:
        result = program.evaluate({k: _to_celpy(v) for k, v in bindings.items()})
    except Exception as error:  # CELEvalError, and the TypeError/ValueError cel-python leaks
        return ("error", f"{type(error).__name__}: {error.args[0] if error.args else error}")
    if isinstance(result, celpy.evaluation.CELEvalError):
        return ("error", str(result.args[0] if result.args else result))
    return ("value", _from_celpy(result))


def _to_celpy(value: Any) -> Any:
    import celpy.adapter
    import celpy.celtypes as ct

    if isinstance(value, list):
        return ct.ListType([_to_celpy(v) for v in value])
    if isinstance(value, dict):
        return ct.MapType({_to_celpy(k): _to_celpy(v) for k, v in value.items()})
    if isinstance(value, Uint):
        return ct.UintType(int(value))
    if isinstance(value, bytes):
        return ct.BytesType(value)
    return celpy.adapter.json_to_cel(value)


@cache
def _celpy_conversions() -> tuple[tuple[type, Callable[[Any], Any]], ...]:
    import celpy.celtypes as ct

    return (  # order matters: BoolType and UintType are ints
        (ct.BoolType, bool),
        (ct.UintType, lambda v: Uint(int(v))),
        (ct.IntType, int),
        (ct.DoubleType, float),
        (ct.StringType, str),
        (ct.BytesType, bytes),
        (ct.ListType, lambda v: [_from_celpy(x) for x in v]),
        (ct.MapType, lambda v: {_from_celpy(k): _from_celpy(x) for k, x in v.items()}),
    )


@cache
def _celpy_type_names() -> dict[type, str]:
    import celpy.celtypes as ct

    return {
        ct.BoolType: "bool", ct.IntType: "int", ct.UintType: "uint", ct.DoubleType: "double",
        ct.StringType: "string", ct.BytesType: "bytes", ct.ListType: "list", ct.MapType: "map",
        type(None): "null_type", ct.TypeType: "type",
        ct.TimestampType: "google.protobuf.Timestamp", ct.DurationType: "google.protobuf.Duration",
    }  # fmt: skip


def _from_celpy(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, type):
        return CelType(_celpy_type_names().get(value, value.__name__))
    for cel_type, convert in _celpy_conversions():
        if isinstance(value, cel_type):
            return convert(value)
    return value  # timestamps, durations, messages: left as they are, so they match nothing


def fast_evaluator(expr: str, bindings: Mapping[str, Any]) -> Outcome:
    """seif's own evaluator, ``policy.cel.program``."""
    from policy.cel import program as celfast

    try:
        program = celfast.compile_program(expr)
    except celfast.CelCompileError as error:
        return ("compile_error", f"{error.code}: {error.message}")
    try:
        return ("value", program.evaluate(dict(bindings)))
    except celfast.CelEvalError as error:
        return ("error", str(error))


EVALUATORS: dict[str, tuple[Evaluator, Callable[[], Mapping[str, str]]]] = {
    "celpython": (celpython_evaluator, celpython_deviations),
    "fast": (fast_evaluator, lambda: KNOWN_FAILURES),
}


def main(argv: list[str] | None = None) -> int:
    """Print the report of one evaluator; the exit status is 1 when a case fails."""
    parser = argparse.ArgumentParser(description="Run cel-spec's conformance tests.")
    parser.add_argument("evaluator", nargs="?", choices=sorted(EVALUATORS), default="celpython")
    parser.add_argument("--out-of-scope", action="store_true", help="list out-of-scope cases")
    args = parser.parse_args(argv)
    evaluator, known = EVALUATORS[args.evaluator]
    report = run_cases(evaluator, args.evaluator)
    print(report.render(known(), list_out_of_scope=args.out_of_scope))
    return 1 if report.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
