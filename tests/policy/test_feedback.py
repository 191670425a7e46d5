"""policy.feedback: what a model is shown of refused arguments. Driven by the engine's own
validator, so that a message that starts to name a value fails here."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from policy.feedback import (
    MAX_ERRORS,
    MAX_MESSAGE,
    MAX_POINTER,
    ArgumentError,
    ArgumentErrors,
    argument_errors,
    cut,
)
from policy.schema.validator import compile_validator

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["query", "limit"],
    "additionalProperties": False,
    "properties": {
        "query": {"type": "string", "minLength": 2, "maxLength": 8},
        "limit": {"type": "integer", "minimum": 1, "maximum": 10},
        "ratio": {"type": "number", "minimum": 0.5},
        "kind": {"type": "string", "enum": ["a", "b"]},
        "tags": {"type": "array", "maxItems": 1, "items": {"type": "string"}},
    },
}
VALIDATOR = compile_validator(SCHEMA)


def _shown(arguments: Any) -> ArgumentErrors:
    return argument_errors(VALIDATOR.errors(arguments))


def test_each_error_its_pointer_and_message() -> None:
    assert _shown({"query": "q"}).shown == (
        ArgumentError("/query", "1 characters is fewer than the minimum 2"),
        ArgumentError("", "missing required property `limit`"),
    )
    assert _shown({"query": "q"}).text() == (
        "/query: 1 characters is fewer than the minimum 2; "
        "the arguments: missing required property `limit`"
    )


def test_no_argument_value_is_shown() -> None:
    arguments = {
        "query": "secret-query-text",
        "limit": 987654,
        "ratio": 0.123456,
        "kind": "hidden-kind",
        "tags": ["tag-one-value", 424242],
        "extra": "another-hidden-value",
    }
    found = _shown(arguments)
    raw = [e.message for e in VALIDATOR.errors(arguments)]
    assert any("987654" in m for m in raw)  # the engine's messages do name numbers
    text = found.text() + str(found.to_json())
    for value in ("secret-query-text", "987654", "0.123456", "hidden-kind", "tag-one-value"):
        assert value not in text
    assert "424242" not in text and "another-hidden-value" not in text
    assert ArgumentError("/limit", "the value is greater than the maximum `10`") in found.shown
    assert ArgumentError("/ratio", "the value is less than the minimum `0.5`") in found.shown
    huge = _shown({"query": "ok", "limit": 10**100})
    assert huge.shown == (ArgumentError("/limit", "the value is greater than the maximum `10`"),)


def test_bounded_in_count_and_length() -> None:
    errors = [{"pointer": f"/k{i}", "message": "m"} for i in range(MAX_ERRORS + 7)]
    found = argument_errors(errors)
    assert len(found.shown) == MAX_ERRORS and found.omitted == 7
    assert found.to_json()["errorsOmitted"] == 7 and found.text().endswith("; 7 more")
    long = argument_errors([{"pointer": "/" + "p" * 500, "message": "m" * 900}]).shown[0]
    assert long.pointer == "/" + "p" * (MAX_POINTER - 1) + "…(+381)"
    assert long.message == "m" * MAX_MESSAGE + "…(+700)"
    assert "errorsOmitted" not in argument_errors(errors[:1]).to_json()


def test_malformed_entries_are_skipped() -> None:
    found = argument_errors([None, {"pointer": 1, "message": "m"}, {"pointer": "/a"}, "text"])
    assert found == ArgumentErrors(())


@given(st.text(), st.integers(min_value=0, max_value=50))
def test_cut_keeps_a_prefix_and_says_how_much_it_dropped(text: str, limit: int) -> None:
    out = cut(text, limit)
    if len(text) <= limit:
        assert out == text
    else:
        assert out == f"{text[:limit]}…(+{len(text) - limit})"
