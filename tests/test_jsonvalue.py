"""``unique_pairs``: the JSON object hook that refuses duplicate keys, exactly."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy.jsonvalue import DuplicateKey, unique_pairs


@given(st.lists(st.tuples(st.sampled_from("abcde"), st.integers()), max_size=8))
def test_unique_pairs_is_dict_or_names_the_first_repeated_key(pairs: list[tuple[str, int]]) -> None:
    keys = [k for k, _ in pairs]
    if len(set(keys)) == len(keys):
        assert unique_pairs(pairs) == dict(pairs)
        return
    first = next(k for i, k in enumerate(keys) if k in keys[:i])
    with pytest.raises(DuplicateKey) as caught:
        unique_pairs(pairs)
    assert caught.value.key == first


def test_as_a_json_hook() -> None:
    assert json.loads('{"a": {"b": 1}}', object_pairs_hook=unique_pairs) == {"a": {"b": 1}}
    with pytest.raises(DuplicateKey, match="`b` appears more than once"):
        json.loads('{"a": {"b": 1, "b": 1}}', object_pairs_hook=unique_pairs)
