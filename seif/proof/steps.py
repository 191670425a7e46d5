"""The steps of `seif prove`, in order. Each takes the :class:`Delivery` and returns what it
observed (codes, counts, digests, statuses), or raises :class:`StepFailed` saying what it saw
instead. The proof (``seif.cli.prove``) runs them, records each as a check, and stops at the first
that fails."""

from __future__ import annotations

import asyncio
import secrets
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import blake3

from policy.json.canonical import canonical_json_bytes
from policy.json.strict import dumps, loads
from seif.demo.runtime import TOOL_ENV, loopback_bindings
from seif.proof.processes import Ran, Server, StepFailed, base_env, http_json, seif, start

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "reference" / "agent-tools" / "context-project.json"
EXECUTOR = ROOT / "examples" / "reference-tools" / "executor.py"
APP, APPROVER = "proof-app", "ops-proof"
APPROVAL_TOKEN = "SEIF_CONTEXT_TOOL_APPROVAL_TOKEN"
LESSON = "course/data-literacy/module-2/lesson-3"
READ = {"ref": LESSON}
WRITE = {"target": LESSON, "kind": "clarify", "summary": "Define the median before the outliers."}
AUTHORING = {"objective": "authoring", "consumer": "course-authoring", "deployment": "proof"}


@dataclass
class Delivery:
    """The delivery directory and what the steps leave for the next ones."""

    root: Path
    tokens: dict[str, str] = field(default_factory=dict)
    servers: dict[str, Server] = field(default_factory=dict)
    seen: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [*TOOL_ENV.values(), "SEIF_APP_TOKEN", APPROVAL_TOKEN]
        self.tokens = {name: secrets.token_urlsafe(24) for name in names}
        self.tokens["SEIF_APPROVER_PROOF"] = secrets.token_urlsafe(24)

    def env(self, *names: str) -> dict[str, str]:
        """The environment of one process: only the tokens it needs (least privilege)."""
        return base_env(**{name: self.tokens[name] for name in names})

    def seif(self, *args: str) -> Ran:
        return seif(args, cwd=self.root, env=self.env())  # no command here needs a token

    def serve(self, name: str, argv: list[str], tokens: tuple[str, ...]) -> Server:
        log = self.root / f"{name}.log"
        server = start(name, argv, cwd=self.root, env=self.env(*tokens), log=log)
        self.servers[name] = server
        server.wait_listening()
        return server

    def stop_all(self) -> None:
        """Stop every server, the last started first; one that will not stop stops no other."""
        for server in reversed(list(self.servers.values())):
            try:
                server.stop()
            except Exception as exc:  # recorded, and the others still stopped
                self.seen.setdefault("stopFailures", []).append(f"{server.name}: {exc}"[:200])


def _digest(value: Any) -> str:
    return "blake3:" + blake3.blake3(canonical_json_bytes(value)).hexdigest()


def _expect(ok: bool, message: str, **observed: Any) -> None:
    if not ok:
        raise StepFailed(message, **observed)


def _json_of(ran: Ran, what: str, *, code: int = 0) -> Any:
    _expect(ran.code == code, f"`seif {what}` exited {ran.code}", stderr=ran.err)
    return ran.json()


# --- authoring --------------------------------------------------------------------------------


def validate(d: Delivery) -> dict[str, Any]:
    found = _json_of(d.seif("validate", "--project", str(REFERENCE), "--json"), "validate")
    tools = {t["id"]: t["contractDigest"] for t in found["tools"]}
    return {"project": str(REFERENCE.relative_to(ROOT)), "tools": tools}


def test(d: Delivery) -> dict[str, Any]:
    found = _json_of(d.seif("test", "--project", str(REFERENCE), "--json"), "test")
    figures = {k: f"{found[k]['passed']}/{found[k]['total']}" for k in ("context", "tools")}
    return {**figures, "tests": len(found["tests"])}


def build(d: Delivery) -> dict[str, Any]:
    ran = d.seif("build", "--project", str(REFERENCE), "--out", "build")
    _expect(ran.code == 0, f"`seif build` exited {ran.code}", stderr=ran.err)
    manifest = loads((d.root / "build" / "manifest.json").read_bytes())
    d.seen["digest"] = manifest["digest"]
    return {"digest": manifest["digest"], "format": manifest["format"]}


def register(d: Delivery) -> dict[str, Any]:
    digest = d.seen["digest"]
    ran = d.seif("register", "--build", "build", "--registry", "registry", "--json")
    stored = _json_of(ran, "register")
    promoted = _json_of(
        d.seif("promote", "--registry", "registry", "--candidate", digest, "--json"), "promote"
    )
    _expect(stored["digest"] == digest and promoted["promoted"], "the build was not registered")
    return {"digest": stored["digest"], "stored": stored["stored"], "promoted": digest}


def bundle(d: Delivery) -> dict[str, Any]:
    ran = d.seif("bundle", "--build", "build", "--out", "bundle")
    _expect(ran.code == 0, f"`seif bundle` exited {ran.code}", stderr=ran.err)
    manifest = loads((d.root / "bundle" / "bundle.json").read_bytes())
    _expect(manifest["build"] == d.seen["digest"], "the bundle carries another build")
    return {
        "path": str(d.root / "bundle"),
        "format": manifest["format"],
        "build": manifest["build"],
        "python": manifest["python"],
        "wheels": len(manifest["wheels"]),
    }


# --- the servers ------------------------------------------------------------------------------


def executor(d: Delivery) -> dict[str, Any]:
    tokens = [f"{tool}={var}" for tool, var in TOOL_ENV.items()]
    argv = [sys.executable, str(EXECUTOR), "--port", "0", "--token-env", *tokens]
    url = d.serve("executor", argv, tuple(TOOL_ENV.values())).url
    status, body = http_json("POST", f"{url}/inspect-context/execute", {})
    _expect(status == 401, "the executor answered a request without its token", status=status)
    return {"url": url, "withoutToken": status, "code": (body or {}).get("error", {}).get("code")}


def _configuration(d: Delivery) -> None:
    bindings = loopback_bindings(d.servers["executor"].url, "proof")
    scopes = ["context.resolve", "tools.execute", "traces.read"]
    credentials = {"credentials": [{"id": APP, "tokenRef": "env:SEIF_APP_TOKEN", "scopes": scopes}]}
    approvers = {"approvers": [{"id": APPROVER, "tokenRef": "env:SEIF_APPROVER_PROOF"}]}
    for name, document in (
        ("bindings.json", bindings),
        ("credentials.json", credentials),
        ("approvers.json", approvers),
    ):
        (d.root / name).write_text(dumps(document, indent=2))


def runtime(d: Delivery) -> dict[str, Any]:
    _configuration(d)
    argv = ["bash", str(d.root / "bundle" / "run"), "--bindings", "bindings.json"]
    argv += ["--credentials", "credentials.json", "--data", "data", "--port", "0"]
    tokens = (*TOOL_ENV.values(), "SEIF_APP_TOKEN", APPROVAL_TOKEN)
    server = d.serve("runtime", argv, tokens)
    status, ready = http_json("GET", f"{server.url}/v1/ready")
    _expect(status == 200 and ready.get("ready") is True, "the runtime is not ready", ready=ready)
    interpreter = Path(f"/proc/{server.proc.pid}/exe").resolve()
    venv = (d.root / "bundle" / ".venv").resolve()
    _expect(
        Path(f"/proc/{server.proc.pid}/cmdline")
        .read_bytes()
        .split(b"\0")[0]
        .startswith(str(venv).encode()),
        "the runtime is not the bundle's own",
    )
    return {
        "url": server.url,
        "ready": ready["ready"],
        "interpreter": str(d.root / "bundle" / ".venv" / "bin" / "python"),
        "executable": str(interpreter),
        "install": "pip --no-index --require-hashes from bundle/wheels",
    }


def approval_server(d: Delivery) -> dict[str, Any]:
    python = str(d.root / "bundle" / ".venv" / "bin" / "python")
    runtime_url = d.servers["runtime"].url
    argv = [python, "-I", "-m", "seif.cli", "approval-server", "--runtime", runtime_url]
    argv += ["--approvers", "approvers.json", "--port", "0"]
    url = d.serve("approval-server", argv, ("SEIF_APPROVER_PROOF", APPROVAL_TOKEN)).url
    status, _ = http_json("GET", f"{url}/v1/pending")
    _expect(status == 401, "the approval server answered without an approver's token")
    return {"url": url, "withoutToken": status, "from": "bundle/.venv"}


# --- the agent, through the public SDK ---------------------------------------------------------


def _sdk(d: Delivery, work: Callable[[Any], Any]) -> Any:
    from seif import RuntimeClient  # noqa: PLC0415  # the HTTP client loads only here

    async def main() -> Any:
        url, token = d.servers["runtime"].url, d.tokens["SEIF_APP_TOKEN"]
        async with RuntimeClient(url, token) as client:
            return await work(client)

    return asyncio.run(main())


def learner(d: Delivery) -> dict[str, Any]:
    async def resolve(client: Any) -> Any:
        return await client.resolve("learner", consumer="tutor-app", deployment="proof")

    context = _sdk(d, resolve)
    names = list(context.tool_names)
    _expect("propose_change" not in names, "the learner received the proposal tool", tools=names)
    return {"objective": "learner", "tools": names, "withheld": "propose-change"}


def agent_turn(d: Delivery) -> dict[str, Any]:
    script = [("call-read-1", "inspect_context", READ), ("call-write-1", "propose_change", WRITE)]

    async def handler(turn: Any) -> list[str]:
        for call_id, name, arguments in script:  # a scripted model's tool calls
            await turn.execute(name, call_id, arguments)
        return [t.name for t in turn.tools]

    delivery = _sdk(d, lambda client: client.run_agent_turn(AUTHORING, handler))
    receipts = [(r.call_id, r.status, r.reason) for r in delivery.receipts]
    expected = [
        ("call-read-1", "SUCCEEDED", None),
        ("call-write-1", "DENIED", "APPROVAL_REQUIRED"),
    ]
    _expect(receipts == expected, "the turn's receipts differ", receipts=receipts)
    _expect(not delivery.reporting_errors, "the turn's reports failed")
    d.seen["context"] = delivery.context_ref
    return {
        "contextRef": delivery.context_ref,
        "turnId": delivery.turn_id,
        "bound": delivery.result,
        "receipts": [{"callId": c, "status": s, "reason": r} for c, s, r in receipts],
    }


def approval(d: Delivery) -> dict[str, Any]:
    url, headers = d.servers["approval-server"].url, _approver(d)
    status, listed = http_json("GET", f"{url}/v1/pending", headers=headers)
    _expect(status == 200, "the approver could not list what waits", status=status)
    mine = [p for p in listed["pending"] if p["callId"] == "call-write-1"]
    _expect(len(mine) == 1, "the write is not pending", pending=len(listed["pending"]))
    shown = mine[0]
    _expect(_digest(shown["arguments"]) == _digest(WRITE), "the approver saw other arguments")
    reason = {"reason": "proof: the proposal matches the lesson"}
    status, done = http_json(
        "POST", f"{url}/v1/pending/{shown['pendingId']}/approve", reason, headers
    )
    _expect(status == 200, "the approval was refused", status=status, answer=done)

    async def proceed(client: Any) -> Any:
        ctx = d.seen["context"]
        state = await client.wait_for_approval(ctx, "call-write-1", timeout_s=10)
        receipt = await client.execute(
            ctx, "propose_change", "call-write-1", WRITE, approval_id=state.approval_id
        )
        return state, receipt

    state, receipt = _sdk(d, proceed)
    _expect(receipt.status == "SUCCEEDED", "the approved write did not run", status=receipt.status)
    d.seen["approval"] = state.approval_id
    return {
        "pendingId": shown["pendingId"],
        "tool": shown["tool"],
        "shownArguments": _digest(shown["arguments"]),
        "sentArguments": _digest(WRITE),
        "approver": done["approver"],
        "applicationSaw": state.state,
        "receipt": receipt.status,
    }


def _approver(d: Delivery) -> dict[str, str]:
    return {"Authorization": f"Bearer {d.tokens['SEIF_APPROVER_PROOF']}"}


def duplicate(d: Delivery) -> dict[str, Any]:
    async def again(client: Any) -> Any:
        return await client.execute(
            d.seen["context"],
            "propose_change",
            "call-write-1",
            WRITE,
            approval_id=d.seen["approval"],
        )

    receipt = _sdk(d, again)
    _, stats = http_json("GET", f"{d.servers['executor'].url}/_stats")
    dispatched = stats["executions"].get("propose-change", 0)
    _expect(
        receipt.duplicate and dispatched == 1, "the repeat was dispatched", executions=dispatched
    )
    return {
        "status": receipt.status,
        "duplicate": receipt.duplicate,
        "outputAvailable": receipt.output_available,
        "executorDispatches": dispatched,
    }


# --- offline, and the release gate --------------------------------------------------------------


def replay(d: Delivery) -> dict[str, Any]:
    stopped = d.servers["executor"].stop()
    ran = d.seif("trace", "export", "--data", "data", "--out", "decisions.cbor")
    _expect(ran.code == 0, f"`seif trace export` exited {ran.code}", stderr=ran.err)
    found = _json_of(
        d.seif("replay", "--build", "build", "--log", "decisions.cbor", "--json"), "replay"
    )
    report = found["replay"]
    _expect(found["ok"], "the recorded disclosures do not reproduce", replay=report)
    return {"executorStopped": stopped, "log": str(d.root / "decisions.cbor"), "replay": report}


def _excludes_a_tool(test: dict[str, Any]) -> bool:
    """A forbidden-tool test: it asserts that some tool is not disclosed."""
    return bool(test.get("expect", {}).get("tools", {}).get("exclude"))


def candidate(d: Delivery) -> dict[str, Any]:
    project = loads(REFERENCE.read_bytes())
    removed = [t["id"] for t in project["tests"] if _excludes_a_tool(t)]
    project["tests"] = [t for t in project["tests"] if t["id"] not in removed]
    project["version"] = project["version"] + "-candidate"
    (d.root / "candidate").mkdir()
    source = d.root / "candidate" / "context-project.json"
    source.write_text(dumps(project, indent=2))
    ran = d.seif("build", "--project", str(source), "--out", "candidate/build")
    _expect(ran.code == 0, f"`seif build` of the candidate exited {ran.code}", stderr=ran.err)
    digest = loads((d.root / "candidate" / "build" / "manifest.json").read_bytes())["digest"]
    _json_of(
        d.seif("register", "--build", "candidate/build", "--registry", "registry", "--json"),
        "register",
    )
    ran = d.seif("promote", "--registry", "registry", "--candidate", digest, "--json")
    refused = _json_of(ran, "promote", code=1)
    named = [x["message"] for x in refused["diagnostics"] if x["code"] == "PROMOTION_BLOCKED"]
    missing = sorted(t for t in removed if any(f"`{t}` is missing" in m for m in named))
    _expect(
        missing == sorted(removed), "the promotion did not name every removed test", named=named
    )
    return {
        "candidate": digest,
        "removedTests": removed,
        "promoted": refused["promoted"],
        "exitCode": ran.code,
        "blocked": named,
    }


STEPS: list[tuple[str, str, Callable[[Delivery], dict[str, Any]]]] = [
    ("validate", "validate the reference project", validate),
    ("test", "run its tests with the engine", test),
    ("build", "build it", build),
    ("register", "register and promote the build", register),
    ("bundle", "write the Runtime bundle", bundle),
    ("executor", "start the synthetic executor (authenticated)", executor),
    ("runtime", "start the bundle's own runtime", runtime),
    ("approval-server", "start the approval server", approval_server),
    ("learner-withheld", "the learner never receives the proposal tool", learner),
    ("agent-turn", "an agent turn through the SDK: read, then a write held", agent_turn),
    ("approval", "a named approver approves the exact write; it runs once", approval),
    ("duplicate", "the repeated call id is suppressed", duplicate),
    ("replay", "export the decision log and replay it, no executor running", replay),
    ("promotion-blocked", "a candidate without its forbidden-tool tests is blocked", candidate),
]
