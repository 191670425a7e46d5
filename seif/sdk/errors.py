"""The SDK's exceptions: one base class, :class:`SeifError`.

- :class:`SeifRequestError` and its subclasses: the runtime answered the request itself with an
  error status (``{"error": {"code", "message"}}`` plus extra fields such as ``causes``). Nothing
  was dispatched: an execute that reached the runtime always gets a receipt.
- :class:`SeifTransportError`: no usable answer came back (connection refused, timed out, lost,
  or an answer that is not what the API says). ``execute`` never raises it: it returns a receipt
  instead (see :mod:`seif.sdk.client`).
- :class:`ToolBuildRefused`: ``resolve_context`` was asked for messages only on a context that
  discloses tools.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.json.value import EMPTY_MAP, FrozenMap, freeze


class SeifError(Exception):
    """Every exception the SDK raises on its own (a ``ValueError`` for a malformed argument
    aside)."""


class SeifRequestError(SeifError):
    """The runtime refused the request itself: ``status`` (HTTP), ``code`` (stable, e.g.
    ``CONTEXT_UNKNOWN``), ``message`` (one line), ``extra`` (the body's other fields, frozen)."""

    def __init__(
        self, status: int, code: str, message: str, extra: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.extra: FrozenMap = freeze(extra) if extra else EMPTY_MAP


class BadRequestError(SeifRequestError):
    """400: the body or its arguments were refused (``BAD_REQUEST``, ``OBJECTIVE_UNKNOWN``...)."""


class AuthenticationError(SeifRequestError):
    """401: no credential, or not a credential this runtime knows (``UNAUTHENTICATED``), or an
    issuer's access token that failed a check (``TOKEN_INVALID``)."""


class PermissionDeniedError(SeifRequestError):
    """403: the credential lacks the route's scope (``FORBIDDEN``; ``INSUFFICIENT_SCOPE`` for
    an issuer's access token), or may not resolve the objective (``OBJECTIVE_FORBIDDEN``: it is
    outside the credential's ``objectives``)."""


class TurnRequiredError(SeifRequestError):
    """403 ``TURN_REQUIRED``: the runtime runs with ``--require-turn`` and the request named no
    live turn of this credential."""


class NotFoundError(SeifRequestError):
    """404: ``CONTEXT_UNKNOWN``, ``TURN_UNKNOWN``, or ``NOT_FOUND`` (a route this runtime does
    not serve)."""


class ConflictError(SeifRequestError):
    """409: e.g. ``TURN_COMPLETED`` (a turn completed twice)."""


class ResolutionBlockedError(ConflictError):
    """409 ``RESOLUTION_BLOCKED``: the context could not be resolved; ``causes`` and
    ``omitted`` say why (each ``{"id", "kind", "reason", "explanation"}``)."""

    @property
    def causes(self) -> tuple[Any, ...]:
        found: tuple[Any, ...] = self.extra.get("causes", ())
        return found

    @property
    def omitted(self) -> tuple[Any, ...]:
        found: tuple[Any, ...] = self.extra.get("omitted", ())
        return found


class ServerError(SeifRequestError):
    """5xx: the runtime is not ready (503) or failed (500, a bug in seif or a proxy's fault)."""


class SeifTransportError(SeifError):
    """No usable answer: ``reason`` is ``CONNECT_FAILED`` (nothing was sent), ``CLIENT_TIMEOUT``,
    ``CONNECTION_LOST`` or ``INVALID_RESPONSE``; ``sent`` says whether the request may have
    reached the runtime."""

    def __init__(self, reason: str, message: str, *, sent: bool) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        self.sent = sent


class ToolBuildRefused(SeifError):
    """``resolve_context`` (messages only) on a context that discloses tools: binding none of
    them silently would hide what the policy disclosed. ``context_ref`` and ``tools`` (the
    function names) say what was disclosed."""

    def __init__(self, context_ref: str, tools: tuple[str, ...]) -> None:
        super().__init__(
            f"context {context_ref} discloses tools ({', '.join(tools)}): resolve_context "
            "returns messages only; bind the tools with resolve or run_agent_turn, or use an "
            "objective that discloses none"
        )
        self.context_ref = context_ref
        self.tools = tools


def request_error(status: int, body: object, fallback: str) -> SeifRequestError:
    """The typed exception of an error answer (``body`` as decoded, or None when it was not
    JSON; ``fallback`` the HTTP reason phrase)."""
    code, message, extra = f"HTTP_{status}", fallback or f"HTTP {status}", {}
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping):
            code = str(error.get("code") or code)
            message = str(error.get("message") or message)
        extra = {k: v for k, v in body.items() if k != "error"}
    cls: type[SeifRequestError] = SeifRequestError
    if status == 400:
        cls = BadRequestError
    elif status == 401:
        cls = AuthenticationError
    elif status == 403:
        cls = TurnRequiredError if code == "TURN_REQUIRED" else PermissionDeniedError
    elif status == 404:
        cls = NotFoundError
    elif status == 409:
        cls = ResolutionBlockedError if code == "RESOLUTION_BLOCKED" else ConflictError
    elif status >= 500:
        cls = ServerError
    return cls(status, code, message, extra)
