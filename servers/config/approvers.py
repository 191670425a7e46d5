"""The approval server's configuration: the approvers file and the runner approval credential.

``approvers.json`` is a closed JSON format: ``{"approvers": [{"id", "tokenRef"}]}``, each
``tokenRef`` ``env:SEIF_APPROVER_[A-Z0-9_]+`` (an approver's token is a person's credential, read
from the environment of the approval server only). Every problem of the file is reported together
in one :class:`~servers.config.files.ConfigError` (codes in docs/runtime-config.md); no token
appears in a message. Approvers are authenticated as application credentials are: keyed digests
of one length, every approver compared on every request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from servers.config.check import Check, same
from servers.config.endpoints import endpoint_problems
from servers.config.files import Credential, Credentials, approval_token, load_entries, refusal

APPROVER_ENV = re.compile(r"SEIF_APPROVER_[A-Z0-9_]+")


def load_approvers(path: str | Path, env: Mapping[str, str]) -> Credentials:
    """The approvers of ``path`` with their tokens, read from ``env``."""
    empty = ("APPROVERS_EMPTY", "no approver")
    return load_entries(path, env, "approvers", empty, _approver, keyring_get=_no_keychain)


def _no_keychain(_service: str, _name: str) -> str | None:  # pragma: no cover - never called
    raise AssertionError("approver tokens are read from the environment only")


def _approver(value: Any, pointer: str, check: Check) -> Credential | None:
    item = check.object(value, pointer, ("id", "tokenRef"))
    if item is None:
        return None
    before = len(check.problems)
    ident = check.identifier(item["id"], f"{pointer}/id", "INVALID_ID") if "id" in item else None
    token = _token(item["tokenRef"], f"{pointer}/tokenRef", check) if "tokenRef" in item else None
    if len(check.problems) > before or ident is None or token is None:
        return None
    return Credential(id=ident, scopes=frozenset(), token=token)


def _token(value: Any, pointer: str, check: Check) -> str | None:
    text = check.string(value, pointer)
    if text is None:
        return None
    kind, _, name = text.partition(":")
    if kind != "env" or not APPROVER_ENV.fullmatch(name):
        shown = f"`{text}`" if re.fullmatch(r"env:[A-Z_][A-Z0-9_]{0,127}", text) else "this value"
        message = f"{shown} is not an approver's token reference; use `env:SEIF_APPROVER_NAME`"
        check.error("APPROVER_TOKEN_REF_INVALID", pointer, message)
        return None
    return check.secret(text, pointer, tool=False)


def runner_token(env: Mapping[str, str], approvers: Credentials) -> str:
    """``SEIF_CONTEXT_TOOL_APPROVAL_TOKEN``, which the approval server holds for the runtime:
    required, and distinct from every approver's token (compared in constant time)."""

    def clash(token: str) -> tuple[str, str]:
        owner = next(c.id for c in approvers if same(token, c.token))
        message = f"approver `{owner}` has the runner approval token; give the approver its own"
        return "APPROVER_TOKEN_NOT_DISTINCT", message

    token = approval_token(env, approvers, required=True, clash=clash)
    assert token is not None  # required: a missing one is refused
    return token


def runtime_url(text: str) -> str:
    """``--runtime``: an absolute ``https://`` URL, or ``http://`` to a loopback host (the runner
    approval credential travels to it), with no user name, query or fragment."""
    problems = endpoint_problems(text, needs_secret=False)
    if problems:
        raise refusal("--runtime", *problems)
    return text.rstrip("/")
