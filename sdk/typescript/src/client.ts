/**
 * `RuntimeClient`: the client of the runtime's HTTP API (`seif/sdk/client.py`, in TypeScript).
 *
 * What a call can end in:
 * - a value (`Context`, `Receipt`, `ApprovalStatus`, a turn id);
 * - a {@link SeifRequestError} subclass when the runtime refused the request itself (400, 401,
 *   403, 404, 409, 503...);
 * - a {@link SeifTransportError} when no usable answer came back;
 * - the signal's reason (an `AbortError`) when the caller's `signal` aborted the request.
 *
 * `execute` is the exception to the last three: it never throws for a transport failure and
 * never retries. When the request may have reached the runtime (a timeout, a connection lost,
 * an abort once dispatched, a 5xx other than 503, an answer that is not a receipt) it returns
 * an `UNKNOWN` receipt whose `reason` says so (`CLIENT_TIMEOUT`, `CONNECTION_LOST`,
 * `CLIENT_ABORTED`, `RUNTIME_ERROR`, `INVALID_RESPONSE`); when no connection could be opened at
 * all it returns a `FAILED` receipt with `CONNECT_FAILED`. Only what the runtime refused before
 * dispatch (4xx, and 503: a runtime that did not take the request) and a signal aborted before
 * dispatch throw.
 */

import { SeifTransportError, ServerError, ToolBuildRefused } from "./errors.js";
import { exchange, type Endpoint } from "./http.js";
import { encodeJson, isJsonObject, type JsonValue } from "./json.js";
import { approvalFromWire, Receipt, receiptFromWire, type ApprovalStatus } from "./receipts.js";
import {
  checkedNames,
  runAgentTurn,
  type Delivery,
  type Handler,
  type TurnRequest,
} from "./turns.js";
import { contextFromWire, type Context, type Message } from "./values.js";

export interface RuntimeClientOptions {
  /** The runtime, e.g. `http://127.0.0.1:8787`. */
  readonly baseUrl: string;
  /** The application's bearer token (never shown in a message). */
  readonly token: string;
  /** Bounds each request, connecting included (default 30000). Give it more than the build's
   * longest tool timeout, or an execute still running comes back `UNKNOWN` `CLIENT_TIMEOUT`. */
  readonly timeoutMs?: number | undefined;
  /** What `waitForApproval` waits with (injectable for tests). */
  readonly sleep?: ((ms: number, signal?: AbortSignal) => Promise<void>) | undefined;
  /** Monotonic milliseconds, what `waitForApproval` measures with (default `performance.now`). */
  readonly clock?: (() => number) | undefined;
}

export interface RequestOptions {
  readonly signal?: AbortSignal | undefined;
}

export interface ResolveOptions extends RequestOptions {
  readonly consumer?: string | undefined;
  readonly environment?: string | undefined;
  readonly deployment?: string | undefined;
  readonly traceId?: string | undefined;
  readonly turnId?: string | undefined;
}

export interface ExecuteOptions extends RequestOptions {
  /** The approval of this exact call (`ApprovalStatus.approvalId`; null is none). */
  readonly approvalId?: string | null | undefined;
  readonly turnId?: string | undefined;
}

export interface WaitOptions extends RequestOptions {
  /** How long to wait at most (required). */
  readonly timeoutMs: number;
  /** The first wait between two reads (default 500). */
  readonly intervalMs?: number | undefined;
  /** The longest wait between two reads (default 5000). */
  readonly maxIntervalMs?: number | undefined;
  /** How much longer each wait is than the one before (default 1.5). */
  readonly backoff?: number | undefined;
}

export type Outcome = "COMPLETED" | "FAILED";

/** Contexts whose function names the client remembers (for `execute` by function name). */
export const KNOWN_CONTEXTS = 1024;

function segment(value: string): string {
  if (typeof value !== "string" || value === "") {
    throw new TypeError("a path identifier must be a non-empty string");
  }
  return encodeURIComponent(value);
}

/** Waits `ms`, or throws the signal's reason once it aborts. */
export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    signal?.throwIfAborted();
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

interface Polling {
  readonly timeoutMs: number;
  readonly intervalMs: number;
  readonly maxIntervalMs: number;
  readonly backoff: number;
}

function checkWait(options: WaitOptions): Polling {
  const wanted: Polling = {
    timeoutMs: options.timeoutMs,
    intervalMs: options.intervalMs ?? 500,
    maxIntervalMs: options.maxIntervalMs ?? 5000,
    backoff: options.backoff ?? 1.5,
  };
  const { timeoutMs, intervalMs, maxIntervalMs, backoff } = wanted;
  if (!(timeoutMs >= 0 && intervalMs > 0 && maxIntervalMs >= intervalMs && backoff >= 1)) {
    throw new RangeError(
      "need timeoutMs >= 0, intervalMs > 0, maxIntervalMs >= intervalMs, backoff >= 1",
    );
  }
  return wanted;
}

export class RuntimeClient {
  readonly baseUrl: string;
  readonly timeoutMs: number;
  readonly #endpoint: Endpoint;
  readonly #sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  readonly #clock: () => number;
  readonly #names = new Map<string, ReadonlyMap<string, string>>();

  constructor(options: RuntimeClientOptions) {
    const { baseUrl, token, timeoutMs = 30_000 } = options;
    if (typeof baseUrl !== "string" || !/^https?:\/\//.test(baseUrl)) {
      throw new TypeError("baseUrl must be an http:// or https:// URL");
    }
    if (typeof token !== "string" || token === "") {
      throw new TypeError("token must be a non-empty string");
    }
    if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
      throw new RangeError("timeoutMs must be a finite number more than 0");
    }
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.timeoutMs = timeoutMs;
    this.#endpoint = Object.freeze({ baseUrl: this.baseUrl, token, timeoutMs });
    this.#sleep = options.sleep ?? abortableSleep;
    this.#clock = options.clock ?? (() => performance.now());
  }

  toString(): string {
    return `RuntimeClient(${this.baseUrl})`; // never the token
  }

  /** The decoded answer of a 2xx; the typed error of anything else; the signal's reason when
   * the caller aborted. */
  async #request(
    method: string,
    path: string,
    body?: unknown,
    signal?: AbortSignal,
  ): Promise<JsonValue | undefined> {
    const text = body === undefined ? undefined : encodeJson(body, "the request body");
    try {
      return await exchange(this.#endpoint, method, path, text, signal);
    } catch (error) {
      if (error instanceof SeifTransportError && error.reason === "CLIENT_ABORTED") {
        throw error.cause; // the signal's own reason, as fetch throws it
      }
      throw error;
    }
  }

  static #read<T>(parse: (answer: unknown) => T, answer: unknown): T {
    try {
      return parse(answer);
    } catch (error) {
      const detail = error instanceof Error ? error.message : String(error);
      throw new SeifTransportError("INVALID_RESPONSE", detail, { sent: true, cause: error });
    }
  }

  // --- contexts ----------------------------------------------------------------------------------

  /** `POST /v1/context/resolve`: the context the policy discloses for `objective`
   * (`ResolutionBlockedError` with `causes` when it cannot be resolved). */
  async resolve(objective: string, options: ResolveOptions = {}): Promise<Context> {
    const body = {
      objective,
      consumer: options.consumer,
      environment: options.environment,
      deployment: options.deployment,
      traceId: options.traceId,
      turnId: options.turnId,
    };
    const answer = await this.#request("POST", "/v1/context/resolve", body, options.signal);
    const context = RuntimeClient.#read(contextFromWire, answer);
    this.#names.delete(context.contextRef);
    this.#names.set(context.contextRef, new Map(context.contracts.map((c) => [c.name, c.id])));
    for (const oldest of this.#names.keys()) {
      if (this.#names.size <= KNOWN_CONTEXTS) break;
      this.#names.delete(oldest);
    }
    return context;
  }

  /** The messages alone, for an application that binds no tools; `ToolBuildRefused` when the
   * context discloses tools (they are never dropped silently). */
  async resolveContext(
    objective: string,
    options: ResolveOptions = {},
  ): Promise<readonly Message[]> {
    const context = await this.resolve(objective, options);
    if (context.tools.length > 0) throw new ToolBuildRefused(context.contextRef, context.toolNames);
    return context.messages;
  }

  // --- executing ---------------------------------------------------------------------------------

  #toolId(contextRef: string, tool: string): string {
    const names = this.#names.get(contextRef);
    if (names === undefined || [...names.values()].includes(tool)) return tool;
    return names.get(tool) ?? tool;
  }

  /** `POST /v1/context/tools/execute`, once. `tool` is the tool id or its function name (a name
   * of a context this client resolved is sent as its id). A receipt always, but for a request
   * the runtime refused before dispatch, or a signal aborted before dispatch. */
  async execute(
    contextRef: string,
    tool: string,
    callId: string,
    args: unknown,
    options: ExecuteOptions = {},
  ): Promise<Receipt> {
    const id = this.#toolId(contextRef, tool);
    const body = {
      contextRef,
      tool: id,
      callId,
      arguments: args,
      approvalId: options.approvalId ?? undefined,
      turnId: options.turnId,
    };
    const text = encodeJson(body, "the execute request"); // not JSON: thrown, nothing sent
    let answer: JsonValue | undefined;
    try {
      answer = await exchange(
        this.#endpoint,
        "POST",
        "/v1/context/tools/execute",
        text,
        options.signal,
      );
    } catch (error) {
      return lost(callId, id, error);
    }
    return receiptOf(callId, id, answer);
  }

  /** Execute the function `name` the model used, mapped to its tool id through `context`'s
   * contracts (the LangChain tool-callback shape). A name the context does not disclose is a
   * `RangeError` naming those it does; nothing is sent. */
  async executeToolByName(
    context: Context,
    name: string,
    callId: string,
    args: unknown,
    options: ExecuteOptions = {},
  ): Promise<Receipt> {
    return this.execute(context.contextRef, context.toolId(name), callId, args, options);
  }

  // --- turns and disclosure reports ------------------------------------------------------------

  /** `POST /v1/turns`: a new turn's id (it lives 15 minutes). */
  async startTurn(options: RequestOptions = {}): Promise<string> {
    const answer = await this.#request("POST", "/v1/turns", undefined, options.signal);
    return RuntimeClient.#read((body) => {
      const found = isJsonObject(body) ? body["turnId"] : undefined;
      if (typeof found !== "string" || found === "") {
        throw new TypeError("the turn answer has no `turnId`");
      }
      return found;
    }, answer);
  }

  /** `POST /v1/turns/{turnId}/complete` with `COMPLETED` or `FAILED`. */
  async completeTurn(
    turnId: string,
    outcome: Outcome,
    options: RequestOptions = {},
  ): Promise<void> {
    if (outcome !== "COMPLETED" && outcome !== "FAILED") {
      throw new RangeError("outcome must be `COMPLETED` or `FAILED`");
    }
    await this.#request(
      "POST",
      `/v1/turns/${segment(turnId)}/complete`,
      { outcome },
      options.signal,
    );
  }

  /** `POST /v1/context/disclosures`: the function names the application bound for the model. */
  async reportDisclosure(
    contextRef: string,
    tools: readonly string[],
    options: RequestOptions & { readonly turnId?: string | undefined } = {},
  ): Promise<void> {
    const body = { contextRef, tools: [...checkedNames(tools)], turnId: options.turnId };
    await this.#request("POST", "/v1/context/disclosures", body, options.signal);
  }

  /** Start a turn, resolve with its id, run `handler(turn)`, report the disclosure, complete
   * the turn, and return the {@link Delivery} (see `turns.ts`). */
  async runAgentTurn<T>(request: TurnRequest, handler: Handler<T>): Promise<Delivery<T>> {
    return runAgentTurn(this, request, handler);
  }

  // --- approvals -----------------------------------------------------------------------------

  /** `GET /v1/context/tools/approvals/{contextRef}/{callId}` (`NotFoundError` `CONTEXT_UNKNOWN`
   * for a context this credential did not resolve). */
  async approvalStatus(
    contextRef: string,
    callId: string,
    options: RequestOptions = {},
  ): Promise<ApprovalStatus> {
    const path = `/v1/context/tools/approvals/${segment(contextRef)}/${segment(callId)}`;
    const answer = await this.#request("GET", path, undefined, options.signal);
    return RuntimeClient.#read((body) => approvalFromWire(contextRef, callId, body), answer);
  }

  /** Poll `approvalStatus` until it is no longer `PENDING` or `timeoutMs` has passed, and return
   * the last status (`PENDING` when the time ran out). The waits grow from `intervalMs` by
   * `backoff` up to `maxIntervalMs` and never pass the deadline, where one last status is read.
   * An abort of `signal` throws its reason. */
  async waitForApproval(
    contextRef: string,
    callId: string,
    options: WaitOptions,
  ): Promise<ApprovalStatus> {
    const { timeoutMs, intervalMs, maxIntervalMs, backoff } = checkWait(options);
    const deadline = this.#clock() + timeoutMs;
    let wait = intervalMs;
    for (;;) {
      const status = await this.approvalStatus(contextRef, callId, options);
      const remaining = deadline - this.#clock();
      if (status.settled || remaining <= 0) return status;
      await this.#sleep(Math.min(wait, remaining), options.signal);
      wait = Math.min(wait * backoff, maxIntervalMs);
    }
  }
}

/** The receipt of an execute whose exchange failed; the error itself for what the runtime
 * refused before dispatch (4xx, 503) and for a signal aborted before dispatch. */
function lost(callId: string, tool: string, error: unknown): Receipt {
  if (error instanceof SeifTransportError) {
    const status = error.sent ? "UNKNOWN" : "FAILED";
    return new Receipt({ callId, tool, status, reason: error.reason, detail: error.detail });
  }
  if (error instanceof ServerError && error.status !== 503) {
    const detail = `${error.status} ${error.code}: ${error.message}`;
    return new Receipt({ callId, tool, status: "UNKNOWN", reason: "RUNTIME_ERROR", detail });
  }
  throw error;
}

function receiptOf(callId: string, tool: string, answer: unknown): Receipt {
  let receipt: Receipt;
  try {
    receipt = receiptFromWire(answer);
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    return new Receipt({ callId, tool, status: "UNKNOWN", reason: "INVALID_RESPONSE", detail });
  }
  if (receipt.callId !== callId) {
    const detail = "the receipt names another call id";
    return new Receipt({ callId, tool, status: "UNKNOWN", reason: "INVALID_RESPONSE", detail });
  }
  return receipt;
}
