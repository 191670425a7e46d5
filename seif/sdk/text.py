"""What a model is told of a receipt: :func:`receipt_text`, the one text every framework
adapter gives the model (``sdk/typescript``'s ``receiptText`` writes the same bytes).

The output of a call that succeeded, as it is; for anything else, what happened and what to do,
never a success. For ``ARGUMENTS_INVALID`` each error's pointer and message, bounded and
without the argument values (:mod:`policy.feedback`), so that the model can fix its call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from policy import reasons as R
from policy.feedback import argument_errors
from policy.json.value import thaw
from seif.sdk.types import Receipt

REJECTED = "REJECTED"
"""The reason of a receipt the SDK makes for a call an approver rejected (the runtime's code)."""

STATUS_NOTES = {
    "DENIED": "the call was refused by policy and did not run",
    "FAILED": "the tool reported a failure, or the call was not dispatched",
    "UNKNOWN": (
        "it is not known whether the call ran; do not repeat it under a new call id,"
        " an operator must check"
    ),
}
APPROVAL_NOTE = (
    "the call needs a human approval of these exact arguments; it did not run: it waits for"
    " an approver, do not repeat it under a new call id"
)
DUPLICATE_NOTE = "this call id already ran; its output is not delivered twice"
REASON_NOTES = {
    R.ARGUMENTS_INVALID: (
        "the arguments do not match the tool's parameters and the call did not run: fix what"
        " `errors` names and call again"
    ),
    R.TOOL_NOT_DISCLOSED: "this tool is not available here and did not run: use a tool offered",
    R.CONDITION_DENIED: "the policy does not allow this call with these arguments; it did not run",
    R.CONDITION_NOT_MET: "the policy does not allow this call now; it did not run",
    R.CONDITION_ERROR: (
        "the policy could not evaluate this call and it did not run; do not retry it unchanged"
    ),
    R.CALL_LIMIT_EXCEEDED: (
        "this tool was called as often as allowed in this context; the call did not run"
    ),
    R.CALL_CONFLICT: "this call id was used for other arguments; it did not run: use a new id",
    R.APPROVAL_REQUIRED: APPROVAL_NOTE,
    R.APPROVAL_INVALID: APPROVAL_NOTE,
    R.APPROVAL_EXPIRED: (
        "the approval of this call ran out unused and it did not run; call again to ask for"
        " a new approval"
    ),
    REJECTED: "a human rejected this call and it did not run; do not make it again",
    R.CONTEXT_EXPIRED: "the context expired and the call did not run",
    R.CONTEXT_UNKNOWN: "the context is unknown and the call did not run",
    R.TOOL_UNAVAILABLE: "the tool's executor is not available; the call did not run",
    R.TOOL_INCOMPATIBLE: "the tool's executor serves another contract; the call did not run",
    R.UPSTREAM_CHANGED: (
        "the tool's upstream MCP server changed it since it was reviewed; the call did not run"
    ),
    "CONNECT_FAILED": "seif could not be reached; nothing was sent",
}


def note(receipt: Receipt) -> str:
    """What ``receipt`` means for the model, and what to do."""
    if receipt.succeeded:  # with no output: a repeat of a call id that ran
        return DUPLICATE_NOTE
    if receipt.status != "UNKNOWN" and receipt.reason in REASON_NOTES:
        return REASON_NOTES[receipt.reason]
    return STATUS_NOTES[receipt.status]


def receipt_text(receipt: Receipt) -> str:
    """The tool message for ``receipt``: the output as compact JSON when the call succeeded and
    its output came with it; otherwise ``{"seif": {"status", "reason", "duplicate", "note"}}``
    (and for ``ARGUMENTS_INVALID`` its ``errors``, each ``{"pointer", "message"}``, with
    ``errorsOmitted`` when there were more than ten)."""
    if receipt.succeeded and receipt.output_available:
        return _json(thaw(receipt.output))
    told: dict[str, Any] = {
        "status": receipt.status,
        "reason": receipt.reason,
        "duplicate": receipt.duplicate,
        "note": note(receipt),
    }
    if receipt.reason == R.ARGUMENTS_INVALID and receipt.decision is not None:
        errors = receipt.decision.get("errors")
        if isinstance(errors, tuple | list):
            told.update(argument_errors(e for e in errors if isinstance(e, Mapping)).to_json())
    return _json({"seif": told})


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
