/**
 * The SDK's values (those of `seif/sdk/types.py`): frozen, read from the runtime's answers.
 * Objects and arrays inside them are deeply frozen; instants are `Date`s, handed out as a new
 * `Date` on every read so that no one can move them.
 *
 * Each `...FromWire` reads one answer of the HTTP API and throws a `TypeError` naming the
 * field when the answer is not what the API says (the client turns that into
 * `INVALID_RESPONSE`).
 */

import { freezeJson, isJsonObject, type JsonObject, type JsonValue } from "./json.js";

export type ReceiptStatus = "SUCCEEDED" | "FAILED" | "UNKNOWN" | "DENIED";
export type ApprovalState = "PENDING" | "APPROVED" | "REJECTED" | "EXPIRED" | "NONE";

/** The `DENIED` reasons that list the call for an operator's approval. */
export const APPROVAL_REASONS: ReadonlySet<string> = new Set([
  "APPROVAL_REQUIRED",
  "APPROVAL_INVALID",
  "APPROVAL_EXPIRED",
]);

const EMPTY: JsonObject = Object.freeze({});

// --- reading answers ---------------------------------------------------------------------------

function object(value: unknown, where: string): JsonObject {
  if (!isJsonObject(value)) throw new TypeError(`${where} is not a JSON object`);
  return value;
}

function text(body: JsonObject, name: string, where: string): string {
  const value = body[name];
  if (typeof value !== "string") {
    throw new TypeError(`${where}: \`${name}\` is missing or not a string`);
  }
  return value;
}

function integer(body: JsonObject, name: string, where: string): number {
  const value = body[name];
  if (typeof value !== "number" || !Number.isInteger(value)) {
    throw new TypeError(`${where}: \`${name}\` is missing or not an integer`);
  }
  return value;
}

function flag(body: JsonObject, name: string, where: string): boolean {
  const value = body[name];
  if (typeof value !== "boolean") {
    throw new TypeError(`${where}: \`${name}\` is missing or not a boolean`);
  }
  return value;
}

function list(body: JsonObject, name: string, where: string): readonly JsonValue[] {
  const value = body[name];
  if (!Array.isArray(value)) {
    throw new TypeError(`${where}: \`${name}\` is missing or not an array`);
  }
  return value as readonly JsonValue[];
}

const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i;

/** An RFC 3339 instant with its offset (`2026-01-01T00:00:00.000Z`), in epoch milliseconds. */
export function parseInstant(value: string, where: string): number {
  const ms = INSTANT.test(value) ? Date.parse(value) : Number.NaN;
  if (Number.isNaN(ms)) throw new TypeError(`${where} is not an RFC 3339 instant with an offset`);
  return ms;
}

// --- a context -------------------------------------------------------------------------------

/** One disclosed context message, in the order the policy gives it. */
export interface Message {
  readonly id: string;
  /** `system`, `developer`, `user` or `assistant`. */
  readonly role: string;
  readonly text: string;
}

/** A JSON Schema whose `type` is `object`: the compiler refuses any other `parameters`. */
export interface ObjectSchema extends JsonObject {
  readonly type: "object";
}

/** The model-facing schema of one disclosed tool, exactly as the contract digest covers it. */
export interface ToolSchema {
  readonly name: string;
  readonly description: string;
  /** The JSON Schema object as the runtime sent it (deeply frozen). */
  readonly parameters: ObjectSchema;
}

/** A disclosed tool's contract: its id (what the runtime dispatches) and function name (what
 * the model sees), version, digest, effect, approval and call limit. */
export interface Contract {
  readonly id: string;
  readonly name: string;
  readonly version: string;
  readonly contractDigest: string;
  readonly effect: string;
  readonly approval: string;
  readonly maxCalls: number;
}

/** Something the policy did not disclose, and why. */
export interface Omission {
  readonly id: string;
  readonly kind: string;
  readonly reason: string;
  readonly explanation: JsonObject;
}

export interface Tokens {
  readonly messages: number;
  readonly tools: number;
  readonly total: number;
  readonly ceiling: number;
  readonly estimated: boolean;
}

export interface ContextFields {
  readonly contextRef: string;
  readonly build: string;
  readonly objective: string;
  readonly expiresAt: Date;
  readonly messages: readonly Message[];
  readonly tools: readonly ToolSchema[];
  readonly contracts: readonly Contract[];
  readonly omitted: readonly Omission[];
  readonly tokens: Tokens;
}

/** A resolved context: what the policy disclosed for one objective, for 15 minutes. */
export class Context {
  readonly contextRef: string;
  readonly build: string;
  readonly objective: string;
  readonly messages: readonly Message[];
  readonly tools: readonly ToolSchema[];
  readonly contracts: readonly Contract[];
  readonly omitted: readonly Omission[];
  readonly tokens: Tokens;
  readonly #expiresAt: number;

  constructor(fields: ContextFields) {
    this.contextRef = fields.contextRef;
    this.build = fields.build;
    this.objective = fields.objective;
    this.#expiresAt = fields.expiresAt.getTime();
    this.messages = Object.freeze(fields.messages.map((m) => Object.freeze({ ...m })));
    this.tools = Object.freeze(
      fields.tools.map((t) =>
        Object.freeze({ ...t, parameters: freezeJson(t.parameters) as ObjectSchema }),
      ),
    );
    this.contracts = Object.freeze(fields.contracts.map((c) => Object.freeze({ ...c })));
    this.omitted = Object.freeze(
      fields.omitted.map((o) =>
        Object.freeze({ ...o, explanation: freezeJson(o.explanation) as JsonObject }),
      ),
    );
    this.tokens = Object.freeze({ ...fields.tokens });
    Object.freeze(this);
  }

  /** When the context expires (a new `Date` on every read). */
  get expiresAt(): Date {
    return new Date(this.#expiresAt);
  }

  /** The function names of the disclosed tools, in order. */
  get toolNames(): readonly string[] {
    return Object.freeze(this.tools.map((t) => t.name));
  }

  /** A `POST /v1/context/resolve` 200 answer (a `TypeError` naming what is not as the API
   * says). */
  static fromWire(answer: unknown): Context {
    return contextFromWire(answer);
  }

  /** The tool id of the function `name` the model used; a `RangeError` naming the names this
   * context discloses when it discloses no such function. */
  toolId(name: string): string {
    const found = this.contracts.find((c) => c.name === name);
    if (found) return found.id;
    const disclosed = this.toolNames.map((n) => `\`${n}\``).join(", ") || "none";
    throw new RangeError(
      `context ${this.contextRef} discloses no function \`${String(name).slice(0, 64)}\`; ` +
        `it discloses: ${disclosed}`,
    );
  }
}

function message(value: JsonValue): Message {
  const m = object(value, "a message");
  const where = "a message";
  return { id: text(m, "id", where), role: text(m, "role", where), text: text(m, "text", where) };
}

function toolSchema(value: JsonValue): ToolSchema {
  const where = "a tool schema";
  const t = object(value, where);
  const parameters = object(t["parameters"], `${where}: \`parameters\``);
  if (parameters["type"] !== "object") {
    throw new TypeError(`${where}: \`parameters.type\` is not \`object\``);
  }
  return {
    name: text(t, "name", where),
    description: text(t, "description", where),
    parameters: parameters as ObjectSchema,
  };
}

function contract(value: JsonValue): Contract {
  const where = "a contract";
  const c = object(value, where);
  return {
    id: text(c, "id", where),
    name: text(c, "name", where),
    version: text(c, "version", where),
    contractDigest: text(c, "contractDigest", where),
    effect: text(c, "effect", where),
    approval: text(c, "approval", where),
    maxCalls: integer(c, "maxCalls", where),
  };
}

function omission(value: JsonValue): Omission {
  const where = "an omission";
  const o = object(value, where);
  const explanation = o["explanation"];
  return {
    id: text(o, "id", where),
    kind: text(o, "kind", where),
    reason: text(o, "reason", where),
    explanation: isJsonObject(explanation) ? explanation : EMPTY,
  };
}

function tokens(value: JsonValue | undefined): Tokens {
  const where = "`tokens`";
  const t = object(value, `the resolve answer: ${where}`);
  return {
    messages: integer(t, "messages", where),
    tools: integer(t, "tools", where),
    total: integer(t, "total", where),
    ceiling: integer(t, "ceiling", where),
    estimated: flag(t, "estimated", where),
  };
}

/** A `POST /v1/context/resolve` 200 answer (as {@link parseStrict} decoded it). */
export function contextFromWire(answer: unknown): Context {
  const where = "the resolve answer";
  const body = object(answer, where);
  return new Context({
    contextRef: text(body, "contextRef", where),
    build: text(body, "build", where),
    objective: text(body, "objective", where),
    expiresAt: new Date(parseInstant(text(body, "expiresAt", where), `${where}: \`expiresAt\``)),
    messages: list(body, "messages", where).map(message),
    tools: list(body, "tools", where).map(toolSchema),
    contracts: list(body, "contracts", where).map(contract),
    omitted: list(body, "omitted", where).map(omission),
    tokens: tokens(body["tokens"]),
  });
}
