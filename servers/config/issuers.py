"""The ``issuers`` of the credentials file: the identity providers whose JWT access tokens the
runtime accepts (docs/identity.md).

Each entry is checked at start, every problem an ``ISSUER_INVALID`` diagnostic at its JSON
pointer (and the line and column it resolves to): an algorithm allowlist that could hold
``none`` or an HMAC algorithm, a scope mapped to ``tools.approve``, a ``jwksUri`` that is
neither ``https://`` nor loopback ``http://``, a ``jwksFile`` that holds no usable public key,
``objectives`` naming an objective the build does not declare (when the loader has the build).
The approvers file's ``issuers`` (``servers.config.approvers``) share these fields and checks.
Nothing here fetches a key set or validates a token (``servers.identity`` does).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar
from urllib.parse import urlsplit

from compiler.passes.structure import json_type
from compiler.readfile import read_regular
from policy.json.pointer import join
from policy.json.strict import JsonError, loads
from servers.config.check import Check, show
from servers.config.endpoints import MAX_ENDPOINT_LENGTH, is_loopback
from servers.config.jwks import ALGORITHMS, MAX_JWKS_BYTES, PublicKey, public_keys

__all__ = [
    "CODE",
    "DEFAULT_ALGORITHMS",
    "Issuer",
    "each_issuer",
    "issuer_of",
    "issuers",
]

CODE = "ISSUER_INVALID"
KEYS = ("id", "issuer", "audience", "scopes")
OPTIONAL = ("jwksUri", "jwksFile", "algorithms", "claims", "leewaySeconds", "objectives")
DEFAULT_ALGORITHMS = ("RS256", "ES256")
DEFAULT_LEEWAY_S = 60
MAX_LEEWAY_S = 300
MAX_CLAIMS = 16
MAX_TEXT = 2048
SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,256}")
"""A scope value of a token (RFC 6749 ``scope-token``): no space, quote or backslash."""
CLAIM_NAME = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")
_URL_FORBIDDEN = re.compile(r"[\x00-\x20\x7f\\]")


@dataclass(frozen=True, slots=True)
class Issuer:
    """One identity provider: the ``iss`` its tokens carry, where its keys are, what the tokens
    must be for (``audience``) and what their scopes and claims become."""

    id: str
    issuer: str
    audience: str
    algorithms: tuple[str, ...]
    scopes: Mapping[str, str]
    """Token scope value -> seif scope (never ``tools.approve``)."""
    claims: tuple[str, ...] = ()
    leeway_s: int = DEFAULT_LEEWAY_S
    jwks_uri: str | None = None
    jwks_file: Path | None = None
    file_keys: tuple[PublicKey, ...] = field(default=(), repr=False)
    """The keys of ``jwks_file``, read at load."""
    objectives: tuple[str, ...] | None = None
    """The objectives its tokens may resolve (None: all)."""

    def granting(self, scope: str) -> tuple[str, ...]:
        """The token scope values this issuer maps to ``scope``, sorted."""
        return tuple(sorted(k for k, v in self.scopes.items() if v == scope))


def issuers(
    value: Any,
    check: Check,
    folder: Path,
    seif_scopes: Iterable[str],
    taken: Iterable[str],
    objectives: Collection[str] | None = None,
) -> tuple[Issuer, ...]:
    """The ``issuers`` array; every problem is reported as ``ISSUER_INVALID`` (``taken``: the
    credential ids, which an issuer id may not repeat; ``objectives``: the build's objective
    ids, when known, which an issuer's ``objectives`` must name)."""
    scopes = frozenset(seif_scopes)

    def one(item: Any, pointer: str) -> Issuer | None:
        entry = check.object(item, pointer, KEYS, OPTIONAL)
        if entry is None:
            return None
        return issuer_of(entry, pointer, check, folder, scopes, objectives=objectives)

    return each_issuer(value, check, taken, one, lambda found: found)


T = TypeVar("T")


def each_issuer(
    value: Any,
    check: Check,
    taken: Iterable[str],
    parse: Callable[[Any, str], T | None],
    issuer: Callable[[T], Issuer],
) -> tuple[T, ...]:
    """Each entry of an ``issuers`` array parsed by ``parse`` (``issuer``: the
    :class:`Issuer` of what it gives), their ids distinct from each other and from ``taken``,
    each ``issuer`` value listed once; every problem found under ``/issuers`` is
    ``ISSUER_INVALID`` (its message still says what is wrong)."""
    before = len(check.problems)
    found: list[T] = []
    entries = check.array(value, "/issuers", CODE, "list an issuer, or remove `issuers`")
    names = set(taken)
    for i, item in enumerate(entries):
        pointer = f"/issuers/{i}"
        parsed = parse(item, pointer)
        if parsed is None:
            continue
        one = issuer(parsed)
        if one.id in names:
            check.error(CODE, join(pointer, "id"), f"id `{one.id}` is used twice")
        if any(issuer(other).issuer == one.issuer for other in found):
            message = f"another issuer has the `issuer` {show(one.issuer)}; list it once"
            check.error(CODE, join(pointer, "issuer"), message)
        names.add(one.id)
        found.append(parsed)
    check.problems[before:] = [replace(d, code=CODE) for d in check.problems[before:]]
    return tuple(found)


def issuer_of(
    item: Mapping[str, Any],
    pointer: str,
    check: Check,
    folder: Path,
    seif_scopes: frozenset[str] | None,
    *,
    claims: tuple[str, ...] | None = None,
    objectives: Collection[str] | None = None,
) -> Issuer | None:
    """The :class:`Issuer` of one entry whose keys the caller checked: with ``seif_scopes``,
    its ``scopes`` (required) map to them; without (an approvers' issuer), it has none.
    ``claims``, when given, are the claims read instead of the entry's ``claims``."""
    before = len(check.problems)
    ident = check.identifier(item["id"], join(pointer, "id"), CODE) if "id" in item else None
    issuer = _text(item, "issuer", pointer, check)
    audience = _text(item, "audience", pointer, check)
    algorithms = _algorithms(item, pointer, check)
    scopes: dict[str, str] | None = {}
    if seif_scopes is not None:
        scopes = (
            _scopes(item["scopes"], join(pointer, "scopes"), check, seif_scopes)
            if "scopes" in item
            else None
        )
    kept = _claims(item, pointer, check) if claims is None else claims
    leeway: int | None = DEFAULT_LEEWAY_S
    if "leewaySeconds" in item:
        leeway = check.integer(
            item["leewaySeconds"], join(pointer, "leewaySeconds"), 0, MAX_LEEWAY_S
        )
    uri, file, keys = _key_source(item, pointer, check, folder)
    allowed = None
    if "objectives" in item:
        at = join(pointer, "objectives")
        allowed = check.id_list(item["objectives"], at, "an objective", objectives)
    if len(check.problems) > before or not (ident and issuer and audience):
        return None  # a missing key is the caller's problem (reported with the object)
    assert scopes is not None and leeway is not None
    return Issuer(
        id=ident,
        issuer=issuer,
        audience=audience,
        algorithms=algorithms,
        scopes=MappingProxyType(scopes),
        claims=kept,
        leeway_s=leeway,
        jwks_uri=uri,
        jwks_file=file,
        file_keys=keys,
        objectives=allowed,
    )


def _text(item: Mapping[str, Any], key: str, pointer: str, check: Check) -> str | None:
    if key not in item:
        return None
    at = join(pointer, key)
    text = check.string(item[key], at)
    if text is not None and not 0 < len(text) <= MAX_TEXT:
        check.error(CODE, at, f"`{key}` must be 1 to {MAX_TEXT} characters")
        return None
    return text


def _algorithms(item: Mapping[str, Any], pointer: str, check: Check) -> tuple[str, ...]:
    if "algorithms" not in item:
        return DEFAULT_ALGORITHMS
    at = join(pointer, "algorithms")
    found: list[str] = []
    allowed = ", ".join(f"`{a}`" for a in ALGORITHMS)
    for i, entry in enumerate(check.array(item["algorithms"], at, CODE, "allow an algorithm")):
        where = join(at, i)
        alg = check.string(entry, where)
        if alg is None:
            continue
        if alg.lower() == "none" or alg.upper().startswith("HS"):
            message = (
                f"{show(alg)} is refused: tokens are verified with public keys only; use {allowed}"
            )
            check.error(CODE, where, message)
        elif alg not in ALGORITHMS:
            check.error(CODE, where, f"unknown algorithm {show(alg)}; use {allowed}")
        elif alg in found:
            check.error(CODE, where, f"algorithm `{alg}` is listed twice")
        else:
            found.append(alg)
    return tuple(found)


def _scopes(
    value: Any, pointer: str, check: Check, seif_scopes: frozenset[str]
) -> dict[str, str] | None:
    mapping = check.object(value, pointer, (), None)
    if mapping is None:
        return None
    if not mapping:
        check.error(CODE, pointer, "map a token scope to a seif scope")
    found: dict[str, str] = {}
    allowed = ", ".join(f"`{s}`" for s in sorted(seif_scopes))
    for token_scope, target in mapping.items():
        at = join(pointer, token_scope)
        if not SCOPE_TOKEN.fullmatch(token_scope):
            message = (
                f"{show(token_scope)} is not a scope value (1 to 256 printable characters, "
                "no space, quote or backslash)"
            )
            check.error(CODE, at, message)
        scope = check.string(target, at)
        if scope == "tools.approve":
            message = "a token can never grant `tools.approve`: applications never approve"
            check.error(CODE, at, message)
        elif scope is not None and scope not in seif_scopes:
            check.error(CODE, at, f"unknown scope {show(scope)}; use {allowed}")
        elif scope is not None:
            found[token_scope] = scope
    return found


def _claims(item: Mapping[str, Any], pointer: str, check: Check) -> tuple[str, ...]:
    if "claims" not in item:
        return ()
    at = join(pointer, "claims")
    value = item["claims"]
    if not isinstance(value, list):
        check.error(CODE, at, f"expected an array of claim names, found {json_type(value)}")
        return ()
    if len(value) > MAX_CLAIMS:
        check.error(CODE, at, f"at most {MAX_CLAIMS} claims may become policy inputs")
    found: list[str] = []
    for i, entry in enumerate(value):
        where = join(at, i)
        name = check.string(entry, where)
        if name is None:
            continue
        if not CLAIM_NAME.fullmatch(name):
            check.error(
                CODE, where, f"{show(name)} is not a claim name (`^[A-Za-z0-9_.:/-]{{1,64}}$`)"
            )
        elif name in found:
            check.error(CODE, where, f"claim `{name}` is listed twice")
        else:
            found.append(name)
    return tuple(found)


def _key_source(
    item: Mapping[str, Any], pointer: str, check: Check, folder: Path
) -> tuple[str | None, Path | None, tuple[PublicKey, ...]]:
    """``jwksUri`` or ``jwksFile`` (exactly one), and the keys of the file."""
    if ("jwksUri" in item) == ("jwksFile" in item):
        check.error(CODE, pointer, "give exactly one of `jwksUri` and `jwksFile`")
        return None, None, ()
    if "jwksUri" in item:
        at = join(pointer, "jwksUri")
        uri = check.string(item["jwksUri"], at)
        if uri is not None:
            problem = _uri_problem(uri)
            if problem is not None:
                check.error(CODE, at, problem)
        return uri, None, ()
    at = join(pointer, "jwksFile")
    text = check.string(item["jwksFile"], at)
    if text is None:
        return None, None, ()
    path = folder / text
    try:
        document = loads(read_regular(path, MAX_JWKS_BYTES))
        keys = public_keys(document)
    except OSError as exc:
        check.error(CODE, at, f"the key set cannot be read: {exc.strerror or type(exc).__name__}")
        return None, None, ()
    except (JsonError, ValueError) as exc:
        message = str(exc) if not isinstance(exc, JsonError) else "not strict JSON"
        check.error(CODE, at, f"the file is not a key set ({message})")
        return None, None, ()
    if keys.skipped:
        check.error(CODE, at, f"the key set has an unusable entry: {keys.skipped[0]}")
    elif not keys.keys:
        check.error(CODE, at, "the key set holds no key")
    return None, path, keys.keys


def _uri_problem(uri: str) -> str | None:
    """What is wrong with a ``jwksUri`` (messages never quote it)."""
    if len(uri) > MAX_ENDPOINT_LENGTH or _URL_FORBIDDEN.search(uri):
        return f"use a url of at most {MAX_ENDPOINT_LENGTH} characters without spaces or controls"
    try:
        parts = urlsplit(uri)
        host, _ = parts.hostname, parts.port
    except ValueError:
        return "not a valid url"
    if parts.scheme not in ("http", "https") or not host:
        return "use an absolute `https://` url"
    if "@" in parts.netloc or "#" in uri:
        return "remove the user name, password or fragment"
    if parts.scheme == "http" and not is_loopback(host):
        return "plain `http://` is only for loopback hosts; use `https://`"
    return None
