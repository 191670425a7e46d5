"""What a resolution computes from its inputs alone, computed once per distinct input.

The engine is pure: the disclosure of an objective depends only on the objective, the
coordinates it reads (consumer, environment, deployment), the observations and, where its rules
read ``principal``, the principal. So do the
``DISCLOSED`` record's summary and observations (checked and encoded once, as log fragments; the
context row keeps the same canonical CBOR of the observations), and
every part of the resolve answer but the context ref and the expiry. :class:`ResolvedCache`
keeps those per input, keyed exactly by their values (observations of plain strings only; any
other input is computed afresh and not kept). The key holds what the disclosure reads and
nothing else: never the ``traceId``, which differs per request and changes nothing disclosed.
The cache is a :mod:`servers.support.memo` cache (least recently used dropped first).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policy.engine.disclosure import Disclosure, disclose
from policy.engine.principal import PrincipalValue
from policy.ir import Project
from policy.json.strict import dump_bytes
from servers.log.encoding import DecisionLogError, Fragment, fragment
from servers.runtime import events
from servers.support import memo

CACHE_ENTRIES = 1024
_HEAD = ("contextRef", "build", "objective", "expiresAt")
_Key = tuple[Any, ...]


dumps = dump_bytes  # the wire's JSON encoding


@dataclass(frozen=True, slots=True)
class Resolved:
    """The input-determined parts of one resolution. Shared between requests: never mutate."""

    disclosure: Disclosure
    summary: dict[str, Any] | Fragment
    """The ``disclosure`` of the ``DISCLOSED`` record, checked and encoded once when kept."""
    observations: Fragment | None
    """The ``observations`` of the record (their ``canonical_cbor`` is what the context row
    keeps), checked and encoded once; None when not computed here."""
    _tail: bytes
    """The resolve answer's JSON after its head fields (``"messages":...}``)."""

    def body(self, *, context_ref: str, build: str, expires_at: int) -> bytes:
        """The JSON of ``events.resolve_payload`` for this disclosure, byte for byte."""
        head = dumps(
            {
                "contextRef": context_ref,
                "build": build,
                "objective": self.disclosure.objective,
                "expiresAt": events.iso(expires_at),
            }
        )
        return head[:-1] + b"," + self._tail


def _observations_key(observations: Mapping[str, Mapping[str, Any]]) -> _Key | None:
    """An exact key for observations whose values are all strings (or None), else None."""
    out = []
    for tool, seen in observations.items():
        if type(tool) is not str or type(seen) is not dict:
            return None
        for name, value in seen.items():
            if type(name) is not str or (value is not None and type(value) is not str):
                return None
        out.append((tool, tuple(sorted(seen.items()))))
    out.sort()
    return tuple(out)


def _tail(d: Disclosure) -> bytes:
    if not d.resolved:
        return b"}"
    payload = events.resolve_payload(d, context_ref="", build="", expires_at=0)
    return dumps({k: v for k, v in payload.items() if k not in _HEAD})[1:]


def _compute(
    ir: Project,
    objective: str,
    observations: Mapping[str, Mapping[str, Any]],
    coords: Mapping[str, Any],
    principal: PrincipalValue | None,
    *,
    with_cbor: bool,
) -> Resolved:
    d = disclose(ir, objective, observations, context=coords, principal=principal)
    summary = events.disclosure_summary(d)
    if not with_cbor:
        return Resolved(d, summary, None, _tail(d))
    try:
        seen = fragment("observations", observations)
        return Resolved(d, fragment("disclosure", summary), seen, _tail(d))
    except (DecisionLogError, ValueError, TypeError):
        return Resolved(d, summary, None, _tail(d))  # the caller fails where it always did


class ResolvedCache:
    """Resolutions by input, at most :data:`CACHE_ENTRIES` of them (LRU)."""

    def __init__(self) -> None:
        self._entries: dict[_Key, Resolved] = {}

    def get(
        self,
        ir: Project,
        objective: str,
        observations: Mapping[str, Mapping[str, Any]],
        coords: Mapping[str, Any],
        principal: PrincipalValue | None = None,
    ) -> Resolved:
        obs_key = _observations_key(observations)
        if obs_key is None or objective not in ir.objective_by_id:
            return _compute(ir, objective, observations, coords, principal, with_cbor=False)
        reads = ir.disclosure_principal.get(objective)  # the principal only where it is read
        key = (
            objective,
            str(coords.get("consumer") or ""),
            str(coords.get("environment") or ""),
            str(coords.get("deployment") or ""),
            obs_key,
            principal if reads else None,
        )
        found = memo.cached(self._entries, key)
        if found is None:
            found = _compute(ir, objective, observations, coords, principal, with_cbor=True)
            if found.observations is not None:
                memo.keep(self._entries, key, found, CACHE_ENTRIES)
        return found

    def __len__(self) -> int:
        return len(self._entries)
