"""The closures a compiled CEL program is made of (:mod:`policy.cel.program` builds the tree of
them): constants, the logical operators that absorb errors, comparisons and arithmetic with their
fast paths, and the comprehension macros with the evaluation's step budget.

Each closure takes the activation (``env``) and returns a plain value or raises
:class:`~policy.cel.values.CelEvalError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from policy.cel import values as cv
from policy.cel.functions import matches, pattern
from policy.cel.values import CelEvalError

Env = Mapping[str, Any]
Node = Callable[[Env], Any]
MAX_ITERATIONS = 50_000
"""Comprehension steps one evaluation may take in all, nested ones included; one more is the
error ``COST_EXCEEDED`` (a condition then fails closed)."""
BUDGET = " iterations"
"""The activation key of an evaluation's step budget (no identifier can name it)."""


class Constant:
    """A literal's node: its value, which operators read at compile time."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __call__(self, _env: Env) -> Any:
        return self.value


def constant(value: Any) -> Node:
    return Constant(value)


def root_field(root: str, name: str, general: Node) -> Node:
    """``root.name`` of an activation map in one step; anything unusual takes ``general``."""

    def root_field(env: Env) -> Any:
        try:
            value = env[root]
            if isinstance(value, dict):  # FrozenMap too
                return value[name]
        except KeyError:
            pass
        return general(env)

    return root_field


def no_overload(name: str, args: list[Node]) -> Node:
    """A call no function answers: an evaluation error (as CEL's runtime says; the condition
    checker of ``policy.cel.expression`` refuses it at build time), its arguments evaluated
    first."""

    def unbound(env: Env) -> Any:
        values = [arg(env) for arg in args]
        raise CelEvalError(
            f"no function `{name}` for {len(values)} argument(s)", "NO_SUCH_FUNCTION"
        )

    return unbound


def map_of(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for key, value in pairs:
        if cv.kind(key) not in ("string", "int", "uint", "bool"):
            raise CelEvalError(f"unsupported map key type {cv.kind(key)}", "INVALID_ARGUMENT")
        if any(cv.equal(key, seen) for seen in out):
            raise CelEvalError("repeated map key", "INVALID_ARGUMENT")
        out[key] = value
    return out


def logic(operands: list[Node], *, absorbing: bool, op: str) -> Node:
    """``||`` (``absorbing`` true: a true operand decides) or ``&&`` (a false one does), left
    to right; an error is absorbed when another operand decides, raised otherwise."""

    def logic(env: Env) -> Any:
        error: CelEvalError | None = None
        odd: Any = None
        for operand in operands:
            try:
                value = operand(env)
            except CelEvalError as exc:
                error = error or exc
                continue
            if value is absorbing:
                return absorbing
            if value is not (not absorbing):
                odd = odd if odd is not None else (value,)
        if error is not None:
            raise error
        if odd is not None:
            raise cv.overload(op, odd[0])
        return not absorbing

    return logic


def matches_literal(receiver: Node, text: str) -> Node:
    try:
        compiled = pattern(text)
    except CelEvalError:
        return lambda env: matches(receiver(env), text)  # fails at evaluation, as CEL says

    def match(env: Env) -> bool:
        value = receiver(env)
        if type(value) is not str:
            raise cv.overload("matches", value, text)
        return compiled.search(value) is not None

    return match


_SAME = frozenset({int, float, str})


def _ordering(op: str, test: Callable[[int], bool], fast: Callable[[Any, Any], bool]) -> Any:
    def make(left: Node, right: Node) -> Node:
        if isinstance(right, Constant) and type(right.value) in _SAME:
            b, kind = right.value, type(right.value)

            def against_constant(env: Env) -> bool:
                a = left(env)
                if type(a) is kind:
                    return fast(a, b)
                found = cv.compare(a, b, op)
                return found is not None and test(found)

            return against_constant

        def order(env: Env) -> bool:
            a, b = left(env), right(env)
            if type(a) is type(b) and type(a) in _SAME:
                return fast(a, b)
            found = cv.compare(a, b, op)
            return found is not None and test(found)

        return order

    return make


def _equality(negate: bool) -> Any:
    def make(left: Node, right: Node) -> Node:
        if isinstance(right, Constant) and type(right.value) in _SAME:
            b, kind = right.value, type(right.value)

            def against_constant(env: Env) -> bool:
                a = left(env)
                same = a == b if type(a) is kind else cv.equal(a, b)
                return bool(not same if negate else same)

            return against_constant

        def eq(env: Env) -> bool:
            a, b = left(env), right(env)
            same = a == b if type(a) is type(b) and type(a) in _SAME else cv.equal(a, b)
            return bool(not same if negate else same)

        return eq

    return make


def _arith(f: Callable[[Any, Any], Any]) -> Any:
    def make(left: Node, right: Node) -> Node:
        return lambda env: f(left(env), right(env))

    return make


BINARY: dict[str, Callable[[Node, Node], Node]] = {
    "relation_lt": _ordering("_<_", lambda c: c < 0, lambda a, b: a < b),
    "relation_le": _ordering("_<=_", lambda c: c <= 0, lambda a, b: a <= b),
    "relation_gt": _ordering("_>_", lambda c: c > 0, lambda a, b: a > b),
    "relation_ge": _ordering("_>=_", lambda c: c >= 0, lambda a, b: a >= b),
    "relation_eq": _equality(negate=False),
    "relation_ne": _equality(negate=True),
    "relation_in": _arith(lambda a, b: cv.contains(b, a)),
    "addition_add": _arith(cv.add),
    "addition_sub": _arith(cv.subtract),
    "multiplication_mul": _arith(cv.multiply),
    "multiplication_div": _arith(cv.divide),
    "multiplication_mod": _arith(cv.modulo),
}


# --- comprehensions -------------------------------------------------------------------------------


def _range(value: Any, env: Env) -> list[Any]:
    """The elements (a list) or keys (a map) to iterate, charged to the evaluation's budget."""
    k = cv.kind(value)
    budget = env[BUDGET]
    budget[0] -= len(value) if k in ("list", "map") else 0
    if budget[0] < 0:
        raise CelEvalError(f"more than {MAX_ITERATIONS} comprehension steps", "COST_EXCEEDED")
    if k == "list":
        return list(value)
    if k == "map":
        return list(value.keys())
    raise CelEvalError(f"cannot iterate over a {k}", "NO_MATCHING_OVERLOAD")


def _bound(env: Env, name: str, value: Any) -> dict[str, Any]:
    scope = dict(env)
    scope[name] = value
    return scope


def _quantifier(decisive: bool) -> Any:
    """``all`` (a false element decides) or ``exists`` (a true one does); errors of other
    elements are absorbed when an element decides, raised otherwise."""

    def make(target: Node, name: str, steps: list[Node]) -> Node:
        (predicate,) = steps

        def quantified(env: Env) -> bool:
            error: CelEvalError | None = None
            for item in _range(target(env), env):
                try:
                    found = predicate(_bound(env, name, item))
                except CelEvalError as exc:
                    error = error or exc
                    continue
                if found is decisive:
                    return bool(decisive)
                if found is not (not decisive):
                    error = error or cv.overload("predicate", found)
            if error is not None:
                raise error
            return not decisive

        return quantified

    return make


def _exists_one(target: Node, name: str, steps: list[Node]) -> Node:
    (predicate,) = steps

    def one(env: Env) -> bool:
        count = 0
        for item in _range(target(env), env):
            found = predicate(_bound(env, name, item))
            if type(found) is not bool:
                raise cv.overload("exists_one", found)
            count += found
        return count == 1

    return one


def _map(target: Node, name: str, steps: list[Node]) -> Node:
    *keep, transform = steps

    def mapped(env: Env) -> list[Any]:
        out = []
        for item in _range(target(env), env):
            scope = _bound(env, name, item)
            if keep and _predicate(keep[0], scope) is False:
                continue
            out.append(transform(scope))
        return out

    return mapped


def _filter(target: Node, name: str, steps: list[Node]) -> Node:
    (predicate,) = steps

    def filtered(env: Env) -> list[Any]:
        return [i for i in _range(target(env), env) if _predicate(predicate, _bound(env, name, i))]

    return filtered


def _predicate(node: Node, scope: Env) -> bool:
    found = node(scope)
    if type(found) is not bool:
        raise cv.overload("predicate", found)
    return bool(found)


COMPREHENSIONS: dict[str, Callable[[Node, str, list[Node]], Node]] = {
    "all": _quantifier(decisive=False),
    "exists": _quantifier(decisive=True),
    "exists_one": _exists_one,
    "map": _map,
    "filter": _filter,
}
