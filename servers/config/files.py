"""Runtime configuration: the credentials file, the bindings file and the approval token.

Both files are closed JSON formats (unknown keys and duplicate keys are errors). A loader reports
every problem of its file together in one `ConfigError`: each a
:class:`~policy.diagnostic.Diagnostic` with a stable code, located in the file by a JSON pointer
(and the line and column it resolves to), and a short message. Secrets are read only through the
references a file names; no secret value appears in a message, a repr or an exception
(docs/runtime-config.md).
"""

from __future__ import annotations

import functools
import hmac
import os
import ssl
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import blake3
import keyring

from policy import ir
from policy.diagnostic import did_you_mean
from policy.json.pointer import join
from servers.config.check import (
    KEYRING_SERVICE,
    Check,
    ConfigError,
    KeyringGet,
    ids,
    refusal,
    same,
    show,
    utf8,
)
from servers.config.endpoints import DEFAULT_MAX_BYTES, ca_trust, endpoint_problems, limits
from servers.config.issuers import Issuer, issuers
from servers.config.tls import TrustStores
from servers.config.upstreams import (
    Draft,
    HttpUpstream,
    Upstream,
    UpstreamBinding,
    bound_upstreams,
    upstream_binding,
    upstream_drafts,
)

__all__ = [
    "CODES",
    "DEFAULT_MAX_BYTES",
    "KEYRING_SERVICE",
    "SCOPES",
    "Binding",
    "Bindings",
    "ConfigError",
    "Credential",
    "Credentials",
    "Issuer",
    "KeyringGet",
    "approval_token",
    "load_bindings",
    "load_credentials",
    "distinct",
    "refusal",
    "tool_secret",
]

SCOPES = frozenset({"context.resolve", "tools.execute", "traces.read", "metrics.read"})
APPROVAL_ENV = "SEIF_CONTEXT_TOOL_APPROVAL_TOKEN"
TRACE_KEY_CONTEXT = "seif 2026 trace key v1"
MAX_REVISION = (1 << 53) - 1

CODES = frozenset(
    """
    FILE_UNREADABLE JSON_SYNTAX DUPLICATE_KEY JSON_NUMBER_INVALID UNKNOWN_KEY MISSING_KEY
    WRONG_TYPE OUT_OF_RANGE SECRET_MISSING KEYCHAIN_UNAVAILABLE
    CREDENTIALS_EMPTY INVALID_ID DUPLICATE_ID TOKEN_REF_INVALID DUPLICATE_TOKEN SCOPES_EMPTY
    UNKNOWN_SCOPE DUPLICATE_SCOPE APPROVE_SCOPE_REFUSED
    INVALID_ENVIRONMENT UNKNOWN_TOOL TIMEOUT_EXCEEDS_DECLARED TRACE_KEY_NOT_DISTINCT
    UPSTREAM_UNKNOWN UPSTREAM_MISMATCH BINDING_TARGET_INVALID COMMAND_INVALID COMMAND_NOT_FOUND
    ENV_NAME_INVALID CWD_INVALID
    SECRET_REF_REFUSED SECRET_REF_REGISTRY_REFUSED SECRET_REF_SEIF_REFUSED
    ENDPOINT_INVALID ENDPOINT_SCHEME_REFUSED ENDPOINT_USERINFO_REFUSED ENDPOINT_QUERY_REFUSED
    ENDPOINT_FRAGMENT_REFUSED ENDPOINT_HTTP_NOT_LOOPBACK ENDPOINT_SECRET_REQUIRED
    CA_FILE_UNREADABLE CA_FILE_INVALID CA_FILE_HTTP_REFUSED
    APPROVAL_TOKEN_MISSING APPROVAL_TOKEN_NOT_DISTINCT
    APPROVERS_EMPTY APPROVER_TOKEN_REF_INVALID APPROVER_TOKEN_NOT_DISTINCT
    ISSUER_INVALID NARROWING_EMPTY UNKNOWN_OBJECTIVE
    """.split()  # noqa: SIM905  # one word per code reads as a table
)
"""Every code a configuration diagnostic can carry; docs/runtime-config.md says what each means."""


@dataclass(frozen=True, slots=True)
class Credential:
    id: str
    scopes: frozenset[str]
    token: str = field(repr=False)
    objectives: tuple[str, ...] | None = None
    """The objectives it may resolve (``objectives``); None: every one."""


class Credentials:
    """The application credentials; a presented token is compared with every one of them.
    ``issuers``: the identity providers whose access tokens are accepted too
    (``servers.identity`` validates those)."""

    __slots__ = ("_digests", "_items", "_key", "issuers")

    def __init__(self, credentials: Iterable[Credential], issuers: Iterable[Issuer] = ()) -> None:
        self._items = tuple(credentials)
        self.issuers = tuple(issuers)
        self._key = os.urandom(32)
        self._digests = tuple(self._mac(c.token) for c in self._items)

    def _mac(self, token: str) -> bytes:
        # Comparing keyed digests of equal length keeps the token lengths out of the timing too.
        return hmac.digest(self._key, utf8(token), "sha256")  # one-shot, in C

    def authenticate(self, token: str | None) -> Credential | None:
        """The credential whose token is ``token``, or None; no early exit on a match."""
        if not token:
            return None
        presented = self._mac(token)
        found: Credential | None = None
        for credential, digest in zip(self._items, self._digests, strict=True):
            if hmac.compare_digest(presented, digest) and found is None:
                found = credential
        return found

    def tokens(self) -> list[str]:
        return [c.token for c in self._items]

    def __iter__(self) -> Iterator[Credential]:
        return iter(self._items)

    def __repr__(self) -> str:
        issuers = [i.id for i in self.issuers]
        return f"Credentials(ids={[c.id for c in self._items]!r}, issuers={issuers!r})"


@dataclass(frozen=True, slots=True)
class Binding:
    tool: str
    endpoint: str
    timeout_ms: int
    max_bytes: int
    secret: str | None = field(default=None, repr=False)
    ca_file: Path | None = None
    """The resolved ``caFile``, when the binding names one."""
    tls: ssl.SSLContext | None = field(default=None, repr=False, compare=False)
    """The TLS context of an ``https://`` binding (its ``caFile``'s, else the system trust
    store's), built once at load and shared by the bindings that trust the same file."""


@dataclass(frozen=True, slots=True)
class Bindings:
    environment: str
    revision: int
    tools: Mapping[str, Binding | UpstreamBinding]
    trace_key: bytes | None = field(default=None, repr=False)
    upstreams: Mapping[str, Upstream] = field(default_factory=lambda: MappingProxyType({}))
    """The upstream MCP servers its ``upstreams`` names, by id (``servers.config.upstreams``)."""


# The credentials file.
def load_credentials(
    path: str | Path,
    env: Mapping[str, str],
    *,
    keyring_get: KeyringGet = keyring.get_password,
    objectives: Collection[str] | None = None,
) -> Credentials:
    """The application credentials of ``path`` (its static ``credentials``, its ``issuers``, or
    both); raises `ConfigError` with every problem. ``objectives``: the build's objective ids,
    when the caller has the build: what a credential's or an issuer's ``objectives`` may name
    (``UNKNOWN_OBJECTIVE``; under ``issuers``, ``ISSUER_INVALID``)."""
    check = Check(str(path), env, keyring_get)
    root = check.object(check.document(path), "", (), ("credentials", "issuers"))
    found: list[Credential] = []
    if root is not None and "credentials" in root:
        empty = ("CREDENTIALS_EMPTY", "no entry")
        parse = functools.partial(_credential, objectives=objectives)
        found = _entries(root["credentials"], "credentials", empty, parse, check)
    elif root is not None and "issuers" not in root:
        check.error("MISSING_KEY", "", "missing key `credentials` (or `issuers`)")
    trusted: tuple[Issuer, ...] = ()
    if root is not None and "issuers" in root:
        folder = Path(path).absolute().parent  # a relative `jwksFile` starts here
        taken = [c.id for c in found]
        trusted = issuers(root["issuers"], check, folder, SCOPES, taken, objectives)
    check.done()
    return Credentials(found, trusted)


EntryParser = Callable[[Any, str, "Check"], "Credential | None"]


def _entries(
    value: Any, key: str, empty: tuple[str, str], parse: EntryParser, check: Check
) -> list[Credential]:
    found: list[Credential] = []
    for i, item in enumerate(check.array(value, f"/{key}", *empty)):
        new = parse(item, f"/{key}/{i}", check)
        if new is not None:
            distinct(new, found, f"/{key}/{i}", check)
            found.append(new)
    return found


def distinct(new: Credential, found: Iterable[Credential], pointer: str, check: Check) -> None:
    """``new``'s id and token, each distinct from those of ``found`` (tokens compared in
    constant time)."""
    for other in found:
        if other.id == new.id:
            check.error("DUPLICATE_ID", join(pointer, "id"), f"id `{new.id}` is used twice")
        if same(other.token, new.token):
            message = f"`{other.id}` and `{new.id}` have the same token; give each its own"
            check.error("DUPLICATE_TOKEN", join(pointer, "tokenRef"), message)


def _credential(
    value: Any, pointer: str, check: Check, objectives: Collection[str] | None = None
) -> Credential | None:
    item = check.object(value, pointer, ("id", "tokenRef", "scopes"), ("objectives",))
    if item is None:
        return None
    before = len(check.problems)
    ident = check.identifier(item["id"], f"{pointer}/id", "INVALID_ID") if "id" in item else None
    scopes = _scopes(item["scopes"], f"{pointer}/scopes", check) if "scopes" in item else None
    token = (
        check.secret(item["tokenRef"], f"{pointer}/tokenRef", tool=False)
        if "tokenRef" in item
        else None
    )
    allowed = None
    if "objectives" in item:
        at = f"{pointer}/objectives"
        allowed = check.id_list(item["objectives"], at, "an objective", objectives)
    if len(check.problems) > before or ident is None or scopes is None or token is None:
        return None
    return Credential(id=ident, scopes=scopes, token=token, objectives=allowed)


def _scopes(value: Any, pointer: str, check: Check) -> frozenset[str]:
    seen: set[str] = set()
    for i, item in enumerate(check.array(value, pointer, "SCOPES_EMPTY", "grant a scope")):
        at = join(pointer, i)
        scope = check.string(item, at)
        if scope == "tools.approve":
            message = f"an application credential cannot hold `tools.approve`; see `{APPROVAL_ENV}`"
            check.error("APPROVE_SCOPE_REFUSED", at, message)
        elif scope is not None and scope not in SCOPES:
            allowed = ", ".join(f"`{s}`" for s in sorted(SCOPES))
            check.error("UNKNOWN_SCOPE", at, f"unknown scope {show(scope)}; use {allowed}")
        elif scope in seen:
            check.error("DUPLICATE_SCOPE", at, f"scope `{scope}` is listed twice")
        elif scope is not None:
            seen.add(scope)
    return frozenset(seen)


# The bindings file.
BINDING_KEYS = ("endpoint", "upstream", "secretRef", "timeoutMs", "maxBytes", "caFile")


def load_bindings(
    path: str | Path,
    project: ir.Project,
    env: Mapping[str, str],
    keyring_get: KeyringGet = keyring.get_password,
) -> Bindings:
    """The environment revision of ``path`` for ``project``; raises `ConfigError`."""
    check = Check(str(path), env, keyring_get)
    keys = ("environment", "revision", "tools")
    root = check.object(check.document(path), "", keys, ("traceKeyRef", "upstreams"))
    if root is None:
        check.fail()
    environment = revision = None
    if "environment" in root:
        environment = check.identifier(root["environment"], "/environment", "INVALID_ENVIRONMENT")
    if "revision" in root:
        revision = check.integer(root["revision"], "/revision", 0, MAX_REVISION)
    folder = Path(path).absolute().parent  # relative `caFile`s and `cwd`s start here
    trust = TrustStores(folder)
    drafts = upstream_drafts(root["upstreams"], check, folder, trust) if "upstreams" in root else {}
    tools: dict[str, Binding | UpstreamBinding] = {}
    upstreams: dict[str, Upstream] = {}
    if "tools" in root and check.object(root["tools"], "/tools", (), None):
        for tool_id, entry in root["tools"].items():
            binding = _tool_binding(tool_id, entry, project, check, trust, drafts)
            if binding is not None:
                tools[tool_id] = binding
        upstreams = bound_upstreams(drafts, root["tools"], check)
    trace_key = None
    if "traceKeyRef" in root:
        trace_key = _trace_key(root["traceKeyRef"], tools, upstreams, check)
    check.done()
    assert environment is not None and revision is not None  # else a problem was raised
    frozen = MappingProxyType(tools), trace_key, MappingProxyType(upstreams)
    return Bindings(environment, revision, *frozen)


def tool_secret(
    reference: str,
    env: Mapping[str, str],
    shown_as: str,
    keyring_get: KeyringGet = keyring.get_password,
) -> str:
    """The secret a tool's ``secretRef`` names (the same allowlist as bindings), given outside a
    file (``seif tool import --secret-ref``: ``shown_as``); raises `ConfigError`."""
    check = Check(shown_as, env, keyring_get)
    value = check.secret(reference, "", tool=True)
    check.done()
    assert value is not None  # else a problem was raised
    return value


def _trace_key(
    value: Any,
    tools: Mapping[str, Binding | UpstreamBinding],
    upstreams: Mapping[str, Upstream],
    check: Check,
) -> bytes | None:
    """The 32-byte key derived from the ``traceKeyRef`` secret, distinct from every secret an
    executor or an upstream is given."""
    pointer = "/traceKeyRef"
    secret = check.secret(value, pointer, tool=True)
    if secret is None:
        return None
    given = [(b.tool, b.secret) for b in tools.values() if isinstance(b, Binding)]
    for server, upstream in upstreams.items():
        if isinstance(upstream, HttpUpstream):
            given.append((server, upstream.secret))
        else:
            given.extend((server, v) for v in upstream.env.values())
    for holder, other in given:
        if other is not None and same(other, secret):
            message = f"the trace key must differ from every tool secret (`{holder}`)"
            check.error("TRACE_KEY_NOT_DISTINCT", pointer, message)
    key: bytes = blake3.blake3(utf8(secret), derive_key_context=TRACE_KEY_CONTEXT).digest()
    return key


def _tool_binding(
    tool_id: str,
    value: Any,
    project: ir.Project,
    check: Check,
    trust: TrustStores,
    drafts: Mapping[str, Draft | None] | None,
) -> Binding | UpstreamBinding | None:
    """One tool's binding; the entry of an undeclared tool is checked too, and never bound."""
    pointer, before = join("/tools", tool_id), len(check.problems)
    tool = project.tool(tool_id)
    if tool is None:
        known = sorted(t.id for t in project.tools)
        hint = did_you_mean(tool_id, known) or f"; the build declares {ids(known)}"
        check.error("UNKNOWN_TOOL", pointer, f"tool {show(tool_id)} is not declared{hint}")
    item = check.object(value, pointer, (), BINDING_KEYS)
    if item is None:
        return None
    if "upstream" in item:
        return upstream_binding(tool_id, tool, item, pointer, drafts, check)
    if "endpoint" not in item:
        check.error("MISSING_KEY", pointer, "missing key `endpoint` (or `upstream`)")
    elif tool is not None and tool.upstream is not None:
        message = (
            f"tool `{tool_id}` is pinned to the upstream `{tool.upstream.server}` (its "
            "contract's `upstream`); bind it with `upstream`, not an executor `endpoint`"
        )
        check.error("UPSTREAM_MISMATCH", join(pointer, "endpoint"), message)
    secret = None
    if "secretRef" in item:
        secret = check.secret(item["secretRef"], join(pointer, "secretRef"), tool=True)
    endpoint = None
    at = join(pointer, "endpoint")
    if "endpoint" in item and (url := check.string(item["endpoint"], at)) is not None:
        for code, message in endpoint_problems(url, needs_secret="secretRef" not in item):
            check.error(code, at, message)
        endpoint = url
    timeout, max_bytes = limits(item, pointer, tool, check)
    ca_file, tls = ca_trust(item, pointer, endpoint, trust, check)
    if len(check.problems) > before or endpoint is None or timeout is None or max_bytes is None:
        return None
    return Binding(tool_id, endpoint, timeout, max_bytes, secret, ca_file, tls)


# The approval token.
def approval_token(
    env: Mapping[str, str],
    credentials: Credentials,
    *,
    required: bool,
    clash: Callable[[str], tuple[str, str]] | None = None,
) -> str | None:
    """``SEIF_CONTEXT_TOOL_APPROVAL_TOKEN``, distinct from every token of ``credentials``
    (compared in constant time); ``clash`` gives the (code, message) of a token one of them has
    (default: an application credential's)."""
    token = env.get(APPROVAL_ENV) or None
    clashes = False
    for other in credentials.tokens():
        clashes = same(token or "", other) | clashes
    refused = None
    if token is None and required:
        refused = ("APPROVAL_TOKEN_MISSING", "set it to the runner approval token")
    elif token is not None and clashes:
        refused = (
            clash(token)
            if clash is not None
            else ("APPROVAL_TOKEN_NOT_DISTINCT", "use a token no application credential has")
        )
    if refused is not None:
        raise refusal(f"${APPROVAL_ENV}", refused)
    return token
