/**
 * Agent turns: `runAgentTurn` and what the gateway builds on (`seif/sdk/turns.py`).
 *
 * A turn: start it (`POST /v1/turns`), resolve with its id, hand the handler the messages, the
 * exact schemas and an `execute`; then report the disclosure, complete the turn `COMPLETED`
 * (or `FAILED` when the handler threw, and rethrow), and return a {@link Delivery}. A failure
 * to report or complete never replaces the handler's result: it is listed in
 * `Delivery.reportingErrors` (or, when the handler threw, attached to its error as the
 * non-enumerable property `seifReportingErrors`).
 */

import type {
  ExecuteOptions,
  Outcome,
  RequestOptions,
  RuntimeClient,
  WaitOptions,
} from "./client.js";
import type { ApprovalStatus, Receipt } from "./receipts.js";
import type { Context, Message, ToolSchema } from "./values.js";

/** What `runAgentTurn` resolves: the objective and the optional coordinates. */
export interface TurnRequest {
  readonly objective: string;
  readonly consumer?: string | undefined;
  readonly environment?: string | undefined;
  readonly deployment?: string | undefined;
  readonly traceId?: string | undefined;
}

export type TurnExecuteOptions = Omit<ExecuteOptions, "turnId">;

/** What a `runAgentTurn` handler is given (its functions may be destructured). */
export interface Turn {
  readonly context: Context;
  readonly messages: readonly Message[];
  /** The exact schemas of the disclosed tools. */
  readonly tools: readonly ToolSchema[];
  readonly turnId: string;
  /** The receipts so far, in the order the calls were made. */
  readonly receipts: readonly Receipt[];
  /** Execute the function `name` the model called, with the model's `callId`. A name the
   * context does not disclose is a `RangeError` naming those it does (nothing sent). */
  execute(
    name: string,
    callId: string,
    args: unknown,
    options?: TurnExecuteOptions,
  ): Promise<Receipt>;
  /** Say which function names the application bound for the model (a narrower set than
   * `tools`); the SDK reports them when the handler returns. */
  reportDisclosure(names: readonly string[]): void;
  /** The approval status of the call `callId` of this turn's context. */
  approvalStatus(callId: string, options?: RequestOptions): Promise<ApprovalStatus>;
  /** Wait until an approver decided on the call `callId` of this turn's context, or
   * `timeoutMs` passed: the client's `waitForApproval` (the last status read; `PENDING` when
   * the time ran out). The application reads approvals; it never grants them. */
  waitForApproval(callId: string, options: WaitOptions): Promise<ApprovalStatus>;
}

export type Handler<T> = (turn: Turn) => T | Promise<T>;

export type ReportingStep = "reportDisclosure" | "completeTurn";

/** A failure to report the disclosure or to complete the turn after the handler had its
 * result: listed, never thrown. */
export class ReportingError {
  readonly step: ReportingStep;
  readonly error: unknown;

  constructor(step: ReportingStep, error: unknown) {
    this.step = step;
    this.error = error;
    Object.freeze(this);
  }

  toString(): string {
    return `${this.step}: ${String(this.error)}`;
  }
}

/** The outcome of one agent turn. */
export interface Delivery<T> {
  /** What the handler returned. */
  readonly result: T;
  readonly contextRef: string;
  readonly turnId: string;
  /** Every receipt the turn's `execute` returned, in the order the calls were made. */
  readonly receipts: readonly Receipt[];
  readonly reportingErrors: readonly ReportingError[];
  /** The function names reported as bound for the model (null: the report failed). */
  readonly reported: readonly string[] | null;
}

const REQUEST_KEYS: readonly string[] = [
  "objective",
  "consumer",
  "environment",
  "deployment",
  "traceId",
];

/** `request`, checked: a `TypeError` naming an unknown key, a missing objective or a
 * coordinate that is not a string. */
export function checkedRequest(request: TurnRequest): TurnRequest {
  if (typeof request !== "object" || request === null) {
    throw new TypeError("the turn request must be an object with an `objective`");
  }
  const unknown = Object.keys(request)
    .filter((key) => !REQUEST_KEYS.includes(key))
    .sort();
  if (unknown.length > 0) {
    throw new TypeError(
      `the turn request has unknown keys ${unknown.join(", ")}; ` +
        `it takes ${REQUEST_KEYS.join(", ")}`,
    );
  }
  if (typeof request.objective !== "string" || request.objective === "") {
    throw new TypeError("the turn request needs an `objective` (a non-empty string)");
  }
  for (const key of REQUEST_KEYS) {
    const value: unknown = (request as unknown as Record<string, unknown>)[key];
    if (value !== undefined && value !== null && typeof value !== "string") {
      throw new TypeError(`the turn request's \`${key}\` must be a string`);
    }
  }
  return Object.freeze({ ...request });
}

/** A list of function names (a `TypeError` for a bare string or a name that is not one). */
export function checkedNames(names: readonly string[]): readonly string[] {
  if (typeof names === "string" || !Array.isArray(names)) {
    throw new TypeError("tools must be a list of function names, not one string");
  }
  for (const name of names) {
    if (typeof name !== "string" || name === "") {
      throw new TypeError("tools must be non-empty strings");
    }
  }
  return Object.freeze([...names]);
}

/** What one turn keeps: its context and id, its receipts in call order, and the names the
 * handler said it bound (null: all of the context's). */
class TurnRecord {
  reported: readonly string[] | null = null;
  readonly #slots: (Receipt | undefined)[] = [];

  constructor(
    readonly context: Context,
    readonly turnId: string,
  ) {}

  /** Reserve the place of a call in the order the calls were made. */
  openSlot(): number {
    return this.#slots.push(undefined) - 1;
  }

  fill(slot: number, receipt: Receipt): void {
    this.#slots[slot] = receipt;
  }

  get receipts(): readonly Receipt[] {
    return Object.freeze(this.#slots.filter((r): r is Receipt => r !== undefined));
  }

  /** What to report as bound: the handler's own set; when it returned without one, every
   * disclosed name; when it threw without one, nothing (never more than the SDK saw). */
  namesToReport(outcome: Outcome): readonly string[] | null {
    if (this.reported !== null) return this.reported;
    return outcome === "COMPLETED" ? this.context.toolNames : null;
  }
}

function turnOf(client: RuntimeClient, record: TurnRecord): Turn {
  const { context, turnId } = record;
  const execute = async (
    name: string,
    callId: string,
    args: unknown,
    options: TurnExecuteOptions = {},
  ): Promise<Receipt> => {
    const tool = context.toolId(name); // a RangeError before anything is sent
    const slot = record.openSlot();
    const receipt = await client.execute(context.contextRef, tool, callId, args, {
      ...options,
      turnId,
    });
    record.fill(slot, receipt);
    return receipt;
  };
  const reportDisclosure = (names: readonly string[]): void => {
    record.reported = checkedNames(names);
  };
  const approvalStatus = (callId: string, options: RequestOptions = {}) =>
    client.approvalStatus(context.contextRef, callId, options);
  const waitForApproval = (callId: string, options: WaitOptions) =>
    client.waitForApproval(context.contextRef, callId, options);
  return Object.freeze({
    context,
    messages: context.messages,
    tools: context.tools,
    turnId,
    get receipts() {
      return record.receipts;
    },
    execute,
    reportDisclosure,
    approvalStatus,
    waitForApproval,
  });
}

interface Finished {
  readonly errors: readonly ReportingError[];
  readonly reported: readonly string[] | null;
}

/** Report the disclosure, then complete the turn; every failure listed, none thrown. */
async function finish(
  client: RuntimeClient,
  record: TurnRecord,
  outcome: Outcome,
): Promise<Finished> {
  const errors: ReportingError[] = [];
  const names = record.namesToReport(outcome);
  let reported: readonly string[] | null = null;
  if (names !== null) {
    try {
      await client.reportDisclosure(record.context.contextRef, names, { turnId: record.turnId });
      reported = names;
    } catch (error) {
      errors.push(new ReportingError("reportDisclosure", error));
    }
  }
  try {
    await client.completeTurn(record.turnId, outcome);
  } catch (error) {
    errors.push(new ReportingError("completeTurn", error));
  }
  return { errors: Object.freeze(errors), reported };
}

/** Attach `errors` to the thrown `error` (when it is an object that takes properties). */
function note(error: unknown, errors: readonly ReportingError[]): void {
  const takes = typeof error === "object" && error !== null && Object.isExtensible(error);
  if (errors.length === 0 || !takes) return;
  Object.defineProperty(error, "seifReportingErrors", {
    value: errors,
    enumerable: false,
    configurable: true,
  });
}

/** Start a turn and resolve with its id; a resolve that fails completes the turn `FAILED`
 * (best effort) and throws. */
async function openTurn(client: RuntimeClient, request: TurnRequest): Promise<TurnRecord> {
  const wanted = checkedRequest(request);
  const turnId = await client.startTurn();
  try {
    const { objective, consumer, environment, deployment, traceId } = wanted;
    const context = await client.resolve(objective, {
      consumer,
      environment,
      deployment,
      traceId,
      turnId,
    });
    return new TurnRecord(context, turnId);
  } catch (error) {
    try {
      await client.completeTurn(turnId, "FAILED");
    } catch (failure) {
      note(error, [new ReportingError("completeTurn", failure)]); // the resolve's error wins
    }
    throw error;
  }
}

export async function runAgentTurn<T>(
  client: RuntimeClient,
  request: TurnRequest,
  handler: Handler<T>,
): Promise<Delivery<T>> {
  const record = await openTurn(client, request);
  let result: T;
  try {
    result = await handler(turnOf(client, record));
  } catch (error) {
    note(error, (await finish(client, record, "FAILED")).errors);
    throw error;
  }
  const { errors, reported } = await finish(client, record, "COMPLETED");
  return Object.freeze({
    result,
    contextRef: record.context.contextRef,
    turnId: record.turnId,
    receipts: record.receipts,
    reportingErrors: errors,
    reported,
  });
}
