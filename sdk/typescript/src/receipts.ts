/**
 * Receipts and approval statuses (`Receipt` and `ApprovalStatus` of `seif/sdk/types.py`):
 * frozen, read from the runtime's answers, or made by the SDK when no receipt came back.
 */

import { freezeJson, isJsonObject, type JsonObject, type JsonValue } from "./json.js";
import {
  APPROVAL_REASONS,
  parseInstant,
  type ApprovalState,
  type ReceiptStatus,
} from "./values.js";

const RECEIPT_STATUSES: ReadonlySet<string> = new Set(["SUCCEEDED", "FAILED", "UNKNOWN", "DENIED"]);
const APPROVAL_STATES: ReadonlySet<string> = new Set([
  "PENDING",
  "APPROVED",
  "REJECTED",
  "EXPIRED",
  "NONE",
]);

export interface ReceiptFields {
  readonly callId: string;
  readonly tool: string;
  readonly status: ReceiptStatus;
  readonly reason?: string | null | undefined;
  readonly duplicate?: boolean | undefined;
  readonly outputAvailable?: boolean | undefined;
  readonly output?: JsonValue | undefined;
  readonly decision?: JsonObject | undefined;
  readonly executorError?: string | undefined;
  readonly error?: JsonObject | undefined;
  readonly detail?: string | undefined;
}

/**
 * What happened to one call. `status`: `SUCCEEDED` (the executor said ok), `FAILED` (it said
 * not ok, or the call was not dispatched), `UNKNOWN` (no one can say: lost, timed out,
 * interrupted, aborted after sending), `DENIED` (the policy refused; `reason` carries the code
 * and `decision` the engine's decision with its explanation).
 *
 * The runtime's reasons are documented in `docs/runtime.md`; the SDK adds its own when no
 * receipt came back (`detail` then says what happened): `CLIENT_TIMEOUT`, `CLIENT_ABORTED`,
 * `CONNECTION_LOST`, `RUNTIME_ERROR` and `INVALID_RESPONSE` (all `UNKNOWN`: the call may have
 * run), and `CONNECT_FAILED` (`FAILED`: no connection, nothing was sent).
 */
export class Receipt {
  readonly callId: string;
  readonly tool: string;
  readonly status: ReceiptStatus;
  readonly reason: string | null;
  readonly duplicate: boolean;
  readonly outputAvailable: boolean;
  /** The executor's output (deeply frozen JSON) when `outputAvailable`, else null. */
  readonly output: JsonValue;
  /** The engine's decision, when `DENIED`. */
  declare readonly decision?: JsonObject;
  /** The executor's own error code when it said `ok: false` (never its message). */
  declare readonly executorError?: string;
  /**
   * An upstream MCP server's own error: `{code}` of its JSON-RPC error, or `{message}`, its
   * `isError` text (in the answer that ran the call only).
   */
  declare readonly error?: JsonObject;
  /** The SDK's explanation of a receipt it made itself (no receipt came back). */
  declare readonly detail?: string;

  constructor(fields: ReceiptFields) {
    this.callId = fields.callId;
    this.tool = fields.tool;
    this.status = fields.status;
    this.reason = fields.reason ?? null;
    this.duplicate = fields.duplicate ?? false;
    this.outputAvailable = fields.outputAvailable ?? false;
    this.output = this.outputAvailable ? freezeJson(fields.output ?? null) : null;
    if (fields.decision !== undefined) this.decision = freezeJson(fields.decision) as JsonObject;
    if (fields.executorError !== undefined) this.executorError = fields.executorError;
    if (fields.error !== undefined) this.error = freezeJson(fields.error) as JsonObject;
    if (fields.detail !== undefined) this.detail = fields.detail;
    Object.freeze(this);
  }

  /** A `POST /v1/context/tools/execute` 200 answer. */
  static fromWire(answer: unknown): Receipt {
    return receiptFromWire(answer);
  }

  get succeeded(): boolean {
    return this.status === "SUCCEEDED";
  }

  /** Denied until an operator approves this exact call (see `waitForApproval`). */
  get needsApproval(): boolean {
    return this.status === "DENIED" && this.reason !== null && APPROVAL_REASONS.has(this.reason);
  }
}

function optionalText(body: JsonObject, name: string, where: string): string | undefined {
  const value = body[name];
  if (value !== undefined && value !== null && typeof value !== "string") {
    throw new TypeError(`${where}: \`${name}\` is not a string`);
  }
  return value ?? undefined;
}

function requiredText(body: JsonObject, name: string, where: string): string {
  const value = body[name];
  if (typeof value !== "string") {
    throw new TypeError(`${where}: \`${name}\` is missing or not a string`);
  }
  return value;
}

/** A `POST /v1/context/tools/execute` 200 answer. */
export function receiptFromWire(answer: unknown): Receipt {
  const where = "the receipt";
  if (!isJsonObject(answer)) throw new TypeError(`${where} is not a JSON object`);
  const status = requiredText(answer, "status", where);
  if (!RECEIPT_STATUSES.has(status)) {
    throw new TypeError(`${where}: \`status\` \`${status.slice(0, 32)}\` is not a receipt status`);
  }
  const decision = answer["decision"];
  const error = answer["error"];
  const outputAvailable = answer["outputAvailable"] === true;
  return new Receipt({
    callId: requiredText(answer, "callId", where),
    tool: requiredText(answer, "tool", where),
    status: status as ReceiptStatus,
    reason: optionalText(answer, "reason", where) ?? null,
    duplicate: answer["duplicate"] === true,
    outputAvailable,
    output: outputAvailable ? (answer["output"] ?? null) : null,
    decision: isJsonObject(decision) ? decision : undefined,
    executorError: optionalText(answer, "executorError", where),
    error: isJsonObject(error) ? error : undefined,
  });
}

export interface ApprovalStatusFields {
  readonly contextRef: string;
  readonly callId: string;
  readonly state: ApprovalState;
  readonly approvalId?: string | null | undefined;
  readonly expiresAt?: Date | null | undefined;
}

/**
 * An approval's state as the runtime reports it to the application: `PENDING` (an operator
 * has not decided), `APPROVED` (with `approvalId` to pass to execute, valid until
 * `expiresAt`), `REJECTED`, `EXPIRED`, or `NONE` (nothing is asked for this call: execute it
 * first). The application reads approvals; it can never grant them.
 */
export class ApprovalStatus {
  readonly contextRef: string;
  readonly callId: string;
  readonly state: ApprovalState;
  readonly approvalId: string | null;
  readonly #expiresAt: number | null;

  constructor(fields: ApprovalStatusFields) {
    this.contextRef = fields.contextRef;
    this.callId = fields.callId;
    this.state = fields.state;
    this.approvalId = fields.approvalId ?? null;
    this.#expiresAt = fields.expiresAt ? fields.expiresAt.getTime() : null;
    Object.freeze(this);
  }

  /** A `GET /v1/context/tools/approvals/{contextRef}/{callId}` 200 answer. */
  static fromWire(contextRef: string, callId: string, answer: unknown): ApprovalStatus {
    return approvalFromWire(contextRef, callId, answer);
  }

  /** When the approval (or the pending call) expires, a new `Date` on every read; else null. */
  get expiresAt(): Date | null {
    return this.#expiresAt === null ? null : new Date(this.#expiresAt);
  }

  get approved(): boolean {
    return this.state === "APPROVED";
  }

  /** No longer waiting on an operator (anything but `PENDING`). */
  get settled(): boolean {
    return this.state !== "PENDING";
  }
}

/** A `GET /v1/context/tools/approvals/{contextRef}/{callId}` 200 answer. */
export function approvalFromWire(
  contextRef: string,
  callId: string,
  answer: unknown,
): ApprovalStatus {
  const where = "the approval status";
  if (!isJsonObject(answer)) throw new TypeError(`${where} is not a JSON object`);
  const state = requiredText(answer, "state", where);
  if (!APPROVAL_STATES.has(state)) {
    throw new TypeError(`${where}: \`state\` \`${state.slice(0, 32)}\` is not an approval state`);
  }
  const approvalId = optionalText(answer, "approvalId", where);
  if (state === "APPROVED" && approvalId === undefined) {
    throw new TypeError(`${where}: APPROVED without \`approvalId\``);
  }
  const expires = optionalText(answer, "expiresAt", where);
  return new ApprovalStatus({
    contextRef,
    callId,
    state: state as ApprovalState,
    approvalId,
    expiresAt:
      expires === undefined ? null : new Date(parseInstant(expires, `${where}: \`expiresAt\``)),
  });
}
