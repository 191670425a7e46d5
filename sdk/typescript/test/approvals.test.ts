/** `approvalStatus` and `waitForApproval` against a server answering the approval route as the
 * spec says, polled with back-off on an injected clock. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { NotFoundError, RuntimeClient, SeifTransportError } from "@seif/sdk";

import { TOKEN, withServer, type Action, type Recorded } from "./server.js";

/** An injected monotonic clock and the sleep that moves it. */
class FakeTime {
  now = 1000;
  readonly sleeps: number[] = [];
  readonly clock = (): number => this.now;
  readonly sleep = async (ms: number): Promise<void> => {
    this.sleeps.push(ms);
    this.now += ms;
  };
}

/** Each call id answers the states of its script in turn (the last one repeating); another
 * context, or another bearer, is 404 `CONTEXT_UNKNOWN`. */
function approvals(scripts: Record<string, string[]>): (request: Recorded) => Action {
  return (request) => {
    const match = /^\/v1\/context\/tools\/approvals\/([^/]+)\/([^/]+)$/.exec(request.path);
    const [ref, call] = [match?.[1], decodeURIComponent(match?.[2] ?? "")];
    if (request.headers.authorization !== `Bearer ${TOKEN}` || ref !== "ctx_1") {
      return [404, { error: { code: "CONTEXT_UNKNOWN", message: "no such context" } }];
    }
    const script = scripts[call] ?? ["NONE"];
    const state = script.length > 1 ? (script.shift() as string) : script[0];
    if (state === "BAD") return [200, { state: "APPROVED" }];
    if (state === "APPROVED")
      return [200, { state, approvalId: `apr_${call}`, expiresAt: "2026-05-01T12:05:00.000Z" }];
    return [200, { state }];
  };
}

function close(actual: readonly number[], expected: readonly number[]): void {
  assert.equal(actual.length, expected.length, `${actual} vs ${expected}`);
  actual.forEach((value, i) =>
    assert.ok(Math.abs(value - (expected[i] ?? Number.NaN)) < 1e-9, `${actual} vs ${expected}`),
  );
}

describe("waitForApproval", () => {
  it("polls with growing waits until the state settles", async () => {
    const scripts = {
      w1: ["PENDING", "PENDING", "PENDING", "APPROVED"],
      w3: ["PENDING", "REJECTED"],
      w4: ["EXPIRED"],
    };
    await withServer(approvals(scripts), async (server) => {
      const time = new FakeTime();
      const sdk = new RuntimeClient({
        baseUrl: server.url,
        token: TOKEN,
        sleep: time.sleep,
        clock: time.clock,
      });
      const approved = await sdk.waitForApproval("ctx_1", "w1", { timeoutMs: 60_000 });
      assert.deepEqual(
        [approved.state, approved.approvalId, approved.contextRef, approved.callId],
        ["APPROVED", "apr_w1", "ctx_1", "w1"],
      );
      assert.equal(approved.expiresAt?.toISOString(), "2026-05-01T12:05:00.000Z");
      close(time.sleeps, [500, 750, 1125]); // three PENDING reads, growing waits

      time.sleeps.length = 0;
      const rejected = await sdk.waitForApproval("ctx_1", "w3", { timeoutMs: 60_000 });
      assert.deepEqual([rejected.state, time.sleeps], ["REJECTED", [500]]);
      const expired = await sdk.waitForApproval("ctx_1", "w4", { timeoutMs: 60_000 });
      const none = await sdk.waitForApproval("ctx_1", "never-asked", { timeoutMs: 60_000 });
      assert.deepEqual([expired.state, none.state, time.sleeps], ["EXPIRED", "NONE", [500]]);
      assert.deepEqual([expired.approvalId, expired.expiresAt], [null, null]);
    });
  });

  it("waits up to the deadline, never past it, and reads once more there", async () => {
    await withServer(approvals({ w2: ["PENDING"] }), async (server) => {
      const time = new FakeTime();
      const sdk = new RuntimeClient({
        baseUrl: server.url,
        token: TOKEN,
        sleep: time.sleep,
        clock: time.clock,
      });
      const start = time.now;
      const pending = await sdk.waitForApproval("ctx_1", "w2", { timeoutMs: 10_000 });
      assert.deepEqual([pending.state, pending.settled], ["PENDING", false]);
      assert.equal(time.now, start + 10_000);
      close(time.sleeps.slice(0, 5), [500, 750, 1125, 1687.5, 2531.25]);
      time.sleeps.length = 0;
      await sdk.waitForApproval("ctx_1", "w2", { timeoutMs: 40_000, maxIntervalMs: 5000 });
      assert.equal(Math.max(...time.sleeps), 5000);
      assert.ok(Math.abs(time.sleeps.reduce((a, b) => a + b) - 40_000) < 1e-6);

      const before = server.requests.length;
      await sdk.waitForApproval("ctx_1", "w2", { timeoutMs: 0 });
      assert.equal(server.requests.length, before + 1); // one read, no wait
      await assert.rejects(
        sdk.waitForApproval("ctx_1", "w2", { timeoutMs: 1, intervalMs: 0 }),
        RangeError,
      );
    });
  });

  it("an abort while waiting throws the signal's reason", async () => {
    await withServer(approvals({ w2: ["PENDING"] }), async (server) => {
      const sdk = new RuntimeClient({ baseUrl: server.url, token: TOKEN }); // the real sleep
      const controller = new AbortController();
      const waiting = sdk.waitForApproval("ctx_1", "w2", {
        timeoutMs: 60_000,
        intervalMs: 10_000,
        maxIntervalMs: 10_000,
        signal: controller.signal,
      });
      await server.arrived(1);
      const reason = new Error("the user left");
      controller.abort(reason);
      await assert.rejects(waiting, (e) => e === reason);
    });
  });
});

describe("approvalStatus", () => {
  it("encodes the path, and maps a foreign context and a malformed answer", async () => {
    await withServer(approvals({ "a/b c": ["PENDING"], bad: ["BAD"] }), async (server) => {
      const sdk = new RuntimeClient({ baseUrl: server.url, token: TOKEN });
      const odd = await sdk.approvalStatus("ctx_1", "a/b c");
      assert.deepEqual([odd.callId, odd.state], ["a/b c", "PENDING"]);
      assert.equal(server.requests.at(-1)?.path, "/v1/context/tools/approvals/ctx_1/a%2Fb%20c");
      await assert.rejects(sdk.approvalStatus("ctx_other", "w1"), (error: unknown) => {
        assert.ok(error instanceof NotFoundError);
        assert.deepEqual([error.status, error.code], [404, "CONTEXT_UNKNOWN"]);
        return true;
      });
      await assert.rejects(sdk.approvalStatus("ctx_1", "bad"), (error: unknown) => {
        assert.ok(error instanceof SeifTransportError && error.reason === "INVALID_RESPONSE");
        return true;
      });
      const other = new RuntimeClient({ baseUrl: server.url, token: "another-app" });
      await assert.rejects(other.approvalStatus("ctx_1", "w1"), { code: "CONTEXT_UNKNOWN" });
    });
  });
});
