"""The compiler's entry points: a list of named passes from a declaration to the IR.

``parse`` → ``structure`` → ``resolve`` → ``check`` → ``defaults`` → ``lower``. Every pass up to
``check`` reports into its own collector and all of them run, so one call reports every problem
it can find; diagnostics are then sorted into document order. Lowering runs only on a
declaration with no diagnostics.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compiler import parse, resolve, rules, structure
from compiler.diagnostics import Collector, CompileError
from compiler.lower import fill_defaults, lower
from compiler.pointer import document_order
from policy.diagnostic import Diagnostic
from policy.ir import Project
from policy.jsonpos import with_positions
from policy.jsonvalue import thaw

Check = Callable[[Mapping[str, Any], Collector], None]

CHECK_PASSES: tuple[tuple[str, Check], ...] = (
    (structure.PASS, lambda doc, out: structure.check_node(Project, doc, "", out)),
    (resolve.PASS, resolve.check_references),
    (rules.PASS, rules.check_rules),
)


@dataclass(frozen=True, slots=True)
class CompileResult:
    """What compiling one source gave: the IR when there were no diagnostics."""

    project: Project | None
    diagnostics: tuple[Diagnostic, ...]
    source: str | None = None

    @property
    def ok(self) -> bool:
        return self.project is not None


def check_document(doc: Any) -> list[Diagnostic]:
    """Every diagnostic of a parsed declaration, in document order."""
    if not isinstance(doc, Mapping):
        out = Collector(structure.PASS)
        structure.check_node(Project, doc, "", out)
        return out.items
    found: list[Diagnostic] = []
    for name, run in CHECK_PASSES:
        out = Collector(name)
        run(doc, out)
        found.extend(out.items)
    found = [d for d in found if d.code not in _follow_ons(doc)]
    return sorted(found, key=lambda d: document_order(doc, d.pointer or ""))


_DEPENDS = {
    "profiles": ("UNKNOWN_PROFILE", "UNKNOWN_CONTEXT_MESSAGE"),
    "tools": ("UNKNOWN_TOOL",),
    "objectives": ("UNKNOWN_OBJECTIVE",),
}
"""The reference diagnostics that follow from a missing section: one misspelled key
(`proflies`) must not bury its own diagnostic under one per reference to what it held."""


_OPTIONAL = frozenset({"tools"})
"""A project may declare no tool: its rules and fixtures then name undeclared tools."""


def _follow_ons(doc: Mapping[str, Any]) -> frozenset[str]:
    broken = [
        key
        for key in _DEPENDS
        if not isinstance(doc.get(key), list) and (key in doc or key not in _OPTIONAL)
    ]
    return frozenset(code for key in broken for code in _DEPENDS[key])


def compile_document(doc: Any) -> CompileResult:
    diagnostics = check_document(doc)
    if diagnostics:
        return CompileResult(None, tuple(diagnostics))
    return CompileResult(lower(fill_defaults(doc)), ())


def compile_text(text: str) -> CompileResult:
    """Compile the text of a JSON project."""
    out = Collector(parse.PASS)
    doc = parse.parse_json_text(text, out)
    if doc is None:
        return CompileResult(None, tuple(with_positions(out.items, text)), text)
    found = sorted(
        [*out.items, *check_document(doc)], key=lambda d: document_order(doc, d.pointer or "")
    )
    if found:  # each pointer resolved to where its value is written, for an editor
        return CompileResult(None, tuple(with_positions(found, text)), text)
    return CompileResult(lower(fill_defaults(doc)), (), text)


def compile_file(path: str | os.PathLike[str]) -> CompileResult:
    """Compile a project file: ``.seif`` through the language's front end
    (``compiler.seif_front``), anything else as JSON."""
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
    from compiler.seif_front import compile_seif_text  # noqa: PLC0415  # lark loads on demand

    parsed, found = compile_seif_text(text)
    if parsed is None or found:
        return CompileResult(None, tuple(found), text)
    return CompileResult(lower(fill_defaults(parsed.document)), (), text)


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
