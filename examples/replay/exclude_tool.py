"""Write a candidate project in which one profile excludes one tool, for a what-if.

    python examples/replay/exclude_tool.py --project reference/agent-tools/context-project.json \
        --profile learner --tool search-knowledge --out candidate.json

The profile's rule for the tool becomes ``exclude``, and the project's tests for that profile's
objectives follow: the tool moves from their ``include`` to their ``exclude`` list, and their
calls of it expect ``DENY TOOL_NOT_DISCLOSED``. So ``seif build`` accepts the candidate, and
``seif replay --candidate`` shows what the change would have done to recorded sessions.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from policy.json.strict import dumps, loads


def exclude(project: dict[str, Any], profile_id: str, tool: str) -> dict[str, Any]:
    profile = next(p for p in project["profiles"] if p["id"] == profile_id)
    profile["toolRules"] = [
        {"tool": tool, "participation": "exclude"} if rule["tool"] == tool else rule
        for rule in profile["toolRules"]
    ]
    objectives = {o["id"] for o in project["objectives"] if o["profile"] == profile_id}
    for test in project.get("tests", []):
        expect = test.get("expect", {}).get("tools", {})
        if test["objective"] not in objectives:
            continue
        if tool in expect.get("include", []):
            expect["include"].remove(tool)
            expect.setdefault("exclude", []).append(tool)
        for call in expect.get("calls", []):
            if call["tool"] == tool:
                call.update(expect="DENY", reason="TOOL_NOT_DISCLOSED")
    return project


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", required=True, type=Path)
    parser.add_argument("--profile", required=True)
    parser.add_argument("--tool", required=True)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    project = exclude(loads(args.project.read_bytes()), args.profile, args.tool)
    args.out.write_text(dumps(project, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
