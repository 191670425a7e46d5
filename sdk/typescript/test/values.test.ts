/** The values read from the runtime's answers: exact, frozen, and refused (naming the field)
 * when an answer is not what the API says. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { ApprovalStatus, Context, Receipt } from "@seif/sdk";

import { resolveAnswer, SCHEMAS } from "./fake-runtime.js";
import { receipt } from "./server.js";

describe("Context", () => {
  it("carries the resolve answer unchanged, frozen", () => {
    const context = Context.fromWire(resolveAnswer());
    assert.equal(context.contextRef, "ctx_1");
    assert.deepEqual(
      context.messages.map((m) => [m.id, m.role]),
      [
        ["role", "system"],
        ["rules", "developer"],
      ],
    );
    assert.deepEqual(context.tools, SCHEMAS);
    assert.deepEqual(context.toolNames, ["inspect_context", "propose_change"]);
    assert.equal(context.contracts[1]?.contractDigest, "sha256:propose-change");
    assert.equal(context.omitted[0]?.explanation["by"], "rule");
    assert.equal(context.tokens.total, 30);
    assert.ok(Object.isFrozen(context) && Object.isFrozen(context.tools[0]?.parameters));
    assert.throws(() => {
      (context as { objective: string }).objective = "learner";
    }, TypeError);
    assert.throws(() => {
      (context.tools[0]?.parameters as Record<string, unknown>)["type"] = "array";
    }, TypeError);
  });

  it("hands out expiresAt as a new Date on every read", () => {
    const context = Context.fromWire(resolveAnswer());
    assert.equal(context.expiresAt.toISOString(), "2026-01-01T00:15:00.000Z");
    context.expiresAt.setTime(0);
    assert.equal(context.expiresAt.getTime(), Date.parse("2026-01-01T00:15:00Z"));
  });

  it("maps a function name to its tool id, or names what it discloses", () => {
    const context = Context.fromWire(resolveAnswer());
    assert.equal(context.toolId("propose_change"), "propose-change");
    assert.throws(() => context.toolId("search_knowledge"), {
      name: "RangeError",
      message: /no function `search_knowledge`; it discloses: `inspect_context`, `propose_change`/,
    });
  });

  it("refuses an answer that is not what the API says, naming the field", () => {
    const answer = resolveAnswer();
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ ...answer, contextRef: 7 }, /`contextRef` is missing or not a string/],
      [{ ...answer, expiresAt: "2026-01-01T00:15:00" }, /`expiresAt` is not an RFC 3339 instant/],
      [{ ...answer, tools: {} }, /`tools` is missing or not an array/],
      [
        { ...answer, tools: [{ ...SCHEMAS[0], parameters: { type: "array" } }] },
        /`parameters.type` is not `object`/,
      ],
      [
        { ...answer, tokens: { ...(answer["tokens"] as object), total: 1.5 } },
        /`total` is missing or not an integer/,
      ],
    ];
    for (const [body, message] of cases) {
      assert.throws(() => Context.fromWire(body), { name: "TypeError", message });
    }
    assert.throws(() => Context.fromWire([]), /not a JSON object/);
  });
});

describe("Receipt", () => {
  it("reads a receipt: output only when available, frozen", () => {
    const read = Receipt.fromWire(receipt("c1"));
    assert.deepEqual(
      [read.status, read.succeeded, read.needsApproval, read.output],
      ["SUCCEEDED", true, false, { x: [1, 2] }],
    );
    assert.ok(Object.isFrozen(read) && Object.isFrozen(read.output));
    const duplicate = Receipt.fromWire({
      ...receipt("c1"),
      duplicate: true,
      outputAvailable: false,
      output: { x: 1 },
    });
    assert.deepEqual([duplicate.duplicate, duplicate.output], [true, null]);
    const denied = Receipt.fromWire(
      receipt("w1", "DENIED", { reason: "APPROVAL_REQUIRED", decision: { outcome: "DENY" } }),
    );
    assert.ok(denied.needsApproval);
    assert.deepEqual(denied.decision, { outcome: "DENY" });
    assert.equal(
      Receipt.fromWire(receipt("f1", "FAILED", { executorError: "DOWN" })).executorError,
      "DOWN",
    );
    assert.deepEqual(Object.keys(JSON.parse(JSON.stringify(read)) as object), [
      "callId",
      "tool",
      "status",
      "reason",
      "duplicate",
      "outputAvailable",
      "output",
    ]);
  });

  it("refuses what is not a receipt", () => {
    assert.throws(
      () => Receipt.fromWire({ ...receipt("c1"), status: "MAYBE" }),
      /`status` `MAYBE` is not a receipt status/,
    );
    assert.throws(
      () => Receipt.fromWire({ ...receipt("c1"), callId: null }),
      /`callId` is missing/,
    );
    assert.throws(
      () => Receipt.fromWire({ ...receipt("c1"), reason: 3 }),
      /`reason` is not a string/,
    );
  });
});

describe("ApprovalStatus", () => {
  it("reads the states", () => {
    const approved = ApprovalStatus.fromWire("ctx_1", "w1", {
      state: "APPROVED",
      approvalId: "apr_1",
      expiresAt: "2026-05-01T12:05:00.000Z",
    });
    assert.deepEqual(
      [approved.approved, approved.settled, approved.approvalId],
      [true, true, "apr_1"],
    );
    assert.equal(approved.expiresAt?.toISOString(), "2026-05-01T12:05:00.000Z");
    const pending = ApprovalStatus.fromWire("ctx_1", "w1", {
      state: "PENDING",
      expiresAt: "2026-05-01T12:05:00Z",
    });
    assert.deepEqual([pending.settled, pending.approvalId], [false, null]);
    assert.equal(ApprovalStatus.fromWire("ctx_1", "w1", { state: "NONE" }).expiresAt, null);
  });

  it("refuses APPROVED without an approval id, and unknown states", () => {
    assert.throws(
      () => ApprovalStatus.fromWire("c", "w", { state: "APPROVED" }),
      /APPROVED without `approvalId`/,
    );
    assert.throws(
      () => ApprovalStatus.fromWire("c", "w", { state: "MAYBE" }),
      /not an approval state/,
    );
  });
});
