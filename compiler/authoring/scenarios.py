"""The scenarios of an objective: each combination of the coordinate values its rules mention.

A rule's ``when`` and its conditions read the coordinates as ``context.consumer``,
``context.environment`` and ``context.deployment``; the values they compare them with
(``context.environment != 'production'``, ``context.consumer in ['trial', 'demo']``) are what
can change a disclosure or a decision. The scenarios of an objective are every combination, over
the coordinates its profile's rules mention, of each value mentioned and "none of them" (the
coordinate absent, which no comparison with a non-empty value matches), the combination with
every coordinate absent first. ``seif tool protect`` guards each; ``seif tool show`` reports
each.

Only comparisons of a coordinate with string literals are read (``==``, ``!=``, ``in`` a list):
a value computed otherwise (``context.environment.startsWith('prod')``) names no value, and the
scenarios do not cover it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from typing import Any

from blake3 import blake3
from lark import Token, Tree

from compiler.authoring.source import refusal
from policy.cel.program import CelCompileError, literal_value, parse_quoted
from policy.ir import COORDINATE_FIELDS, Profile, Project

MAX_SCENARIOS = 64
"""Scenarios of one objective at most: past that, protect refuses (``SCENARIOS_TOO_MANY``)."""
_COMPARISONS = frozenset({"relation_eq", "relation_ne", "relation_in"})

Scenario = Mapping[str, str]


def compared_values(expression: str) -> dict[str, set[str]]:
    """Coordinate name -> the string literals ``expression`` compares it with."""
    return {k: set(v) for k, v in _compared(expression).items()}


@cache
def _compared(expression: str) -> dict[str, frozenset[str]]:
    try:
        tree, quoted = parse_quoted(expression)
    except CelCompileError:  # checked at compile time: a project that compiles has none
        return {}
    found: dict[str, set[str]] = {}
    for node in _subtrees(tree):
        children = _children(node)
        if node.data != "relation" or len(children) != 2 or not isinstance(children[0], Tree):
            continue
        operator = children[0]
        if operator.data in _COMPARISONS:
            left, right = _children(operator)[0], children[1]
            for name, values in _comparison(str(operator.data), left, right, quoted):
                found.setdefault(name, set()).update(values)
    return {k: frozenset(v) for k, v in found.items()}


def _comparison(
    operator: str, left: Any, right: Any, quoted: Mapping[str, str]
) -> Iterator[tuple[str, list[str]]]:
    if operator == "relation_in":
        name, values = _coordinate(left, quoted), _string_list(right)
        if name is not None and values:
            yield name, values
        return
    for one, other in ((left, right), (right, left)):
        name, value = _coordinate(one, quoted), _string(other)
        if name is not None and value is not None:
            yield name, [value]


def _subtrees(node: Any) -> Iterator[Tree[Any]]:
    if isinstance(node, Tree):
        yield node
        for child in node.children:
            yield from _subtrees(child)


def _children(node: Tree[Any]) -> list[Any]:
    return [c for c in node.children if c is not None]


def _unwrap(node: Any, stop: str = "") -> Any:
    """The node under a chain of single-child nodes (down to a ``stop`` node, if it meets one)."""
    while isinstance(node, Tree) and node.data != stop and len(_children(node)) == 1:
        only = _children(node)[0]
        if not isinstance(only, Tree):
            break
        node = only
    return node


def _coordinate(node: Any, quoted: Mapping[str, str]) -> str | None:
    """The coordinate ``node`` reads (``context.environment``, ``context.`environment```)."""
    node = _unwrap(node)
    if not isinstance(node, Tree) or node.data != "member_dot":
        return None
    target, field = _children(node)
    root = _unwrap(target)
    is_context = isinstance(root, Tree) and root.data == "ident"
    if not is_context or str(_children(root)[0]) != "context":
        return None
    name = quoted.get(str(field), str(field))
    return name if name in COORDINATE_FIELDS else None


def _string(node: Any) -> str | None:
    node = _unwrap(node)
    if not isinstance(node, Tree) or node.data != "literal":
        return None
    token = _children(node)[0]
    if not isinstance(token, Token) or token.type not in ("STRING_LIT", "MLSTRING_LIT"):
        return None
    value = literal_value(token)
    return value if isinstance(value, str) else None


def _string_list(node: Any) -> list[str]:
    node = _unwrap(node, "list_lit")
    if not isinstance(node, Tree) or node.data != "list_lit":
        return []
    items = _children(node)
    elements = _children(items[0]) if items and isinstance(items[0], Tree) else []
    values = [_string(e) for e in elements]
    return [v for v in values if v is not None]


# --- the scenarios of an objective --------------------------------------------------------------


def mentioned_values(profile: Profile) -> dict[str, list[str]]:
    """Coordinate name -> the values the profile's rules (``when`` and conditions) compare it
    with, sorted; only the coordinates they mention, in the order consumer, environment,
    deployment."""
    found: dict[str, set[str]] = {}
    for rule in profile.tool_rules:
        expressions = [rule.when] if rule.when is not None else []
        expressions += [c.when for c in rule.conditions]
        for expression in expressions:
            for name, values in _compared(expression).items():
                found.setdefault(name, set()).update(values)
    return {name: sorted(found[name]) for name in COORDINATE_FIELDS if name in found}


def _choices(values: list[str]) -> list[str | None]:
    """Each value mentioned, and "none of them" first: absent, or a value no comparison names
    when the empty string (what an absent coordinate reads as) is one of them."""
    named = [v for v in values if v]
    if len(named) == len(values):
        return [None, *named]
    other = next(f"other-{i}" if i else "other" for i in itertools.count() if _free(i, values))
    return [None, *named, other]


def _free(i: int, values: list[str]) -> bool:
    return (f"other-{i}" if i else "other") not in values


def _profile_of(ir: Project, objective: str) -> Profile:
    profile: Profile = ir.profile_by_id[ir.objective_by_id[objective].profile]
    return profile


def scenario_of(ir: Project, objective: str, coordinates: Scenario) -> dict[str, str]:
    """The scenario of ``objective`` that ``coordinates`` fall in: a value no rule names reads
    as "none of them", a coordinate no rule mentions is left out (a test at
    ``{"environment": "production", "deployment": "eu-1"}`` is in the scenario
    ``{"environment": "production"}`` when no rule compares the deployment with `eu-1`)."""
    out: dict[str, str] = {}
    for name, values in mentioned_values(_profile_of(ir, objective)).items():
        value = coordinates.get(name, "")
        if value and value in values:
            out[name] = value
        elif value and "" in values:
            out[name] = str(_choices(values)[-1])  # "none of them" when "" is named
    return out


def scenarios(ir: Project, objective: str) -> list[dict[str, str]]:
    """Every scenario of ``objective``, ``{}`` (no coordinate) first; ``SCENARIOS_TOO_MANY``
    past :data:`MAX_SCENARIOS`."""
    values = mentioned_values(_profile_of(ir, objective))
    choices = [_choices(v) for v in values.values()]
    count = 1
    for options in choices:
        count *= len(options)
    if count > MAX_SCENARIOS:
        shown = ", ".join(f"{k} ({len(c)} values)" for k, c in zip(values, choices, strict=True))
        raise refusal(
            "SCENARIOS_TOO_MANY",
            f"objective `{objective}` has {count} scenarios ({shown}), more than "
            f"{MAX_SCENARIOS}: compare the coordinates with fewer values, or write its tests "
            "by hand",
        )
    out = []
    for combination in itertools.product(*choices):
        given = {k: v for k, v in zip(values, combination, strict=True) if v is not None}
        out.append(given)
    return out


def scenario_suffixes(each: Sequence[Scenario]) -> list[str]:
    """Each scenario in a test id: its values in the order consumer, environment, deployment
    (``trial-production``), or, when two scenarios would read alike (one value given to two
    coordinates), each value after its coordinate's name (``consumer-trial-environment-x``). A
    value that is not id-safe is slugged and tagged with a short hash of itself."""
    short = ["-".join(_slug(at[k]) for k in COORDINATE_FIELDS if k in at) for at in each]
    if len(set(short)) == len(short):
        return short
    return ["-".join(f"{k}-{_slug(at[k])}" for k in COORDINATE_FIELDS if k in at) for at in each]


def _slug(value: str) -> str:
    slug = "".join(c if c.isascii() and (c.isalnum() or c == "-") else "-" for c in value.lower())
    slug = "-".join(part for part in slug.split("-") if part)
    if slug == value:
        return slug
    tag = blake3(value.encode("utf-8")).hexdigest()[:6]
    return f"{slug}-{tag}" if slug else tag


def scenario_text(coordinates: Scenario) -> str:
    """``environment production, consumer trial``, or ``no coordinates``."""
    return ", ".join(f"{k} {v}" for k, v in coordinates.items()) or "no coordinates"
