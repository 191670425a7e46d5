"""The TypeScript SDK (`sdk/typescript`, the package `@seif/sdk`) built as a user builds it
(`npm ci`, `npm run build`, in a copy of the package), driving a real `seif serve` and the
reference executor, both subprocesses on loopback, from a Node script through `runAgentTurn`: a
read SUCCEEDED, its repeat a duplicate, a write DENIED for approval, its approval status
PENDING, an operator's reject and then REJECTED (the turn's ``waitForApproval`` reads it too),
``receiptText`` of the write and of an invalid call equal to the Python SDK's text (pointers and
messages, never a value), and an execute aborted after dispatch that
comes back UNKNOWN and did run (its repeat is a duplicate of a SUCCEEDED original, dispatched
once); and the README's quickstart run as written, printing what the README says. With ``CI``
set, a missing ``node`` or ``npm`` fails the tests instead of skipping them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seif import Receipt, receipt_text
from tests.support.runtime_harness import (
    APP_TOKEN,
    APPROVAL_TOKEN,
    BEARER,
    PROPOSAL,
    READ_ARGS,
    ROOT,
    listening,
    start_executor_process,
    start_serve,
    stop,
    write_config,
)

PACKAGE = ROOT / "sdk" / "typescript"
README = PACKAGE / "README.md"
COPIED = ("package.json", "package-lock.json", "tsconfig.json", "src")
SEARCH = {"query": "median outliers", "limit": 3}
INVALID = {"query": "q" * 201, "limit": 987654, "zz": "hidden-value"}
DELAY_MS = 600  # the executor acts, then answers this late: the client aborts meanwhile
NAMES = ["inspect_context", "search_knowledge", "propose_change"]

DRIVER = r"""
const { RuntimeClient, AuthenticationError, fromOpenAIToolCall, toOpenAIChatTools,
        toAnthropicTools, receiptText } = await import(process.env.SEIF_SDK);
const url = process.env.SEIF_URL;
const input = JSON.parse(process.env.SEIF_INPUT);
const client = new RuntimeClient({ baseUrl: url, token: process.env.SEIF_APP_TOKEN,
                                   timeoutMs: 10000 });
const call = (id, name, args) =>
  ({ id, type: "function", function: { name, arguments: JSON.stringify(args) } });
const script = [  // what a model would send back, one tool call after another
  call("r1", "inspect_context", input.read),
  call("r1", "inspect_context", input.read),
  call("w1", "propose_change", input.proposal),
];

async function reject(contextRef, callId, args) {  // the operator's part, not the application's
  const response = await fetch(`${url}/v1/context/tools/reject`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-seif-approver": "ops-ana",
               "x-seif-tool-approval": process.env.SEIF_APPROVAL_TOKEN },
    body: JSON.stringify({ contextRef, tool: "propose-change", callId, arguments: args,
                           reason: "not this lesson" }),
  });
  return response.status;
}

async function aborted(execute) {  // aborted once dispatched: the receipt, not an AbortError
  const controller = new AbortController();
  const pending = execute("search_knowledge", "s1", input.search,
                          { signal: controller.signal });
  setTimeout(() => controller.abort(), 200);
  return await pending;
}

const delivery = await client.runAgentTurn(
  { objective: "authoring", consumer: "course-authoring" },
  async (turn) => {
    const { messages, tools, context, execute, waitForApproval } = turn;
    const seen = {
      messages: messages.map((m) => m.role),
      chat: toOpenAIChatTools(tools).map((t) => t.function.name),
      sameSchemas: toAnthropicTools(tools).every((t, i) => t.input_schema === tools[i].parameters),
    };
    for (const toolCall of script) await execute(...fromOpenAIToolCall(toolCall));
    seen.pending = (await client.approvalStatus(context.contextRef, "w1")).state;
    seen.rejectStatus = await reject(context.contextRef, "w1", input.proposal);
    const settled = await client.waitForApproval(context.contextRef, "w1",
                                                 { timeoutMs: 5000, intervalMs: 50 });
    seen.rejected = settled.state;
    seen.turnWaited = (await waitForApproval("w1", { timeoutMs: 0 })).state;
    seen.invalid = await client.executeToolByName(context, "search_knowledge", "bad1",
                                                  input.invalid);
    seen.invalidText = receiptText(seen.invalid);
    seen.writeText = receiptText(turn.receipts[2]);
    seen.abortedStatus = (await aborted(execute)).status;
    await new Promise((resolve) => setTimeout(resolve, input.delayMs));
    seen.repeat = await execute("search_knowledge", "s1", input.search);
    return seen;
  },
);

let unauthenticated = null;
try {
  await new RuntimeClient({ baseUrl: url, token: "not-a-token" }).startTurn();
} catch (error) {
  unauthenticated = { name: error.name, status: error.status, code: error.code,
                      typed: error instanceof AuthenticationError };
}
console.log(JSON.stringify({
  result: delivery.result, contextRef: delivery.contextRef, turnId: delivery.turnId,
  receipts: delivery.receipts, reported: delivery.reported,
  reportingErrors: delivery.reportingErrors.map(String), unauthenticated,
}));
"""


def need(tool: str) -> str:
    found = shutil.which(tool)
    if found is None:
        message = f"`{tool}` is not installed: the TypeScript SDK cannot be built or run"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def run(args: list[str], cwd: Path, timeout: float = 240) -> None:
    done = subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{' '.join(args[1:])} failed:\n{done.stdout}\n{done.stderr}"


@pytest.fixture(scope="session")
def built_sdk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package, built once per session: the path of its `dist/index.js`."""
    npm = need("npm")
    root = tmp_path_factory.mktemp("sdk-typescript")
    for name in COPIED:
        source = PACKAGE / name
        if source.is_dir():
            shutil.copytree(source, root / name)
        else:
            shutil.copy2(source, root / name)
    run([npm, "ci", "--no-audit", "--no-fund", "--prefer-offline"], root)
    run([npm, "run", "build"], root)
    built = root / "dist" / "index.js"
    assert built.is_file() and (root / "dist" / "index.d.ts").is_file()
    return built


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The reference executor (`search-knowledge` answering late) and `seif serve`: their
    URLs. Each test resolves contexts of its own, with call ids of its own."""
    root = tmp_path_factory.mktemp("runtime")
    knobs = (f"search-knowledge:delay_ms={DELAY_MS}", "search-knowledge:routes=execute")
    executor, executor_url = start_executor_process(root, *knobs)
    try:
        serve = start_serve(write_config(root, executor_url))
        try:
            yield listening(serve), executor_url
        finally:
            stop(serve)
    finally:
        stop(executor)


def get(url: str, headers: dict[str, str] | None = None) -> Any:
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=10) as r:
        return json.loads(r.read())


def complete_again(runtime: str, turn_id: str) -> tuple[int, Any]:
    request = urllib.request.Request(
        f"{runtime}/v1/turns/{turn_id}/complete",
        data=json.dumps({"outcome": "COMPLETED"}).encode(),
        headers={**BEARER, "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def node(script: Path, env: dict[str, str]) -> str:
    """Run `script` with Node (a minimal environment plus `env`); what it printed."""
    done = subprocess.run(
        [need("node"), str(script)],
        env={"PATH": os.environ.get("PATH", ""), "SEIF_APP_TOKEN": APP_TOKEN, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"the Node script failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def drive(built: Path, runtime: str, tmp_path: Path) -> Any:
    script = tmp_path / "drive.mjs"
    script.write_text(DRIVER, encoding="utf-8")
    inputs = {
        "read": READ_ARGS,
        "proposal": PROPOSAL,
        "search": SEARCH,
        "invalid": INVALID,
        "delayMs": DELAY_MS,
    }
    env = {
        "SEIF_SDK": built.as_uri(),
        "SEIF_URL": runtime,
        "SEIF_APPROVAL_TOKEN": APPROVAL_TOKEN,
        "SEIF_INPUT": json.dumps(inputs),
    }
    return json.loads(node(script, env).strip().splitlines()[-1])


def quickstart() -> tuple[str, str]:
    """The README's quickstart: its code block and the block of what it prints."""
    text = README.read_text(encoding="utf-8")
    start = text.index("\n## Quickstart\n")
    section = text[start : text.index("\n## ", start + 1)]
    found = re.findall(r"```(\w*)\n(.*?)```", section, flags=re.DOTALL)
    code = next(body for lang, body in found if lang == "js")
    printed = next(body for lang, body in found if lang == "")
    return code, printed


def test_run_agent_turn_from_node_against_a_real_runtime(
    built_sdk: Path, stack: tuple[str, str], tmp_path: Path
) -> None:
    runtime, executor = stack
    out = drive(built_sdk, runtime, tmp_path)

    seen = out["result"]
    assert seen["messages"][0] == "system" and seen["chat"] == NAMES and seen["sameSchemas"]
    assert (seen["pending"], seen["rejectStatus"], seen["rejected"]) == ("PENDING", 200, "REJECTED")
    assert seen["abortedStatus"] == "UNKNOWN" and seen["turnWaited"] == "REJECTED"
    invalid = Receipt.from_wire(seen["invalid"])  # the same text as the Python SDK's
    assert seen["invalidText"] == receipt_text(invalid)
    errors = json.loads(seen["invalidText"])["seif"]["errors"]
    assert sorted(e["pointer"] for e in errors) == ["/limit", "/query", "/zz"]
    assert "987654" not in seen["invalidText"] and "hidden-value" not in seen["invalidText"]

    receipts = out["receipts"]
    got = [(r["callId"], r["tool"], r["status"], r["reason"], r["duplicate"]) for r in receipts]
    assert got == [
        ("r1", "inspect-context", "SUCCEEDED", None, False),
        ("r1", "inspect-context", "SUCCEEDED", None, True),
        ("w1", "propose-change", "DENIED", "APPROVAL_REQUIRED", False),
        ("s1", "search-knowledge", "UNKNOWN", "CLIENT_ABORTED", False),
        ("s1", "search-knowledge", "SUCCEEDED", None, True),
    ]
    read, duplicate, write, _, repeat = receipts
    assert read["outputAvailable"] and read["output"]["ref"] == READ_ARGS["ref"]
    assert not duplicate["outputAvailable"] and duplicate["output"] is None
    assert write["decision"]["explanation"]["tool"] == "propose-change"
    assert seen["repeat"] == repeat
    assert seen["writeText"] == receipt_text(Receipt.from_wire(write))
    assert (out["reported"], out["reportingErrors"]) == (NAMES, [])
    assert out["unauthenticated"] == {
        "name": "AuthenticationError",
        "status": 401,
        "code": "UNAUTHENTICATED",
        "typed": True,
    }

    stats = get(f"{executor}/_stats")  # each call dispatched once; the write never
    assert stats["byCallId"]["r1"] == 1 and stats["byCallId"]["s1"] == 1
    assert "propose-change" not in stats["requests"]
    events = get(f"{runtime}/v1/traces/{out['contextRef']}", BEARER)["events"]
    assert [e["tools"] for e in events if e["event"] == "REPORTED"] == [NAMES]
    assert [e["callId"] for e in events if e["event"] == "REJECTED"] == ["w1"]
    status, body = complete_again(runtime, out["turnId"])  # the SDK completed the turn
    assert (status, body["error"]["code"]) == (409, "TURN_COMPLETED")


def test_the_readme_quickstart_runs_as_written(
    built_sdk: Path, stack: tuple[str, str], tmp_path: Path
) -> None:
    code, expected = quickstart()
    assert '"@seif/sdk"' in code
    script = tmp_path / "quickstart.mjs"  # outside the package: its import names the build
    script.write_text(code.replace('"@seif/sdk"', json.dumps(built_sdk.as_uri())), "utf-8")
    printed = [line.rstrip() for line in node(script, {"SEIF_URL": stack[0]}).splitlines()]
    assert printed == expected.strip().splitlines()
