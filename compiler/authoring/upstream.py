"""``seif tool import``: an upstream MCP server's tools as tool contracts (docs/upstream-mcp.md).

Pure: the listing comes in (``servers.upstream.listing`` reads it) and an :class:`Import` comes
out, holding one :class:`~compiler.authoring.source.Edit` of the project file (written only when
it validates, the rest of the file byte for byte) and what was imported, refused and changed.

- ids and names: ``PREFIX-NAME`` lowercased with characters outside the id pattern turned into
  ``-``; ``PREFIX_NAME`` with characters outside the function-name pattern turned into ``_``.
- ``version``: the upstream's ``serverInfo.version`` when it is a semantic version, else
  ``1.0.0``; ``--update`` bumps the patch of the contract's current version.
- ``effect``: ``read`` when the annotations say ``readOnlyHint: true``, else ``write``.
- schemas: :func:`compiler.authoring.upstream_schema.narrow`.
- ``upstream``: the pin, with :func:`descriptor_digest`.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from compiler.authoring.edits import add_element, replace_element
from compiler.authoring.source import (
    AuthoringError,
    Edit,
    ProjectSource,
    checked,
    refusal,
    source_from_text,
)
from compiler.authoring.upstream_schema import narrow
from policy.constraints import ID_PATTERN, NAME_PATTERN, SEMVER_PATTERN
from policy.json.canonical import canonical_json_bytes

MAX_TOOLS = 32
DESCRIPTOR_MEMBERS = ("name", "description", "inputSchema", "outputSchema", "annotations")
SCHEMA_UNSUPPORTED = "UPSTREAM_SCHEMA_UNSUPPORTED"
_POLICY_KEPT = ("approval", "maxCalls", "timeoutMs")
"""What an ``--update`` keeps of the contract it replaces, when the effect stays the same."""


def descriptor_digest(tool: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of the RFC 8785 JSON of the tool's descriptor members as sent (an
    absent member is ``null``)."""
    descriptor = {member: tool.get(member) for member in DESCRIPTOR_MEMBERS}
    return "sha256:" + hashlib.sha256(canonical_json_bytes(descriptor)).hexdigest()


def tool_id(prefix: str, name: str) -> str:
    return re.sub(r"[^a-z0-9-]", "-", f"{prefix}-{name}".lower())


def function_name(prefix: str, name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"{prefix}_{name}")


def first_version(server_version: str) -> str:
    return server_version if SEMVER_PATTERN.fullmatch(server_version) else "1.0.0"


def bump_patch(version: str) -> str:
    """``1.2.3`` -> ``1.2.4`` (a pre-release or build suffix is dropped: ``1.2.3-rc.1`` ->
    ``1.2.4``)."""
    found = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    if found is None:
        return "1.0.0"
    major, minor, patch = found.groups()
    return f"{major}.{minor}.{int(patch) + 1}"


def effect_of(tool: Mapping[str, Any]) -> str:
    annotations = tool.get("annotations")
    hint = annotations.get("readOnlyHint") if isinstance(annotations, Mapping) else None
    return "read" if hint is True else "write"


@dataclass(frozen=True)
class Server:
    """The upstream's identity as it told it: ``serverInfo`` and the negotiated revision."""

    name: str
    version: str
    protocol_version: str

    def to_json(self) -> dict[str, str]:
        return {
            "name": self.name,
            "version": self.version,
            "protocolVersion": self.protocol_version,
        }


@dataclass(frozen=True)
class Imported:
    """One contract written (or unchanged, ``diff`` None on an ``--update`` that changed
    nothing): its declaration and what its schemas lost."""

    upstream_name: str
    declaration: dict[str, Any]
    dropped: list[str]
    narrowed: list[str]
    replaces: int | None = None
    """The index in ``tools`` of the contract an ``--update`` replaces."""
    diff: str | None = None
    unchanged: bool = False

    def to_json(self) -> dict[str, Any]:
        d = self.declaration
        return {
            "id": d["id"],
            "name": d["name"],
            "effect": d["effect"],
            "descriptorDigest": d["upstream"]["descriptorDigest"],
            "dropped": self.dropped,
            "narrowed": self.narrowed,
        }


@dataclass(frozen=True)
class Refused:
    tool: str
    code: str
    pointer: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {
            "tool": self.tool,
            "code": self.code,
            "pointer": self.pointer,
            "message": self.message,
        }


@dataclass
class Import:
    """The result of one import: the edit (``edit.ok`` False: nothing may be written)."""

    server: Server
    edit: Edit
    imported: list[Imported] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "server": self.server.to_json(),
            "tools": [i.to_json() for i in self.imported],
            "refused": [r.to_json() for r in self.refused],
        }


@dataclass(frozen=True)
class Options:
    """The command line: ``server`` the upstream's id, ``tools`` the upstream names selected
    (empty: all, or with ``update`` those already imported), ``effects`` upstream name ->
    ``read``/``write``."""

    server: str
    prefix: str | None = None
    tools: Sequence[str] = ()
    effects: Mapping[str, str] = field(default_factory=dict)
    update: bool = False


def import_tools(
    source: ProjectSource, server: Server, listing: Sequence[Mapping[str, Any]], options: Options
) -> Import:
    """Splice a contract per selected tool of ``listing`` into ``source``; raises
    :class:`AuthoringError` for a command line that must change (:data:`USAGE_CODES`)."""
    prefix = options.prefix if options.prefix is not None else options.server
    tools = source.document.get("tools")
    existing: list[Any] = tools if isinstance(tools, list) else []
    pinned = _pinned_names(existing, options.server)
    selected = _select(listing, options, pinned)
    result = Import(server, Edit(source, source.text))
    taken_ids: set[str] = set()
    for tool in selected:
        name = str(tool.get("name"))
        try:
            item = _contract(tool, server, prefix, options, existing, taken_ids)
        except _Refusal as exc:
            result.refused.extend(Refused(name, code, p, m) for code, p, m in exc.problems)
            continue
        taken_ids.add(item.declaration["id"])
        result.imported.append(item)
    edit = _splice(source, result.imported)
    if options.update and not options.tools:
        edit = replace(edit, notes=edit.notes + _update_notes(listing, pinned))
    result.edit = edit
    return result


def _pinned_names(existing: Sequence[Any], server: str) -> list[str]:
    """The upstream tool names the project's contracts are pinned to on ``server``."""
    names = []
    for contract in existing:
        pin = contract.get("upstream") if isinstance(contract, Mapping) else None
        if isinstance(pin, Mapping) and pin.get("server") == server:
            names.append(str(pin.get("tool")))
    return names


def _update_notes(listing: Sequence[Mapping[str, Any]], pinned: Sequence[str]) -> tuple[str, ...]:
    """What an ``--update`` of every imported tool leaves alone: tools the upstream lists that
    were never imported, and imported tools it no longer lists."""
    listed = [str(t.get("name")) for t in listing]
    new = [name for name in listed if name not in pinned]
    gone = [name for name in pinned if name not in listed]
    notes = []
    if new:
        notes.append(f"not imported, new upstream: {', '.join(new)} (import one with --tool NAME)")
    if gone:
        notes.append(f"no longer listed upstream: {', '.join(gone)} (its tool is UNAVAILABLE)")
    return tuple(notes)


def _select(
    listing: Sequence[Mapping[str, Any]], options: Options, pinned: Sequence[str]
) -> list[Mapping[str, Any]]:
    """The upstream tools to import: those named with ``--tool``; without, on ``--update``,
    those already imported (``pinned``), else all."""
    if not ID_PATTERN.fullmatch(options.server):
        raise refusal(
            "INVALID_ID", f"--server `{options.server}` is not an id: `^[a-z][a-z0-9-]{{0,63}}$`"
        )
    if options.prefix is not None and not ID_PATTERN.fullmatch(options.prefix):
        raise refusal(
            "INVALID_ID", f"--prefix `{options.prefix}` is not an id: `^[a-z][a-z0-9-]{{0,63}}$`"
        )
    by_name = {str(t.get("name")): t for t in listing}
    known = ", ".join(by_name) or "none"
    for flag, names in (("--tool", options.tools), ("--effect", options.effects)):
        for name in names:
            if name not in by_name:
                raise refusal(
                    "UNKNOWN_TOOL",
                    f"{flag} `{name}`: the upstream lists no such tool (it lists: {known})",
                )
    for name, effect in options.effects.items():
        if effect not in ("read", "write"):
            raise refusal("INVALID_VALUE", f"--effect {name}=`{effect}`: write `read` or `write`")
    if options.tools:
        chosen = [by_name[n] for n in dict.fromkeys(options.tools)]
    elif options.update:
        chosen = [t for t in listing if str(t.get("name")) in pinned]
    else:
        chosen = list(listing)
    if len(chosen) > MAX_TOOLS:
        raise refusal(
            "CATALOGUE_TOO_MANY_TOOLS",
            f"the upstream lists {len(chosen)} tools, more than a project's {MAX_TOOLS}: "
            "choose the ones to import with --tool NAME (repeatable)",
        )
    return chosen


class _Refusal(Exception):
    def __init__(self, *problems: tuple[str, str, str]) -> None:
        super().__init__(problems)
        self.problems = problems


def _contract(
    tool: Mapping[str, Any],
    server: Server,
    prefix: str,
    options: Options,
    existing: list[Any],
    taken: set[str],
) -> Imported:
    name = str(tool.get("name"))
    description = tool.get("description")
    if not isinstance(description, str) or not 1 <= len(description) <= 1024:
        size = len(description) if isinstance(description, str) else 0
        message = (
            f"the upstream description has {size} characters; a contract's has 1..1024: "
            "write one by hand and re-import with --update"
        )
        raise _Refusal(("OUT_OF_RANGE", "/description", message))
    parameters = narrow(tool.get("inputSchema"), "/inputSchema", parameters=True)
    result = None
    if tool.get("outputSchema") is not None:
        result = narrow(tool.get("outputSchema"), "/outputSchema", parameters=False)
    problems = [*parameters.refused, *(result.refused if result is not None else [])]
    if problems:
        raise _Refusal(*((SCHEMA_UNSUPPORTED, p, m) for p, m in problems))
    effect = options.effects.get(name) or effect_of(tool)
    ident, fname = tool_id(prefix, name), function_name(prefix, name)
    index, current = _current(existing, ident, options, name)
    if current is not None:
        ident, fname = current["id"], current["name"]
        if name not in options.effects and current.get("effect") == "write":
            effect = "write"  # an update never loosens a reviewed effect on its own
    _check_names(ident, fname, existing, index, taken)
    declaration: dict[str, Any] = {
        "id": ident,
        "name": fname,
        "version": first_version(server.version) if current is None else current.get("version"),
        "description": description,
        "parameters": parameters.schema,
        **({} if result is None else {"result": result.schema}),
        "effect": effect,
        "upstream": {
            "server": options.server,
            "tool": name,
            "descriptorDigest": descriptor_digest(tool),
        },
    }
    dropped = parameters.dropped + (result.dropped if result else [])
    narrowed = parameters.narrowed + (result.narrowed if result else [])
    if current is None:
        return Imported(name, declaration, dropped, narrowed)
    if current.get("effect") == effect:
        declaration |= {k: current[k] for k in _POLICY_KEPT if k in current}
    if declaration == current:
        return Imported(name, declaration, dropped, narrowed, index, None, unchanged=True)
    declaration["version"] = bump_patch(str(current.get("version")))
    return Imported(name, declaration, dropped, narrowed, index, review_diff(current, declaration))


def _current(
    existing: list[Any], ident: str, options: Options, name: str
) -> tuple[int | None, dict[str, Any] | None]:
    """The contract an ``--update`` replaces: the one pinned to this upstream tool, else the
    one with its id; ``DUPLICATE_ID`` for an id taken without ``--update``."""
    pinned = next(
        ((i, t) for i, t in enumerate(existing) if _pinned_to(t, options.server, name)), None
    )
    same_id = next(
        ((i, t) for i, t in enumerate(existing) if isinstance(t, dict) and t.get("id") == ident),
        None,
    )
    found: tuple[int, Any] | None = pinned or same_id
    if found is None:
        return None, None
    if not options.update:
        message = (
            f"`{found[1].get('id')}` is already a tool of this project: re-import it with --update"
        )
        raise _Refusal(("DUPLICATE_ID", f"/tools/{found[0]}", message))
    if pinned is None:
        message = (
            f"`{ident}` is a tool of this project not imported from `{options.server}` "
            f"`{name}`: choose another --prefix"
        )
        raise _Refusal(("DUPLICATE_ID", f"/tools/{found[0]}", message))
    return pinned


def _pinned_to(tool: Any, server: str, name: str) -> bool:
    pin = tool.get("upstream") if isinstance(tool, dict) else None
    return isinstance(pin, dict) and pin.get("server") == server and pin.get("tool") == name


def _check_names(
    ident: str, fname: str, existing: list[Any], index: int | None, taken: set[str]
) -> None:
    if not ID_PATTERN.fullmatch(ident):
        raise _Refusal(("INVALID_ID", "/name", f"`{ident}` is not an id: shorten it with --prefix"))
    if not NAME_PATTERN.fullmatch(fname):
        raise _Refusal(
            ("INVALID_NAME", "/name", f"`{fname}` is not a function name: shorten it with --prefix")
        )
    if ident in taken:
        raise _Refusal(
            ("DUPLICATE_ID", "/name", f"`{ident}` is the id of another tool of this import")
        )
    for i, other in enumerate(existing):
        if i != index and isinstance(other, dict) and other.get("name") == fname:
            message = (
                f"`{fname}` is the name of the tool `{other.get('id')}`: choose another --prefix"
            )
            raise _Refusal(("DUPLICATE_NAME", f"/tools/{i}", message))


def review_diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """What an ``--update`` changes in a contract, as a unified diff of its reviewable parts
    (the upstream's former descriptor is not kept, only its digest: the diff is between the
    contract in the project and the contract re-imported)."""
    old, new = _review_lines(before), _review_lines(after)
    head = (
        f"{before.get('id')} {before.get('version')}",
        f"{after.get('id')} {after.get('version')}",
    )
    return "".join(difflib.unified_diff(old, new, head[0], head[1], n=2))


def _review_lines(contract: Mapping[str, Any]) -> list[str]:
    lines = [f"description: {contract.get('description')}\n", f"effect: {contract.get('effect')}\n"]
    for key in ("parameters", "result"):
        if key in contract:
            text = json.dumps(contract[key], indent=2, ensure_ascii=False, sort_keys=True)
            lines += [f"{key}:\n"] + [f"  {line}\n" for line in text.splitlines()]
    pin = contract.get("upstream")
    if isinstance(pin, Mapping):
        lines.append(
            f"upstream: {pin.get('server')} {pin.get('tool')} {pin.get('descriptorDigest')}\n"
        )
    return lines


def _splice(source: ProjectSource, imported: list[Imported]) -> Edit:
    """One edit adding or replacing every changed contract (each splice in the file's own
    style), checked as a whole: nothing may be written unless the result validates."""
    current = source
    notes = []
    for item in imported:
        if item.unchanged:
            notes.append(f"`{item.declaration['id']}`: unchanged upstream")
            continue
        if item.replaces is None:
            text = add_element(current, "tools", item.declaration)
            notes.append(
                f"added tool `{item.declaration['id']}` ({item.upstream_name}), included nowhere"
            )
        else:
            text = replace_element(current, "tools", item.replaces, item.declaration)
            notes.append(
                f"updated tool `{item.declaration['id']}` to {item.declaration['version']}"
            )
        try:
            current = source_from_text(source.path, text)
        except AuthoringError as exc:
            return Edit(source, source.text, tuple(exc.diagnostics), tuple(notes))
    return checked(source, current.text, tuple(notes))
