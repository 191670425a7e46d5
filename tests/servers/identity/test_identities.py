"""``servers.identity``: static credentials and issuers' access tokens, with the issuer's key set
served by a real JWKS endpoint on loopback (``tests.support.identity``). The HTTP answers and the
attacks through a running runtime are in tests/servers/http/test_issuer_tokens.py."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from joserfc.jwk import RSAKey

from servers.config.files import Credential, Credentials, load_credentials
from servers.identity import Authenticated, Identities, TokenRefused, keys
from tests.support.identity import (
    AUDIENCE,
    NOW_S,
    Provider,
    claims,
    ec_key,
    issuer_entry,
    jwks,
    provider,
    raw_rs256,
    rsa_key,
    token,
)
from tests.support.runtime_harness import run_async

STATIC = Credential("tutor-app", frozenset({"context.resolve"}), "static-token-5d1e9a")


class Monotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def credentials(tmp_path: Path, *entries: dict[str, Any]) -> Credentials:
    """The credentials file of a static credential and ``entries`` as its issuers, loaded."""
    path = tmp_path / "credentials.json"
    static = {"id": "tutor-app", "tokenRef": "env:SEIF_APP_TOKEN", "scopes": ["context.resolve"]}
    path.write_text(json.dumps({"credentials": [static], "issuers": list(entries)}))
    return load_credentials(path, {"SEIF_APP_TOKEN": STATIC.token})


@asynccontextmanager
async def identities(
    tmp_path: Path, idp: Provider, monotonic: Monotonic | None = None, **overrides: Any
) -> AsyncIterator[Identities]:
    found = Identities(
        credentials(tmp_path, issuer_entry(idp.url, **overrides)),
        lambda: NOW_S * 1000,
        monotonic=monotonic or time.monotonic,
    )
    await found.start()
    try:
        yield found
    finally:
        await found.aclose()


async def refused(ids: Identities, presented: str, **kw: Any) -> str:
    with pytest.raises(TokenRefused) as caught:
        await ids.authenticate(presented, **kw)
    return caught.value.reason


def test_a_token_names_its_principal_and_its_mapped_scopes(tmp_path: Path) -> None:
    key = rsa_key("k1")

    async def scenario() -> None:
        async with provider([key]) as idp, identities(tmp_path, idp) as ids:
            body = claims(groups=["support", "staff"], tenant="acme", email="a@example.org")
            found = await ids.authenticate(token(key, body))
            assert found is not None
            assert found.id == "corp:tutor-web"
            assert found.scopes == {"context.resolve", "tools.execute"}  # `openid` is unmapped
            assert found.principal.to_json() == {
                "issuer": "corp",
                "subject": "user-7d41",
                "clientId": "tutor-web",
                "claims": {"groups": ["support", "staff"], "tenant": "acme"},  # no `email`
            }
            assert found.granting is not None
            assert found.granting["tools.execute"] == ("seif.execute",)
            assert idp.fetches == 1  # at start, once

    run_async(scenario())


def test_a_static_credential_is_an_application_alone(tmp_path: Path) -> None:
    key = rsa_key("k1")

    async def scenario() -> None:
        async with provider([key]) as idp, identities(tmp_path, idp) as ids:
            found = await ids.authenticate(STATIC.token)
            assert found == Authenticated.static("tutor-app", frozenset({"context.resolve"}))
            assert found is not None and found.granting is None
            assert found.principal.to_json() == {
                "issuer": None,
                "subject": None,
                "clientId": "tutor-app",
                "claims": {},
            }
            # not a JWT: compared with the static credentials, and unknown
            assert await ids.authenticate("not-a-jwt-0f3c") is None
            assert await ids.authenticate("a.b.c") is None
            assert await ids.authenticate(None) is None

    run_async(scenario())


def test_a_jwt_without_issuers_is_compared_as_a_static_token(tmp_path: Path) -> None:
    key = rsa_key("k1")
    ids = Identities(Credentials([STATIC]), lambda: NOW_S * 1000)
    assert run_async(ids.authenticate(token(key, claims()))) is None


@pytest.mark.parametrize(
    ("extra", "scopes"),
    [
        ({"scope": None, "scp": ["seif.execute", "other"]}, {"tools.execute"}),
        ({"scope": None, "scp": "seif.resolve seif.traces"}, {"context.resolve", "traces.read"}),
        ({"scope": "seif.resolve", "scp": ["seif.execute"]}, {"context.resolve"}),
        ({"scope": None}, set()),
    ],
)
def test_scopes_come_from_scope_or_else_scp(
    tmp_path: Path, extra: dict[str, Any], scopes: set[str]
) -> None:
    key = ec_key("e1")

    async def scenario() -> None:
        async with provider([key]) as idp, identities(tmp_path, idp) as ids:
            found = await ids.authenticate(token(key, claims(**extra)))
            assert found is not None and found.scopes == scopes

    run_async(scenario())


def test_the_client_is_client_id_or_else_azp(tmp_path: Path) -> None:
    key = rsa_key("k1")

    async def scenario() -> None:
        async with provider([key]) as idp, identities(tmp_path, idp) as ids:
            found = await ids.authenticate(token(key, claims(client_id=None, azp="spa")))
            assert found is not None and found.id == "corp:spa"
            assert found.principal.client_id == "spa"
            anonymous = await ids.authenticate(token(key, claims(client_id=None, sub=None)))
            assert anonymous is not None and anonymous.id == "corp:"
            assert anonymous.principal.subject is None

    run_async(scenario())


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"exp": NOW_S - 61}, "expired"),
        ({"exp": None}, "lacks `exp`"),
        ({"nbf": NOW_S + 61}, "not valid yet"),
        ({"iat": NOW_S + 61}, "issued in the future"),
        ({"aud": "https://other.example/"}, "another audience"),
        ({"aud": ["https://other.example/", "x"]}, "another audience"),
        ({"groups": [{"name": "support"}]}, "claim `groups`"),
        ({"tenant": None, "groups": "ok", "scope": 7}, "`scope`"),
        ({"sub": 42}, "`sub`"),
        ({"client_id": "c" * 513}, "`client_id`"),
    ],
)
def test_claims_are_checked(tmp_path: Path, extra: dict[str, Any], reason: str) -> None:
    key = rsa_key("k1")

    async def scenario() -> None:
        async with provider([key]) as idp, identities(tmp_path, idp) as ids:
            assert reason in await refused(ids, token(key, claims(**extra)))

    run_async(scenario())


def test_times_are_checked_with_the_leeway(tmp_path: Path) -> None:
    key = rsa_key("k1")

    async def scenario() -> None:
        async with provider([key]) as idp, identities(tmp_path, idp) as ids:
            within = claims(exp=NOW_S - 50, nbf=NOW_S + 50, iat=NOW_S + 50)
            assert await ids.authenticate(token(key, within)) is not None
        async with provider([key]) as idp, identities(tmp_path, idp, leewaySeconds=0) as ids:
            assert "expired" in await refused(ids, token(key, claims(exp=NOW_S)))
            assert "not valid yet" in await refused(ids, token(key, claims(nbf=NOW_S + 1)))

    run_async(scenario())


def test_an_aud_list_holding_the_audience_and_the_later_resource_urls(tmp_path: Path) -> None:
    key = rsa_key("k1")
    resource = AUDIENCE + "mcp/learner"

    async def scenario() -> None:
        async with provider([key]) as idp, identities(tmp_path, idp) as ids:
            listed = token(key, claims(aud=["https://other.example/", AUDIENCE]))
            assert await ids.authenticate(listed) is not None
            for_mcp = token(key, claims(aud=resource))
            assert "another audience" in await refused(ids, for_mcp)
            assert await ids.authenticate(for_mcp, audiences=(resource,)) is not None

    run_async(scenario())


@pytest.mark.parametrize(
    ("header", "accepted"),
    [
        ({"typ": "at+jwt"}, True),
        ({"typ": "JWT"}, True),
        ({"typ": "application/at+jwt"}, True),
        ({"typ": None}, True),
        ({"typ": "dpop+jwt"}, False),
        ({"typ": "id_token+jwt"}, False),
        ({"typ": 1}, False),
        ({"crit": ["exp"], "exp": 1}, False),
        ({"kid": 7}, False),
    ],
)
def test_the_header_is_checked(tmp_path: Path, header: dict[str, Any], accepted: bool) -> None:
    key = rsa_key("k1")

    async def scenario() -> None:
        async with provider([key]) as idp, identities(tmp_path, idp) as ids:
            written = {"alg": "RS256", "kid": "k1", **header}
            written = {k: v for k, v in written.items() if v is not None}
            presented = raw_rs256(key, written, claims())
            if accepted:
                assert await ids.authenticate(presented) is not None
            else:
                await refused(ids, presented)

    run_async(scenario())


def test_an_algorithm_outside_the_allowlist_is_refused(tmp_path: Path) -> None:
    key, other = rsa_key("k1"), ec_key("e1")

    async def scenario() -> None:
        async with (
            provider([key, other]) as idp,
            identities(tmp_path, idp, algorithms=["ES256"]) as ids,
        ):
            assert "allowlist" in await refused(ids, token(key, claims()))
            assert await ids.authenticate(token(other, claims())) is not None
            # a key whose `alg` is RS256 never verifies a PS256 token, though both are RSA
        signer = RSAKey.generate_key(2048, parameters={"kid": "k1"})
        published = RSAKey.import_key({**signer.as_dict(private=False), "alg": "RS256"})
        async with (
            provider([published]) as idp,
            identities(tmp_path, idp, algorithms=["PS256", "RS256"]) as ids,
        ):
            assert await ids.authenticate(token(signer, claims(), alg="RS256")) is not None
            assert "no key" in await refused(ids, token(signer, claims(), alg="PS256"))

    run_async(scenario())


def test_a_token_over_16_kib_is_refused_unread(tmp_path: Path) -> None:
    ids = Identities(Credentials([STATIC]), lambda: NOW_S * 1000)
    reason = run_async(refused(ids, "x" * (16 * 1024 + 1)))
    assert "16384 bytes" in reason
    assert run_async(ids.authenticate("x" * (16 * 1024))) is None


# --- the key set ------------------------------------------------------------------------------


def test_an_unknown_kid_refetches_at_most_once_a_minute(tmp_path: Path) -> None:
    key, stranger = rsa_key("k1"), rsa_key("k1-forged")
    clock = Monotonic()

    async def scenario() -> None:
        async with provider([key]) as idp, identities(tmp_path, idp, clock) as ids:
            assert idp.fetches == 1
            assert "no key" in await refused(ids, token(stranger, claims()))
            assert idp.fetches == 2  # one refetch
            other = rsa_key("k-other")
            assert "no key" in await refused(ids, token(other, claims()))
            assert idp.fetches == 2  # within 60 s: none
            clock.now += 59
            await refused(ids, token(other, claims()))
            assert idp.fetches == 2
            clock.now += 1
            await refused(ids, token(other, claims()))
            assert idp.fetches == 3
            assert await ids.authenticate(token(key, claims())) is not None
            assert idp.fetches == 3  # a known kid never fetches

    run_async(scenario())


def test_a_forged_kid_of_a_known_key_does_not_verify(tmp_path: Path) -> None:
    key = rsa_key("k1")
    forger = rsa_key("k1")  # the attacker's own key, under the real kid

    async def scenario() -> None:
        async with provider([key]) as idp, identities(tmp_path, idp) as ids:
            assert "does not verify" in await refused(ids, token(forger, claims()))
            assert idp.fetches == 1  # the kid is known: nothing is refetched

    run_async(scenario())


def test_rotation_fetches_the_new_key_and_the_old_one_verifies_until_removed(
    tmp_path: Path,
) -> None:
    old, new = rsa_key("k1"), ec_key("k2")
    clock = Monotonic()

    async def scenario() -> None:
        async with provider([old]) as idp, identities(tmp_path, idp, clock) as ids:
            assert await ids.authenticate(token(old, claims())) is not None
            idp.set_keys(old, new)
            assert await ids.authenticate(token(new, claims())) is not None  # refetched
            assert idp.fetches == 2
            assert await ids.authenticate(token(old, claims())) is not None
            idp.set_keys(new)  # the old key removed from the set
            assert await ids.authenticate(token(old, claims())) is not None  # still cached
            clock.now += keys.MAX_AGE_S
            # stale: refetched in the background while the cached keys stay in force
            assert await ids.authenticate(token(old, claims())) is not None
            await _settled(ids)
            assert idp.fetches == 3
            assert "no key" in await refused(ids, token(old, claims()))
            assert await ids.authenticate(token(new, claims())) is not None

    run_async(scenario())


async def _settled(ids: Identities) -> None:
    for _ in range(200):
        if not any(k.fetching for k in ids.keys.values()):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the background refetch did not end")


@pytest.fixture
def quick_fetches(monkeypatch: pytest.MonkeyPatch) -> Iterator[float]:
    """A fetch bound of 0.5 s instead of 5 (the mechanism is the same)."""
    assert keys.FETCH_TIMEOUT_S == 5.0  # the bound in production
    monkeypatch.setattr(keys, "FETCH_TIMEOUT_S", 0.5)
    yield 0.5


@pytest.mark.parametrize("mode", ["hang", "garbage", "error", "unhashable"])
def test_a_failing_jwks_leaves_the_cached_keys_in_force(
    tmp_path: Path, quick_fetches: float, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    key = rsa_key("k1")
    caplog.set_level("INFO", logger="seif.identity")

    async def scenario() -> None:
        async with provider([key]) as idp, identities(tmp_path, idp) as ids:
            idp.mode = mode
            began = time.monotonic()
            unknown = token(rsa_key("k9"), claims())
            assert "no key" in await refused(ids, unknown)
            assert time.monotonic() - began < quick_fetches + 0.5  # never past the bound
            assert idp.fetches == 2
            assert await ids.authenticate(token(key, claims())) is not None
            logged = caplog.text
            assert "the key set of issuer `corp` could not be fetched" in logged
            assert "1 cached keys stay in force" in logged
            assert idp.url not in logged and unknown not in logged

    run_async(scenario())


def test_stale_keys_of_a_failing_jwks_are_refetched_at_most_once_a_minute(tmp_path: Path) -> None:
    key = rsa_key("k1")
    clock = Monotonic()

    async def scenario() -> None:
        async with provider([key]) as idp, identities(tmp_path, idp, clock) as ids:
            idp.mode = "error"
            clock.now += keys.MAX_AGE_S
            for _ in range(5):  # any caller with a known kid: one background attempt
                assert await ids.authenticate(token(key, claims())) is not None
                await _settled(ids)
            assert idp.fetches == 2
            clock.now += keys.REFETCH_INTERVAL_S
            assert await ids.authenticate(token(key, claims())) is not None
            await _settled(ids)
            assert idp.fetches == 3

    run_async(scenario())


def test_an_unknown_kid_joins_a_fetch_under_way_and_begins_no_second(
    tmp_path: Path, quick_fetches: float
) -> None:
    key = rsa_key("k1")
    clock = Monotonic()

    async def scenario() -> None:
        async with provider([key]) as idp, identities(tmp_path, idp, clock) as ids:
            idp.mode = "hang"
            clock.now += keys.MAX_AGE_S
            assert await ids.authenticate(token(key, claims())) is not None  # stale: refetching
            began = time.monotonic()
            assert "no key" in await refused(ids, token(rsa_key("k9"), claims()))
            assert time.monotonic() - began < quick_fetches + 0.3  # one bound, not two
            assert idp.fetches == 2

    run_async(scenario())


def test_start_is_not_held_by_a_hanging_jwks(tmp_path: Path, quick_fetches: float) -> None:
    key = rsa_key("k1")

    async def scenario() -> None:
        async with provider([key]) as idp:
            idp.mode = "hang"
            began = time.monotonic()
            async with identities(tmp_path, idp) as ids:
                assert time.monotonic() - began < quick_fetches + 0.5
                assert ids.keys["corp"].keys == ()
                idp.mode = "ok"  # the provider is back: the first token fetches
                assert await ids.authenticate(token(key, claims())) is not None
                assert idp.fetches == 2

    run_async(scenario())


def test_a_jwks_file_needs_no_fetch(tmp_path: Path) -> None:
    key = ec_key("e1")
    (tmp_path / "idp.jwks").write_text(json.dumps(jwks(key)))
    entry = issuer_entry("", jwksFile="idp.jwks")
    del entry["jwksUri"]

    async def scenario() -> None:
        ids = Identities(credentials(tmp_path, entry), lambda: NOW_S * 1000)
        await ids.start()
        assert await ids.authenticate(token(key, claims())) is not None
        assert "no key" in await refused(ids, token(ec_key("e2"), claims()))

    run_async(scenario())
