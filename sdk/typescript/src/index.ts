/**
 * `@seif/sdk`: the TypeScript SDK of the seif runtime (the contract of `docs/sdk.md`, in its
 * ecosystem's spelling). A client of the runtime's HTTP API over Node's built-in `fetch`, with
 * no runtime dependencies: it never retries an execution, never invents a call id, and never
 * claims more than it saw.
 */

export {
  RuntimeClient,
  KNOWN_CONTEXTS,
  type ExecuteOptions,
  type Outcome,
  type RequestOptions,
  type ResolveOptions,
  type RuntimeClientOptions,
  type WaitOptions,
} from "./client.js";
export { ContextDeliveryGateway, boundTools, type Agent, type BoundTool } from "./gateway.js";
export {
  ReportingError,
  type Delivery,
  type Handler,
  type ReportingStep,
  type Turn,
  type TurnExecuteOptions,
  type TurnRequest,
} from "./turns.js";
export {
  Context,
  APPROVAL_REASONS,
  type ApprovalState,
  type Contract,
  type ContextFields,
  type Message,
  type ObjectSchema,
  type Omission,
  type ReceiptStatus,
  type Tokens,
  type ToolSchema,
} from "./values.js";
export {
  ApprovalStatus,
  Receipt,
  type ApprovalStatusFields,
  type ReceiptFields,
} from "./receipts.js";
export {
  AuthenticationError,
  BadRequestError,
  ConflictError,
  NotFoundError,
  PermissionDeniedError,
  ResolutionBlockedError,
  SeifError,
  SeifRequestError,
  SeifTransportError,
  ServerError,
  ToolBuildRefused,
  TurnRequiredError,
} from "./errors.js";
export {
  fromAnthropicToolUse,
  fromOpenAIToolCall,
  toAnthropicTools,
  toOpenAIChatTools,
  toOpenAIResponsesTools,
  type AnthropicTool,
  type OpenAIChatTool,
  type OpenAIResponsesTool,
  type ToolCall,
} from "./formats.js";
export { argumentErrors, receiptText, type ArgumentError } from "./text.js";
export { JsonError, type JsonArray, type JsonObject, type JsonValue } from "./json.js";
