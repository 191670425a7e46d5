"""The project ``seif init`` writes: the smallest project that shows every part of the format
and passes its tests. One objective served by one profile, one read tool (the ``record-lookup``
template of ``seif tool new``) that the profile includes, and one guard test that the tool is
disclosed to that objective and that a call with valid arguments is allowed."""

from __future__ import annotations

from typing import Any

from compiler.authoring.protect import guard_id
from compiler.authoring.templates import tool_from_template
from policy.ir import PROJECT_FORMAT

SCHEMA_FILE = "seif-project.schema.json"
"""The file name of the project JSON Schema (`seif schema project`) that ``seif init`` writes
beside a JSON project and names in its ``$schema``."""

OBJECTIVE = "assistant"
TOOL = "record-lookup"


def starter_project(schema: str | None = SCHEMA_FILE) -> dict[str, Any]:
    """The starter project's document; ``schema``: the ``$schema`` it names (None: none, as in
    a `.seif` file)."""
    head: dict[str, Any] = {} if schema is None else {"$schema": schema}
    context = {
        "id": f"{OBJECTIVE}-role",
        "role": "system",
        "text": "You answer questions about records. Look a record up with record_lookup before "
        "you describe it, and say so when you cannot find it.",
        "required": True,
    }
    rule = {"tool": TOOL, "participation": "include", "required": True}
    guard = {
        "id": guard_id(TOOL, f"audience-{OBJECTIVE}"),
        "objective": OBJECTIVE,
        "guard": True,
        "fixtures": "current",
        "expect": {
            "context": {"include": [context["id"]]},
            "tools": {
                "include": [TOOL],
                "calls": [{"tool": TOOL, "arguments": {"id": "r-1"}, "expect": "ALLOW"}],
            },
        },
    }
    return {
        **head,
        "format": PROJECT_FORMAT,
        "id": "my-project",
        "version": "0.1.0",
        "description": "A starter project written by `seif init`: rename it, then describe "
        "what your agent is for.",
        "objectives": [
            {
                "id": OBJECTIVE,
                "profile": OBJECTIVE,
                "description": "An assistant that reads records and never changes them.",
            }
        ],
        "profiles": [
            {"id": OBJECTIVE, "tokenCeiling": 2000, "context": [context], "toolRules": [rule]}
        ],
        "tools": [tool_from_template("record-lookup", TOOL)],
        "tests": [guard],
    }
