"""A real OpenID provider started by the tests: the npm package ``oidc-provider`` (8.x, pinned in
``tests/node/package.json``), run by ``tests/node/oidc-provider.mjs`` on a free loopback port.

:func:`openid_provider` writes its configuration (signing keys made here with ``joserfc``, so the
test knows the key set; the clients; the users; the resources it issues tokens for), starts it
with the Node of :mod:`tests.support.node_support` and yields an :class:`OpenIdProvider` once it
accepts. Without the npm packages a test skips, saying how to install them; with ``CI`` set, it
fails instead.

The two principals: the users :data:`ALICE` (group ``support``) and :data:`BOB` (group
``sales``) sign in with the authorization code flow (PKCE) of the client :data:`WEB_CLIENT`;
no browser is needed, :func:`sign_in` posts the provider's own login and consent forms as a
browser would. The application :data:`AGENT` gets tokens with client credentials; its tokens'
``sub`` is the client, and its ``groups`` the client's (the provider's ``extraTokenClaims``).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import json
import re
import secrets
import select
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import httpx2
from joserfc.jwk import RSAKey

from tests.support.identity import b64
from tests.support.node_support import node_script
from tests.support.runtime_harness import stop

SCOPE = "seif.resolve seif.execute seif.traces"
"""The scope values of the provider's resource servers (what a token may carry)."""
SCOPES = {
    "seif.resolve": "context.resolve",
    "seif.execute": "tools.execute",
    "seif.traces": "traces.read",
}
"""The ``scopes`` mapping of seif's issuer entry for the provider."""
AGENT = "support-agent"
AGENT_SECRET = "support-agent-secret-4c1e9a7b2d"
AGENT_GROUPS = ["agents"]
WEB_CLIENT = "tutor-web"
REDIRECT_URI = "http://127.0.0.1:9/callback"
"""Where the provider sends a user back with the code: nothing listens there, :func:`sign_in`
reads the redirect instead of following it."""
ALICE, BOB = "alice", "bob"
ACCOUNTS = {
    ALICE: {"groups": ["support"], "email": "alice@example.org"},
    BOB: {"groups": ["sales"], "email": "bob@example.org"},
}
CLIENTS: list[dict[str, Any]] = [
    {
        "client_id": AGENT,
        "client_secret": AGENT_SECRET,
        "grant_types": ["client_credentials"],
        "redirect_uris": [],
        "token_endpoint_auth_method": "client_secret_basic",
        "groups": AGENT_GROUPS,
    },
    {  # a public client (no secret): PKCE is what binds its code to it
        "client_id": WEB_CLIENT,
        "grant_types": ["authorization_code"],
        "redirect_uris": [REDIRECT_URI],
        "token_endpoint_auth_method": "none",
    },
]


@dataclass(frozen=True)
class OpenIdProvider:
    """A running provider: its ``issuer`` (``http://127.0.0.1:PORT/``) and signing ``key``."""

    issuer: str
    key: RSAKey

    @property
    def jwks_uri(self) -> str:
        return self.issuer + "jwks"

    @property
    def token_endpoint(self) -> str:
        return self.issuer + "token"

    def issuer_entry(self, audience: str, **overrides: Any) -> dict[str, Any]:
        """seif's ``issuers`` entry for this provider (``id`` ``op``)."""
        entry: dict[str, Any] = {
            "id": "op",
            "issuer": self.issuer,
            "jwksUri": self.jwks_uri,
            "audience": audience,
            "scopes": dict(SCOPES),
            "claims": ["groups", "email"],
        }
        return {**entry, **overrides}

    async def client_credentials(self, resource: str, scope: str = SCOPE) -> str:
        """An access token of :data:`AGENT` for ``resource`` (a plain client-credentials
        request, RFC 6749 section 4.4, with a resource indicator)."""
        async with httpx2.AsyncClient(timeout=10) as http:
            answer = await http.post(
                self.token_endpoint,
                data={"grant_type": "client_credentials", "resource": resource, "scope": scope},
                auth=(AGENT, AGENT_SECRET),
            )
        assert answer.status_code == 200, answer.text
        token: str = answer.json()["access_token"]
        return token


@contextlib.contextmanager
def openid_provider(
    root: Path,
    resources: Sequence[str],
    *,
    clients: Sequence[Mapping[str, Any]] = CLIENTS,
    accounts: Mapping[str, Any] = ACCOUNTS,
    ttl_s: int = 300,
    keys: Sequence[RSAKey] = (),
    port: int = 0,
) -> Iterator[OpenIdProvider]:
    """The provider, issuing JWT access tokens for the resource indicators under each of
    ``resources`` (prefixes), signed with the first of ``keys`` (default: one made here) and
    publishing them all; on ``port`` (0: a free one; a restart with other keys keeps its
    issuer); stopped on exit."""
    runner, script = node_script("oidc-provider.mjs")
    if not keys:
        keys = [RSAKey.generate_key(2048, parameters={"kid": "op-1", "alg": "RS256", "use": "sig"})]
    key = keys[0]
    config = root / "oidc-provider.json"
    config.write_text(
        json.dumps(
            {
                "port": port,
                "keys": {"keys": [k.as_dict(private=True) for k in keys]},
                "clients": list(clients),
                "accounts": dict(accounts),
                "resources": list(resources),
                "scope": SCOPE,
                "accessTokenTTL": ttl_s,
            }
        )
    )
    with (root / "oidc-provider.err").open("w") as err:
        proc = subprocess.Popen(
            [runner, str(script), str(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        yield OpenIdProvider(_issuer(proc, root / "oidc-provider.err"), key)
    finally:
        stop(proc)


def _issuer(proc: subprocess.Popen[str], err: Path) -> str:
    """The ``{"issuer"}`` line the launcher prints once it accepts."""
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or proc.poll() is not None:
            raise AssertionError(f"oidc-provider did not start: {err.read_text()[-2000:]}")
        if select.select([proc.stdout], [], [], left)[0]:
            line = proc.stdout.readline()
            if line.startswith("{"):
                issuer: str = json.loads(line)["issuer"]
                return issuer


@dataclass(frozen=True)
class Redirected:
    """What the provider sent the user back to the client with."""

    code: str
    state: str | None
    iss: str | None


async def sign_in(
    authorization_url: str, login: str, redirect_uri: str = REDIRECT_URI
) -> Redirected:
    """Be the user's browser: open ``authorization_url``, sign in on the provider's login page
    as ``login`` (any password), agree on its consent page, and read the code from the
    redirect to ``redirect_uri``."""
    async with httpx2.AsyncClient(timeout=10, follow_redirects=False) as browser:
        answer = await browser.get(authorization_url)
        for _ in range(12):
            if answer.is_redirect:
                location = urljoin(str(answer.url), answer.headers["location"])
                if location.startswith(redirect_uri):
                    query = parse_qs(urlsplit(location).query)
                    assert "code" in query, query  # an `error` otherwise
                    return Redirected(
                        query["code"][0], query.get("state", [None])[0], query.get("iss", [None])[0]
                    )
                answer = await browser.get(location)
                continue
            assert answer.status_code == 200, (answer.status_code, answer.text[:2000])
            action = re.search(r'<form[^>]*action="([^"]+)"', answer.text)
            prompt = re.search(r'name="prompt" value="([^"]+)"', answer.text)
            assert action and prompt, answer.text[:2000]
            form = {"prompt": prompt.group(1)}
            if form["prompt"] == "login":
                form |= {"login": login, "password": "any"}
            target = urljoin(str(answer.url), html.unescape(action.group(1)))
            answer = await browser.post(target, data=form)
    raise AssertionError("the provider never sent the user back to the client")


async def user_token(op: OpenIdProvider, login: str, resource: str, scope: str = SCOPE) -> str:
    """An access token of the user ``login`` for ``resource``: the authorization code flow of
    :data:`WEB_CLIENT` with PKCE (S256), signed in through :func:`sign_in`."""
    verifier = secrets.token_urlsafe(64)
    challenge = b64(hashlib.sha256(verifier.encode()).digest())
    state = secrets.token_urlsafe(16)
    query = {
        "response_type": "code",
        "client_id": WEB_CLIENT,
        "redirect_uri": REDIRECT_URI,
        "scope": scope,
        "resource": resource,
        "state": state,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    back = await sign_in(f"{op.issuer}auth?{urlencode(query)}", login)
    assert back.state == state and back.iss == op.issuer, back
    async with httpx2.AsyncClient(timeout=10) as http:
        answer = await http.post(
            op.token_endpoint,
            data={
                "grant_type": "authorization_code",
                "code": back.code,
                "redirect_uri": REDIRECT_URI,
                "client_id": WEB_CLIENT,
                "code_verifier": verifier,
                "resource": resource,
            },
        )
    assert answer.status_code == 200, answer.text
    token: str = answer.json()["access_token"]
    return token


def claims_of(token: str) -> dict[str, Any]:
    """A JWT's claims, read without verifying it (to say what the provider put in it)."""
    payload = token.split(".")[1]
    found: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    )
    return found
