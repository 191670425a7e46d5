"""The `.seif` front end: ``parse`` and ``lower`` to the JSON document (``compiler.seif.parse``),
then the JSON front end's own passes (structure, resolve, check, defaults, lower), so a project
written either way has one IR, one set of contract digests and one build digest. Every
diagnostic carries the line and column where its element was written, as well as its pointer.
"""

from __future__ import annotations

from dataclasses import replace

from compiler.passes import check_document
from compiler.seif.parse import Parsed, SeifSyntaxError, parse_seif
from policy.diagnostic import Diagnostic, did_you_mean

PASS = "parse"


def compile_seif_text(text: str) -> tuple[Parsed | None, list[Diagnostic]]:
    """The parsed file and its diagnostics (syntax, or those of the shared passes, located)."""
    try:
        parsed = parse_seif(text)
    except SeifSyntaxError as exc:
        return None, [replace(exc.diagnostic, pass_name=PASS)]
    located = [locate(d, parsed) for d in check_document(parsed.document)]
    return parsed, sorted(located, key=lambda d: (d.line or 0, d.column or 0))


def locate(diagnostic: Diagnostic, parsed: Parsed) -> Diagnostic:
    """``diagnostic`` with the line and column of its pointer (or of its nearest ancestor),
    and, for a schema option the subset does not know, the nearest option's `.seif` name."""
    at = parsed.position_of(diagnostic.pointer or "")
    if diagnostic.code == "SCHEMA_UNKNOWN_KEYWORD":
        diagnostic = replace(diagnostic, message=diagnostic.message + _option_hint(diagnostic))
    if at is None:
        return diagnostic
    return diagnostic.moved(line=at[0], column=at[1], cite="line")


SCHEMA_OPTIONS = (
    "min_length", "max_length", "minimum", "maximum", "min_items", "max_items", "enum",
    "const", "description", "title", "additional_properties",
)  # fmt: skip


def _option_hint(diagnostic: Diagnostic) -> str:
    written = (diagnostic.pointer or "").rsplit("/", 1)[-1]
    return "" if written in SCHEMA_OPTIONS else did_you_mean(written, SCHEMA_OPTIONS)
