"""``seif.receipt_text``: what a model is told of a receipt. A success is its output; anything
else says what happened and what to do, and an ``ARGUMENTS_INVALID`` names each error's pointer
and message, bounded, never the argument values: checked on receipts of a real runtime and on
receipts as the wire carries them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from seif import Receipt, RuntimeClient, receipt_text
from seif.sdk.text import REASON_NOTES, STATUS_NOTES
from tests.support.paths import ROOT
from tests.support.runtime_harness import APP_TOKEN, run_async, running_stack

AUTHORING = {"objective": "authoring", "consumer": "course-authoring"}


def _told(receipt: Receipt) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(receipt_text(receipt))["seif"]
    return found


def test_invalid_arguments_from_a_real_runtime_tell_what_to_fix(tmp_path: Path) -> None:
    secret = "s" * 201  # over maxLength: the text names the length, never the value
    arguments = {"query": secret, "limit": 987, "filters": {"level": "expert"}, "zz": "v-1"}

    async def scenario() -> Receipt:
        async with running_stack(tmp_path) as s, RuntimeClient(s.runtime, APP_TOKEN) as sdk:
            context = await sdk.resolve(**AUTHORING)
            return await sdk.execute_tool_by_name(context, "search_knowledge", "a1", arguments)

    receipt = run_async(scenario())
    text = receipt_text(receipt)
    told = _told(receipt)
    assert (told["status"], told["reason"]) == ("DENIED", "ARGUMENTS_INVALID")
    assert "fix what `errors` names" in told["note"]
    assert told["errors"] == [  # the order of the build's schema: its canonical key order
        {"pointer": "/limit", "message": "the value is greater than the maximum `10`"},
        {"pointer": "/query", "message": "201 characters is more than the maximum 200"},
        {"pointer": "/filters/level", "message": "value is not one of the `enum` values"},
        {"pointer": "/zz", "message": "property `zz` is not allowed"},
    ]
    for value in (secret, "987", "expert", "v-1"):
        assert value not in text


def _wire(reason: str, errors: list[Any]) -> Receipt:
    decision = {"outcome": "DENY", "reason": reason, "errors": errors}
    body = {"callId": "c", "tool": "t", "status": "DENIED", "reason": reason}
    return Receipt.from_wire({**body, "decision": decision})


def test_many_errors_are_bounded_and_counted() -> None:
    errors = [{"pointer": f"/p{i}", "keyword": "type", "message": "x" * 300} for i in range(40)]
    told = _told(_wire("ARGUMENTS_INVALID", errors))
    assert len(told["errors"]) == 10 and told["errorsOmitted"] == 30
    assert told["errors"][0] == {"pointer": "/p0", "message": "x" * 200 + "…(+100)"}


def test_errors_are_shown_for_arguments_invalid_only() -> None:
    errors = [{"pointer": "/a", "keyword": "type", "message": "m"}]
    assert "errors" not in _told(_wire("CONDITION_DENIED", errors))
    assert _told(_wire("ARGUMENTS_INVALID", [None, "x"]))["errors"] == []


@pytest.mark.parametrize(
    ("status", "reason", "expected"),
    [
        ("DENIED", "APPROVAL_REQUIRED", "waits for an approver"),
        ("DENIED", "APPROVAL_EXPIRED", "ask for a new approval"),
        ("DENIED", "REJECTED", "do not make it again"),
        ("DENIED", "CALL_CONFLICT", "use a new id"),
        ("DENIED", "CONDITION_DENIED", "does not allow this call"),
        ("DENIED", "SOMETHING_NEW", STATUS_NOTES["DENIED"]),
        ("FAILED", "TOOL_UNAVAILABLE", "not available"),
        ("FAILED", "EXECUTOR_ERROR", STATUS_NOTES["FAILED"]),
        ("UNKNOWN", "CLIENT_TIMEOUT", "do not repeat it under a new call id"),
        ("UNKNOWN", "TOOL_UNAVAILABLE", STATUS_NOTES["UNKNOWN"]),
    ],
)
def test_each_refusal_says_what_happened_and_what_to_do(
    status: Any, reason: str, expected: str
) -> None:
    told = _told(Receipt("c", "t", status, reason=reason))
    assert expected in told["note"]
    assert (told["status"], told["reason"], told["duplicate"]) == (status, reason, False)


def test_a_success_is_its_output_and_a_repeat_is_not_a_new_success() -> None:
    ran = Receipt("c", "t", "SUCCEEDED", output_available=True, output={"b": [1, "é"]})
    assert receipt_text(ran) == '{"b":[1,"é"]}'
    again = _told(Receipt("c", "t", "SUCCEEDED", duplicate=True))
    assert again["duplicate"] is True and "not delivered twice" in again["note"]
    assert set(REASON_NOTES) >= {"ARGUMENTS_INVALID", "APPROVAL_REQUIRED", "REJECTED"}


TEXTS = ROOT / "sdk" / "typescript" / "test" / "receipt-texts.json"


@pytest.mark.parametrize(
    "case", json.loads(TEXTS.read_text(encoding="utf-8")), ids=lambda case: case["case"]
)
def test_the_typescript_sdk_is_checked_against_the_same_texts(case: dict[str, Any]) -> None:
    """sdk/typescript/test/text.test.ts checks ``receiptText`` against these very cases."""
    assert receipt_text(Receipt.from_wire(case["receipt"])) == case["text"]
