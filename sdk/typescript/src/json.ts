/**
 * JSON at the SDK's boundary, as strict as the runtime's (`policy/json/strict.py`):
 *
 * - {@link parseStrict} reads untrusted text (the runtime's answers, the arguments a model
 *   sends) and refuses what `JSON.parse` would let through silently: a key given twice in one
 *   object (`JSON.parse` keeps the last), a number a double cannot hold (`1e400` would become
 *   `Infinity`), a string holding a lone surrogate, and nesting deeper than 64 levels. The value
 *   it returns is deeply frozen.
 * - {@link encodeJson} writes what the SDK sends, refusing before anything is sent what is not
 *   JSON (`NaN`, a `Date`, a `Map`, a function, a `bigint`, a cycle...) where `JSON.stringify`
 *   would drop or rewrite it. Properties whose value is `undefined` are left out, as
 *   `JSON.stringify` leaves them out.
 */

/** A JSON value as the SDK hands it out: read-only all the way down. */
export type JsonValue = null | boolean | number | string | JsonArray | JsonObject;
export type JsonArray = readonly JsonValue[];
export interface JsonObject {
  readonly [key: string]: JsonValue;
}

/** Nesting levels a document may have (an object or an array is one level). */
export const MAX_DEPTH = 64;

/** Untrusted text refused: `code` is `JSON_SYNTAX`, `DUPLICATE_KEY`, `NUMBER_INVALID`,
 * `LONE_SURROGATE` or `TOO_DEEP`. */
export class JsonError extends SyntaxError {
  override name = "JsonError";
  readonly code: string;

  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function shown(text: string): string {
  return text.length > 64 ? `${text.slice(0, 64)}...` : text;
}

/** Where the string token starting at `start` (its opening quote) ends (its closing quote). */
function stringEnd(text: string, start: number): number {
  let i = start + 1;
  while (text.charCodeAt(i) !== 0x22) {
    i += text.charCodeAt(i) === 0x5c ? 2 : 1;
  }
  return i;
}

function decodedString(token: string): string {
  const inner = token.slice(1, -1);
  return inner.includes("\\") ? (JSON.parse(token) as string) : inner;
}

/** The checks `JSON.parse` does not make, on text it has accepted: keys, strings, depth. */
function scan(text: string, maxDepth: number): void {
  const frames: (Set<string> | null)[] = []; // a Set of keys per object, null per array
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      const end = stringEnd(text, i);
      const value = decodedString(text.slice(i, end + 1));
      if (LONE_SURROGATE.test(value)) {
        throw new JsonError("LONE_SURROGATE", "a string holds a lone surrogate");
      }
      const keys = frames[frames.length - 1];
      if (expectKey && keys) {
        if (keys.has(value)) {
          throw new JsonError("DUPLICATE_KEY", `the key \`${shown(value)}\` is given twice`);
        }
        keys.add(value);
      }
      expectKey = false;
      i = end;
    } else if (c === 0x7b || c === 0x5b) {
      frames.push(c === 0x7b ? new Set() : null);
      expectKey = c === 0x7b;
      if (frames.length > maxDepth) {
        throw new JsonError("TOO_DEEP", `nested deeper than ${maxDepth} levels`);
      }
    } else if (c === 0x7d || c === 0x5d) {
      frames.pop();
      expectKey = false;
    } else if (c === 0x2c) {
      expectKey = frames[frames.length - 1] instanceof Set;
    }
  }
}

/** `value` (decoded JSON), deeply frozen; `NUMBER_INVALID` for a number that is not finite. */
export function freezeJson(value: unknown): JsonValue {
  if (typeof value === "number" && !Number.isFinite(value)) {
    throw new JsonError("NUMBER_INVALID", "a number is out of the range of a double");
  }
  if (typeof value === "object" && value !== null) {
    for (const item of Object.values(value)) {
      freezeJson(item);
    }
    Object.freeze(value);
  }
  return value as JsonValue;
}

/** Strict, deeply frozen `JSON.parse` (a {@link JsonError} for what it refuses). */
export function parseStrict(text: string, maxDepth: number = MAX_DEPTH): JsonValue {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new JsonError("JSON_SYNTAX", error instanceof Error ? error.message : "not JSON");
  }
  scan(text, maxDepth);
  return freezeJson(value);
}

/** Whether `value` is a JSON object (not an array, not null). */
export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isPlainObject(value: object): boolean {
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function checkString(text: string, where: string): void {
  if (LONE_SURROGATE.test(text)) {
    throw new TypeError(`${where} holds a lone surrogate: it is not encodable as UTF-8`);
  }
}

function checkValue(value: unknown, where: string, seen: Set<object>): void {
  if (value === null || typeof value === "boolean") return;
  if (typeof value === "string") return checkString(value, where);
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new TypeError(`${where} is ${value}, not a JSON number`);
    return;
  }
  if (typeof value !== "object") throw new TypeError(`${where} is a ${typeof value}, not JSON`);
  if (seen.has(value)) throw new TypeError(`${where} refers back to itself (a cycle)`);
  if (seen.size >= MAX_DEPTH) throw new TypeError(`${where} is nested deeper than ${MAX_DEPTH}`);
  seen.add(value);
  checkContainer(value, where, seen);
  seen.delete(value);
}

function checkContainer(value: object, where: string, seen: Set<object>): void {
  if (Array.isArray(value)) {
    value.forEach((item, index) => {
      if (item === undefined) throw new TypeError(`${where}[${index}] is undefined, not JSON`);
      checkValue(item, `${where}[${index}]`, seen);
    });
    return;
  }
  if (!isPlainObject(value)) {
    const kind = value.constructor?.name ?? "object";
    throw new TypeError(`${where} is a ${kind}, not a plain JSON object`);
  }
  for (const [key, item] of Object.entries(value)) {
    checkString(key, `${where}: a key`);
    if (item !== undefined) checkValue(item, `${where}.${shown(key)}`, seen);
  }
}

/** The JSON text of `value`; a `TypeError` naming the first part that is not JSON. */
export function encodeJson(value: unknown, where = "the value"): string {
  checkValue(value, where, new Set());
  return JSON.stringify(value);
}
