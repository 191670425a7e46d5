// A real OpenID provider for seif's tests: the npm package oidc-provider (8.x), configured from
// the JSON file named by the first argument (tests/support/oidc_provider.py writes it):
//
//   {"keys": {"keys": [<private JWK>, ...]},        the signing keys (static: the test made them)
//    "clients": [{"client_id", "client_secret", "grant_types", "redirect_uris",
//                 "token_endpoint_auth_method", "groups"}],   `groups`: the client's own claim
//    "accounts": {"<login>": {"groups": [...], "email": "..."}},  the users of the login page
//    "resources": ["http://127.0.0.1:PORT/", ...],   the resource indicators served (prefixes)
//    "scope": "seif.resolve seif.execute ...",        the scope values a resource server has
//    "accessTokenTTL": 300}
//
// It listens on a free loopback port (or the config's "port": a restart with other keys) and prints one JSON line, {"issuer": "http://127.0.0.1:PORT/"},
// once it accepts. Access tokens are JWTs (RFC 9068, `typ: at+jwt`) issued through resource
// indicators (RFC 8707): `aud` is the resource the client asked for, `scope` the resource
// server's scope values the client asked for. A client-credentials token's `sub` is the client;
// an authorization-code token's the user who signed in on the provider's own login page
// (devInteractions: any password). A user's access token carries the user's claims (`groups`,
// `email`), a client-credentials token the client's `groups` (extraTokenClaims). The issuer ends with `/` (as Auth0's does):
// the MCP Python SDK compares the authorization response's `iss` with the metadata's issuer as
// pydantic renders it, which adds that slash to a bare origin.
import http from "node:http";
import { readFileSync } from "node:fs";

import Provider, { errors } from "oidc-provider";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const accounts = config.accounts ?? {};
const clientGroups = Object.fromEntries(
  (config.clients ?? []).map((client) => [client.client_id, client.groups]),
);
const clients = (config.clients ?? []).map(({ groups, ...client }) => ({
  response_types: client.grant_types?.includes("authorization_code") ? ["code"] : [],
  ...client,
}));
const scope = config.scope ?? "seif.resolve seif.execute";
const ttl = config.accessTokenTTL ?? 300;

const server = http.createServer();
server.listen(config.port ?? 0, "127.0.0.1", () => {
  const issuer = `http://127.0.0.1:${server.address().port}/`;
  const provider = new Provider(issuer, {
    clients,
    jwks: config.keys,
    cookies: { keys: ["seif-tests-cookie-key"] },
    async findAccount(_ctx, id) {
      if (!Object.hasOwn(accounts, id)) return undefined;
      return { accountId: id, claims: async () => ({ sub: id, ...accounts[id] }) };
    },
    features: {
      devInteractions: { enabled: true },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: async () => undefined,
        useGrantedResource: async () => true,
        async getResourceServerInfo(_ctx, indicator) {
          if (!(config.resources ?? []).some((prefix) => indicator.startsWith(prefix))) {
            throw new errors.InvalidTarget();
          }
          return {
            scope,
            audience: indicator,
            accessTokenTTL: ttl,
            accessTokenFormat: "jwt",
            jwt: { sign: { alg: "RS256" } },
          };
        },
      },
    },
    async extraTokenClaims(_ctx, token) {
      if (token.accountId) return accounts[token.accountId];
      const groups = clientGroups[token.clientId];
      return groups === undefined ? undefined : { groups };
    },
    ttl: {
      AccessToken: ttl,
      ClientCredentials: ttl,
      AuthorizationCode: 60,
      Grant: 600,
      Interaction: 600,
      Session: 600,
      IdToken: ttl,
    },
  });
  server.on("request", provider.callback());
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
});

for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => process.exit(0));
