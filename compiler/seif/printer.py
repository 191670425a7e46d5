"""The `.seif` printer and formatter: ``seif convert --to seif`` and ``seif fmt``.

``to_seif(doc)`` prints a JSON project document as `.seif` (``grammar/seif.lark``). Each element
(objective, profile, message, rule, tool, tool field, schema, fixture, test, test item) takes its
readable form when that form lowers to exactly the same JSON, and its ``json VALUE`` escape
otherwise, so parsing the printout gives back a document equal to ``doc``: same keys, values,
int/float distinction and list orders (object key order may differ).

``format_seif(text)`` (``compiler.seif.fmt``) parses `.seif` text, prints its document and puts
the comments back. Each printed line that starts an element carries the element's JSON pointer
(``/tools/0/effect``), matched against the parser's ``lines`` (pointer -> line where the element
was written).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from compiler.seif.grammar import KEYWORDS
from policy.json.pointer import join

FORMAT = "seif.context-project.v1"
WIDTH = 100
INDENT = "  "

ID = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
VERSION = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?")
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")

OPTION_NAMES = {
    "minLength": "min_length",
    "maxLength": "max_length",
    "minItems": "min_items",
    "maxItems": "max_items",
    "additionalProperties": "additional_properties",
}
SCHEMA_STRUCTURE = frozenset({"type", "properties", "required", "items"})
RESERVED_OPTIONS = SCHEMA_STRUCTURE | frozenset(OPTION_NAMES.values())
TOOL_FIELDS = {
    "name": "name",
    "description": "description",
    "effect": "effect",
    "approval": "approval",
    "maxCalls": "max_calls",
    "timeoutMs": "timeout",
}
ACTIONS = {"DENY": "deny", "REQUIRE_APPROVAL": "require_approval"}
HEADER = ("format", "id", "version", "description")
SECTIONS = ("objectives", "profiles", "tools", "toolFixtures", "tests")


@dataclass(frozen=True, slots=True)
class Line:
    """One printed line: its depth, its text and the pointer of the element it starts."""

    depth: int
    text: str
    pointer: str | None = None


Lines = list[Line]
Check = Callable[[Any], bool]


# --- what a readable form can express ----------------------------------------------------------


def _id(*reserved: str) -> Check:
    return lambda v: isinstance(v, str) and bool(ID.fullmatch(v)) and v not in reserved


def _matches(pattern: re.Pattern[str]) -> Check:
    return lambda v: isinstance(v, str) and bool(pattern.fullmatch(v))


def _is(*literals: Any) -> Check:
    return lambda v: any(isinstance(v, type(x)) and v == x for x in literals)


def _type(kind: type) -> Check:
    return lambda v: isinstance(v, kind)


def _number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return not isinstance(value, float) or math.isfinite(value)


def _any(value: Any) -> bool:
    return True


def _items(value: Any) -> bool:
    return isinstance(value, list) and bool(value)


def _ids(value: Any) -> bool:
    return _items(value) and all(ANY_ID(v) for v in value)


def _coordinates(value: Any) -> bool:
    """``context NAME VALUE`` lines write a non-empty object of strings by name."""
    if not isinstance(value, Mapping) or not value:
        return False
    return all(SAFE_ID(k) and isinstance(v, str) for k, v in value.items())


def _principal(value: Any) -> bool:
    """``principal NAME VALUE`` lines write a non-empty object by name: a string for each
    field but ``claims``, which is written as JSON."""
    if not isinstance(value, Mapping) or not value:
        return False
    return all(SAFE_ID(k) and (k == "claims" or isinstance(v, str)) for k, v in value.items())


ANY_ID, BARE_ID, SAFE_ID = _id(), _id("json"), _id(*KEYWORDS)
STR, BOOL, VERSIONED = _type(str), _type(bool), _matches(VERSION)
Shape = tuple[dict[str, Check], dict[str, Check]]
SHAPES: dict[str, Shape] = {
    "objective": ({"id": BARE_ID, "profile": ANY_ID}, {"description": STR}),
    "profile": (
        {"id": BARE_ID},
        {"tokenCeiling": _number, "description": STR, "context": _items, "toolRules": _items},
    ),
    "message": ({"id": BARE_ID, "role": ANY_ID, "text": STR}, {"required": BOOL}),
    "include": (
        {"tool": ANY_ID, "participation": _is("include")},
        {"required": BOOL, "when": STR, "conditions": _type(list)},
    ),
    "exclude": ({"tool": ANY_ID, "participation": _is("exclude")}, {"required": BOOL}),
    "condition": ({"when": STR, "then": _is(*ACTIONS), "reason": STR}, {}),
    "tool": (
        {"id": BARE_ID, "version": VERSIONED},
        {"name": ANY_ID, "description": STR, "effect": ANY_ID, "approval": ANY_ID}
        | {"maxCalls": _number, "timeoutMs": _number, "parameters": _any, "result": _any}
        | {"upstream": lambda v: fits(v, "upstream")},
    ),
    "upstream": ({"server": ANY_ID, "tool": STR, "descriptorDigest": STR}, {}),
    "ready": (
        {"state": _is("READY"), "version": VERSIONED, "contractDigest": _matches(DIGEST)},
        {},
    ),
    "unavailable": ({"state": _is("UNAVAILABLE")}, {}),
    "test": (
        {"id": BARE_ID, "objective": ANY_ID, "expect": _any},
        {
            "guard": _is(True),
            "fixtures": _any,
            "coordinates": _coordinates,
            "principal": _principal,
        },
    ),
    "expect": ({}, {"resolution": ANY_ID, "causes": _ids, "context": _any, "tools": _any}),
    "context": ({}, {"include": _ids, "exclude": _ids}),
    "tools": ({}, {"include": _ids, "exclude": _ids, "calls": _items}),
    "call": (
        {"tool": ANY_ID, "arguments": _any, "expect": _is("ALLOW", "DENY")},
        {"callId": STR, "approved": _is(True), "reason": SAFE_ID},
    ),
}


def fits(value: Any, shape: str) -> bool:
    """``value`` is an object with the keys and values the readable form of ``shape`` writes."""
    required, optional = SHAPES[shape]
    if not isinstance(value, Mapping) or not required.keys() <= value.keys():
        return False
    checks = required | optional
    return all(key in checks and checks[key](item) for key, item in value.items())


# --- values ------------------------------------------------------------------------------------


def _check_json(value: Any) -> None:
    """Refuse what ``json.dumps`` would silently change (tuples, non-string keys, NaN)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"not a JSON object key: {key!r}")
            _check_json(item)
    elif isinstance(value, list):
        for item in value:
            _check_json(item)
    elif value is not None and not isinstance(value, str | bool) and not _number(value):
        raise ValueError(f"not a JSON value: {value!r}")


def dumps(value: Any) -> str:
    """``value`` as one line of JSON as the grammar reads it (numbers as ``json.dumps``)."""
    _check_json(value)
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: only its \u escape can be written
        text = json.dumps(value, allow_nan=False)
    return text


def _json_lines(head: str, value: Any, depth: int, pointer: str | None) -> Lines:
    """``head`` and ``value``: on one line when it fits, else one member per line."""
    compact = dumps(value)
    fits_line = len(INDENT * depth + head + compact) <= WIDTH
    if fits_line or not value or not isinstance(value, Mapping | list):
        return [Line(depth, head + compact, pointer)]
    if isinstance(value, Mapping):
        parts = [_json_lines(dumps(k) + ": ", v, depth + 1, None) for k, v in value.items()]
        opening, closing = "{", "}"
    else:
        parts = [_json_lines("", v, depth + 1, None) for v in value]
        opening, closing = "[", "]"
    out = [Line(depth, head + opening, pointer)]
    for part in parts[:-1]:
        out += [*part[:-1], Line(part[-1].depth, part[-1].text + ",")]
    return [*out, *parts[-1], Line(depth, closing)]


def _block(head: str, body: Lines, depth: int, pointer: str | None) -> Lines:
    """``head {`` body ``}``, or ``head {}`` for an empty body."""
    if not body:
        return [Line(depth, head + " {}", pointer)]
    return [Line(depth, head + " {", pointer), *body, Line(depth, "}")]


def _or_json(keyword: str, value: Any, depth: int, pointer: str, lines: Lines | None) -> Lines:
    return _json_lines(f"{keyword} json ", value, depth, pointer) if lines is None else lines


def _requiredness(item: Mapping[str, Any]) -> str:
    if "required" not in item:
        return ""
    return " required" if item["required"] else " optional"


# --- the document ------------------------------------------------------------------------------


def to_seif(doc: Mapping[str, Any]) -> str:
    """The `.seif` text of the JSON project document ``doc``; ``ValueError`` for a document no
    `.seif` text denotes (without ``format``, ``id`` or ``version``, with a top-level key that
    is not a ``KEY``, or with a value that is not JSON)."""
    return render(document_lines(doc))


def render(lines: Lines) -> str:
    return "".join((INDENT * line.depth + line.text).rstrip() + "\n" for line in lines)


def document_lines(doc: Mapping[str, Any]) -> Lines:
    out = _header(doc)
    groups: list[Lines] = []
    for key in SECTIONS:
        if key in doc:
            groups += _section(key, doc[key])
    groups += [_json_item(k, v) for k, v in doc.items() if k not in HEADER and k not in SECTIONS]
    for group in groups:
        out += [Line(0, ""), *group]
    return out


def _header(doc: Mapping[str, Any]) -> Lines:
    """``project ID VERSION``; an id or version it cannot write (a ``.seif`` file may set any
    with ``json id``) follows as ``json`` over a placeholder, as does another ``format``."""
    if not isinstance(doc, Mapping) or not {"format", "id", "version"} <= doc.keys():
        raise ValueError("a .seif file always declares `format`, `id` and `version`")
    ident, version = doc["id"], doc["version"]
    head = f"project {ident if ANY_ID(ident) else '_'} {version if VERSIONED(version) else '0.0.0'}"
    out = [Line(0, head, "")]
    wrong = {"format": doc["format"] != FORMAT, "id": not ANY_ID(ident)}
    wrong["version"] = not VERSIONED(version)
    for key in (k for k, bad in wrong.items() if bad):
        out += _json_item(key, doc[key])
    description = doc.get("description")
    if isinstance(description, str):
        out.append(Line(0, "description " + dumps(description), "/description"))
    elif "description" in doc:
        out += _json_item("description", description)
    return out


def _json_item(key: str, value: Any) -> Lines:
    if not KEY.fullmatch(key):
        raise ValueError(f"the top-level key {key!r} cannot be written: `json KEY` needs a KEY")
    return _json_lines(f"json {key} ", value, 0, "/" + key)


def _section(key: str, value: Any) -> list[Lines]:
    pointer = "/" + key
    if key == "toolFixtures":
        body = _fixture_entries(value, 1, pointer)
        return [_json_item(key, value) if body is None else _block("fixtures", body, 0, pointer)]
    if not _items(value):  # only `json` writes an empty list
        return [_json_item(key, value)]
    lines = [PRINTERS[key](item, join(pointer, i)) for i, item in enumerate(value)]
    return [[line for part in lines for line in part]] if key == "objectives" else lines


def _objective(objective: Any, pointer: str) -> Lines:
    if not fits(objective, "objective"):
        return _json_lines("objective json ", objective, 0, pointer)
    text = f"objective {objective['id']} uses {objective['profile']}"
    if "description" in objective:
        text += " " + dumps(objective["description"])
    return [Line(0, text, pointer)]


# --- profiles ----------------------------------------------------------------------------------


def _profile(profile: Any, pointer: str) -> Lines:
    if not fits(profile, "profile"):
        return _json_lines("profile json ", profile, 0, pointer)
    body: Lines = []
    for key, value in profile.items():
        here = join(pointer, key)
        if key == "tokenCeiling":
            body.append(Line(1, f"token_ceiling {dumps(value)}", here))
        elif key == "description":
            body.append(Line(1, f"description {dumps(value)}", here))
        elif key != "id":
            printer = _message if key == "context" else _rule
            body += [line for i, item in enumerate(value) for line in printer(item, join(here, i))]
    return _block(f"profile {profile['id']}", body, 0, pointer)


def _message(message: Any, pointer: str) -> Lines:
    if not fits(message, "message"):
        return _json_lines("message json ", message, 1, pointer)
    head = f"message {message['id']} {message['role']}{_requiredness(message)}"
    return [Line(1, f"{head} {dumps(message['text'])}", pointer)]


def _rule(rule: Any, pointer: str) -> Lines:
    if fits(rule, "exclude"):
        return [Line(1, f"exclude {rule['tool']}{_requiredness(rule)}", pointer)]
    conditions = rule.get("conditions", []) if fits(rule, "include") else [None]
    if not all(fits(c, "condition") for c in conditions):
        return _json_lines("rule json ", rule, 1, pointer)
    head = f"include {rule['tool']}{_requiredness(rule)}"
    if "when" in rule:
        head += " when " + dumps(rule["when"])
    if "conditions" not in rule:
        return [Line(1, head, pointer)]
    body = [_condition(c, join(pointer, "conditions", i)) for i, c in enumerate(conditions)]
    return _block(head, body, 1, pointer)


def _condition(condition: Mapping[str, Any], pointer: str) -> Line:
    reason, when = dumps(condition["reason"]), dumps(condition["when"])
    return Line(2, f"{ACTIONS[condition['then']]} {reason} when {when}", pointer)


# --- tools and schemas -------------------------------------------------------------------------


def _tool(tool: Any, pointer: str) -> Lines:
    if not fits(tool, "tool"):
        return _json_lines("tool json ", tool, 0, pointer)
    body: Lines = []
    for key, value in tool.items():
        here = join(pointer, key)
        if key == "parameters":
            body += _parameters(value, here)
        elif key == "result":
            body += _schema_field("result", value, here)
        elif key == "upstream":
            pin = f"{value['server']} {dumps(value['tool'])} {dumps(value['descriptorDigest'])}"
            body.append(Line(1, f"upstream {pin}", here))
        elif key in TOOL_FIELDS:
            text = dumps(value) if key in ("description", "maxCalls", "timeoutMs") else value
            unit = " ms" if key == "timeoutMs" else ""
            body.append(Line(1, f"{TOOL_FIELDS[key]} {text}{unit}", here))
    return _block(f"tool {tool['id']} {tool['version']}", body, 0, pointer)


def _parameters(schema: Any, pointer: str) -> Lines:
    """``parameters { props }`` for a bare object schema, else a schema or its ``json``."""
    bare = isinstance(schema, Mapping) and schema.get("type") == "object"
    if bare and "properties" in schema and schema.keys() <= {"type", "properties", "required"}:
        body = _properties(schema, 2, pointer)
        if body is not None:
            return _block("parameters", body, 1, pointer)
    return _schema_field("parameters", schema, pointer)


def _schema_field(keyword: str, schema: Any, pointer: str) -> Lines:
    readable = isinstance(schema, Mapping) and schema.get("type") != "json"
    lines = _schema(keyword + " ", schema, 1, pointer, pointer) if readable else None
    return _or_json(keyword, schema, 1, pointer, lines)


def _schema(head: str, schema: Any, depth: int, base: str, pointer: str | None) -> Lines | None:
    """``head`` + ``TYPE(options)`` + ``{ props }`` or ``of SCHEMA``, or None if that cannot
    write ``schema``; ``base`` is its pointer, ``pointer`` that of the element on the line."""
    if not isinstance(schema, Mapping) or not ANY_ID(schema.get("type")):
        return None
    if "properties" not in schema and "required" in schema:
        return None
    options = _options(schema)
    if options is None or ("items" in schema and "properties" in schema):
        return None
    text = head + schema["type"] + options
    if "items" in schema:
        return _schema(text + " of ", schema["items"], depth, join(base, "items"), pointer)
    if "properties" not in schema:
        return [Line(depth, text, pointer)]
    body = _properties(schema, depth + 1, base)
    return None if body is None else _block(text, body, depth, pointer)


def _options(schema: Mapping[str, Any]) -> str | None:
    parts = []
    for key, value in schema.items():
        if key in SCHEMA_STRUCTURE:
            continue
        name = OPTION_NAMES.get(key, key)
        if name == key and (key in RESERVED_OPTIONS or not ANY_ID(key)):
            return None
        parts.append(f"{name}: {dumps(value)}")
    return f"({', '.join(parts)})" if parts else ""


def _properties(schema: Mapping[str, Any], depth: int, base: str) -> Lines | None:
    properties, required = schema["properties"], schema.get("required")
    if not isinstance(properties, Mapping):
        return None
    if "required" in schema and not _in_property_order(required, properties):
        return None
    out: Lines = []
    for name, sub in properties.items():
        label = (name if SAFE_ID(name) else dumps(name)) + ("" if name in (required or ()) else "?")
        pointer = join(base, "properties", name)
        lines = _schema(label + ": ", sub, depth, pointer, pointer)
        if lines is None:
            return None
        out += lines
    return out


def _in_property_order(required: Any, properties: Mapping[str, Any]) -> bool:
    """``?`` marks write a non-empty ``required`` that lists properties in their order."""
    return _items(required) and required == [name for name in properties if name in required]


# --- fixtures and tests ------------------------------------------------------------------------


def _fixture_entries(fixtures: Any, depth: int, pointer: str) -> Lines | None:
    if not isinstance(fixtures, Mapping) or not all(SAFE_ID(k) for k in fixtures):
        return None
    return [line for k, v in fixtures.items() for line in _fixture(k, v, depth, join(pointer, k))]


def _fixture(ident: str, fixture: Any, depth: int, pointer: str) -> Lines:
    if fits(fixture, "unavailable"):
        return [Line(depth, f"{ident} unavailable", pointer)]
    if fits(fixture, "ready"):
        text = f"{ident} ready {fixture['version']} {fixture['contractDigest']}"
        return [Line(depth, text, pointer)]
    return _json_lines(f"{ident} json ", fixture, depth, pointer)


def _test(test: Any, pointer: str) -> Lines:
    if not fits(test, "test"):
        return _json_lines("test json ", test, 0, pointer)
    lines = _test_head(test, pointer)
    expect = test["expect"]
    items = _expect(expect, join(pointer, "expect")) if fits(expect, "expect") else None
    body = _or_json("expect", expect, 1, join(pointer, "expect"), items)
    here = join(pointer, "coordinates")
    who = join(pointer, "principal")
    body = (
        [
            Line(1, f"context {k} {v if SAFE_ID(v) else dumps(v)}", join(here, k))
            for k, v in test.get("coordinates", {}).items()
        ]
        + [
            Line(1, f"principal {k} {_word(v) if isinstance(v, str) else dumps(v)}", join(who, k))
            for k, v in test.get("principal", {}).items()
        ]
        + body
    )
    return [*lines[:-1], *_block(lines[-1].text, body, 0, lines[-1].pointer)]


def _word(value: str) -> str:
    """A string as a bare word where it reads as one, else as a JSON string."""
    return value if SAFE_ID(value) else dumps(value)


def _test_head(test: Mapping[str, Any], pointer: str) -> Lines:
    head = f"test {test['id']} for {test['objective']}" + (" guard" if "guard" in test else "")
    if "fixtures" not in test:
        return [Line(0, head, pointer)]
    fixtures = test["fixtures"]
    if fixtures == "current":
        return [Line(0, head + " fixtures current", pointer)]
    body = _fixture_entries(fixtures, 1, join(pointer, "fixtures"))
    if body is None:
        return _json_lines(f"{head} fixtures json ", fixtures, 0, pointer)
    return _block(head + " fixtures", body, 0, pointer)


def _expect(expect: Mapping[str, Any], pointer: str) -> Lines | None:
    out: Lines = []
    for key, value in expect.items():
        here = join(pointer, key)
        if key == "resolution":
            out.append(Line(1, f"resolution {value}", here))
        elif key == "causes":
            out += [Line(1, f"cause {v}", join(here, i)) for i, v in enumerate(value)]
        elif not value or not fits(value, key):
            return None
        else:
            for group, items in value.items():
                lines = _assertions(key, group, items, join(here, group))
                if lines is None:
                    return None
                out += lines
    return out


def _assertions(kind: str, group: str, items: list[Any], pointer: str) -> Lines | None:
    if group != "calls":
        keyword = f"context {group}" if kind == "context" else group
        return [Line(1, f"{keyword} {v}", join(pointer, i)) for i, v in enumerate(items)]
    calls = [_call(call) for call in items]
    if None in calls:
        return None
    return [Line(1, str(text), join(pointer, i)) for i, text in enumerate(calls)]


def _call(call: Any) -> str | None:
    if not fits(call, "call"):
        return None
    parts = ["call", call["tool"]]
    if "callId" in call:
        parts += ["id", call["callId"] if ANY_ID(call["callId"]) else dumps(call["callId"])]
    parts.append(dumps(call["arguments"]))
    if "approved" in call:
        parts.append("approved")
    parts.append(call["expect"].lower())
    if "reason" in call:
        parts.append(call["reason"])
    return " ".join(parts)


PRINTERS: dict[str, Callable[[Any, str], Lines]] = {
    "objectives": _objective,
    "profiles": _profile,
    "tools": _tool,
    "tests": _test,
}


def element_lines(section: str, item: Any) -> Lines:
    """The printed lines of one element: of ``objectives``, ``profiles``, ``tools`` or ``tests``,
    or one rule of a profile's ``toolRules`` (at depth 1), for splicing into a file."""
    if section == "toolRules":
        return _rule(item, "")
    return PRINTERS[section](item, "")
