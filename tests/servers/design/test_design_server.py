"""The Design workstation's HTTP API in process, on a real loopback port: the local token
(required, compared in constant time), the bound Host only, no cross-origin change, strict JSON
bodies answered 4xx (never 500), and every change written exactly as the ``compiler.authoring``
function the CLI calls writes it, for a ``.json`` and a ``.seif`` project; a change that does not
validate writes nothing and says where. Also the starter, the release and the binding form, and
``seif design`` itself as a process."""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import requests

from compiler.authoring.checkcall import check_call
from compiler.authoring.protect import protect_tool
from compiler.authoring.source import load_source
from compiler.authoring.tools import include_tool, new_tool
from policy.json.strict import dumps, loads
from servers.design.app import design_app, serving
from servers.http.pages import CSP
from tests.support.coordinates import PROPOSAL, coordinates_doc, write_project
from tests.support.design_harness import REFERENCE, cli_edit, design_process, project_copy

TOKEN = "design-token-5c2a9e1f7b"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
KINDS = ("json", "seif")
PATTERN_SCHEMA = (
    '{"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]+$"}}}'
)


@dataclass
class Reply:
    status: int
    body: Any
    headers: Any


@dataclass
class Design:
    url: str
    http: aiohttp.ClientSession
    project: Path

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        data: bytes | None = None,
    ) -> Reply:
        sent = {**AUTH, **(headers or {})}
        kwargs: dict[str, Any] = {"headers": sent}
        if data is not None:
            kwargs["data"] = data
            sent.setdefault("Content-Type", "application/json")
        elif body is not None:
            kwargs["json"] = body
        async with self.http.request(method, self.url + path, **kwargs) as response:
            text = await response.read()
            parsed = loads(text) if response.content_type == "application/json" else text
            return Reply(response.status, parsed, response.headers)


@asynccontextmanager
async def running(project: Path, registry: Path | None = None) -> AsyncIterator[Design]:
    app = design_app(project, registry=registry, token=TOKEN)
    async with serving(app, "127.0.0.1", 0) as url, aiohttp.ClientSession() as http:
        assert url.endswith(f"/#token={TOKEN}"), url
        yield Design(url.split("/#", 1)[0], http, project)


def run(project: Path, scenario: Callable[[Design], Awaitable[None]], **options: Any) -> None:
    async def main() -> None:
        async with running(project, **options) as d:
            await scenario(d)

    asyncio.run(main())


# --- the guard -----------------------------------------------------------------------------------


def test_the_page_is_served_with_a_strict_csp_and_needs_no_token(tmp_path: Path) -> None:
    async def scenario(d: Design) -> None:
        for path, kind in (
            ("/", "text/html"),
            ("/app.js", "text/javascript"),
            ("/app.css", "text/css"),
        ):
            reply = await d.call("GET", path, headers={"Authorization": ""})
            assert reply.status == 200 and reply.headers["Content-Type"].startswith(kind)
            assert reply.headers["Content-Security-Policy"] == CSP
            assert reply.headers["X-Frame-Options"] == "DENY"
            assert reply.headers["Cache-Control"] == "no-store"
        page = (await d.call("GET", "/")).body.decode()
        assert "<script>" not in page and "style=" not in page  # nothing inline
        assert (await d.call("GET", "/api/project", headers={"Authorization": ""})).headers[
            "Content-Security-Policy"
        ] == CSP

    run(project_copy(tmp_path, "json"), scenario)


def test_every_api_request_needs_the_token_compared_in_constant_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)

    async def scenario(d: Design) -> None:
        for headers in (
            {"Authorization": ""},
            {"Authorization": f"Bearer {TOKEN}x"},
            {"Authorization": f"Bearer {TOKEN[:-1]}"},
            {"Authorization": f"Basic {TOKEN}"},
            {"Authorization": TOKEN},
        ):
            reply = await d.call("GET", "/api/project", headers=headers)
            assert reply.status == 401, headers
            assert reply.body["error"]["code"] == "UNAUTHENTICATED"
            assert TOKEN not in str(reply.body)
        body = {"template": "custom", "id": "x"}
        reply = await d.call("POST", "/api/tools/new", body, headers={"Authorization": ""})
        assert reply.status == 401
        assert (await d.call("GET", "/api/project")).status == 200

    run(project_copy(tmp_path, "json"), scenario)
    assert compared and all(len(a) == len(b) == 32 for a, b in compared)  # digests, not tokens


def test_a_request_naming_another_host_is_refused(tmp_path: Path) -> None:
    async def scenario(d: Design) -> None:
        port = d.url.rsplit(":", 1)[1]
        for host in (f"evil.example:{port}", "127.0.0.1:1", f"127.0.0.1.evil.example:{port}", ""):
            for path in ("/", "/api/project"):
                reply = await d.call("GET", path, headers={"Host": host})
                assert reply.status == 421, (host, path)
                assert reply.body["error"]["code"] == "HOST_REFUSED"
        assert (
            await d.call("GET", "/api/project", headers={"Host": f"localhost:{port}"})
        ).status == 200

    run(project_copy(tmp_path, "json"), scenario)


def test_a_cross_origin_change_is_refused(tmp_path: Path) -> None:
    project = project_copy(tmp_path, "json")
    before = project.read_bytes()

    async def scenario(d: Design) -> None:
        body = {"tool": "search-knowledge"}
        for headers in (
            {"Origin": "http://evil.example"},
            {"Origin": "null"},
            {"Origin": d.url.replace("127.0.0.1", "localhost")},
            {"Sec-Fetch-Site": "cross-site"},
            {"Sec-Fetch-Site": "same-site"},
        ):
            reply = await d.call("POST", "/api/tools/protect", body, headers=headers)
            assert reply.status == 403, headers
            assert reply.body["error"]["code"] == "ORIGIN_REFUSED"
        reply = await d.call("POST", "/api/tools/check-call", _call(), headers={"Origin": d.url})
        assert reply.status == 200, reply.body

    run(project, scenario)
    assert project.read_bytes() == before


def _call(arguments: str = '{"ref": "course/data-literacy/module-2/lesson-3"}') -> dict[str, Any]:
    return {"objective": "learner", "tool": "inspect-context", "arguments": arguments}


@pytest.mark.parametrize(
    ("data", "status", "code"),
    [
        (b"{", 400, "BAD_REQUEST"),
        (b'{"tool": "a", "tool": "b"}', 400, "BAD_REQUEST"),
        (b"[]", 400, "BAD_REQUEST"),
        (b'{"tool": 1}', 400, "BAD_REQUEST"),
        (b'{"tool": "search-knowledge", "extra": 1}', 400, "BAD_REQUEST"),
        (b"{}", 400, "BAD_REQUEST"),
        (b'{"tool": "' + b"a" * (1 << 20) + b'"}', 413, "TOO_LARGE"),
    ],
)
def test_a_bad_body_is_a_4xx_with_a_code(
    tmp_path: Path, data: bytes, status: int, code: str
) -> None:
    project = project_copy(tmp_path, "json")
    before = project.read_bytes()

    async def scenario(d: Design) -> None:
        reply = await d.call("POST", "/api/tools/protect", data=data)
        assert (reply.status, reply.body["error"]["code"]) == (status, code), reply.body
        assert isinstance(reply.body["error"]["message"], str)

    run(project, scenario)
    assert project.read_bytes() == before


def test_other_bad_requests_are_4xx(tmp_path: Path) -> None:
    async def scenario(d: Design) -> None:
        reply = await d.call(
            "POST",
            "/api/tools/protect",
            data=b'{"tool": "x"}',
            headers={"Content-Type": "text/plain"},
        )
        assert (reply.status, reply.body["error"]["code"]) == (415, "UNSUPPORTED_MEDIA_TYPE")
        reply = await d.call("GET", "/api/nowhere")
        assert (reply.status, reply.body["error"]["code"]) == (404, "NOT_FOUND")
        reply = await d.call("DELETE", "/api/project")
        assert reply.status == 405
        reply = await d.call("POST", "/api/tools/check-call", _call('{"ref": '))
        assert (reply.status, reply.body["error"]["code"]) == (400, "NOT_JSON")
        [where] = reply.body["diagnostics"]
        assert (where["field"], where["line"], where["column"]) == ("arguments", 1, 9)
        reply = await d.call("POST", "/api/tools/check-call", {**_call(), "fixtures": "later"})
        assert reply.status == 400
        reply = await d.call("POST", "/api/release", {"environment": "staging"})
        assert (reply.status, reply.body["error"]["code"]) == (400, "REGISTRY_REQUIRED")
        reply = await d.call("GET", "/api/bindings")
        assert (reply.status, reply.body["error"]["code"]) == (404, "NO_BINDINGS")

    run(project_copy(tmp_path, "json"), scenario)


# --- changes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_change_that_does_not_validate_writes_nothing_and_says_where(
    tmp_path: Path, kind: str
) -> None:
    project = project_copy(tmp_path, kind)
    before = project.read_bytes()

    async def scenario(d: Design) -> None:
        body = {"template": "custom", "id": "lookup-code", "schema": PATTERN_SCHEMA}
        reply = await d.call("POST", "/api/tools/new", body)
        assert reply.status == 422, reply.body
        assert reply.body["ok"] is False and reply.body["written"] is False
        assert reply.body["diagnostics"]
        for diagnostic in reply.body["diagnostics"]:
            assert "pointer" in diagnostic or "line" in diagnostic, diagnostic
        assert any(
            "pattern" in (d.get("pointer") or d["message"]) for d in reply.body["diagnostics"]
        )
        reply = await d.call(
            "POST", "/api/tools/new", {"template": "custom", "id": "inspect-context"}
        )
        assert reply.status == 422 and reply.body["diagnostics"][0]["code"] == "TOOL_EXISTS"
        reply = await d.call("POST", "/api/tools/include", {"tool": "nope", "profile": "learner"})
        assert reply.status == 422 and reply.body["diagnostics"][0]["code"] == "UNKNOWN_TOOL"

    run(project, scenario)
    assert project.read_bytes() == before


@pytest.mark.parametrize("kind", KINDS)
def test_every_change_writes_what_the_cli_function_writes(tmp_path: Path, kind: str) -> None:
    project = project_copy(tmp_path, kind)
    twin = project_copy(tmp_path, kind, name="twin")
    fields = ["order:string:required", "verbose:boolean"]

    async def scenario(d: Design) -> None:
        body: dict[str, Any] = {"template": "record-lookup", "id": "lookup-order", "fields": fields}
        reply = await d.call("POST", "/api/tools/new", body)
        assert reply.status == 200, reply.body
        assert reply.body["written"] is True and reply.body["tool"] == "lookup-order"
        assert sorted(reply.body["notIncludedBy"]) == ["authoring", "learner"]
        cli_edit(
            twin,
            lambda s: new_tool(s, template="record-lookup", tool_id="lookup-order", fields=fields),
        )
        assert project.read_bytes() == twin.read_bytes()

        body = {"tool": "lookup-order", "profile": "learner", "required": False}
        reply = await d.call("POST", "/api/tools/include", body)
        assert reply.status == 200 and reply.body["written"] is True, reply.body
        cli_edit(twin, lambda s: include_tool(s, tool_id="lookup-order", profile_id="learner"))
        assert project.read_bytes() == twin.read_bytes()

        reply = await d.call("POST", "/api/tools/protect", {"tool": "lookup-order"})
        assert reply.status == 200 and reply.body["written"] is True, reply.body
        assert reply.body["guards"]
        cli_edit(twin, lambda s: protect_tool(s, tool_id="lookup-order"))
        assert project.read_bytes() == twin.read_bytes()
        again = await d.call("POST", "/api/tools/protect", {"tool": "lookup-order"})
        assert again.status == 200 and again.body["written"] is False

        state = (await d.call("GET", "/api/project")).body
        assert state["ok"] is True and state["kind"] == kind
        card = {c["id"]: c for c in state["tools"]}["lookup-order"]
        assert {"audience", "protection", "connection"} <= card.keys()

    run(project, scenario)
    assert project.read_bytes() != (REFERENCE / f"context-project.{kind}").read_bytes()


@pytest.mark.parametrize("kind", KINDS)
def test_validate_a_call_is_the_engine_decision_and_dispatches_nothing(
    tmp_path: Path, kind: str
) -> None:
    project = project_copy(tmp_path, kind)
    before = project.read_bytes()

    async def scenario(d: Design) -> None:
        reply = await d.call("POST", "/api/tools/check-call", _call())
        assert reply.status == 200, reply.body
        expected = check_call(
            load_source(project),
            objective="learner",
            tool="inspect-context",
            arguments={"ref": "course/data-literacy/module-2/lesson-3"},
        )
        assert reply.body == loads(_json(expected))
        assert reply.body["allowed"] is True

        reply = await d.call("POST", "/api/tools/check-call", _call('{"ref": "", "depth": 9}'))
        assert reply.status == 200 and reply.body["allowed"] is False
        pointers = {e["pointer"] for e in reply.body["arguments"]["errors"]}
        assert "/depth" in pointers or "/ref" in pointers, pointers

        body = {**_call(), "objective": "learner", "tool": "propose-change"}
        reply = await d.call("POST", "/api/tools/check-call", body)
        assert reply.status in (200, 422) and reply.body.get("allowed") is not True

    run(project, scenario)
    assert project.read_bytes() == before


@pytest.mark.parametrize("suffix", [".json", ".seif"])
def test_validate_a_call_at_coordinates_names_the_condition_that_decided(
    tmp_path: Path, suffix: str
) -> None:
    project = write_project(tmp_path, coordinates_doc(), suffix)
    base = {"objective": "authoring", "tool": "propose-change", "approved": True}
    body = {**base, "arguments": dumps(PROPOSAL)}

    async def scenario(d: Design) -> None:
        for at in ({}, {"consumer": "trial"}, {"environment": "production"}, {"consumer": ""}):
            reply = await d.call("POST", "/api/tools/check-call", {**body, **at})
            assert reply.status == 200, reply.body
            given = {k: v for k, v in at.items() if v}
            expected = check_call(
                load_source(project), **base, arguments=PROPOSAL, coordinates=given
            )
            assert reply.body == loads(_json(expected))
            assert reply.body["coordinates"] == given
        reply = await d.call("POST", "/api/tools/check-call", {**body, "consumer": "trial"})
        assert reply.body["allowed"] is False
        assert reply.body["condition"]["when"] == "context.consumer == 'trial'"
        reply = await d.call("POST", "/api/tools/check-call", {**body, "consumer": 7})
        assert (reply.status, reply.body["error"]["code"]) == (400, "BAD_REQUEST")

    run(project, scenario)


def _json(value: Any) -> str:
    from policy.json.strict import dumps

    return dumps(value)


def test_a_file_that_does_not_parse_is_shown_with_line_and_column(tmp_path: Path) -> None:
    project = tmp_path / "broken.seif"
    project.write_text("project broken 1.0.0\nobjective {\n", encoding="utf-8")

    async def scenario(d: Design) -> None:
        state = (await d.call("GET", "/api/project")).body
        assert state["ok"] is False and state["tools"] == []
        assert all("line" in x or "pointer" in x for x in state["diagnostics"])
        reply = await d.call("POST", "/api/tools/protect", {"tool": "x"})
        assert reply.status == 422 and reply.body["diagnostics"]

    run(project, scenario)
    assert project.read_text(encoding="utf-8") == "project broken 1.0.0\nobjective {\n"


# --- starter, release, binding form --------------------------------------------------------------


def test_a_starter_is_written_to_a_local_folder(tmp_path: Path) -> None:
    out = tmp_path / "starters" / "inspect"

    async def scenario(d: Design) -> None:
        body = {"tool": "inspect-context", "lang": "python", "out": str(out)}
        reply = await d.call("POST", "/api/starter", body)
        assert reply.status == 200, reply.body
        assert reply.body["out"] == str(out) and "contract.json" in reply.body["files"]
        assert reply.body["contractDigest"].startswith("sha256:")
        again = await d.call("POST", "/api/starter", body)
        assert again.status == 422 and again.body["error"]["code"] == "OUT_REFUSED"
        bad = await d.call(
            "POST", "/api/starter", {**body, "lang": "cobol", "out": str(tmp_path / "b")}
        )
        assert bad.status == 422 and bad.body["error"]["code"] == "STARTER_LANG_UNKNOWN"

    run(project_copy(tmp_path, "json"), scenario)
    assert (out / "contract.json").is_file()


def test_release_writes_the_bindings_and_the_form_saves_an_endpoint_as_configured(
    tmp_path: Path,
) -> None:
    project = project_copy(tmp_path, "seif")
    registry = tmp_path / "registry"
    bindings = tmp_path / "bindings.staging.json"

    async def scenario(d: Design) -> None:
        reply = await d.call("POST", "/api/release", {"environment": "staging"})
        assert reply.status == 200, reply.body
        assert (reply.body["promoted"], reply.body["deployed"]) == (False, False)
        assert "nothing was promoted or deployed" in reply.body["nothingPromoted"]
        assert reply.body["bindings"] == str(bindings) and reply.body["revision"] == 1
        rows = {r["id"]: r for r in reply.body["form"]["tools"]}
        assert {r["status"] for r in rows.values()} == {"to fill in"}

        written = bindings.read_bytes()
        body = {"tool": "inspect-context", "endpoint": "http://example.com/x", "secretRef": ""}
        refused = await d.call("POST", "/api/bindings", body)
        assert refused.status == 422, refused.body
        assert refused.body["diagnostics"][0]["pointer"] == "/tools/inspect-context/endpoint"
        assert bindings.read_bytes() == written

        body = {"tool": "inspect-context", "endpoint": "http://127.0.0.1:8801", "secretRef": ""}
        saved = await d.call("POST", "/api/bindings", body)
        assert saved.status == 200, saved.body
        rows = {r["id"]: r for r in saved.body["tools"]}
        assert rows["inspect-context"]["status"] == "configured"
        assert rows["search-knowledge"]["status"] == "to fill in"
        assert "ready" not in {r["status"] for r in rows.values()}
        document = loads(bindings.read_bytes())
        assert document["tools"]["inspect-context"]["endpoint"] == "http://127.0.0.1:8801"
        assert "secretRef" not in document["tools"]["inspect-context"]
        assert list(document["tools"]) == list(loads(written)["tools"])  # key order kept

        state = (await d.call("GET", "/api/bindings")).body
        assert {r["id"]: r["status"] for r in state["tools"]}["inspect-context"] == "configured"
        state = (await d.call("GET", "/api/project")).body
        cards = {c["id"]: c for c in state["tools"]}
        assert cards["inspect-context"]["connection"]["state"] == "configured"

        other = tmp_path / "elsewhere.json"
        other.write_bytes(bindings.read_bytes())
        opened = await d.call("POST", "/api/bindings/open", {"file": str(other)})
        assert opened.status == 200 and opened.body["file"] == str(other)
        missing = await d.call("POST", "/api/bindings/open", {"file": str(tmp_path / "none")})
        assert missing.status == 422 and missing.body["error"]["code"] == "BINDINGS_UNREADABLE"
        assert (await d.call("GET", "/api/bindings")).body["file"] == str(other)

    run(project, scenario, registry=registry)
    assert (registry / "builds").is_dir()


# --- the command -----------------------------------------------------------------------------


def test_seif_design_prints_its_url_with_the_token_and_stops_on_sigterm(tmp_path: Path) -> None:
    project = project_copy(tmp_path, "json")
    with design_process(project) as running:
        assert running.url.startswith("http://127.0.0.1:")
        assert requests.get(running.base + "/api/project", timeout=10).status_code == 401
        auth = {"Authorization": f"Bearer {running.token}"}
        reply = requests.get(running.base + "/api/project", headers=auth, timeout=10)
        assert reply.status_code == 200 and reply.json()["file"] == str(project)


def test_a_valid_file_s_warnings_are_shown_as_warnings(tmp_path: Path) -> None:
    """A condition on an optional argument without `has()` validates with a warning: the
    overview is `ok` and carries it with `severity: warning` (the page lists it as such)."""
    project = tmp_path / "warned.seif"
    text = (REFERENCE / "context-project.seif").read_text(encoding="utf-8")
    rule = "include inspect-context required"
    assert text.count(rule) >= 1
    warned = text.replace(rule, rule + ' {\n    deny "deep" when "args.depth > 2"\n  }', 1)
    project.write_text(warned, encoding="utf-8")

    async def scenario(d: Design) -> None:
        state = (await d.call("GET", "/api/project")).body
        assert state["ok"] is True and state["tools"]
        assert [(x["code"], x["severity"]) for x in state["diagnostics"]] == [
            ("CEL_OPTIONAL_WITHOUT_HAS", "warning")
        ]

    run(project, scenario)
