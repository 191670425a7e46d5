/** What `execute` returns when no receipt comes back (never an exception, never a retry), and
 * what an `AbortSignal` does before and after the request was dispatched. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { RuntimeClient, SeifTransportError, ServerError } from "@seif/sdk";

import { freePort, receipt, TOKEN, withServer, type Action } from "./server.js";

const ARGS = { ref: "a" };

function client(url: string, timeoutMs = 300): RuntimeClient {
  return new RuntimeClient({ baseUrl: url, token: TOKEN, timeoutMs });
}

describe("execute when no receipt comes back", () => {
  const cases: [Action, string, string][] = [
    ["close", "UNKNOWN", "CONNECTION_LOST"],
    ["hang", "UNKNOWN", "CLIENT_TIMEOUT"],
    [[502, { error: { code: "BAD_GATEWAY", message: "x" } }], "UNKNOWN", "RUNTIME_ERROR"],
    [[500, "<html>oops</html>"], "UNKNOWN", "RUNTIME_ERROR"],
    [[200, "not json"], "UNKNOWN", "INVALID_RESPONSE"],
    [
      [200, '{"callId": "c1", "callId": "c1", "tool": "t", "status": "SUCCEEDED"}'],
      "UNKNOWN",
      "INVALID_RESPONSE",
    ],
    [[200, { callId: "c1", status: "MAYBE" }], "UNKNOWN", "INVALID_RESPONSE"],
    [[200, receipt("other")], "UNKNOWN", "INVALID_RESPONSE"],
    [[307, { location: "elsewhere" }], "UNKNOWN", "INVALID_RESPONSE"],
    [[200, receipt("c1")], "SUCCEEDED", ""],
  ];
  for (const [action, status, reason] of cases) {
    const label =
      typeof action === "string"
        ? action
        : `${action[0]} ${JSON.stringify(action[1]).slice(0, 40)}`;
    it(`${label}: ${status} ${reason}, sent once`, async () => {
      await withServer(
        () => action,
        async (server) => {
          const got = await client(server.url).execute("ctx_1", "t", "c1", ARGS, {
            turnId: "turn_1",
          });
          assert.deepEqual([got.status, got.reason ?? ""], [status, reason]);
          assert.deepEqual([got.callId, got.tool], ["c1", "t"]);
          assert.equal(server.requests.length, 1); // sent once, never again
          const [request] = server.requests;
          assert.equal(`${request?.method} ${request?.path}`, "POST /v1/context/tools/execute");
          assert.equal(request?.headers.authorization, `Bearer ${TOKEN}`);
          assert.deepEqual(request?.body, {
            contextRef: "ctx_1",
            tool: "t",
            callId: "c1",
            arguments: ARGS,
            turnId: "turn_1",
          });
          if (status === "UNKNOWN") {
            assert.ok(got.detail && !got.outputAvailable && got.output === null);
          } else {
            assert.deepEqual(got.output, { x: [1, 2] });
          }
        },
      );
    });
  }

  it("a timeout says how long it waited", async () => {
    await withServer(
      () => "hang",
      async (server) => {
        const got = await client(server.url, 250).execute("ctx_1", "t", "c1", ARGS);
        assert.match(got.detail ?? "", /no answer within 0\.25 s/);
      },
    );
  });

  it("a 503 (the runtime did not take the request) throws", async () => {
    await withServer(
      () => [503, { error: { code: "TOO_MANY_CONNECTIONS", message: "busy" } }],
      async (server) => {
        await assert.rejects(
          client(server.url).execute("ctx_1", "t", "c1", ARGS),
          (error: unknown) => {
            assert.ok(error instanceof ServerError);
            assert.deepEqual(
              [error.status, error.code, error.message],
              [503, "TOO_MANY_CONNECTIONS", "busy"],
            );
            return true;
          },
        );
      },
    );
  });

  it("no connection: FAILED CONNECT_FAILED (nothing was sent); other calls throw", async () => {
    const sdk = client(`http://127.0.0.1:${await freePort()}`);
    const refused = await sdk.execute("ctx_1", "t", "c1", ARGS);
    assert.deepEqual([refused.status, refused.reason], ["FAILED", "CONNECT_FAILED"]);
    assert.match(refused.detail ?? "", /nothing was sent/);
    await assert.rejects(sdk.startTurn(), (error: unknown) => {
      assert.ok(error instanceof SeifTransportError);
      assert.deepEqual([error.reason, error.sent], ["CONNECT_FAILED", false]);
      return true;
    });
  });

  it("outside execute, a lost connection or an answer that is not the API's throws", async () => {
    await withServer(
      () => "close",
      async (server) => {
        await assert.rejects(client(server.url).resolve("authoring"), {
          name: "SeifTransportError",
          reason: "CONNECTION_LOST",
          sent: true,
        });
      },
    );
    await withServer(
      () => [200, { contextRef: "ctx_1" }],
      async (server) => {
        await assert.rejects(client(server.url).resolve("authoring"), {
          reason: "INVALID_RESPONSE",
          message: /INVALID_RESPONSE: .*`build`/,
        });
      },
    );
  });

  it("arguments that are not JSON are refused before sending", async () => {
    await withServer(
      () => [200, receipt("c1")],
      async (server) => {
        const sdk = client(server.url);
        await assert.rejects(sdk.execute("ctx_1", "t", "c1", { x: Number.NaN }), {
          name: "TypeError",
          message: /arguments\.x is NaN/,
        });
        await assert.rejects(sdk.execute("ctx_1", "t", "c1", { when: new Date() }), TypeError);
        assert.equal(server.requests.length, 0);
      },
    );
  });
});

describe("an AbortSignal", () => {
  it("aborted before dispatch throws its reason, and nothing is sent", async () => {
    await withServer(
      () => [200, receipt("c1")],
      async (server) => {
        const sdk = client(server.url);
        await assert.rejects(
          sdk.execute("ctx_1", "t", "c1", ARGS, { signal: AbortSignal.abort() }),
          { name: "AbortError" },
        );
        const reason = new Error("the user left");
        await assert.rejects(
          sdk.execute("ctx_1", "t", "c1", ARGS, { signal: AbortSignal.abort(reason) }),
          (e) => e === reason,
        );
        await assert.rejects(sdk.resolve("authoring", { signal: AbortSignal.abort() }), {
          name: "AbortError",
        });
        assert.equal(server.requests.length, 0);
      },
    );
  });

  it("aborted once dispatched gives the UNKNOWN receipt, not an AbortError", async () => {
    await withServer(
      () => "hang",
      async (server) => {
        const controller = new AbortController();
        const pending = client(server.url, 10_000).execute("ctx_1", "t", "c1", ARGS, {
          signal: controller.signal,
        });
        await server.arrived(1);
        controller.abort();
        const got = await pending;
        assert.deepEqual([got.status, got.reason, got.callId], ["UNKNOWN", "CLIENT_ABORTED", "c1"]);
        assert.match(got.detail ?? "", /after it was dispatched/);
        assert.equal(server.requests.length, 1);
      },
    );
  });

  it("aborted after the answer came is too late to change anything", async () => {
    await withServer(
      () => [200, receipt("c1")],
      async (server) => {
        const controller = new AbortController();
        const got = await client(server.url).execute("ctx_1", "t", "c1", ARGS, {
          signal: controller.signal,
        });
        controller.abort();
        assert.equal(got.status, "SUCCEEDED");
      },
    );
  });

  it("aborted during another request throws its reason", async () => {
    await withServer(
      () => "hang",
      async (server) => {
        const controller = new AbortController();
        const pending = client(server.url, 10_000).resolve("authoring", {
          signal: controller.signal,
        });
        await server.arrived(1);
        const reason = new Error("stop");
        controller.abort(reason);
        await assert.rejects(pending, (e) => e === reason);
      },
    );
  });
});
