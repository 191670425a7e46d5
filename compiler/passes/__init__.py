"""The compiler's passes, in the order the driver (``compiler.driver``) runs them.

``parse`` (:mod:`compiler.passes.parse`: JSON text to a tree through the strict boundary; a
`.seif` file is parsed and lowered to the same tree by ``compiler.seif``), then the checks of
:data:`PASSES` (``structure``, ``resolve``, ``check``), each reporting into its own collector and
all of them run, then ``defaults`` and ``lower`` (:mod:`compiler.passes.lower`) on a declaration
with no diagnostic. A new pass is a module here with its ``PASS`` name and a check added to
:data:`PASSES` where it belongs in the order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from compiler.diagnostics import Collector
from compiler.passes import parse, resolve, rules, structure
from compiler.passes.lower import fill_defaults, lower
from policy.diagnostic import Diagnostic
from policy.ir import Project
from policy.json.pointer import document_order

__all__ = ["PASSES", "check_document", "lower_document", "parse"]

Check = Callable[[Mapping[str, Any], Collector], None]

PASSES: tuple[tuple[str, Check], ...] = (
    (structure.PASS, lambda doc, out: structure.check_node(Project, doc, "", out)),
    (resolve.PASS, resolve.check_references),
    (rules.PASS, rules.check_rules),
)


SCHEMA_KEY = "$schema"
"""The optional top-level key naming the project file's JSON Schema for editors (`seif schema
project`): a string, not part of the IR, so it changes no digest."""


def without_schema(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``doc`` without its top-level ``$schema`` (what every pass after ``parse`` reads)."""
    return {k: v for k, v in doc.items() if k != SCHEMA_KEY}


def check_document(doc: Any) -> list[Diagnostic]:
    """Every diagnostic of a parsed declaration, in document order."""
    if not isinstance(doc, Mapping):
        out = Collector(structure.PASS)
        structure.check_node(Project, doc, "", out)
        return out.items
    found: list[Diagnostic] = []
    whole = doc
    if SCHEMA_KEY in doc:
        out = Collector(structure.PASS)
        if not isinstance(doc[SCHEMA_KEY], str):
            found_type = structure.json_type(doc[SCHEMA_KEY])
            out.error("WRONG_TYPE", "/$schema", f"expected a string, found {found_type}")
        found.extend(out.items)
        doc = without_schema(doc)
    for name, run in PASSES:
        out = Collector(name)
        run(doc, out)
        found.extend(out.items)
    found = [d for d in found if d.code not in _follow_ons(doc)]
    return sorted(found, key=lambda d: document_order(whole, d.pointer or ""))


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


def lower_document(doc: Mapping[str, Any]) -> Project:
    """The IR of a declaration every check accepted: ``defaults``, then ``lower``."""
    return lower(fill_defaults(without_schema(doc)))
