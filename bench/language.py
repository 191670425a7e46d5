"""``python -m bench language``: parse-and-compile time of the `.seif` front end against the JSON
front end on the same project, in one run: the reference project, and a generated catalogue of
32 tools (the catalogue limit), each with five parameters, included by two profiles with a
condition each, and a test per tool. Both texts denote one document (the `.seif` text is
``seif convert --to seif`` of the JSON), so both compile to the same IR; the benchmark checks it.

Targets (issue 15): the `.seif` path within 3x of the JSON path, and under 50 ms for 32 tools.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.harness import measure_all
from compiler.builds.build import make_build
from compiler.driver import compile_seif, compile_text
from compiler.seif.printer import to_seif

REPO = Path(__file__).resolve().parent.parent
REFERENCE = REPO / "reference/agent-tools/context-project.json"
TOOLS = 32
RATIO, BUDGET_NS = 3.0, 50_000_000


def catalogue(count: int = TOOLS) -> dict[str, Any]:
    """A project with ``count`` read tools, two profiles and a test per tool."""
    tools = [
        {
            "id": f"tool-{i}",
            "name": f"tool_{i}",
            "version": "1.0.0",
            "description": f"Synthetic tool number {i}.",
            "effect": "read",
            "parameters": {
                "type": "object",
                "properties": {
                    "ref": {"type": "string", "minLength": 1, "maxLength": 64},
                    "depth": {"type": "integer", "minimum": 0, "maximum": 3},
                    "tags": {"type": "array", "maxItems": 4, "items": {"type": "string"}},
                    "mode": {"type": "string", "enum": ["a", "b"]},
                    "flag": {"type": "boolean"},
                },
                "required": ["ref"],
            },
        }
        for i in range(count)
    ]
    rules = [
        {
            "tool": t["id"],
            "participation": "include",
            "conditions": [
                {"when": "has(args.depth) && args.depth > 2", "then": "DENY", "reason": "too deep"}
            ],
        }
        for t in tools
    ]
    profiles = [{"id": name, "tokenCeiling": 60000, "toolRules": rules} for name in ("one", "two")]
    tests = [
        {
            "id": f"reads-{t['id']}",
            "objective": "one",
            "fixtures": "current",
            "expect": {"tools": {"include": [t["id"]]}},
        }
        for t in tools
    ]
    return {
        "format": "seif.context-project.v1",
        "id": "catalogue",
        "version": "1.0.0",
        "objectives": [{"id": "one", "profile": "one"}, {"id": "two", "profile": "two"}],
        "profiles": profiles,
        "tools": tools,
        "tests": tests,
    }


def _digest(project: Any) -> str:
    digest: str = make_build(project).digest
    return digest


def run(*, quick: bool = False) -> dict[str, Any]:
    repeats, min_time = (3, 0.001) if quick else (15, 0.05)
    sources = {
        "reference": json.loads(REFERENCE.read_text()),
        f"catalogue of {TOOLS} tools": catalogue(),
    }
    timed = {}
    for name, doc in sources.items():
        json_text, seif_text = json.dumps(doc, indent=2), to_seif(doc)
        a, b = compile_text(json_text), compile_seif(seif_text)
        if a.project is None or b.project is None or _digest(a.project) != _digest(b.project):
            raise RuntimeError(f"{name}: the two front ends do not give one IR")
        timed[(name, "json")] = lambda t=json_text: compile_text(t)
        timed[(name, "seif")] = lambda t=seif_text: compile_seif(t)
    measured = measure_all(timed, repeats=repeats, min_time=min_time)
    rows = [{"name": n, "impl": i, **s.to_json()} for (n, i), s in measured.items()]
    ratios = {f"seif / json, {n}": measured[(n, "seif")].median_ns / measured[(n, "json")].median_ns
              for n in sources}  # fmt: skip
    big = measured[(f"catalogue of {TOOLS} tools", "seif")].median_ns
    met = all(r <= RATIO for r in ratios.values()) and big < BUDGET_NS
    notes = [
        f"the .seif path at {max(ratios.values()):.2f}x the JSON path at most (target <= {RATIO}x)",
        f"{TOOLS} tools through .seif: {big / 1e6:.1f} ms (target < {BUDGET_NS / 1e6:g} ms)",
        f"targets {'met' if met else 'NOT met'}",
    ]
    return {"rows": rows, "ratios": ratios, "target_met": met, "notes": notes}
