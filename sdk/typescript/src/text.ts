/**
 * What a model is told of a receipt: {@link receiptText} (`seif.receipt_text` of the Python SDK,
 * `seif/sdk/text.py`, in TypeScript; for a receipt that is not a success both write the same
 * JSON text).
 *
 * The output of a call that succeeded, as it is; for anything else, what happened and what to do,
 * never a success. For `ARGUMENTS_INVALID` each error's pointer and message (at most
 * {@link MAX_ERRORS}, each cut, `policy/feedback.py`), never an argument's value, so that the
 * model can fix its call.
 */

import { isJsonObject, type JsonValue } from "./json.js";
import type { Receipt } from "./receipts.js";

export const MAX_ERRORS = 10;
export const MAX_POINTER = 120;
export const MAX_MESSAGE = 200;

/** The reason of a receipt the SDK makes for a call an approver rejected (the runtime's code). */
export const REJECTED = "REJECTED";

const STATUS_NOTES: Readonly<Record<string, string>> = {
  DENIED: "the call was refused by policy and did not run",
  FAILED: "the tool reported a failure, or the call was not dispatched",
  UNKNOWN:
    "it is not known whether the call ran; do not repeat it under a new call id," +
    " an operator must check",
};
const APPROVAL_NOTE =
  "the call needs a human approval of these exact arguments; it did not run: it waits for" +
  " an approver, do not repeat it under a new call id";
const DUPLICATE_NOTE = "this call id already ran; its output is not delivered twice";
const REASON_NOTES: Readonly<Record<string, string>> = {
  ARGUMENTS_INVALID:
    "the arguments do not match the tool's parameters and the call did not run: fix what" +
    " `errors` names and call again",
  TOOL_NOT_DISCLOSED: "this tool is not available here and did not run: use a tool offered",
  CONDITION_DENIED: "the policy does not allow this call with these arguments; it did not run",
  CONDITION_NOT_MET: "the policy does not allow this call now; it did not run",
  CONDITION_ERROR:
    "the policy could not evaluate this call and it did not run; do not retry it unchanged",
  CALL_LIMIT_EXCEEDED:
    "this tool was called as often as allowed in this context; the call did not run",
  CALL_CONFLICT: "this call id was used for other arguments; it did not run: use a new id",
  APPROVAL_REQUIRED: APPROVAL_NOTE,
  APPROVAL_INVALID: APPROVAL_NOTE,
  APPROVAL_EXPIRED:
    "the approval of this call ran out unused and it did not run; call again to ask for" +
    " a new approval",
  [REJECTED]: "a human rejected this call and it did not run; do not make it again",
  CONTEXT_EXPIRED: "the context expired and the call did not run",
  CONTEXT_UNKNOWN: "the context is unknown and the call did not run",
  TOOL_UNAVAILABLE: "the tool's executor is not available; the call did not run",
  TOOL_INCOMPATIBLE: "the tool's executor serves another contract; the call did not run",
  CONNECT_FAILED: "seif could not be reached; nothing was sent",
};

/** A bound's message names the number that broke it: that value is replaced by "the value". */
const SHOWN_VALUE = /^(?:`[^`]*`|an integer of \d+ bits)(?= is (?:less|greater) than )/;

/** `text`, or its first `limit` characters (code points) marked `…(+N)`. */
export function cut(text: string, limit: number): string {
  const chars = Array.from(text);
  if (chars.length <= limit) return text;
  return `${chars.slice(0, limit).join("")}…(+${chars.length - limit})`;
}

export interface ArgumentError {
  /** Where in the arguments (an RFC 6901 pointer; "" is the arguments object itself). */
  readonly pointer: string;
  readonly message: string;
}

/** The errors a model is shown of a receipt's `decision.errors`: at most {@link MAX_ERRORS},
 * each cut, without values; `omitted` counts the rest. Entries without a string pointer and
 * message are skipped. */
export function argumentErrors(errors: readonly JsonValue[]): {
  shown: ArgumentError[];
  omitted: number;
} {
  const shown: ArgumentError[] = [];
  let omitted = 0;
  for (const error of errors) {
    if (!isJsonObject(error)) continue;
    const { pointer, message } = error;
    if (typeof pointer !== "string" || typeof message !== "string") continue;
    if (shown.length === MAX_ERRORS) {
      omitted += 1;
      continue;
    }
    shown.push({
      pointer: cut(pointer, MAX_POINTER),
      message: cut(message.replace(SHOWN_VALUE, "the value"), MAX_MESSAGE),
    });
  }
  return { shown, omitted };
}

/** What `receipt` means for the model, and what to do. */
export function receiptNote(receipt: Receipt): string {
  if (receipt.succeeded) return DUPLICATE_NOTE; // with no output: a repeat of a call id that ran
  const byReason = receipt.reason === null ? undefined : REASON_NOTES[receipt.reason];
  if (receipt.status !== "UNKNOWN" && byReason !== undefined) return byReason;
  return STATUS_NOTES[receipt.status] ?? DUPLICATE_NOTE;
}

/**
 * The tool message for `receipt`: the output as JSON when the call succeeded and its output
 * came with it; otherwise `{"seif": {"status", "reason", "duplicate", "note"}}` (and for
 * `ARGUMENTS_INVALID` its `errors`, each `{"pointer", "message"}`, with `errorsOmitted` when
 * there were more than ten).
 */
export function receiptText(receipt: Receipt): string {
  if (receipt.succeeded && receipt.outputAvailable) return JSON.stringify(receipt.output);
  const told: Record<string, JsonValue> = {
    status: receipt.status,
    reason: receipt.reason,
    duplicate: receipt.duplicate,
    note: receiptNote(receipt),
  };
  const errors = receipt.decision?.["errors"];
  if (receipt.reason === "ARGUMENTS_INVALID" && Array.isArray(errors)) {
    const { shown, omitted } = argumentErrors(errors as readonly JsonValue[]);
    told["errors"] = shown.map((e) => ({ pointer: e.pointer, message: e.message }));
    if (omitted > 0) told["errorsOmitted"] = omitted;
  }
  return JSON.stringify({ seif: told });
}
