"""The compiler's entry points: a project file, text or document through the named passes of
:mod:`compiler.passes` to the IR.

``parse`` (JSON here, `.seif` through ``compiler.seif.front``) → ``structure`` → ``resolve`` →
``check`` → ``defaults`` → ``lower``. Every pass up to ``check`` reports into its own collector
and all of them run, so one call reports every problem it can find; diagnostics are then sorted
into document order, and each pointer is resolved to its line and column in the JSON text.
Lowering runs only on a declaration with no error: warnings (``severity: warning``) are
reported with the IR and refuse nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from compiler.diagnostics import Collector, CompileError
from compiler.passes import check_document, lower_document, parse
from policy.diagnostic import Diagnostic, refusing
from policy.ir import Project
from policy.json.pointer import document_order
from policy.json.positions import with_positions
from policy.json.value import thaw


@dataclass(frozen=True, slots=True)
class CompileResult:
    """What compiling one source gave: the IR when there was no error, and every diagnostic
    (with the IR, only warnings)."""

    project: Project | None
    diagnostics: tuple[Diagnostic, ...]
    source: str | None = None

    @property
    def ok(self) -> bool:
        return self.project is not None


def compile_document(doc: Any, *, tolerated: frozenset[str] = frozenset()) -> CompileResult:
    """Compile a parsed declaration; the errors of the codes ``tolerated`` count as warnings
    (a stored build is loaded with the checks it was written under: ``compiler.builds``)."""
    diagnostics = [
        replace(d, severity="warning") if d.code in tolerated else d for d in check_document(doc)
    ]
    if refusing(diagnostics):
        return CompileResult(None, tuple(diagnostics))
    return CompileResult(lower_document(doc), tuple(diagnostics))


def compile_text(text: str) -> CompileResult:
    """Compile the text of a JSON project."""
    out = Collector(parse.PASS)
    doc = parse.parse_json_text(text, out)
    if doc is None:
        return CompileResult(None, tuple(with_positions(out.items, text)), text)
    found = sorted(
        [*out.items, *check_document(doc)], key=lambda d: document_order(doc, d.pointer or "")
    )
    located = tuple(with_positions(found, text))  # where each value is written, for an editor
    if refusing(found):
        return CompileResult(None, located, text)
    return CompileResult(lower_document(doc), located, text)


def compile_file(path: str | os.PathLike[str]) -> CompileResult:
    """Compile a project file: ``.seif`` through the language's front end
    (``compiler.seif.front``), anything else as JSON."""
    out = Collector(parse.PASS)
    file = Path(path)
    text = parse.read_text(file, out)
    if text is None:
        return CompileResult(None, tuple(out.items))
    if file.suffix == ".seif":
        return compile_seif(text)
    return compile_text(text)


def compile_seif(text: str) -> CompileResult:
    """Compile the text of a `.seif` project."""
    from compiler.seif.front import compile_seif_text  # noqa: PLC0415  # lark loads on demand

    parsed, found = compile_seif_text(text)
    if parsed is None or refusing(found):
        return CompileResult(None, tuple(found), text)
    return CompileResult(lower_document(parsed.document), tuple(found), text)


def compile_project(source: str | os.PathLike[str] | Mapping[str, Any]) -> Project:
    """Compile a project file path or an already-parsed declaration into the IR.

    Raises :class:`CompileError` carrying every diagnostic found.
    """
    if isinstance(source, Mapping):
        return _project_or_raise(compile_document(thaw(source)))
    return _project_or_raise(compile_file(source))


def _project_or_raise(result: CompileResult) -> Project:
    if result.project is None:
        raise CompileError(result.diagnostics)
    return result.project
