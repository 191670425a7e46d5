"""Upstream MCP servers as the bindings file names them (``upstreams``), and the bindings of
tools to them (``../shared/spec/upstream-mcp.md``, "Binding a tool to an upstream").

These are the values the bindings loader produces and the upstream executors
(``servers.upstream``) consume: secrets are already read through their references (never shown
in a repr), commands already resolved to an absolute path, and every check of the spec done.
The checks are here too (:func:`upstream_drafts`, :func:`upstream_binding`,
:func:`bound_upstreams`); ``servers.config.files.load_bindings`` calls them. An upstream no
tool is bound to is checked, but its secrets are not read and it is left out of the result (the
runtime does not start it).
"""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from policy import ir
from policy.diagnostic import did_you_mean
from policy.json.pointer import join
from servers.config.check import ID, Check, ids, show
from servers.config.endpoints import ca_trust, endpoint_problems, limits
from servers.config.tls import TrustStores

__all__ = [
    "HttpUpstream",
    "StdioUpstream",
    "Upstream",
    "UpstreamBinding",
    "bound_upstreams",
    "upstream_binding",
    "upstream_drafts",
]

STDIO_KEYS = ("command", "env", "cwd")
HTTP_KEYS = ("url", "secretRef", "caFile")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_ID_RULE = "`^[a-z][a-z0-9-]{0,63}$`"


@dataclass(frozen=True, slots=True)
class StdioUpstream:
    """An upstream started as a process (one per upstream, shared by its tools), never through
    a shell."""

    server: str
    """The upstream's id in ``upstreams`` (and in its tools' contracts' ``upstream.server``)."""
    command: tuple[str, ...]
    """The program, resolved to an absolute path at start, then its arguments."""
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), repr=False)
    """The variables its ``env`` names, each with the secret its reference gave: the process
    gets only these, ``LANG``, ``TMPDIR`` and the official SDK stdio client's defaults."""
    cwd: Path | None = None


@dataclass(frozen=True, slots=True)
class HttpUpstream:
    """An upstream reached over Streamable HTTP (``https://`` unless loopback; redirects are
    never followed)."""

    server: str
    url: str
    secret: str | None = field(default=None, repr=False)
    """The bearer token its ``secretRef`` gave, if any."""
    ca_file: Path | None = None
    tls: ssl.SSLContext | None = field(default=None, repr=False, compare=False)
    """The trust its ``caFile`` gives (None: the system's), as for executor endpoints."""


Upstream = StdioUpstream | HttpUpstream


@dataclass(frozen=True, slots=True)
class UpstreamBinding:
    """A tool bound to an upstream (its binding names ``upstream``, never ``endpoint``); its
    contract carries ``upstream`` with the same server id."""

    tool: str
    upstream: str
    """The id of the upstream in ``Bindings.upstreams``."""
    timeout_ms: int
    max_bytes: int


Reference = tuple[str, str, str]
"""A secret reference checked but not read yet: its kind, its name, and where the file has it."""


@dataclass(frozen=True, slots=True)
class Draft:
    """An upstream of the file, checked, its secrets not read yet (only a bound one's are)."""

    server: str
    command: tuple[str, ...] | None = None
    env: Mapping[str, Reference] = field(default_factory=dict)
    cwd: Path | None = None
    url: str | None = None
    secret: Reference | None = None
    ca_file: Path | None = None
    tls: ssl.SSLContext | None = field(default=None, repr=False, compare=False)

    def read(self, check: Check) -> Upstream | None:
        """The upstream with its secrets read; None when one is missing (a problem)."""
        if self.command is None:
            secret = None if self.secret is None else check.read(*self.secret)
            if self.secret is not None and secret is None:
                return None
            assert self.url is not None  # a draft has a command or a url
            return HttpUpstream(self.server, self.url, secret, self.ca_file, self.tls)
        env = {name: check.read(*reference) for name, reference in self.env.items()}
        values = {name: value for name, value in env.items() if value is not None}
        if len(values) < len(env):
            return None
        return StdioUpstream(self.server, self.command, MappingProxyType(values), self.cwd)


def upstream_drafts(
    value: Any, check: Check, folder: Path, trust: TrustStores
) -> dict[str, Draft | None] | None:
    """Every entry of ``upstreams`` by id, checked (None for one with a problem), or None when
    it is not an object; no secret is read. ``folder``: the bindings file's, where a relative
    ``cwd`` or ``caFile`` starts."""
    found: dict[str, Draft | None] = {}
    if check.object(value, "/upstreams", (), None) is None:
        return None
    for server, entry in value.items():
        pointer = join("/upstreams", server)
        before = len(check.problems)
        if not ID.fullmatch(server):
            check.error("INVALID_ID", pointer, f"{show(server)} does not match {_ID_RULE}")
        draft = _draft(server, entry, pointer, check, folder, trust)
        found[server] = draft if len(check.problems) == before else None
    return found


def _draft(
    server: str, entry: Any, pointer: str, check: Check, folder: Path, trust: TrustStores
) -> Draft | None:
    if check.object(entry, pointer, (), None) is None:
        return None
    stdio = "command" in entry
    keys, kind = (STDIO_KEYS, "a process") if stdio else (HTTP_KEYS, "an HTTP")
    for key in entry:
        at = join(pointer, key)
        if stdio and key == "url":
            message = "an upstream has `command` (a process) or `url` (HTTP), not both"
            check.error("BINDING_TARGET_INVALID", at, message)
        elif key not in keys:
            use = ", ".join(f"`{k}`" for k in keys)
            check.error("UNKNOWN_KEY", at, f"unknown key {show(key)}; {kind} upstream has {use}")
    if stdio:
        return _stdio(server, entry, pointer, check, folder)
    if "url" not in entry:
        check.error("MISSING_KEY", pointer, "missing key `command` (a process) or `url` (HTTP)")
        return None
    at = join(pointer, "url")
    url = check.string(entry["url"], at)
    for code, message in endpoint_problems(url or "", needs_secret=False) if url else ():
        check.error(code, at, message)
    secret = _reference(entry, "secretRef", pointer, check)
    ca_file, tls = ca_trust(entry, pointer, url, trust, check)
    return None if url is None else Draft(server, url=url, secret=secret, ca_file=ca_file, tls=tls)


def _reference(item: Any, key: str, pointer: str, check: Check) -> Reference | None:
    if key not in item:
        return None
    at = join(pointer, key)
    found = check.reference(item[key], at, tool=True)
    return None if found is None else (*found, at)


def _stdio(server: str, entry: Any, pointer: str, check: Check, folder: Path) -> Draft | None:
    command = _command(entry["command"], join(pointer, "command"), check)
    env: dict[str, Reference] = {}
    at = join(pointer, "env")
    if "env" in entry and check.object(entry["env"], at, (), None) is not None:
        for name in entry["env"]:
            if not _ENV_NAME.fullmatch(name):
                rule = "`^[A-Za-z_][A-Za-z0-9_]{0,127}$`"
                check.error("ENV_NAME_INVALID", join(at, name), f"{show(name)} is not {rule}")
            elif (reference := _reference(entry["env"], name, at, check)) is not None:
                env[name] = reference
    cwd = _cwd(entry["cwd"], join(pointer, "cwd"), check, folder) if "cwd" in entry else None
    if command is None:
        return None
    return Draft(server, command=command, env=env, cwd=cwd)


def _command(value: Any, pointer: str, check: Check) -> tuple[str, ...] | None:
    """The command with its program resolved to an absolute path; arguments are never quoted
    in a message (they may name something private)."""
    value = check.array(value, pointer, "COMMAND_INVALID", "give the program, then its arguments")
    if not value:
        return None
    words = [check.string(word, join(pointer, i)) for i, word in enumerate(value)]
    for i, word in enumerate(words):
        if word is not None and (not word or "\0" in word):
            check.error("COMMAND_INVALID", join(pointer, i), "an empty word or a NUL character")
    program = words[0]
    if program is None or not program or "\0" in program or None in words:
        return None
    resolved = _program(program, join(pointer, 0), check)
    return None if resolved is None else (resolved, *(w for w in words[1:] if w is not None))


def _program(program: str, pointer: str, check: Check) -> str | None:
    """An absolute path to an executable file, or a bare name found in the absolute folders of
    ``PATH`` (the one variable read for it); never a relative path."""
    if os.path.isabs(program):
        candidates = [program]
    elif "/" in program:
        message = f"{show(program)} is a relative path; use an absolute one or a name on `PATH`"
        check.error("COMMAND_INVALID", pointer, message)
        return None
    else:
        folders = (check.variable("PATH") or os.defpath).split(os.pathsep)
        candidates = [os.path.join(f, program) for f in folders if os.path.isabs(f)]
    for candidate in candidates:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    where = "is not an executable file" if os.path.isabs(program) else "is not found on `PATH`"
    check.error("COMMAND_NOT_FOUND", pointer, f"{show(program)} {where}")
    return None


def _cwd(value: Any, pointer: str, check: Check, folder: Path) -> Path | None:
    text = check.string(value, pointer)
    if text is None:
        return None
    try:
        path = (folder / text).resolve() if text and "\0" not in text else None
    except (OSError, RuntimeError):  # a symlink loop
        path = None
    if path is None or not path.is_dir():
        check.error("CWD_INVALID", pointer, f"{show(text)} is not an existing directory")
        return None
    return path


def upstream_binding(
    tool_id: str,
    tool: ir.Tool | None,
    item: Mapping[str, Any],
    pointer: str,
    drafts: Mapping[str, Draft | None] | None,
    check: Check,
) -> UpstreamBinding | None:
    """The binding of a tool whose entry names ``upstream``: an id of ``upstreams``, the same
    as the tool contract's ``upstream.server``; ``timeoutMs`` and ``maxBytes`` as for
    endpoints; no ``endpoint``, ``secretRef`` or ``caFile`` (the upstream's own are used).
    ``drafts`` is None when ``upstreams`` is not an object (reported there)."""
    before = len(check.problems)
    if "endpoint" in item:
        message = "a binding has `endpoint` (an executor) or `upstream`, not both"
        check.error("BINDING_TARGET_INVALID", join(pointer, "endpoint"), message)
    for key in ("secretRef", "caFile"):
        if key in item:
            message = f"`{key}` belongs to the upstream in `upstreams`, not to a tool bound to it"
            check.error("UNKNOWN_KEY", join(pointer, key), message)
    at = join(pointer, "upstream")
    server = check.string(item["upstream"], at)
    if server is not None and drafts is not None and server not in drafts:
        known = sorted(drafts)
        hint = did_you_mean(server, known) or f"; `upstreams` has {ids(known, 'no upstream')}"
        check.error("UPSTREAM_UNKNOWN", at, f"{show(server)} is not an id of `upstreams`{hint}")
    pin = tool.upstream if tool is not None else None
    if tool is not None and pin is None:
        message = (
            f"tool `{tool_id}` is not imported from an upstream (its contract has no "
            "`upstream`); bind it to an executor `endpoint`"
        )
        check.error("UPSTREAM_MISMATCH", at, message)
    elif pin is not None and server in (drafts or {}) and pin.server != server:
        message = f"tool `{tool_id}` is pinned to the upstream `{pin.server}`, not `{server}`"
        check.error("UPSTREAM_MISMATCH", at, message)
    timeout, max_bytes = limits(item, pointer, tool, check)
    if len(check.problems) > before or server is None or timeout is None or max_bytes is None:
        return None
    return UpstreamBinding(tool_id, server, timeout, max_bytes)


def bound_upstreams(
    drafts: Mapping[str, Draft | None] | None, tools: Mapping[str, Any], check: Check
) -> dict[str, Upstream]:
    """The upstreams some entry of ``tools`` (the file's, as written) names, their secrets read;
    the others' secrets are never read."""
    named = {e.get("upstream") for e in tools.values() if isinstance(e, dict)}
    found: dict[str, Upstream] = {}
    for server, draft in (drafts or {}).items():
        if draft is not None and server in named and (value := draft.read(check)) is not None:
            found[server] = value
    return found
