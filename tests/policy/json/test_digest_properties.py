"""Digests and encodings: invariant under key order and whitespace, sensitive to contract
fields only, and round-tripping."""

from __future__ import annotations

import copy
import json
import random

from hypothesis import given
from hypothesis import strategies as st

from compiler import compile_project, compile_text
from compiler.builds.build import build_bytes, make_build
from policy.codec import to_declaration
from policy.json.canonical import canonical_cbor, canonical_json, decode_canonical_cbor
from policy.json.digest import contract_digest
from policy.json.strict import loads
from policy.json.value import freeze, json_equal
from tests.support.paths import REFERENCE

REF_DOC = loads(REFERENCE.read_text())

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


def shuffled(value, rng: random.Random):  # type: ignore[no-untyped-def]  # any JSON value
    """The same JSON value with every object's keys in another order."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: shuffled(value[k], rng) for k in keys}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


@given(json_values)
def test_canonical_cbor_round_trips(value: object) -> None:
    data = canonical_cbor(value)
    assert json_equal(decode_canonical_cbor(data), freeze(value))
    assert canonical_cbor(decode_canonical_cbor(data)) == data


@given(json_values, st.randoms(use_true_random=False))
def test_encodings_ignore_key_order(value: object, rng: random.Random) -> None:
    other = shuffled(value, rng)
    assert canonical_cbor(other) == canonical_cbor(value)
    assert canonical_json(other) == canonical_json(value)


@given(st.randoms(use_true_random=False), st.integers(0, 4), st.sampled_from([" ", "\n", "\t"]))
def test_build_digest_ignores_key_order_and_whitespace(
    rng: random.Random, indent: int, sep: str
) -> None:
    text = json.dumps(
        shuffled(REF_DOC, rng), indent=indent or None, separators=("," + sep, ":" + sep)
    )
    result = compile_text(text)
    assert result.project is not None
    assert make_build(result.project).digest == make_build(compile_project(REFERENCE)).digest


CONTRACT_EDITS = [
    ("id", lambda t: t.__setitem__("id", t["id"] + "-x")),
    ("name", lambda t: t.__setitem__("name", t["name"] + "_x")),
    ("version", lambda t: t.__setitem__("version", "9.9.9")),
    ("arguments", lambda t: t["parameters"]["properties"].__setitem__("extra", {"type": "null"})),
    ("arguments description", lambda t: t["parameters"].__setitem__("description", "changed")),
    ("result", lambda t: t.__setitem__("result", {"type": "null"})),
]
POLICY_EDITS = [
    ("description", lambda t: t.__setitem__("description", "Another description.")),
    ("maxCalls", lambda t: t.__setitem__("maxCalls", 2)),
    ("timeoutMs", lambda t: t.__setitem__("timeoutMs", 1234)),
    ("approval", lambda t: t.__setitem__("approval", "required")),
]


def _digest(tool: dict) -> str:  # type: ignore[type-arg]  # a declared tool
    return contract_digest(
        id=tool["id"],
        name=tool["name"],
        version=tool["version"],
        parameters=tool["parameters"],
        result=tool.get("result"),
    )


@given(st.sampled_from(range(len(REF_DOC["tools"]))), st.sampled_from(CONTRACT_EDITS))
def test_contract_fields_change_the_digest(index: int, edit) -> None:  # type: ignore[no-untyped-def]
    tool = copy.deepcopy(REF_DOC["tools"][index])
    before = _digest(tool)
    edit[1](tool)
    assert _digest(tool) != before, edit[0]


@given(st.sampled_from(range(len(REF_DOC["tools"]))), st.sampled_from(POLICY_EDITS))
def test_policy_fields_do_not_change_the_digest(index: int, edit) -> None:  # type: ignore[no-untyped-def]
    tool = copy.deepcopy(REF_DOC["tools"][index])
    before = _digest(tool)
    edit[1](tool)
    assert _digest(tool) == before, edit[0]


def test_compiled_digest_matches_the_spec_formula() -> None:
    import hashlib

    import cbor2

    ir = compile_project(REFERENCE)
    for declared, tool in zip(REF_DOC["tools"], ir.tools, strict=True):
        contract = {
            "id": declared["id"],
            "name": declared["name"],
            "version": declared["version"],
            "arguments": declared["parameters"],
            "result": declared.get("result"),
        }
        expected = "sha256:" + hashlib.sha256(cbor2.dumps(contract, canonical=True)).hexdigest()
        assert tool.contract_digest == expected


def test_ir_round_trips_through_its_declaration() -> None:
    ir = compile_project(REFERENCE)
    again = compile_project({"format": "seif.context-project.v1", **to_declaration(ir)})
    assert again == ir
    assert build_bytes(again) == build_bytes(ir)


def test_integer_valued_float_bounds_keep_their_declared_form() -> None:
    doc = copy.deepcopy(REF_DOC)
    tool = doc["tools"][0]
    tool["parameters"]["properties"]["depth"]["maximum"] = 3.0
    ir = compile_project(doc)
    # declared exactly: 3.0 is encoded as a float, so the digest differs from `3`
    assert ir.tools[0].contract_digest != compile_project(REF_DOC).tools[0].contract_digest
    assert ir.tools[0].validator.is_valid({"ref": "a", "depth": 3})
    assert not ir.tools[0].validator.is_valid({"ref": "a", "depth": 4})
