"""Values against the bounded JSON Schema subset, compiled once per schema.

:func:`compile_validator` turns a schema of the subset (``project-format.md``) into a
:class:`Validator` with two entry points:

- ``is_valid(value)``, the hot path: Python source generated for this one schema (every check
  inlined, no recursion, constants bound as closure cells or written as ``repr`` literals, which
  is safe for any string) and compiled once;
- ``errors(value)``, run only to explain a failure: generated the same way
  (:mod:`policy.schema_codegen`), it reports every failing keyword with a JSON pointer into the
  value, exactly as the reference walk over the parsed schema (``tests/schema_oracle.py``)
  does.

Both follow JSON semantics, not Python's: ``True`` is not a number, ``1.0`` is an integer, enum
and const compare numbers by value but never booleans with numbers, NaN and infinities are never
valid (also inside the unconstrained values that ``additionalProperties: true`` admits), and
strings count code points. Objects are ``dict`` (so :class:`~policy.jsonvalue.FrozenMap`) and
arrays ``list`` or ``tuple``. Recursion follows the schema (at most 8 levels); unconstrained
values, however deep, are checked without recursion.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from policy.canonical import EncodingError, canonical_cbor, escape_pointer_token
from policy.jsonvalue import is_finite_json, json_equal
from policy.schema_codegen import SourceBase, generate_collector

MAX_DEPTH = 8
TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")
_ARR = (list, tuple)
_BOUNDS = {
    "string": ("minLength", "maxLength"),
    "array": ("minItems", "maxItems"),
    "integer": ("minimum", "maximum"),
    "number": ("minimum", "maximum"),
}
_COUNTED = {"string": "characters", "array": "items"}


class SchemaError(NamedTuple):
    """One failing keyword: where in the value (RFC 6901 pointer, ``""`` = root), and why.

    Immutable; a named tuple because an argument refusal builds one per failing keyword.
    """

    pointer: str
    keyword: str
    message: str


def _any_equal(value: object, options: tuple[Any, ...]) -> bool:
    return any(json_equal(value, option) for option in options)


def _is_integer(v: Any) -> bool:
    t = type(v)
    return t is int or (t is float and v.is_integer())


def _is_number(v: Any) -> bool:
    t = type(v)
    return t is int or (t is float and v - v == 0.0)


_TYPE_TESTS: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, _ARR),
    "string": lambda v: type(v) is str,
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda v: v is True or v is False,
    "null": lambda v: v is None,
}
"""The same tests as :data:`_TYPE_CODE`, for the error walk; keep the two in step."""

_TYPE_CODE = {
    "object": "isinstance({v}, dict)",
    "array": "isinstance({v}, _ARR)",
    "string": "type({v}) is str",
    "integer": "(type({v}) is int or (type({v}) is float and {v}.is_integer()))",
    "number": "(type({v}) is int or (type({v}) is float and {v} - {v} == 0.0))",
    "boolean": "({v} is True or {v} is False)",
    "null": "{v} is None",
}


# ---------------------------------------------------------------- the parsed schema


@dataclass(frozen=True, slots=True)
class _Node:
    type: str
    props: tuple[tuple[str, str, _Node], ...] = ()  # (name, pointer token, schema)
    declared: frozenset[str] = frozenset()
    required: tuple[str, ...] = ()
    additional: bool = False
    items: _Node | None = None
    low: int | float | None = None  # minLength, minItems or minimum
    high: int | float | None = None  # maxLength, maxItems or maximum
    enum: tuple[Any, ...] | None = None
    enum_set: frozenset[Any] | None = None  # when every enum value is a scalar of the node's type
    const: tuple[Any, ...] = ()  # (value,) when the node has `const`


def _bound(schema: Mapping[str, Any], key: str, counted: bool) -> int | float | None:
    value = schema.get(key)
    if value is None or type(value) is bool:
        return None
    if counted and type(value) is float and value.is_integer():
        return int(value)
    return value if type(value) in (int, float) else None


def _scalar_set(node_type: str, values: tuple[Any, ...]) -> frozenset[Any] | None:
    """A frozenset usable for membership once the value passed the type test, else None."""
    if node_type in ("object", "array"):
        return None
    test = _TYPE_TESTS[node_type]
    if all(test(v) for v in values):
        return frozenset(values)
    return None


def _parse(schema: object, depth: int) -> _Node:
    if depth > MAX_DEPTH:
        raise ValueError(f"schema nested deeper than {MAX_DEPTH} levels")
    if not isinstance(schema, Mapping):
        raise ValueError("a schema node must be an object")
    node_type = schema.get("type")
    if node_type not in TYPES:
        raise ValueError(f"schema node without a supported `type`: `{node_type!r}`")
    low_key, high_key = _BOUNDS.get(node_type, ("", ""))
    counted = node_type in _COUNTED
    props: tuple[tuple[str, str, _Node], ...] = ()
    items = None
    if node_type == "object":
        raw = schema.get("properties") or {}
        props = tuple((k, escape_pointer_token(k), _parse(v, depth + 1)) for k, v in raw.items())
    if node_type == "array" and "items" in schema:
        items = _parse(schema["items"], depth + 1)
    enum = tuple(schema["enum"]) if "enum" in schema else None
    return _Node(
        type=node_type,
        props=props,
        declared=frozenset(name for name, _, _ in props),
        required=tuple(schema.get("required") or ()) if node_type == "object" else (),
        additional=schema.get("additionalProperties", False) is True,
        items=items,
        low=_bound(schema, low_key, counted),
        high=_bound(schema, high_key, counted),
        enum=enum,
        enum_set=None if enum is None else _scalar_set(node_type, enum),
        const=(schema["const"],) if "const" in schema else (),
    )


# ---------------------------------------------------------------- the generated fast path


class _Source(SourceBase):
    """Python source of one ``is_valid`` function; constants go to closure cells."""

    def fail_unless(self, indent: int, conditions: list[str]) -> None:
        self.lines.append("    " * indent + f"if not ({' and '.join(conditions)}): return False")

    def node(self, node: _Node, var: str, indent: int) -> None:
        conditions = [_TYPE_CODE[node.type].format(v=var)]
        conditions += self.bounds(node, var) + self.values(node, var)
        if node.type == "object":
            self.object(node, var, indent, conditions)
        elif node.type == "array":
            self.array(node, var, indent, conditions)
        else:
            self.fail_unless(indent, conditions)

    def bounds(self, node: _Node, var: str) -> list[str]:
        measured = f"len({var})" if node.type in _COUNTED else var
        out = []
        if node.low is not None:
            out.append(f"{measured} >= {self.const(node.low)}")
        if node.high is not None:
            out.append(f"{measured} <= {self.const(node.high)}")
        return out

    def values(self, node: _Node, var: str) -> list[str]:
        out = []
        if node.enum_set is not None:
            out.append(f"{var} in {self.const(node.enum_set)}")
        elif node.enum is not None:
            out.append(f"_anyeq({var}, {self.const(node.enum)})")
        if node.const:
            (value,) = node.const
            if node.type in ("string", "integer", "number") and _TYPE_TESTS[node.type](value):
                out.append(f"{var} == {self.const(value)}")
            else:
                out.append(f"_eq({var}, {self.const(value)})")
        return out

    def object(self, node: _Node, var: str, indent: int, conditions: list[str]) -> None:
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

    def array(self, node: _Node, var: str, indent: int, conditions: list[str]) -> None:
        if node.items is None:
            conditions.append(f"_fin({var})")
        self.fail_unless(indent, conditions)
        if node.items is not None:
            item = self.name("v")
            self.lines.append("    " * indent + f"for {item} in {var}:")
            self.node(node.items, item, indent + 1)


_GLOBALS: dict[str, object] = {
    "__builtins__": {}, "type": type, "isinstance": isinstance, "len": len, "str": str,
    "int": int, "float": float, "dict": dict, "_ARR": _ARR, "_fin": is_finite_json,
    "_eq": json_equal, "_anyeq": _any_equal,
}  # fmt: skip
"""All the generated code can reach: no other builtins."""


def _generate(root: _Node) -> tuple[Callable[[object], bool], str]:
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
    return "an array" if isinstance(value, _ARR) else f"`{t.__name__}`, which is not JSON"


def _join(pointer: str, token: object) -> str:
    return f"{pointer}/{escape_pointer_token(str(token))}"


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
                    out.append(SchemaError(_join(where, key), "type", message))
            pairs = [(v, _join(where, k)) for k, v in item.items() if type(k) is str]
            stack.extend(reversed(pairs))
        elif isinstance(item, _ARR):
            stack.extend(reversed([(v, f"{where}/{i}") for i, v in enumerate(item)]))
        else:
            out.append(SchemaError(where, "type", f"`{t.__name__}` is not a json value"))


_ERROR_GLOBALS = {**_GLOBALS, "_E": SchemaError, "_desc": _describe, "_show": _show,
                  "_join": _join, "_free": _free_errors}  # fmt: skip

# ---------------------------------------------------------------- the API


class Validator:
    """A schema compiled once.

    ``is_valid`` is the generated function itself (an attribute, so a call costs one frame):
    ``validator.is_valid(value) -> bool``. ``errors(value)`` lists every failure, ``()`` when
    the value is valid. ``source`` is the generated Python, for reading and debugging.
    """

    __slots__ = ("_collect", "_root", "is_valid", "source")

    is_valid: Callable[[object], bool]

    def __init__(self, root: _Node, is_valid: Callable[[object], bool], source: str) -> None:
        self._root = root
        self.is_valid = is_valid
        self.source = source
        self._collect, _ = generate_collector(root, _ERROR_GLOBALS, _TYPE_CODE, _BOUNDS, _COUNTED)

    def errors(self, value: object) -> tuple[SchemaError, ...]:
        """Every failing keyword, in a deterministic order; ``()`` when ``value`` is valid.

        Order: the node's own keywords, then declared properties in schema order, then
        additional properties in sorted key order, then array items by index.
        """
        return tuple(self._collect(value))  # () for a valid value, like the reference

    def __repr__(self) -> str:
        return f"Validator(type={self._root.type!r})"


def compile_validator(schema: Mapping[str, Any]) -> Validator:
    """Compile a schema of the subset (already accepted by the compiler's checker).

    Raises ``ValueError`` for what is not a schema of the subset at all (a node without one of
    the seven types, nesting deeper than 8 levels); other keywords are not looked at here.
    """
    try:
        key = canonical_cbor(schema)  # keeps `3` and `3.0` apart, as the contract digest does
    except (EncodingError, ValueError, TypeError):  # a lone surrogate (UnicodeEncodeError)...
        key = None  # compiled, not remembered
    found = _COMPILED.get(key) if key is not None else None
    if found is None:
        root = _parse(schema, 1)
        is_valid, source = _generate(root)
        found = Validator(root, is_valid, source)
        if key is not None:
            if len(_COMPILED) >= _COMPILED_LIMIT:
                _COMPILED.clear()
            _COMPILED[key] = found
    return found


_COMPILED: dict[bytes, Validator] = {}
"""Validators by the canonical CBOR of their schema: a validator is immutable, so tools with one
schema share it, and a project compiled again (a registry check, a promotion) does not generate
its code again."""
_COMPILED_LIMIT = 512
