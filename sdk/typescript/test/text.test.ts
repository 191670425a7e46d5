/** `receiptText`: what a model is told of a receipt. The cases of `receipt-texts.json` are the
 * Python SDK's `seif.receipt_text` output (its suite checks the same file), so both SDKs tell a
 * model the same text. */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";

import { argumentErrors, Receipt, receiptText } from "@seif/sdk";

interface Case {
  readonly case: string;
  readonly receipt: unknown;
  readonly text: string;
}

const CASES = JSON.parse(
  readFileSync(new URL("../../test/receipt-texts.json", import.meta.url), "utf-8"),
) as Case[];

describe("receiptText", () => {
  for (const { case: name, receipt, text } of CASES) {
    it(`writes the Python SDK's text: ${name}`, () => {
      assert.equal(receiptText(Receipt.fromWire(receipt)), text);
    });
  }

  it("names each error's pointer and message and never an argument value", () => {
    const errors = [
      { pointer: "/limit", keyword: "maximum", message: "`987654` is greater than the maximum `10`" },
      { pointer: "/kind", keyword: "enum", message: "value is not one of the `enum` values" },
    ];
    const text = receiptText(
      new Receipt({
        callId: "c",
        tool: "t",
        status: "DENIED",
        reason: "ARGUMENTS_INVALID",
        decision: { outcome: "DENY", errors },
      }),
    );
    assert.ok(!text.includes("987654"));
    assert.deepEqual(JSON.parse(text).seif.errors, [
      { pointer: "/limit", message: "the value is greater than the maximum `10`" },
      { pointer: "/kind", message: "value is not one of the `enum` values" },
    ]);
  });

  it("bounds the errors shown and counts the rest", () => {
    const many = Array.from({ length: 25 }, (_, i) => ({ pointer: `/${i}`, message: "m" }));
    const { shown, omitted } = argumentErrors(many);
    assert.equal(shown.length, 10);
    assert.equal(omitted, 15);
    const astral = argumentErrors([{ pointer: "/😀".repeat(100), message: "m" }]).shown[0];
    assert.equal(astral?.pointer, `${"/😀".repeat(60)}…(+80)`); // characters, never half of one
  });
});
