"""Declarative constraints on declaration fields, read by the compiler's structure pass.

The IR dataclasses name, field by field, the key a value has in the declaration and the rule it
must follow. The compiler checks declarations against these; the IR itself stays pure data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

ID_PATTERN = re.compile(r"[a-z][a-z0-9-]{0,63}")
NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
SEMVER_PATTERN = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-(0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*)?"
    r"(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?"
)


@dataclass(frozen=True, slots=True)
class Pattern:
    """A string matching ``regex`` in full; otherwise ``code``."""

    code: str
    regex: re.Pattern[str]
    what: str


@dataclass(frozen=True, slots=True)
class Range:
    """An integer from ``low`` to ``high`` inclusive."""

    low: int
    high: int


@dataclass(frozen=True, slots=True)
class Length:
    """A string of ``low`` to ``high`` code points."""

    low: int
    high: int


@dataclass(frozen=True, slots=True)
class OneOf:
    """One of a fixed set of strings."""

    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Exactly:
    """Exactly this value (``format``)."""

    value: str
    code: str


@dataclass(frozen=True, slots=True)
class JsonObject:
    """Any JSON object (a schema, arguments): checked by other passes."""


@dataclass(frozen=True, slots=True)
class JsonAny:
    """Any JSON value."""


Constraint = Pattern | Range | Length | OneOf | Exactly | JsonObject | JsonAny

ID = Pattern("INVALID_ID", ID_PATTERN, "an id: `^[a-z][a-z0-9-]{0,63}$`")
NAME = Pattern("INVALID_NAME", NAME_PATTERN, "a function name: `^[A-Za-z][A-Za-z0-9_-]{0,63}$`")
SEMVER = Pattern("INVALID_VERSION", SEMVER_PATTERN, "a semantic version such as `1.0.0`")
DESCRIPTOR_DIGEST = Pattern(
    "INVALID_VALUE", re.compile(r"sha256:[0-9a-f]{64}"), "a digest `sha256:<64 hex digits>`"
)


def key(
    name: str, check: Constraint | None = None, *, optional: bool = False, required: bool = False
) -> dict[str, Any]:
    """Field metadata: the declaration ``name``, its ``check``, whether it may be omitted
    although the IR field has no default (the compiler's defaults pass fills it in), and whether
    it must be declared although the IR field has a default (``format``)."""
    return {"key": name, "check": check, "optional": optional, "required": required}


DERIVED: dict[str, Any] = {"derived": True}
"""Field metadata of values computed from the others: neither declared nor encoded."""
