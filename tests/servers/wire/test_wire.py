"""The wire contract has one home (servers/wire): no error code, HTTP status or JSON-RPC code is
spelled anywhere else in servers/, the runtime registers exactly the routes of the route
table, and the OpenAPI document lists exactly the statuses each route can answer."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace
from typing import cast, get_args

import pytest

from servers.http.app import HANDLERS, create_app
from servers.log.encoding import EVENTS
from servers.runtime.startup import Prepared
from servers.wire import errors, openapi, reasons
from servers.wire.answers import TraceEventKind
from servers.wire.errors import CODES, ErrorCode, Refused
from servers.wire.fields import body_fields, decode
from servers.wire.requests import CompleteTurnRequest, ExecuteRequest
from servers.wire.routes import ROUTES
from tests.support.paths import ROOT

SERVERS = ROOT / "servers"
RESPONSES = frozenset({"Response", "StreamResponse", "json_response", "error_response"})
CLIENTS = {
    SERVERS / "executor": "an HTTP client of the executor protocol: the classes of statuses"
    " (2xx, 3xx) it reads are its peer's, never an answer of seif's",
    SERVERS / "upstream": "an HTTP client of upstream MCP servers (servers/upstream/calls.py):"
    " the statuses it reads are its peer's, never an answer of seif's",
}
"""Packages whose comparisons with a status are allowed, and why."""


def _name(node: ast.AST) -> str | None:
    return getattr(node, "attr", getattr(node, "id", None))


def _given_as_status(node: ast.AST, compared: bool) -> list[ast.AST]:
    """The expressions ``node`` gives as an HTTP status: ``status=``, a response
    constructor's arguments after the body, the sides of a comparison with a ``status`` (when
    ``compared``), the value of a ``"status"`` key."""
    if isinstance(node, ast.keyword) and node.arg == "status":
        return [node.value]
    if isinstance(node, ast.Call) and _name(node.func) in RESPONSES:
        return list(node.args[1:])
    if compared and isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        if any(_name(side) == "status" for side in sides):
            return [inner for side in sides for inner in ast.walk(side)]
    if isinstance(node, ast.Dict):
        pairs = zip(node.keys, node.values, strict=True)
        return [v for k, v in pairs if isinstance(k, ast.Constant) and k.value == "status"]
    return []


def _status_literals(tree: ast.AST, compared: bool = True) -> list[tuple[int, int]]:
    """(line, value) of each integer 100..599 given as a status, and of each JSON-RPC error
    number (-32768..-32000) anywhere."""
    found = []
    for node in ast.walk(tree):
        for given in _given_as_status(node, compared):
            value = getattr(given, "value", None)
            if type(value) is int and 100 <= value < 600:
                found.append((given.lineno, value))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            value = getattr(node.operand, "value", None)
            if type(value) is int and 32000 <= value <= 32768:
                found.append((node.lineno, -value))
    return sorted(found)


def _literals(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    where = path.relative_to(ROOT).as_posix()
    out = [
        f"{where}:{node.lineno}: error code {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in CODES
    ]
    compared = not any(client in path.parents for client in CLIENTS)
    out += [f"{where}:{n}: status {value}" for n, value in _status_literals(tree, compared)]
    return out


def test_no_error_code_or_status_is_spelled_outside_the_wire_package() -> None:
    files = [p for p in SERVERS.rglob("*.py") if SERVERS / "wire" not in p.parents]
    assert len(files) > 50
    found = [line for path in sorted(files) for line in _literals(path)]
    assert found == []


def test_the_scan_finds_what_it_looks_for() -> None:
    """Not vacuous: each kind of literal the scan forbids is found in a sample."""
    text = (
        'raise Problem("CONTEXT_UNKNOWN")\n'
        "web.Response(body=b'', status=404)\n"
        "json_response({}, 202)\n"
        "if answer.status == 401: pass\n"
        'start = {"status": 500}\n'
        "code = -32600\n"
    )
    tree = ast.parse(text)
    assert _status_literals(tree) == [(2, 404), (3, 202), (4, 401), (5, 500), (6, -32600)]
    assert [line for line, _ in _status_literals(tree, compared=False)] == [2, 3, 5, 6]
    assert "CONTEXT_UNKNOWN" in CODES


def test_every_route_of_the_table_is_registered_and_nothing_else() -> None:
    # the router is built by create_app, before any resource is opened: a stand-in suffices
    app = create_app(cast(Prepared, SimpleNamespace(replica=None, approval_token="")))
    registered = {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.resource is not None
    }
    table = {(r.method, r.path) for r in ROUTES}
    heads = {("HEAD", path) for method, path in table if method == "GET"}  # aiohttp's own
    assert registered == table | heads
    assert {r.handler for r in ROUTES} == {*HANDLERS, "metrics"}


def test_the_document_lists_exactly_the_statuses_a_route_can_answer() -> None:
    paths = openapi.document()["paths"]
    for route in ROUTES:
        listed = {int(s) for s in paths[route.path][route.method.lower()]["responses"]}
        answered = {*route.answers, *(e.status for e in route.errors())}
        assert listed == answered, route.path


def test_every_error_code_has_one_status_and_message() -> None:
    assert {e.code for e in ErrorCode} == CODES
    for error in ErrorCode:
        assert 400 <= error.status < 600 and error.message and "\n" not in error.message
    shared = {e.code for e in ErrorCode if sum(o.code == e.code for o in ErrorCode) > 1}
    assert shared == {"OBJECTIVE_UNKNOWN"}  # 400 from resolve, 404 from the MCP mount
    assert ErrorCode.TOO_LARGE.code == reasons.TOO_LARGE  # an error, and a receipt reason
    assert errors.INVALID_REQUEST == -32600


def test_a_refusal_carries_a_code_and_its_answer_says_it() -> None:
    refused = Refused(ErrorCode.CONTEXT_UNKNOWN)
    assert not hasattr(refused, "status")
    assert refused.body() == {"error": {"code": "CONTEXT_UNKNOWN", "message": "no such context"}}
    shown = Refused(ErrorCode.REFUSED, "bad", code="SEIF_SYNTAX", diagnostics=[])
    assert shown.body() == {"error": {"code": "SEIF_SYNTAX", "message": "bad"}, "diagnostics": []}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"outcome": "DONE"}, "`outcome` must be `COMPLETED` or `FAILED`"),
        ({"outcome": 3}, "`outcome` must be a non-empty string of at most 256 characters"),
        ({}, "missing field `outcome`"),
        ({"outcome": None}, "missing field `outcome`"),
        ({"outcome": "FAILED", "b": 1, "a": 2}, "unknown field `b`"),
    ],
)
def test_the_decoder_says_what_is_wrong(body: dict[str, object], message: str) -> None:
    with pytest.raises(Refused) as refused:
        decode(CompleteTurnRequest, body)
    assert refused.value.error is ErrorCode.BAD_REQUEST
    assert refused.value.message.startswith(message)


def test_a_decoded_body_is_its_typed_request() -> None:
    body = {"contextRef": "ctx_1", "tool": "t", "callId": "c", "arguments": {}, "turnId": None}
    assert decode(ExecuteRequest, body) == ExecuteRequest(
        context_ref="ctx_1", tool="t", call_id="c", arguments={}
    )
    names = [f.name for f in body_fields(ExecuteRequest)]
    assert names == ["contextRef", "tool", "callId", "arguments", "approvalId", "turnId"]


def test_the_trace_events_on_the_wire_are_the_log_s() -> None:
    """The kinds of record a trace answers with are the ones the decision log writes."""
    assert set(get_args(TraceEventKind)) == EVENTS
