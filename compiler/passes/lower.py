"""The `defaults` and `lower` passes: fill the defaults that depend on other fields, then build
the IR from a declaration that every earlier pass accepted."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from policy.codec import Kind, field_table
from policy.ir import Project
from policy.json.value import FrozenMap, freeze

DEFAULT_TOKEN_CEILING = 8192
DEFAULT_TIMEOUT_MS = 10_000
DEFAULT_MAX_CALLS = {"read": 3, "write": 1}
DEFAULT_APPROVAL = {"read": "none", "write": "required"}


def tool_with_defaults(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of one declared tool with its effect-dependent defaults written out."""
    out = dict(tool)
    effect = out.get("effect")
    if effect in DEFAULT_MAX_CALLS:
        out.setdefault("approval", DEFAULT_APPROVAL[effect])
        out.setdefault("maxCalls", DEFAULT_MAX_CALLS[effect])
    out.setdefault("timeoutMs", DEFAULT_TIMEOUT_MS)
    return out


def fill_defaults(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``doc`` with every contextual default written out."""
    out = copy.deepcopy(dict(doc))
    for profile in out.get("profiles", []):
        profile.setdefault("tokenCeiling", DEFAULT_TOKEN_CEILING)
    out["tools"] = [tool_with_defaults(tool) for tool in out.get("tools", [])]
    if not out["tools"]:
        del out["tools"]
    return out


def lower(doc: Mapping[str, Any]) -> Project:
    """The IR of a checked declaration with its defaults filled in."""
    project = _build(Kind("node", py=Project), doc)
    assert isinstance(project, Project)
    return project


def _build(kind: Kind, value: Any) -> Any:
    if value is None:
        return None
    tag = kind.tag
    if tag == "node":
        assert kind.py is not None
        kwargs = {
            spec.name: _build(spec.kind, value[spec.key])
            for spec in field_table(kind.py)
            if spec.key in value
        }
        return kind.py(**kwargs)
    if tag == "tuple":
        assert kind.item is not None
        return tuple(_build(kind.item, v) for v in value)
    if tag == "mapping":
        assert kind.item is not None
        return FrozenMap((k, _build(kind.item, v)) for k, v in value.items())
    if tag == "union":
        for option in kind.options:
            if (option.tag == "mapping") == isinstance(value, Mapping):
                return _build(option, value)
    if tag == "scalar" and kind.py is int and isinstance(value, float):
        return int(value)
    return freeze(value)
