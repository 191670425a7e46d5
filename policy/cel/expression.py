"""CEL conditions: checked and compiled once per build, evaluated on the hot path.

cel-python parses an expression (its grammar, with backquoted field names), this module checks it
as a condition of its stage, and :mod:`policy.cel.program` compiles the tree into closures that run
on the activation's plain JSON values, with the CEL specification's semantics (cel-python stays
the reference the tests compare against). The cost of one evaluation is bounded: an expression is
at most 1,024 characters and 200 parse levels deep, uses only its stage's identifiers and known
functions, nests comprehension macros at most two deep, and one evaluation runs at most
:data:`policy.cel.closures.MAX_ITERATIONS` comprehension steps in all (more is an error). Evaluation
reads no clock, draws no random numbers and does no I/O; a failure is a value, never an
exception.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from lark import Token, Tree

from policy.cel.functions import FUNCTIONS, METHODS
from policy.cel.program import (
    MACROS,
    CelCompileError,
    Program,
    compile_program,
    decode_string,
    parse_quoted,
)
from policy.cel.values import CelEvalError
from policy.diagnostic import Diagnostic, Location, headline

MAX_LENGTH = 1024
MAX_DEPTH = 200
"""Parse levels at most (the compiler's and the evaluator's recursion stay far from Python's)."""
MAX_MACRO_NESTING = 2
STAGE_IDENTIFIERS = {
    "disclosure": frozenset({"context", "principal"}),
    "call": frozenset({"args", "context", "call", "principal"}),
}
PRINCIPAL_FIELDS = ("issuer", "subject", "clientId", "claims")
"""What CEL's ``principal`` holds at both stages (``policy.engine.principal``)."""
_NON_BOOLEAN_ROOTS = frozenset(
    {
        "addition_add",
        "addition_sub",
        "multiplication_mul",
        "multiplication_div",
        "multiplication_mod",
        "unary_neg",
        "list_lit",
        "map_lit",
    }
)

_OPERATOR_NODES = frozenset({"addition", "multiplication", "relation", "unary"})
"""Nodes whose first child names their operator (``addition_add`` holds the left operand)."""


def _problem(code: str, message: str, line: int = 1, column: int = 1) -> Diagnostic:
    """A compile-time problem at a 1-based line and column of the expression's text."""
    return Diagnostic(code=code, message=message, location=Location(line=line, column=column))


@dataclass(frozen=True, slots=True)
class CompiledExpression:
    """One checked expression and its program; equality is the source text."""

    text: str
    stage: str
    program: Program = field(compare=False, repr=False)
    principal: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    """The fields of ``principal`` it reads (:func:`principal_fields`): ``*`` for any use of
    ``principal`` other than a field of it named by its name."""

    @property
    def reads_subject(self) -> bool:
        """Whether its value may depend on ``principal.subject`` (which records keep only as a
        keyed fingerprint: replay cannot reproduce it)."""
        return "subject" in self.principal or "*" in self.principal


def _walk_identifiers(node: Any, bound: frozenset[str], out: list[tuple[str, int, int]]) -> None:
    if isinstance(node, Token) or not isinstance(node, Tree):
        return
    if node.data == "ident" and node.children:
        tok = node.children[0]
        if str(tok) not in bound:
            out.append((str(tok), getattr(tok, "line", 1) or 1, getattr(tok, "column", 1) or 1))
        return
    if node.data == "member_dot_arg" and _macro_name(node) in MACROS:
        target, _name, *rest = node.children
        _walk_identifiers(target, bound, out)
        args = list(rest[0].children) if rest and isinstance(rest[0], Tree) else []
        binder = _binder(args[0]) if args else None
        inner = bound | {binder} if binder else bound
        for arg in args[1:]:
            _walk_identifiers(arg, inner, out)
        return
    for child in node.children:
        _walk_identifiers(child, bound, out)


def _macro_name(node: Tree[Any]) -> str:
    return str(node.children[1]) if len(node.children) > 1 else ""


def _binder(expr: Any) -> str | None:
    idents = [t for t in _subtrees(expr) if t.data == "ident"]
    return str(idents[0].children[0]) if len(idents) == 1 else None


def _subtrees(node: Any) -> Iterator[Tree[Any]]:
    if isinstance(node, Tree):
        yield node
        for child in node.children:
            yield from _subtrees(child)


def _macro_depth(node: Any) -> int:
    if not isinstance(node, Tree):
        return 0
    inner = max((_macro_depth(c) for c in node.children), default=0)
    is_macro = node.data == "member_dot_arg" and _macro_name(node) in MACROS
    return inner + 1 if is_macro else inner


_NON_BOOLEAN_FUNCTIONS = frozenset(
    {"size", "int", "uint", "double", "string", "bytes", "duration", "timestamp", "type"}
)
_NON_BOOLEAN_METHODS = frozenset({"map", "filter", "size"} | _NON_BOOLEAN_FUNCTIONS)
_STRING_OR_NUMBER_ROOTS = frozenset({"context", "call", "principal"})
"""Every field of ``context`` is a string, ``call`` holds strings and a count, and
``principal`` strings (or null) and the map of claims."""


def unwrap(node: Any) -> Any:
    """A node without its single-child wrappers (``member``, ``primary``, parentheses...)."""
    while isinstance(node, Tree) and len(node.children) == 1 and isinstance(node.children[0], Tree):
        node = node.children[0]
    return node


def ident_of(node: Any) -> str | None:
    """The name of a bare identifier (``args``), or None for anything else."""
    node = unwrap(node)
    if isinstance(node, Tree) and node.data == "ident" and node.children:
        return str(node.children[0])
    return None


def certainly_not_boolean(tree: Any) -> bool:
    """True when the expression's value is not a boolean whatever the inputs: a non-boolean
    literal, arithmetic, a list or map, a bare identifier, a field of ``context`` or ``call``,
    a conversion or ``size``; a conditional when both branches are. Anything that may be a
    boolean (``args.flag``) is left to evaluation, which fails closed."""
    node = unwrap(tree)
    if not isinstance(node, Tree):
        return False
    kind = str(node.data)
    if kind == "expr" and len(node.children) == 3:
        return certainly_not_boolean(node.children[1]) and certainly_not_boolean(node.children[2])
    if kind in _OPERATOR_NODES and isinstance(node.children[0], Tree):
        return str(node.children[0].data) in _NON_BOOLEAN_ROOTS
    if kind == "literal":
        return str(node.children[0]) not in ("true", "false")
    if kind in ("list_lit", "map_lit", "ident"):
        return True
    if kind == "member_dot":
        return ident_of(node.children[0]) in _STRING_OR_NUMBER_ROOTS
    if kind == "ident_arg":
        return str(node.children[0]) in _NON_BOOLEAN_FUNCTIONS
    if kind == "member_dot_arg":
        return _macro_name(node) in _NON_BOOLEAN_METHODS
    return False


def check_expression(text: str, stage: str) -> list[Diagnostic]:
    """Every problem of ``text`` as a condition of ``stage`` (``disclosure`` or ``call``)."""
    return list(_checked(text, stage))


@lru_cache(maxsize=1024)
def _checked(text: str, stage: str) -> tuple[Diagnostic, ...]:
    """The problems of one expression, found once (the checker and the compiler both ask)."""
    return tuple(_problems(text, stage))


def _problems(text: str, stage: str) -> list[Diagnostic]:
    if len(text) > MAX_LENGTH:
        return [
            _problem(
                "CEL_TOO_LONG",
                f"expression has {len(text)} characters, at most {MAX_LENGTH} are allowed",
            )
        ]
    try:
        tree, _quoted = parse_quoted(text)
    except CelCompileError as exc:
        return [_problem(exc.code, f"cel syntax error: {exc.message}", exc.line, exc.column)]
    if _depth(tree) > MAX_DEPTH:
        return [_problem("CEL_TOO_COMPLEX", f"expression nests deeper than {MAX_DEPTH} levels")]
    problems = _identifier_problems(tree, STAGE_IDENTIFIERS[stage])
    problems += _function_problems(tree)
    if _macro_depth(tree) > MAX_MACRO_NESTING:
        message = f"comprehension macros nest at most {MAX_MACRO_NESTING} deep"
        problems.append(_problem("CEL_TOO_COMPLEX", message))
    if certainly_not_boolean(tree):
        problems.append(_problem("CEL_NOT_BOOLEAN", "expression does not yield a boolean"))
    return problems


def _identifier_problems(tree: Any, allowed: frozenset[str]) -> list[Diagnostic]:
    found: list[tuple[str, int, int]] = []
    _walk_identifiers(tree, frozenset(), found)
    names = ", ".join(f"`{n}`" for n in sorted(allowed))
    return [
        _problem("CEL_UNKNOWN_IDENTIFIER", f"unknown identifier `{name}`; use {names}", line, col)
        for name, line, col in found
        if name not in allowed
    ]


def _function_problems(tree: Any) -> list[Diagnostic]:
    """Calls of functions CEL does not define for conditions, or with another arity (CEL's
    checker refuses them; at run time they would only ever fail)."""
    problems = []
    for node in _subtrees(tree):
        if node.data not in ("ident_arg", "member_dot_arg", "dot_ident_arg"):
            continue
        parts = [c for c in node.children if c is not None]
        receiver = node.data == "member_dot_arg"
        name_token = parts[1] if receiver else parts[0]
        rest = parts[2:] if receiver else parts[1:]
        count = len([c for c in rest[0].children if c is not None]) if rest else 0
        name = str(name_token)
        table = METHODS if receiver else FUNCTIONS
        known = name in table and table[name][0] == count
        if (receiver and name in MACROS) or (not receiver and name == "has"):
            continue
        if not known:
            line = getattr(name_token, "line", 1) or 1
            column = getattr(name_token, "column", 1) or 1
            message = f"no function `{name}` takes {count} argument(s) here"
            problems.append(_problem("CEL_UNKNOWN_FUNCTION", message, line, column))
    return problems


def _depth(tree: Any) -> int:
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(node, Tree):
            stack.extend((child, level + 1) for child in node.children)
    return deepest


def compile_expression(text: str, stage: str) -> CompiledExpression:
    """Compile a checked expression; raises ``ValueError`` naming the first problem."""
    problems = check_expression(text, stage)
    if problems:
        raise ValueError(headline(problems[0]))
    tree, quoted = parse_quoted(text)
    return CompiledExpression(text, stage, compile_program(text), principal_fields(tree, quoted))


def principal_fields(tree: Any, quoted: Mapping[str, str] | None = None) -> frozenset[str]:
    """The fields of ``principal`` the expression reads: each ``principal.NAME`` (or
    ``principal["NAME"]``) names one; any other use of ``principal`` (a macro over it, a
    comparison of the whole, a computed key) is ``*``, every field."""
    names = quoted or {}
    uses = selected = 0
    found: set[str] = set()
    for node in _subtrees(tree):
        parts = [c for c in node.children if c is not None]
        if node.data == "ident" and parts and str(parts[0]) == "principal":
            uses += 1
        elif node.data in ("member_dot", "member_index") and len(parts) == 2:
            if ident_of(parts[0]) != "principal":
                continue
            name = _selected_name(node.data, parts[1], names)
            if name is not None:
                selected += 1
                found.add(name)
    if uses > selected:
        found.add("*")
    return frozenset(found)


def _selected_name(kind: str, selector: Any, quoted: Mapping[str, str]) -> str | None:
    if kind == "member_dot":
        return quoted.get(str(selector), str(selector))
    inner = unwrap(selector)
    if isinstance(inner, Tree) and inner.data == "literal" and inner.children:
        token = inner.children[0]
        if isinstance(token, Token) and token.type == "STRING_LIT":
            try:
                return decode_string(str(token))
            except CelCompileError:
                return None
    return None


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The outcome of one evaluation: ``value`` when it yielded a boolean, else ``error``, a
    code that names the kind of failure (``NO_SUCH_KEY``, ``NO_MATCHING_OVERLOAD``,
    ``OVERFLOW``, ``NOT_BOOLEAN``...) and nothing of the data."""

    value: bool | None
    error: str | None = None


def evaluate(expression: CompiledExpression, activation: Mapping[str, Any]) -> Evaluation:
    """Evaluate on plain JSON values as they are; every failure is an :class:`Evaluation`
    with an ``error`` code."""
    try:
        result = expression.program.evaluate(activation)
    except CelEvalError as exc:
        return Evaluation(None, exc.code)
    if result is True:
        return _TRUE
    if result is False:
        return _FALSE
    return Evaluation(None, "NOT_BOOLEAN")


_TRUE, _FALSE = Evaluation(True), Evaluation(False)
