"""The `.seif` printer and formatter (``compiler.seif.printer``).

- Every valid corpus project and the reference print deterministically, in the grammar, and parse
  back (``compiler.seif.parse``) to exactly the same document, int/float distinction included; so
  do corpus projects with random parts replaced by arbitrary JSON (hypothesis).
- Each element takes its readable form when one expresses it and its ``json`` form otherwise:
  a table of cases says which; the reference needs no ``json`` form at all.
- ``seif fmt``: ``corpus/seif-fmt/<case>.in.seif`` formats to ``<case>.out.seif``, which formats
  to itself (golden files: messy spacing, comments, json escapes, the reference).

Tests that parse with the front end skip while ``compiler.seif.parse`` is absent.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lark import Lark

from compiler.seif.fmt import format_seif
from compiler.seif.grammar import KEYWORDS
from compiler.seif.parse import parse_seif
from compiler.seif.printer import FORMAT, to_seif
from tests.support.paths import ROOT

GRAMMAR = ROOT / "grammar" / "seif.lark"
VALID = sorted((ROOT / "corpus" / "declarations" / "valid").glob("*.json"))
REFERENCE = ROOT / "reference" / "agent-tools" / "context-project.json"
GOLDEN = sorted((ROOT / "corpus" / "seif-fmt").glob("*.in.seif"))
DOCS = {p.stem: json.loads(p.read_text(encoding="utf-8"))["project"] for p in VALID}
DOCS["reference"] = json.loads(REFERENCE.read_text(encoding="utf-8"))
JSON_FORM = re.compile(r"^\s*(?:[\w.-]+ )?json\b|\bfixtures json\b")
REFERENCE_JSON_FORMS: list[str] = []
"""The `json` forms the reference needs: none, every construct of it has a readable form."""


@cache
def grammar() -> Lark:
    return Lark(GRAMMAR.read_text(encoding="utf-8"), parser="lalr")


def parse(text: str) -> dict[str, Any]:
    document: dict[str, Any] = parse_seif(text).document
    return document


def _kind(value: Any) -> str:
    return "str" if isinstance(value, str) else type(value).__name__


def same(a: Any, b: Any) -> bool:
    """Equal as JSON documents, with the JSON type of every value kept (``3`` is not ``3.0``)."""
    if _kind(a) != _kind(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def json_forms(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if JSON_FORM.search(line)]


def round_trips(doc: dict[str, Any]) -> str:
    text = to_seif(doc)
    back = parse(text)
    assert same(back, doc), text
    assert to_seif(back) == text  # printing what was parsed gives the same text
    return text


# --- the corpus and the reference --------------------------------------------------------------


def test_the_printer_knows_every_keyword_of_the_grammar() -> None:
    assert set(re.findall(r'"([a-z_]+)"', GRAMMAR.read_text(encoding="utf-8"))) == KEYWORDS


@pytest.mark.parametrize("name", sorted(DOCS))
def test_printing_is_deterministic_and_in_the_grammar(name: str) -> None:
    doc = DOCS[name]
    text = to_seif(doc)
    assert to_seif(copy.deepcopy(doc)) == text
    assert text.endswith("\n") and "\n\n\n" not in text
    grammar().parse(text)


@pytest.mark.parametrize("name", sorted(DOCS))
def test_the_printout_parses_back_to_the_same_document(name: str) -> None:
    round_trips(DOCS[name])


@pytest.mark.parametrize("name", sorted(DOCS))
def test_a_printout_without_comments_is_already_formatted(name: str) -> None:
    text = to_seif(DOCS[name])
    assert format_seif(text) == text


def test_the_reference_needs_no_json_form() -> None:
    assert json_forms(to_seif(DOCS["reference"])) == REFERENCE_JSON_FORMS


# --- readable or json, element by element ------------------------------------------------------

TOOL = {"id": "t", "version": "1.0.0"}
OBJECT = {"type": "object"}


def project(**fields: Any) -> dict[str, Any]:
    return {"format": FORMAT, "id": "p", "version": "1.0.0", **fields}


def profile(**fields: Any) -> dict[str, Any]:
    return project(profiles=[{"id": "a", **fields}])


def tool(**fields: Any) -> dict[str, Any]:
    return project(tools=[{**TOOL, **fields}])


def a_test(expect: Any, **fields: Any) -> dict[str, Any]:
    return project(tests=[{"id": "t", "objective": "o", **fields, "expect": expect}])


def call(**fields: Any) -> dict[str, Any]:
    calls = [{"tool": "x", "arguments": {}, "expect": "DENY", **fields}]
    return a_test({"tools": {"calls": calls}})


def message(**fields: Any) -> dict[str, Any]:
    return profile(context=[{"id": "m", "role": "user", "text": "x", **fields}])


def include(**fields: Any) -> dict[str, Any]:
    return profile(toolRules=[{"tool": "x", "participation": "include", **fields}])


def schema(properties: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return tool(parameters={"type": "object", "properties": properties, **fields})


STRING = {"type": "string"}
NO_ARGUMENTS = {"tools": {"calls": [{"tool": "x", "expect": "DENY"}]}}
CASES = {
    # readable
    "objective": (project(objectives=[{"id": "o", "profile": "a"}]), "objective o uses a"),
    "message": (
        profile(context=[{"id": "m", "role": "user", "text": "hi\n", "required": False}]),
        'message m user optional "hi\\n"',
    ),
    "float ceiling": (profile(tokenCeiling=2.0), "token_ceiling 2.0"),
    "int ceiling": (profile(tokenCeiling=2), "token_ceiling 2\n"),
    "exclude": (profile(toolRules=[{"tool": "x", "participation": "exclude"}]), "exclude x\n"),
    "empty conditions": (include(conditions=[]), "include x {}"),
    "timeout": (tool(timeoutMs=1e4), "timeout 10000.0 ms"),
    "props": (schema({"a": STRING, "b": STRING}, required=["a"]), "a: string\n    b?: string"),
    "keyword property": (schema({"description": STRING}), '"description"?: string'),
    "quoted property": (schema({"a b": STRING}), '"a b"?: string'),
    "other option": (schema({"a": {"type": "string", "pattern": "x"}}), 'a?: string(pattern: "x")'),
    "items": (tool(result={"type": "array", "items": STRING}), "result array of string"),
    "empty props": (tool(parameters={"type": "object", "properties": {}}), "parameters {}"),
    "fixtures": (project(toolFixtures={}), "fixtures {}"),
    "call id": (call(callId="a b", approved=True), 'call x id "a b" {} approved deny'),
    "empty expect": (a_test({}), "test t for o {}"),
    "guard": (a_test({}, guard=True, fixtures="current"), "test t for o guard fixtures current {}"),
    "coordinates": (
        a_test({"resolution": "BLOCKED"}, coordinates={"environment": "prod", "consumer": "a b"}),
        'test t for o {\n  context environment prod\n  context consumer "a b"\n  resolution',
    ),
    "keyword coordinate": (a_test({}, coordinates={"deployment": "current"}), '"current"'),
    "coordinates and expect json": (
        a_test(NO_ARGUMENTS, coordinates={"environment": "e"}),
        "  context environment e\n  expect json",
    ),
    # json forms
    "format": (project(format="seif.context-project.v0"), 'json format "seif.context-project.v0"'),
    "empty list": (project(objectives=[]), "json objectives []"),
    "project id": (project(id="a b"), 'project _ 1.0.0\njson id "a b"'),
    "project version": (project(version=1), "project p 0.0.0\njson version 1"),
    "other key": (project(extra={"k": [1, 2.5]}), 'json extra {"k": [1, 2.5]}'),
    "objective key": (project(objectives=[{"id": "o", "profile": "a", "x": 1}]), "objective json"),
    "empty rules": (profile(toolRules=[]), "profile json"),
    "bool ceiling": (profile(tokenCeiling=True), "profile json"),
    "message key": (message(k=1), "message json"),
    "message id json": (message(id="json"), "message json"),
    "no reason": (include(conditions=[{"when": "true", "then": "DENY"}]), "rule json"),
    "participation": (profile(toolRules=[{"tool": "x", "participation": "maybe"}]), "rule json"),
    "tool key": (tool(color="red"), "tool json"),
    "tool version": (project(tools=[{"id": "t", "version": "1.0"}]), "tool json"),
    "required order": (schema({"a": STRING, "b": STRING}, required=["b", "a"]), "parameters json"),
    "required absent": (schema({"a": STRING}, required=["a", "z"]), "parameters json"),
    "required empty": (schema({"a": STRING}, required=[]), "parameters json"),
    "snake key": (tool(parameters={"type": "object", "min_length": 1}), "parameters json"),
    "no type": (tool(result={"properties": {}}), "result json"),
    "type json": (tool(result={"type": "json"}), "result json"),
    "ready without digest": (
        project(toolFixtures={"x": {"state": "READY", "version": "1.0.0"}}),
        'x json {"state": "READY", "version": "1.0.0"}',
    ),
    "keyword fixture id": (
        project(toolFixtures={"ready": {"state": "UNAVAILABLE"}}),
        "json toolFixtures",
    ),
    "test description": (a_test({}, description="d"), "test json"),
    "guard false": (a_test({}, guard=False), "test json"),
    "empty coordinates": (a_test({}, coordinates={}), "test json"),
    "coordinate number": (a_test({}, coordinates={"environment": 1}), "test json"),
    "keyword coordinate name": (a_test({}, coordinates={"include": "x"}), "test json"),
    "fixtures string": (a_test({}, fixtures="later"), 'test t for o fixtures json "later" {}'),
    "no arguments": (a_test(NO_ARGUMENTS), "expect json"),
    "approved false": (call(approved=False), "expect json"),
    "keyword reason": (call(reason="cause"), "expect json"),
    "empty causes": (a_test({"causes": []}), "expect json"),
    "empty membership": (a_test({"context": {"include": []}}), "expect json"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_element_takes_its_readable_form_or_its_json_form(name: str) -> None:
    doc, expected = CASES[name]
    text = to_seif(doc)
    assert expected in text, text
    grammar().parse(text)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_element_parses_back(name: str) -> None:
    round_trips(CASES[name][0])


@pytest.mark.parametrize(
    "doc",
    [
        {"id": "p", "version": "1.0.0"},  # no format
        {"format": FORMAT, "version": "1.0.0"},
        project(**{"$schema": "x"}),
        project(extra=float("nan")),
        project(extra=(1, 2)),
        project(extra={1: 2}),
    ],
)
def test_a_document_no_seif_text_denotes_is_refused(doc: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        to_seif(doc)


# --- arbitrary JSON anywhere ------------------------------------------------------------------

WORDS = [*sorted(KEYWORDS), "READY", "UNAVAILABLE", "DENY", "ALLOW", "object", "string", "1.0.0"]
WORDS += ["sha256:" + "0" * 64, "a b", "", "minLength", "min_length", "items", "type", "$ref"]
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-3, 10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(WORDS)
    | st.text(max_size=4)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(WORDS) | st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)


HEADER = {("format",), ("id",), ("version",)}


def paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(node, dict | list):
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            yield from paths(value, (*path, key))


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    """A corpus project with up to three nodes replaced, deleted or given a new member."""
    doc = copy.deepcopy(DOCS[draw(st.sampled_from(sorted(DOCS)))])
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from([p for p in paths(doc) if p]))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "delete" and path not in HEADER:
            del parent[path[-1]]
        elif action == "add" and isinstance(parent[path[-1]], dict | list):
            target = parent[path[-1]]
            if isinstance(target, dict):
                target[draw(st.sampled_from(WORDS))] = draw(VALUES)
            else:
                target.insert(draw(st.integers(0, len(target))), draw(VALUES))
        else:
            parent[path[-1]] = draw(VALUES)
    return doc


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=mutated())
def test_any_json_in_any_place_round_trips(doc: dict[str, Any]) -> None:
    round_trips(doc)


# --- seif fmt ----------------------------------------------------------------------------------


def test_there_are_golden_files() -> None:
    names = {p.name.removesuffix(".in.seif") for p in GOLDEN}
    assert {"messy", "comments", "json-escape", "reference"} <= names
    for path in GOLDEN:
        assert path.with_name(path.name.replace(".in.", ".out.")).exists(), path


@pytest.mark.parametrize("path", GOLDEN, ids=[p.name.removesuffix(".in.seif") for p in GOLDEN])
def test_fmt_gives_the_golden_output_and_is_stable(path: Path) -> None:
    out = path.with_name(path.name.replace(".in.", ".out.")).read_text(encoding="utf-8")
    assert format_seif(path.read_text(encoding="utf-8")) == out
    assert format_seif(out) == out
    assert same(parse(out), parse(path.read_text(encoding="utf-8")))


def test_the_reference_golden_file_is_the_reference() -> None:
    text = (ROOT / "corpus" / "seif-fmt" / "reference.out.seif").read_text(encoding="utf-8")
    assert same(parse(text), DOCS["reference"])


def test_fmt_keeps_each_comment_with_its_element() -> None:
    text = "# file\nproject p 1.0.0   # header\ntool t 1.0.0 { effect   read   # r\n"
    text += "# n\nname t }\n# end\n"
    expected = [
        "# file",
        "project p 1.0.0  # header",
        "",
        "tool t 1.0.0 {",
        "  effect read  # r",
        "  # n",
        "  name t",
        "}",
        "# end",
    ]
    assert format_seif(text) == "\n".join(expected) + "\n"
