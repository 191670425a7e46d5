"""What the framework adapters share about calls held for a human approval.

seif holds the call: an execute without an approval of a tool whose contract requires one is
``DENIED`` ``APPROVAL_REQUIRED`` and lists the call for the approvers, who approve or reject it
in seif (the approval server, or the runtime's approve route). The adapter then runs it once,
with the same call id and the approval's id. The application reads approvals and never grants
one: a framework's own "approve" (the Agents SDK's ``state.approve``, a LangGraph resume) only
lets the adapter ask seif again, and what seif says is what happens.
"""

from __future__ import annotations

from typing import Any

from seif.sdk.text import REJECTED
from seif.sdk.turns import Turn
from seif.sdk.types import ApprovalStatus, Receipt

WAITING = "held for an approver, who has not decided yet; nothing was sent again"
REFUSED = "rejected by an approver; nothing was sent"


def gated(turn: Turn, name: str) -> bool:
    """Whether the contract of the function ``name`` requires an approval of every call."""
    return any(c.name == name and c.approval == "required" for c in turn.context.contracts)


def made(turn: Turn, name: str, call_id: str, reason: str, detail: str) -> Receipt:
    """A ``DENIED`` receipt the SDK makes from an approval status it read (nothing executed)."""
    tool = turn.context.tool_id(name)
    return Receipt(call_id, tool, "DENIED", reason=reason, detail=detail)


async def unapproved(
    turn: Turn, name: str, call_id: str, arguments: Any, status: ApprovalStatus
) -> Receipt:
    """The receipt of a call seif has not approved: ``REJECTED`` and ``PENDING`` are made from
    the status; otherwise (``NONE``, ``EXPIRED``) the call is executed without an approval, and
    seif decides (a call that needs one is held, anew after an expiry)."""
    if status.state == "REJECTED":
        return made(turn, name, call_id, REJECTED, REFUSED)
    if status.state == "PENDING":
        return made(turn, name, call_id, "APPROVAL_REQUIRED", WAITING)
    return await turn.execute(name, call_id, arguments)


async def hold(turn: Turn, name: str, call_id: str, arguments: Any) -> Receipt | None:
    """None when seif approved the call (it may run); else :func:`unapproved`'s receipt."""
    status = await turn.approval_status(call_id)
    if status.approved:
        return None
    return await unapproved(turn, name, call_id, arguments, status)


async def execute_approved(turn: Turn, name: str, call_id: str, arguments: Any) -> Receipt:
    """Execute the call with the approval seif holds for it, if any (it runs once: a repeat of
    the call id is a duplicate); else :func:`unapproved`'s receipt."""
    status = await turn.approval_status(call_id)
    if status.approved:
        return await turn.execute(name, call_id, arguments, approval_id=status.approval_id)
    return await unapproved(turn, name, call_id, arguments, status)


def held_value(turn: Turn, name: str, receipt: Receipt) -> dict[str, Any]:
    """What a framework's pause shows of a held call: ``{"seif": {"contextRef", "callId",
    "tool", "name", "reason"}}`` (the arguments are the framework's own call)."""
    return {
        "seif": {
            "contextRef": turn.context.context_ref,
            "callId": receipt.call_id,
            "tool": receipt.tool,
            "name": name,
            "reason": receipt.reason,
        }
    }
