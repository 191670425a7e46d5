"""The pending list in pages, as the runtime (``GET /v1/context/tools/pending``) and the
approval server (``GET /v1/pending``) answer it: ``?limit=N&after=CURSOR`` (``limit`` 1..200,
default 50), ``{"pending": [...], "next": CURSOR or null}``, oldest first, at most
:data:`MAX_PAGE_BYTES` an answer (fewer calls when they are large; a call larger than that is a
page of its own).

A cursor names the place just after a call, never an offset: following ``next`` until it is
null visits every call held all along once, whatever is added or removed between two pages
(what is added is listed after what was there). What a cursor holds depends on where the calls
are kept (``servers.runtime.held``, ``servers.runtime.held``); to a client it is
opaque. These are the pure parts: what a page asks for, how many encoded calls an answer holds,
its body, and the query that asks for one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from policy.json.strict import dump_bytes
from servers.wire.errors import ErrorCode, Refused
from servers.wire.fields import ID_RULE, is_id

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
MAX_PAGE_BYTES = 4 << 20
MAX_CURSOR = 4096
"""The longest cursor, in characters (URL-safe ones only)."""
ITEMS_BYTES = MAX_PAGE_BYTES - MAX_CURSOR - 1024
"""The bytes of an answer's calls at most (with the commas between them): the rest of the
answer, its cursor and a few fields, fits in what is left."""


@dataclass(frozen=True, slots=True)
class Page:
    """The page asked for: ``limit`` calls at most, after the cursor ``after`` (the first page
    without)."""

    limit: int = DEFAULT_LIMIT
    after: str | None = None


@dataclass(frozen=True, slots=True)
class Listed:
    """One page: the calls, each encoded as JSON, and the cursor of the next page, if any."""

    items: list[bytes]
    next: str | None


class CursorInvalid(ValueError):
    """An ``after`` that is no cursor of this list."""


def fits(taken: int, size: int, length: int, limit: int, max_bytes: int = ITEMS_BYTES) -> bool:
    """Whether a call encoded in ``length`` bytes joins a page of ``taken`` calls that take
    ``size`` bytes: the first always does; the others while the page holds fewer than
    ``limit`` and stays within ``max_bytes`` (a comma before each)."""
    return taken == 0 or (taken < limit and size + 1 + length <= max_bytes)


def taken(lengths: Iterable[int], limit: int, max_bytes: int = ITEMS_BYTES) -> int:
    """How many of the calls encoded in ``lengths`` bytes, in order, one page holds."""
    count = size = 0
    for length in lengths:
        if not fits(count, size, length, limit, max_bytes):
            break
        size, count = size + length + (1 if count else 0), count + 1
    return count


def cut(
    entries: Iterable[tuple[bytes | None, str]],
    limit: int,
    more: bool,
    max_bytes: int = ITEMS_BYTES,
) -> Listed:
    """The page of ``entries``, in order: each a call encoded (or None: left out, never
    listed) and the cursor just after it; ``more``: whether calls follow the last entry.
    ``next`` is the cursor after the last call taken or left out, when anything follows it."""
    items: list[bytes] = []
    size, last = 0, None
    for encoded, cursor in entries:
        if encoded is not None:
            if not fits(len(items), size, len(encoded), limit, max_bytes):
                return Listed(items, last)
            size += len(encoded) + (1 if items else 0)
            items.append(encoded)
        last = cursor
    return Listed(items, last if more else None)


def body(listed: Listed, **fields: object) -> bytes:
    """The answer ``{"pending": [...], "next": ..., **fields}``, its calls as encoded."""
    head = b'{"pending":[' + b",".join(listed.items) + b'],"next":' + dump_bytes(listed.next)
    extra = dump_bytes(fields)[1:-1] if fields else b""
    return head + (b"," + extra if extra else b"") + b"}"


_LIMIT = re.compile(r"[0-9]{1,3}")
_CURSOR = re.compile(f"[A-Za-z0-9._~-]{{1,{MAX_CURSOR}}}")


def page_of(query: Mapping[str, str]) -> Page:
    """The page a pending list's query asks for: ``limit`` (1..200, default 50: anything else
    is 400) and ``after`` (a cursor of a ``next``: URL-safe characters only)."""
    limit = query.get("limit")
    if limit is not None and not (_LIMIT.fullmatch(limit) and 1 <= int(limit) <= MAX_LIMIT):
        message = f"`limit` must be a whole number from 1 to {MAX_LIMIT}"
        raise Refused(ErrorCode.BAD_REQUEST, message)
    after = query.get("after")
    if after is not None and not _CURSOR.fullmatch(after):
        raise Refused(ErrorCode.BAD_REQUEST, "`after` must be the `next` of a page of this list")
    return Page(DEFAULT_LIMIT if limit is None else int(limit), after)


def call_of(query: Mapping[str, str]) -> tuple[str, str] | None:
    """The one call ``contextRef`` and ``callId`` name in a pending list's query (both or
    neither), if any."""
    ref, call_id = query.get("contextRef"), query.get("callId")
    if ref is None and call_id is None:
        return None
    if not (is_id(ref) and is_id(call_id)) or "after" in query:
        message = f"`contextRef` and `callId` go together, each {ID_RULE}, and without `after`"
        raise Refused(ErrorCode.BAD_REQUEST, message)
    assert ref is not None and call_id is not None
    return ref, call_id
