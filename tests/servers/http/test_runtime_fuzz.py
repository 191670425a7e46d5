"""Whatever a client sends to a POST route (random JSON, random bytes, wrong types, duplicate
keys, deep nesting, huge bodies, odd headers), the runtime answers with a JSON body, never a
500, and every error carries a code; a body over 1 MiB is 413."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy.json.strict import loads
from servers.wire.limits import MAX_BODY_BYTES
from tests.support.runtime_harness import (
    APP_TOKEN,
    APPROVAL_TOKEN,
    OTHER_PROPOSAL,
    PROPOSAL,
    READ_ARGS,
    READER_TOKEN,
    ThreadedStack,
    stack_in_thread,
)

EXPECTED = {200, 202, 400, 401, 403, 404, 409, 413}
BEARER_ROUTES = {
    "/v1/turns": "",
    "/v1/turns/{turnId}/complete": "outcome",
    "/v1/context/resolve": "objective consumer environment deployment traceId turnId",
    "/v1/context/tools/execute": "contextRef tool callId arguments approvalId turnId",
    "/v1/context/disclosures": "contextRef turnId tools",
}
APPROVAL_ROUTES = {
    "/v1/context/tools/approve": "contextRef tool callId arguments reason",
    "/runtime/v1/context/tools/approve": "contextRef tool callId arguments reason",
}
ROUTES = {**BEARER_ROUTES, **APPROVAL_ROUTES}
READS_BODY = [r for r in ROUTES if r != "/v1/turns"]


@dataclass
class Target:
    stack: ThreadedStack
    host: str
    port: int
    context_ref: str
    learner_ref: str
    turn_id: str


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    with stack_in_thread(tmp_path_factory.mktemp("fuzz")) as threaded:
        s = threaded.stack
        ctx = threaded.run(s.resolve())["contextRef"]
        learner = threaded.run(s.resolve("learner", "tutor-app"))["contextRef"]
        turn = threaded.run(s.call("POST", "/v1/turns")).body["turnId"]
        url = urlsplit(s.runtime)
        assert url.hostname is not None and url.port is not None
        yield Target(threaded, url.hostname, url.port, ctx, learner, turn)


def send(
    target: Target,
    path: str,
    body: bytes | list[bytes],
    headers: Mapping[str, str | bytes],
    method: str = "POST",
) -> tuple[int, dict[str, str], bytes]:
    """One raw request (a list body is sent chunked, without a length)."""
    conn = http.client.HTTPConnection(target.host, target.port, timeout=30)
    try:
        if isinstance(body, list):
            conn.request(method, path, body=iter(body), headers=dict(headers), encode_chunked=True)
        else:
            conn.request(method, path, body=body, headers=dict(headers))
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def check(status: int, headers: dict[str, str], raw: bytes) -> Any:
    assert status in EXPECTED, (status, raw[:300])
    assert headers.get("Content-Type", "").startswith("application/json"), headers
    document = loads(raw)
    if status >= 400:
        error = document["error"]
        assert isinstance(error["code"], str) and error["code"]
        assert isinstance(error["message"], str)
    return document


def auth_for(route: str) -> dict[str, str]:
    if route in APPROVAL_ROUTES:
        return {"x-seif-tool-approval": APPROVAL_TOKEN}
    return {"Authorization": f"Bearer {APP_TOKEN}"}


def path_of(route: str, target: Target, turn: str | None = None) -> str:
    return route.replace("{turnId}", turn or target.turn_id)


# --- strategies -----------------------------------------------------------------------------

lone_surrogates = st.integers(0xD800, 0xDFFF).map(chr)  # sent as `\\udXXX` escapes
texts = st.text(max_size=40) | st.lists(st.characters() | lone_surrogates, max_size=6).map("".join)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=25,
)
header_text = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0xFF, blacklist_characters="\x7f"),
    max_size=60,
)


@st.composite
def plausible(draw: st.DrawFn, route: str) -> dict[str, Any]:
    """An object with the route's field names (and sometimes others), values mostly of the
    right kind and sometimes of any kind."""
    names = ROUTES[route].split()
    good: dict[str, st.SearchStrategy[Any]] = {
        "objective": st.sampled_from(["learner", "authoring", "nope", ""]),
        "consumer": st.sampled_from(["tutor-app", "course-authoring", "x" * 300]),
        "contextRef": st.sampled_from(["@ctx", "@learner", "ctx_unknown", ""]),
        "tool": st.sampled_from(["inspect-context", "search-knowledge", "propose-change", "x"]),
        "callId": st.sampled_from(["f1", "f2", "x" * 257]) | texts,
        "arguments": st.sampled_from([READ_ARGS, PROPOSAL, OTHER_PROPOSAL, {}]) | json_values,
        "approvalId": st.sampled_from(["apr_unknown", ""]),
        "turnId": st.sampled_from(["@turn", "turn_unknown"]),
        "reason": texts | st.just("   ") | st.just("r" * 5000),
        "outcome": st.sampled_from(["COMPLETED", "FAILED", "DONE"]),
        "tools": st.lists(st.sampled_from(["inspect_context", "", "x"]) | texts, max_size=3),
    }
    body: dict[str, Any] = {}
    for name in names:
        if draw(st.integers(0, 9)) == 0:
            continue  # missing
        kind = good.get(name, json_values)
        body[name] = draw(json_values if draw(st.integers(0, 5)) == 0 else kind)
    if draw(st.integers(0, 9)) == 0:
        body[draw(st.text(min_size=1, max_size=8))] = draw(json_values)
    return body


def resolve_refs(value: Any, target: Target) -> Any:
    refs = {"@ctx": target.context_ref, "@learner": target.learner_ref, "@turn": target.turn_id}
    if isinstance(value, dict):
        return {k: resolve_refs(v, target) for k, v in value.items()}
    return refs.get(value, value) if isinstance(value, str) else value


@st.composite
def bodies(draw: st.DrawFn, route: str) -> Any:
    """bytes, or a JSON value (with ``@ctx`` style placeholders) to encode."""
    kinds = ["plausible", "plausible", "json", "bytes", "dupe", "deep", "big", "odd"]
    kind = draw(st.sampled_from(kinds))
    if kind == "plausible":
        return draw(plausible(route))
    if kind == "big":  # large but within the limit, in some field
        body = draw(plausible(route))
        name = draw(st.sampled_from([*ROUTES[route].split(), "extra"]))
        size = draw(st.integers(1, MAX_BODY_BYTES - 200))
        body[name] = draw(st.sampled_from(["", "é", "[", "\\"])) + "x" * size
        return body
    if kind == "json":
        return draw(json_values)
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "dupe":
        body = draw(plausible(route)) or {"objective": "learner"}
        key = draw(st.sampled_from(sorted(body)))
        text = json.dumps(body)
        return text[:-1].encode() + f", {json.dumps(key)}: 1}}".encode()
    if kind == "deep":
        depth = draw(st.sampled_from([50, 900, 1000, 5000, 100_000]))
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
        inner = (opener * depth + "1" + closer * depth).encode()
        if draw(st.booleans()):
            return inner
        return b'{"contextRef":"@ctx","tool":"inspect-context","callId":"deep","arguments":' + (
            inner + b"}"
        )
    return draw(
        st.sampled_from([b"NaN", b'{"objective": NaN}', b'{"a": 1e999}', b"\xef\xbb\xbf{}", b""])
    )


@st.composite
def headers(draw: st.DrawFn, route: str) -> dict[str, str]:
    found: dict[str, str] = {}
    choice = draw(st.integers(0, 6))
    if choice <= 3:
        found.update(auth_for(route))
    elif choice == 4:
        found["Authorization"] = "Bearer " + draw(header_text)
    elif choice == 5:
        found["Authorization"] = f"Bearer {READER_TOKEN}"
    if draw(st.booleans()):
        found["x-seif-tool-approval"] = draw(st.sampled_from([APPROVAL_TOKEN, ""])) or draw(
            header_text
        )
    if draw(st.booleans()):
        found["x-seif-approver"] = draw(header_text)
    found["Content-Type"] = draw(st.sampled_from(["application/json", "text/plain", "x/y; a=b"]))
    return {k: v.strip() for k, v in found.items()}


def encode(body: Any, target: Target) -> bytes:
    if isinstance(body, bytes):
        return body.replace(b'"@ctx"', json.dumps(target.context_ref).encode())
    return json.dumps(resolve_refs(body, target)).encode()


# --- properties -----------------------------------------------------------------------------


@settings(
    max_examples=250,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_no_request_body_gives_a_500(target: Target, data: st.DataObject) -> None:
    route = data.draw(st.sampled_from(sorted(ROUTES)), label="route")
    body = encode(data.draw(bodies(route), label="body"), target)
    sent = data.draw(headers(route), label="headers")
    turn = data.draw(st.sampled_from([None, "turn_unknown", "%00", "a" * 300]), label="turn")
    status, got, raw = send(target, path_of(route, target, turn), body, sent)
    check(status, got, raw)


# what aiohttp's HTTP parser lets through to the application: visible ASCII, tab, space and
# the bytes 0x80-0xFF (control characters and over-long lines are refused before the app, with
# aiohttp's own plain-text 400)
header_bytes = st.binary(max_size=80).map(
    lambda b: bytes(c for c in b if c >= 0x20 and c != 0x7F).strip()
)


@settings(max_examples=120, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_odd_header_bytes_never_give_a_500(target: Target, data: st.DataObject) -> None:
    route = data.draw(st.sampled_from([*sorted(ROUTES), "/v1/context/tools/pending"]))
    sent: dict[str, str | bytes] = {}
    for name, good in (
        ("Authorization", f"Bearer {APP_TOKEN}".encode()),
        ("x-seif-tool-approval", APPROVAL_TOKEN.encode()),
    ):
        choice = data.draw(st.integers(0, 3))
        if choice:
            sent[name] = (
                good
                if choice == 1
                else (b"Bearer " if choice == 2 else b"") + data.draw(header_bytes)
            )
    sent["x-seif-approver"] = data.draw(header_bytes)
    body = {
        "contextRef": target.context_ref,
        "tool": "propose-change",
        "callId": "hdr",
        "arguments": PROPOSAL,
        "reason": "header fuzz",
    }
    method = "GET" if route.endswith("pending") else "POST"
    payload = b"" if method == "GET" else json.dumps(body).encode()
    status, got, raw = send(target, path_of(route, target), payload, sent, method)
    check(status, got, raw)


@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize("size", [MAX_BODY_BYTES + 1, 3 * MAX_BODY_BYTES])
def test_bodies_over_one_mebibyte_are_413(target: Target, route: str, size: int) -> None:
    body = b'{"objective": "' + b"x" * size + b'"}'
    status, got, raw = send(target, path_of(route, target), body, auth_for(route))
    assert status == 413, (route, status, raw[:200])
    assert check(status, got, raw)["error"]["code"] == "TOO_LARGE"


@pytest.mark.parametrize("route", sorted(READS_BODY))
def test_chunked_bodies_over_one_mebibyte_are_413(target: Target, route: str) -> None:
    chunks = [b'{"objective": "'] + [b"y" * 65536] * 17 + [b'"}']
    status, got, raw = send(target, path_of(route, target), chunks, auth_for(route))
    assert status == 413, (route, status, raw[:200])
    check(status, got, raw)


@pytest.mark.parametrize("route", sorted(READS_BODY))
def test_a_body_of_exactly_one_mebibyte_is_read(target: Target, route: str) -> None:
    prefix, suffix = b'{"zz": "', b'"}'
    body = prefix + b"z" * (MAX_BODY_BYTES - len(prefix) - len(suffix)) + suffix
    assert len(body) == MAX_BODY_BYTES
    status, got, raw = send(target, path_of(route, target), body, auth_for(route))
    assert status == 400, (route, status, raw[:200])  # read, then refused as an unknown field
    assert "zz" in check(status, got, raw)["error"]["message"]


def test_the_fuzzed_runtime_still_works(target: Target) -> None:
    s = target.stack.stack
    receipt = target.stack.run(
        s.execute(target.context_ref, "search-knowledge", "after", {"query": "median", "limit": 1})
    )
    assert receipt["status"] in ("SUCCEEDED", "DENIED")
    ready = target.stack.run(s.call("GET", "/v1/ready", headers={}))
    assert ready.status == 200


# --- regressions found by the properties above -------------------------------------------------

SURROGATE_BODIES = {
    "/v1/context/resolve": '{"objective": "\\ud800"}',
    "/v1/context/tools/execute": (
        '{"contextRef": "@ctx", "tool": "inspect-context", "callId": "\\udfff",'
        ' "arguments": {"ref": "course/data-literacy/module-2"}}'
    ),
    "/v1/context/tools/approve": (
        '{"contextRef": "@ctx", "tool": "propose-change", "callId": "s1",'
        ' "arguments": {"\\udc80": 1}, "reason": "ok"}'
    ),
    "/v1/context/disclosures": '{"contextRef": "@ctx", "tools": ["\\ud83d"]}',
}


@pytest.mark.parametrize("route", sorted(SURROGATE_BODIES))
def test_lone_surrogates_are_400(target: Target, route: str) -> None:
    body = SURROGATE_BODIES[route].replace("@ctx", target.context_ref).encode()
    status, got, raw = send(target, route, body, auth_for(route))
    assert status == 400, raw
    assert check(status, got, raw)["error"]["code"] == "BAD_REQUEST"
    paired = body.replace(b"\\ud800", b"\\ud83d\\ude00")  # a valid pair is text
    if paired != body:
        status, got, raw = send(target, route, paired, auth_for(route))
        assert status == 400 and b"OBJECTIVE_UNKNOWN" in raw


@pytest.mark.parametrize("route", sorted(SURROGATE_BODIES))
def test_duplicate_keys_are_400_naming_the_key(target: Target, route: str) -> None:
    body = b'{"objective": "learner", "nested": {"k": 1, "k": 2}}'
    status, got, raw = send(target, route, body, auth_for(route))
    assert status == 400, raw
    error = check(status, got, raw)["error"]
    assert error["code"] == "BAD_REQUEST" and "`k` appears more than once" in error["message"]


def test_undecodable_approval_headers(target: Target) -> None:
    pending = "/v1/context/tools/pending"
    status, got, raw = send(target, pending, b"", {"x-seif-tool-approval": b"\x80\xff"}, "GET")
    assert status == 401 and check(status, got, raw)["error"]["code"] == "UNAUTHENTICATED"
    body = json.dumps(
        {
            "contextRef": target.context_ref,
            "tool": "propose-change",
            "callId": "h1",
            "arguments": PROPOSAL,
            "reason": "ok",
        }
    ).encode()
    approver: dict[str, str | bytes] = {
        "x-seif-tool-approval": APPROVAL_TOKEN,
        "x-seif-approver": b"ops-\xe9",
    }
    status, got, raw = send(target, "/v1/context/tools/approve", body, approver)
    assert status == 400 and check(status, got, raw)["error"]["code"] == "BAD_REQUEST"
    utf8 = {**approver, "x-seif-approver": "ops-é".encode()}
    status, got, raw = send(target, "/v1/context/tools/approve", body, utf8)
    assert status == 200, raw


def test_the_approval_token_is_compared_as_equal_length_digests(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The approval credential was compared raw: ``hmac.compare_digest`` returns early when the
    lengths differ, so the token's length showed in the timing. Now every comparison is of two
    keyed digests of one length, whatever is presented."""
    import hmac

    lengths: list[tuple[int, int]] = []
    real = hmac.compare_digest

    def recording(a: bytes, b: bytes) -> bool:
        lengths.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", recording)
    pending = "/v1/context/tools/pending"
    for presented in (b"x", b"y" * 300, APPROVAL_TOKEN.encode()[:-1], APPROVAL_TOKEN.encode()):
        status, _, _ = send(target, pending, b"", {"x-seif-tool-approval": presented}, "GET")
        assert status == (200 if presented == APPROVAL_TOKEN.encode() else 401)
    assert lengths and all(pair == (32, 32) for pair in lengths), lengths
