"""Values against the bounded JSON Schema subset, compiled once per schema.

:func:`compile_validator` turns a schema of the subset (``project-format.md``) into a
:class:`Validator` with two entry points:

- ``is_valid(value)``, the hot path: Python source generated for this one schema (every check
  inlined, no recursion, constants bound as closure cells or written as ``repr`` literals, which
  is safe for any string) and compiled once;
- ``errors(value)``, run only to explain a failure: generated the same way
  (:mod:`policy.schema.codegen`), it reports every failing keyword with a JSON pointer into the
  value, exactly as the reference walk over the parsed schema (``tests/support/schema_oracle.py``)
  does.

Both follow JSON semantics, not Python's: ``True`` is not a number, ``1.0`` is an integer, enum
and const compare numbers by value but never booleans with numbers, NaN and infinities are never
valid (also inside the unconstrained values that ``additionalProperties: true`` admits), and
strings count code points. Objects are ``dict`` (so :class:`~policy.json.value.FrozenMap`) and
arrays ``list`` or ``tuple``. Recursion follows the schema (at most 8 levels); unconstrained
values, however deep, are checked without recursion.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, cast

from policy.json.canonical import EncodingError, canonical_cbor
from policy.json.pointer import join
from policy.json.value import is_finite_json, json_equal
from policy.schema.codegen import SourceBase, generate_collector
from policy.schema.parsed import (
    ARRAYS,
    BOUNDS,
    COUNTED,
    TYPE_TESTS,
    Node,
    SchemaError,
    any_equal,
    parse_schema,
)

_TYPE_CODE = {
    "object": "isinstance({v}, dict)",
    "array": "isinstance({v}, ARRAYS)",
    "string": "type({v}) is str",
    "integer": "(type({v}) is int or (type({v}) is float and {v}.is_integer()))",
    "number": "(type({v}) is int or (type({v}) is float and {v} - {v} == 0.0))",
    "boolean": "({v} is True or {v} is False)",
    "null": "{v} is None",
}


# ---------------------------------------------------------------- the generated fast path


class _Source(SourceBase):
    """Python source of one ``is_valid`` function; constants go to closure cells."""

    def fail_unless(self, indent: int, conditions: list[str]) -> None:
        self.lines.append("    " * indent + f"if not ({' and '.join(conditions)}): return False")

    def node(self, node: Node, var: str, indent: int) -> None:
        conditions = [_TYPE_CODE[node.type].format(v=var)]
        conditions += self.bounds(node, var) + self.values(node, var)
        if node.type == "object":
            self.object(node, var, indent, conditions)
        elif node.type == "array":
            self.array(node, var, indent, conditions)
        else:
            self.fail_unless(indent, conditions)

    def bounds(self, node: Node, var: str) -> list[str]:
        measured = f"len({var})" if node.type in COUNTED else var
        out = []
        if node.low is not None:
            out.append(f"{measured} >= {self.const(node.low)}")
        if node.high is not None:
            out.append(f"{measured} <= {self.const(node.high)}")
        return out

    def values(self, node: Node, var: str) -> list[str]:
        out = []
        if node.enum_set is not None:
            out.append(f"{var} in {self.const(node.enum_set)}")
        elif node.enum is not None:
            out.append(f"_anyeq({var}, {self.const(node.enum)})")
        if node.const:
            (value,) = node.const
            if node.type in ("string", "integer", "number") and TYPE_TESTS[node.type](value):
                out.append(f"{var} == {self.const(value)}")
            else:
                out.append(f"_eq({var}, {self.const(value)})")
        return out

    def object(self, node: Node, var: str, indent: int, conditions: list[str]) -> None:
        if not node.additional:
            conditions.append(
                f"{self.const(node.declared)}.issuperset({var})" if node.props else f"not {var}"
            )
        elif not node.props:
            conditions.append(f"_fin({var})")
        conditions += [f"{self.const(name)} in {var}" for name in node.required]
        self.fail_unless(indent, conditions)
        for name, _, child in node.props:
            key, inner = self.const(name), indent
            if name not in node.required:
                self.lines.append("    " * indent + f"if {key} in {var}:")
                inner += 1
            child_var = self.name("v")
            self.lines.append("    " * inner + f"{child_var} = {var}[{key}]")
            self.node(child, child_var, inner)
        if node.additional and node.props:
            k, pad = self.name("k"), "    " * indent
            self.lines.append(f"{pad}for {k} in {var}:")
            self.lines.append(
                f"{pad}    if {k} not in {self.const(node.declared)} and "
                f"(type({k}) is not str or not _fin({var}[{k}])): return False"
            )

    def array(self, node: Node, var: str, indent: int, conditions: list[str]) -> None:
        if node.items is None:
            conditions.append(f"_fin({var})")
        self.fail_unless(indent, conditions)
        if node.items is not None:
            item = self.name("v")
            self.lines.append("    " * indent + f"for {item} in {var}:")
            self.node(node.items, item, indent + 1)


_GLOBALS: dict[str, object] = {
    "__builtins__": {}, "type": type, "isinstance": isinstance, "len": len, "str": str,
    "int": int, "float": float, "dict": dict, "ARRAYS": ARRAYS, "_fin": is_finite_json,
    "_eq": json_equal, "_anyeq": any_equal,
}  # fmt: skip
"""All the generated code can reach: no other builtins."""


def _generate(root: Node) -> tuple[Callable[[object], bool], str]:
    source = _Source()
    source.node(root, "v0", 2)
    cells = list(source.cells)
    head = [f"def _factory({', '.join(cells)}):", "    def is_valid(v0):"]
    text = "\n".join([*head, *source.lines, "        return True", "    return is_valid", ""])
    namespace = dict(_GLOBALS)
    # the text comes from the parsed schema alone: names are ours, constants repr literals or cells
    exec(compile(text, "<seif-schema>", "exec"), namespace)
    factory = cast("Callable[..., Callable[[object], bool]]", namespace["_factory"])
    return factory(*source.cells.values()), text


# ---------------------------------------------------------------- the reference error walk


def _show(value: object) -> str:
    if isinstance(value, int) and value.bit_length() > 256:
        return f"an integer of {value.bit_length()} bits"
    return f"`{value!r}`" if type(value) in (int, float) else "value"


def _describe(value: object) -> str:
    t = type(value)
    if t is float:
        if value - value != 0.0:  # type: ignore[operator]  # t is float
            return "NaN or an infinity, which JSON does not have"
        return "an integer" if value.is_integer() else "a number"  # type: ignore[attr-defined]  # t is float
    names = {bool: "a boolean", int: "an integer", str: "a string", type(None): "null"}
    if t in names:
        return names[t]
    if isinstance(value, dict):
        return "an object"
    return "an array" if isinstance(value, ARRAYS) else f"`{t.__name__}`, which is not JSON"


def _free_errors(value: object, pointer: str, out: list[SchemaError]) -> None:
    """Report what in an unconstrained value is not finite JSON, in document order."""
    stack: list[tuple[object, str]] = [(value, pointer)]
    while stack:
        item, where = stack.pop()
        t = type(item)
        if t is str or t is int or t is bool or item is None:
            continue
        if t is float:
            if item - item != 0.0:  # type: ignore[operator]  # t is float
                out.append(SchemaError(where, "type", "NaN and infinities are not valid json"))
        elif isinstance(item, dict):
            for key in item:
                if type(key) is not str:
                    message = f"key `{key!r}` is not a string"
                    out.append(SchemaError(join(where, key), "type", message))
            pairs = [(v, join(where, k)) for k, v in item.items() if type(k) is str]
            stack.extend(reversed(pairs))
        elif isinstance(item, ARRAYS):
            stack.extend(reversed([(v, f"{where}/{i}") for i, v in enumerate(item)]))
        else:
            out.append(SchemaError(where, "type", f"`{t.__name__}` is not a json value"))


_ERROR_GLOBALS = {**_GLOBALS, "_E": SchemaError, "_desc": _describe, "_show": _show,
                  "_join": join, "_free": _free_errors}  # fmt: skip

# ---------------------------------------------------------------- the API


class Validator:
    """A schema compiled once.

    ``is_valid`` is the generated function itself (an attribute, so a call costs one frame):
    ``validator.is_valid(value) -> bool``. ``errors(value)`` lists every failure, ``()`` when
    the value is valid. ``source`` is the generated Python, for reading and debugging.
    """

    __slots__ = ("_collect", "_root", "is_valid", "source")

    is_valid: Callable[[object], bool]

    def __init__(self, root: Node, is_valid: Callable[[object], bool], source: str) -> None:
        self._root = root
        self.is_valid = is_valid
        self.source = source
        self._collect, _ = generate_collector(root, _ERROR_GLOBALS, _TYPE_CODE, BOUNDS, COUNTED)

    def errors(self, value: object) -> tuple[SchemaError, ...]:
        """Every failing keyword, in a deterministic order; ``()`` when ``value`` is valid.

        Order: the node's own keywords, then declared properties in schema order, then
        additional properties in sorted key order, then array items by index. A build's schemas
        come in the canonical order of its encoding (shorter names first, then bytewise), so a
        runtime's errors follow that order, whatever order the project file wrote.
        """
        return tuple(self._collect(value))  # () for a valid value, like the reference

    def __repr__(self) -> str:
        return f"Validator(type={self._root.type!r})"


def compile_validator(schema: Mapping[str, Any]) -> Validator:
    """Compile a schema of the subset (already accepted by the compiler's checker).

    Raises ``ValueError`` for what is not a schema of the subset at all (a node without one of
    the seven types, nesting deeper than 8 levels); other keywords are not looked at here.
    """
    key: tuple[bytes, str] | None
    try:  # the canonical form keeps `3` and `3.0` apart, as the contract digest does; the
        # text keeps the properties' order, which orders the errors (else the first of two
        # schemas differing only in order would decide the errors' order of both)
        key = (canonical_cbor(schema), json.dumps(schema, ensure_ascii=False))
    except (EncodingError, ValueError, TypeError):  # a lone surrogate (UnicodeEncodeError)...
        key = None  # compiled, not remembered
    found = _COMPILED.get(key) if key is not None else None
    if found is None:
        root = parse_schema(schema, 1)
        is_valid, source = _generate(root)
        found = Validator(root, is_valid, source)
        if key is not None:
            if len(_COMPILED) >= _COMPILED_LIMIT:
                _COMPILED.clear()
            _COMPILED[key] = found
    return found


_COMPILED: dict[tuple[bytes, str], Validator] = {}
"""Validators by the canonical CBOR of their schema and its text (the order of its properties):
a validator is immutable, so tools with one schema share it, and a project compiled again (a
registry check, a promotion) does not generate its code again."""
_COMPILED_LIMIT = 512
