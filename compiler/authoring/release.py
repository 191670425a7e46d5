"""``seif release`` and the workstation's "Prepare release & connect": validate, test, build,
register, and write the next revision of an environment's bindings file. Nothing is promoted
and nothing is deployed.

:func:`prepare_release` refuses (:class:`ReleaseError`, an ``AuthoringError``) before anything
is registered or written when the environment name is not an id (``ENVIRONMENT_INVALID``), the
project does not validate (its diagnostics), its tests fail (``TESTS_FAILED``, one diagnostic per
failing assertion, the report attached) or the bindings file is not one for that environment
(``BINDINGS_UNREADABLE``, ``BINDINGS_INVALID``, ``BINDINGS_ENVIRONMENT_MISMATCH``,
``BINDINGS_PATH_REFUSED``). Otherwise it builds into a temporary directory, registers the build
(a digest already registered is re-verified and reported as such) and writes the bindings file
with the revision after the one it held (1 for a new file) and ``contracts.json`` beside it,
each atomically. The registry's promotion history is never read or written.

An endpoint written in the file is *configured*; whether its executor is *ready* (answers
``describe`` with the tool's exact contract) is only known to the runtime serving the build.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from compiler.authoring.bindings import (
    BINDING_KEYS,
    CONTRACTS_FILE,
    EXECUTOR_CONTRACT,
    bindings_template,
    is_placeholder_upstream,
    keeps,
    placeholder_endpoint,
    servers_of,
    write_template,
)
from compiler.authoring.source import AuthoringError, test_failures
from compiler.builds.build import load_build, write_build
from compiler.builds.registry import Registered, Registry, RegistryError
from compiler.diagnostics import Collector, CompileError
from compiler.driver import compile_file
from compiler.passes.parse import parse_json_text
from compiler.readfile import read_regular, reason
from policy.diagnostic import Diagnostic, Location, headline
from policy.engine.testing import TestReport, run_tests
from policy.ir import Project, Tool
from policy.json.pointer import join
from policy.json.positions import with_positions

ENVIRONMENT_ID = re.compile(r"[a-z][a-z0-9-]{0,63}")
MAX_REVISION = (1 << 53) - 1  # servers.config.files.MAX_REVISION
READY_ROUTE = "/v1/ready"
NOTHING_PROMOTED = "nothing was promoted or deployed"
CONFIGURED_NOT_READY = (
    "an endpoint in the bindings file is configured, not ready: the runtime checks each "
    f"executor's describe when it serves the build (GET {READY_ROUTE})"
)
_TOP_KEYS = ("environment", "revision", "traceKeyRef", "upstreams", "tools")
_TYPES: Mapping[str, type] = {
    "endpoint": str,
    "upstream": str,
    "secretRef": str,
    "timeoutMs": int,
    "maxBytes": int,
    "caFile": str,
}
PathLike = str | os.PathLike[str]


class ReleaseError(AuthoringError):
    """A refused release: ``file`` is what the diagnostics locate into, ``source`` its text
    (for a caret under a line:column), ``report`` the test report when tests failed, and
    ``registered`` the digest of the build when it was registered before the bindings file
    could not be written (None: nothing was registered, and nothing written)."""

    def __init__(
        self,
        diagnostics: Sequence[Diagnostic],
        *,
        file: str,
        source: str | None = None,
        report: TestReport | None = None,
        registered: str | None = None,
    ) -> None:
        super().__init__(diagnostics)
        self.file = file
        self.source = source
        self.report = report
        self.registered = registered


def _refuse(
    code: str,
    file: PathLike,
    message: str,
    pointer: str | None = None,
    source: str | None = None,
    *,
    registered: str | None = None,
) -> ReleaseError:
    """A release refused for one problem (``source``: the text ``pointer`` points into)."""
    diagnostic = Diagnostic(
        code=code, message=message, location=Location(pointer=pointer), pass_name="release"
    )
    located = with_positions([diagnostic], source)
    return ReleaseError(located, file=str(file), source=source, registered=registered)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSetup:
    """What to fill in for one tool of the release."""

    id: str
    version: str
    contract_digest: str
    endpoint: str | None  # None for a tool bound to an upstream
    upstream: str | None  # the upstream's id, for a tool imported from one
    placeholder: bool  # the endpoint (or the upstream's command) is the template's: replace it
    kept: bool  # the binding is the previous revision's, as a person filled it in
    secret_ref: str | None
    secret_env: str | None  # the environment variable to set, for an ``env:`` secretRef

    def to_json(self) -> dict[str, Any]:
        if self.upstream is not None:
            served: dict[str, Any] = {"upstream": self.upstream}
        else:
            tool = {"id": self.id, "version": self.version, "contractDigest": self.contract_digest}
            served = {"describe": {"contract": EXECUTOR_CONTRACT, "tool": tool}}
        return {
            "id": self.id,
            "version": self.version,
            "contractDigest": self.contract_digest,
            "endpoint": self.endpoint,
            "placeholder": self.placeholder,
            "kept": self.kept,
            "secretRef": self.secret_ref,
            "secretEnv": self.secret_env,
            **served,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Release:
    """A prepared release: registered and bound, never promoted."""

    digest: str
    registry: Path
    entry: Path  # the registered build directory (``REG/builds/<hex>``), servable as is
    already_registered: bool
    bindings: Path
    contracts: Path
    environment: str
    revision: int
    previous_revision: int | None
    tools: tuple[ToolSetup, ...]
    dropped: tuple[str, ...]  # tools of the previous revision the build no longer declares
    notes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": True,
            "digest": self.digest,
            "registry": str(self.registry),
            "entry": str(self.entry),
            "alreadyRegistered": self.already_registered,
            "bindings": str(self.bindings),
            "contracts": str(self.contracts),
            "environment": self.environment,
            "revision": self.revision,
            "previousRevision": self.previous_revision,
            "tools": [t.to_json() for t in self.tools],
            "dropped": list(self.dropped),
            "notes": list(self.notes),
            "readiness": CONFIGURED_NOT_READY,
            "promoted": False,
            "deployed": False,
        }


def default_bindings_path(project: PathLike, environment: str) -> Path:
    """``bindings.<environment>.json`` beside the project file."""
    return Path(project).parent / f"bindings.{environment}.json"


def check_environment(environment: str) -> None:
    if not ENVIRONMENT_ID.fullmatch(environment):
        shown = environment[:64]
        message = f"`{shown}` is not an environment name; use `^[a-z][a-z0-9-]{{0,63}}$`"
        raise _refuse("ENVIRONMENT_INVALID", "--environment", message)


def checked_project(project: PathLike) -> Project:
    """The project's IR when it validates and its tests pass, else :class:`ReleaseError`."""
    result = compile_file(project)
    if result.project is None:
        raise ReleaseError(result.diagnostics, file=str(project), source=result.source)
    report = run_tests(result.project)
    if not report.passed:
        failures = test_failures(report, pass_name="release")
        raise ReleaseError(failures, file=str(project), source=result.source, report=report)
    return result.project


@dataclass(frozen=True, slots=True)
class Previous:
    """The bindings file as it was: its text (to detect a concurrent change) and document."""

    data: bytes | None
    document: Mapping[str, Any] | None


def read_previous(path: Path, environment: str) -> Previous:
    """The current revision of the bindings file at ``path`` (none when absent)."""
    if not path.exists():
        return Previous(None, None)
    try:
        text = read_regular(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        message = f"`{path}` cannot be read as a bindings file: {reason(exc)}"
        raise _refuse("BINDINGS_UNREADABLE", path, message) from None
    out = Collector("release")
    document = parse_json_text(text, out)
    problems = [_invalid(d) for d in out.items] or bindings_problems(document)
    if problems:
        raise ReleaseError(with_positions(problems, text), file=str(path), source=text)
    if document["environment"] != environment:
        message = (
            f"this file binds the environment `{document['environment']}`, not `{environment}`; "
            f"give a bindings file of `{environment}` (nothing was changed)"
        )
        raise _refuse("BINDINGS_ENVIRONMENT_MISMATCH", path, message, "/environment", text)
    if document["revision"] >= MAX_REVISION:
        message = f"the revision is {MAX_REVISION}, the last one: start a new file"
        raise _refuse("BINDINGS_INVALID", path, message, "/revision", text)
    return Previous(text.encode("utf-8"), document)


def _invalid(d: Diagnostic) -> Diagnostic:
    return Diagnostic(
        code="BINDINGS_INVALID", message=headline(d), location=d.location, pass_name="release"
    )


def bindings_problems(document: Any) -> list[Diagnostic]:
    """Why ``document`` is not a bindings file (its shape only: URLs, secrets and CA files are
    the runtime's to check, where they are used); empty when it is one."""
    found = Collector("release")
    if not isinstance(document, dict):
        found.error("BINDINGS_INVALID", "", "a bindings file is a JSON object")
        return [*found.items]
    _keys(document, "", ("environment", "revision", "tools"), _TOP_KEYS, found)
    environment = document.get("environment")
    if "environment" in document and not (
        isinstance(environment, str) and ENVIRONMENT_ID.fullmatch(environment)
    ):
        found.error("BINDINGS_INVALID", "/environment", "not an environment name")
    revision = document.get("revision")
    if "revision" in document and not (_is_int(revision) and 0 <= revision <= MAX_REVISION):
        found.error("BINDINGS_INVALID", "/revision", f"not an integer in 0..{MAX_REVISION}")
    if "traceKeyRef" in document and not isinstance(document["traceKeyRef"], str):
        found.error("BINDINGS_INVALID", "/traceKeyRef", "not a string")
    upstreams = document.get("upstreams", {})
    if not isinstance(upstreams, dict):
        found.error("BINDINGS_INVALID", "/upstreams", "not an object of server id to upstream")
    else:
        for server, entry in upstreams.items():
            if not isinstance(entry, dict):
                found.error("BINDINGS_INVALID", join("/upstreams", server), "not an object")
    tools = document.get("tools", {})
    if not isinstance(tools, dict):
        found.error("BINDINGS_INVALID", "/tools", "not an object of tool id to binding")
        return [*found.items]
    for tool_id, entry in tools.items():
        _binding_problems(entry, join("/tools", tool_id), found)
    return [*found.items]


def _binding_problems(entry: Any, pointer: str, found: Collector) -> None:
    if not isinstance(entry, dict):
        found.error("BINDINGS_INVALID", pointer, "a binding is an object")
        return
    _keys(entry, pointer, (), BINDING_KEYS, found)
    if "endpoint" not in entry and "upstream" not in entry:
        found.error("BINDINGS_INVALID", pointer, "missing key `endpoint` (or `upstream`)")
    for key, kind in _TYPES.items():
        value = entry.get(key)
        if key in entry and (not isinstance(value, kind) or isinstance(value, bool)):
            found.error("BINDINGS_INVALID", join(pointer, key), f"not {kind.__name__}")


def _keys(
    value: Mapping[str, Any],
    pointer: str,
    required: Sequence[str],
    known: Sequence[str],
    found: Collector,
) -> None:
    for key in value:
        if key not in known:
            use = ", ".join(f"`{k}`" for k in known)
            found.error("BINDINGS_INVALID", join(pointer, key), f"unknown key; use {use}")
    for key in required:
        if key not in value:
            found.error("BINDINGS_INVALID", pointer, f"missing key `{key}`")


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def check_target(path: Path, project: PathLike) -> None:
    """Refuse a bindings path that writing would clobber: the project file or contracts.json."""
    if path.name == CONTRACTS_FILE:
        message = f"`{CONTRACTS_FILE}` is written beside the bindings file: name it otherwise"
        raise _refuse("BINDINGS_PATH_REFUSED", path, message)
    if path.resolve() == Path(project).resolve():
        raise _refuse("BINDINGS_PATH_REFUSED", path, "this is the project file")


def register_build(project: Project, registry: Registry) -> Registered:
    """Build ``project`` into a temporary directory, re-verify it and register it."""
    try:
        with tempfile.TemporaryDirectory(prefix="seif-release-") as tmp:
            write_build(project, tmp)
            return registry.register(load_build(tmp))
    except RegistryError as exc:
        raise ReleaseError(exc.diagnostics, file=exc.file) from None
    except CompileError as exc:
        raise ReleaseError(exc.diagnostics, file=str(registry.root)) from None
    except OSError as exc:
        message = f"cannot write the build: {exc.strerror or exc}"
        raise _refuse("REGISTRY_WRITE_FAILED", registry.root, message) from None


def prepare_release(
    project: PathLike, registry: PathLike, environment: str, bindings: PathLike | None = None
) -> Release:
    """Validate, test, build and register ``project``, then write the next revision of its
    ``environment``'s bindings file (default ``bindings.<environment>.json`` beside it)."""
    check_environment(environment)
    ir = checked_project(project)
    target = Path(bindings) if bindings is not None else default_bindings_path(project, environment)
    check_target(target, project)
    previous = read_previous(target, environment)
    old = previous.document
    revision = 1 if old is None else old["revision"] + 1
    document = bindings_template(ir, environment, revision, old)
    registered = register_build(ir, Registry(registry))
    contracts = _write(registered, target, document, previous)
    tools = tuple(_setup(tool, document, old) for tool in ir.tools)
    dropped = tuple(t for t in (old or {}).get("tools", {}) if ir.tool(t) is None)
    return Release(
        digest=registered.build.digest,
        registry=Path(registry),
        entry=registered.path,
        already_registered=not registered.stored,
        bindings=target,
        contracts=contracts,
        environment=environment,
        revision=revision,
        previous_revision=None if old is None else old["revision"],
        tools=tools,
        dropped=dropped,
        notes=_notes(registered, ir, old, dropped),
    )


def _write(
    registered: Registered, target: Path, document: Mapping[str, Any], previous: Previous
) -> Path:
    """Write the bindings file and contracts.json, unless the file changed since it was read."""
    digest = registered.build.digest
    try:
        now = read_regular(target) if target.exists() else None
    except OSError:  # a FIFO or a device now: not what was read
        now = b""
    if now != previous.data:
        message = "the file changed while the release was prepared: read it and release again"
        raise _refuse("BINDINGS_CHANGED", target, message, registered=digest)
    try:
        return write_template(registered.build, target, document)
    except OSError as exc:
        message = f"cannot write: {exc.strerror or exc}"
        raise _refuse("BINDINGS_WRITE_FAILED", target, message, registered=digest) from None


def _setup(tool: Tool, document: Mapping[str, Any], old: Mapping[str, Any] | None) -> ToolSetup:
    entry = document["tools"][tool.id]
    upstream = entry.get("upstream")
    endpoint = entry.get("endpoint")
    if upstream is not None:  # the upstream holds the secret, and the placeholder
        served = document["upstreams"][upstream]
        placeholder = is_placeholder_upstream(upstream, served)
        secret_ref = served.get("secretRef")
    else:
        placeholder = endpoint == placeholder_endpoint(tool.id)
        secret_ref = entry.get("secretRef")
    kind, _, name = (secret_ref or "").partition(":")
    return ToolSetup(
        id=tool.id,
        version=tool.version,
        contract_digest=tool.contract_digest,
        endpoint=endpoint,
        upstream=upstream,
        placeholder=placeholder,
        kept=old is not None and keeps(tool, old["tools"].get(tool.id)),
        secret_ref=secret_ref if isinstance(secret_ref, str) else None,
        secret_env=name if kind == "env" and name else None,
    )


def _notes(
    registered: Registered, ir: Project, old: Mapping[str, Any] | None, dropped: Sequence[str]
) -> tuple[str, ...]:
    digest = registered.build.digest
    notes = [
        f"registered {digest}"
        if registered.stored
        else f"{digest} was already registered (verified unchanged)"
    ]
    before: Mapping[str, Any] = (old or {}).get("tools", {})
    for tool in ir.tools:
        timeout = before.get(tool.id, {}).get("timeoutMs")
        if _is_int(timeout) and timeout > tool.timeout_ms:
            notes.append(
                f"`{tool.id}`: timeoutMs {timeout} lowered to the tool's declared {tool.timeout_ms}"
            )
        elif old is not None and tool.id not in before:
            notes.append(f"`{tool.id}` is new in this build: its binding is a placeholder")
        elif old is not None and not keeps(tool, before[tool.id]):
            served = "its upstream" if tool.upstream is not None else "an executor endpoint"
            notes.append(f"`{tool.id}` is now bound to {served}: its binding is a placeholder")
    named = (old or {}).get("upstreams", {})
    for server in servers_of(ir):
        if old is not None and server not in named:
            notes.append(f"upstream `{server}` is new in this build: its command is a placeholder")
    notes.extend(
        f"upstream `{s}` was dropped: no contract of the build names it"
        for s in named
        if s not in servers_of(ir)
    )
    notes.extend(f"`{t}` was dropped: the build no longer declares it" for t in dropped)
    return tuple(notes)
