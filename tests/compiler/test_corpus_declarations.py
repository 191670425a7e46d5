"""The declaration corpus: one parametrized test per kind over ``corpus/declarations/<kind>/``.

Cases are data (``shared/notes/style.md``, "Tests are data"). The runner is strict about the case
files themselves: an unknown or duplicate key, a NaN, or a case that asserts nothing fails.

- ``invalid/*.json``: ``{"description", "project" | "source", "diagnostics"}``; ``diagnostics``
  is the exact ordered list of ``{"code", "pointer"}`` or ``{"code", "line", "column"}`` the
  compiler must report (``source`` is raw JSON text, for parse-level cases).
- ``valid/*.json``: ``{"description", "project", "contracts"?, "ir"?, "warnings"?}``; the
  project compiles with no error and exactly the ``warnings`` listed (``{"code", "pointer"}``,
  in order; none when absent), ``contracts`` maps every tool id to its contract digest, and
  ``ir`` maps JSON pointers (declaration keys) into the compiled IR to the values found there,
  defaults filled in.
- ``skip.json``: ``{"<case file name>": "reason"}``. A listed case that fails is skipped with its
  reason; a listed case that passes fails, so that the entry is removed once the bug is fixed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import cbor2
import pytest

from compiler.codes import CODES
from compiler.driver import CompileResult, compile_document, compile_text
from policy.codec import field_table, to_declaration
from policy.ir import PROJECT_FORMAT, Project
from policy.json.pointer import split
from policy.json.strict import JsonError, loads
from policy.json.value import json_equal
from tests.support.paths import ROOT

CORPUS = ROOT / "corpus" / "declarations"
KINDS = ("invalid", "valid")
INVALID_KEYS = frozenset({"description", "project", "source", "diagnostics"})
VALID_KEYS = frozenset({"description", "project", "contracts", "ir", "warnings"})
POINTER_ENTRY = frozenset({"code", "pointer"})
LINE_ENTRY = frozenset({"code", "line", "column"})


class CaseError(Exception):
    """A malformed case file (as opposed to a compiler that disagrees with a good one)."""


def load_case(path: Path, allowed: frozenset[str]) -> dict[str, Any]:
    try:
        case = loads(path.read_bytes())
    except JsonError as exc:
        raise CaseError(f"{path.name}: not strict JSON: {exc}") from None
    if not isinstance(case, dict):
        raise CaseError("a case file is a JSON object")
    unknown = sorted(set(case) - allowed)
    if unknown:
        raise CaseError(f"unknown keys {unknown}; allowed: {sorted(allowed)}")
    description = case.get("description")
    if not isinstance(description, str) or not description.strip():
        raise CaseError("`description` is a non-empty string")
    return case


def _cases(kind: str) -> list[Path]:
    return sorted((CORPUS / kind).glob("*.json"))


def _skip_list() -> dict[str, str]:
    return loads((CORPUS / "skip.json").read_text(encoding="utf-8"))


SKIP = _skip_list()


def run_case(path: Path, check: Callable[[], None]) -> None:
    """Run ``check``; honour the skip list, and refuse a listed case that passes."""
    reason = SKIP.get(path.name)
    if reason is None:
        check()
        return
    try:
        check()
    except AssertionError:
        pytest.skip(f"{path.name}: {reason}")
    pytest.fail(f"{path.name} passes now: remove it from corpus/declarations/skip.json")


def actual_entries(result: CompileResult) -> list[dict[str, Any]]:
    """The (code, location) of each diagnostic, after checking its code and message."""
    entries = []
    for diagnostic in result.diagnostics:
        assert diagnostic.code in CODES, f"unknown diagnostic code {diagnostic.code!r}"
        assert isinstance(diagnostic.message, str), diagnostic
        assert diagnostic.message.strip(), f"{diagnostic.code} has an empty message"
        entry: dict[str, Any] = {"code": diagnostic.code}
        if diagnostic.pointer is not None:
            entry["pointer"] = diagnostic.pointer
        if diagnostic.location.cites_line:  # a line the text was written at (JSON_SYNTAX)
            entry["line"] = diagnostic.line
            entry["column"] = diagnostic.column
        elif diagnostic.pointer is not None:  # resolved from the pointer, for an editor
            assert diagnostic.line is not None and diagnostic.column is not None, diagnostic
        entries.append(entry)
    return entries


def expected_entries(case: Mapping[str, Any]) -> list[dict[str, Any]]:
    entries = case.get("diagnostics")
    if not isinstance(entries, list) or not entries:
        raise CaseError("an invalid case asserts at least one diagnostic")
    for entry in entries:
        if not isinstance(entry, dict) or set(entry) not in (POINTER_ENTRY, LINE_ENTRY):
            raise CaseError(f"a diagnostic is {{code, pointer}} or {{code, line, column}}: {entry}")
        if entry["code"] not in CODES:
            raise CaseError(f"`{entry['code']}` is not a code of compiler.codes")
    return entries


def source_of(case: Mapping[str, Any]) -> str:
    if ("project" in case) == ("source" in case):
        raise CaseError("a case has exactly one of `project` and `source`")
    if "source" in case:
        if not isinstance(case["source"], str):
            raise CaseError("`source` is the raw JSON text, a string")
        return str(case["source"])
    return json.dumps(case["project"], indent=2, ensure_ascii=False)


@pytest.mark.parametrize("path", _cases("invalid"), ids=lambda p: p.stem)
def test_invalid_declaration(path: Path) -> None:
    case = load_case(path, INVALID_KEYS)
    expected = expected_entries(case)
    text = source_of(case)

    def check() -> None:
        result = compile_text(text)
        actual = actual_entries(result)
        assert result.project is None, "an invalid project compiled"
        assert actual == expected

    run_case(path, check)


def hand_contract_digest(tool: Mapping[str, Any]) -> str:
    """The spec's formula, computed from the declaration without the compiler."""
    contract = {
        "id": tool["id"],
        "name": tool["name"],
        "version": tool["version"],
        "arguments": tool["parameters"],
        "result": tool.get("result"),
    }
    if "upstream" in tool:  # only a tool with a pin has the key (docs/upstream-mcp.md)
        contract["upstream"] = tool["upstream"]
    return "sha256:" + hashlib.sha256(cbor2.dumps(contract, canonical=True)).hexdigest()


def resolve_ir(value: Any, pointer: str) -> Any:
    """The IR value at ``pointer``, where tokens are declaration keys (``maxCalls``)."""
    for token in split(pointer):
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            names = {spec.key: spec.name for spec in field_table(type(value))}
            if token not in names:
                raise CaseError(f"`{token}` in `{pointer}` is not a declaration key")
            value = getattr(value, names[token])
        elif isinstance(value, Mapping):
            value = value[token]
        else:
            value = value[int(token)]
    return value


def check_valid(case: Mapping[str, Any]) -> None:
    project = case["project"]
    result = compile_text(json.dumps(project, indent=2, ensure_ascii=False))
    warnings = case.get("warnings", [])
    assert actual_entries(result) == warnings
    assert all(d.severity == "warning" for d in result.diagnostics)
    ir = result.project
    assert isinstance(ir, Project)
    digests = {tool.id: tool.contract_digest for tool in ir.tools}
    if "contracts" in case:
        assert digests == case["contracts"]
    for tool in project.get("tools", []):
        assert digests[tool["id"]] == hand_contract_digest(tool), tool["id"]
    for pointer, value in case.get("ir", {}).items():
        found = to_declaration(resolve_ir(ir, pointer))
        assert json_equal(found, value), f"{pointer}: {found!r} != {value!r}"
    again = compile_document({"format": PROJECT_FORMAT, **to_declaration(ir)})
    assert [{"code": d.code, "pointer": d.pointer} for d in again.diagnostics] == warnings
    assert again.project == ir
    assert again.project is not None
    assert {t.id: t.contract_digest for t in again.project.tools} == digests


@pytest.mark.parametrize("path", _cases("valid"), ids=lambda p: p.stem)
def test_valid_declaration(path: Path) -> None:
    case = load_case(path, VALID_KEYS)
    if not isinstance(case.get("project"), dict):
        raise CaseError("a valid case has a `project` object")
    if not isinstance(case.get("contracts", {}), dict) or not isinstance(case.get("ir", {}), dict):
        raise CaseError("`contracts` and `ir` are objects")
    if "warnings" in case:
        expected_entries({"diagnostics": case["warnings"]})  # the form of a diagnostic list
    run_case(path, lambda: check_valid(case))


def test_corpus_and_skip_list_are_well_formed() -> None:
    names = {kind: {p.name for p in _cases(kind)} for kind in KINDS}
    assert len(names["invalid"]) >= 60
    assert len(names["valid"]) >= 12
    assert not names["invalid"] & names["valid"], "a case name is used in both kinds"
    for name, reason in SKIP.items():
        assert name in names["invalid"] | names["valid"], f"skip.json names no case: {name}"
        assert isinstance(reason, str) and reason.strip(), f"skip.json gives no reason: {name}"
