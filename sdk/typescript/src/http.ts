/**
 * One HTTP exchange with the runtime over Node's built-in `fetch`: sent once, never retried,
 * redirects never followed, bounded by the client's timeout and the caller's `AbortSignal`.
 *
 * What it can end in:
 * - the decoded JSON of a 2xx answer (`undefined` for an empty body);
 * - the typed {@link SeifRequestError} of a 4xx or 5xx answer;
 * - a {@link SeifTransportError}: `CONNECT_FAILED` (no connection could be opened: nothing was
 *   sent), `CLIENT_TIMEOUT`, `CLIENT_ABORTED` (the caller's signal, once the request was
 *   dispatched), `CONNECTION_LOST` or `INVALID_RESPONSE`, the last four with `sent: true`
 *   (the request may have reached the runtime).
 *
 * A signal already aborted before dispatch throws its own reason, and nothing is sent. Once
 * `fetch` has been called the SDK cannot tell whether a byte left the machine, so anything but
 * a failure to connect counts as sent: `UNKNOWN` never claims more than the SDK saw.
 */

import { requestError, SeifTransportError } from "./errors.js";
import { parseStrict, type JsonValue } from "./json.js";

export interface Endpoint {
  readonly baseUrl: string;
  readonly token: string;
  readonly timeoutMs: number;
}

/** The error codes (of the error or its `cause`) that mean no connection was opened. */
const CONNECT_CODES: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EADDRNOTAVAIL",
  "UND_ERR_CONNECT_TIMEOUT",
  "CERT_HAS_EXPIRED",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "ERR_TLS_CERT_ALTNAME_INVALID",
]);

function codeOf(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const code: unknown = (error as { code?: unknown }).code;
  return typeof code === "string" ? code : undefined;
}

/** Whether a `fetch` failure says that no connection could be opened (nothing was sent). */
export function connectFailed(error: unknown): boolean {
  const cause: unknown = error instanceof Error ? error.cause : undefined;
  for (const candidate of [error, cause]) {
    const code = codeOf(candidate);
    if (code !== undefined && CONNECT_CODES.has(code)) return true;
    if (candidate instanceof AggregateError && candidate.errors.length > 0) {
      return candidate.errors.every((e: unknown) => CONNECT_CODES.has(codeOf(e) ?? ""));
    }
  }
  return false;
}

type Ending = "timeout" | "aborted" | undefined;

/** A signal for one exchange: aborted by the caller's `signal` or after `timeoutMs`; `ending`
 * says which came first. */
class Deadline {
  readonly controller = new AbortController();
  ending: Ending;
  readonly #timer: ReturnType<typeof setTimeout>;
  readonly #caller: AbortSignal | undefined;
  readonly #onAbort = (): void => this.#end("aborted");

  constructor(timeoutMs: number, caller: AbortSignal | undefined) {
    this.#caller = caller;
    this.#timer = setTimeout(() => this.#end("timeout"), timeoutMs);
    caller?.addEventListener("abort", this.#onAbort, { once: true });
  }

  #end(ending: Ending): void {
    if (this.ending === undefined) {
      this.ending = ending;
      this.controller.abort();
    }
  }

  dispose(): void {
    clearTimeout(this.#timer);
    this.#caller?.removeEventListener("abort", this.#onAbort);
  }
}

function failure(
  error: unknown,
  deadline: Deadline,
  endpoint: Endpoint,
  caller: AbortSignal | undefined,
): SeifTransportError {
  if (deadline.ending === "timeout") {
    const detail = `no answer within ${endpoint.timeoutMs / 1000} s`;
    return new SeifTransportError("CLIENT_TIMEOUT", detail, { sent: true, cause: error });
  }
  if (deadline.ending === "aborted") {
    const detail =
      "the caller's signal aborted the request after it was dispatched " +
      "(the runtime may have taken it; the abort does not cancel it there)";
    return new SeifTransportError("CLIENT_ABORTED", detail, { sent: true, cause: caller?.reason });
  }
  if (connectFailed(error)) {
    const detail = `no connection to ${endpoint.baseUrl} (${describe(error)}); nothing was sent`;
    return new SeifTransportError("CONNECT_FAILED", detail, { sent: false, cause: error });
  }
  const detail = `the connection failed after the request was dispatched (${describe(error)})`;
  return new SeifTransportError("CONNECTION_LOST", detail, { sent: true, cause: error });
}

function describe(error: unknown): string {
  const cause: unknown = error instanceof Error ? error.cause : undefined;
  const code = codeOf(cause) ?? codeOf(error);
  const name = error instanceof Error ? error.name : typeof error;
  return code === undefined ? name : `${name}, ${code}`;
}

interface Answer {
  readonly status: number;
  readonly phrase: string;
  readonly bytes: Uint8Array;
}

async function fetchOnce(
  endpoint: Endpoint,
  method: string,
  path: string,
  body: string | undefined,
  signal: AbortSignal,
): Promise<Answer> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${endpoint.token}`,
    accept: "application/json",
  };
  if (body !== undefined) headers["content-type"] = "application/json";
  const init: RequestInit = { method, headers, redirect: "manual", signal };
  if (body !== undefined) init.body = body;
  const response = await fetch(endpoint.baseUrl + path, init);
  const bytes = new Uint8Array(await response.arrayBuffer());
  return { status: response.status, phrase: response.statusText, bytes };
}

const NOT_JSON = Symbol("not JSON");

function decode(bytes: Uint8Array): JsonValue | undefined | typeof NOT_JSON {
  if (bytes.length === 0) return undefined;
  try {
    return parseStrict(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    return NOT_JSON;
  }
}

/** `method path` with the JSON text `body`, once: see the module's comment. */
export async function exchange(
  endpoint: Endpoint,
  method: string,
  path: string,
  body: string | undefined,
  caller?: AbortSignal,
): Promise<JsonValue | undefined> {
  caller?.throwIfAborted(); // nothing sent: the caller's own reason
  const deadline = new Deadline(endpoint.timeoutMs, caller);
  let answer: Answer;
  try {
    answer = await fetchOnce(endpoint, method, path, body, deadline.controller.signal);
  } catch (error) {
    throw failure(error, deadline, endpoint, caller);
  } finally {
    deadline.dispose();
  }
  const decoded = decode(answer.bytes);
  if (answer.status >= 400) {
    throw requestError(answer.status, decoded === NOT_JSON ? undefined : decoded, answer.phrase);
  }
  if (answer.status >= 300) {
    const detail = `a ${answer.status} redirect answer (not followed)`;
    throw new SeifTransportError("INVALID_RESPONSE", detail, { sent: true });
  }
  if (decoded === NOT_JSON) {
    const detail = `the ${answer.status} answer is not strict JSON`;
    throw new SeifTransportError("INVALID_RESPONSE", detail, { sent: true });
  }
  return decoded;
}
