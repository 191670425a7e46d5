// Loaded with `node --import ./bearer.mjs` before the MCP conformance suite's CLI: every request
// that the suite sends with `fetch` to the server under test (the origin of its `--url`) carries
// `Authorization: Bearer $SEIF_APP_TOKEN`, as a client configured with a token sends it. The
// suite's own client sends none, and seif answers 401 to a request without one.
const at = process.argv.indexOf("--url");
const origin = at > 0 ? new URL(process.argv[at + 1]).origin : null;
const token = process.env.SEIF_APP_TOKEN;
const sent = globalThis.fetch;

globalThis.fetch = (input, init = {}) => {
  const url = new URL(input instanceof Request ? input.url : String(input));
  if (origin === null || !token || url.origin !== origin) return sent(input, init);
  const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
  headers.set("Authorization", `Bearer ${token}`);
  return sent(input, { ...init, headers });
};
