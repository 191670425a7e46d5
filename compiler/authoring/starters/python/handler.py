"""The business action of this tool: the one function to implement (see README.md).

``handle(arguments, call)`` runs once per ``idempotencyKey`` (``server.py`` answers a repeated
key from the store without calling it again). When it is called, the protocol has been checked:
the call is for this tool's exact contract (``contract.json``), and ``arguments`` satisfy the
tool's argument schema. Return the output (it must satisfy the tool's result schema, or the
executor answers ``RESULT_INVALID``), or raise :class:`Failure` to answer ``ok: false``.

Authorize from your backend's own state, never from the arguments: the model chose them, and a
record id, a user id or a role in the arguments is not a permission. ``call.coordinates`` say
which application context the runtime resolved (consumer, objective, environment, deployment),
which the runtime, not the model, decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Call:
    """What the runtime says about this call besides its arguments."""

    call_id: str
    idempotency_key: str
    """``sha256(build digest | contextRef | callId)``, derived by the runtime, never the model:
    use it as the idempotency key of the action in your backend too."""
    coordinates: dict[str, Any]
    """build, consumer, objective, environment, deployment, trace, context."""
    tool: dict[str, Any]
    """The tool's contract (``contract.json``)."""


class Failure(Exception):
    """An ``ok: false`` answer: a short code (``[A-Za-z0-9_.:-]{1,64}``, which the runtime
    keeps in the receipt as ``executorError``) and a message (which the runtime never keeps)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


async def handle(arguments: dict[str, Any], call: Call) -> Any:
    """Do the tool's action for ``arguments`` and return its output.

    Placeholder: every call answers ``ok: false`` with ``NOT_IMPLEMENTED`` until this is
    written. Replace the ``raise`` with the action (and delete this paragraph).
    """
    raise Failure(
        "NOT_IMPLEMENTED",
        f"the business handler of {call.tool['id']} is not implemented yet (handler.py)",
    )
