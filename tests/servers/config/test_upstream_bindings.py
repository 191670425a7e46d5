"""The bindings file's ``upstreams`` and the tools bound to them (docs/runtime-config.md,
docs/upstream-mcp.md "Binding"): what loads, into which values, every refusal located by its
JSON pointer and its line:column, and secrets read only for upstreams a tool is bound to."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from policy.ir import Project, Upstream
from policy.json.positions import value_spans
from servers.config.files import CODES, Binding, ConfigError, load_bindings
from servers.config.upstreams import HttpUpstream, StdioUpstream, UpstreamBinding
from tests.support.config_support import FakeKeyring, RecordingEnv

FS_TOKEN = "fs-level-secret-3c9d"
TICKETS_TOKEN = "tickets-token-a71e0f"
UNUSED_TOKEN = "unused-upstream-token-55b2"
SECRETS = (FS_TOKEN, TICKETS_TOKEN, UNUSED_TOKEN)
KEYCHAIN = {"context-tool-tickets": TICKETS_TOKEN}


def pinned(project: Project) -> Project:
    """The reference project with `inspect-context` imported from `fs` and `search-knowledge`
    from `tickets` (`propose-change` stays an executor tool)."""
    servers = {"inspect-context": "fs", "search-knowledge": "tickets"}
    tools = tuple(
        dataclasses.replace(
            t,
            upstream=Upstream(
                server=servers[t.id], tool=t.name, descriptor_digest="sha256:" + "ab" * 32
            ),
        )
        if t.id in servers
        else t
        for t in project.tools
    )
    return dataclasses.replace(project, tools=tools)


@pytest.fixture
def project(reference_ir: Project) -> Project:
    return pinned(reference_ir)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    folder = tmp_path / "bin"
    folder.mkdir()
    program = folder / "fake-mcp"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    (tmp_path / "srv").mkdir()
    return {
        "PATH": f"relative/bin{os.pathsep}{folder}",
        "CONTEXT_TOOL_FS_LEVEL": FS_TOKEN,
        "CONTEXT_TOOL_UNUSED": UNUSED_TOKEN,
        "CONTEXT_TOOL_PROPOSE": "propose-token-11",
    }


def doc() -> dict[str, Any]:
    return {
        "environment": "staging",
        "revision": 4,
        "upstreams": {
            "fs": {
                "command": ["fake-mcp", "--root", "/srv/docs"],
                "env": {"LOG_LEVEL": "env:CONTEXT_TOOL_FS_LEVEL"},
                "cwd": "srv",
            },
            "tickets": {
                "url": "https://tickets.example/mcp",
                "secretRef": "keychain:context-tool-tickets",
            },
        },
        "tools": {
            "inspect-context": {"upstream": "fs", "timeoutMs": 5000, "maxBytes": 4096},
            "search-knowledge": {"upstream": "tickets"},
            "propose-change": {"endpoint": "http://127.0.0.1:9000/propose"},
        },
    }


def write(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "bindings.json"
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path


def test_upstreams_load_into_their_values(
    tmp_path: Path, project: Project, env: dict[str, str]
) -> None:
    keychain = FakeKeyring(KEYCHAIN)
    bindings = load_bindings(write(tmp_path, doc()), project, env, keychain)
    fs, tickets = bindings.upstreams["fs"], bindings.upstreams["tickets"]
    assert fs == StdioUpstream(
        "fs",
        (str(tmp_path / "bin" / "fake-mcp"), "--root", "/srv/docs"),
        {"LOG_LEVEL": FS_TOKEN},
        (tmp_path / "srv").resolve(),
    )
    assert isinstance(tickets, HttpUpstream) and tickets.secret == TICKETS_TOKEN
    assert (tickets.url, tickets.ca_file, tickets.tls is not None) == (
        "https://tickets.example/mcp",
        None,
        True,
    )
    assert bindings.tools["inspect-context"] == UpstreamBinding("inspect-context", "fs", 5000, 4096)
    declared = project.tool("search-knowledge")
    assert declared is not None
    assert bindings.tools["search-knowledge"] == UpstreamBinding(
        "search-knowledge", "tickets", declared.timeout_ms, 65536
    )
    assert isinstance(bindings.tools["propose-change"], Binding)
    for shown in (repr(bindings), repr(fs), repr(tickets), str(bindings)):
        assert not any(secret in shown for secret in SECRETS)


def test_an_absolute_command_is_kept_and_needs_no_path(
    tmp_path: Path, project: Project, env: dict[str, str]
) -> None:
    document = doc()
    document["upstreams"]["fs"] = {"command": [sys.executable, "-m", "server"]}
    bindings = load_bindings(write(tmp_path, document), project, {}, FakeKeyring(KEYCHAIN))
    fs = bindings.upstreams["fs"]
    assert isinstance(fs, StdioUpstream)
    assert fs.command == (sys.executable, "-m", "server") and not fs.env and fs.cwd is None


def test_only_bound_upstreams_secrets_are_read(
    tmp_path: Path, project: Project, env: dict[str, str]
) -> None:
    """An upstream no tool is bound to is checked, left out of the result, and its secrets are
    never looked at; the bound ones' are, one key each, the environment never listed."""
    document = doc()
    document["upstreams"]["spare"] = {
        "url": "https://spare.example/mcp",
        "secretRef": "env:CONTEXT_TOOL_UNUSED",
    }
    document["upstreams"]["idle"] = {
        "command": ["fake-mcp"],
        "env": {"TOKEN": "env:CONTEXT_TOOL_NOT_SET"},
    }
    recording = RecordingEnv(env)
    keychain = FakeKeyring(KEYCHAIN)
    bindings = load_bindings(write(tmp_path, document), project, recording, keychain)
    assert set(bindings.upstreams) == {"fs", "tickets"}
    assert sorted(recording.read) == ["CONTEXT_TOOL_FS_LEVEL", "PATH", "PATH"]
    assert not recording.listed
    assert keychain.calls == [("seif", "context-tool-tickets")]


def test_a_missing_secret_of_a_bound_upstream_is_located(
    tmp_path: Path, project: Project, env: dict[str, str]
) -> None:
    del env["CONTEXT_TOOL_FS_LEVEL"]
    with pytest.raises(ConfigError) as excinfo:
        load_bindings(write(tmp_path, doc()), project, env, FakeKeyring({}))
    assert located(excinfo, write(tmp_path, doc())) == [
        ("SECRET_MISSING", "/upstreams/fs/env/LOG_LEVEL"),
        ("SECRET_MISSING", "/upstreams/tickets/secretRef"),
    ]


def test_the_trace_key_differs_from_upstream_secrets(
    tmp_path: Path, project: Project, env: dict[str, str]
) -> None:
    document = {**doc(), "traceKeyRef": "env:CONTEXT_TOOL_FS_LEVEL"}
    with pytest.raises(ConfigError) as excinfo:
        load_bindings(write(tmp_path, document), project, env, FakeKeyring(KEYCHAIN))
    assert located(excinfo, write(tmp_path, document)) == [
        ("TRACE_KEY_NOT_DISTINCT", "/traceKeyRef")
    ]


def located(excinfo: pytest.ExceptionInfo[ConfigError], path: Path) -> list[tuple[str, str]]:
    """The (code, pointer) pairs of a refusal, after checking each is at the line and column
    where the file's text has the value its pointer names, and that no secret is shown."""
    text = path.read_text(encoding="utf-8")
    spans = value_spans(text)
    found = []
    for p in excinfo.value.diagnostics:
        assert p.code in CODES and p.file == str(path)
        assert p.pointer is not None
        start = spans[p.pointer][0]
        line = text.count("\n", 0, start) + 1
        column = start - (text.rfind("\n", 0, start) + 1) + 1
        assert (p.line, p.column) == (line, column), p
        assert p.message and p.message[0] == p.message[0].lower() and not p.message.endswith(".")
        for shown in (p.message, repr(p), str(excinfo.value)):
            assert not any(secret in shown for secret in SECRETS)
        found.append((p.code, p.pointer))
    return found


def upstream(server: str, **changes: Any) -> dict[str, Any]:
    """The base document with the upstream ``server`` changed (``...`` removes a key)."""
    document = doc()
    entry = {**document["upstreams"][server], **changes}
    document["upstreams"][server] = {k: v for k, v in entry.items() if v is not ...}
    return document


def tool(tool_id: str, **changes: Any) -> dict[str, Any]:
    document = doc()
    entry = {**document["tools"][tool_id], **changes}
    document["tools"][tool_id] = {k: v for k, v in entry.items() if v is not ...}
    return document


FS = "/upstreams/fs"
TICKETS = "/upstreams/tickets"
INSPECT = "/tools/inspect-context"
SEARCH = "/tools/search-knowledge"
PROPOSE = "/tools/propose-change"

UPSTREAM_REFUSALS: list[tuple[str, Any, str, str]] = [
    ("upstreams not an object", {**doc(), "upstreams": []}, "WRONG_TYPE", "/upstreams"),
    (
        "upstream not an object",
        {**doc(), "upstreams": {**doc()["upstreams"], "fs": "x"}},
        "WRONG_TYPE",
        FS,
    ),
    (
        "upstream id",
        {**doc(), "upstreams": {**doc()["upstreams"], "Bad_Id": {"command": ["fake-mcp"]}}},
        "INVALID_ID",
        "/upstreams/Bad_Id",
    ),
    ("neither command nor url", upstream("fs", command=..., env=..., cwd=...), "MISSING_KEY", FS),
    (
        "command and url",
        upstream("fs", url="https://x.example/mcp"),
        "BINDING_TARGET_INVALID",
        FS + "/url",
    ),
    (
        "http key on stdio",
        upstream("fs", secretRef="env:CONTEXT_TOOL_X"),
        "UNKNOWN_KEY",
        FS + "/secretRef",
    ),
    ("stdio key on http", upstream("tickets", cwd="/"), "UNKNOWN_KEY", TICKETS + "/cwd"),
    ("unknown key", upstream("fs", shell=True), "UNKNOWN_KEY", FS + "/shell"),
    (
        "command a string",
        upstream("fs", command="fake-mcp --root /"),
        "WRONG_TYPE",
        FS + "/command",
    ),
    ("command empty", upstream("fs", command=[]), "COMMAND_INVALID", FS + "/command"),
    (
        "command word empty",
        upstream("fs", command=["fake-mcp", ""]),
        "COMMAND_INVALID",
        FS + "/command/1",
    ),
    (
        "command word a number",
        upstream("fs", command=["fake-mcp", 1]),
        "WRONG_TYPE",
        FS + "/command/1",
    ),
    (
        "program relative",
        upstream("fs", command=["bin/fake-mcp"]),
        "COMMAND_INVALID",
        FS + "/command/0",
    ),
    (
        "program not on PATH",
        upstream("fs", command=["no-such-mcp"]),
        "COMMAND_NOT_FOUND",
        FS + "/command/0",
    ),
    (
        "program absent",
        upstream("fs", command=["/nonexistent/mcp"]),
        "COMMAND_NOT_FOUND",
        FS + "/command/0",
    ),
    ("program a folder", upstream("fs", command=["/"]), "COMMAND_NOT_FOUND", FS + "/command/0"),
    ("env not an object", upstream("fs", env=["A"]), "WRONG_TYPE", FS + "/env"),
    (
        "env name",
        upstream("fs", env={"LOG-LEVEL": "env:CONTEXT_TOOL_FS_LEVEL"}),
        "ENV_NAME_INVALID",
        FS + "/env/LOG-LEVEL",
    ),
    (
        "env value not a reference",
        upstream("fs", env={"LEVEL": "debug"}),
        "SECRET_REF_REFUSED",
        FS + "/env/LEVEL",
    ),
    (
        "env value a seif token",
        upstream("fs", env={"T": "env:SEIF_APP_TOKEN"}),
        "SECRET_REF_SEIF_REFUSED",
        FS + "/env/T",
    ),
    ("env value a number", upstream("fs", env={"T": 1}), "WRONG_TYPE", FS + "/env/T"),
    ("cwd absent", upstream("fs", cwd="no-such-folder"), "CWD_INVALID", FS + "/cwd"),
    ("cwd a file", upstream("fs", cwd="bin/fake-mcp"), "CWD_INVALID", FS + "/cwd"),
    ("cwd a number", upstream("fs", cwd=1), "WRONG_TYPE", FS + "/cwd"),
    (
        "url not https",
        upstream("tickets", url="http://tickets.example/mcp"),
        "ENDPOINT_HTTP_NOT_LOOPBACK",
        TICKETS + "/url",
    ),
    (
        "url scheme",
        upstream("tickets", url="ws://localhost/mcp"),
        "ENDPOINT_SCHEME_REFUSED",
        TICKETS + "/url",
    ),
    (
        "url userinfo",
        upstream("tickets", url=f"https://u:{TICKETS_TOKEN}@t.example/mcp"),
        "ENDPOINT_USERINFO_REFUSED",
        TICKETS + "/url",
    ),
    (
        "url query",
        upstream("tickets", url=f"https://t.example/mcp?k={TICKETS_TOKEN}"),
        "ENDPOINT_QUERY_REFUSED",
        TICKETS + "/url",
    ),
    (
        "url fragment",
        upstream("tickets", url="https://t.example/mcp#x"),
        "ENDPOINT_FRAGMENT_REFUSED",
        TICKETS + "/url",
    ),
    ("url relative", upstream("tickets", url="/mcp"), "ENDPOINT_INVALID", TICKETS + "/url"),
    ("url a number", upstream("tickets", url=1), "WRONG_TYPE", TICKETS + "/url"),
    (
        "secretRef refused",
        upstream("tickets", secretRef="env:HOME"),
        "SECRET_REF_REFUSED",
        TICKETS + "/secretRef",
    ),
    (
        "caFile on http",
        upstream("tickets", url="http://127.0.0.1:8080/mcp", caFile="ca.pem"),
        "CA_FILE_HTTP_REFUSED",
        TICKETS + "/caFile",
    ),
    (
        "caFile absent",
        upstream("tickets", caFile="no-such.pem"),
        "CA_FILE_UNREADABLE",
        TICKETS + "/caFile",
    ),
    (
        "endpoint and upstream",
        tool("inspect-context", endpoint="http://127.0.0.1:9000/x"),
        "BINDING_TARGET_INVALID",
        INSPECT + "/endpoint",
    ),
    (
        "neither endpoint nor upstream",
        tool("inspect-context", upstream=...),
        "MISSING_KEY",
        INSPECT,
    ),
    (
        "unknown upstream",
        tool("inspect-context", upstream="fss"),
        "UPSTREAM_UNKNOWN",
        INSPECT + "/upstream",
    ),
    ("upstream a number", tool("inspect-context", upstream=1), "WRONG_TYPE", INSPECT + "/upstream"),
    (
        "secretRef on an upstream tool",
        tool("inspect-context", secretRef="env:CONTEXT_TOOL_FS_LEVEL"),
        "UNKNOWN_KEY",
        INSPECT + "/secretRef",
    ),
    (
        "caFile on an upstream tool",
        tool("search-knowledge", caFile="ca.pem"),
        "UNKNOWN_KEY",
        SEARCH + "/caFile",
    ),
    (
        "bound to the other upstream",
        tool("inspect-context", upstream="tickets"),
        "UPSTREAM_MISMATCH",
        INSPECT + "/upstream",
    ),
    (
        "pinned tool on an endpoint",
        tool("inspect-context", upstream=..., endpoint="http://127.0.0.1:9000/x"),
        "UPSTREAM_MISMATCH",
        INSPECT + "/endpoint",
    ),
    (
        "executor tool on an upstream",
        tool("propose-change", endpoint=..., upstream="fs"),
        "UPSTREAM_MISMATCH",
        PROPOSE + "/upstream",
    ),
    (
        "timeout above declared",
        tool("inspect-context", timeoutMs=30000),
        "TIMEOUT_EXCEEDS_DECLARED",
        INSPECT + "/timeoutMs",
    ),
    (
        "maxBytes out of range",
        tool("inspect-context", maxBytes=0),
        "OUT_OF_RANGE",
        INSPECT + "/maxBytes",
    ),
]


@pytest.mark.parametrize(
    ("document", "code", "pointer"),
    [case[1:] for case in UPSTREAM_REFUSALS],
    ids=[case[0] for case in UPSTREAM_REFUSALS],
)
def test_upstream_refusals(
    tmp_path: Path, project: Project, env: dict[str, str], document: Any, code: str, pointer: str
) -> None:
    path = write(tmp_path, document)
    with pytest.raises(ConfigError) as excinfo:
        load_bindings(path, project, env, FakeKeyring(KEYCHAIN))
    assert located(excinfo, path) == [(code, pointer)]


def test_every_problem_is_reported_together(
    tmp_path: Path, project: Project, env: dict[str, str]
) -> None:
    document = doc()
    document["upstreams"]["fs"]["command"] = ["no-such-mcp"]
    document["upstreams"]["tickets"]["url"] = "http://tickets.example/mcp"
    document["tools"]["inspect-context"]["upstream"] = "nope"
    document["tools"]["propose-change"] = {"upstream": "fs"}
    path = write(tmp_path, document)
    with pytest.raises(ConfigError) as excinfo:
        load_bindings(path, project, env, FakeKeyring(KEYCHAIN))
    assert sorted(located(excinfo, path)) == sorted(
        [
            ("COMMAND_NOT_FOUND", FS + "/command/0"),
            ("ENDPOINT_HTTP_NOT_LOOPBACK", TICKETS + "/url"),
            ("UPSTREAM_UNKNOWN", INSPECT + "/upstream"),
            ("UPSTREAM_MISMATCH", PROPOSE + "/upstream"),
        ]
    )
    unknown = next(p for p in excinfo.value.diagnostics if p.code == "UPSTREAM_UNKNOWN")
    assert "`fs`, `tickets`" in unknown.message


def test_a_relative_path_folder_is_never_searched(
    tmp_path: Path, project: Project, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`PATH` folders that are not absolute would make the program depend on the runtime's
    working directory: they are skipped."""
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, doc())
    with pytest.raises(ConfigError) as excinfo:
        load_bindings(path, project, {**env, "PATH": "bin"}, FakeKeyring(KEYCHAIN))
    assert located(excinfo, path) == [("COMMAND_NOT_FOUND", FS + "/command/0")]


def test_messages_never_quote_arguments_or_urls(
    tmp_path: Path, project: Project, env: dict[str, str]
) -> None:
    document = upstream("fs", command=["no-such-mcp", f"--token={FS_TOKEN}"])
    document["upstreams"]["tickets"]["url"] = f"http://tickets.example/{TICKETS_TOKEN}"
    path = write(tmp_path, document)
    with pytest.raises(ConfigError) as excinfo:
        load_bindings(path, project, env, FakeKeyring(KEYCHAIN))
    assert len(located(excinfo, path)) == 2  # located() checks no secret is shown
