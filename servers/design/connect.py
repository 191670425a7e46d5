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
from servers.design.workspace import Shape, Workspace, refused, workspace
from servers.http import wire
from servers.runtime.errors import HttpError

STARTER: Shape = {"tool": ("id", True), "lang": ("id", True), "out": ("text", True)}
RELEASE: Shape = {
    "environment": ("id", True),
    "registry": ("text", False),
    "bindings": ("text", False),
}
OPEN: Shape = {"file": ("text", True)}
SAVE: Shape = {"tool": ("id", True), "endpoint": ("text", True), "secretRef": ("text", False)}


def local_path(text: str, name: str) -> Path:
    """A path the author typed (this is a local workstation: the author's own files)."""
    if not text.strip() or "\x00" in text:
        raise wire.bad_request(f"`{name}` must be a path")
    return Path(text.strip()).expanduser()


def _starter(ws: Workspace, body: dict[str, Any]) -> dict[str, Any]:
    out = local_path(body["out"], "out")
    result = write_starter(compiled(load_source(ws.project)), body["tool"], body["lang"], out)
    return {"ok": True, **result.to_json()}


def _release(ws: Workspace, body: dict[str, Any]) -> dict[str, Any]:
    registry = local_path(body["registry"], "registry") if body["registry"] else ws.registry
    if registry is None:
        message = "give a registry directory (or start `seif design` with `--registry REG`)"
        raise HttpError(400, "REGISTRY_REQUIRED", message)
    bindings = local_path(body["bindings"], "bindings") if body["bindings"] else None
    release = prepare_release(ws.project, registry, body["environment"], bindings)
    ws.bindings = release.bindings
    return {
        **release.to_json(),
        "nothingPromoted": f"{NOTHING_PROMOTED}: promote the registered build and deploy it "
        "with its bindings file when you are ready",
        "form": bindingform.form(ws.project, release.bindings),
    }


def _form(ws: Workspace, _body: dict[str, Any]) -> dict[str, Any]:
    path = ws.bindings
    if path is None:
        message = "no bindings file yet: prepare a release, or open a bindings file"
        raise HttpError(404, "NO_BINDINGS", message)
    return bindingform.form(ws.project, path)


def _open(ws: Workspace, body: dict[str, Any]) -> dict[str, Any]:
    path = local_path(body["file"], "file")
    found = bindingform.form(ws.project, path)
    ws.bindings = path
    return found


def _save(ws: Workspace, body: dict[str, Any]) -> dict[str, Any]:
    path = ws.bindings  # once: opening another file does not wait for a change
    if path is None:
        return _form(ws, body)
    secret = body["secretRef"]
    return bindingform.save(ws.project, path, body["tool"], body["endpoint"], secret)


async def bindings_state(request: web.Request) -> web.Response:
    ws = workspace(request)
    try:
        return wire.json_response(await ws.read(_form, ws, {}))
    except AuthoringError as exc:
        raise refused(exc) from None


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_post("/api/starter", operation(STARTER, _starter))
    router.add_post("/api/release", operation(RELEASE, _release))
    router.add_get("/api/bindings", bindings_state)
    router.add_post("/api/bindings/open", operation(OPEN, _open, changes=False))
    router.add_post("/api/bindings", operation(SAVE, _save))
