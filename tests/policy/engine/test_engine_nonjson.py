"""Arguments that are not JSON (NaN, infinities, non-string keys, lone surrogates, Python
objects, nesting deeper than the stack) are denied as invalid arguments, never an exception:
decide fails closed on anything a caller can send."""

from __future__ import annotations

import math

import pytest

from policy import Call, ContextState, decide, disclose


def _nested(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("arguments", "pointer"),
    [
        ({"ref": "x", "depth": math.nan}, "/depth"),
        ({"ref": "x", "depth": math.inf}, "/depth"),
        ({"ref": object()}, "/ref"),
        ({"ref": "x", 1: 2}, None),
        ([math.nan], None),
        ({"ref": "x\ud800"}, "/ref"),
        ({"ref": "x", "k\udc00": 1}, None),
        ({"ref": "x", "depth": _nested(100_000)}, "/depth"),
    ],
)
def test_non_json_arguments_are_denied(reference_ir, arguments, pointer) -> None:  # type: ignore[no-untyped-def]
    obs = {
        t.id: {"state": "READY", "version": t.version, "contractDigest": t.contract_digest}
        for t in reference_ir.tools
    }
    state = ContextState.open("c", disclose(reference_ir, "learner", obs), 0)
    decision = decide(
        reference_ir, state, Call(tool="inspect-context", call_id="c1", arguments=arguments), 1
    )
    assert (decision.outcome, decision.reason) == ("DENY", "ARGUMENTS_INVALID")
    assert decision.errors
    if pointer is not None:
        assert pointer in {e.pointer for e in decision.errors}
    assert decision.explanation is not None
    assert decision.explanation.pointer == "/tools/0/parameters"
