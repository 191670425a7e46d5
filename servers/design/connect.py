"""The Design workstation's way out: a runnable executor starter, and "Prepare release & connect".

- ``POST /api/starter`` (``seif starter``): the current file's project compiled, the starter of
  one tool written to a local directory (:func:`compiler.authoring.starter.write_starter`).
- ``POST /api/release`` (``seif release``): validate, test, build, register and write the next
  revision of an environment's bindings file (:func:`prepare_release`); nothing is promoted or
  deployed. The workstation then knows that bindings file: the binding form edits it.
- ``GET /api/bindings``, ``POST /api/bindings/open`` and ``POST /api/bindings``: the binding
  form (:mod:`servers.design.bindingform`), one tool's ``endpoint`` and ``secretRef`` at a time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp import web

from compiler.authoring.release import NOTHING_PROMOTED, prepare_release
from compiler.authoring.source import AuthoringError, compiled, load_source
from compiler.authoring.starter import write_starter
from servers.design import bindingform
from servers.design.actions import operation
from servers.design.workspace import Workspace, refused, workspace
from servers.http.bodies import json_response
from servers.wire import design
from servers.wire.errors import ErrorCode, Refused


def local_path(text: str, name: str) -> Path:
    """A path the author typed (this is a local workstation: the author's own files)."""
    if not text.strip() or "\x00" in text:
        raise Refused(ErrorCode.BAD_REQUEST, f"`{name}` must be a path")
    return Path(text.strip()).expanduser()


def _starter(ws: Workspace, body: design.Starter) -> dict[str, Any]:
    out = local_path(body.out, "out")
    result = write_starter(compiled(load_source(ws.project)), body.tool, body.lang, out)
    return {"ok": True, **result.to_json()}


def _release(ws: Workspace, body: design.Release) -> dict[str, Any]:
    registry = local_path(body.registry, "registry") if body.registry else ws.registry
    if registry is None:
        message = "give a registry directory (or start `seif design` with `--registry REG`)"
        raise Refused(ErrorCode.REGISTRY_REQUIRED, message)
    bindings = local_path(body.bindings, "bindings") if body.bindings else None
    release = prepare_release(ws.project, registry, body.environment, bindings)
    ws.bindings = release.bindings
    return {
        **release.to_json(),
        "nothingPromoted": f"{NOTHING_PROMOTED}: promote the registered build and deploy it "
        "with its bindings file when you are ready",
        "form": bindingform.form(ws.project, release.bindings),
    }


def _form(ws: Workspace) -> dict[str, Any]:
    path = ws.bindings  # once: opening another file meanwhile does not change what is read
    if path is None:
        message = "no bindings file yet: prepare a release, or open a bindings file"
        raise Refused(ErrorCode.NO_BINDINGS, message)
    return bindingform.form(ws.project, path)


def _open(ws: Workspace, body: design.OpenBindings) -> dict[str, Any]:
    path = local_path(body.file, "file")
    found = bindingform.form(ws.project, path)
    ws.bindings = path
    return found


def _save(ws: Workspace, body: design.SaveBinding) -> dict[str, Any]:
    path = ws.bindings  # once: opening another file does not wait for a change
    if path is None:
        return _form(ws)
    secret = body.secret_ref
    return bindingform.save(ws.project, path, body.tool, body.endpoint, secret)


async def bindings_state(request: web.Request) -> web.Response:
    ws = workspace(request)
    try:
        return json_response(await ws.read(_form, ws))
    except AuthoringError as exc:
        raise refused(exc) from None


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_post("/api/starter", operation(design.Starter, _starter))
    router.add_post("/api/release", operation(design.Release, _release))
    router.add_get("/api/bindings", bindings_state)
    router.add_post("/api/bindings/open", operation(design.OpenBindings, _open, changes=False))
    router.add_post("/api/bindings", operation(design.SaveBinding, _save))
