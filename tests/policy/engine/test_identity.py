"""Argument identity: the fast encoder gives cbor2's canonical bytes of the integral value,
whatever the key order or container types, and refuses what has no canonical form with a
pointer (never another exception)."""

from __future__ import annotations

import math
import random

import cbor2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy.engine import identity
from policy.engine.identity import argument_identity
from policy.json.canonical import EncodingError, integral
from policy.json.value import freeze
from tests.policy.json.test_digest_properties import shuffled

keys = st.text(max_size=6) | st.text(min_size=20, max_size=30) | st.text(min_size=250, max_size=260)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.integers(-30, 30)
    | st.sampled_from([23, 24, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**64 - 1, 2**64])
    | st.sampled_from([-24, -25, -256, -257, -(2**64), -(2**64) - 1])
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0.0, -0.0, 1.0, 1.5, 2.0**64, -(2.0**64), 1e300, 5e-324])
    | st.text(max_size=30)
    | st.text(min_size=250, max_size=300)
)  # fmt: skip
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(keys, inner, max_size=6),
    max_leaves=25,
)


def expected(value: object) -> bytes:
    return bytes(cbor2.dumps(integral(value), canonical=True))


@given(values)
def test_identity_is_cbor2_canonical_of_the_integral_value(value: object) -> None:
    assert argument_identity(value) == expected(value)


@given(values, st.randoms(use_true_random=False))
def test_identity_ignores_key_order_and_container_types(value: object, rng: random.Random) -> None:
    data = argument_identity(value)
    assert argument_identity(shuffled(value, rng)) == data
    assert argument_identity(freeze(value)) == data  # FrozenMap and tuples


def test_integer_valued_numbers_are_one_call() -> None:
    assert argument_identity({"a": 1.0, "b": 2}) == argument_identity({"b": 2, "a": 1})
    assert argument_identity({"a": 1.5}) != argument_identity({"a": 1})
    assert argument_identity([2.0**70]) == expected([2**70])  # a bignum, as cbor2 writes it


def test_keys_sort_bytewise_across_header_sizes() -> None:
    value = {"b" * 256: 1, "a" * 255: 2, "c" * 24: 3, "d" * 23: 4, "": 5, "é": 6, "z": 7}
    assert argument_identity(value) == expected(value)


@pytest.mark.parametrize(
    ("value", "pointer", "says"),
    [
        ({"a": [1, math.nan]}, "/a/1", "NaN"),
        ({"a": {"b": -math.inf}}, "/a/b", "infinities"),
        ({"a": {1: 2}}, "/a", "not a string"),
        ({"a": object()}, "/a", "not a JSON value"),
        ({"a/b": {1, 2}}, "/a~1b", "not a JSON value"),
        ({"a": ["x", "y\ud800"]}, "/a/1", "lone surrogate"),
        ({"a": {"k\udc00": 1}}, "/a/k\\udc00", "lone surrogate"),
    ],
)
def test_values_without_canonical_form_are_refused_with_a_pointer(
    value: object, pointer: str, says: str
) -> None:
    with pytest.raises(EncodingError) as caught:
        argument_identity(value)
    assert caught.value.pointer == pointer
    assert says in caught.value.message
    str(caught.value).encode()  # printable, even for a lone surrogate


def test_nesting_beyond_the_stack_is_refused_not_raised() -> None:
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(EncodingError, match="nested too deeply"):
        argument_identity(deep)


def test_remembered_shapes_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(identity, "_shapes", {})
    monkeypatch.setattr(identity, "_MAX_SHAPES", 10)
    for i in range(50):
        assert argument_identity({f"k{i}": i}) == expected({f"k{i}": i})
    assert len(identity._shapes) == 10
    wide = {f"k{i}": i for i in range(identity._MAX_CACHED_KEYS + 1)}
    monkeypatch.setattr(identity, "_shapes", {})
    assert argument_identity(wide) == expected(wide)
    assert identity._shapes == {}
