"""Runtime configuration: the credentials file, the bindings file and the approval token.

Both files are closed JSON formats (unknown keys and duplicate keys are errors). A loader reports
every problem of its file together in one `ConfigError`: each a
:class:`~policy.diagnostic.Diagnostic` with a stable code, located in the file by a JSON pointer
(and the line and column it resolves to), and a short message. Secrets are read only through the
references a file names; no secret value appears in a message, a repr or an exception
(docs/runtime-config.md).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import re
import ssl
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, NoReturn
from urllib.parse import urlsplit

import blake3
import keyring

from compiler.diagnostics import Collector
from compiler.passes.parse import parse_json_text, read_text
from compiler.passes.structure import json_type
from policy import ir
from policy.diagnostic import Diagnostic, DiagnosticError, Location, did_you_mean
from policy.json.pointer import join
from policy.json.positions import with_positions
from servers.config.tls import CaFileProblem, TrustStores
from servers.config.upstreams import Upstream, UpstreamBinding

SCOPES = frozenset({"context.resolve", "tools.execute", "traces.read", "metrics.read"})
APPROVAL_ENV = "SEIF_CONTEXT_TOOL_APPROVAL_TOKEN"
KEYRING_SERVICE = "seif"
TRACE_KEY_CONTEXT = "seif 2026 trace key v1"
DEFAULT_MAX_BYTES = 65536
MAX_BYTES_LIMIT = 1 << 20
TIMEOUT_MIN_MS, TIMEOUT_MAX_MS = 100, 30000
MAX_REVISION = (1 << 53) - 1
MAX_ENDPOINT_LENGTH = 2048

KeyringGet = Callable[[str, str], str | None]

CODES = frozenset(
    """
    FILE_UNREADABLE JSON_SYNTAX DUPLICATE_KEY JSON_NUMBER_INVALID UNKNOWN_KEY MISSING_KEY
    WRONG_TYPE OUT_OF_RANGE SECRET_MISSING KEYCHAIN_UNAVAILABLE
    CREDENTIALS_EMPTY INVALID_ID DUPLICATE_ID TOKEN_REF_INVALID DUPLICATE_TOKEN SCOPES_EMPTY
    UNKNOWN_SCOPE DUPLICATE_SCOPE APPROVE_SCOPE_REFUSED
    INVALID_ENVIRONMENT UNKNOWN_TOOL TIMEOUT_EXCEEDS_DECLARED TRACE_KEY_NOT_DISTINCT
    UPSTREAM_UNAVAILABLE
    SECRET_REF_REFUSED SECRET_REF_REGISTRY_REFUSED SECRET_REF_SEIF_REFUSED
    ENDPOINT_INVALID ENDPOINT_SCHEME_REFUSED ENDPOINT_USERINFO_REFUSED ENDPOINT_QUERY_REFUSED
    ENDPOINT_FRAGMENT_REFUSED ENDPOINT_HTTP_NOT_LOOPBACK ENDPOINT_SECRET_REQUIRED
    CA_FILE_UNREADABLE CA_FILE_INVALID CA_FILE_HTTP_REFUSED
    APPROVAL_TOKEN_MISSING APPROVAL_TOKEN_NOT_DISTINCT
    APPROVERS_EMPTY APPROVER_TOKEN_REF_INVALID APPROVER_TOKEN_NOT_DISTINCT
    """.split()  # noqa: SIM905  # one word per code reads as a table
)
"""Every code a configuration diagnostic can carry; docs/runtime-config.md says what each means."""

_ID = re.compile(r"[a-z][a-z0-9-]{0,63}")
_TOKEN_REFS = {
    "env": re.compile(r"[A-Z_][A-Z0-9_]*"),
    "keychain": re.compile(r"[A-Za-z0-9_.-]{1,128}"),
}
_TOOL_REFS = {
    "env": re.compile(r"CONTEXT_TOOL_[A-Z0-9_]+"),
    "keychain": re.compile(r"context-tool-[a-z0-9-]+"),
}
# A reference is quoted in a message only when it has this shape, so that a secret pasted into a
# `tokenRef` or `secretRef` by mistake is never repeated back.
_SHOWABLE_REF = re.compile(r"env:[A-Z_][A-Z0-9_]{0,127}|keychain:[A-Za-z0-9._-]{1,128}")
_URL_FORBIDDEN = re.compile(r"[\x00-\x20\x7f\\]")
_LOOPBACK_V4 = ipaddress.IPv4Network("127.0.0.0/8")
_LOOPBACK_V6 = ipaddress.IPv6Address("::1")
_ALLOWLIST = "use `env:CONTEXT_TOOL_*` or `keychain:context-tool-*`"
_ANY = "use `env:NAME` or `keychain:NAME`"


class ConfigError(DiagnosticError):
    """Raised by the loaders; ``diagnostics`` lists every problem found in one file, each
    naming its file."""

    empty = "invalid configuration"


def refusal(file: str, *problems: tuple[str, str]) -> ConfigError:
    """A refusal of a whole file, or of an option or a variable named as one: each problem a
    ``(code, message)``."""
    where = Location(file=file, pointer="")
    return ConfigError([Diagnostic(code=c, message=m, location=where) for c, m in problems])


@dataclass(frozen=True, slots=True)
class Credential:
    id: str
    scopes: frozenset[str]
    token: str = field(repr=False)


class Credentials:
    """The application credentials; a presented token is compared with every one of them."""

    __slots__ = ("_digests", "_items", "_key")

    def __init__(self, credentials: Iterable[Credential]) -> None:
        self._items = tuple(credentials)
        self._key = os.urandom(32)
        self._digests = tuple(self._mac(c.token) for c in self._items)

    def _mac(self, token: str) -> bytes:
        # Comparing keyed digests of equal length keeps the token lengths out of the timing too.
        return hmac.digest(self._key, _utf8(token), "sha256")  # one-shot, in C

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
        return f"Credentials(ids={[c.id for c in self._items]!r})"


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


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(_utf8(a), _utf8(b))


def _ids(ids: list[str]) -> str:
    return ", ".join(f"`{i}`" for i in ids[:8]) or "no tool"


def _show(text: str) -> str:
    return f"`{text[:64]}…`" if len(text) > 64 else f"`{text}`"


class _Check:
    """The problems of one file, the checks that report them, and the secrets it may read."""

    __slots__ = ("_cache", "_env", "_keyring_get", "file", "problems", "text")

    def __init__(self, file: str, env: Mapping[str, str], keyring_get: KeyringGet) -> None:
        self.file = file
        self.problems: list[Diagnostic] = []
        self.text: str | None = None
        self._env = env
        self._keyring_get = keyring_get
        self._cache: dict[tuple[str, str], str] = {}

    def error(self, code: str, pointer: str, message: str) -> None:
        where = Location(file=self.file, pointer=pointer)
        self.problems.append(Diagnostic(code=code, message=message, location=where))

    def done(self) -> None:
        if self.problems:
            self.fail()

    def fail(self) -> NoReturn:
        """Raise every problem found, each at the line and column of its pointer."""
        raise ConfigError(with_positions(self.problems, self.text))

    def document(self, path: str | Path) -> Any:
        """The JSON tree of ``path``; raises at once when it cannot be read or parsed."""
        found = Collector("config")
        self.text = read_text(Path(path), found)
        tree = parse_json_text(self.text, found) if self.text is not None else None
        self.problems.extend(d.moved(file=self.file, pointer=d.pointer or "") for d in found.items)
        if self.text is None or any(d.line is not None for d in found.items):
            self.done()
        return tree

    def object(
        self, value: Any, pointer: str, required: Sequence[str], optional: Sequence[str] | None = ()
    ) -> Mapping[str, Any] | None:
        """``value`` if it is an object; reports its missing and (unless open) unknown keys."""
        if not isinstance(value, dict):
            self.error("WRONG_TYPE", pointer, f"expected an object, found {json_type(value)}")
            return None
        known = (*required, *(optional or ()))
        for k in value:
            if optional is not None and k not in known:
                use = ", ".join(f"`{n}`" for n in known)
                self.error("UNKNOWN_KEY", join(pointer, k), f"unknown key {_show(k)}; use {use}")
        for k in required:
            if k not in value:
                self.error("MISSING_KEY", pointer, f"missing key `{k}`")
        return value

    def array(self, value: Any, pointer: str, empty_code: str, empty: str) -> list[Any]:
        if not isinstance(value, list):
            self.error("WRONG_TYPE", pointer, f"expected an array, found {json_type(value)}")
            return []
        if not value:
            self.error(empty_code, pointer, empty)
        return value

    def string(self, value: Any, pointer: str) -> str | None:
        if isinstance(value, str):
            return value
        self.error("WRONG_TYPE", pointer, f"expected a string, found {json_type(value)}")
        return None

    def integer(self, value: Any, pointer: str, low: int, high: int) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int):
            found = "a fractional number" if isinstance(value, float) else json_type(value)
            self.error("WRONG_TYPE", pointer, f"expected an integer, found {found}")
            return None
        if not low <= value <= high:
            self.error("OUT_OF_RANGE", pointer, f"`{value}` is out of range; use {low}..{high}")
            return None
        return value

    def identifier(self, value: Any, pointer: str, code: str) -> str | None:
        text = self.string(value, pointer)
        if text is not None and not _ID.fullmatch(text):
            self.error(code, pointer, f"{_show(text)} does not match `^[a-z][a-z0-9-]{{0,63}}$`")
            return None
        return text

    def secret(self, value: Any, pointer: str, *, tool: bool) -> str | None:
        """The secret a ``tokenRef`` (any name) or a tool's ``secretRef``/``traceKeyRef`` names."""
        text = self.string(value, pointer)
        if text is None:
            return None
        kind, _, name = text.partition(":")
        shown = f"`{text}`" if _SHOWABLE_REF.fullmatch(text) else "this value"
        if tool and kind == "env" and name.startswith("SEIF_"):
            registry = name.startswith("SEIF_REGISTRY")
            code = "SECRET_REF_REGISTRY_REFUSED" if registry else "SECRET_REF_SEIF_REFUSED"
            what = "a registry credential" if registry else "a seif credential, not a tool's"
            self.error(code, pointer, f"{shown} is {what}; {_ALLOWLIST}")
            return None
        patterns = _TOOL_REFS if tool else _TOKEN_REFS
        if kind not in patterns or not patterns[kind].fullmatch(name):
            code, use = ("SECRET_REF_REFUSED", _ALLOWLIST) if tool else ("TOKEN_REF_INVALID", _ANY)
            self.error(code, pointer, f"{shown} is not an allowed reference; {use}")
            return None
        return self._read(kind, name, pointer)

    def _read(self, kind: str, name: str, pointer: str) -> str | None:
        """Exactly one environment key or keychain entry; nothing else is ever looked at."""
        if (kind, name) in self._cache:
            return self._cache[kind, name]
        if kind == "env":
            value: object = self._env.get(name)
        else:
            try:
                value = self._keyring_get(KEYRING_SERVICE, name)
            except Exception as exc:  # any backend failure becomes a problem, without its text
                message = f"keychain entry `{name}` cannot be read ({type(exc).__name__})"
                self.error("KEYCHAIN_UNAVAILABLE", pointer, message)
                return None
        if not isinstance(value, str) or not value:
            self.error("SECRET_MISSING", pointer, f"`{kind}:{name}` is not set or is empty")
            return None
        self._cache[kind, name] = value
        return value


# The credentials file.
def load_credentials(
    path: str | Path, env: Mapping[str, str], *, keyring_get: KeyringGet = keyring.get_password
) -> Credentials:
    """The application credentials of ``path``; raises `ConfigError` with every problem."""
    empty = ("CREDENTIALS_EMPTY", "no entry")
    return load_entries(path, env, "credentials", empty, _credential, keyring_get=keyring_get)


EntryParser = Callable[[Any, str, "_Check"], "Credential | None"]


def load_entries(
    path: str | Path,
    env: Mapping[str, str],
    key: str,
    empty: tuple[str, str],
    parse: EntryParser,
    *,
    keyring_get: KeyringGet = keyring.get_password,
) -> Credentials:
    """``{KEY: [entry, ...]}`` of ``path``, each entry parsed by ``parse``, ids and tokens
    distinct; an empty list is the problem ``empty`` (code, message)."""
    check = _Check(str(path), env, keyring_get)
    root = check.object(check.document(path), "", (key,))
    found: list[Credential] = []
    if root is not None and key in root:
        for i, item in enumerate(check.array(root[key], f"/{key}", *empty)):
            new = parse(item, f"/{key}/{i}", check)
            if new is not None:
                _distinct(new, found, f"/{key}/{i}", check)
                found.append(new)
    check.done()
    return Credentials(found)


def _distinct(new: Credential, found: Iterable[Credential], pointer: str, check: _Check) -> None:
    for other in found:
        if other.id == new.id:
            check.error("DUPLICATE_ID", join(pointer, "id"), f"id `{new.id}` is used twice")
        if _same(other.token, new.token):
            message = f"`{other.id}` and `{new.id}` have the same token; give each its own"
            check.error("DUPLICATE_TOKEN", join(pointer, "tokenRef"), message)


def _credential(value: Any, pointer: str, check: _Check) -> Credential | None:
    item = check.object(value, pointer, ("id", "tokenRef", "scopes"))
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
    if len(check.problems) > before or ident is None or scopes is None or token is None:
        return None
    return Credential(id=ident, scopes=scopes, token=token)


def _scopes(value: Any, pointer: str, check: _Check) -> frozenset[str]:
    seen: set[str] = set()
    for i, item in enumerate(check.array(value, pointer, "SCOPES_EMPTY", "grant a scope")):
        at = join(pointer, i)
        scope = check.string(item, at)
        if scope == "tools.approve":
            message = f"an application credential cannot hold `tools.approve`; see `{APPROVAL_ENV}`"
            check.error("APPROVE_SCOPE_REFUSED", at, message)
        elif scope is not None and scope not in SCOPES:
            allowed = ", ".join(f"`{s}`" for s in sorted(SCOPES))
            check.error("UNKNOWN_SCOPE", at, f"unknown scope {_show(scope)}; use {allowed}")
        elif scope in seen:
            check.error("DUPLICATE_SCOPE", at, f"scope `{scope}` is listed twice")
        elif scope is not None:
            seen.add(scope)
    return frozenset(seen)


# The bindings file.
def load_bindings(
    path: str | Path,
    project: ir.Project,
    env: Mapping[str, str],
    keyring_get: KeyringGet = keyring.get_password,
) -> Bindings:
    """The environment revision of ``path`` for ``project``; raises `ConfigError`."""
    check = _Check(str(path), env, keyring_get)
    keys = ("environment", "revision", "tools")
    root = check.object(check.document(path), "", keys, ("traceKeyRef",))
    if root is None:
        check.fail()
    environment = revision = None
    if "environment" in root:
        environment = check.identifier(root["environment"], "/environment", "INVALID_ENVIRONMENT")
    if "revision" in root:
        revision = check.integer(root["revision"], "/revision", 0, MAX_REVISION)
    tools: dict[str, Binding] = {}
    trust = TrustStores(Path(path).absolute().parent)  # relative `caFile`s start here
    if "tools" in root and check.object(root["tools"], "/tools", (), None):
        for tool_id, entry in root["tools"].items():
            binding = _tool_binding(tool_id, entry, project, check, trust)
            if binding is not None:
                tools[tool_id] = binding
    trace_key = None
    if "traceKeyRef" in root:
        trace_key = _trace_key(root["traceKeyRef"], tools, check)
    check.done()
    assert environment is not None and revision is not None  # else a problem was raised
    return Bindings(environment, revision, MappingProxyType(tools), trace_key)


def tool_secret(
    reference: str,
    env: Mapping[str, str],
    shown_as: str,
    keyring_get: KeyringGet = keyring.get_password,
) -> str:
    """The secret a tool's ``secretRef`` names (the same allowlist as bindings), given outside a
    file (``seif tool import --secret-ref``: ``shown_as``); raises `ConfigError`."""
    check = _Check(shown_as, env, keyring_get)
    value = check.secret(reference, "", tool=True)
    check.done()
    assert value is not None  # else a problem was raised
    return value


def _trace_key(value: Any, tools: Mapping[str, Binding], check: _Check) -> bytes | None:
    """The 32-byte key derived from the ``traceKeyRef`` secret, distinct from tool secrets."""
    pointer = "/traceKeyRef"
    secret = check.secret(value, pointer, tool=True)
    if secret is None:
        return None
    for binding in tools.values():
        if binding.secret is not None and _same(binding.secret, secret):
            message = f"the trace key must differ from every tool secret (`{binding.tool}`)"
            check.error("TRACE_KEY_NOT_DISTINCT", pointer, message)
    key: bytes = blake3.blake3(_utf8(secret), derive_key_context=TRACE_KEY_CONTEXT).digest()
    return key


def _tool_binding(
    tool_id: str, value: Any, project: ir.Project, check: _Check, trust: TrustStores
) -> Binding | None:
    """One tool's binding; the entry of an undeclared tool is checked too, and never bound."""
    pointer, before = join("/tools", tool_id), len(check.problems)
    tool = project.tool(tool_id)
    if tool is None:
        ids = sorted(t.id for t in project.tools)
        hint = did_you_mean(tool_id, ids) or f"; the build declares {_ids(ids)}"
        check.error("UNKNOWN_TOOL", pointer, f"tool {_show(tool_id)} is not declared{hint}")
    optional = ("secretRef", "timeoutMs", "maxBytes", "caFile")
    item = check.object(value, pointer, ("endpoint",), optional)
    if item is None:
        return None
    if tool is not None and tool.upstream is not None:
        message = (
            f"tool {_show(tool_id)} is pinned to the upstream MCP server "
            f"{_show(tool.upstream.server)} (its contract's `upstream`), which this runtime "
            "cannot dispatch to yet; an executor `endpoint` does not serve it"
        )
        check.error("UPSTREAM_UNAVAILABLE", pointer, message)
    secret = None
    if "secretRef" in item:
        secret = check.secret(item["secretRef"], join(pointer, "secretRef"), tool=True)
    endpoint = None
    at = join(pointer, "endpoint")
    if "endpoint" in item and (url := check.string(item["endpoint"], at)) is not None:
        for code, message in _endpoint_problems(url, has_secret="secretRef" in item):
            check.error(code, at, message)
        endpoint = url
    declared = tool.timeout_ms if tool is not None else TIMEOUT_MAX_MS
    timeout: int | None = declared
    if "timeoutMs" in item:
        at = join(pointer, "timeoutMs")
        timeout = check.integer(item["timeoutMs"], at, TIMEOUT_MIN_MS, TIMEOUT_MAX_MS)
        if timeout is not None and timeout > declared:
            message = f"`{timeout}` exceeds the tool's declared `timeoutMs` of `{declared}`"
            check.error("TIMEOUT_EXCEEDS_DECLARED", at, message)
    max_bytes: int | None = DEFAULT_MAX_BYTES
    if "maxBytes" in item:
        max_bytes = check.integer(item["maxBytes"], join(pointer, "maxBytes"), 1, MAX_BYTES_LIMIT)
    ca_file, tls = _trust(item, pointer, endpoint, trust, check)
    if len(check.problems) > before or endpoint is None or timeout is None or max_bytes is None:
        return None
    return Binding(tool_id, endpoint, timeout, max_bytes, secret, ca_file, tls)


def _trust(
    item: Mapping[str, Any], pointer: str, endpoint: str | None, trust: TrustStores, check: _Check
) -> tuple[Path | None, ssl.SSLContext | None]:
    """The ``caFile`` and TLS context of a binding: the CA file's context when it names one,
    the system trust store's for an ``https://`` endpoint without one, none for ``http://``."""
    scheme = _scheme(endpoint)
    if "caFile" not in item:
        return None, trust.system() if scheme == "https" else None
    at = join(pointer, "caFile")
    text = check.string(item["caFile"], at)
    if text is None:
        return None, None
    if scheme == "http":
        message = "a `caFile` is for an `https://` endpoint; remove it or use `https://`"
        check.error("CA_FILE_HTTP_REFUSED", at, message)
        return None, None
    try:
        return trust.ca_file(text)
    except CaFileProblem as problem:
        [refused] = problem.diagnostics
        check.error(refused.code, at, refused.message)
        return None, None


def _scheme(endpoint: str | None) -> str | None:
    try:
        return urlsplit(endpoint).scheme if endpoint is not None else None
    except ValueError:  # reported as `ENDPOINT_INVALID`
        return None


def _endpoint_problems(text: str, *, has_secret: bool) -> list[tuple[str, str]]:
    """What is wrong with an endpoint. Messages never quote the URL: it may hold a credential."""
    invalid = "ENDPOINT_INVALID"
    if len(text) > MAX_ENDPOINT_LENGTH or _URL_FORBIDDEN.search(text):
        limit = f"at most {MAX_ENDPOINT_LENGTH} characters"
        return [(invalid, f"use a url of {limit} without spaces, controls or backslashes")]
    try:
        parts = urlsplit(text)
        host, _ = parts.hostname, parts.port
    except ValueError:
        return [(invalid, "the endpoint is not a valid url")]
    if parts.scheme not in ("http", "https"):
        if not parts.scheme:
            return [(invalid, "use an absolute `https://` url")]
        return [("ENDPOINT_SCHEME_REFUSED", "use `https://`, or `http://` for a loopback host")]
    if not host:
        return [(invalid, "the endpoint has no host")]
    found: list[tuple[str, str]] = []
    if "@" in parts.netloc:
        message = "remove the user name and password; bind the credential with `secretRef`"
        found.append(("ENDPOINT_USERINFO_REFUSED", message))
    if "?" in text:
        found.append(("ENDPOINT_QUERY_REFUSED", "remove the query; executors take no query"))
    if "#" in text:
        found.append(("ENDPOINT_FRAGMENT_REFUSED", "remove the fragment"))
    if parts.scheme == "http" and not _is_loopback(host):
        message = f"plain `http://` is only for loopback hosts, not {_show(host)}; use `https://`"
        found.append(("ENDPOINT_HTTP_NOT_LOOPBACK", message))
    if parts.scheme == "https" and not has_secret:
        message = "an `https://` endpoint needs a `secretRef` for its credential"
        found.append(("ENDPOINT_SECRET_REQUIRED", message))
    return found


def _is_loopback(host: str) -> bool:
    """127.0.0.0/8, ``::1`` or ``localhost``: no name is resolved to decide."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host == "localhost"
    return address in _LOOPBACK_V4 or address == _LOOPBACK_V6


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
        clashes = _same(token or "", other) | clashes
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
