/** The strict JSON boundary: what it refuses in untrusted text, and what it refuses to send. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { JsonError } from "@seif/sdk";

import { encodeJson, parseStrict } from "#internal/json";

function refused(text: string, code: string): void {
  assert.throws(
    () => parseStrict(text),
    (error: unknown) => error instanceof JsonError && error.code === code,
    text,
  );
}

describe("parseStrict", () => {
  it("reads JSON and freezes it all the way down", () => {
    const value = parseStrict('{"a": [1, {"b": "c"}], "d": null}') as {
      a: [number, { b: string }];
    };
    assert.deepEqual(value, { a: [1, { b: "c" }], d: null });
    assert.ok(Object.isFrozen(value) && Object.isFrozen(value.a) && Object.isFrozen(value.a[1]));
    assert.throws(() => {
      (value.a[1] as { b: string }).b = "x";
    }, TypeError);
  });

  it("refuses a key given twice, at any depth, and only then", () => {
    refused('{"a": 1, "a": 2}', "DUPLICATE_KEY");
    refused('{"x": [{"k": 1, "k": 1}]}', "DUPLICATE_KEY");
    refused('{"a\\u0062": 1, "ab": 2}', "DUPLICATE_KEY"); // the same key, escaped
    assert.doesNotThrow(() => parseStrict('{"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}]}'));
    assert.doesNotThrow(() => parseStrict('{"x": "{\\"a\\": 1, \\"a\\": 2}", "y": {}, "z": 1}'));
    assert.doesNotThrow(() => parseStrict('[{}, "a", "a", {"a": "a"}]'));
  });

  it("refuses syntax errors, numbers out of range, lone surrogates and deep nesting", () => {
    refused("{", "JSON_SYNTAX");
    refused("NaN", "JSON_SYNTAX");
    refused('{"n": 1e400}', "NUMBER_INVALID");
    refused('["\\ud800"]', "LONE_SURROGATE");
    refused(`${"[".repeat(65)}${"]".repeat(65)}`, "TOO_DEEP");
    assert.doesNotThrow(() => parseStrict(`${"[".repeat(64)}${"]".repeat(64)}`));
    assert.equal(parseStrict('"\\ud83d\\ude00"'), "\u{1F600}");
  });
});

describe("encodeJson", () => {
  it("writes JSON and leaves out properties that are undefined", () => {
    assert.equal(encodeJson({ a: [1, "x", null, true], b: undefined }), '{"a":[1,"x",null,true]}');
  });

  it("refuses what is not JSON before anything is sent, naming where", () => {
    const cyclic: Record<string, unknown> = {};
    cyclic["self"] = cyclic;
    const cases: [unknown, RegExp][] = [
      [{ x: Number.NaN }, /the value\.x is NaN/],
      [{ x: [1, Infinity] }, /the value\.x\[1\] is Infinity/],
      [{ when: new Date(0) }, /the value\.when is a Date/],
      [{ m: new Map() }, /is a Map/],
      [{ n: 1n }, /is a bigint/],
      [{ f: () => 1 }, /is a function/],
      [[undefined], /\[0\] is undefined/],
      [cyclic, /a cycle/],
      [{ s: "\ud800" }, /lone surrogate/],
    ];
    for (const [value, message] of cases) {
      assert.throws(() => encodeJson(value), { name: "TypeError", message });
    }
  });
});
