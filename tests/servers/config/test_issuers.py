"""``issuers`` in the credentials file (docs/identity.md): what loads, and every refusal, each an
``ISSUER_INVALID`` at its JSON pointer and the line and column it resolves to."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from policy.diagnostic import render
from servers.config.files import CODES, ConfigError, load_credentials
from tests.support.identity import AUDIENCE, ISS, ec_key, jwks, rsa_key

APP_TOKEN = "app-token-9c2e4a6b"
ENV = {"SEIF_APP_TOKEN": APP_TOKEN}
STATIC = {"id": "tutor-app", "tokenRef": "env:SEIF_APP_TOKEN", "scopes": ["context.resolve"]}
URI = "https://idp.example/jwks"


def entry(**overrides: Any) -> dict[str, Any]:
    """The spec's issuer; a value of ``...`` removes the key."""
    found: dict[str, Any] = {
        "id": "corp",
        "issuer": ISS,
        "jwksUri": URI,
        "audience": AUDIENCE,
        "algorithms": ["RS256", "ES256", "EdDSA"],
        "scopes": {
            "seif.resolve": "context.resolve",
            "seif.execute": "tools.execute",
            "seif.traces": "traces.read",
        },
        "claims": ["groups", "tenant"],
        "leewaySeconds": 60,
    }
    found.update(overrides)
    return {k: v for k, v in found.items() if v is not ...}


def write(tmp_path: Path, doc: Any) -> Path:
    path = tmp_path / "credentials.json"
    path.write_text(json.dumps(doc, indent=2))
    return path


def test_the_spec_example_loads_beside_static_credentials(tmp_path: Path) -> None:
    loaded = load_credentials(write(tmp_path, {"credentials": [STATIC], "issuers": [entry()]}), ENV)
    assert [c.id for c in loaded] == ["tutor-app"]
    [corp] = loaded.issuers
    assert (corp.id, corp.issuer, corp.audience, corp.jwks_uri) == ("corp", ISS, AUDIENCE, URI)
    assert corp.algorithms == ("RS256", "ES256", "EdDSA")
    assert dict(corp.scopes)["seif.execute"] == "tools.execute"
    assert corp.granting("context.resolve") == ("seif.resolve",)
    assert (corp.claims, corp.leeway_s, corp.objectives) == (("groups", "tenant"), 60, None)
    assert "corp" in repr(loaded) and APP_TOKEN not in repr(loaded)


def test_defaults_and_issuers_alone(tmp_path: Path) -> None:
    bare = entry(algorithms=..., claims=..., leewaySeconds=..., objectives=["learner"])
    loaded = load_credentials(write(tmp_path, {"issuers": [bare]}), {})
    assert list(loaded) == []
    [corp] = loaded.issuers
    assert corp.algorithms == ("RS256", "ES256")
    assert (corp.claims, corp.leeway_s, corp.objectives) == ((), 60, ("learner",))


def test_loopback_http_and_a_jwks_file(tmp_path: Path) -> None:
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "idp.json").write_text(json.dumps(jwks(rsa_key("k1"), ec_key("e1"))))
    doc = {
        "issuers": [
            entry(jwksUri="http://127.0.0.1:8081/jwks"),
            entry(
                id="files", issuer="https://other.example", jwksUri=..., jwksFile="keys/idp.json"
            ),
        ]
    }
    loopback, files = load_credentials(write(tmp_path, doc), {}).issuers
    assert loopback.jwks_uri == "http://127.0.0.1:8081/jwks"
    assert files.jwks_file == tmp_path / "keys" / "idp.json"
    assert [k.kid for k in files.file_keys] == ["k1", "e1"]


def _private_jwks() -> dict[str, Any]:
    return {"keys": [rsa_key("k1").as_dict(private=True)]}


def _write_jwks(tmp_path: Path, doc: Any) -> str:
    (tmp_path / "idp.json").write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return "idp.json"


ISSUER_REFUSALS: list[tuple[str, dict[str, Any], str, str]] = [
    # (case, entry overrides, pointer under /issuers/0, a word of the message)
    ("alg none", {"algorithms": ["RS256", "none"]}, "/algorithms/1", "refused"),
    ("alg NONE", {"algorithms": ["NONE"]}, "/algorithms/0", "refused"),
    ("HMAC", {"algorithms": ["HS256"]}, "/algorithms/0", "refused"),
    ("HMAC 512", {"algorithms": ["ES256", "HS512"]}, "/algorithms/1", "refused"),
    ("unknown alg", {"algorithms": ["RSA-OAEP"]}, "/algorithms/0", "unknown algorithm"),
    ("alg twice", {"algorithms": ["ES256", "ES256"]}, "/algorithms/1", "twice"),
    ("no alg", {"algorithms": []}, "/algorithms", "allow an algorithm"),
    ("approve", {"scopes": {"seif.approve": "tools.approve"}}, "/scopes/seif.approve", "never"),
    ("unknown scope", {"scopes": {"x": "tools.run"}}, "/scopes/x", "unknown scope"),
    ("scope value", {"scopes": {"a b": "tools.execute"}}, "/scopes/a b", "not a scope value"),
    ("no scope", {"scopes": {}}, "/scopes", "map a token scope"),
    ("scopes list", {"scopes": ["tools.execute"]}, "/scopes", "expected an object"),
    ("17 claims", {"claims": [f"c{i}" for i in range(17)]}, "/claims", "at most 16"),
    ("claim name", {"claims": ["groups", "a b"]}, "/claims/1", "not a claim name"),
    ("claim twice", {"claims": ["groups", "groups"]}, "/claims/1", "twice"),
    ("claims text", {"claims": "groups"}, "/claims", "expected an array"),
    ("leeway 301", {"leewaySeconds": 301}, "/leewaySeconds", "0..300"),
    ("leeway -1", {"leewaySeconds": -1}, "/leewaySeconds", "0..300"),
    ("leeway 1.5", {"leewaySeconds": 1.5}, "/leewaySeconds", "integer"),
    ("http", {"jwksUri": "http://idp.example/jwks"}, "/jwksUri", "loopback"),
    ("ftp", {"jwksUri": "ftp://idp.example/jwks"}, "/jwksUri", "https://"),
    ("userinfo", {"jwksUri": "https://u:p@idp.example/jwks"}, "/jwksUri", "user name"),
    ("relative", {"jwksUri": "/jwks"}, "/jwksUri", "https://"),
    ("both", {"jwksFile": "idp.json"}, "", "exactly one"),
    ("neither", {"jwksUri": ...}, "", "exactly one"),
    ("no audience", {"audience": ...}, "", "`audience`"),
    ("empty issuer", {"issuer": ""}, "/issuer", "1 to 2048"),
    ("unknown key", {"jwks": URI}, "/jwks", "unknown key"),
    ("bad id", {"id": "Corp"}, "/id", "does not match"),
    ("credential id", {"id": "tutor-app"}, "/id", "used twice"),
    ("objective", {"objectives": ["Learner"]}, "/objectives/0", "does not match"),
    ("objective twice", {"objectives": ["learner", "learner"]}, "/objectives/1", "twice"),
    ("no objective", {"objectives": []}, "/objectives", "name an objective"),
    ("unknown objective", {"objectives": ["lerner"]}, "/objectives/0", "did you mean `learner`"),
]


@pytest.mark.parametrize(
    ("overrides", "pointer", "word"),
    [case[1:] for case in ISSUER_REFUSALS],
    ids=[case[0] for case in ISSUER_REFUSALS],
)
def test_an_issuer_problem_is_located(
    tmp_path: Path, overrides: dict[str, Any], pointer: str, word: str
) -> None:
    doc = {"credentials": [STATIC], "issuers": [entry(**overrides)]}
    path = write(tmp_path, doc)
    with pytest.raises(ConfigError) as caught:
        load_credentials(path, ENV, objectives=("learner", "authoring"))  # the build's
    [problem] = caught.value.diagnostics
    assert (problem.code, problem.pointer) == ("ISSUER_INVALID", "/issuers/0" + pointer)
    assert word in problem.message, problem.message
    assert problem.line is not None and problem.column is not None
    # rendered like every other refusal of the file: FILE:POINTER: CODE: message
    assert render(problem).startswith(f"{path}:/issuers/0{pointer}: ISSUER_INVALID: ")
    assert APP_TOKEN not in str(caught.value)


JWKS_FILE_REFUSALS = [
    ("private key", _private_jwks(), "private key"),
    ("shared secret", {"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}, "not an asymmetric key"),
    ("encryption key", {"keys": [{**jwks(ec_key("e"))["keys"][0], "use": "enc"}]}, "`use`"),
    ("no key", {"keys": []}, "holds no key"),
    ("not a key set", {"kty": "RSA"}, "not a JWKS"),
    ("not json", "{", "not strict JSON"),
    ("short RSA", {"keys": [{"kty": "RSA", "n": "AQAB", "e": "AQAB"}]}, "key 0"),
]


@pytest.mark.parametrize(
    ("doc", "word"),
    [case[1:] for case in JWKS_FILE_REFUSALS],
    ids=[case[0] for case in JWKS_FILE_REFUSALS],
)
def test_a_jwks_file_holds_usable_public_keys(tmp_path: Path, doc: Any, word: str) -> None:
    name = _write_jwks(tmp_path, doc)
    path = write(tmp_path, {"issuers": [entry(jwksUri=..., jwksFile=name)]})
    with pytest.raises(ConfigError) as caught:
        load_credentials(path, {})
    [problem] = caught.value.diagnostics
    assert (problem.code, problem.pointer) == ("ISSUER_INVALID", "/issuers/0/jwksFile")
    assert word in problem.message, problem.message
    assert '"d"' not in problem.message  # no key material is quoted


def test_a_missing_jwks_file(tmp_path: Path) -> None:
    path = write(tmp_path, {"issuers": [entry(jwksUri=..., jwksFile="absent.json")]})
    with pytest.raises(ConfigError) as caught:
        load_credentials(path, {})
    [problem] = caught.value.diagnostics
    assert problem.pointer == "/issuers/0/jwksFile" and "cannot be read" in problem.message


def test_issuers_are_distinct_and_listed(tmp_path: Path) -> None:
    twice = [entry(), entry(id="corp-2")]
    cases: list[tuple[Any, list[tuple[str, str]]]] = [
        (twice, [("ISSUER_INVALID", "/issuers/1/issuer")]),
        ([entry(), entry(issuer="https://b.example")], [("ISSUER_INVALID", "/issuers/1/id")]),
        ([], [("ISSUER_INVALID", "/issuers")]),
        ({"corp": entry()}, [("ISSUER_INVALID", "/issuers")]),
        (["corp"], [("ISSUER_INVALID", "/issuers/0")]),
    ]
    for issuers, expected in cases:
        with pytest.raises(ConfigError) as caught:
            load_credentials(write(tmp_path, {"issuers": copy.deepcopy(issuers)}), {})
        assert [(p.code, p.pointer) for p in caught.value.diagnostics] == expected


def test_every_problem_is_reported_together(tmp_path: Path) -> None:
    doc = {
        "credentials": [STATIC],
        "issuers": [entry(algorithms=["none"], scopes={"a": "tools.approve"}, leewaySeconds=900)],
    }
    with pytest.raises(ConfigError) as caught:
        load_credentials(write(tmp_path, doc), ENV)
    assert sorted(p.pointer for p in caught.value.diagnostics) == [
        "/issuers/0/algorithms/0",
        "/issuers/0/leewaySeconds",
        "/issuers/0/scopes/a",
    ]
    assert {p.code for p in caught.value.diagnostics} == {"ISSUER_INVALID"}


def test_a_file_with_neither_credentials_nor_issuers(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_credentials(write(tmp_path, {}), {})
    [problem] = caught.value.diagnostics
    assert (problem.code, problem.pointer) == ("MISSING_KEY", "")
    assert "ISSUER_INVALID" in CODES
