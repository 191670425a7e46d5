/** The provider formats pass the context's schemas through unchanged (the very same objects),
 * and the tool-call parsers name what is wrong with malformed input. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  Context,
  fromAnthropicToolUse,
  fromOpenAIToolCall,
  toAnthropicTools,
  toOpenAIChatTools,
  toOpenAIResponsesTools,
  type ToolSchema,
} from "@seif/sdk";

import { resolveAnswer, SCHEMAS } from "./fake-runtime.js";

const context = Context.fromWire(JSON.parse(JSON.stringify(resolveAnswer())));

describe("tool formats", () => {
  it("pass the schemas through unchanged, the same objects", () => {
    const chat = toOpenAIChatTools(context.tools);
    const responses = toOpenAIResponsesTools(context.tools);
    const anthropic = toAnthropicTools(context.tools);
    assert.equal(chat.length, 2);
    context.tools.forEach((tool, i) => {
      const { name, description, parameters } = tool;
      assert.deepEqual(chat[i], { type: "function", function: { name, description, parameters } });
      assert.deepEqual(responses[i], { type: "function", name, description, parameters });
      assert.deepEqual(anthropic[i], { name, description, input_schema: parameters });
      assert.equal(chat[i]?.function.parameters, parameters);
      assert.equal(responses[i]?.parameters, parameters);
      assert.equal(anthropic[i]?.input_schema, parameters);
    });
    assert.deepEqual(
      chat.map((t) => t.function.parameters),
      SCHEMAS.map((s) => s.parameters),
    );
  });

  it("name what is wrong with a tool list", () => {
    const bad = [
      context.tools[0],
      { name: "f", description: "d", parameters: [] },
    ] as unknown as ToolSchema[];
    assert.throws(() => toOpenAIChatTools(bad), {
      name: "TypeError",
      message: "tools[1] (`f`): `parameters` is not a JSON object",
    });
    const nameless = [{ description: "d", parameters: {} }] as unknown as ToolSchema[];
    assert.throws(() => toAnthropicTools(nameless), { message: /tools\[0\]: `name` is missing/ });
    assert.throws(() => toOpenAIResponsesTools("tools" as unknown as ToolSchema[]), {
      message: /must be an array/,
    });
  });
});

describe("fromOpenAIToolCall", () => {
  it("reads a Chat Completions tool call and a Responses function_call item", () => {
    const chat = {
      id: "call_1",
      type: "function",
      function: { name: "inspect_context", arguments: '{"ref": "a"}' },
    };
    assert.deepEqual(fromOpenAIToolCall(chat), ["inspect_context", "call_1", { ref: "a" }]);
    const item = {
      type: "function_call",
      id: "fc_1",
      call_id: "call_2",
      name: "f",
      arguments: "{}",
      status: "completed",
    };
    assert.deepEqual(fromOpenAIToolCall(item), ["f", "call_2", {}]);
    const [, , args] = fromOpenAIToolCall(chat);
    assert.ok(Object.isFrozen(args));
  });

  it("throws a TypeError naming what is wrong", () => {
    const call = (fn: unknown, extra: object = {}): unknown => ({
      id: "c",
      type: "function",
      function: fn,
      ...extra,
    });
    const cases: [unknown, RegExp][] = [
      [null, /not an object/],
      [
        call({ name: "f", arguments: "{}" }, { type: "custom" }),
        /`type` is `custom`, not `function`/,
      ],
      [call({ name: "f", arguments: "{}" }, { id: "" }), /the tool call's `id` is missing/],
      [call(undefined), /has no `function` object/],
      [call({ arguments: "{}" }), /`function.name` is missing/],
      [
        call({ name: "f", arguments: { a: 1 } }),
        /`function.arguments` must be a JSON string, not object/,
      ],
      [call({ name: "f", arguments: "{" }), /`function.arguments` is not strict JSON/],
      [call({ name: "f", arguments: '{"a": 1, "a": 2}' }), /the key `a` is given twice/],
      [call({ name: "f", arguments: "[1]" }), /`function.arguments` is not a JSON object/],
      [{ type: "function_call", name: "f", arguments: "{}" }, /`call_id` is missing/],
    ];
    for (const [input, message] of cases) {
      assert.throws(() => fromOpenAIToolCall(input), { name: "TypeError", message });
    }
  });
});

describe("fromAnthropicToolUse", () => {
  it("reads a tool_use block", () => {
    const block = { type: "tool_use", id: "toolu_1", name: "inspect_context", input: { ref: "a" } };
    assert.deepEqual(fromAnthropicToolUse(block), ["inspect_context", "toolu_1", { ref: "a" }]);
  });

  it("throws a TypeError naming what is wrong", () => {
    const cases: [unknown, RegExp][] = [
      [{ type: "text", text: "hi" }, /`type` is `text`, not `tool_use`/],
      [{ id: "x" }, /`type` is missing/],
      [{ type: "tool_use", name: "f", input: {} }, /`id` is missing/],
      [{ type: "tool_use", id: "x", input: {} }, /`name` is missing/],
      [
        { type: "tool_use", id: "x", name: "f", input: "{}" },
        /`input` is missing or not a JSON object/,
      ],
    ];
    for (const [input, message] of cases) {
      assert.throws(() => fromAnthropicToolUse(input), { name: "TypeError", message });
    }
  });
});
