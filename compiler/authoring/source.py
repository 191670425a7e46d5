"""A project file as an author edits it: its text, its document, and proposed edits.

An :class:`Edit` is a proposed new text for the file with what it did (``notes``) and, when it
does not validate, why (``diagnostics``, located by pointer or line:column in the new text).
:func:`save` writes an edit only when it validates and the file still holds the text it was
computed from, atomically, keeping the file's mode.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from compiler.builds.build import write_atomic
from compiler.diagnostics import CompileError
from compiler.driver import CompileResult, compile_seif, compile_text
from compiler.readfile import read_regular, reason
from policy.diagnostic import Diagnostic, Location
from policy.engine.testing import TestReport
from policy.ir import Project, Tool
from policy.json.strict import dumps

Kind = Literal["json", "seif"]


class AuthoringError(CompileError):
    """An operation that cannot be done as asked: its diagnostics say what to write instead."""


def refusal(code: str, message: str, pointer: str | None = None) -> AuthoringError:
    return AuthoringError(
        [Diagnostic(code=code, message=message, location=Location(pointer=pointer))]
    )


@dataclass(frozen=True)
class ProjectSource:
    """One project file as read: ``document`` is what its text denotes (JSON keys in file order)."""

    path: Path
    text: str
    kind: Kind
    document: dict[str, Any]
    result: CompileResult
    newline: str = "\n"  # the file's line ending: edits work on "\n", saving puts it back

    @property
    def project(self) -> Any:
        """The compiled IR (``policy.ir.Project``) or None when the file does not validate."""
        return self.result.project


def compiled(source: ProjectSource) -> Project:
    """The source's IR; :class:`AuthoringError` with its diagnostics when it does not validate."""
    if source.project is None:
        raise AuthoringError(list(source.result.diagnostics))
    project: Project = source.project
    return project


def tool_of(project: Project, tool_id: str, pointer: str | None = None) -> Tool:
    """The tool ``tool_id`` of ``project``; ``UNKNOWN_TOOL`` naming the tools there are."""
    tool = project.tool_by_id.get(tool_id)
    if isinstance(tool, Tool):
        return tool
    known = ", ".join(t.id for t in project.tools) or "none"
    message = f"`{tool_id}` is not a tool of this project (tools: {known})"
    raise refusal("UNKNOWN_TOOL", message, pointer)


def test_failures(
    report: TestReport, only: Collection[str] | None = None, pass_name: str = ""
) -> list[Diagnostic]:
    """A ``TESTS_FAILED`` diagnostic per failing assertion (of the tests ``only`` names)."""
    return [
        Diagnostic(
            code="TESTS_FAILED",
            location=Location(pointer=assertion.pointer),
            message=f"test `{test.id}`: {assertion.subject}: expected "
            f"{_shown(assertion.expected)}, actual {_shown(assertion.actual)}",
            pass_name=pass_name,
        )
        for test, assertion in report.failures()
        if only is None or test.id in only
    ]


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else dumps(value, sort_keys=True)


def kind_of(path: str | os.PathLike[str]) -> Kind:
    return "seif" if Path(path).suffix == ".seif" else "json"


def document_of(text: str, kind: Kind) -> dict[str, Any] | None:
    """The document ``text`` denotes, or None when it does not parse."""
    if kind == "seif":
        from compiler.seif.parse import SeifSyntaxError, parse_seif  # noqa: PLC0415  # lark on demand

        try:
            return parse_seif(text).document
        except SeifSyntaxError:
            return None
    from compiler.diagnostics import Collector  # noqa: PLC0415
    from compiler.passes import parse  # noqa: PLC0415  # one parser for project JSON

    doc = parse.parse_json_text(text, Collector(parse.PASS))
    return doc if isinstance(doc, dict) else None


def compile_source(text: str, kind: Kind) -> CompileResult:
    return compile_seif(text) if kind == "seif" else compile_text(text)


def source_from_text(path: str | os.PathLike[str], text: str) -> ProjectSource:
    """The source of ``text`` as if read from ``path``; :class:`AuthoringError` when it does not
    parse (an edit needs a file it can read; a file that parses but does not validate is fine)."""
    kind = kind_of(path)
    result = compile_source(text, kind)
    document = document_of(text, kind)
    if document is None:
        raise AuthoringError(
            result.diagnostics or [Diagnostic(code="JSON_SYNTAX", message="not a project")]
        )
    return ProjectSource(Path(path), text, kind, document, result)


def read_raw(path: str | os.PathLike[str]) -> str:
    """The file's text exactly, line endings included; :class:`AuthoringError`
    ``FILE_UNREADABLE`` (also for a path that names no regular file, or a file over
    :data:`~compiler.readfile.MAX_FILE_BYTES`: :func:`~compiler.readfile.read_regular`)."""
    try:
        return read_regular(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise refusal("FILE_UNREADABLE", f"`{path}` cannot be read: {reason(exc)}") from None


def load_source(path: str | os.PathLike[str]) -> ProjectSource:
    """Read ``path``; :class:`AuthoringError` (``FILE_UNREADABLE`` or a syntax error). A file
    with CRLF line endings is edited as LF and saved with CRLF again."""
    raw = read_raw(path)
    newline = "\r\n" if "\r\n" in raw else "\n"
    source = source_from_text(path, raw.replace("\r\n", "\n") if newline != "\n" else raw)
    return replace(source, newline=newline)


@dataclass(frozen=True)
class Edit:
    """A proposed new text for ``source``'s file."""

    source: ProjectSource
    text: str
    diagnostics: tuple[Diagnostic, ...] = ()
    notes: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    project: Project | None = field(default=None, compare=False)
    """The IR of ``text`` when the edit validates (compiled once, by :func:`checked`)."""

    @property
    def ok(self) -> bool:
        return not self.diagnostics

    @property
    def changed(self) -> bool:
        return self.text != self.source.text

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "changed": self.changed,
            "file": str(self.source.path),
            "diagnostics": [d.to_json() for d in self.diagnostics],
            "notes": list(self.notes),
            **self.details,
        }


def checked(source: ProjectSource, text: str, notes: tuple[str, ...], **details: Any) -> Edit:
    """An edit of ``source`` to ``text``, refused with the diagnostics of compiling ``text``
    when it does not validate. Those of a `.seif` text are located by pointer into the document
    (the new text is not on disk, so its lines would point nowhere); ``details["proposed"]``
    holds the refused text."""
    result = compile_source(text, source.kind)
    if result.ok:
        return Edit(source, text, (), notes, details, result.project)
    found = tuple(result.diagnostics)
    intended = document_of(text, source.kind)
    if source.kind == "seif" and intended is not None:
        from compiler.driver import compile_document  # noqa: PLC0415

        by_pointer = compile_document(intended).diagnostics
        found = tuple(by_pointer) or found
    return Edit(source, source.text, found, notes, {**details, "proposed": text})


def refused(source: ProjectSource, error: CompileError) -> Edit:
    """An edit that changes nothing, refused for ``error``'s diagnostics."""
    return Edit(source, source.text, tuple(error.diagnostics))


def rewrite(path: Path, expected: str, new: str, *, newline: str = "\n") -> None:
    """Replace the text ``expected`` of the file at ``path`` by ``new`` (both with ``\n`` line
    endings, written with ``newline``), atomically, keeping the file's mode; a symbolic link is
    followed (its target is replaced, the link stays). ``FILE_CHANGED`` when the file no longer
    holds ``expected``, ``FILE_UNWRITABLE`` when it cannot be written: nothing is written."""
    target = path.resolve()
    try:
        current = read_raw(target)
        mode = target.stat().st_mode & 0o777
    except (AuthoringError, OSError):
        current, mode = None, 0o644
    if current is not None and newline != "\n":
        current = current.replace(newline, "\n")
    if current != expected:
        raise refusal(
            "FILE_CHANGED",
            f"`{path}` changed since it was read: nothing was written; read it again and "
            "redo the change",
        )
    data = new if newline == "\n" else new.replace("\n", newline)
    try:
        write_atomic(target, data.encode("utf-8"), mode=mode)
    except OSError as exc:
        message = f"`{path}` cannot be written: {exc.strerror or exc}; nothing was written"
        raise refusal("FILE_UNWRITABLE", message) from None


def save(edit: Edit) -> bool:
    """Write ``edit`` (True) when it validates and changes the file (:func:`rewrite`: refused
    with ``FILE_CHANGED`` when the file no longer holds the text the edit was computed from)."""
    if not edit.ok or not edit.changed:
        return False
    source = edit.source
    rewrite(source.path, source.text, edit.text, newline=source.newline)
    return True
