"""The Design workstation's tool operations, each the function its ``seif tool`` command calls.

- ``GET /api/project``: the file's state and a card per tool (:func:`show_tool`'s three
  sections: audience, protection, connection), the templates, profiles and objectives.
- ``POST /api/tools/new`` (``seif tool new``), ``/api/tools/include`` (``seif tool include``),
  ``/api/tools/protect`` (``seif tool protect``): an edit, written only when it validates
  (:func:`compiler.authoring.source.save`); one that does not is answered 422 with its
  diagnostics and writes nothing.
- ``POST /api/tools/check-call`` (``seif tool check-call``): the engine's decision of one call,
  never dispatched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from aiohttp import web

from compiler.authoring.checkcall import FIXTURE_MODES, check_call
from compiler.authoring.protect import protect_tool
from compiler.authoring.show import show_tools
from compiler.authoring.simulate import coordinates_given
from compiler.authoring.source import AuthoringError, Edit, ProjectSource, load_source, save
from compiler.authoring.tools import FIELD_TYPES, TEMPLATES, include_tool, new_tool
from compiler.diagnostics import CompileError
from compiler.readfile import read_regular
from policy.json.strict import JsonError, loads
from servers.design.workspace import Workspace, body_of, json_field, refused, workspace
from servers.http.bodies import json_response
from servers.wire import design
from servers.wire.errors import ErrorCode, Refused

B = TypeVar("B")
Compute = Callable[[Workspace, B], dict[str, Any]]


def operation(
    kind: type[B], compute: Compute[B], *, changes: bool = True
) -> Callable[[web.Request], Any]:
    """A handler: the body decoded as ``kind``, then ``compute`` in a worker thread, under
    the workspace's lock when it ``changes`` a file (:meth:`Workspace.run`), without it when
    it only reads (:meth:`Workspace.read`)."""

    async def handle(request: web.Request) -> web.Response:
        body = await body_of(request, kind)
        ws = workspace(request)
        run = ws.run if changes else ws.read
        try:
            result = await run(compute, ws, body)
        except CompileError as exc:
            raise refused(exc) from None
        return json_response(result)

    return handle


def written(edit: Edit) -> dict[str, Any]:
    """Save ``edit`` when it validates; 422 with its diagnostics (nothing written) when not."""
    if not edit.ok:
        message = "the change does not validate: nothing was written"
        raise Refused(ErrorCode.CHANGE_INVALID, message, **edit.to_json(), written=False)
    return {**edit.to_json(), "written": save(edit)}


def _new(ws: Workspace, body: design.NewTool) -> dict[str, Any]:
    schema = json_field(body.schema, "schema") if body.schema is not None else None
    if schema is not None and not isinstance(schema, dict):
        raise Refused(ErrorCode.BAD_REQUEST, "`schema` must be a JSON Schema object")
    edit = new_tool(
        load_source(ws.project),
        template=body.template,
        tool_id=body.id,
        fields=tuple(body.fields or ()),
        schema=schema,
        name=body.name,
        description=body.description or None,
        version=body.version,
        effect=body.effect,
    )
    return written(edit)


def _include(ws: Workspace, body: design.IncludeTool) -> dict[str, Any]:
    source = load_source(ws.project)
    edit = include_tool(
        source, tool_id=body.tool, profile_id=body.profile, required=bool(body.required)
    )
    return written(edit)


def _protect(ws: Workspace, body: design.ProtectTool) -> dict[str, Any]:
    return written(protect_tool(load_source(ws.project), tool_id=body.tool))


def _check_call(ws: Workspace, body: design.CheckCall) -> dict[str, Any]:
    fixtures = body.fixtures or "current"
    if fixtures not in FIXTURE_MODES:
        raise Refused(ErrorCode.BAD_REQUEST, "`fixtures` must be `current` or `project`")
    return check_call(
        load_source(ws.project),
        objective=body.objective,
        tool=body.tool,
        arguments=json_field(body.arguments, "arguments"),
        approved=bool(body.approved),
        fixtures=fixtures,
        coordinates=coordinates_given(body.consumer, body.environment, body.deployment),
    )


# --- the file's state and the cards -------------------------------------------------------------


def overview(ws: Workspace) -> dict[str, Any]:
    """The file, whether it validates, its diagnostics and a card per tool."""
    base: dict[str, Any] = {
        "file": str(ws.project),
        "registry": str(ws.registry) if ws.registry is not None else None,
        "bindings": str(ws.bindings) if ws.bindings is not None else None,
        "templates": dict(TEMPLATES),
        "fieldTypes": list(FIELD_TYPES),
    }
    try:
        source = load_source(ws.project)
    except AuthoringError as exc:  # the file does not parse: nothing to show but why
        diagnostics = [d.to_json() for d in exc.diagnostics]
        return {**base, "ok": False, "kind": None, "diagnostics": diagnostics, "tools": []}
    document = source.document
    return {
        **base,
        "ok": source.project is not None,
        "kind": source.kind,
        "diagnostics": [d.to_json() for d in source.result.diagnostics],
        "project": {"id": document.get("id"), "version": document.get("version")},
        "objectives": _ids(document.get("objectives")),
        "profiles": _ids(document.get("profiles")),
        "tools": _cards(source, _bindings(ws)),
    }


def _cards(source: ProjectSource, bindings: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A card per tool; only the ids when the file does not validate (its diagnostics say why)."""
    if source.project is None:
        return [{"id": tool_id} for tool_id in _ids(source.document.get("tools"))]
    return [
        {"id": card["tool"]["id"], "description": card["tool"]["description"], **card}
        for card in show_tools(source, bindings)
    ]


def _ids(items: Any) -> list[str]:
    if not isinstance(items, list):
        return []
    return [i["id"] for i in items if isinstance(i, dict) and isinstance(i.get("id"), str)]


def _bindings(ws: Workspace) -> dict[str, Any] | None:
    """The bindings document the workstation knows of, when it reads as one."""
    if ws.bindings is None:
        return None
    try:
        document = loads(read_regular(ws.bindings))
    except (OSError, JsonError):
        return None
    return document if isinstance(document, dict) else None


async def project_state(request: web.Request) -> web.Response:
    ws = workspace(request)
    return json_response(await ws.read(overview, ws))


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get("/api/project", project_state)
    router.add_post("/api/tools/new", operation(design.NewTool, _new))
    router.add_post("/api/tools/include", operation(design.IncludeTool, _include))
    router.add_post("/api/tools/protect", operation(design.ProtectTool, _protect))
    router.add_post(
        "/api/tools/check-call", operation(design.CheckCall, _check_call, changes=False)
    )
