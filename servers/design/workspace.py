"""What the Design workstation holds between requests, and the helpers its handlers share.

One :class:`Workspace` per application: the project file, the registry, the bindings file the
last release wrote (or the page opened), and a lock, so that two changes are never computed
from the same text. Each operation reads the file anew, runs in a worker thread (compiling
takes a while) and answers JSON; a refusal is ``{"error": {"code", "message"}, "diagnostics"}``.

Every file is read by :func:`compiler.readfile.read_regular`: a regular file (after following
links) of at most 4 MiB, opened without blocking, so no path (``/dev/zero``, a FIFO, a
directory) can make an operation read without end or wait. An operation that only reads (the
project's state, the binding form, opening a bindings file, validating a call) takes no lock:
whatever it is given, it holds up no other request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from compiler.diagnostics import CompileError
from policy.json.strict import JsonError, loads
from servers.http.bodies import read_json
from servers.wire.errors import ErrorCode, Refused
from servers.wire.fields import decode

T = TypeVar("T")


@dataclass
class Workspace:
    project: Path
    registry: Path | None
    bindings: Path | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def run(self, function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``function(*args, **kwargs)`` in a worker thread, one change at a time."""
        async with self.lock:
            return await asyncio.to_thread(function, *args, **kwargs)

    async def read(self, function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``function(*args, **kwargs)``, which writes nothing, in a worker thread, without
        the lock: an operation that only reads never waits for a change, nor holds one up."""
        return await asyncio.to_thread(function, *args, **kwargs)


WORKSPACE: web.AppKey[Workspace] = web.AppKey("workspace", Workspace)


def workspace(request: web.Request) -> Workspace:
    return request.app[WORKSPACE]


def refused(error: CompileError) -> Refused:
    """An operation refused for ``error``'s diagnostics, answered with the first one's code
    and message: ``REFUSED`` (422), or ``FILE_CHANGED`` (409) when the file moved under it."""
    diagnostics = [d.to_json() for d in error.diagnostics]
    first = error.diagnostics[0] if error.diagnostics else None
    if first is None:
        return Refused(ErrorCode.REFUSED, diagnostics=diagnostics)
    changed = first.code == ErrorCode.FILE_CHANGED.code
    kind = ErrorCode.FILE_CHANGED if changed else ErrorCode.REFUSED
    return Refused(kind, first.message, code=first.code, diagnostics=diagnostics)


# --- request bodies -----------------------------------------------------------------------------


async def body_of(request: web.Request, kind: type[T]) -> T:
    """The request's JSON object (strict JSON, at most 1 MiB) as the typed body ``kind``
    (:mod:`servers.wire.design`): closed, absent optional fields None."""
    if request.content_type != "application/json":
        raise Refused(ErrorCode.UNSUPPORTED_MEDIA_TYPE)
    return decode(kind, await read_json(request))


def json_field(text: str, name: str) -> Any:
    """The JSON value a text field holds (strict JSON); 400 naming where it is not JSON."""
    try:
        return loads(text)
    except JsonError as exc:
        diagnostic = {"code": exc.code, "field": name} | exc.diagnostic.to_json()
        message = f"`{name}` is not strict JSON: {exc}"
        raise Refused(ErrorCode.NOT_JSON, message, diagnostics=[diagnostic]) from None
