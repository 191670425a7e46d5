// The official MCP TypeScript SDK's client (@modelcontextprotocol/sdk, pinned in package.json)
// against `seif serve --mcp`, driven by tests/servers/mcp/test_mcp_typescript.py.
//
// It lists the tools, then makes one call after another (SEIF_STEPS: a JSON list of
// {step, name, arguments, callId, wait?}) and prints one JSON line per event on stdout:
// {"step", "result"} for a result (with the milliseconds it took, `elapsedMs`), {"step", "threw": {name, code, message}} when the client
// threw (the test fails on any), {"step", "progress"} for each progress notification of a call
// that waits for approval. A step with `wait` uses the client settings docs/mcp.md gives for a
// call that may wait for a human: progress notifications that restart the request timeout.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = new URL(process.env.SEIF_MCP_URL);
const steps = JSON.parse(process.env.SEIF_STEPS);
const say = (line) => process.stdout.write(JSON.stringify(line) + "\n");
const thrown = (error) => ({ name: error?.name, code: error?.code, message: String(error?.message ?? error) });

const transport = new StreamableHTTPClientTransport(url, {
  requestInit: { headers: { Authorization: `Bearer ${process.env.SEIF_APP_TOKEN}` } },
});
const client = new Client({ name: "seif-tests", version: "1.0.0" });
await client.connect(transport);
say({ step: "connected", protocolVersion: transport.protocolVersion ?? null });

let failed = false;
try {
  say({ step: "list", result: await client.listTools() });
} catch (error) {
  failed = true;
  say({ step: "list", threw: thrown(error) });
}
for (const { step, name, arguments: args, callId, wait } of steps) {
  const options = wait
    ? {
        timeout: wait.timeoutMs, // restarted by every progress notification (every 5 s) ...
        resetTimeoutOnProgress: true,
        maxTotalTimeout: wait.maxTotalMs, // ... up to this in all
        onprogress: (progress) => say({ step, progress }), // sends a progressToken
      }
    : undefined;
  const params = { name, arguments: args, _meta: { "io.seif/callId": callId } };
  const started = Date.now();
  try {
    const result = await client.callTool(params, undefined, options);
    say({ step, result: { ...result, elapsedMs: Date.now() - started } });
  } catch (error) {
    failed = true;
    say({ step, threw: thrown(error) });
  }
}
await client.close();
process.exit(failed ? 1 : 0);
