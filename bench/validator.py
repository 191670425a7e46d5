"""Argument and result validation: seif's compiled validator against jsonschema and fastjsonschema.

The schemas are the tool contracts (``parameters`` and ``result``) of the reference project
``reference/agent-tools/context-project.json``. The values are the call arguments its tests use,
plus, for every schema, a complete valid value and invalid variants of it (an unknown property,
a missing required property, a wrong type at the deepest leaf, a bound exceeded). jsonschema
decides which values are valid; the other two must agree with it.

Rows are per validation: one timed call validates every value of its group once. Peers:
jsonschema's ``Draft202012Validator`` built once (``is_valid``), fastjsonschema compiled once
(invalid = ``JsonSchemaValueException`` caught), seif's ``is_valid`` and its ``errors``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastjsonschema
import jsonschema  # type: ignore[import-untyped]  # no stubs; the peer under measure

from bench.harness import Stats, measure_all, ratio
from policy.json.strict import loads
from policy.schema.validator import compile_validator

REPO = Path(__file__).resolve().parent.parent
REFERENCE = REPO / "reference/agent-tools/context-project.json"

Case = tuple[str, dict[str, Any], Any]  # (label, schema, value)


def schemas(project: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for tool in project.get("tools", []):
        out.append((f"{tool['id']}.parameters", tool["parameters"]))
        if tool.get("result") is not None:
            out.append((f"{tool['id']}.result", tool["result"]))
    return out


def call_arguments(project: dict[str, Any]) -> list[tuple[str, Any]]:
    """Every (tool id, arguments) the project's tests call, without repeats."""
    seen, out = set(), []
    for test in project.get("tests", []):
        for call in test.get("expect", {}).get("tools", {}).get("calls", []):
            key = (call["tool"], json.dumps(call.get("arguments"), sort_keys=True))
            if key not in seen:
                seen.add(key)
                out.append((call["tool"], call.get("arguments", {})))
    return out


def sample(schema: dict[str, Any]) -> Any:
    """A complete valid value: every property present, a few items, text of a fair length."""
    if "const" in schema:
        return copy.deepcopy(schema["const"])
    if "enum" in schema:
        return copy.deepcopy(schema["enum"][0])
    kind = schema["type"]
    if kind == "object":
        return {name: sample(child) for name, child in schema.get("properties", {}).items()}
    if kind == "array":
        count = max(int(schema.get("minItems", 0)), min(3, int(schema.get("maxItems", 3))))
        return [sample(schema["items"]) if "items" in schema else i for i in range(count)]
    if kind == "string":
        length = max(int(schema.get("minLength", 0)), min(24, int(schema.get("maxLength", 24))))
        return ("sample text for the bench " * 2)[:length]
    if kind in ("integer", "number"):
        low, high = schema.get("minimum", 0), schema.get("maximum", 10**6)
        middle = (low + high) / 2
        return int(middle) if kind == "integer" else middle
    return True if kind == "boolean" else None


def deepest_leaf(value: Any, path: tuple[Any, ...] = ()) -> tuple[Any, ...]:
    best = path
    children: Any = ()
    if isinstance(value, dict):
        children = value.items()
    elif isinstance(value, list):
        children = enumerate(value)
    for key, child in children:
        found = deepest_leaf(child, (*path, key))
        best = found if len(found) > len(best) else best
    return best


def set_path(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    value = copy.deepcopy(value)
    target = value
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new
    return value


def variants(schema: dict[str, Any], value: Any) -> list[Any]:
    """Invalid neighbours of a valid object value."""
    out = [{**value, "unexpectedProperty": 1}]
    if schema.get("required"):
        out.append({k: v for k, v in value.items() if k != schema["required"][0]})
    leaf = deepest_leaf(value)
    if leaf:
        out.append(set_path(value, leaf, "x" if isinstance(_at(value, leaf), bool) else True))
    for name, child in schema.get("properties", {}).items():
        if child.get("type") == "string" and "maxLength" in child:
            out.append({**value, name: "y" * (int(child["maxLength"]) + 1)})
            break
    return out


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


def cases(project: dict[str, Any]) -> list[Case]:
    found: list[Case] = []
    by_label = dict(schemas(project))
    for tool, arguments in call_arguments(project):
        if f"{tool}.parameters" in by_label:
            found.append((f"{tool}.parameters", by_label[f"{tool}.parameters"], arguments))
    for label, schema in by_label.items():
        value = sample(schema)
        found.append((label, schema, value))
        found += [(label, schema, bad) for bad in variants(schema, value)]
    return found


def _fast_check(compiled: Callable[[Any], Any], value: Any) -> bool:
    try:
        compiled(value)
    except fastjsonschema.JsonSchemaValueException:
        return False
    return True


def prepare(found: list[Case]) -> dict[str, Any]:
    """Compile each schema once per implementation and split the values by validity."""
    ours, reference, fast = {}, {}, {}
    for label, schema, _ in found:
        if label not in ours:
            ours[label] = compile_validator(schema)
            reference[label] = jsonschema.Draft202012Validator(schema)
            fast[label] = fastjsonschema.compile(schema)
    groups: dict[str, list[tuple[str, Any]]] = {"valid": [], "invalid": []}
    disagreements = []
    for label, _, value in found:
        expected = reference[label].is_valid(value)
        groups["valid" if expected else "invalid"].append((label, value))
        for impl, got in (
            ("seif", ours[label].is_valid(value)),
            ("fastjsonschema", _fast_check(fast[label], value)),
        ):
            if got is not expected:
                disagreements.append(f"{impl} says {got} for {label} {json.dumps(value)[:80]}")
    return {"ours": ours, "reference": reference, "fast": fast, "groups": groups,
            "disagreements": disagreements}  # fmt: skip


def runners(prepared: dict[str, Any], group: str) -> dict[str, Callable[[], object]]:
    pairs = prepared["groups"][group]
    ours = [(prepared["ours"][label].is_valid, value) for label, value in pairs]
    explain = [(prepared["ours"][label].errors, value) for label, value in pairs]
    reference = [(prepared["reference"][label].is_valid, value) for label, value in pairs]
    fast = [(prepared["fast"][label], value) for label, value in pairs]
    failure = fastjsonschema.JsonSchemaValueException

    def run_pairs(checks: list[tuple[Callable[[Any], object], Any]]) -> Callable[[], object]:
        def run() -> None:
            for check, value in checks:
                check(value)

        return run

    def run_fast() -> None:
        for check, value in fast:
            try:  # noqa: SIM105  # free when nothing is raised; suppress() would slow the peer
                check(value)
            except failure:
                pass

    out = {"seif": run_pairs(ours), "jsonschema": run_pairs(reference), "fastjsonschema": run_fast}
    if group == "invalid":
        out["seif errors"] = run_pairs(explain)
    return out


def run(*, quick: bool = False) -> dict[str, Any]:
    project = loads(REFERENCE.read_text(encoding="utf-8"))
    prepared = prepare(cases(project))
    repeats, min_time = (3, 0.001) if quick else (31, 0.02)
    groups = {group: pairs for group, pairs in prepared["groups"].items() if pairs}
    timed = {(group, impl): fn for group in groups
             for impl, fn in runners(prepared, group).items()}  # fmt: skip
    measured = measure_all(timed, repeats=repeats, min_time=min_time)
    stats: dict[tuple[str, str], Stats] = {
        (group, impl): stat.per(len(groups[group])) for (group, impl), stat in measured.items()
    }
    rows = [{"name": f"{'errors' if impl == 'seif errors' else 'is_valid'}, {group} values",
             "impl": impl, **stat.to_json()} for (group, impl), stat in stats.items()]  # fmt: skip
    return {
        "source": str(REFERENCE.relative_to(REPO)),
        "schemas": len(prepared["ours"]),
        "values": {group: len(pairs) for group, pairs in prepared["groups"].items()},
        "disagreements": prepared["disagreements"],
        "rows": rows,
        "ratios": ratios(stats),
        "notes": notes(prepared),
    }


def ratios(stats: dict[tuple[str, str], Stats]) -> dict[str, float]:
    out = {}
    for group in ("valid", "invalid"):
        ours = stats.get((group, "seif"))
        if ours is None:
            continue
        for peer in ("jsonschema", "fastjsonschema"):
            out[f"{peer}/seif is_valid, {group}"] = round(ratio(stats[(group, peer)], ours), 2)
    if ("invalid", "seif errors") in stats:
        errors = stats[("invalid", "seif errors")]
        out["jsonschema is_valid/seif errors, invalid"] = round(
            ratio(stats[("invalid", "jsonschema")], errors), 2
        )
    return out


def notes(prepared: dict[str, Any]) -> list[str]:
    groups = prepared["groups"]
    out = [
        f"{len(prepared['ours'])} schemas of {REFERENCE.name}; {len(groups['valid'])} valid and "
        f"{len(groups['invalid'])} invalid values; times are per validation"
    ]
    out += [f"disagreement: {d}" for d in prepared["disagreements"]]
    return out
