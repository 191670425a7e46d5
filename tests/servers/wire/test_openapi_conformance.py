"""The OpenAPI document the runtime serves matches every answer it gives: schemathesis, against
a real `seif serve` process and the synthetic reference executor on loopback, generates
requests for every declared operation (examples, the coverage phase's boundary and negative
cases, unsupported methods, and property-based fuzzing; positive and negative data), with the
runtime's credentials, and checks each answer.

Checks: not a server error, status code, content type and response schema conformance,
response headers, negative data rejected, unsupported methods answered 405 with ``Allow``,
authentication not ignored. Not checked: ``positive_data_acceptance`` (a call the schema
allows may still be refused by the build, e.g. a consumer no profile serves, 409; the spec
answers 400 for an unknown objective, which the document already enumerates), and the stateful
phase (the links between operations are not declared).

Bounded: a few examples per operation, a per-example deadline, no shrinking; a fraction of
generated bodies carry a live ``contextRef`` and path ``turnId`` so the success answers are
generated too, not only the errors.
"""

from __future__ import annotations

import itertools
import json
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

from servers.wire import openapi
from tests.support.identity import issuer_entry, jwks, rsa_key
from tests.support.runtime_harness import (
    APP_TOKEN,
    APPROVAL_TOKEN,
    CREDENTIALS,
    listening,
    reference_project,
    start_executor_process,
    start_serve,
    stop,
    write_config,
)

MAX_EXAMPLES = 20
LIVE_TOOLS = ("inspect-context", "propose-change")
SEEN: dict[str, list[tuple[str, str, int]]] = {}
_CALLS = itertools.count()
_CASES = itertools.count()
CONFIG = f"""
[generation]
max-examples = {MAX_EXAMPLES}
no-shrink = true
mode = "all"

[phases.stateful]
enabled = false

[checks]
positive_data_acceptance.enabled = false

[auth.openapi.bearer]
bearer = "{APP_TOKEN}"

[auth.openapi.approval]
api_key = "{APPROVAL_TOKEN}"
"""


@dataclass
class Runtime:
    url: str
    context_ref: str
    stderr: Path

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {APP_TOKEN}"},
        )
        with urllib.request.urlopen(req, timeout=10) as answer:
            return json.loads(answer.read())


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    root = tmp_path_factory.mktemp("openapi")
    executor, executor_url = start_executor_process(root)
    # an issuer (its key set a file: nothing fetched) and MCP: the metadata routes answer 200
    (root / "idp.jwks").write_text(json.dumps(jwks(rsa_key("k1"))))
    issuer = issuer_entry("", jwksFile="idp.jwks")
    del issuer["jwksUri"]
    credentials = {**CREDENTIALS, "issuers": [issuer]}
    proc = start_serve(write_config(root, executor_url, credentials=credentials), "--mcp")
    try:
        url = listening(proc)
        probe = Runtime(url, "", root / "serve.err")
        resolved = probe.call("POST", "/v1/context/resolve", {"objective": "authoring"})
        yield Runtime(url, resolved["contextRef"], probe.stderr)
    finally:
        stop(proc)
        stop(executor)


OBJECTIVES = list(reference_project().objective_by_id)
# the document as the code makes it for the reference build (the objectives enumerated); the
# runtime serves the generic one, with the same answers (test_the_served_document_is_the_code_s).
# Loaded at import: schemathesis 4.32.5's fixture-based loader uses a pytest attribute that
# pytest 9 removed.
schema = schemathesis.openapi.from_dict(
    openapi.document(OBJECTIVES), config=SchemathesisConfig.from_str(CONFIG)
)


def _with_live_refs(case: Any, runtime: Runtime) -> None:
    """Every other positive case (counted, not drawn: a fresh clone has no example database to
    replay) names the live context in its body or path, with a disclosed tool and a fresh call
    id, and a turn path names a fresh turn, so 200 and 409 are reached, not only 404."""
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return  # a negative case stays as generated: what it breaks is what it tests
    if next(_CASES) % 2:
        return
    body = case.body
    if isinstance(body, dict) and isinstance(body.get("contextRef"), str):
        body["contextRef"] = runtime.context_ref
        if isinstance(body.get("tool"), str):  # a tool the context disclosed
            body["tool"] = LIVE_TOOLS[len(body["tool"]) % len(LIVE_TOOLS)]
        if isinstance(body.get("callId"), str):  # a call no earlier case approved or rejected
            body["callId"] = f"{body['callId'][:200]}~{next(_CALLS)}"
    path = case.path_parameters or {}
    if "contextRef" in path:
        path["contextRef"] = runtime.context_ref  # its approval status, its trace
    if "turnId" in path:
        path["turnId"] = runtime.call("POST", "/v1/turns")["turnId"]
    if "objective" in path:  # an objective of the build: its endpoint's metadata
        path["objective"] = OBJECTIVES[len(str(path["objective"])) % len(OBJECTIVES)]


@schema.parametrize()
@settings(
    deadline=5000,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_every_answer_matches_the_served_document(case: Any, runtime: Runtime) -> None:
    _with_live_refs(case, runtime)
    answer = case.call_and_validate(base_url=runtime.url, timeout=10)
    phase = case.meta.phase.name.value if case.meta is not None else "?"
    SEEN.setdefault(case.operation.label, []).append((phase, case.method, answer.status_code))


def test_the_served_document_is_the_code_s(runtime: Runtime) -> None:
    """The served document is the generic one (it needs no credential, so it names none of the
    build's objectives); the run above generates from the same document with the objectives
    enumerated, which changes no answer's schema."""
    served = runtime.call("GET", "/v1/openapi.json")
    assert served == openapi.document()
    request = ["requestBody", "content", "application/json", "schema", "properties"]
    resolve = served["paths"]["/v1/context/resolve"]["post"]
    for key in request:
        resolve = resolve[key]
    assert "enum" not in resolve["objective"]
    generated = openapi.document(OBJECTIVES)
    assert {p: sorted(ops) for p, ops in generated["paths"].items()} == {
        p: sorted(ops) for p, ops in served["paths"].items()
    }
    for path, ops in served["paths"].items():
        for method, op in ops.items():
            assert op["responses"] == generated["paths"][path][method]["responses"]


def test_nothing_in_the_run_was_an_internal_error(runtime: Runtime) -> None:
    log = runtime.stderr.read_text(errors="replace")
    for bad in ("Traceback", "internal error", APP_TOKEN, APPROVAL_TOKEN):
        assert bad not in log, (bad, log[-2000:])


def test_the_run_reached_every_operation_s_answers() -> None:
    """Not vacuous: every operation was called, answered a success in some case, and refused
    an undeclared method with 405."""
    assert len(SEEN) == sum(len(ops) for ops in openapi.document(OBJECTIVES)["paths"].values())
    for operation, calls in SEEN.items():
        statuses = {status for _phase, method, status in calls if operation.startswith(method)}
        assert statuses & {200, 202}, (operation, sorted(statuses))
        assert any(status == 405 for *_, status in calls), operation
