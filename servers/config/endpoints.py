"""The URL and the TLS trust of what a bindings file points at: an executor's ``endpoint`` and
an HTTP upstream's ``url`` follow one set of rules (docs/runtime-config.md), and so do their
``caFile``, ``timeoutMs`` and ``maxBytes``.
"""

from __future__ import annotations

import ipaddress
import re
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from policy import ir
from policy.json.pointer import join
from servers.config.check import Check, show
from servers.config.tls import CaFileProblem, TrustStores

DEFAULT_MAX_BYTES = 65536
MAX_BYTES_LIMIT = 1 << 20
TIMEOUT_MIN_MS, TIMEOUT_MAX_MS = 100, 30000
MAX_ENDPOINT_LENGTH = 2048

_URL_FORBIDDEN = re.compile(r"[\x00-\x20\x7f\\]")
_LOOPBACK_V4 = ipaddress.IPv4Network("127.0.0.0/8")
_LOOPBACK_V6 = ipaddress.IPv6Address("::1")


def limits(
    item: Mapping[str, Any], pointer: str, tool: ir.Tool | None, check: Check
) -> tuple[int | None, int | None]:
    """A binding's ``timeoutMs`` (at most the tool's declared one, its default) and
    ``maxBytes``; None for one with a problem."""
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
    return timeout, max_bytes


def ca_trust(
    item: Mapping[str, Any], pointer: str, endpoint: str | None, trust: TrustStores, check: Check
) -> tuple[Path | None, ssl.SSLContext | None]:
    """The ``caFile`` and TLS context of a binding (or an HTTP upstream): the CA file's context
    when it names one, the system trust store's for an ``https://`` URL without one, none for
    ``http://``."""
    kind = scheme(endpoint)
    if "caFile" not in item:
        return None, trust.system() if kind == "https" else None
    at = join(pointer, "caFile")
    text = check.string(item["caFile"], at)
    if text is None:
        return None, None
    if kind == "http":
        message = "a `caFile` is for an `https://` endpoint; remove it or use `https://`"
        check.error("CA_FILE_HTTP_REFUSED", at, message)
        return None, None
    try:
        return trust.ca_file(text)
    except CaFileProblem as problem:
        [refused] = problem.diagnostics
        check.error(refused.code, at, refused.message)
        return None, None


def scheme(endpoint: str | None) -> str | None:
    try:
        return urlsplit(endpoint).scheme if endpoint is not None else None
    except ValueError:  # reported as `ENDPOINT_INVALID`
        return None


def endpoint_problems(text: str, *, needs_secret: bool) -> list[tuple[str, str]]:
    """What is wrong with an endpoint (or an HTTP upstream's ``url``); ``needs_secret``: an
    ``https://`` one without a ``secretRef`` is refused. Messages never quote the URL: it may
    hold a credential."""
    invalid = "ENDPOINT_INVALID"
    if len(text) > MAX_ENDPOINT_LENGTH or _URL_FORBIDDEN.search(text):
        limit = f"at most {MAX_ENDPOINT_LENGTH} characters"
        return [(invalid, f"use a url of {limit} without spaces, controls or backslashes")]
    try:
        parts = urlsplit(text)
        host, _ = parts.hostname, parts.port
    except ValueError:
        return [(invalid, "not a valid url")]
    if parts.scheme not in ("http", "https"):
        if not parts.scheme:
            return [(invalid, "use an absolute `https://` url")]
        return [("ENDPOINT_SCHEME_REFUSED", "use `https://`, or `http://` for a loopback host")]
    if not host:
        return [(invalid, "the url has no host")]
    found: list[tuple[str, str]] = []
    if "@" in parts.netloc:
        message = "remove the user name and password; bind the credential with `secretRef`"
        found.append(("ENDPOINT_USERINFO_REFUSED", message))
    if "?" in text:
        found.append(("ENDPOINT_QUERY_REFUSED", "remove the query"))
    if "#" in text:
        found.append(("ENDPOINT_FRAGMENT_REFUSED", "remove the fragment"))
    if parts.scheme == "http" and not is_loopback(host):
        message = f"plain `http://` is only for loopback hosts, not {show(host)}; use `https://`"
        found.append(("ENDPOINT_HTTP_NOT_LOOPBACK", message))
    if parts.scheme == "https" and needs_secret:
        message = "an `https://` endpoint needs a `secretRef` for its credential"
        found.append(("ENDPOINT_SECRET_REQUIRED", message))
    return found


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ``::1`` or ``localhost``: no name is resolved to decide."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host == "localhost"
    return address in _LOOPBACK_V4 or address == _LOOPBACK_V6
