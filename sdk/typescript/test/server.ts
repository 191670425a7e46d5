/**
 * A scripted HTTP server on loopback for the unit tests (node:http): it records every request
 * whole, then answers as its `respond` function says, or closes the connection, or hangs.
 */

import {
  createServer,
  type IncomingHttpHeaders,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";

export interface Recorded {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
  /** The body decoded as JSON (undefined when empty). */
  readonly body: unknown;
}

/** What the server does with one request: a `[status, body]` answer (a body that is a string
 * is sent as it is, anything else as JSON), `"close"` (drop the connection) or `"hang"`. */
export type Action = readonly [number, unknown] | "close" | "hang";
export type Respond = (request: Recorded) => Action | Promise<Action>;

export class FakeServer {
  readonly requests: Recorded[] = [];
  url = "";
  readonly #server: Server;
  readonly #waiters: { count: number; resolve: () => void }[] = [];

  private constructor(respond: Respond) {
    this.#server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        const recorded: Recorded = {
          method: request.method ?? "",
          path: request.url ?? "",
          headers: request.headers,
          text,
          body: text === "" ? undefined : (JSON.parse(text) as unknown),
        };
        this.#record(recorded);
        void Promise.resolve(respond(recorded)).then((action) => act(response, action));
      });
    });
  }

  static async start(respond: Respond): Promise<FakeServer> {
    const server = new FakeServer(respond);
    await new Promise<void>((resolve) => server.#server.listen(0, "127.0.0.1", resolve));
    const { port } = server.#server.address() as AddressInfo;
    server.url = `http://127.0.0.1:${port}`;
    return server;
  }

  #record(recorded: Recorded): void {
    this.requests.push(recorded);
    for (const waiter of this.#waiters.filter((w) => w.count <= this.requests.length)) {
      waiter.resolve();
    }
  }

  /** Resolves once `count` requests have arrived whole. */
  arrived(count: number): Promise<void> {
    if (this.requests.length >= count) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ count, resolve }));
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

function act(response: ServerResponse, action: Action): void {
  if (action === "hang") return;
  if (action === "close") {
    response.socket?.destroy();
    return;
  }
  const [status, body] = action;
  const data = typeof body === "string" ? body : JSON.stringify(body);
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (status >= 300 && status < 400) headers["location"] = "/v1/context/tools/execute";
  response.writeHead(status, headers).end(data);
}

/** Run `body` against a server answering with `respond`, closed at the end. */
export async function withServer<T>(
  respond: Respond,
  body: (server: FakeServer) => Promise<T>,
): Promise<T> {
  const server = await FakeServer.start(respond);
  try {
    return await body(server);
  } finally {
    await server.close();
  }
}

/** A loopback port nothing listens on (bound, then released). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export const TOKEN = "sdk-test-token";

/** A receipt of the runtime for `callId`. */
export function receipt(
  callId: string,
  status = "SUCCEEDED",
  extra: object = {},
): Record<string, unknown> {
  return {
    callId,
    tool: "t",
    status,
    reason: null,
    duplicate: false,
    outputAvailable: status === "SUCCEEDED",
    output: status === "SUCCEEDED" ? { x: [1, 2] } : null,
    ...extra,
  };
}
