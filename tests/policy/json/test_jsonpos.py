"""JSON pointers resolved to where their values are written (policy.json.positions): every pointer
of a generated document, dumped with random whitespace, maps to the offset where that value's text
starts and ends; lines and columns count as the JSON decoder's own syntax errors do."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from policy.diagnostic import Diagnostic, Location
from policy.json.pointer import join as join_pointer
from policy.json.pointer import split
from policy.json.positions import JsonPositions, value_spans, with_positions
from policy.json.strict import JsonError, loads

WHITESPACE = st.text(alphabet=" \t\n\r", max_size=3)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


class Writer:
    """Dumps a value with whitespace drawn between tokens, noting where each value is written."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw
        self.text = ""
        self.spans: dict[str, tuple[int, int]] = {}

    def gap(self) -> None:
        self.text += self.draw(WHITESPACE)

    def value(self, value: Any, pointer: str) -> None:
        start = len(self.text)
        if isinstance(value, dict):
            self.container("{", "}", [(k, join_pointer(pointer, k), v) for k, v in value.items()])
        elif isinstance(value, list):
            self.container(
                "[", "]", [(None, join_pointer(pointer, i), v) for i, v in enumerate(value)]
            )
        else:
            self.text += json.dumps(value, ensure_ascii=self.draw(st.booleans()))
        self.spans[pointer] = (start, len(self.text))

    def container(self, opening: str, closing: str, members: list[tuple[Any, str, Any]]) -> None:
        self.text += opening
        for index, (key, pointer, child) in enumerate(members):
            self.gap()
            if index:
                self.text += ","
                self.gap()
            if key is not None:
                self.text += json.dumps(key, ensure_ascii=self.draw(st.booleans()))
                self.gap()
                self.text += ":"
                self.gap()
            self.value(child, pointer)
        self.gap()
        self.text += closing


@st.composite
def written(draw: st.DrawFn) -> tuple[Any, str, dict[str, tuple[int, int]]]:
    value = draw(VALUES)
    writer = Writer(draw)
    writer.gap()
    writer.value(value, "")
    writer.gap()
    return value, writer.text, writer.spans


@given(written())
def test_every_pointer_maps_to_where_its_value_is_written(case: Any) -> None:
    value, text, spans = case
    assert loads(text) == value  # the generated text is strict JSON of that value
    assert value_spans(text) == spans
    for pointer, (start, end) in spans.items():
        assert json.loads(text[start:end]) == json.loads(json.dumps(_at(value, pointer)))


def _at(value: Any, pointer: str) -> Any:
    for token in split(pointer):
        value = value[token] if isinstance(value, dict) else value[int(token)]
    return value


@given(written(), st.data())
def test_lines_and_columns_count_as_the_decoder_does(case: Any, data: st.DataObject) -> None:
    _, text, _ = case
    offset = data.draw(st.integers(min_value=0, max_value=len(text)))
    line, column = JsonPositions.of(text).line_column(offset)
    assert line == text.count("\n", 0, offset) + 1
    assert column == offset - (text.rfind("\n", 0, offset) + 1) + 1
    try:  # a stray `@` there: where the decoder stops at it, it names the same line and column
        json.loads(text[:offset] + "@")
    except json.JSONDecodeError as exc:
        if exc.pos == offset:
            assert (exc.lineno, exc.colno) == (line, column)


def test_a_key_given_twice_resolves_to_its_first_value_as_the_loader_keeps() -> None:
    text = '{"a": 1,\n "a": [2]}'
    assert value_spans(text)["/a"] == (6, 7)
    assert "/a/0" in value_spans(text)  # the second is written, so its items are found


def test_a_missing_key_resolves_to_its_nearest_written_ancestor() -> None:
    text = '{\n  "tools": [\n    {"id": "x"}\n  ]\n}'
    positions = JsonPositions.of(text)
    assert positions.span("/tools/0/name") == positions.span("/tools/0") == (19, 30)
    assert positions.line_column(19) == (3, 5)
    assert positions.span("/nothing/here") == (0, len(text))


def test_text_that_is_not_one_json_value_has_no_positions() -> None:
    for text in ("", "{", '{"a" 1}', "[1,]", "[1] [2]", "nul", '{"a": 1}}', "'a'"):
        assert value_spans(text) == {}, text
        assert JsonPositions.of(text).span("") is None


def test_diagnostics_gain_the_line_and_column_of_their_pointer() -> None:
    text = '{\n  "id": "x",\n  "tools": 3\n}'
    found = with_positions(
        [
            Diagnostic(code="WRONG_TYPE", message="m", location=Location(pointer="/tools")),
            Diagnostic(code="JSON_SYNTAX", message="m", location=Location(line=9, column=9)),
            Diagnostic(code="FILE_UNREADABLE", message="m"),
        ],
        text,
    )
    assert found[0].location == Location(
        pointer="/tools", line=3, column=12, end_line=3, end_column=13
    )
    assert found[0].location.where == "/tools"  # the text form still cites the pointer
    assert found[1].location == Location(line=9, column=9)
    assert found[2].location == Location()
    assert with_positions(found, None) == found


def test_a_refusal_of_the_loader_is_a_diagnostic() -> None:
    try:
        loads('{"a":\n }')
    except JsonError as exc:
        assert exc.diagnostic == Diagnostic(
            code="JSON_SYNTAX",
            message="not valid JSON: expecting value",
            location=Location(line=2, column=2),
        )
    else:
        raise AssertionError("not refused")
