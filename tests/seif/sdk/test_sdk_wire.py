"""The Python SDK reads the runtime's answers as the wire contract (servers/wire/answers.py)
describes them: for each answer the SDK parses, a value generated from the wire type (every key,
optional ones too) is valid against the document's schema, the SDK parses it, and its parser
reads every field of it (the TypeScript SDK in sdk/typescript is checked by its own tests)."""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any, is_typeddict

import jsonschema
import pytest

from seif.sdk.types import ApprovalStatus, Context, Receipt
from servers.wire import answers
from servers.wire.schema import Schema, Schemas

INSTANT = "2026-01-01T00:00:00.000Z"


def example(hint: Any, path: str = "") -> Any:
    """A value of the wire type ``hint``: every key of every object, one item per array, the
    first choice of each ``Literal``, distinct strings."""
    if is_typeddict(hint):
        hints = typing.get_type_hints(hint, include_extras=True)
        return {k: example(_bare(v), f"{path}/{k}") for k, v in hints.items()}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        dated = any(isinstance(m, Schema) and "format" in m.keywords for m in hint.__metadata__)
        return INSTANT if dated else example(args[0], path)
    if origin in (typing.Union, types.UnionType):
        return example(next(a for a in args if a is not type(None)), path)
    if origin is typing.Literal:
        return args[0]
    if origin is list:
        return [example(args[0], f"{path}/0")]
    if origin is dict:
        return {"type": "object"} if args[1] is Any else {"k": example(args[1], f"{path}/k")}
    return {str: f"v{path}", int: 7, bool: True, Any: {"any": path}}[hint]


def _bare(hint: Any) -> Any:
    while typing.get_origin(hint) in (typing.Required, typing.NotRequired):
        (hint,) = typing.get_args(hint)
    return hint


class Recorded(Mapping[str, Any]):
    """A JSON object that records the path of every key read from it (and from what it holds)."""

    def __init__(self, data: Mapping[str, Any], path: str, read: set[str]) -> None:
        self._data, self._path, self._read = data, path, read

    def __getitem__(self, key: str) -> Any:
        value = self._data[key]  # a KeyError for a missing key, as a dict's
        self._read.add(f"{self._path}/{key}")
        return _recorded(value, f"{self._path}/{key}", self._read)

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def _recorded(value: Any, path: str, read: set[str]) -> Any:
    if isinstance(value, Mapping):
        return Recorded(value, path, read)
    if isinstance(value, list):
        return [_recorded(v, f"{path}/{i}", read) for i, v in enumerate(value)]
    return value


def _paths(value: Any, path: str = "") -> Iterator[str]:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            yield f"{path}/{key}"
            yield from _paths(inner, f"{path}/{key}")
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from _paths(inner, f"{path}/{i}")


PARSERS: list[tuple[type, Callable[[Any], object]]] = [
    (answers.Resolved, Context.from_wire),
    (answers.Receipt, Receipt.from_wire),
    (answers.ApprovalStatus, lambda body: ApprovalStatus.from_wire("ctx_1", "c1", body)),
]


@pytest.mark.parametrize(("wire", "parse"), PARSERS, ids=lambda p: getattr(p, "__name__", ""))
def test_the_sdk_reads_every_field_of_the_answer(
    wire: type, parse: Callable[[Any], object]
) -> None:
    value = example(wire)
    schema = Schemas((), answers.CLOSED).inline(wire)  # every component spelled out
    jsonschema.validate(value, schema)
    read: set[str] = set()
    parsed = parse(Recorded(value, "", read))
    assert parsed is not None
    assert set(_paths(value)) - read == set()


def test_the_examples_cover_every_optional_key() -> None:
    """Not vacuous: the generated receipt holds the keys a receipt may leave out."""
    receipt = example(answers.Receipt)
    assert {"output", "executorError", "decision"} <= set(receipt)
    assert Receipt.from_wire(receipt).executor_error == "v/executorError"
