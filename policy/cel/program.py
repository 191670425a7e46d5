"""CEL compiled to Python closures over plain JSON values: the evaluator conditions run on.

cel-python parses an expression (its lark grammar) once per build; :func:`compile_program` turns the
tree into nested closures (:mod:`policy.cel.closures`), resolving every function, literal and
operator then, so an evaluation is a few Python calls on the activation as it is (no conversion of
the arguments, no tree walk). The semantics are the CEL specification's (``policy.cel.values``):
numbers compare across int, uint and double, ``&&`` and ``||`` absorb an error the other side makes
irrelevant, and every error is a :class:`~policy.cel.values.CelEvalError` for the caller to turn
into a value. cel-python stays the reference the tests compare against
(tests/policy/cel/test_celfast.py).

Not supported (a :class:`CelCompileError`): protobuf message construction (``T{...}``),
timestamps, durations and extension functions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import celpy
import celpy.celparser
import celpy.evaluation
from lark import Token, Tree

from policy.cel import values as cv
from policy.cel.closures import (
    BINARY,
    BUDGET,
    COMPREHENSIONS,
    MAX_ITERATIONS,
    Env,
    Node,
    constant,
    logic,
    map_of,
    matches_literal,
    no_overload,
    root_field,
)
from policy.cel.functions import FUNCTIONS, METHODS
from policy.cel.values import TYPES, CelEvalError

__all__ = ["CelCompileError", "Program", "compile_program"]

MACROS = frozenset(COMPREHENSIONS)
_PARSER = celpy.Environment()


class CelCompileError(Exception):
    """A syntax error or a construct this evaluator does not support, with a code."""

    def __init__(self, code: str, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.line = line
        self.column = column


class Program:
    """A compiled expression: ``evaluate(activation)`` returns its value or raises
    :class:`CelEvalError`. Immutable and thread-safe."""

    __slots__ = ("_iterates", "_root", "text")

    def __init__(self, text: str, root: Node, *, iterates: bool = True) -> None:
        self.text = text
        self._root = root
        self._iterates = iterates

    def evaluate(self, activation: Env) -> Any:
        scope = activation
        if self._iterates:  # this evaluation's own step budget, shared by its macros
            scope = dict(activation)
            scope[BUDGET] = [MAX_ITERATIONS]
        try:
            return self._root(scope)
        except CelEvalError:
            raise
        except RecursionError:
            raise CelEvalError("expression too deep", "TOO_DEEP") from None
        except (TypeError, ValueError, OverflowError, KeyError, IndexError) as exc:
            raise CelEvalError(type(exc).__name__, "EVALUATION_ERROR") from None


QUOTED = "__seif_quoted_"
"""The prefix of the identifiers that stand in for backquoted field names (cel-python's grammar
has none): ``a.`content-type``` is parsed as ``a.__seif_quoted_0__``."""


def unquote_fields(text: str) -> tuple[str, dict[str, str]]:
    """``text`` with every backquoted name (outside string literals) replaced by a stand-in
    identifier, and the stand-ins' names."""
    names: dict[str, str] = {}
    out, at, quote = [], 0, ""
    while at < len(text):
        char = text[at]
        if quote:
            if text.startswith(quote, at):
                out.append(quote)
                at, quote = at + len(quote), ""
                continue
            step = 2 if char == "\\" else 1
            out.append(text[at : at + step])
            at += step
        elif char in "\"'":
            quote = text[at : at + 3] if text[at : at + 3] in ('"""', "'''") else char
            out.append(quote)
            at += len(quote)
        elif char == "`":
            end = text.find("`", at + 1)
            if end < 0:
                raise CelCompileError("CEL_SYNTAX", "an unclosed backquoted name")
            stand_in = f"{QUOTED}{len(names)}__"
            names[stand_in] = text[at + 1 : end]
            out.append(stand_in)
            at = end + 1
        else:
            out.append(char)
            at += 1
    return "".join(out), names


@lru_cache(maxsize=1024)
def parse_quoted(text: str) -> tuple[Any, dict[str, str]]:
    """The parse tree of ``text`` and the backquoted names its stand-ins hold (one parse per
    distinct text: the checker and the compiler share it; neither changes the tree)."""
    plain, names = unquote_fields(text)
    try:
        return _PARSER.compile(plain), names
    except celpy.celparser.CELParseError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "syntax error"
        line = int(getattr(exc, "line", 1) or 1)
        column = int(getattr(exc, "column", 1) or 1)
        raise CelCompileError("CEL_SYNTAX", first, line, column) from None


def compile_program(text: str) -> Program:
    tree, names = parse_quoted(text)
    return Program(text, compile_tree(tree, names), iterates=iterates(tree))


def iterates(tree: Any) -> bool:
    """Whether the expression has a comprehension macro (its evaluation then needs a budget)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Tree):
            parts = _children(node)
            if node.data == "member_dot_arg" and len(parts) > 1 and str(parts[1]) in MACROS:
                return True
            stack.extend(parts)
    return False


def compile_tree(tree: Any, quoted: Mapping[str, str] | None = None) -> Node:
    return _Compiler(quoted or {}).node(tree)


def _children(tree: Tree[Any]) -> list[Any]:
    return [c for c in tree.children if c is not None]


class _Compiler:
    """One pass over the tree; each method returns the closure of its node."""

    def __init__(self, quoted: Mapping[str, str]) -> None:
        self.quoted = quoted

    def _field_name(self, token: Any) -> str:
        return self.quoted.get(str(token), str(token))

    def node(self, tree: Any) -> Node:
        handler = getattr(self, f"n_{tree.data}", None)
        if handler is None:
            raise CelCompileError("CEL_UNSUPPORTED", f"`{tree.data}` is not supported")
        node: Node = handler(tree)
        return node

    def _single(self, tree: Tree[Any]) -> Node:
        return self.node(_children(tree)[0])

    n_member = n_primary = n_paren_expr = n_unary_single = _single

    # --- logic ----------------------------------------------------------------------------

    def n_expr(self, tree: Tree[Any]) -> Node:
        parts = _children(tree)
        if len(parts) == 1:
            return self.node(parts[0])
        test, then, other = (self.node(p) for p in parts)

        def conditional(env: Env) -> Any:
            chosen = test(env)
            if chosen is True:
                return then(env)
            if chosen is False:
                return other(env)
            raise cv.overload("_?_:_", chosen)

        return conditional

    def _chain(self, tree: Tree[Any]) -> Node:
        """``a || b || c`` (or ``&&``) as one n-ary node: the same value as the nested binary
        ones (each absorbs an error the others make irrelevant), one call instead of many."""
        operands, node = [], tree
        while len(_children(node)) == 2 and node.data == tree.data:
            left, right = _children(node)
            operands.append(right)
            node = left
        if node.data == tree.data and len(_children(node)) == 1:
            node = _children(node)[0]
        if not operands:
            return self.node(node)
        compiled = [self.node(n) for n in (node, *reversed(operands))]
        absorbing = tree.data == "conditionalor"
        return logic(compiled, absorbing=absorbing, op="_||_" if absorbing else "_&&_")

    n_conditionalor = n_conditionaland = _chain

    # --- operators ------------------------------------------------------------------------

    def _binary(self, tree: Tree[Any]) -> Node:
        parts = _children(tree)
        if len(parts) == 1:
            return self.node(parts[0])
        operator, right = parts
        left = self.node(_children(operator)[0])
        return BINARY[operator.data](left, self.node(right))

    n_relation = n_addition = n_multiplication = _binary

    def n_unary(self, tree: Tree[Any]) -> Node:
        parts = _children(tree)
        if len(parts) == 1:
            return self.node(parts[0])
        operator, operand = parts
        inner = self.node(operand)
        op = cv.logical_not if operator.data == "unary_not" else cv.negate
        return lambda env: op(inner(env))

    # --- members --------------------------------------------------------------------------

    def n_member_dot(self, tree: Tree[Any]) -> Node:
        target_tree, name_token = _children(tree)
        target, name = self.node(target_tree), self._field_name(name_token)
        root = _ident(target_tree)
        if root is not None and root not in TYPES:
            return root_field(root, name, self._field(target, name))
        return self._field(target, name)

    @staticmethod
    def _field(target: Node, name: str) -> Node:
        def field(env: Env) -> Any:
            value = target(env)
            if isinstance(value, dict):
                try:
                    return value[name]
                except KeyError:
                    raise CelEvalError(f"no such key: {name}", "NO_SUCH_KEY") from None
            return cv.field(value, name)

        return field

    def n_member_index(self, tree: Tree[Any]) -> Node:
        container, key = (self.node(p) for p in _children(tree))
        return lambda env: cv.index(container(env), key(env))

    def n_member_dot_arg(self, tree: Tree[Any]) -> Node:
        parts = _children(tree)
        target_tree, name = parts[0], str(parts[1])
        args = _args(parts[2]) if len(parts) > 2 else []
        if name in MACROS:
            return self._macro(name, self.node(target_tree), args)
        receiver = self.node(target_tree)
        if name not in METHODS or len(args) != METHODS[name][0]:
            return no_overload(name, [receiver, *(self.node(a) for a in args)])
        method = METHODS[name][1]
        if name == "matches" and _literal_string(args[0]) is not None:
            return matches_literal(receiver, str(_literal_string(args[0])))
        compiled = [self.node(a) for a in args]
        if not compiled:
            return lambda env: method(receiver(env))
        (only,) = compiled
        return lambda env: method(receiver(env), only(env))

    def n_ident_arg(self, tree: Tree[Any]) -> Node:
        parts = _children(tree)
        name = str(parts[0])
        args = _args(parts[1]) if len(parts) > 1 else []
        if name == "has":
            return self._has(args)
        compiled = [self.node(a) for a in args]
        if name not in FUNCTIONS or len(args) != FUNCTIONS[name][0]:
            return no_overload(name, compiled)
        arity, function = FUNCTIONS[name]
        if arity == 1:
            (only,) = compiled
            return lambda env: function(only(env))
        first, second = compiled
        return lambda env: function(first(env), second(env))

    n_dot_ident_arg = n_ident_arg

    def _has(self, args: list[Any]) -> Node:
        inner = _unwrap(args[0]) if len(args) == 1 else None
        if inner is None or inner.data != "member_dot":
            raise CelCompileError("CEL_ARGUMENT", "has() takes one field selection: has(a.b)")
        target_tree, name_token = _children(inner)
        target, name = self.node(target_tree), self._field_name(name_token)
        return lambda env: cv.has_field(target(env), name)

    def _macro(self, name: str, target: Node, args: list[Any]) -> Node:
        binder = _ident(args[0]) if args else None
        if binder is None or not 2 <= len(args) <= 3 or (len(args) == 3 and name != "map"):
            raise CelCompileError("CEL_ARGUMENT", f"`{name}` takes a variable and an expression")
        steps = [self.node(a) for a in args[1:]]
        return COMPREHENSIONS[name](target, binder, steps)

    # --- primaries ------------------------------------------------------------------------

    def n_ident(self, tree: Tree[Any]) -> Node:
        name = str(_children(tree)[0])
        if name in self.quoted or name.startswith(QUOTED):
            raise CelCompileError("CEL_SYNTAX", "a backquoted name selects a field: a.`name`")
        fallback = TYPES.get(name)

        def ident(env: Env) -> Any:
            try:
                return env[name]
            except KeyError:
                if fallback is not None:
                    return fallback
                raise CelEvalError(f"undeclared reference to `{name}`", "UNDECLARED") from None

        return ident

    n_dot_ident = n_ident

    def n_literal(self, tree: Tree[Any]) -> Node:
        return constant(literal_value(_children(tree)[0]))

    def n_list_lit(self, tree: Tree[Any]) -> Node:
        parts = _children(tree)
        items = [self.node(e) for e in _args(parts[0])] if parts else []
        return lambda env: [item(env) for item in items]

    def n_map_lit(self, tree: Tree[Any]) -> Node:
        parts = _children(tree)
        flat = [self.node(e) for e in _children(parts[0])] if parts else []
        pairs = list(zip(flat[::2], flat[1::2], strict=True))
        return lambda env: map_of([(k(env), v(env)) for k, v in pairs])

    def n_member_object(self, tree: Tree[Any]) -> Node:
        raise CelCompileError("CEL_UNSUPPORTED", "message construction is not supported")


# --- helpers of the compiler --------------------------------------------------------------------


def _args(tree: Any) -> list[Any]:
    return _children(tree) if isinstance(tree, Tree) else []


def _unwrap(tree: Any) -> Any:
    while (
        isinstance(tree, Tree)
        and len(_children(tree)) == 1
        and isinstance(_children(tree)[0], Tree)
    ):
        tree = _children(tree)[0]
    return tree if isinstance(tree, Tree) else None


def _ident(tree: Any) -> str | None:
    inner = _unwrap(tree)
    if inner is not None and inner.data == "ident":
        return str(_children(inner)[0])
    return None


def _literal_string(tree: Any) -> str | None:
    inner = _unwrap(tree)
    if inner is None or inner.data != "literal":
        return None
    value = literal_value(_children(inner)[0])
    return value if type(value) is str else None


def literal_value(token: Token) -> Any:
    """The plain value of a literal token; an out-of-range number is ``CEL_SYNTAX``."""
    text, kind = str(token), token.type
    try:
        if kind == "INT_LIT":
            value = int(text, 0) if "x" not in text.lower() else _hex(text)
            return cv.checked_int(value)
        if kind == "UINT_LIT":
            body = text[:-1]
            return cv.checked_uint(int(body, 0) if "x" not in body.lower() else _hex(body))
        if kind == "FLOAT_LIT":
            return float(text)
    except (ValueError, CelEvalError):
        raise CelCompileError("CEL_SYNTAX", f"number out of range: {text[:32]}") from None
    if kind in ("STRING_LIT", "MLSTRING_LIT"):
        return decode_string(text)
    if kind == "BYTES_LIT":
        return bytes(celpy.evaluation.celbytes(token))
    if kind == "BOOL_LIT":
        return text == "true"
    if kind == "NULL_LIT":
        return None
    raise CelCompileError("CEL_UNSUPPORTED", f"literal {kind}")


_ESCAPE = re.compile(
    r"""\\(?:([abfnrtv\\?"'`])|[xX]([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})"""
    r"|([0-3][0-7]{2}))"
)
_SIMPLE = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def decode_string(text: str) -> str:
    """A CEL string literal's value: quotes (one or three, single or double) removed, and
    outside raw (``r``) strings every escape of the spec expanded (``\\?``, ``\\` ``, ``\\X4A``
    and octal too); any other backslash, or an escape of a surrogate, is ``CEL_SYNTAX``."""
    raw = text[:1] in ("r", "R")
    body = text[1:] if raw else text
    quotes = 3 if body[:3] in ('"""', "'''") else 1
    inner = body[quotes:-quotes]
    if raw:
        return inner
    out: list[str] = []
    at = 0
    while True:
        slash = inner.find("\\", at)
        if slash < 0:
            return "".join(out) + inner[at:]
        found = _ESCAPE.match(inner, slash)
        if found is None:
            raise CelCompileError("CEL_SYNTAX", "invalid escape in a string literal")
        out.append(inner[at:slash])
        out.append(_escaped(found))
        at = found.end()


def _escaped(found: re.Match[str]) -> str:
    simple, hex2, hex4, hex8, octal = found.groups()
    if simple is not None:
        return _SIMPLE.get(simple, simple)
    code = int(hex2 or hex4 or hex8, 16) if octal is None else int(octal, 8)
    if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
        raise CelCompileError("CEL_SYNTAX", "a string escape names no character")
    return chr(code)


def _hex(text: str) -> int:
    negative = text.startswith("-")
    value = int(text.lstrip("-")[2:], 16)
    return -value if negative else value
