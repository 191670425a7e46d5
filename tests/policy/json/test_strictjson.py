"""The one boundary for untrusted JSON (policy.json.strict): what it refuses, where it says the
problem is, that it agrees with the standard decoder on everything it accepts, and the attacks
that once got past a reader that lacked one of its checks."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from typing import Any

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler import compile_project
from policy.json.pointer import join as join_pointer
from policy.json.strict import MAX_DEPTH, JsonError, dump_bytes, dumps, find_pointer, loads, walk
from servers.executor.client import (
    COORDINATES,
    ExecutorClient,
    Outcome,
    execute_body,
    new_transport,
)
from tests.support.runtime_harness import PlainBinding, serving

# ---------------------------------------------------------------- agreement with json


def _text() -> st.SearchStrategy[str]:
    return st.text(st.characters(exclude_categories=("Cs",)), max_size=12)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text(), inner, max_size=4),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(JSON, st.sampled_from([None, 2]), st.booleans())
def test_loads_inverts_dumps_and_agrees_with_json(
    value: Any, indent: int | None, ordered: bool
) -> None:
    text = dumps(value, indent=indent, sort_keys=ordered)
    assert loads(text) == json.loads(text) == value
    assert loads(dump_bytes(value, indent=indent, sort_keys=ordered)) == value


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_walk_visits_every_node_in_document_order_with_resolvable_pointers(value: Any) -> None:
    seen = list(walk(value))
    assert seen[0][0] == "" and seen[0][2] is value
    for pointer, _key, node, _depth in seen:
        assert _resolve(value, pointer) == node
    assert len(seen) == _count(value)


def _resolve(value: Any, pointer: str) -> Any:
    for token in pointer.split("/")[1:]:
        key = token.replace("~1", "/").replace("~0", "~")
        value = value[int(key)] if isinstance(value, list) else value[key]
    return value


def _count(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(_count(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(_count(v) for v in value)
    return 1


def test_walk_document_order_and_escaping() -> None:
    doc = {"a/b": [1, {"~": 2}], "c": 3}
    assert [(p, d) for p, _k, _n, d in walk(doc)] == [
        ("", 1),
        ("/a~1b", 2),
        ("/a~1b/0", 2),
        ("/a~1b/1", 3),
        ("/a~1b/1/~0", 3),
        ("/c", 1),
    ]
    assert join_pointer("/x", "a/~") == "/x/a~1~0"
    assert find_pointer(doc, lambda _k, node, _d: node == 2) == "/a~1b/1/~0"
    assert find_pointer(doc, lambda _k, node, _d: node == 9) is None


@given(st.lists(st.tuples(st.sampled_from("abcde"), st.integers()), max_size=8))
def test_an_object_is_its_pairs_or_names_the_first_repeated_key(
    pairs: list[tuple[str, int]],
) -> None:
    text = "{" + ",".join(f'"{k}": {v}' for k, v in pairs) + "}"
    keys = [k for k, _ in pairs]
    if len(set(keys)) == len(keys):
        assert loads(text) == dict(pairs)
        return
    first = next(k for i, k in enumerate(keys) if k in keys[:i])
    with pytest.raises(JsonError, match=f"key `{first}` appears more than once") as caught:
        loads(text)
    assert caught.value.code == "DUPLICATE_KEY"


# ---------------------------------------------------------------- refusals, each located


@pytest.mark.parametrize(
    ("text", "code", "where"),
    [
        ('{"a": 1,}', "JSON_SYNTAX", "1:9"),
        ('{"a": 1}\n{"b": 2}', "JSON_SYNTAX", "2:1"),
        ('{"a": {"b": 1, "b": 2}}', "DUPLICATE_KEY", "/"),
        ("[NaN]", "NUMBER_INVALID", "1:2"),
        ('{"x":\n  -Infinity}', "NUMBER_INVALID", "2:3"),
        ("[1e999]", "NUMBER_INVALID", "1:2"),
        ("[-1E+400]", "NUMBER_INVALID", "1:2"),
        ("[" + "9" * 310 + "]", "NUMBER_INVALID", "1:2"),
        ("[" + "7" * 4301 + "]", "NUMBER_INVALID", "1:2"),  # past CPython's own int limit
        ('{"k": "\\ud800"}', "LONE_SURROGATE", "/k"),
        ('{"k": [{"\\udfff": 1}]}', "LONE_SURROGATE", "/k/0"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "TOO_DEEP", "/" + "/".join("0" * 64)),
        ("[" * 100_000 + "]" * 100_000, "TOO_DEEP", "/"),  # the C decoder's recursion limit
    ],
)
def test_each_refusal_has_a_code_and_a_location(text: str, code: str, where: str) -> None:
    with pytest.raises(JsonError) as caught:
        loads(text)
    assert caught.value.code == code
    assert str(caught.value.where) == where
    assert str(caught.value).encode("utf-8")  # a message is always printable text


def test_not_utf8_is_located_by_line_and_column() -> None:
    with pytest.raises(JsonError) as caught:
        loads(b'{"a":\n "\xff"}')
    assert (caught.value.code, str(caught.value.where)) == ("JSON_SYNTAX", "2:3")


def test_the_largest_accepted_values() -> None:
    assert loads("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    assert loads("[" + "9" * 309 + "]") == [int("9" * 309)]
    assert loads("[1.7976931348623157e308]") == [1.7976931348623157e308]
    assert loads('["\\ud83d\\ude00"]') == ["\U0001f600"]  # a pair is one character
    assert loads("[" * 10 + "]" * 10, max_depth=10) == [[[[[[[[[[]]]]]]]]]]
    with pytest.raises(JsonError, match="deeper than 9"):
        loads("[" * 10 + "]" * 10, max_depth=9)


def test_collecting_duplicates_reports_each_by_pointer_and_keeps_the_first() -> None:
    found: list[tuple[str, str]] = []
    value = loads(
        '{"a": {"x": 1, "x": 2, "x": 3}, "b": [{"y/": 1, "y/": 2}], "a": 0}',
        duplicates=lambda pointer, key: found.append((pointer, key)),
    )
    assert value == {"a": {"x": 1}, "b": [{"y/": 1}]}
    assert type(value) is dict and type(value["a"]) is dict
    assert found == [("/a", "a"), ("/a/x", "x"), ("/b/0/y~1", "y/")]


def test_dumps_refuses_what_is_not_json() -> None:
    for bad in (math.nan, [math.inf], {"a": -math.inf}):
        with pytest.raises(JsonError) as caught:
            dumps(bad)
        assert caught.value.code == "NUMBER_INVALID"
    with pytest.raises(JsonError) as caught:
        dump_bytes(["\ud800"])
    assert caught.value.code == "LONE_SURROGATE"
    assert dumps({"é": 1}) == '{"é":1}'  # non-ASCII as itself, compact


# ---------------------------------------------------------------- the attacks


def _executor(body: bytes) -> web.Application:
    async def handler(_request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    return app


@pytest.mark.parametrize(
    "output",
    [b"1e999", b"-1e999", b"[" + b"1" * 5000 + b"]", b'"\\ud800"', b"[" * 200 + b"]" * 200],
)
def test_an_executor_answer_beyond_json_is_never_a_success(output: bytes) -> None:
    """The attack: for a tool without a result schema, an executor answering ``1e999`` made a
    SUCCEEDED receipt holding Infinity (the client's decoder lacked the finite check)."""
    project = compile_project("reference/agent-tools/context-project.json")
    tool = dataclasses.replace(project.tool_by_id["inspect-context"], result=None)
    assert tool.result_validator is None
    body = b'{"contract": "context-tool-executor.v1", "ok": true, "output": ' + output + b"}"

    async def scenario() -> Outcome:
        transport = new_transport()
        try:
            async with serving(_executor(body)) as base:
                call = execute_body(tool, {"ref": "x"}, "c1", "k" * 64, dict.fromkeys(COORDINATES))
                return await ExecutorClient(transport).execute(
                    PlainBinding(tool.id, f"{base}/x"), tool, call
                )
        finally:
            await transport.close()

    outcome = asyncio.run(scenario())
    assert outcome == Outcome("UNKNOWN", reason="INVALID_RESPONSE")


def test_common_syntax_mistakes_are_named_as_such() -> None:
    """A newcomer's mistakes, named: an empty file is not `expecting value` at 1:1, a trailing
    comma is not `expecting property name`."""
    for text, message, column in (
        ("", "the text is empty", 1),
        ('{"a": 1,}', "a trailing comma before `}`", 9),
        ("[1, 2,\n]", "a trailing comma before `]`", 1),
        ("[1 2]", "a `,` is missing between two values", 4),
    ):
        with pytest.raises(JsonError) as refused:
            loads(text)
        assert refused.value.code == "JSON_SYNTAX" and message in refused.value.message, text
        assert refused.value.where.column == column, text
