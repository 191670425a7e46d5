"""The approval server's client of the runtime: the pending list, approve and reject, with the
runner approval credential in ``x-seif-tool-approval`` and the approver in ``x-seif-approver``.

No redirect is followed and no proxy or other setting of the environment is read (the runner
credential goes to the runtime named by ``--runtime`` and nowhere else). A runtime that cannot be
reached, or that does not answer in time, is ``503 RUNTIME_UNAVAILABLE``; one whose answer is not
what the runtime's API says (not JSON, a 5xx, a refusal of the runner credential) is
``502 RUNTIME_ERROR``. The runtime's own 4xx answers are returned for the desk to map.
"""

from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import aiohttp

from policy.json.strict import dumps, loads
from servers.wire.errors import ErrorCode, Refused

TIMEOUT_S = 10.0
MAX_ANSWER_BYTES = 16 << 20
"""The largest runtime answer read: a page of the pending list is at most 4 MiB, or one call
(its arguments at most 1 MiB: ``servers.runtime.held.MAX_ONE_BYTES``) and its fields."""


@dataclass(frozen=True, slots=True)
class Answer:
    """A 2xx or 4xx answer of the runtime: its status and its JSON body."""

    status: int
    body: Any

    @property
    def code(self) -> str | None:
        error = self.body.get("error") if isinstance(self.body, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        return code if isinstance(code, str) else None


class Upstream:
    """One runtime, one session (created on first use, closed by :meth:`close`)."""

    def __init__(self, base_url: str, runner_token: str, *, timeout_s: float = TIMEOUT_S) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = runner_token
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:
        return f"Upstream({self.base_url!r})"  # never the token

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def pending(
        self, limit: int, after: str | None = None, call: tuple[str, str] | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """A page of the runtime's ``GET /v1/context/tools/pending``: ``limit`` calls at most
        after the cursor ``after``, or the one call ``(contextRef, callId)``; its calls and the
        cursor of the next page. A cursor the runtime refuses is the client's: 400."""
        query: dict[str, str] = {"limit": str(limit)}
        if after is not None:
            query["after"] = after
        if call is not None:
            query["contextRef"], query["callId"] = call
        answer = await self._request("GET", "/v1/context/tools/pending", None, {}, query)
        body = answer.body if isinstance(answer.body, dict) else {}
        refused = ErrorCode.BAD_REQUEST
        if after is not None and (answer.status, answer.code) == (refused.status, refused.code):
            raise Refused(refused, "`after` must be the `next` of a page of this list")
        listed, after_it = body.get("pending"), body.get("next")
        if answer.status != HTTPStatus.OK or not isinstance(listed, list):
            raise _bad("the runtime's pending list is not what its API describes")
        if not (after_it is None or isinstance(after_it, str)):
            raise _bad("the runtime's pending list is not what its API describes")
        return [item for item in listed if isinstance(item, dict)], after_it

    async def decide(self, kind: str, entry: dict[str, Any], approver: str, reason: str) -> Answer:
        """``POST /v1/context/tools/approve`` or ``/reject`` of exactly ``entry`` (the runtime's
        own pending entry: its contextRef, tool, callId and arguments)."""
        body = {k: entry[k] for k in ("contextRef", "tool", "callId", "arguments")}
        body["reason"] = reason
        return await self._request(
            "POST", f"/v1/context/tools/{kind}", body, {"x-seif-approver": approver}
        )

    async def _request(
        self,
        method: str,
        path: str,
        body: Any,
        headers: dict[str, str],
        query: dict[str, str] | None = None,
    ) -> Answer:
        session = self._session
        if session is None:
            session = self._session = aiohttp.ClientSession(timeout=self._timeout)
        sent = {"x-seif-tool-approval": self._token, **headers}
        data = None if body is None else dumps(body).encode()
        if data is not None:
            sent["Content-Type"] = "application/json"
        try:
            async with session.request(
                method,
                self.base_url + path,
                params=query,
                data=data,
                headers=sent,
                allow_redirects=False,
            ) as r:
                raw = await _body(r)
                status = r.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise Refused(
                ErrorCode.RUNTIME_UNAVAILABLE,
                f"the runtime at {self.base_url} cannot be reached ({type(exc).__name__});"
                " nothing is known to have been decided: refresh and try again",
            ) from None
        return _answer(status, raw)


async def _body(response: aiohttp.ClientResponse) -> bytes:
    """The whole body, up to :data:`MAX_ANSWER_BYTES` (one byte more says it was larger)."""
    chunks, size = [], 0
    async for chunk in response.content.iter_chunked(1 << 16):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            break
    return b"".join(chunks)


def _answer(status: int, raw: bytes) -> Answer:
    if status == HTTPStatus.UNAUTHORIZED:
        raise _bad("the runtime refused the runner approval credential (check its value)")
    answered = HTTPStatus.OK <= status < HTTPStatus.INTERNAL_SERVER_ERROR
    if len(raw) > MAX_ANSWER_BYTES or not answered:
        raise _bad(f"the runtime answered {status}")
    try:
        return Answer(status, loads(raw))
    except ValueError:
        raise _bad("the runtime's answer is not JSON") from None


def _bad(message: str) -> Refused:
    return Refused(ErrorCode.RUNTIME_ERROR, message)
