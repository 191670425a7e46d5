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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from compiler.diagnostics import CompileError, Diagnostic
from policy.strictjson import JsonError, loads
from servers.http import wire
from servers.runtime.errors import HttpError

T = TypeVar("T")
MAX_TEXT = wire.MAX_BODY_BYTES
"""The longest free text a field may hold (a schema, arguments, a path)."""


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


def refused(error: CompileError) -> HttpError:
    """An operation refused for ``error``'s diagnostics: 409 when the file moved under it."""
    diagnostics = [d.to_json() for d in error.diagnostics]
    first = error.diagnostics[0] if error.diagnostics else None
    code = first.code if first is not None else "REFUSED"
    message = first.message if first is not None else "the operation was refused"
    status = 409 if code == "FILE_CHANGED" else 422
    return HttpError(status, code, message, diagnostics=diagnostics)


def diagnostic_json(code: str, message: str, pointer: str | None = None) -> dict[str, Any]:
    return Diagnostic(code=code, message=message, pointer=pointer).to_json()


# --- request bodies -----------------------------------------------------------------------------

Shape = Mapping[str, tuple[str, bool]]
"""field -> (kind, required); kinds: ``id`` (a short non-empty string), ``text`` (any string),
``bool``, ``strings`` (a list of strings)."""


async def body_of(request: web.Request, shape: Shape) -> dict[str, Any]:
    """The request's JSON object (strict JSON, at most 1 MiB), checked against a closed shape;
    absent optional fields are None."""
    if request.content_type != "application/json":
        raise HttpError(415, "UNSUPPORTED_MEDIA_TYPE", "send the body as `application/json`")
    body = await wire.read_json(request)
    for name in body:
        if name not in shape:
            raise wire.bad_request(f"unknown field `{name[:64]}`")
    out: dict[str, Any] = {}
    for name, (kind, required) in shape.items():
        value = body.get(name)
        if value is None:
            if required:
                raise wire.bad_request(f"missing field `{name}`")
        elif not _fits(kind, value):
            raise wire.bad_request(f"`{name}` must be {_KINDS[kind]}")
        out[name] = value
    return out


_KINDS = {
    "id": "a non-empty string of at most 256 characters",
    "text": "a string",
    "bool": "true or false",
    "strings": "a list of strings",
}


def _fits(kind: str, value: Any) -> bool:
    if kind == "id":
        return isinstance(value, str) and 0 < len(value) <= wire.MAX_ID_LENGTH
    if kind == "text":
        return isinstance(value, str) and len(value) <= MAX_TEXT
    if kind == "bool":
        return isinstance(value, bool)
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def json_field(text: str, name: str) -> Any:
    """The JSON value a text field holds (strict JSON); 400 naming where it is not JSON."""
    try:
        return loads(text)
    except JsonError as exc:
        where = exc.where
        diagnostic: dict[str, Any] = {"code": exc.code, "field": name}
        if where.line is not None:
            diagnostic.update(line=where.line, column=where.column)
        elif where.pointer is not None:
            diagnostic["pointer"] = where.pointer
        diagnostic["message"] = exc.message
        message = f"`{name}` is not strict JSON: {exc}"
        raise HttpError(400, "NOT_JSON", message, diagnostics=[diagnostic]) from None
