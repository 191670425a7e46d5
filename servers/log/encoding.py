"""What a decision-log record may hold, checked before it is queued, and its encoding.

A record is one map: the envelope (``v``, ``seq``, ``at``, ``event``, ``prev``) and the event's
fields.
No key anywhere inside it may be a forbidden field (``arguments``, ``output``, ``reason_text``,
``secret``, ``token``, compared after lowercasing and dropping ``_`` and ``-``), and every value
must be JSON with a canonical CBOR encoding. :func:`admit` checks a record on the caller's
thread (a refused record raises there, before anything is written) and returns it ready for
:func:`encoded`, which the log's writer calls with the record's ``seq``, once it has set
``prev`` (``servers.log.chain``). :func:`unchained` gives the fields of the same record in
format 1, without ``prev``, for the PostgreSQL store's table.

A :class:`Fragment` is a field value checked and encoded once and reused by many records (the
summary of a cached disclosure, say): :func:`admit` takes it as checked, :func:`encoded`
splices its bytes. The encoding is the same as that of the plain value, byte for byte.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import cbor2

from policy.json.canonical import EncodingError, canonical_cbor, check_json
from servers.log.chain import CHAINED, DIGEST_PREFIX, UNCHAINED
from servers.support.memo import keep

FORMAT_VERSION = CHAINED
"""The format the file log writes: 2, with ``prev`` (``servers.log.chain``); readers read 1 too."""
EVENTS = frozenset(
    {
        "DISCLOSED",
        "REPORTED",
        "DENIED",
        "APPROVED",
        "REJECTED",
        "APPROVAL_EXPIRED",
        "INTENT",
        "RESULT",
        "UNKNOWN",
        "SHADOW",
    }
)
FORBIDDEN_FIELDS = frozenset({"arguments", "output", "reason_text", "secret", "token"})
"""Keys no record may have, at any depth; compared after lowercasing and dropping ``_`` and
``-`` (so ``reasonText`` and ``Reason-Text`` are refused too)."""
ENVELOPE = ("v", "seq", "at", "event", "prev")
"""The fields the log sets, and ``at`` (``prev``: format 2 only)."""
_LOG_SET = ("v", "seq", "prev")
_LONGEST_PREV = DIGEST_PREFIX + "0" * 64
MAX_RECORD_BYTES = 1 << 24
"""The largest record the writer writes (16 MiB; one ``os.write`` each): a longer one is refused
before it is written, so a reader that finds a longer item, or a torn tail as long, has found
damage, never what a crash mid-append leaves. (A ``DISCLOSED`` record, the largest kind, holds
a few hundred bytes per tool of its build; requests are bounded to 1 MiB.)"""

_FORBIDDEN_NORMALIZED = frozenset(k.replace("_", "") for k in FORBIDDEN_FIELDS)
_ID_KEYED = frozenset({"observations", "claims"})
"""Maps whose keys are ids (tool ids may be `output` or `token`), not field names: a
principal's ``claims`` are keyed by the claim names an issuer's ``claims`` allowlist names (the
operator's choice of policy inputs, recorded as given), whatever they are."""


class DecisionLogError(ValueError):
    """A decision log that is not a valid CBOR sequence of records, or a refused record."""


def _normalized(key: str) -> str:
    return key.lower().replace("_", "").replace("-", "")


def _forbidden_key(value: Any, pointer: str, *, keys_are_ids: bool = False) -> str | None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            where = f"{pointer}/{key}"
            named = isinstance(key, str) and not keys_are_ids
            if named and _normalized(key) in _FORBIDDEN_NORMALIZED:
                return where
            found = _forbidden_key(item, where, keys_are_ids=named and key in _ID_KEYED)
            if found is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = _forbidden_key(item, f"{pointer}/{i}")
            if found is not None:
                return found
    return None


def record_fields_allowed(record: Mapping[str, Any]) -> None:
    """Raise :class:`DecisionLogError` if ``record`` has a forbidden key (``arguments``,
    ``output``, ``reason_text``, ``secret``, ``token``) anywhere inside it. The message names
    the key's location, never a value."""
    where = _forbidden_key(record, "")
    if where is not None:
        raise DecisionLogError(f"a decision record may not carry `{where}`")


_PLAIN_SCALARS = frozenset({str, int, bool, type(None)})
_ALLOWED_KEYS: dict[str, bool] = {}
"""Field names found not to be forbidden (records reuse a few dozen), kept by the one cache
helper; the hot path tests membership without refreshing recency (a hit never needs it: the
answer of a pure check does not age)."""


def _allowed_key(key: str) -> bool:
    if key in _ALLOWED_KEYS:
        return True
    if _normalized(key) in _FORBIDDEN_NORMALIZED:
        return False
    keep(_ALLOWED_KEYS, key, True)
    return True


def plain(value: Any, keys_are_ids: bool = False) -> bool:
    """The fast path of the checks, in one walk: True if ``value`` is built of exactly ``str``,
    ``int``, ``bool``, ``None``, finite ``float``, string-keyed maps and lists, and has no
    forbidden key, so that :func:`record_fields_allowed` and ``canonical_cbor`` would both
    accept it. False decides nothing: the exact checks run then."""
    kind = type(value)
    if kind is list or kind is tuple:
        return all(_plain_item(item, False) for item in value)
    if kind is not dict and not isinstance(value, Mapping):  # the ABC check only when needed
        return False
    allowed = _ALLOWED_KEYS
    for key, item in value.items():
        if type(key) is not str or not (keys_are_ids or key in allowed or _allowed_key(key)):
            return False
        if not _plain_item(item, not keys_are_ids and key in _ID_KEYED):
            return False
    return True


def _plain_item(item: Any, keys_are_ids: bool) -> bool:
    kind = type(item)
    if kind in _PLAIN_SCALARS:
        return True
    if kind is float:
        return math.isfinite(item)
    return plain(item, keys_are_ids)


@dataclass(frozen=True, slots=True, eq=False)
class Fragment:
    """The value of one top-level record field (``field``), checked and encoded once
    (:func:`fragment`); a record may carry it only under that field."""

    field: str
    value: Any
    cbor: bytes


def fragment(field: str, value: Any) -> Fragment:
    """Check ``value`` as the record field ``field`` would be checked, and encode it once.
    Raises :class:`DecisionLogError` as :func:`admit` would."""
    record_fields_allowed({field: value})
    try:
        return Fragment(field, value, canonical_cbor(value))
    except EncodingError as exc:
        raise DecisionLogError(f"record not encodable at `/{field}{exc.pointer}`") from None


Admitted = dict[str, Any]
"""A record checked by :func:`admit`: its fields, ``seq`` and ``prev`` not yet set."""


def admit(record: Mapping[str, Any], now_ms: int | None = None) -> Admitted:
    """The record with ``v`` and ``at`` (``now_ms`` when the record has none), checked; a
    refused record raises :class:`DecisionLogError`. Only ``seq`` and ``prev`` are left to
    set, by the writer."""
    for key in _LOG_SET:
        if key in record:
            raise DecisionLogError(f"`{key}` is set by the log, not by the caller")
    event = record.get("event")
    if event not in EVENTS:
        raise DecisionLogError(f"`event` must be one of {sorted(EVENTS)}")
    at = record.get("at", now_ms)
    if type(at) is not int:
        raise DecisionLogError("`at` must be integer milliseconds")
    rest: Mapping[str, Any] = record
    if any(type(v) is Fragment for v in record.values()):
        rest = _without_fragments(record)
    fields = {**record, "v": FORMAT_VERSION, "at": at}
    if not plain(rest):  # the exact checks, and an encoding now: the writer must not fail later
        record_fields_allowed(rest)
        try:
            check_json(rest)
            encoded({**fields, "prev": _LONGEST_PREV}, 0)
        except EncodingError as exc:
            raise DecisionLogError(f"record not encodable at `{exc.pointer}`") from None
        except (cbor2.CBOREncodeError, TypeError, ValueError):
            raise DecisionLogError("record not encodable") from None
    return fields


def unchained(fields: Admitted) -> Admitted:
    """The fields of an admitted record in format 1: ``v`` 1, no ``prev`` (the PostgreSQL
    store's table, whose records are not chained: ``servers.store.postgres.log``)."""
    found = {key: value for key, value in fields.items() if key != "prev"}
    found["v"] = UNCHAINED
    return found


def _without_fragments(record: Mapping[str, Any]) -> dict[str, Any]:
    rest = {}
    for key, value in record.items():
        if type(value) is not Fragment:
            rest[key] = value
        elif value.field != key:
            raise DecisionLogError(f"a fragment of `{value.field}` given as `{key}`")
    return rest


def _splice(encoder: cbor2.CBOREncoder, value: Any) -> None:
    if type(value) is not Fragment:
        raise cbor2.CBOREncodeTypeError(f"cannot encode `{type(value).__name__}`")
    encoder.write(value.cbor)


def encoded(fields: dict[str, Any], seq: int) -> bytes:
    """The canonical CBOR of a prepared record with its ``seq`` (fragments spliced in); a
    record longer than :data:`MAX_RECORD_BYTES` is refused (:class:`DecisionLogError`)."""
    fields["seq"] = seq
    data = bytes(cbor2.dumps(fields, canonical=True, default=_splice))
    if len(data) > MAX_RECORD_BYTES:
        raise DecisionLogError(f"a record of {len(data)} bytes: at most {MAX_RECORD_BYTES}")
    return data
