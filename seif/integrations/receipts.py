"""What a model is told of a receipt: the output of a call that succeeded, and otherwise what
happened, as it is (never a success). One text for every framework adapter."""

from __future__ import annotations

import json
from typing import Any

from policy.json.value import thaw
from seif.sdk.types import Receipt

_NOTES = {
    "DENIED": "the call was refused by policy and did not run",
    "FAILED": "the tool reported a failure, or the call was not dispatched",
    "UNKNOWN": (
        "it is not known whether the call ran; do not repeat it under a new call id,"
        " an operator must check"
    ),
}
_APPROVAL = "the call needs a human approval of these exact arguments; it did not run"
_DUPLICATE = "this call id already ran; its output is not delivered twice"


def receipt_text(receipt: Receipt) -> str:
    """The tool message for ``receipt``: the output as compact JSON when the call succeeded
    and its output came with it; otherwise a JSON object with the status, the reason code
    and a note saying what it means (``{"seif": {"status", "reason", "duplicate", "note"}}``)."""
    if receipt.succeeded and receipt.output_available:
        return _json(thaw(receipt.output))
    if receipt.needs_approval:
        note = _APPROVAL
    elif receipt.succeeded:
        note = _DUPLICATE
    else:
        note = _NOTES[receipt.status]
    return _json(
        {
            "seif": {
                "status": receipt.status,
                "reason": receipt.reason,
                "duplicate": receipt.duplicate,
                "note": note,
            }
        }
    )


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
