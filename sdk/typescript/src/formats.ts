/**
 * Provider formats (`seif/formats.py`): the model-facing schemas of a context in each
 * provider's tool format, and the parsers of the tool calls a model sends back. Pure functions,
 * no network.
 *
 * Schemas are passed through unchanged: the `parameters` object of each result *is* the
 * context's (the same frozen object, not a copy), so what the model sees is exactly what the
 * contract digest covers. A `tools` argument is `context.tools` (or `turn.tools`), or any
 * array of objects with `name`, `description` and `parameters`.
 *
 * The parsers take the provider library's objects (plain objects in both Node clients) and
 * return `[name, callId, args]`: the function name the model used, the provider's call id
 * (pass it on as the call id, never invent one) and the arguments as a JSON object, so that
 * `turn.execute(...fromOpenAIToolCall(call))` runs the call. Malformed input throws a
 * `TypeError` naming what is wrong.
 */

import { isJsonObject, JsonError, parseStrict, type JsonObject } from "./json.js";
import type { ObjectSchema, ToolSchema } from "./values.js";

export interface OpenAIChatTool {
  readonly type: "function";
  readonly function: {
    readonly name: string;
    readonly description: string;
    readonly parameters: ObjectSchema;
  };
}

export interface OpenAIResponsesTool {
  readonly type: "function";
  readonly name: string;
  readonly description: string;
  readonly parameters: ObjectSchema;
}

export interface AnthropicTool {
  readonly name: string;
  readonly description: string;
  readonly input_schema: ObjectSchema;
}

/** `[name, callId, args]`: what a tool call asks for. */
export type ToolCall = readonly [name: string, callId: string, args: JsonObject];

function field(item: unknown, name: string): unknown {
  return typeof item === "object" && item !== null
    ? (item as Record<string, unknown>)[name]
    : undefined;
}

function schemas(tools: readonly ToolSchema[]): readonly ToolSchema[] {
  if (!Array.isArray(tools)) {
    throw new TypeError("tools must be an array of tool schemas (e.g. context.tools)");
  }
  return tools.map((tool: unknown, index) => {
    const name = field(tool, "name");
    const description = field(tool, "description");
    const parameters = field(tool, "parameters");
    if (typeof name !== "string" || name === "") {
      throw new TypeError(`tools[${index}]: \`name\` is missing or not a non-empty string`);
    }
    if (typeof description !== "string") {
      throw new TypeError(
        `tools[${index}] (\`${name.slice(0, 64)}\`): \`description\` is not a string`,
      );
    }
    if (!isJsonObject(parameters)) {
      throw new TypeError(
        `tools[${index}] (\`${name.slice(0, 64)}\`): \`parameters\` is not a JSON object`,
      );
    }
    return { name, description, parameters: parameters as ObjectSchema };
  });
}

/** OpenAI Chat Completions `tools`:
 * `[{type: "function", function: {name, description, parameters}}]`. */
export function toOpenAIChatTools(tools: readonly ToolSchema[]): OpenAIChatTool[] {
  return schemas(tools).map(({ name, description, parameters }) => ({
    type: "function",
    function: { name, description, parameters },
  }));
}

/** OpenAI Responses `tools`: `[{type: "function", name, description, parameters}]`. */
export function toOpenAIResponsesTools(tools: readonly ToolSchema[]): OpenAIResponsesTool[] {
  return schemas(tools).map(({ name, description, parameters }) => ({
    type: "function",
    name,
    description,
    parameters,
  }));
}

/** Anthropic Messages `tools`: `[{name, description, input_schema}]`. */
export function toAnthropicTools(tools: readonly ToolSchema[]): AnthropicTool[] {
  return schemas(tools).map(({ name, description, parameters }) => ({
    name,
    description,
    input_schema: parameters,
  }));
}

function nonEmpty(value: unknown, what: string): string {
  if (typeof value !== "string" || value === "") {
    throw new TypeError(`${what} is missing or not a non-empty string`);
  }
  return value;
}

function decodedArguments(text: unknown, what: string): JsonObject {
  if (typeof text !== "string") {
    throw new TypeError(
      `${what} must be a JSON string, not ${text === null ? "null" : typeof text}`,
    );
  }
  let value: unknown;
  try {
    value = parseStrict(text);
  } catch (error) {
    const why = error instanceof JsonError ? error.message : String(error);
    throw new TypeError(`${what} is not strict JSON: ${why}`);
  }
  if (!isJsonObject(value)) throw new TypeError(`${what} is not a JSON object`);
  return value;
}

/** A Chat Completions tool call (`{id, type: "function", function: {name, arguments}}`,
 * `arguments` a JSON string) as `[name, callId, args]`. A Responses `function_call` item
 * (`{type: "function_call", call_id, name, arguments}`) is read too. */
export function fromOpenAIToolCall(call: unknown): ToolCall {
  const kind = field(call, "type");
  if (kind === "function_call") {
    const name = nonEmpty(field(call, "name"), "the function call's `name`");
    const callId = nonEmpty(field(call, "call_id"), "the function call's `call_id`");
    return [
      name,
      callId,
      decodedArguments(field(call, "arguments"), "the function call's `arguments`"),
    ];
  }
  if (typeof call !== "object" || call === null) {
    throw new TypeError("the tool call is not an object");
  }
  if (kind !== undefined && kind !== "function") {
    throw new TypeError(
      `the tool call's \`type\` is \`${String(kind).slice(0, 32)}\`, not \`function\``,
    );
  }
  const callId = nonEmpty(field(call, "id"), "the tool call's `id`");
  const fn = field(call, "function");
  if (typeof fn !== "object" || fn === null) {
    throw new TypeError("the tool call has no `function` object");
  }
  const name = nonEmpty(field(fn, "name"), "the tool call's `function.name`");
  return [name, callId, decodedArguments(field(fn, "arguments"), "`function.arguments`")];
}

/** An Anthropic `tool_use` content block (`{type: "tool_use", id, name, input}`) as
 * `[name, callId, args]`. */
export function fromAnthropicToolUse(block: unknown): ToolCall {
  const kind = field(block, "type");
  if (kind !== "tool_use") {
    const shown = kind === undefined ? "missing" : `\`${String(kind).slice(0, 32)}\``;
    throw new TypeError(`the content block's \`type\` is ${shown}, not \`tool_use\``);
  }
  const callId = nonEmpty(field(block, "id"), "the tool_use block's `id`");
  const name = nonEmpty(field(block, "name"), "the tool_use block's `name`");
  const input = field(block, "input");
  if (!isJsonObject(input)) {
    throw new TypeError("the tool_use block's `input` is missing or not a JSON object");
  }
  return [name, callId, Object.freeze({ ...input })];
}
