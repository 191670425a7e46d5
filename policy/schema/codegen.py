"""The error collector of :meth:`policy.schema.validator.Validator.errors`, generated per schema.

The generated function reports exactly what the reference walk of :mod:`policy.schema.validator`
(``tests/support/schema_oracle.py``) reports, keyword by keyword and in the same order: the node's
type, its bounds, ``enum``, ``const``, then declared properties in schema order, missing required
properties, other keys in sorted order, array items by index. Only rare work (sorting the extra
keys, unconstrained values that are not finite JSON) goes through helpers. As for ``is_valid``,
constants are ``repr`` literals or closure cells, so any string in a schema is safe, and names
are ours. ``tests/policy/schema/test_schema_errors_codegen.py`` checks the two agree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from policy.schema.parsed import Node, SchemaError

Pointer = tuple[str | None, str]  # (the pointer when known while generating, its expression)


def not_allowed(key: object) -> str:
    return f"property `{key}` is not allowed"


def not_a_string(key: object) -> str:
    return f"key `{key!r}` is not a string"


def _first_as_str(pair: tuple[object, object]) -> str:
    return str(pair[0])


def extra_keys(value: Mapping[object, object], declared: frozenset[str]) -> list[object]:
    """The keys of ``value`` not declared, sorted by their text (stable: ties in key order)."""
    keys = []
    for key in value:  # a loop costs less than a comprehension here
        if key not in declared:
            keys.append(key)
    return keys if len(keys) == 1 else sorted(keys, key=str)


def error_factory(cls: type[SchemaError]) -> Callable[[str, str, str], SchemaError]:
    """``cls(pointer, keyword, message)`` straight from ``tuple.__new__`` (a named tuple)."""
    new = tuple.__new__

    def make(pointer: str, keyword: str, message: str) -> SchemaError:
        return new(cls, (pointer, keyword, message))

    return make


def _literal(value: object) -> bool:
    if value is None or type(value) is bool:
        return True
    if type(value) is int:
        return abs(value) < 2**62
    if type(value) is float:
        return value - value == 0.0
    return type(value) is str and len(value) < 256


class SourceBase:
    """Generated source under way: its lines and the constants its closure cells will hold."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.cells: dict[str, object] = {}
        self.by_id: dict[int, str] = {}  # every value looked up here outlives the generation
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, value: object) -> str:
        """A literal for small scalars (``repr`` is exact and safe), else a closure cell."""
        if _literal(value):
            return repr(value)
        if id(value) not in self.by_id:
            self.by_id[id(value)] = cell = self.name("_k")
            self.cells[cell] = value
        return self.by_id[id(value)]


class _ErrorSource(SourceBase):
    """Python source of one error collector."""

    def __init__(
        self,
        type_code: Mapping[str, str],
        bounds: Mapping[str, tuple[str, str]],
        counted: Mapping[str, str],
        built: type[SchemaError],
    ) -> None:
        super().__init__()
        self.type_code, self.bounds_keys, self.counted = type_code, bounds, counted
        self.built = built

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def error(self, indent: int, pointer: str, keyword: str, message: str) -> None:
        self.emit(indent, f"_ap(_E({pointer}, {keyword!r}, {message}))")

    def fixed_error(self, indent: int, pointer: Pointer, keyword: str, message: str) -> None:
        """An error known in full while generating is built once, here (it is immutable)."""
        if pointer[0] is None:
            self.error(indent, pointer[1], keyword, self.const(message))
        else:
            error = self.built(pointer[0], keyword, message)
            self.cells[cell := self.name("_k")] = error
            self.emit(indent, f"_ap({cell})")

    def child(self, pointer: Pointer, token: str) -> Pointer:
        known, expr = pointer
        if known is not None:
            joined = f"{known}/{token}"
            return joined, self.const(joined)
        return None, f"{expr} + {self.const('/' + token)}"

    def node(self, node: Node, var: str, pointer: Pointer, indent: int) -> None:
        expected = self.const(f"expected `{node.type}`, got ")
        self.emit(indent, f"if not ({self.type_code[node.type].format(v=var)}):")
        self.error(indent + 1, pointer[1], "type", f"{expected} + _desc({var})")
        self.emit(indent, "else:")
        start = len(self.lines)
        self.checks(node, var, pointer, indent + 1)
        if len(self.lines) == start:
            self.lines.pop()  # nothing more to check: no `else`

    def checks(self, node: Node, var: str, pointer: Pointer, indent: int) -> None:
        p = pointer[1]
        if node.type in self.bounds_keys:
            self.bound_checks(node, var, p, indent)
        if node.enum is not None:
            if node.enum_set is not None:
                test = f"{var} in {self.const(node.enum_set)}"
            else:
                test = f"_anyeq({var}, {self.const(node.enum)})"
            self.emit(indent, f"if not ({test}):")
            self.fixed_error(indent + 1, pointer, "enum", "value is not one of the `enum` values")
        if node.const:
            self.emit(indent, f"if not _eq({var}, {self.const(node.const[0])}):")
            message = "value does not equal the `const` value"
            self.fixed_error(indent + 1, pointer, "const", message)
        if node.type == "object":
            self.object(node, var, pointer, indent)
        elif node.type == "array":
            if node.items is None:
                self.emit(indent, f"if not _fin({var}): _free({var}, {p}, out)")
            else:
                index, item = self.name("i"), self.name("v")
                self.emit(indent, f"for {index}, {item} in enumerate({var}):")
                inner: Pointer = (None, f"{p} + '/' + str({index})")
                self.node(node.items, item, inner, indent + 1)

    def bound_checks(self, node: Node, var: str, p: str, indent: int) -> None:
        low_key, high_key = self.bounds_keys[node.type]
        unit = self.counted.get(node.type)
        measured = f"len({var})" if unit else var
        shown = f"str({measured})" if unit else f"_show({var})"
        if node.low is not None:
            suffix = (
                f" {unit} is fewer than the minimum {node.low}"
                if unit
                else f" is less than the minimum `{node.low!r}`"
            )
            self.emit(indent, f"if {measured} < {self.const(node.low)}:")
            self.error(indent + 1, p, low_key, f"{shown} + {self.const(suffix)}")
        if node.high is not None:
            suffix = (
                f" {unit} is more than the maximum {node.high}"
                if unit
                else f" is greater than the maximum `{node.high!r}`"
            )
            self.emit(indent, f"if {measured} > {self.const(node.high)}:")
            self.error(indent + 1, p, high_key, f"{shown} + {self.const(suffix)}")

    def object(self, node: Node, var: str, pointer: Pointer, indent: int) -> None:
        p = pointer[1]
        for name, token, child in node.props:
            key = self.const(name)
            child_var = self.name("v")
            self.emit(indent, f"if {key} in {var}:")
            self.emit(indent + 1, f"{child_var} = {var}[{key}]")
            self.node(child, child_var, self.child(pointer, token), indent + 1)
            if name in node.required:
                self.emit(indent, "else:")
                missing = f"missing required property `{name}`"
                self.fixed_error(indent + 1, pointer, "required", missing)
        for name in node.required:
            if name not in node.declared:
                missing = f"missing required property `{name}`"
                self.emit(indent, f"if {self.const(name)} not in {var}:")
                self.fixed_error(indent + 1, pointer, "required", missing)
        declared, k, x = self.const(node.declared), self.name("k"), self.name("x")
        self.emit(indent, f"if not {declared}.issuperset({var}):")
        where = f"_join({p}, {k})"
        if not node.additional:
            self.emit(indent + 1, f"for {k} in _extra_keys({var}, {declared}):")
            self.error(indent + 2, where, "additionalProperties", f"_not_allowed({k})")
        else:
            extras = f"[{k} for {k} in {var}.items() if {k}[0] not in {declared}]"
            self.emit(indent + 1, f"for {k}, {x} in sorted({extras}, key=_first):")
            self.emit(indent + 2, f"if type({k}) is not str:")
            self.error(indent + 3, where, "type", f"_not_a_string({k})")
            self.emit(indent + 2, f"elif not _fin({x}): _free({x}, {where}, out)")


def generate_collector(
    root: Node,
    namespace: Mapping[str, object],
    type_code: Mapping[str, str],
    bounds: Mapping[str, tuple[str, str]],
    counted: Mapping[str, str],
) -> tuple[Callable[[object], list[SchemaError]], str]:
    """The collector for ``root`` and its source; ``namespace`` holds the helpers it calls:
    ``_E`` (SchemaError), ``_desc``, ``_show``, ``_join``, ``_free``, ``_fin``, ``_eq``,
    ``_anyeq``, the builtins ``is_valid`` uses and ``ARRAYS``."""
    source = _ErrorSource(type_code, bounds, counted, cast("type[SchemaError]", namespace["_E"]))
    source.node(root, "v0", ("", "''"), 2)
    head = [f"def _factory({', '.join(source.cells)}):", "    def errors(v0):"]
    body = ["        out = []", "        _ap = out.append", *source.lines]
    text = "\n".join([*head, *body, "        return out", "    return errors", ""])
    scope: dict[str, Any] = dict(namespace)
    scope |= {"enumerate": enumerate, "sorted": sorted, "_first": _first_as_str}
    scope |= {"_not_allowed": not_allowed, "_not_a_string": not_a_string}
    scope |= {"_E": error_factory(source.built), "_extra_keys": extra_keys}
    # the text comes from the parsed schema alone: names are ours, constants repr literals or cells
    exec(compile(text, "<seif-schema-errors>", "exec"), scope)
    factory = cast("Callable[..., Callable[[object], list[SchemaError]]]", scope["_factory"])
    return factory(*source.cells.values()), text
