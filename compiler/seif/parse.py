"""The `.seif` front end's first passes: ``parse`` (lark's LALR parser over ``grammar/seif.lark``,
built once per process: ``compiler.seif.grammar``) and ``lower`` (the tree to the JSON document
it denotes, as docs/language.md maps it), with the line and column of every element for
diagnostics.

The document then goes through the JSON front end's passes (structure, resolve, check, defaults,
lower: ``compiler.seif.front``), so a project written either way has one IR and one digest.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from lark import Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from compiler.seif.grammar import parser
from compiler.seif.hints import hint
from policy.diagnostic import Diagnostic, Location, nearest
from policy.ir import COORDINATE_FIELDS
from policy.json.pointer import join

FORMAT = "seif.context-project.v1"
OPTION_KEYS = {
    "min_length": "minLength",
    "max_length": "maxLength",
    "min_items": "minItems",
    "max_items": "maxItems",
    "additional_properties": "additionalProperties",
}
Position = tuple[int, int]
_TOOL_KEYS = {
    "tool_name": "name", "tool_description": "description", "effect": "effect",
    "approval": "approval", "max_calls": "maxCalls", "timeout": "timeoutMs",
    "parameters": "parameters", "result": "result", "upstream": "upstream",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class SeifSyntaxError(Exception):
    """A text that is not `.seif`: where, a code, and what to write instead."""

    code: str
    message: str
    line: int
    column: int

    @property
    def diagnostic(self) -> Diagnostic:
        """This error as a diagnostic at its line and column."""
        where = Location(line=self.line, column=self.column, cite="line")
        return Diagnostic(code=self.code, message=self.message, location=where)


@dataclass
class Parsed:
    """A `.seif` file as the JSON document it denotes, where each element starts, and its
    comments (``(line, text)``, each with ``trailing`` when code precedes it on its line)."""

    document: dict[str, Any]
    positions: dict[str, Position] = field(default_factory=dict)
    comments: list[tuple[int, str, bool]] = field(default_factory=list)

    @property
    def lines(self) -> dict[str, int]:
        return {pointer: at[0] for pointer, at in self.positions.items()}

    def position_of(self, pointer: str) -> Position | None:
        """The position of ``pointer``, or of its nearest recorded ancestor."""
        while True:
            if pointer in self.positions:
                return self.positions[pointer]
            if not pointer:
                return None
            pointer = pointer.rsplit("/", 1)[0]


def parse_seif(text: str) -> Parsed:
    """The document of ``text``; :class:`SeifSyntaxError` for a text that does not parse."""
    try:
        tree = parser().parse(text)
    except UnexpectedInput as exc:
        raise syntax_error(exc, text) from None
    lowering = _Lowering()
    document = lowering.start(tree)
    return Parsed(document, lowering.positions, comments(text))


# --- comments -------------------------------------------------------------------------------

_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')


def comments(text: str) -> list[tuple[int, str, bool]]:
    """Every ``# comment`` outside a string literal: (line, text, trailing)."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        plain = _STRING.sub(lambda m: " " * len(m.group()), line)
        at = plain.find("#")
        if at >= 0:
            found.append((number, line[at:].rstrip(), bool(plain[:at].strip())))
    return found


# --- lowering -----------------------------------------------------------------------------------


def _text(token: Any) -> str:
    return str(token)


def _string(token: Any) -> str:
    value: str = json.loads(str(token))
    return value


def _pos(node: Any) -> Position:
    """Where ``node`` starts: its first token's line and column (the parser keeps no other
    positions: recording them costs a third of the parse)."""
    while isinstance(node, Tree):
        node = next((c for c in node.children if c is not None), None)
    if isinstance(node, Token):
        return (node.line or 1, node.column or 1)
    return (1, 1)


class _Lowering:
    """The tree to the document; ``positions`` maps JSON pointers to where they were written."""

    def __init__(self) -> None:
        self.positions: dict[str, Position] = {}

    def at(self, pointer: str, node: Any) -> None:
        if pointer not in self.positions:
            self.positions[pointer] = _pos(node)

    def start(self, tree: Tree[Any]) -> dict[str, Any]:
        project_id, version, *items = tree.children
        doc: dict[str, Any] = {"format": FORMAT, "id": _text(project_id), "version": _text(version)}
        self.at("", tree)
        self.at("/id", project_id)
        self.at("/version", version)
        for item in items:
            self.item(doc, item)
        return doc

    def _append(self, doc: dict[str, Any], key: str, value: Any, node: Any) -> str:
        items = doc.setdefault(key, [])
        pointer = join(f"/{key}", len(items))
        items.append(value)
        self.at(pointer, node)
        return pointer

    def item(self, doc: dict[str, Any], node: Tree[Any]) -> None:
        kind = node.data
        if kind == "project_description":
            doc["description"] = _string(node.children[0])
            self.at("/description", node)
        elif kind == "json_item":
            key, value = node.children
            doc[_text(key)] = json_value(value)
            self.at(join("", _text(key)), node)
        elif kind == "objective":
            pointer = self._append(doc, "objectives", self.objective(node), node)
            self.at(join(pointer, "profile"), node.children[1])
        elif kind in ("objective_json", "profile_json", "tool_json", "test_json"):
            key = {"objective_json": "objectives", "profile_json": "profiles",
                   "tool_json": "tools", "test_json": "tests"}[kind]  # fmt: skip
            self._append(doc, key, json_value(node.children[0]), node)
        elif kind == "profile":
            pointer = join("/profiles", len(doc.get("profiles", [])))
            self._append(doc, "profiles", self.profile(node, pointer), node)
        elif kind == "tool":
            pointer = join("/tools", len(doc.get("tools", [])))
            self._append(doc, "tools", self.tool(node, pointer), node)
        elif kind == "fixtures":
            doc["toolFixtures"] = self.fixtures(node.children[-1], "/toolFixtures")
            self.at("/toolFixtures", node)
        elif kind == "test":
            pointer = join("/tests", len(doc.get("tests", [])))
            self._append(doc, "tests", self.test(node, pointer), node)

    def objective(self, node: Tree[Any]) -> dict[str, Any]:
        ident, profile, description = node.children
        out = {"id": _text(ident), "profile": _text(profile)}

        if description is not None:
            out["description"] = _string(description)
        return out

    # profiles

    def profile(self, node: Tree[Any], pointer: str) -> dict[str, Any]:
        ident, *items = node.children
        out: dict[str, Any] = {"id": _text(ident)}
        for item in items:
            self.profile_item(out, item, pointer)
        return out

    def profile_item(self, out: dict[str, Any], node: Tree[Any], pointer: str) -> None:
        kind, parts = node.data, node.children
        if kind == "token_ceiling":
            out["tokenCeiling"] = number(parts[0])
            self.at(join(pointer, "tokenCeiling"), node)
        elif kind == "profile_description":
            out["description"] = _string(parts[0])
            self.at(join(pointer, "description"), node)
        elif kind in ("message", "message_json"):
            value = json_value(parts[0]) if kind == "message_json" else self.message(parts)
            self._append_in(out, "context", value, node, pointer)
        elif kind in ("include", "exclude", "rule_json"):
            at = join(pointer, "toolRules", len(out.get("toolRules", [])))
            value = json_value(parts[0]) if kind == "rule_json" else self.rule(node, at)
            self._append_in(out, "toolRules", value, node, pointer)

    def _append_in(
        self, out: dict[str, Any], key: str, value: Any, node: Any, pointer: str
    ) -> None:
        items = out.setdefault(key, [])
        self.at(join(pointer, key, len(items)), node)
        items.append(value)

    def message(self, parts: list[Any]) -> dict[str, Any]:
        ident, role, requiredness, text = parts
        out: dict[str, Any] = {"id": _text(ident), "role": _text(role), "text": _string(text)}
        if requiredness is not None:
            out["required"] = _text(requiredness) == "required"
        return out

    def rule(self, node: Tree[Any], pointer: str) -> dict[str, Any]:
        parts = node.children
        out: dict[str, Any] = {"tool": _text(parts[0]), "participation": str(node.data)}
        self.at(join(pointer, "tool"), parts[0])
        if parts[1] is not None:
            out["required"] = _text(parts[1]) == "required"
        if node.data == "include":
            when, conditions = parts[2], parts[3]
            if when is not None:
                out["when"] = _string(when.children[0])
                self.at(join(pointer, "when"), when)
            if conditions is not None:
                out["conditions"] = [
                    self.condition(c, join(pointer, "conditions", i))
                    for i, c in enumerate(conditions.children)
                ]
        return out

    def condition(self, node: Tree[Any], pointer: str) -> dict[str, Any]:
        action, reason, when = node.children
        self.at(pointer, node)
        self.at(join(pointer, "when"), when)
        then = "DENY" if _text(action) == "deny" else "REQUIRE_APPROVAL"
        return {"when": _string(when.children[0]), "then": then, "reason": _string(reason)}

    # tools

    def tool(self, node: Tree[Any], pointer: str) -> dict[str, Any]:
        ident, version, *items = node.children
        out: dict[str, Any] = {"id": _text(ident), "version": _text(version)}
        for item in items:
            self.at(join(pointer, _TOOL_KEYS[item.data]), item)  # first: where the line starts
            key, value = self.tool_item(item, pointer)
            out[key] = value
        return out

    def tool_item(self, node: Tree[Any], pointer: str) -> tuple[str, Any]:
        kind, parts = node.data, node.children
        simple = {"tool_name": "name", "effect": "effect", "approval": "approval"}
        if kind in simple:
            return simple[kind], _text(parts[0])
        if kind == "tool_description":
            return "description", _string(parts[0])
        if kind == "max_calls":
            return "maxCalls", number(parts[0])
        if kind == "timeout":
            return "timeoutMs", number(parts[0])
        if kind == "upstream":
            server, tool, digest = parts
            at = join(pointer, "upstream")
            for name, part in (("server", server), ("tool", tool), ("descriptorDigest", digest)):
                self.at(join(at, name), part)
            return "upstream", {
                "server": _text(server),
                "tool": _string(tool),
                "descriptorDigest": _string(digest),
            }
        key = "parameters" if kind == "parameters" else "result"
        return key, self.schema_of(parts[-1], join(pointer, key))  # parts[0]: the keyword

    def schema_of(self, node: Any, pointer: str) -> Any:
        if isinstance(node, Tree) and node.data == "properties":
            return self.object_schema(None, node, pointer)
        if isinstance(node, Tree) and node.data == "schema":
            return self.schema(node, pointer)
        return json_value(node)

    def schema(self, node: Tree[Any], pointer: str) -> dict[str, Any]:
        type_name, options, body = node.children
        out: dict[str, Any] = {"type": _text(type_name)}
        self.at(pointer, node)
        if options is not None:
            for option in options.children:
                name, value = option.children
                key = OPTION_KEYS.get(_text(name), _text(name))
                out[key] = json_value(value)
                self.at(join(pointer, key), option)
        if isinstance(body, Tree) and body.data == "properties":
            return self.object_schema(out, body, pointer)
        if body is not None:
            out["items"] = self.schema(body, join(pointer, "items"))
        return out

    def object_schema(
        self, base: dict[str, Any] | None, node: Tree[Any], pointer: str
    ) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "object"} if base is None else base
        self.at(pointer, node)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for prop in node.children:
            name_token, optional, schema = prop.children
            quoted = getattr(name_token, "type", "") == "STRING"
            name = _string(name_token) if quoted else _text(name_token)
            if name in properties:
                line, column = _pos(name_token)
                message = f"property `{name[:64]}` is declared twice in this schema"
                raise SeifSyntaxError("SEIF_DUPLICATE_PROPERTY", message, line, column)
            at = join(pointer, "properties", name)
            self.at(at, prop)
            properties[name] = self.schema(schema, at)
            if optional is None:
                required.append(name)
        out["properties"] = properties
        if required:
            out["required"] = required
        return out

    # fixtures and tests

    def fixtures(self, block: Tree[Any], pointer: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for entry in block.children:
            ident, state = entry.children
            if _text(ident) in out:
                line, column = _pos(ident)
                message = f"the fixture of `{_text(ident)[:64]}` is written twice"
                raise SeifSyntaxError("DUPLICATE_KEY", message, line, column)
            self.at(join(pointer, _text(ident)), entry)
            out[_text(ident)] = fixture_value(state)
        return out

    def test(self, node: Tree[Any], pointer: str) -> dict[str, Any]:
        ident, objective, guard, fixtures, *items = node.children
        out: dict[str, Any] = {"id": _text(ident), "objective": _text(objective)}
        self.at(join(pointer, "objective"), objective)
        if guard is not None:
            out["guard"] = True
        if fixtures is not None:
            out["fixtures"] = self.test_fixtures(fixtures, join(pointer, "fixtures"))
        expect: dict[str, Any] = {}
        for item in items:
            if item.data == "coordinate":
                self.coordinate(
                    out.setdefault("coordinates", {}), item, join(pointer, "coordinates")
                )
            elif item.data == "principal_field":
                self.principal_field(
                    out.setdefault("principal", {}), item, join(pointer, "principal")
                )
            elif item.data == "expect_json":
                expect = json_value(item.children[0])
                self.at(join(pointer, "expect"), item)
            else:
                self.test_item(expect, item, join(pointer, "expect"))
        out["expect"] = expect
        return out

    def coordinate(self, out: dict[str, Any], node: Tree[Any], pointer: str) -> None:
        """``context NAME VALUE``: one coordinate of the test's simulated context (a NAME the
        format does not know is the structure pass's ``UNKNOWN_KEY``, located here)."""
        name_token, value = node.children
        name = _text(name_token)
        line, column = _pos(name_token)
        near = nearest(name, (*COORDINATE_FIELDS, "include", "exclude"))
        if near in ("include", "exclude"):
            message = f"unknown keyword `{name[:40]}`: did you mean `{near}`?"
            raise SeifSyntaxError("SEIF_UNKNOWN_KEYWORD", message, line, column)
        if name in out:
            message = f"the coordinate `{name[:64]}` is written twice"
            raise SeifSyntaxError("DUPLICATE_KEY", message, line, column)
        self.at(pointer, node)
        self.at(join(pointer, name), node)
        quoted = getattr(value, "type", "") == "STRING"
        out[name] = _string(value) if quoted else _text(value)

    def principal_field(self, out: dict[str, Any], node: Tree[Any], pointer: str) -> None:
        """``principal NAME VALUE``: one field of the test's principal (``issuer``,
        ``subject``, ``clientId``: a word or a string; ``claims``: a JSON object). A NAME the
        format does not know, or a value of the wrong type, is the structure pass's, located
        here."""
        name_token, value = node.children
        name = _text(name_token)
        if name in out:
            line, column = _pos(name_token)
            message = f"the principal's `{name[:64]}` is written twice"
            raise SeifSyntaxError("DUPLICATE_KEY", message, line, column)
        self.at(pointer, node)
        self.at(join(pointer, name), node)
        out[name] = _text(value) if isinstance(value, Token) else json_value(value)

    def test_fixtures(self, node: Tree[Any], pointer: str) -> Any:
        _keyword, value = node.children
        self.at(pointer, node)
        if isinstance(value, Token) and value.type == "CURRENT":
            return "current"
        if isinstance(value, Tree) and value.data == "fixture_block":
            return self.fixtures(value, pointer)
        return json_value(value)

    def test_item(self, expect: dict[str, Any], node: Tree[Any], pointer: str) -> None:
        kind, parts = node.data, node.children
        if kind == "resolution":
            expect["resolution"] = _text(parts[0])
            self.at(join(pointer, "resolution"), node)
        elif kind == "cause":
            self._into(expect, ("causes",), _text(parts[0]), node, pointer)
        elif kind in ("context_include", "context_exclude", "tools_include", "tools_exclude"):
            group, which = kind.split("_")
            self._into(expect, (group, which), _text(parts[0]), node, pointer)
        elif kind == "call":
            calls = expect.get("tools", {}).get("calls", [])
            at = join(pointer, "tools", "calls", len(calls))
            self.at(join(at, "tool"), parts[0])
            if parts[5] is not None:
                self.at(join(at, "reason"), parts[5])
            self._into(expect, ("tools", "calls"), call_value(parts), node, pointer)

    def _into(
        self, expect: dict[str, Any], path: tuple[str, ...], value: Any, node: Any, pointer: str
    ) -> None:
        target = expect
        for key in path[:-1]:
            target = target.setdefault(key, {})
        items = target.setdefault(path[-1], [])
        self.at(join(pointer, *path, len(items)), node)
        items.append(value)


def call_value(parts: list[Any]) -> dict[str, Any]:
    tool, call_id, arguments, approved, outcome, reason = parts
    out: dict[str, Any] = {"tool": _text(tool)}
    if call_id is not None:
        out["callId"] = _string(call_id) if call_id.type == "STRING" else _text(call_id)
    out["arguments"] = json_value(arguments)
    if approved is not None:
        out["approved"] = True
    out["expect"] = _text(outcome).upper()
    if reason is not None:
        out["reason"] = _text(reason)
    return out


def fixture_value(node: Tree[Any]) -> Any:
    if node.data == "ready":
        version, digest = node.children
        return {"state": "READY", "version": _text(version), "contractDigest": _text(digest)}
    if node.data == "unavailable":
        return {"state": "UNAVAILABLE"}
    return json_value(node.children[0])


def number(token: Any) -> int | float:
    text = _text(token)
    value: int | float = json.loads(text)
    return value


def json_value(node: Any) -> Any:
    """A JSON value of the tree, exactly as written (``3`` an int, ``3.0`` a float)."""
    kind = node.data
    if kind == "json_object":
        out: dict[str, Any] = {}
        for pair in (p for p in node.children if p is not None):
            key = _string(pair.children[0])
            if key in out:
                line, column = _pos(pair.children[0])
                raise SeifSyntaxError(
                    "DUPLICATE_KEY", f"key `{key[:64]}` appears twice", line, column
                )
            out[key] = json_value(pair.children[1])
        return out
    if kind == "json_array":
        return [json_value(v) for v in node.children if v is not None]
    if kind == "json_string":
        return _string(node.children[0])
    if kind == "json_number":
        return number(node.children[0])
    return {"json_true": True, "json_false": False, "json_null": None}[kind]


# --- syntax errors ----------------------------------------------------------------------------


def syntax_error(exc: UnexpectedInput, text: str) -> SeifSyntaxError:
    """What lark saw, as a located diagnostic that says what to write instead."""
    line, column = getattr(exc, "line", 1) or 1, getattr(exc, "column", 1) or 1
    if isinstance(exc, UnexpectedEOF):
        line, column = _end(text)
    code, message = hint(exc, text)
    return SeifSyntaxError(code, message, max(line, 1), max(column, 1))


def _end(text: str) -> Position:
    lines = text.splitlines() or [""]
    return len(lines), len(lines[-1]) + 1


__all__ = [
    "FORMAT", "Parsed", "SeifSyntaxError", "UnexpectedCharacters", "UnexpectedToken",
    "comments", "json_value", "parse_seif", "parser",
]  # fmt: skip
