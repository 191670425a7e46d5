/**
 * The SDK's errors: one base class, {@link SeifError} (the names of `seif/sdk/errors.py`).
 *
 * - {@link SeifRequestError} and its subclasses: the runtime answered the request itself with
 *   an error status (`{"error": {"code", "message"}}` plus extra fields such as `causes`).
 *   Nothing was dispatched: an execute that reached the runtime always gets a receipt.
 * - {@link SeifTransportError}: no usable answer came back (connection refused, timed out,
 *   lost, or an answer that is not what the API says). `execute` never throws it: it returns a
 *   receipt instead.
 * - {@link ToolBuildRefused}: `resolveContext` was asked for messages only on a context that
 *   discloses tools.
 *
 * A malformed argument is a `TypeError` (or a `RangeError` for a value outside the accepted
 * set, such as a function name the context does not disclose), and an abort before a request
 * was sent is the signal's own reason (an `AbortError`), as with `fetch`.
 */

import { isJsonObject, type JsonObject, type JsonValue } from "./json.js";

/** Every error the SDK throws on its own. */
export class SeifError extends Error {
  override name = "SeifError";
}

/** The runtime refused the request itself: `status` (HTTP), `code` (stable, e.g.
 * `CONTEXT_UNKNOWN`), `message` (the runtime's one line), `extra` (the body's other fields). */
export class SeifRequestError extends SeifError {
  override name = "SeifRequestError";
  readonly status: number;
  readonly code: string;
  readonly extra: JsonObject;

  constructor(status: number, code: string, message: string, extra: JsonObject = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.extra = Object.freeze({ ...extra });
  }

  override toString(): string {
    return `${this.name}: ${this.status} ${this.code}: ${this.message}`;
  }
}

/** 400: the body or its arguments were refused (`BAD_REQUEST`, `OBJECTIVE_UNKNOWN`...). */
export class BadRequestError extends SeifRequestError {
  override name = "BadRequestError";
}

/** 401: no credential, or not a credential this runtime knows (`UNAUTHENTICATED`), or an
 * issuer's access token that failed a check (`TOKEN_INVALID`). */
export class AuthenticationError extends SeifRequestError {
  override name = "AuthenticationError";
}

/** 403: the credential lacks the route's scope (`FORBIDDEN`; `INSUFFICIENT_SCOPE` for an
 * issuer's access token), or may not resolve the objective (`OBJECTIVE_FORBIDDEN`: it is outside
 * the credential's `objectives`). */
export class PermissionDeniedError extends SeifRequestError {
  override name = "PermissionDeniedError";
}

/** 403 `TURN_REQUIRED`: the runtime runs with `--require-turn` and the request named no live
 * turn of this credential. */
export class TurnRequiredError extends SeifRequestError {
  override name = "TurnRequiredError";
}

/** 404: `CONTEXT_UNKNOWN`, `TURN_UNKNOWN`, or `NOT_FOUND` (a route the runtime does not serve). */
export class NotFoundError extends SeifRequestError {
  override name = "NotFoundError";
}

/** 409: e.g. `TURN_COMPLETED` (a turn completed twice). */
export class ConflictError extends SeifRequestError {
  override name = "ConflictError";
}

/** 409 `RESOLUTION_BLOCKED`: the context could not be resolved; `causes` and `omitted` say why
 * (each `{id, kind, reason, explanation}`). */
export class ResolutionBlockedError extends ConflictError {
  override name = "ResolutionBlockedError";

  get causes(): readonly JsonValue[] {
    const found = this.extra["causes"];
    return Array.isArray(found) ? found : [];
  }

  get omitted(): readonly JsonValue[] {
    const found = this.extra["omitted"];
    return Array.isArray(found) ? found : [];
  }
}

/** 5xx: the runtime is not ready (503) or failed (500, a bug in seif or a proxy's fault). */
export class ServerError extends SeifRequestError {
  override name = "ServerError";
}

/** No usable answer: `reason` is `CONNECT_FAILED` (nothing was sent), `CLIENT_TIMEOUT`,
 * `CONNECTION_LOST` or `INVALID_RESPONSE`; `sent` says whether the request may have reached
 * the runtime. */
export class SeifTransportError extends SeifError {
  override name = "SeifTransportError";
  readonly reason: string;
  readonly sent: boolean;
  /** What happened, without the reason code (`message` is `REASON: detail`). */
  readonly detail: string;

  constructor(reason: string, detail: string, options: { sent: boolean; cause?: unknown }) {
    super(`${reason}: ${detail}`, { cause: options.cause });
    this.reason = reason;
    this.detail = detail;
    this.sent = options.sent;
  }
}

/** `resolveContext` (messages only) on a context that discloses tools: binding none of them
 * silently would hide what the policy disclosed. `contextRef` and `tools` (the function names)
 * say what was disclosed. */
export class ToolBuildRefused extends SeifError {
  override name = "ToolBuildRefused";
  readonly contextRef: string;
  readonly tools: readonly string[];

  constructor(contextRef: string, tools: readonly string[]) {
    super(
      `context ${contextRef} discloses tools (${tools.join(", ")}): resolveContext returns ` +
        "messages only; bind the tools with resolve or runAgentTurn, or use an objective " +
        "that discloses none",
    );
    this.contextRef = contextRef;
    this.tools = Object.freeze([...tools]);
  }
}

type RequestErrorClass = new (
  status: number,
  code: string,
  message: string,
  extra?: JsonObject,
) => SeifRequestError;

function errorClass(status: number, code: string): RequestErrorClass {
  if (status === 400) return BadRequestError;
  if (status === 401) return AuthenticationError;
  if (status === 403) return code === "TURN_REQUIRED" ? TurnRequiredError : PermissionDeniedError;
  if (status === 404) return NotFoundError;
  if (status === 409) return code === "RESOLUTION_BLOCKED" ? ResolutionBlockedError : ConflictError;
  if (status >= 500) return ServerError;
  return SeifRequestError;
}

/** The typed error of an error answer (`body` as decoded, or undefined when it was not JSON;
 * `fallback` the HTTP status text). */
export function requestError(status: number, body: unknown, fallback: string): SeifRequestError {
  let code = `HTTP_${status}`;
  let message = fallback || `HTTP ${status}`;
  let extra: JsonObject = {};
  if (isJsonObject(body)) {
    const error = body["error"];
    if (isJsonObject(error)) {
      if (typeof error["code"] === "string" && error["code"]) code = error["code"];
      if (typeof error["message"] === "string" && error["message"]) message = error["message"];
    }
    extra = Object.fromEntries(Object.entries(body).filter(([key]) => key !== "error"));
  }
  const ErrorClass = errorClass(status, code);
  return new ErrorClass(status, code, message, extra);
}
