"""The runtime configuration loaders: credentials, bindings and the approval token.

Every refusal is a case (document, code, pointer); each case also checks that no secret value
appears in any message. A recording environment checks that only named secrets are read.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import blake3
import pytest

from policy.diagnostic import Diagnostic, Location, render
from servers.config import files as config_files
from servers.config.files import (
    CODES,
    SCOPES,
    Binding,
    Bindings,
    ConfigError,
    Credential,
    Credentials,
    approval_token,
    load_bindings,
    load_credentials,
)
from tests.servers.config.test_upstream_bindings import UPSTREAM_REFUSALS
from tests.support.config_support import KEYCHAIN_TOKEN, FakeKeyring, RecordingEnv
from tests.support.paths import ROOT

APP_TOKEN = "app-token-7f3a9c1e5b"
OPS_TOKEN = "ops-token-2d8e6b0a4c"

TOOL_TOKEN = "tool-token-c4a1f8e2d0"
SEARCH_TOKEN = "search-token-6e0d2b9f"
TRACE_SECRET = "trace-secret-58ac37e1"
REGISTRY_TOKEN = "registry-token-0b5f1d"
SECRETS = (
    APP_TOKEN,
    OPS_TOKEN,
    KEYCHAIN_TOKEN,
    TOOL_TOKEN,
    SEARCH_TOKEN,
    TRACE_SECRET,
    REGISTRY_TOKEN,
)

ENV = {
    "SEIF_APP_TOKEN": APP_TOKEN,
    "OPS_TOKEN": OPS_TOKEN,
    "EMPTY_TOKEN": "",
    "SEIF_REGISTRY_TOKEN": REGISTRY_TOKEN,
    "SEIF_OTHER": APP_TOKEN,
    "CONTEXT_TOOL_INSPECT_TOKEN": TOOL_TOKEN,
    "CONTEXT_TOOL_UNUSED": "unused-secret-4417",
    "CONTEXT_TOOL_EMPTY": "",
    "CONTEXT_TOOL_TRACE_KEY": TRACE_SECRET,
    "HOME": "/root",
}
KEYCHAIN = {"app-keychain": KEYCHAIN_TOKEN, "context-tool-search": SEARCH_TOKEN}


def write(tmp_path: Path, doc: Any, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return path


def assert_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


def refusal(excinfo: pytest.ExceptionInfo[ConfigError]) -> list[tuple[str, str]]:
    """The (code, pointer) pairs of a refusal, after checking no message leaks a secret."""
    error = excinfo.value
    assert error.diagnostics
    assert_no_secret(str(error))
    assert_no_secret(repr(error))
    for p in error.diagnostics:
        assert p.code in CODES
        assert p.message and p.message == p.message.strip() and not p.message.endswith(".")
        assert p.message[0] == p.message[0].lower()
        assert_no_secret(p.message)
        assert_no_secret(repr(p))
    return [(p.code, p.pointer) for p in error.diagnostics]


# --- credentials -----------------------------------------------------------------------------


def credentials_doc() -> dict[str, Any]:
    return {
        "credentials": [
            {
                "id": "tutor-app",
                "tokenRef": "env:SEIF_APP_TOKEN",
                "scopes": ["context.resolve", "tools.execute"],
            },
            {"id": "ops", "tokenRef": "keychain:app-keychain", "scopes": ["traces.read"]},
        ]
    }


def test_credentials_load_env_and_keychain(tmp_path: Path) -> None:
    keychain = FakeKeyring(KEYCHAIN)
    loaded = load_credentials(write(tmp_path, credentials_doc()), ENV, keyring_get=keychain)
    assert [c.id for c in loaded] == ["tutor-app", "ops"]
    app, ops = list(loaded)
    assert app == Credential(
        "tutor-app", frozenset({"context.resolve", "tools.execute"}), APP_TOKEN
    )
    assert ops.scopes == frozenset({"traces.read"}) and ops.token == KEYCHAIN_TOKEN
    assert keychain.calls == [("seif", "app-keychain")]
    assert sorted(loaded.tokens()) == sorted([APP_TOKEN, KEYCHAIN_TOKEN])


def test_authenticate(tmp_path: Path) -> None:
    loaded = load_credentials(
        write(tmp_path, credentials_doc()), ENV, keyring_get=FakeKeyring(KEYCHAIN)
    )
    assert loaded.authenticate(APP_TOKEN) is not None
    assert loaded.authenticate(APP_TOKEN).id == "tutor-app"  # type: ignore[union-attr]  # checked
    assert loaded.authenticate(KEYCHAIN_TOKEN).id == "ops"  # type: ignore[union-attr]  # known
    wrong = [
        None,
        "",
        " ",
        APP_TOKEN[:-1],
        APP_TOKEN + "x",
        APP_TOKEN.upper(),
        "ä€\udcff",
        OPS_TOKEN,
    ]
    for token in wrong:
        assert loaded.authenticate(token) is None


def test_authenticate_compares_every_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded = load_credentials(
        write(tmp_path, credentials_doc()), ENV, keyring_get=FakeKeyring(KEYCHAIN)
    )
    calls: list[int] = []
    real = config_files.hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append(1)
        return real(a, b)

    monkeypatch.setattr(config_files.hmac, "compare_digest", counting)
    for token in (APP_TOKEN, KEYCHAIN_TOKEN, "nope"):
        calls.clear()
        loaded.authenticate(token)
        assert len(calls) == len(list(loaded)) == 2


def credential_entry(**changes: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": "tutor-app",
        "tokenRef": "env:SEIF_APP_TOKEN",
        "scopes": ["context.resolve"],
    }
    entry.update(changes)
    return {k: v for k, v in entry.items() if v is not ...}


def ops_entry(**changes: Any) -> dict[str, Any]:
    return credential_entry(**{"id": "ops", "tokenRef": "env:OPS_TOKEN", **changes})


CREDENTIAL_REFUSALS: list[tuple[str, Any, str, str]] = [
    ("root not an object", [], "WRONG_TYPE", ""),
    ("unknown root key", {"credentials": [credential_entry()], "x": 1}, "UNKNOWN_KEY", "/x"),
    ("missing credentials", {}, "MISSING_KEY", ""),
    ("credentials not a list", {"credentials": {}}, "WRONG_TYPE", "/credentials"),
    ("no credential", {"credentials": []}, "CREDENTIALS_EMPTY", "/credentials"),
    ("entry not an object", {"credentials": ["x"]}, "WRONG_TYPE", "/credentials/0"),
    (
        "unknown entry key",
        {"credentials": [credential_entry(token=APP_TOKEN)]},
        "UNKNOWN_KEY",
        "/credentials/0/token",
    ),
    ("missing id", {"credentials": [credential_entry(id=...)]}, "MISSING_KEY", "/credentials/0"),
    (
        "bad id",
        {"credentials": [credential_entry(id="Tutor_App")]},
        "INVALID_ID",
        "/credentials/0/id",
    ),
    (
        "id not a string",
        {"credentials": [credential_entry(id=7)]},
        "WRONG_TYPE",
        "/credentials/0/id",
    ),
    (
        "duplicate id",
        {"credentials": [credential_entry(), ops_entry(id="tutor-app")]},
        "DUPLICATE_ID",
        "/credentials/1/id",
    ),
    (
        "scopes not a list",
        {"credentials": [credential_entry(scopes="tools.execute")]},
        "WRONG_TYPE",
        "/credentials/0/scopes",
    ),
    (
        "no scope",
        {"credentials": [credential_entry(scopes=[])]},
        "SCOPES_EMPTY",
        "/credentials/0/scopes",
    ),
    (
        "unknown scope",
        {"credentials": [credential_entry(scopes=["context.resolve", "admin"])]},
        "UNKNOWN_SCOPE",
        "/credentials/0/scopes/1",
    ),
    (
        "approve scope",
        {"credentials": [credential_entry(scopes=["tools.execute", "tools.approve"])]},
        "APPROVE_SCOPE_REFUSED",
        "/credentials/0/scopes/1",
    ),
    (
        "duplicate scope",
        {"credentials": [credential_entry(scopes=["traces.read", "traces.read"])]},
        "DUPLICATE_SCOPE",
        "/credentials/0/scopes/1",
    ),
    (
        "scope not a string",
        {"credentials": [credential_entry(scopes=[1])]},
        "WRONG_TYPE",
        "/credentials/0/scopes/0",
    ),
    (
        "tokenRef not a string",
        {"credentials": [credential_entry(tokenRef=None)]},
        "WRONG_TYPE",
        "/credentials/0/tokenRef",
    ),
    *(
        (
            f"tokenRef {ref!r}",
            {"credentials": [credential_entry(tokenRef=ref)]},
            "TOKEN_REF_INVALID",
            "/credentials/0/tokenRef",
        )
        for ref in (
            APP_TOKEN,
            "SEIF_APP_TOKEN",
            "env:",
            "env:seif_app_token",
            "env:1TOKEN",
            "env:SEIF-APP",
            "keychain:",
            "keychain:a b",
            "file:/etc/token",
            "ENV:SEIF_APP_TOKEN",
            f"env:{APP_TOKEN}",
        )
    ),
    (
        "unset env",
        {"credentials": [credential_entry(tokenRef="env:NOT_SET")]},
        "SECRET_MISSING",
        "/credentials/0/tokenRef",
    ),
    (
        "empty env",
        {"credentials": [credential_entry(tokenRef="env:EMPTY_TOKEN")]},
        "SECRET_MISSING",
        "/credentials/0/tokenRef",
    ),
    (
        "unset keychain",
        {"credentials": [credential_entry(tokenRef="keychain:absent")]},
        "SECRET_MISSING",
        "/credentials/0/tokenRef",
    ),
    (
        "shared token",
        {"credentials": [credential_entry(), ops_entry(tokenRef="env:SEIF_OTHER")]},
        "DUPLICATE_TOKEN",
        "/credentials/1/tokenRef",
    ),
    (
        "shared tokenRef",
        {"credentials": [credential_entry(), ops_entry(tokenRef="env:SEIF_APP_TOKEN")]},
        "DUPLICATE_TOKEN",
        "/credentials/1/tokenRef",
    ),
    (
        "duplicate JSON key",
        '{"credentials": [{"id": "a", "id": "b", "tokenRef": "env:OPS_TOKEN", "scopes": []}]}',
        "DUPLICATE_KEY",
        "/credentials/0/id",
    ),
    ("not JSON", '{"credentials": [', "JSON_SYNTAX", ""),
    ("NaN", '{"credentials": NaN}', "JSON_NUMBER_INVALID", ""),
    (
        "no objective",
        {"credentials": [credential_entry(objectives=[])]},
        "NARROWING_EMPTY",
        "/credentials/0/objectives",
    ),
    (
        "objective twice",
        {"credentials": [credential_entry(objectives=["learner", "learner"])]},
        "DUPLICATE_ID",
        "/credentials/0/objectives/1",
    ),
    (
        "objective not an id",
        {"credentials": [credential_entry(objectives=["Learner"])]},
        "INVALID_ID",
        "/credentials/0/objectives/0",
    ),
    (
        "objectives not a list",
        {"credentials": [credential_entry(objectives="learner")]},
        "WRONG_TYPE",
        "/credentials/0/objectives",
    ),
]


@pytest.mark.parametrize(
    ("doc", "code", "pointer"),
    [case[1:] for case in CREDENTIAL_REFUSALS],
    ids=[case[0] for case in CREDENTIAL_REFUSALS],
)
def test_credentials_refusals(tmp_path: Path, doc: Any, code: str, pointer: str) -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_credentials(write(tmp_path, doc), ENV, keyring_get=FakeKeyring(KEYCHAIN))
    assert (code, pointer) in refusal(excinfo)
    assert all(p.file == str(tmp_path / "config.json") for p in excinfo.value.diagnostics)


def test_credential_objectives_are_checked_against_the_build(tmp_path: Path) -> None:
    """With the build's objectives (the runtime's start), a credential's or an issuer's
    ``objectives`` must name them; without (no build at hand), any ids are kept."""
    build = ("learner", "authoring")
    doc = {"credentials": [credential_entry(objectives=["learner"]), ops_entry()]}
    loaded = load_credentials(write(tmp_path, doc), ENV, objectives=build)
    assert [c.objectives for c in loaded] == [("learner",), None]
    doc = {"credentials": [credential_entry(objectives=["authoring", "lerner"])]}
    assert [c.objectives for c in load_credentials(write(tmp_path, doc), ENV)] == [
        ("authoring", "lerner")
    ]
    with pytest.raises(ConfigError) as excinfo:
        load_credentials(write(tmp_path, doc), ENV, objectives=build)
    assert refusal(excinfo) == [("UNKNOWN_OBJECTIVE", "/credentials/0/objectives/1")]
    [problem] = excinfo.value.diagnostics
    assert "`lerner` is not declared; did you mean `learner`?" in problem.message
    assert problem.line is not None


def test_credentials_unreadable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_credentials(tmp_path / "absent.json", ENV)
    assert refusal(excinfo) == [("FILE_UNREADABLE", "")]


def test_credentials_keychain_failure(tmp_path: Path) -> None:
    doc = {"credentials": [credential_entry(tokenRef="keychain:app-keychain")]}
    with pytest.raises(ConfigError) as excinfo:
        load_credentials(write(tmp_path, doc), ENV, keyring_get=FakeKeyring(KEYCHAIN, fail=True))
    assert refusal(excinfo) == [("KEYCHAIN_UNAVAILABLE", "/credentials/0/tokenRef")]
    assert "RuntimeError" in excinfo.value.diagnostics[0].message


def test_credentials_report_every_problem(tmp_path: Path) -> None:
    doc = {
        "credentials": [
            credential_entry(scopes=["tools.approve", "nope"], extra=1),
            ops_entry(id="BAD", tokenRef="env:NOT_SET"),
            "x",
        ]
    }
    with pytest.raises(ConfigError) as excinfo:
        load_credentials(write(tmp_path, doc), ENV)
    assert sorted(refusal(excinfo)) == sorted(
        [
            ("UNKNOWN_KEY", "/credentials/0/extra"),
            ("APPROVE_SCOPE_REFUSED", "/credentials/0/scopes/0"),
            ("UNKNOWN_SCOPE", "/credentials/0/scopes/1"),
            ("INVALID_ID", "/credentials/1/id"),
            ("SECRET_MISSING", "/credentials/1/tokenRef"),
            ("WRONG_TYPE", "/credentials/2"),
        ]
    )
    assert str(excinfo.value).endswith("(and 5 more)")


def test_credentials_read_only_named_secrets(tmp_path: Path) -> None:
    env = RecordingEnv(ENV)
    keychain = FakeKeyring(KEYCHAIN)
    load_credentials(write(tmp_path, credentials_doc()), env, keyring_get=keychain)
    assert set(env.read) == {"SEIF_APP_TOKEN"} and not env.listed
    assert keychain.calls == [("seif", "app-keychain")]


# --- bindings --------------------------------------------------------------------------------


def bindings_doc() -> dict[str, Any]:
    return {
        "environment": "staging",
        "revision": 3,
        "traceKeyRef": "env:CONTEXT_TOOL_TRACE_KEY",
        "tools": {
            "inspect-context": {
                "endpoint": "https://backend.example/seif-tools/inspect-context",
                "secretRef": "env:CONTEXT_TOOL_INSPECT_TOKEN",
                "timeoutMs": 5000,
                "maxBytes": 65536,
            },
            "search-knowledge": {
                "endpoint": "https://search.example:8443/tools/search",
                "secretRef": "keychain:context-tool-search",
                "maxBytes": 1024,
            },
            "propose-change": {"endpoint": "http://127.0.0.1:9000/propose"},
        },
    }


def load(tmp_path: Path, doc: Any, project: Any, **kw: Any) -> Bindings:
    keychain = kw.pop("keyring_get", FakeKeyring(KEYCHAIN))
    return load_bindings(write(tmp_path, doc), project, kw.pop("env", ENV), keychain)


def test_bindings_load(tmp_path: Path, reference_ir: Any) -> None:
    bindings = load(tmp_path, bindings_doc(), reference_ir)
    assert bindings.environment == "staging" and bindings.revision == 3
    assert list(bindings.tools) == ["inspect-context", "search-knowledge", "propose-change"]
    inspect, search, propose = bindings.tools.values()
    assert inspect == Binding(
        "inspect-context",
        "https://backend.example/seif-tools/inspect-context",
        5000,
        65536,
        TOOL_TOKEN,
    )
    assert (search.secret, search.timeout_ms, search.max_bytes) == (SEARCH_TOKEN, 8000, 1024)
    assert (propose.secret, propose.timeout_ms, propose.max_bytes) == (None, 10000, 65536)
    expected = blake3.blake3(
        TRACE_SECRET.encode(), derive_key_context="seif 2026 trace key v1"
    ).digest()
    assert bindings.trace_key == expected and len(expected) == 32
    with pytest.raises(TypeError):
        bindings.tools["x"] = inspect  # type: ignore[index]  # read-only on purpose


def test_bindings_without_trace_key_or_tools(tmp_path: Path, reference_ir: Any) -> None:
    bindings = load(tmp_path, {"environment": "dev", "revision": 0, "tools": {}}, reference_ir)
    assert bindings == Bindings("dev", 0, bindings.tools, None) and not bindings.tools


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://127.0.0.1:9000/x",
        "http://127.5.6.7/x",
        "http://[::1]:8080/x",
        "http://localhost:8080/x",
        "http://LOCALHOST/x",
        "HTTP://127.0.0.1/x",
    ],
)
def test_bindings_loopback_http(tmp_path: Path, reference_ir: Any, endpoint: str) -> None:
    doc = {"environment": "dev", "revision": 1, "tools": {"propose-change": {"endpoint": endpoint}}}
    assert load(tmp_path, doc, reference_ir).tools["propose-change"].endpoint == endpoint


def with_tool(**changes: Any) -> dict[str, Any]:
    """The base document with `inspect-context` changed (``...`` removes a key)."""
    doc = bindings_doc()
    entry = doc["tools"]["inspect-context"]
    entry.update(changes)
    doc["tools"]["inspect-context"] = {k: v for k, v in entry.items() if v is not ...}
    return doc


def with_root(**changes: Any) -> dict[str, Any]:
    doc = bindings_doc()
    doc.update(changes)
    return {k: v for k, v in doc.items() if v is not ...}


TOOL = "/tools/inspect-context"
ENDPOINT = TOOL + "/endpoint"
SECRET_REF = TOOL + "/secretRef"

BINDING_REFUSALS: list[tuple[str, Any, str, str]] = [
    ("root not an object", "[]", "WRONG_TYPE", ""),
    ("unknown root key", with_root(tools_dir="x"), "UNKNOWN_KEY", "/tools_dir"),
    ("missing environment", with_root(environment=...), "MISSING_KEY", ""),
    ("missing revision", with_root(revision=...), "MISSING_KEY", ""),
    ("missing tools", with_root(tools=...), "MISSING_KEY", ""),
    ("bad environment", with_root(environment="Staging!"), "INVALID_ENVIRONMENT", "/environment"),
    ("environment not a string", with_root(environment=3), "WRONG_TYPE", "/environment"),
    ("negative revision", with_root(revision=-1), "OUT_OF_RANGE", "/revision"),
    ("huge revision", with_root(revision=2**53), "OUT_OF_RANGE", "/revision"),
    ("revision a string", with_root(revision="3"), "WRONG_TYPE", "/revision"),
    ("revision fractional", with_root(revision=1.5), "WRONG_TYPE", "/revision"),
    ("revision boolean", with_root(revision=True), "WRONG_TYPE", "/revision"),
    ("tools not an object", with_root(tools=[]), "WRONG_TYPE", "/tools"),
    ("unknown tool", with_root(tools={"nope": {}}), "UNKNOWN_TOOL", "/tools/nope"),
    ("tool id escaped", with_root(tools={"a/b": {}}), "UNKNOWN_TOOL", "/tools/a~1b"),
    ("entry not an object", with_root(tools={"inspect-context": "x"}), "WRONG_TYPE", TOOL),
    ("unknown entry key", with_tool(headers={}), "UNKNOWN_KEY", TOOL + "/headers"),
    ("missing endpoint", with_tool(endpoint=...), "MISSING_KEY", TOOL),
    ("endpoint not a string", with_tool(endpoint=1), "WRONG_TYPE", ENDPOINT),
    *(
        (f"endpoint {url!r}", with_tool(endpoint=url), "ENDPOINT_INVALID", ENDPOINT)
        for url in (
            "",
            "backend.example/x",
            "/seif-tools/x",
            "https:///x",
            "https://backend .example/x",
            "https://backend.example/x\n",
            "https://backend.example\\x",
            "https://backend.example:99999/x",
            "https://backend.example:port/x",
            "https://" + "a" * 2050 + ".example/",
        )
    ),
    *(
        (f"scheme {url!r}", with_tool(endpoint=url), "ENDPOINT_SCHEME_REFUSED", ENDPOINT)
        for url in ("ftp://backend.example/x", "file:///etc/passwd", "ws://localhost/x")
    ),
    (
        "userinfo",
        with_tool(endpoint=f"https://svc:{TOOL_TOKEN}@backend.example/x"),
        "ENDPOINT_USERINFO_REFUSED",
        ENDPOINT,
    ),
    (
        "query",
        with_tool(endpoint=f"https://backend.example/x?token={TOOL_TOKEN}"),
        "ENDPOINT_QUERY_REFUSED",
        ENDPOINT,
    ),
    (
        "empty query",
        with_tool(endpoint="https://backend.example/x?"),
        "ENDPOINT_QUERY_REFUSED",
        ENDPOINT,
    ),
    (
        "fragment",
        with_tool(endpoint=f"https://backend.example/x#{TOOL_TOKEN}"),
        "ENDPOINT_FRAGMENT_REFUSED",
        ENDPOINT,
    ),
    *(
        (f"http {url!r}", with_tool(endpoint=url), "ENDPOINT_HTTP_NOT_LOOPBACK", ENDPOINT)
        for url in (
            "http://backend.example/x",
            "http://10.0.0.1/x",
            "http://[::2]/x",
            "http://127.1/x",
            "http://localhost.example/x",
            "http://0.0.0.0/x",
            "http://[::ffff:127.0.0.1]/x",
        )
    ),
    ("https without secret", with_tool(secretRef=...), "ENDPOINT_SECRET_REQUIRED", ENDPOINT),
    (
        "registry credential",
        with_tool(secretRef="env:SEIF_REGISTRY_TOKEN"),
        "SECRET_REF_REGISTRY_REFUSED",
        SECRET_REF,
    ),
    (
        "seif credential",
        with_tool(secretRef="env:SEIF_OTHER"),
        "SECRET_REF_SEIF_REFUSED",
        SECRET_REF,
    ),
    ("secretRef not a string", with_tool(secretRef=5), "WRONG_TYPE", SECRET_REF),
    *(
        (f"secretRef {ref!r}", with_tool(secretRef=ref), "SECRET_REF_REFUSED", SECRET_REF)
        for ref in (
            "env:HOME",
            "env:CONTEXT_TOOL_",
            "env:context_tool_inspect_token",
            "env:XCONTEXT_TOOL_A",
            "keychain:app-keychain",
            "keychain:context-tool-",
            "keychain:context-tool-UPPER",
            "keychain:context_tool_x",
            "vault:context-tool-x",
            "CONTEXT_TOOL_INSPECT_TOKEN",
            TOOL_TOKEN,
            "",
        )
    ),
    ("unset secret", with_tool(secretRef="env:CONTEXT_TOOL_ABSENT"), "SECRET_MISSING", SECRET_REF),
    ("empty secret", with_tool(secretRef="env:CONTEXT_TOOL_EMPTY"), "SECRET_MISSING", SECRET_REF),
    (
        "unset keychain",
        with_tool(secretRef="keychain:context-tool-absent"),
        "SECRET_MISSING",
        SECRET_REF,
    ),
    ("timeout too low", with_tool(timeoutMs=99), "OUT_OF_RANGE", TOOL + "/timeoutMs"),
    ("timeout too high", with_tool(timeoutMs=30001), "OUT_OF_RANGE", TOOL + "/timeoutMs"),
    ("timeout a string", with_tool(timeoutMs="5000"), "WRONG_TYPE", TOOL + "/timeoutMs"),
    (
        "timeout above declared",
        with_tool(timeoutMs=5001),
        "TIMEOUT_EXCEEDS_DECLARED",
        TOOL + "/timeoutMs",
    ),
    ("maxBytes zero", with_tool(maxBytes=0), "OUT_OF_RANGE", TOOL + "/maxBytes"),
    ("maxBytes too high", with_tool(maxBytes=1048577), "OUT_OF_RANGE", TOOL + "/maxBytes"),
    ("maxBytes fractional", with_tool(maxBytes=1.5), "WRONG_TYPE", TOOL + "/maxBytes"),
    ("caFile missing", with_tool(caFile="absent.pem"), "CA_FILE_UNREADABLE", TOOL + "/caFile"),
    ("caFile not PEM", with_tool(caFile="config.json"), "CA_FILE_INVALID", TOOL + "/caFile"),
    (
        "caFile on http",
        with_tool(endpoint="http://127.0.0.1:9000/x", caFile="config.json"),
        "CA_FILE_HTTP_REFUSED",
        TOOL + "/caFile",
    ),
    (
        "trace key registry",
        with_root(traceKeyRef="env:SEIF_REGISTRY_TRACE"),
        "SECRET_REF_REGISTRY_REFUSED",
        "/traceKeyRef",
    ),
    (
        "trace key seif",
        with_root(traceKeyRef="env:SEIF_TRACE"),
        "SECRET_REF_SEIF_REFUSED",
        "/traceKeyRef",
    ),
    ("trace key refused", with_root(traceKeyRef="env:TRACE"), "SECRET_REF_REFUSED", "/traceKeyRef"),
    (
        "trace key unset",
        with_root(traceKeyRef="env:CONTEXT_TOOL_NOT_SET"),
        "SECRET_MISSING",
        "/traceKeyRef",
    ),
    (
        "trace key equals a tool secret",
        with_root(traceKeyRef="env:CONTEXT_TOOL_INSPECT_TOKEN"),
        "TRACE_KEY_NOT_DISTINCT",
        "/traceKeyRef",
    ),
    (
        "duplicate JSON key",
        '{"environment": "a", "environment": "b", "revision": 1, "tools": {}}',
        "DUPLICATE_KEY",
        "/environment",
    ),
    ("not JSON", "{", "JSON_SYNTAX", ""),
    ("Infinity", '{"environment": "a", "revision": Infinity}', "JSON_NUMBER_INVALID", ""),
]


@pytest.mark.parametrize(
    ("doc", "code", "pointer"),
    [case[1:] for case in BINDING_REFUSALS],
    ids=[case[0] for case in BINDING_REFUSALS],
)
def test_bindings_refusals(
    tmp_path: Path, reference_ir: Any, doc: Any, code: str, pointer: str
) -> None:
    with pytest.raises(ConfigError) as excinfo:
        load(tmp_path, copy.deepcopy(doc), reference_ir)
    assert (code, pointer) in refusal(excinfo)


def test_bindings_keychain_failure(tmp_path: Path, reference_ir: Any) -> None:
    with pytest.raises(ConfigError) as excinfo:
        load(tmp_path, bindings_doc(), reference_ir, keyring_get=FakeKeyring(KEYCHAIN, fail=True))
    pointer = "/tools/search-knowledge/secretRef"
    assert refusal(excinfo) == [("KEYCHAIN_UNAVAILABLE", pointer)]


def test_bindings_unreadable(tmp_path: Path, reference_ir: Any) -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_bindings(tmp_path / "absent.json", reference_ir, ENV)
    assert refusal(excinfo) == [("FILE_UNREADABLE", "")]


def test_bindings_report_every_problem(tmp_path: Path, reference_ir: Any) -> None:
    doc = bindings_doc()
    doc["revision"] = -2
    doc["tools"]["inspect-context"].update(
        endpoint="http://svc:pw@backend.example/x?a=1#f", timeoutMs=6000
    )
    doc["tools"]["search-knowledge"]["secretRef"] = "env:SEIF_REGISTRY_TOKEN"
    doc["tools"]["other"] = {"endpoint": "https://x.example/"}
    with pytest.raises(ConfigError) as excinfo:
        load(tmp_path, doc, reference_ir)
    assert refusal(excinfo) == [
        ("OUT_OF_RANGE", "/revision"),
        ("ENDPOINT_USERINFO_REFUSED", ENDPOINT),
        ("ENDPOINT_QUERY_REFUSED", ENDPOINT),
        ("ENDPOINT_FRAGMENT_REFUSED", ENDPOINT),
        ("ENDPOINT_HTTP_NOT_LOOPBACK", ENDPOINT),
        ("TIMEOUT_EXCEEDS_DECLARED", TOOL + "/timeoutMs"),
        ("SECRET_REF_REGISTRY_REFUSED", "/tools/search-knowledge/secretRef"),
        ("UNKNOWN_TOOL", "/tools/other"),
        ("ENDPOINT_SECRET_REQUIRED", "/tools/other/endpoint"),
    ]
    assert all("pw" not in p.message for p in excinfo.value.diagnostics)


def test_bindings_read_only_named_secrets(tmp_path: Path, reference_ir: Any) -> None:
    env = RecordingEnv(ENV)
    keychain = FakeKeyring(KEYCHAIN)
    load(tmp_path, bindings_doc(), reference_ir, env=env, keyring_get=keychain)
    assert set(env.read) == {"CONTEXT_TOOL_INSPECT_TOKEN", "CONTEXT_TOOL_TRACE_KEY"}
    assert not env.listed
    assert keychain.calls == [("seif", "context-tool-search")]


def test_refused_references_are_never_read(tmp_path: Path, reference_ir: Any) -> None:
    doc = with_tool(secretRef="env:SEIF_REGISTRY_TOKEN")
    doc["traceKeyRef"] = "env:HOME"
    doc["tools"]["search-knowledge"]["secretRef"] = "keychain:app-keychain"
    env = RecordingEnv(ENV)
    keychain = FakeKeyring(KEYCHAIN)
    with pytest.raises(ConfigError):
        load(tmp_path, doc, reference_ir, env=env, keyring_get=keychain)
    assert env.read == [] and not env.listed and keychain.calls == []


# --- the approval token and secrecy ----------------------------------------------------------


def test_approval_token() -> None:
    creds = Credentials([Credential("app", frozenset({"tools.execute"}), APP_TOKEN)])
    name = "SEIF_CONTEXT_TOOL_APPROVAL_TOKEN"
    assert approval_token({name: OPS_TOKEN}, creds, required=True) == OPS_TOKEN
    assert approval_token({name: OPS_TOKEN}, creds, required=False) == OPS_TOKEN
    assert approval_token({}, creds, required=False) is None
    assert approval_token({name: ""}, creds, required=False) is None
    for env in ({}, {name: ""}):
        with pytest.raises(ConfigError) as excinfo:
            approval_token(env, creds, required=True)
        assert refusal(excinfo) == [("APPROVAL_TOKEN_MISSING", "")]
        assert excinfo.value.diagnostics[0].file == f"${name}"
    for required in (True, False):
        with pytest.raises(ConfigError) as excinfo:
            approval_token({name: APP_TOKEN}, creds, required=required)
        assert refusal(excinfo) == [("APPROVAL_TOKEN_NOT_DISTINCT", "")]


def test_approval_token_reads_only_its_variable() -> None:
    env = RecordingEnv(ENV)
    approval_token(env, Credentials([]), required=False)
    assert env.read == ["SEIF_CONTEXT_TOOL_APPROVAL_TOKEN"] and not env.listed


def test_secrets_never_in_reprs(tmp_path: Path, reference_ir: Any) -> None:
    creds = load_credentials(
        write(tmp_path, credentials_doc()), ENV, keyring_get=FakeKeyring(KEYCHAIN)
    )
    bindings = load(tmp_path, bindings_doc(), reference_ir)
    shown = [repr(creds), str(creds), *map(repr, creds), repr(bindings), str(bindings)]
    shown += [repr(b) for b in bindings.tools.values()]
    assert bindings.trace_key is not None
    for text in shown:
        assert_no_secret(text)
        assert bindings.trace_key.hex() not in text and repr(bindings.trace_key) not in text


def test_pasted_secrets_are_not_echoed(tmp_path: Path, reference_ir: Any) -> None:
    doc = {"credentials": [credential_entry(tokenRef=APP_TOKEN)]}
    with pytest.raises(ConfigError) as excinfo:
        load_credentials(write(tmp_path, doc), ENV)
    assert excinfo.value.diagnostics[0].message.startswith("this value is not")
    shown = with_tool(secretRef="env:SEIF_REGISTRY_TOKEN")
    with pytest.raises(ConfigError) as excinfo:
        load(tmp_path, shown, reference_ir)
    assert "`env:SEIF_REGISTRY_TOKEN`" in excinfo.value.diagnostics[0].message


def problem(file: str, pointer: str) -> Diagnostic:
    return Diagnostic(code="X", message="m", location=Location(file=file, pointer=pointer))


def test_problem_render() -> None:
    assert render(problem("f.json", "/a/0")) == "f.json:/a/0: X: m"
    assert render(problem("f.json", "")) == "f.json: X: m"
    assert str(ConfigError([problem("f.json", "")])) == "f.json: X: m"


def test_every_code_has_a_case_and_a_doc() -> None:
    covered = {case[2] for case in (*CREDENTIAL_REFUSALS, *BINDING_REFUSALS)}
    covered |= {"FILE_UNREADABLE", "KEYCHAIN_UNAVAILABLE"}  # tested on their own above
    # upstreams and the tools bound to them (test_upstream_bindings.py)
    covered |= {case[2] for case in UPSTREAM_REFUSALS}
    covered |= {"APPROVAL_TOKEN_MISSING", "APPROVAL_TOKEN_NOT_DISTINCT"}
    # the approval server's (tests/servers/approval/test_approval_config.py)
    covered |= {"APPROVERS_EMPTY", "APPROVER_TOKEN_REF_INVALID", "APPROVER_TOKEN_NOT_DISTINCT"}
    covered |= {"ISSUER_INVALID"}  # every case of tests/servers/config/test_issuers.py
    covered |= {"UNKNOWN_OBJECTIVE"}  # against a build: tested on its own above
    assert covered == CODES
    docs = (ROOT / "docs" / "runtime-config.md").read_text()
    assert all(f"`{code}`" in docs for code in CODES)
    assert sorted(SCOPES) == ["context.resolve", "metrics.read", "tools.execute", "traces.read"]
