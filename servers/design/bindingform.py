"""The binding form: one environment's bindings file, a tool's ``endpoint`` and ``secretRef`` at a
time (docs/runtime-config.md, "Bindings"). A tool bound to an upstream MCP server is shown with
its ``upstream``, read only: its upstream is edited in the file.

An edit is checked with the runtime's own loader (:func:`servers.config.files.load_bindings`)
before anything is written, without reading any secret: every ``secretRef`` is taken as set (the
form never looks at an environment variable or the keychain; whether they are set is the
runtime's to check where it runs). Problems of the edited tool's entry, and of the file as a
whole, refuse the edit; other tools' entries, still to be filled in, do not. The file is
written atomically, the rest of its text kept as it was. A saved URL is *configured*: whether
its executor is *ready* is only known to the runtime serving the build.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from compiler.authoring import jsontext
from compiler.authoring.bindings import json_bytes, placeholder_endpoint
from compiler.authoring.release import CONFIGURED_NOT_READY, bindings_problems
from compiler.authoring.source import AuthoringError, compiled, load_source, refusal, rewrite
from compiler.readfile import read_regular, reason
from policy import ir
from policy.diagnostic import Diagnostic
from policy.json.pointer import join
from policy.json.positions import with_positions
from policy.json.strict import JsonError, loads
from servers.config.files import ConfigError, load_bindings
from servers.wire.errors import ErrorCode, Refused

CONFIGURED = "configured"
PLACEHOLDER = "to fill in"
UNBOUND = "not bound"
INVALID = "invalid"
_FILE_KEYS = ("/environment", "/revision", "/traceKeyRef", "/upstreams", "/tools")


class Unresolved(Mapping[str, str]):
    """An environment in which every variable is set, each to a value of its own name: the form
    checks references, never secrets."""

    def __getitem__(self, name: str) -> str:
        return f"unresolved env:{name}"

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def _unresolved_keychain(_service: str, name: str) -> str:
    return f"unresolved keychain:{name}"


def read(path: Path) -> tuple[str, dict[str, Any]]:
    """The bindings file's text and document; refuses one that is not a bindings file."""
    try:
        text = read_regular(path).decode("utf-8")  # exactly: `rewrite` compares it
        document = loads(text)
    except (OSError, UnicodeDecodeError) as exc:
        message = f"`{path}` cannot be read: {reason(exc)}"
        raise refusal("BINDINGS_UNREADABLE", message) from None
    except JsonError as exc:
        raise refusal("BINDINGS_INVALID", f"`{path}` is not strict JSON: {exc}") from None
    problems = bindings_problems(document)
    if problems:
        raise AuthoringError(with_positions(problems, text))
    return text, document


def problems_of(path: Path, text: str, project: ir.Project) -> list[Diagnostic]:
    """What the runtime's loader finds in ``text`` as the bindings file at ``path`` (checked
    from a temporary file beside it, so that a relative ``caFile`` means the same)."""
    try:
        handle, temporary = tempfile.mkstemp(
            prefix=".seif-design-", suffix=".json", dir=path.parent
        )
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise refusal("BINDINGS_UNREADABLE", f"`{path.parent}` cannot be used: {reason}") from None
    try:
        with os.fdopen(handle, "wb") as fh:
            fh.write(text.encode("utf-8"))
        load_bindings(temporary, project, Unresolved(), _unresolved_keychain)
    except ConfigError as exc:
        return exc.diagnostics
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
    return []


def _concerns(problem: Diagnostic, tool_id: str) -> bool:
    entry = join("/tools", tool_id)
    at = problem.pointer or ""
    return at in ("", *_FILE_KEYS) or at == entry or at.startswith(entry + "/")


def form(project: Path, path: Path) -> dict[str, Any]:
    """The form of the bindings file at ``path``: a row per tool of the project."""
    declared = compiled(load_source(project))
    text, document = read(path)
    return _form(declared, path, document, problems_of(path, text, declared))


def _form(
    project: ir.Project, path: Path, document: Mapping[str, Any], problems: list[Diagnostic]
) -> dict[str, Any]:
    entries: Mapping[str, Any] = document.get("tools") or {}
    rows = [_row(tool.id, entries.get(tool.id), problems) for tool in project.tools]
    return {
        "file": str(path),
        "environment": document.get("environment"),
        "revision": document.get("revision"),
        "tools": rows,
        "problems": [p.to_json() for p in problems if (p.pointer or "") in ("", *_FILE_KEYS)],
        "readiness": CONFIGURED_NOT_READY,
    }


def _row(tool_id: str, entry: Any, problems: list[Diagnostic]) -> dict[str, Any]:
    entry_pointer = join("/tools", tool_id)
    own = [
        p
        for p in problems
        if p.pointer is not None
        and (p.pointer == entry_pointer or p.pointer.startswith(entry_pointer + "/"))
    ]
    endpoint = entry.get("endpoint") if isinstance(entry, dict) else None
    upstream = entry.get("upstream") if isinstance(entry, dict) else None
    if entry is None:
        status = UNBOUND
    elif own:
        status = INVALID
    elif endpoint == placeholder_endpoint(tool_id):
        status = PLACEHOLDER
    else:
        status = CONFIGURED
    return {
        "id": tool_id,
        "endpoint": endpoint,
        "secretRef": entry.get("secretRef") if isinstance(entry, dict) else None,
        "upstream": upstream if isinstance(upstream, str) else None,
        "status": status,
        "diagnostics": [p.to_json() for p in own],
    }


def edited_entry(entry: Any, endpoint: str, secret_ref: str | None) -> dict[str, Any]:
    """The tool's binding with its ``endpoint`` and ``secretRef`` set (an empty ``secretRef``
    removes it), every other key kept in place."""
    new = dict(entry) if isinstance(entry, dict) else {}
    new["endpoint"] = endpoint
    if secret_ref:
        new["secretRef"] = secret_ref
    else:
        new.pop("secretRef", None)
    return new


def spliced(text: str, document: dict[str, Any], tool_id: str, entry: dict[str, Any]) -> str:
    """``text`` with the tool's binding replaced (or added), the rest byte for byte; the whole
    document rewritten when the text cannot be edited in place."""
    tools = document["tools"]
    wanted = {**document, "tools": {**tools, tool_id: entry}}
    try:
        if tool_id in tools:
            new = jsontext.replace(text, join("/tools", tool_id), entry)
        else:
            new = jsontext.add_member(text, "/tools", tool_id, entry)
        if loads(new) == wanted:
            return new
    except (KeyError, IndexError, ValueError):
        pass
    return json_bytes(wanted).decode("utf-8")


def save(
    project: Path, path: Path, tool_id: str, endpoint: str, secret_ref: str | None
) -> dict[str, Any]:
    """Set one tool's endpoint and secretRef; written only when the loader accepts it."""
    declared = compiled(load_source(project))
    if declared.tool(tool_id) is None:
        message = f"`{tool_id[:64]}` is not a tool of the project"
        raise refusal("UNKNOWN_TOOL", message, join("/tools", tool_id))
    text, document = read(path)
    if "upstream" in (document["tools"].get(tool_id) or {}):
        message = f"`{tool_id}` is bound to an upstream: edit `upstreams` in the file itself"
        raise refusal("BINDING_UPSTREAM_READ_ONLY", message, join("/tools", tool_id, "upstream"))
    entry = edited_entry(
        document["tools"].get(tool_id), endpoint.strip(), (secret_ref or "").strip()
    )
    new = spliced(text, document, tool_id, entry)
    found = problems_of(path, new, declared)
    blocking = [p for p in found if _concerns(p, tool_id)]
    if blocking:
        message = "the binding is not accepted: nothing was written"
        diagnostics = [p.to_json() for p in blocking]
        raise Refused(ErrorCode.BINDING_INVALID, message, diagnostics=diagnostics)
    rewrite(path, text, new)
    result = _form(declared, path, loads(new), found)
    return {**result, "saved": tool_id}
