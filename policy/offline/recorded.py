"""Recorded resolutions: the engine's inputs read back from ``DISCLOSED`` decision records.

A ``DISCLOSED`` record (see ``docs/replay.md``) carries every input :func:`policy.disclose`
read when the runtime resolved: ``objective``, ``coordinates`` (the CEL context),
``observations`` (tool id to availability) and, for a token of an issuer, ``principal`` (its
``subject`` a keyed fingerprint), next to the ``disclosure`` summary of what it disclosed
(:func:`disclosure_summary`, the one definition the runtime logs with). A record without
``principal`` (a static credential's, or an older runtime's) was resolved by the static
credential it names as ``credential``: ``{issuer: null, subject: null, clientId: credential,
claims: {}}``.

:class:`Evaluator` evaluates recorded inputs with one IR. The engine is pure, so equal inputs
give equal disclosures: each distinct input is evaluated once, in a cache that lives as long as
the evaluator (one replay), never in a global.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from policy.engine.disclosure import Disclosure, disclose, disclosure_context
from policy.engine.principal import PrincipalValue, principal_value, static_principal
from policy.ir import Project

DISCLOSED = "DISCLOSED"
CACHE_SIZE = 4096
"""Distinct inputs an evaluator remembers (it starts over when full); 0 disables the cache."""

Record = Mapping[str, Any]
Summary = dict[str, Any]
Path = tuple[str | int, ...]


def disclosure_summary(d: Disclosure) -> Summary:
    """What a ``DISCLOSED`` record carries and replay compares: status, reason, profile, tools
    with contract digests, message ids, omissions and causes with reasons and explanations,
    and the token figures."""
    return {
        "status": d.status,
        "reason": d.reason,
        "profile": d.profile,
        "tools": [{"id": t.id, "contractDigest": t.contract_digest} for t in d.tools],
        "messages": [m.id for m in d.messages],
        "omitted": [o.to_json() for o in d.omitted],
        "causes": [o.to_json() for o in d.causes],
        "tokens": d.tokens.to_json(),
    }


@dataclass(frozen=True, slots=True)
class Inputs:
    """The engine's inputs recorded in one ``DISCLOSED`` record."""

    objective: str
    coordinates: Mapping[str, Any]
    observations: Mapping[str, Mapping[str, Any]]
    principal: PrincipalValue | None = None
    """Who resolved (None: no one known, every field null)."""


def recorded_principal(record: Record) -> PrincipalValue | str:
    """The principal a record was resolved by: its ``principal`` (a map of ``issuer``,
    ``subject``, ``clientId`` and ``claims``), else a static credential's of its
    ``credential``; or what makes it unusable (a string)."""
    given = record.get("principal")
    if given is None:
        credential = record.get("credential")
        return static_principal(credential if type(credential) is str else None)
    if not _is_map(given) or not _is_map(given.get("claims", {})):
        return "`principal` is not a map with a map of `claims`"
    for name in ("issuer", "subject", "clientId"):
        if given.get(name) is not None and type(given.get(name)) is not str:
            return f"`principal.{name}` is not a string or null"
    return principal_value(given)


def _is_map(value: object) -> TypeGuard[Mapping[str, Any]]:
    return type(value) is dict or isinstance(value, Mapping)


def inputs_of(record: Record) -> Inputs | str:
    """The recorded inputs, or what makes the record unusable (a string)."""
    objective = record.get("objective")
    coordinates = record.get("coordinates")
    observations = record.get("observations")
    if type(objective) is not str:
        return "`objective` is not a string"
    if not _is_map(coordinates):
        return "`coordinates` is not a map"
    if not _is_map(observations):
        return _NOT_OBSERVATIONS
    for seen in observations.values():
        if not _is_map(seen):
            return _NOT_OBSERVATIONS
    if not _is_map(record.get("disclosure")):
        return "`disclosure` is not a map"
    principal = recorded_principal(record)
    if isinstance(principal, str):
        return principal
    return Inputs(objective, coordinates, observations, principal)


_NOT_OBSERVATIONS = "`observations` is not a map of tool id to observation"


def input_key(inputs: Inputs) -> str:
    """Equal keys mean equal engine inputs: the ``repr`` of the CEL context exactly as
    ``disclose`` builds it (so a trace id does not split the cache), of the observations and of
    the principal.
    ``repr`` tells ``1``, ``1.0``, ``True`` and ``"1"`` apart and quotes every string, so equal
    keys are equal JSON values of equal types; equal observations in another key order only
    miss the cache."""
    context = disclosure_context(inputs.objective, inputs.coordinates)
    who = principal_value(inputs.principal)
    return repr((tuple(context.values()), inputs.observations, tuple(who.values())))


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordRef:
    """Which record: its ``seq``, ``contextRef`` and ``objective`` (None when absent)."""

    seq: int | None
    context_ref: str | None
    objective: str | None

    @classmethod
    def of(cls, record: Record) -> RecordRef:
        seq, ref, objective = record.get("seq"), record.get("contextRef"), record.get("objective")
        return cls(
            seq=seq if type(seq) is int else None,
            context_ref=ref if type(ref) is str else None,
            objective=objective if type(objective) is str else None,
        )

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "contextRef": self.context_ref, "objective": self.objective}


@dataclass(frozen=True, slots=True)
class Evaluated:
    """A summary, and where its numbers and booleans are: Python's ``==`` says ``1 == True``,
    JSON does not, so a comparison checks those leaves by kind after ``==`` agreed. ``scalars``
    groups them by container: (path to the container, ((key or index, is a boolean), ...))."""

    summary: Summary
    scalars: tuple[tuple[Path, tuple[tuple[str | int, bool], ...]], ...]


def _scalars(value: Any, path: Path, out: dict[Path, list[tuple[str | int, bool]]]) -> None:
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for k, v in items:
        if isinstance(v, (dict, list)):
            _scalars(v, (*path, k), out)
        elif type(v) in (bool, int, float):
            out.setdefault(path, []).append((k, type(v) is bool))


def evaluated(summary: Summary) -> Evaluated:
    found: dict[Path, list[tuple[str | int, bool]]] = {}
    _scalars(summary, (), found)
    return Evaluated(summary, tuple((path, tuple(leaves)) for path, leaves in found.items()))


class Evaluator:
    """``disclose`` with one IR; each distinct input evaluated once (``distinct`` counts)."""

    def __init__(self, ir: Project, cache_size: int = CACHE_SIZE) -> None:
        self.ir = ir
        self.cache_size = cache_size
        self.cache: dict[str, Evaluated] = {}
        self.distinct = 0

    def evaluate(self, inputs: Inputs, key: str) -> Evaluated:
        found = self.cache.get(key)
        if found is not None:
            return found
        self.distinct += 1
        disclosure = disclose(
            self.ir,
            inputs.objective,
            inputs.observations,
            context=inputs.coordinates,
            principal=inputs.principal,
        )
        summary = disclosure_summary(disclosure)
        found = evaluated(summary)
        if self.cache_size > 0:
            if len(self.cache) >= self.cache_size:
                self.cache.clear()
            self.cache[key] = found
        return found


def build_of(record: Record) -> str:
    """The record's build digest, ``(none)`` when it has none."""
    build = record.get("build")
    return build if type(build) is str else "(none)"


def counts(counter: Counter[str]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(counter.items()))
