"""The pure part of `seif tool import` (``compiler.authoring.upstream``): ids and names, the
version rule, effects, the descriptor digest, clashes and the catalogue limit, on a project
text in memory (the command against real servers: tests/seif/cli/test_tool_import.py)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from compiler.authoring.source import AuthoringError, source_from_text
from compiler.authoring.upstream import (
    Options,
    Server,
    bump_patch,
    descriptor_digest,
    first_version,
    function_name,
    import_tools,
    tool_id,
)

PROJECT = {
    "format": "seif.context-project.v1",
    "id": "p",
    "version": "1.0.0",
    "objectives": [],
    "profiles": [],
    "tools": [
        {
            "id": "fs-read",
            "name": "fs_read",
            "version": "1.0.0",
            "description": "Written by hand.",
            "parameters": {"type": "object"},
            "effect": "read",
        }
    ],
}
SERVER = Server("fs-server", "2.1.0", "2025-11-25")
SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "additionalProperties": False,
}


def listed(name: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, "description": f"The {name} tool.", "inputSchema": SCHEMA, **kw}


def source(doc: dict[str, Any] = PROJECT) -> Any:
    return source_from_text("p.json", json.dumps(doc, indent=2) + "\n")


def test_ids_names_versions_effects() -> None:
    assert tool_id("fs", "Read_Text.File") == "fs-read-text-file"
    assert function_name("fs", "Read_Text.File") == "fs_Read_Text_File"
    assert first_version("2.1.0") == "2.1.0" and first_version("2026.10") == "1.0.0"
    assert bump_patch("1.2.3") == "1.2.4" and bump_patch("1.2.3-rc.1+b") == "1.2.4"


def test_the_descriptor_digest_covers_the_five_members_absent_ones_as_null() -> None:
    tool = listed("t", annotations={"readOnlyHint": True}, extra="not in the descriptor")
    members = {
        "name": "t",
        "description": "The t tool.",
        "inputSchema": SCHEMA,
        "outputSchema": None,
        "annotations": {"readOnlyHint": True},
    }
    canonical = json.dumps(members, sort_keys=True, separators=(",", ":")).encode()
    assert descriptor_digest(tool) == "sha256:" + hashlib.sha256(canonical).hexdigest()
    assert descriptor_digest({**tool, "extra": 2}) == descriptor_digest(tool)
    assert descriptor_digest({**tool, "description": "changed"}) != descriptor_digest(tool)


def test_a_contract_per_tool_effect_from_read_only_hint() -> None:
    listing = [listed("list"), listed("stat", annotations={"readOnlyHint": True})]
    result = import_tools(source(), SERVER, listing, Options(server="fs"))
    assert result.refused == [] and result.edit.ok
    written = json.loads(result.edit.text)["tools"][1:]
    assert [(t["id"], t["name"], t["version"], t["effect"]) for t in written] == [
        ("fs-list", "fs_list", "2.1.0", "write"),
        ("fs-stat", "fs_stat", "2.1.0", "read"),
    ]
    assert written[1]["upstream"] == {
        "server": "fs",
        "tool": "stat",
        "descriptorDigest": descriptor_digest(listing[1]),
    }
    assert result.to_json()["server"] == {
        "name": "fs-server",
        "version": "2.1.0",
        "protocolVersion": "2025-11-25",
    }


def test_clashes_are_refused_per_tool() -> None:
    doc = {**PROJECT, "tools": [{**PROJECT["tools"][0], "id": "hand", "name": "fs_read"}]}
    listing = [listed("read"), listed("a_b"), listed("a-b"), listed("d" * 70)]
    result = import_tools(source(doc), SERVER, listing, Options(server="fs"))
    assert [(r.tool, r.code) for r in result.refused] == [
        ("read", "DUPLICATE_NAME"),
        ("a-b", "DUPLICATE_ID"),
        ("d" * 70, "INVALID_ID"),
    ]
    assert [i.declaration["id"] for i in result.imported] == ["fs-a-b"]


def test_an_id_of_a_tool_not_imported_is_refused_even_with_update() -> None:
    options = Options(server="fs", tools=("read",), update=True)
    result = import_tools(source(), SERVER, [listed("read")], options)
    assert [(r.code, r.pointer) for r in result.refused] == [("DUPLICATE_ID", "/tools/0")]
    assert "--prefix" in result.refused[0].message


def test_update_without_tools_selects_only_the_tools_pinned_to_that_server() -> None:
    result = import_tools(source(), SERVER, [listed("read")], Options(server="fs", update=True))
    assert result.refused == [] and result.imported == []
    assert any("not imported, new upstream: read" in note for note in result.edit.notes)


@pytest.mark.parametrize("description", ["", "x" * 1025, None])
def test_a_description_outside_1_to_1024_is_refused(description: Any) -> None:
    tool = {**listed("t"), "description": description}
    if description is None:
        del tool["description"]
    result = import_tools(source(), SERVER, [tool], Options(server="fs"))
    assert [(r.code, r.pointer) for r in result.refused] == [("OUT_OF_RANGE", "/description")]


def test_more_than_32_tools_needs_tool() -> None:
    listing = [listed(f"t{i}") for i in range(33)]
    with pytest.raises(AuthoringError) as excinfo:
        import_tools(source(), SERVER, listing, Options(server="fs"))
    diagnostic = excinfo.value.diagnostics[0]
    assert diagnostic.code == "CATALOGUE_TOO_MANY_TOOLS" and "--tool" in diagnostic.message
    chosen = import_tools(source(), SERVER, listing, Options(server="fs", tools=("t1", "t2")))
    assert [i.upstream_name for i in chosen.imported] == ["t1", "t2"]


def test_a_project_that_would_not_validate_is_not_written() -> None:
    listing = [listed(f"t{i}") for i in range(32)]  # 1 + 32 tools: over the catalogue limit
    result = import_tools(source(), SERVER, listing, Options(server="fs"))
    assert not result.edit.ok and result.edit.text == result.edit.source.text
    assert "CATALOGUE_TOO_MANY_TOOLS" in [d.code for d in result.edit.diagnostics]


def test_an_update_never_loosens_an_effect_on_its_own() -> None:
    tool = listed("stat", annotations={"readOnlyHint": True})
    first = import_tools(source(), SERVER, [tool], Options(server="fs", effects={"stat": "write"}))
    reviewed = source_from_text("p.json", first.edit.text)
    changed = {**tool, "description": "Changed upstream."}
    again = import_tools(reviewed, SERVER, [changed], Options(server="fs", update=True))
    assert again.imported[0].declaration["effect"] == "write"
    assert again.imported[0].declaration["version"] == "2.1.1"
    assert "+description: Changed upstream." in (again.imported[0].diff or "")
    read = Options(server="fs", update=True, effects={"stat": "read"})
    overridden = import_tools(reviewed, SERVER, [changed], read).imported[0]
    assert overridden.declaration["effect"] == "read"
