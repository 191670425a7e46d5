"""The answers of the approval server's own routes (``seif approval-server``), as the
``TypedDict``\\ s it encodes: a pending call as approvers see it (the runtime's entry, its
``pendingId``, and its arguments as the page shows them), and who is signed in.

Not ``from __future__ import annotations``: ``NotRequired`` must be seen when each class is made.
"""

from typing import Literal, NotRequired, TypedDict

from servers.wire.answers import PendingCall

ValueKind = Literal["object", "array", "string", "number", "boolean", "null"]


class ArgumentView(TypedDict):
    """One argument value as the page shows it, a tree that mirrors the JSON value. A leaf's
    ``text`` is its JSON text exactly as it runs (a number as written, never rounded), with
    every character that renders as nothing or as a blank written as a visible ``\\uXXXX``
    escape, except the line feeds inside a string, which are real line breaks (read each one as
    ``\\n`` and the text is JSON again). An object's ``entries`` are its members in order (each
    ``key`` the key's JSON text, so escaped too, line feeds included); an array's ``items``."""

    kind: ValueKind
    text: NotRequired[str]
    entries: NotRequired[list["ArgumentEntry"]]
    items: NotRequired[list["ArgumentView"]]


class ArgumentEntry(TypedDict):
    key: str
    value: ArgumentView


class ApproverPendingCall(PendingCall):
    """A pending call of ``GET /v1/pending``: the runtime's entry (``toolDescription``,
    ``application`` and ``requesterGone`` as an older runtime leaves them out: ``""``,
    ``""`` and false), its ``pendingId``, and its arguments as ``argumentsText`` (their JSON
    text) and ``argumentsView`` (:class:`ArgumentView`)."""

    pendingId: str
    argumentsText: str
    argumentsView: ArgumentView


class Me(TypedDict):
    """``GET /v1/me``: the approver the bearer token signs in: ``approver``, its id (what the
    runtime records: a static approver's id, or ``<issuer id>:<subject fingerprint>``), and
    ``name``, what the page shows (an issuer's ``nameClaim``, else the id)."""

    approver: str
    name: str
