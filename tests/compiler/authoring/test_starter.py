"""`seif starter`: the executor starters, as files, as processes, and behind the real runtime.

Both starters (Python on aiohttp, Node on its built-in ``http``) are written by
:func:`compiler.authoring.starter.write_starter` for ``inspect-context`` of the reference project
and started as real processes through their ``run`` script with ``--port 0``. The same inputs must
get the same answers from both, and their schema validators must agree with the engine's
(``policy.schema.validator.compile_validator``) on generated schemas and values. With ``CI`` set, a
missing ``node`` fails the Node tests instead of skipping them.
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import os
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.authoring.source import AuthoringError
from compiler.authoring.starter import (
    LANGS,
    StarterResult,
    binding_entry,
    contract_document,
    secret_env,
    write_starter,
)
from compiler.builds.build import write_build
from policy.ir import Project, Tool
from policy.json.strict import loads as strict_loads
from policy.schema.validator import compile_validator
from seif.cli import starter as starter_cmd
from tests.support.runtime_harness import (
    ENV,
    reference_project,
    run_async,
    runtime_stack,
    stop,
    write_config,
)

TOOL = "inspect-context"
TOKEN = "starter-secret-7c1e9a3f5b"
HOST = "127.0.0.1"
LISTENING = "executor listening on "
COORDINATES = {
    "build": "blake3:" + "ab" * 32,
    "consumer": "tutor-app",
    "objective": "learner",
    "environment": "test",
    "deployment": "local",
    "trace": "trace-1",
    "context": "ctx-1",
}
VALID_ARGS: dict[str, Any] = {"ref": "course/data-literacy/module-2/lesson-3", "depth": 1}


def need_node() -> str:
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI"):
            pytest.fail("node is not installed: the Node starter cannot be tested")
        pytest.skip("node is not installed")
    return node


@pytest.fixture(scope="module")
def project() -> Project:
    return reference_project()


@pytest.fixture(scope="module")
def tool(project: Project) -> Tool:
    found: Tool = project.tool_by_id[TOOL]
    return found


@pytest.fixture(scope="module")
def starters(project: Project, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("starters")
    return {lang: write_starter(project, TOOL, lang, root / lang).out for lang in LANGS}


# --- processes -------------------------------------------------------------------------------


@dataclass
class Server:
    lang: str
    url: str
    port: int
    proc: subprocess.Popen[str]


def spawn(
    folder: Path, *args: str, token: str | None = TOKEN, stderr: Any = subprocess.PIPE
) -> subprocess.Popen[str]:
    """``folder/run ARGS`` with ``SEIF_EXECUTOR_TOKEN`` (unset when ``token`` is None)."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHON": sys.executable}
    if token is not None:
        env["SEIF_EXECUTOR_TOKEN"] = token
    return subprocess.Popen(
        [str(folder / "run"), *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )


def listening_url(proc: subprocess.Popen[str], timeout: float = 30) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        line = proc.stdout.readline() if ready else ""
        if line.startswith(LISTENING):
            return line[len(LISTENING) :].strip()
        if not line:
            break
    raise AssertionError(f"no `{LISTENING}` line (exit code {proc.poll()})")


def start(lang: str, folder: Path) -> Iterator[Server]:
    """The starter in ``folder`` on a free port, for the span of a fixture (its log beside)."""
    with (folder.parent / f"{lang}.err").open("w") as log:
        proc = spawn(folder, "--port", "0", stderr=log)
    try:
        url = listening_url(proc)
        yield Server(lang, url, int(url.rsplit(":", 1)[1]), proc)
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def python_server(starters: dict[str, Path]) -> Iterator[Server]:
    yield from start("python", starters["python"])


@pytest.fixture(scope="module")
def node_server(starters: dict[str, Path]) -> Iterator[Server]:
    need_node()
    yield from start("node", starters["node"])


@pytest.fixture(params=LANGS)
def server(request: pytest.FixtureRequest) -> Server:
    found: Server = request.getfixturevalue(f"{request.param}_server")
    return found


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any

    @property
    def code(self) -> str | None:
        error = self.body.get("error") if isinstance(self.body, dict) else None
        return error.get("code") if isinstance(error, dict) else None

    @property
    def errors(self) -> list[Any] | None:
        error = self.body.get("error") if isinstance(self.body, dict) else None
        return error.get("errors") if isinstance(error, dict) else None

    def outcome(self) -> tuple[Any, ...]:
        """What both starters must answer alike (messages may differ)."""
        ok = self.body.get("ok") if isinstance(self.body, dict) else None
        return (self.status, ok, self.code, self.errors, self.headers.get("idempotent-replayed"))


def call(
    server: Server,
    method: str,
    path: str,
    body: Any = None,
    *,
    raw: bytes | None = None,
    auth: str | None = f"Bearer {TOKEN}",
) -> Reply:
    conn = http.client.HTTPConnection(HOST, server.port, timeout=10)
    try:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        headers = {"Content-Type": "application/json"}
        if auth is not None:
            headers["Authorization"] = auth
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        text = response.read()
        found = {k.lower(): v for k, v in response.getheaders()}
        return Reply(response.status, found, json.loads(text) if text else None)
    finally:
        conn.close()


def execute_body(
    tool: Tool, arguments: Any, /, key: str = "key-1", **changes: Any
) -> dict[str, Any]:
    body = {
        "contract": "context-tool-executor.v1",
        "tool": {"id": tool.id, "version": tool.version, "contractDigest": tool.contract_digest},
        "arguments": arguments,
        "callId": "call-" + key,
        "idempotencyKey": key,
        "coordinates": dict(COORDINATES),
    }
    return {**body, **changes}


# --- write_starter ---------------------------------------------------------------------------


@pytest.mark.parametrize("lang", LANGS)
def test_write_starter_writes_a_whole_project(
    project: Project, tool: Tool, lang: str, tmp_path: Path
) -> None:
    result = write_starter(project, TOOL, lang, tmp_path / "exec")
    code = {"python": ("server.py", "handler.py", "store.py", "requirements.txt"),
            "node": ("server.js", "handler.js", "store.js", "package.json")}[lang]  # fmt: skip
    assert result == StarterResult(
        out=tmp_path / "exec",
        lang=lang,
        tool_id=TOOL,
        version=tool.version,
        contract_digest=tool.contract_digest,
        files=tuple(sorted(("README.md", "contract.json", "run", *code))),
        run=f"{tmp_path / 'exec' / 'run'} --port 8801",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exec"]  # no staging folder left
    for name in result.files:
        mode = (result.out / name).stat().st_mode & 0o777
        assert mode == (0o755 if name == "run" else 0o644), name
    contract = json.loads((result.out / "contract.json").read_text())
    assert contract == json.loads(json.dumps(contract_document(tool)))
    assert contract["contractDigest"] == tool.contract_digest
    readme = (result.out / "README.md").read_text()
    assert "{{" not in readme and tool.contract_digest in readme
    assert secret_env(TOOL) in readme and "NOT_IMPLEMENTED" in readme
    assert "model-supplied" in readme and "durable" in readme


def test_write_starter_fills_an_empty_folder(project: Project, tmp_path: Path) -> None:
    (tmp_path / "exec").mkdir()
    result = write_starter(project, TOOL, "node", tmp_path / "exec")
    assert (result.out / "server.js").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exec"]


def refused(project: Project, tool_id: str, lang: str, out: Path) -> AuthoringError:
    with pytest.raises(AuthoringError) as caught:
        write_starter(project, tool_id, lang, out)
    return caught.value


def test_write_starter_refusals_write_nothing(project: Project, tmp_path: Path) -> None:
    error = refused(project, "nope", "python", tmp_path / "a")
    assert [d.code for d in error.diagnostics] == ["UNKNOWN_TOOL"]
    assert all(t.id in error.diagnostics[0].message for t in project.tools)
    error = refused(project, TOOL, "ruby", tmp_path / "a")
    assert [d.code for d in error.diagnostics] == ["STARTER_LANG_UNKNOWN"]
    assert not (tmp_path / "a").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("keep")
    (tmp_path / "file").write_text("a file")
    for out in ("full", "file"):
        error = refused(project, TOOL, "python", tmp_path / out)
        assert [d.code for d in error.diagnostics] == ["OUT_REFUSED"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "full"]
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["mine.txt"]
    assert (tmp_path / "file").read_text() == "a file"


def run_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="seif")
    starter_cmd.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["starter", *argv])
    code: int = args.run(args)
    return code


def test_the_command(
    project: Project,
    tool: Tool,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    build = tmp_path / "build"
    write_build(project, build)
    out = tmp_path / "exec"
    assert (
        run_cli("--build", str(build), "--tool", TOOL, "--lang", "python", "--out", str(out)) == 0
    )
    printed = capsys.readouterr().out
    assert tool.contract_digest in printed and f"SEIF_EXECUTOR_TOKEN=<secret> {out}/run" in printed
    assert json.dumps({TOOL: binding_entry(tool)}) in printed and "NOT_IMPLEMENTED" in printed
    assert run_cli("--build", str(build), "--tool", TOOL, "--lang", "node", "--out", str(out)) == 1
    assert capsys.readouterr().err.startswith(f"{out}: OUT_REFUSED: ")
    assert run_cli("--build", str(build), "--tool", "x", "--lang", "node", "--out", "n") == 2
    assert capsys.readouterr().err.startswith("n: UNKNOWN_TOOL: ")
    assert run_cli("--build", str(tmp_path), "--tool", TOOL, "--lang", "node", "--out", "n") == 2
    assert "BUILD_NOT_FOUND" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        run_cli("--build", str(build), "--tool", TOOL, "--lang", "ruby", "--out", "n")
    assert usage.value.code == 2
    assert not Path("n").exists()


def test_the_python_starter_is_strictly_typed(starters: dict[str, Path], tmp_path: Path) -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed")
    copy = shutil.copytree(starters["python"], tmp_path / "copy")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
         "server.py", "handler.py", "store.py"],
        cwd=copy, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


# --- one starter, as a process ---------------------------------------------------------------


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("token", [None, ""])
def test_refuses_to_start_without_a_token(
    starters: dict[str, Path], lang: str, token: str | None
) -> None:
    if lang == "node":
        need_node()
    proc = spawn(starters[lang], "--port", "0", token=token)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and out == ""
    assert err.count("\n") == 1 and "SEIF_EXECUTOR_TOKEN is unset or empty" in err


def test_listens_and_describes_the_exact_contract(server: Server, tool: Tool) -> None:
    assert server.url == f"http://{HOST}:{server.port}" and server.port > 0
    reply = call(server, "GET", "/describe")
    assert reply.status == 200
    assert reply.body == {
        "contract": "context-tool-executor.v1",
        "tool": {"id": TOOL, "version": tool.version, "contractDigest": tool.contract_digest},
    }


@pytest.mark.parametrize(
    "auth", [None, "Bearer wrong", f"bearer {TOKEN}", TOKEN, f"Bearer {TOKEN}x"]
)
def test_refuses_a_missing_or_wrong_bearer(server: Server, tool: Tool, auth: str | None) -> None:
    for method, path, body in [
        ("GET", "/describe", None),
        ("POST", "/execute", execute_body(tool, VALID_ARGS)),
    ]:
        reply = call(server, method, path, body, auth=auth)
        assert (reply.status, reply.body["ok"], reply.code) == (401, False, "UNAUTHENTICATED")
        assert TOKEN not in json.dumps(reply.body)


def test_a_valid_call_is_not_implemented_yet(server: Server, tool: Tool) -> None:
    reply = call(
        server, "POST", "/execute", execute_body(tool, VALID_ARGS, key=f"ni-{server.lang}")
    )
    assert (reply.status, reply.body["ok"], reply.code) == (200, False, "NOT_IMPLEMENTED")
    assert reply.body["contract"] == "context-tool-executor.v1"


def test_a_repeated_idempotency_key_gets_the_stored_answer(server: Server, tool: Tool) -> None:
    body = execute_body(tool, VALID_ARGS, key=f"idem-{server.lang}")
    first = call(server, "POST", "/execute", body)
    again = call(server, "POST", "/execute", body)
    assert "idempotent-replayed" not in first.headers
    assert again.headers["idempotent-replayed"] == "true"
    assert (again.status, again.body) == (first.status, first.body)
    other = execute_body(tool, {"ref": "elsewhere"}, key=f"idem-{server.lang}")
    reply = call(server, "POST", "/execute", other)
    assert (reply.status, reply.code) == (409, "IDEMPOTENCY_KEY_REUSED")


@pytest.mark.parametrize(
    "change",
    [
        {"contract": "context-tool-executor.v2"},
        {"tool": {"id": TOOL, "version": "1.0.1", "contractDigest": "?"}},
        {"tool": {"id": "search-knowledge", "version": "1.0.0", "contractDigest": "?"}},
        {"tool": None},
    ],
)
def test_a_call_for_another_contract_is_refused(
    server: Server, tool: Tool, change: dict[str, Any]
) -> None:
    reply = call(server, "POST", "/execute", execute_body(tool, VALID_ARGS, **change))
    assert (reply.status, reply.body["ok"], reply.code) == (409, False, "CONTRACT_MISMATCH")
    other = {**execute_body(tool, VALID_ARGS)["tool"], "contractDigest": "sha256:" + "0" * 64}
    reply = call(server, "POST", "/execute", execute_body(tool, VALID_ARGS, tool=other))
    assert reply.code == "CONTRACT_MISMATCH"


@pytest.mark.parametrize(
    ("arguments", "errors"),
    [
        ({}, [("", "required")]),
        ({"ref": ""}, [("/ref", "minLength")]),
        ({"ref": "a", "depth": 4, "section": "x", "z~/": 1},
         [("/depth", "maximum"), ("/section", "enum"), ("/z~0~1", "additionalProperties")]),
        ({"ref": "a", "depth": True}, [("/depth", "type")]),
        ({"ref": "a", "depth": 1.5}, [("/depth", "type")]),
        ([], [("", "type")]),
    ],
)  # fmt: skip
def test_arguments_that_break_the_contract_are_refused(
    server: Server, tool: Tool, arguments: Any, errors: list[tuple[str, str]]
) -> None:
    reply = call(server, "POST", "/execute", execute_body(tool, arguments, key="bad-args"))
    assert (reply.status, reply.body["ok"], reply.code) == (400, False, "INVALID_ARGUMENTS")
    assert reply.errors == [{"pointer": p, "keyword": k} for p, k in errors]
    assert all(p in reply.body["error"]["message"] for p, _ in errors if p)


def test_both_starters_answer_alike(python_server: Server, node_server: Server, tool: Tool) -> None:
    good = execute_body(tool, VALID_ARGS, key="alike")
    text = json.dumps(good)
    keys = {"ref": "x" * 121, "b": [], "a": 1, "\ufb01": 0, "\U0001f600": 0}  # sorted by code point
    bad, mismatch, invalid = "BAD_REQUEST", "CONTRACT_MISMATCH", "INVALID_ARGUMENTS"
    cases = [
        (b"", bad), (b"[]", bad), (b"null", bad), (b"{", bad), (b'{"a":1,"a":2}', bad),
        (b"\xef\xbb\xbf{}", bad), (b"\xff", bad), (b'{"x":NaN}', bad), (b'{"x":1e400}', bad),
        (b'{"x":-Infinity}', bad), (b'{"x":"\\ud800"}', bad), (b'{"x":01}', bad),
        (b'{"x":"a\x01"}', bad), (b"[" * 5000, bad),
        (b'{"x":' + b"[" * 63 + b"]" * 63 + b"}", mismatch),  # 64 levels
        (b'{"x":' + b"[" * 64 + b"]" * 64 + b"}", bad),  # 65 levels
        (text.replace('"depth": 1', '"depth": 100000000000000000000').encode(), invalid),
        (text.replace('"depth": 1', '"depth": 1.0').encode(), "NOT_IMPLEMENTED"),  # stored
        (text.replace('"depth": 1', '"depth": 3e0').encode(), "IDEMPOTENCY_KEY_REUSED"),
        (text.replace('"ref": "', '"ref": "\\ud83d\\ude00').encode(), "IDEMPOTENCY_KEY_REUSED"),
        (json.dumps({**good, "callId": ""}).encode(), bad),
        (json.dumps({**good, "idempotencyKey": 7}).encode(), bad),
        (json.dumps({**good, "coordinates": {**COORDINATES, "extra": 1}}).encode(), bad),
        (json.dumps({k: v for k, v in good.items() if k != "arguments"}).encode(), invalid),
        (json.dumps(execute_body(tool, keys)).encode(), invalid),
        (text.encode(), "NOT_IMPLEMENTED"),  # `1` is `1.0`: the stored answer
        (b"x" * ((1 << 20) + 1), "TOO_LARGE"),
    ]  # fmt: skip
    for raw, code in cases:
        answers = [call(s, "POST", "/execute", raw=raw) for s in (python_server, node_server)]
        assert answers[0].outcome() == answers[1].outcome(), raw[:80]
        assert answers[0].code == code, raw[:80]
    assert answers[0].outcome()[1:] == (False, "TOO_LARGE", None, None)
    assert answers[0].status == 413
    many = call(python_server, "POST", "/execute", execute_body(tool, keys))
    pointers = [e["pointer"] for e in many.errors or []]
    assert pointers == ["/ref", "/a", "/b", "/\ufb01", "/\U0001f600"]
    for method, path in [("GET", "/execute"), ("POST", "/describe"), ("GET", "/"), ("GET", "/x")]:
        answers = [call(s, method, path) for s in (python_server, node_server)]
        assert answers[0].outcome() == answers[1].outcome(), (method, path)
        assert answers[0].code == ("NOT_FOUND" if path in ("/", "/x") else "METHOD_NOT_ALLOWED")


# --- the validators against the engine's -----------------------------------------------------

NAMES = st.sampled_from(
    ["a", "b", "1", "10", "", "~/", "\u00e9", "\ufb01", "\U0001f600", "__proto__"]
)
TEXT = st.text(st.sampled_from('ab\u00e9\U0001f600\x00"\\'), max_size=4)
NUMBERS = st.sampled_from(
    [0, 1, -1, 2, 3, 1.0, 2.0, 0.5, -0.0, 1.5, 10**20, 1e20, 2**53, 2**53 + 1]
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)
JSON = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=6,
)  # fmt: skip
POOLS = {"string": TEXT, "integer": NUMBERS.filter(lambda n: float(n).is_integer()),
         "number": NUMBERS, "boolean": st.booleans(), "null": st.none()}  # fmt: skip
BOUND_KEYS = {"string": ("minLength", "maxLength"), "array": ("minItems", "maxItems"),
              "integer": ("minimum", "maximum"), "number": ("minimum", "maximum")}  # fmt: skip


@st.composite
def schemas(draw: st.DrawFn, level: int = 1) -> dict[str, Any]:
    kinds = ["object", "array"] if level == 1 else list(POOLS) + ["object", "array"] * (level < 3)
    kind = draw(st.sampled_from(kinds))
    schema: dict[str, Any] = {"type": kind}
    if kind in BOUND_KEYS:
        values = NUMBERS if kind in ("integer", "number") else st.integers(0, 3)
        for key in BOUND_KEYS[kind]:
            if draw(st.booleans()):
                schema[key] = draw(values)
    if kind in POOLS and draw(st.integers(0, 2)) == 0:
        schema["enum"] = draw(st.lists(POOLS[kind], min_size=1, max_size=3))
    elif kind in POOLS and draw(st.integers(0, 4)) == 0:
        schema["const"] = draw(POOLS[kind])
    if kind == "object":
        names = draw(st.lists(NAMES, max_size=3, unique=True))
        schema["properties"] = {n: draw(schemas(level + 1)) for n in names}
        schema["required"] = draw(st.lists(st.sampled_from(names), unique=True)) if names else []
        if draw(st.booleans()):
            schema["additionalProperties"] = draw(st.booleans())
    elif kind == "array" and draw(st.booleans()):
        schema["items"] = draw(schemas(level + 1))
    return schema


@st.composite
def near(draw: st.DrawFn, schema: dict[str, Any]) -> Any:
    """Mostly values near the schema (its shape, with a wrong part now and then)."""
    if draw(st.integers(0, 7)) == 0:
        return draw(JSON)
    kind = schema["type"]
    if kind == "object":
        value = {
            n: draw(near(s)) for n, s in schema["properties"].items() if draw(st.integers(0, 3))
        }
        if draw(st.integers(0, 3)) == 0:
            value[draw(NAMES)] = draw(SCALARS)
        return value
    if kind == "array":
        item = schema.get("items")
        return draw(st.lists(near(item) if item else JSON, max_size=4))
    return draw(POOLS[kind])


class NodeValidator:
    """``schemaErrors`` of the Node starter's server.js, one line of JSON in, one out."""

    def __init__(self, server_js: Path) -> None:
        script = (
            f"const s = require({json.dumps(str(server_js))});"
            "require('readline').createInterface({input: process.stdin}).on('line', (line) => {"
            "  const doc = s.parseJson(line);"
            "  const out = s.schemaErrors(doc.get('schema'), doc.get('value'));"
            "  process.stdout.write(JSON.stringify(out) + '\\n');"
            "});"
        )
        self.proc = subprocess.Popen(
            [need_node(), "-e", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def errors(self, line: str) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def python_server_module(folder: Path) -> ModuleType:
    """The Python starter's server.py as a module (its ``handler`` and ``store`` beside it)."""
    sys.path.insert(0, str(folder))
    try:
        spec = importlib.util.spec_from_file_location("seif_starter_server", folder / "server.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(folder))
        for name in ("handler", "store"):
            sys.modules.pop(name, None)


@pytest.fixture(scope="module")
def node_validator(starters: dict[str, Path]) -> Iterator[NodeValidator]:
    validator = NodeValidator(starters["node"] / "server.js")
    try:
        yield validator
    finally:
        validator.close()


@pytest.fixture(scope="module")
def python_validator(starters: dict[str, Path]) -> ModuleType:
    return python_server_module(starters["python"])


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_the_validators_agree_with_the_engine(
    data: st.DataObject, python_validator: ModuleType, node_validator: NodeValidator
) -> None:
    schema = data.draw(schemas())
    value = data.draw(near(schema))
    line = json.dumps({"schema": schema, "value": value})  # escapes: the parsers decode them
    engine = [
        {"pointer": e.pointer, "keyword": e.keyword}
        for e in compile_validator(schema).errors(strict_loads(json.dumps(value)))
    ]
    document = python_validator.loads(line.encode())
    assert python_validator.schema_errors(document["schema"], document["value"]) == engine
    assert node_validator.errors(line) == engine


# --- behind the real runtime -----------------------------------------------------------------


@pytest.mark.parametrize("lang", LANGS)
def test_through_the_runtime_a_call_fails_not_implemented(
    request: pytest.FixtureRequest, tool: Tool, lang: str, tmp_path: Path
) -> None:
    server: Server = request.getfixturevalue(f"{lang}_server")
    entry = binding_entry(tool, server.port)  # as `seif starter` prints it
    assert entry["endpoint"] == server.url
    bindings = {"environment": "test", "revision": 1, "tools": {TOOL: entry}}
    config = write_config(tmp_path, server.url, bindings=bindings)
    env = {**ENV, secret_env(TOOL): TOKEN}

    async def scenario() -> None:
        async with runtime_stack(config, server.url, web.Application(), env=env) as stack:
            ready = await stack.call("GET", "/v1/ready", headers={})
            assert ready.status == 200, ready
            assert ready.body["ready"] is True and ready.body["tools"][TOOL] == "READY"
            context = await stack.resolve("learner", "tutor-app")
            assert TOOL in [c["id"] for c in context["contracts"]]
            receipt = await stack.execute(context["contextRef"], TOOL, "c1", VALID_ARGS)
            assert receipt["status"] == "FAILED", receipt
            assert receipt["reason"] == "EXECUTOR_ERROR"
            assert receipt["executorError"] == "NOT_IMPLEMENTED"
            again = await stack.execute(context["contextRef"], TOOL, "c1", VALID_ARGS)
            assert again["duplicate"] is True and again["status"] == "FAILED"

    run_async(scenario())
