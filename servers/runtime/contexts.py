"""Contexts: resolving one (its disclosure decided by the engine, saved, then its ``DISCLOSED``
record logged), finding one again for the caller that resolved it (its credential and subject:
:mod:`servers.runtime.callers`), and the engine's view of it
(:class:`~policy.engine.state.ContextState`: as resolved, plus its intents and approvals).

A context never changes once saved, so what is derived from it is kept (bounded:
:mod:`servers.support.memo`): its resolved state, and each context's intents as this process
last knew them (:class:`~servers.runtime.values.IntentsView`, which the store's transaction,
not this cache, arbitrates).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from policy import reasons as R
from policy.engine.disclosure import Disclosure, disclose, disclosure_context
from policy.engine.state import CONTEXT_TTL_MS, ContextState, with_history
from policy.ir import Project
from policy.json.canonical import canonical_cbor, decode_canonical_cbor
from policy.json.value import thaw
from servers.executor.interface import Executors, Observation
from servers.executor.observing import Observer
from servers.identity.principal import Authenticated
from servers.runtime import events, redact
from servers.runtime.callers import Caller, resolver_of
from servers.runtime.metrics import Metrics
from servers.runtime.readiness import Readiness, required_tools
from servers.runtime.records import Recorder
from servers.runtime.resolved import Resolved, ResolvedCache
from servers.runtime.shadow import ResolveJob
from servers.runtime.shadowing import Shadowing
from servers.runtime.values import IntentsView
from servers.store.interface import DispatchStore
from servers.store.rows import ApprovalRow, ContextRow, IntentRow
from servers.support import memo
from servers.wire.answers import ToolState
from servers.wire.errors import ErrorCode, Refused
from servers.wire.requests import ReportRequest, ResolveRequest


@dataclass(frozen=True, slots=True)
class Opened:
    """A context just resolved: its ref, expiry, the resolution's input-determined parts, its
    coordinates and the fields of its ``DISCLOSED`` record."""

    context_ref: str
    expires_at: int
    resolved: Resolved
    coords: Mapping[str, Any]
    fields: Mapping[str, Any]
    shadow_job: ResolveJob | None = None
    """Its resolution's job for a shadow build, if one is loaded."""


class Contexts:
    """Resolve contexts, and read them back as the engine needs them."""

    def __init__(
        self,
        *,
        store: DispatchStore,
        recorder: Recorder,
        shadowing: Shadowing,
        executors: Executors,
        metrics: Metrics | None,
    ) -> None:
        self.store = store
        self._recorder = recorder
        self._shadowing = shadowing
        self._executors = executors
        self._observer = Observer(executors)
        self._metrics = metrics
        self._build = recorder.build
        self._clock = recorder.clock
        self._disclosed: dict[str, Disclosure] = {}
        """Disclosures of contexts just resolved, until their state is first built."""
        self._states: dict[str, ContextState] = {}
        self._resolved = ResolvedCache()
        self.intents = IntentsView()
        """Each context's intents for the engine's first look at a call."""

    @property
    def ir(self) -> Project:
        return self._build.project

    # ------------------------------------------------------------------ availability

    def watch(self, changed: Callable[[frozenset[str]], None]) -> None:
        """Call ``changed(tool ids)`` when a backend tells their availability may have changed
        (:meth:`servers.executor.interface.Executors.watch`)."""
        self._executors.watch(changed)

    async def observe(self, tool_id: str) -> Observation:
        """The tool's availability now; concurrent refreshes of one tool share one request."""
        return await self._observer.observe(tool_id)

    async def readiness(self) -> Readiness:
        """Each bound tool's state: ``READY`` when its executor describes exactly the declared
        contract, ``INCOMPATIBLE`` when it describes another, ``UNAVAILABLE`` otherwise; and
        ``UNBOUND`` for each tool an objective requires (:mod:`servers.runtime.readiness`) that
        the bindings do not bind; with the reason each observation not ``READY`` gives."""
        states: dict[str, ToolState] = {}
        reasons: dict[str, str] = {}
        required = required_tools(self.ir)
        for tool in self.ir.tools:
            if self._executors.get(tool.id) is None:
                if tool.id in required:
                    states[tool.id] = "UNBOUND"
                continue
            seen = await self.observe(tool.id)
            exact = (seen.get("state"), seen.get("version"), seen.get("contractDigest"))
            if exact == ("READY", tool.version, tool.contract_digest):
                states[tool.id] = "READY"
                continue
            states[tool.id] = "INCOMPATIBLE" if seen.get("state") == "READY" else "UNAVAILABLE"
            if isinstance(detail := seen.get("detail"), str):
                reasons[tool.id] = detail
        return Readiness(states, reasons)

    # ------------------------------------------------------------------ resolve

    def caller(self, found: Authenticated) -> Caller:
        """Who an authenticated request is, as this runtime keys, decides and records by."""
        return Caller.of(found, self._recorder.fingerprint_key)

    async def resolve(
        self, request: ResolveRequest, turn_id: str | None, credential: Authenticated
    ) -> bytes:
        """The answer's JSON body (:meth:`open`); its input-determined parts are computed once
        (pure)."""
        opened = await self.open(request, turn_id, credential)
        return opened.resolved.body(
            context_ref=opened.context_ref, build=self._build.digest, expires_at=opened.expires_at
        )

    async def open(
        self, request: ResolveRequest, turn_id: str | None, credential: Authenticated
    ) -> Opened:
        """Resolve a new context (saved, then its ``DISCLOSED`` record logged): refused
        ``OBJECTIVE_UNKNOWN``, ``RESOLUTION_BLOCKED`` (logged too), or the context.
        ``credential`` owns it: its id and subject (fingerprinted) are stored with it, its id
        named in its ``DISCLOSED`` record with the recorded principal (for a token of an
        issuer), and to any other credential or subject the context does not exist."""
        caller = self.caller(credential)
        objective = request.objective
        coords = {
            "consumer": request.consumer or "",
            "environment": request.environment or "",
            "deployment": request.deployment or "",
            "trace": request.trace_id or "",
        }
        observations = await self._observer.observe_all(self.ir.candidate_tools.get(objective, ()))
        now = self._clock()
        found = self._resolved.get(self.ir, objective, observations, coords, caller.principal)
        disclosure = found.disclosure
        if disclosure.reason == R.OBJECTIVE_UNKNOWN:
            message = f"objective `{objective[:64]}` is not declared by this build"
            raise Refused(ErrorCode.OBJECTIVE_UNKNOWN, message)
        coords["objective"] = objective
        context_ref = "ctx_" + secrets.token_urlsafe(18) if disclosure.resolved else None
        job = self._shadowing.resolution(
            context_ref, coords, now, observations, found.summary, caller.principal
        )
        mark = self._shadowing.mark(job)
        fields = {
            "objective": objective,
            "resolvedAt": now,
            "observations": found.observations or observations,
            "disclosure": found.summary,
            "credential": caller.credential,
            **caller.fields(),
        }
        disclosed = self._recorder.prepared("DISCLOSED", context_ref, coords, **fields, **mark)
        if context_ref is None:
            await self._recorder.append(disclosed)
            self._shadowing.put(job, mark)
            causes, omitted = events.blocked_causes(disclosure)
            raise Refused(ErrorCode.RESOLUTION_BLOCKED, causes=causes, omitted=omitted)
        encoded = found.observations.cbor if found.observations else canonical_cbor(observations)
        row = self._row(context_ref, coords, encoded, now, turn_id, caller)
        await self.store.save_context_async(row, record=disclosed)  # saved, then logged
        self._shadowing.put(job, mark)
        memo.keep(self._disclosed, context_ref, disclosure)
        self.intents.opened(context_ref)
        if self._metrics is not None:
            self._metrics.active.opened(row.expires_at)
        return Opened(context_ref, row.expires_at, found, coords, fields, job)

    def _row(
        self,
        context_ref: str,
        coords: Mapping[str, Any],
        observations: bytes,
        now: int,
        turn_id: str | None,
        caller: Caller,
    ) -> ContextRow:
        return ContextRow(
            context_ref=context_ref,
            build=self._build.digest,
            objective=coords["objective"],
            coordinates=coords,
            observations=observations,
            resolved_at=now,
            expires_at=now + CONTEXT_TTL_MS,
            binding_revision=self._recorder.bindings.revision,
            turn_id=turn_id,
            credential_id=caller.credential,
            principal=caller.recorded,
        )

    async def disclosed_again(self, opened: Opened) -> None:
        """Log the ``DISCLOSED`` record of a context's disclosure once more (what it was
        resolved on, so it replays as the first did): a client shown the list again."""
        mark = self._shadowing.mark(opened.shadow_job)  # compared again, as a what-if would
        await self._recorder.append(
            self._recorder.prepared(
                "DISCLOSED", opened.context_ref, opened.coords, **opened.fields, **mark
            )
        )
        self._shadowing.put(opened.shadow_job, mark)

    async def report(self, request: ReportRequest, credential: Authenticated) -> None:
        """Log what the application says it bound for the model (``REPORTED``): 404
        ``CONTEXT_UNKNOWN`` for a context ``credential`` did not resolve."""
        row = self.owned(request.context_ref, credential)
        if row is None:
            raise Refused(ErrorCode.CONTEXT_UNKNOWN)
        subject = credential.principal.subject
        disclosed = {t.name for t in self.disclosure_of(row, subject).tools}
        names = list(request.tools)
        await self._recorder.write(  # names shortened and counted: redact.names_field
            "REPORTED",
            row.context_ref,
            row.coordinates,
            **redact.names_field("tools", names),
            **redact.names_field("undisclosed", [n for n in names if n not in disclosed]),
        )

    # ------------------------------------------------------------------ reading back

    def row(self, context_ref: str) -> ContextRow | None:
        """The context, if this build resolved it."""
        row = self.store.context(context_ref)
        return row if row is not None and row.build == self._build.digest else None

    def owned(self, context_ref: str, credential: Authenticated | Caller) -> ContextRow | None:
        """The context of this build that ``credential`` resolved (the same credential, or
        issuer and client, and the same subject); None for any other (a leaked contextRef is
        no capability for another application, nor for another user of the same one)."""
        row = self.row(context_ref)
        if row is None:
            return None
        caller = credential if isinstance(credential, Caller) else self.caller(credential)
        return row if caller.owns(row) else None

    def coordinates(self, context_ref: str) -> Mapping[str, Any]:
        """The context's coordinates (none for a context the store does not hold)."""
        row = self.store.context(context_ref)
        return row.coordinates if row is not None else {}

    def disclosure_of(self, row: ContextRow, subject: str | None = None) -> Disclosure:
        """The context's disclosure, recomputed from its recorded observations and principal
        (pure, so equal to what was disclosed) after a restart or an eviction, cached
        otherwise. ``subject``: the subject in clear, when its owner asks (see
        :meth:`resolved_state`)."""
        return self.resolved_state(row, subject).disclosure

    def resolved_state(self, row: ContextRow, subject: str | None = None) -> ContextState:
        """The context as resolved, before any call: immutable, so kept (at most
        :data:`servers.support.memo.LIMIT` of them, the least recently used dropped first).

        Its disclosure is recomputed with the principal recorded with it; the store keeps the
        subject only as a fingerprint, so a ``when`` that reads ``principal.subject`` needs it
        in clear: ``subject``, which its owner's requests give. Without it (an approver's
        request) the fingerprint stands in, and that state is not kept (the next request of
        its owner computes it again); a call is only ever decided on its owner's."""
        found = memo.cached(self._states, row.context_ref)
        if found is None:
            disclosure = self._disclosed.pop(row.context_ref, None)
            keep = True
            if disclosure is None:
                observations = thaw(decode_canonical_cbor(row.observations))
                reads = self.ir.disclosure_principal.get(row.objective, frozenset())
                keep = subject is not None or row.subject is None or not _subject_in(reads)
                disclosure = disclose(
                    self.ir,
                    row.objective,
                    observations,
                    context=row.coordinates,
                    principal=resolver_of(row, subject),
                )
            found = ContextState(
                context_ref=row.context_ref,
                disclosure=disclosure,
                expires_at=row.expires_at,
                coordinates=disclosure_context(row.objective, row.coordinates),
                fingerprint_key=self._recorder.fingerprint_key,
            )
            if keep:
                memo.keep(self._states, row.context_ref, found)
        return found

    def state_of(
        self,
        row: ContextRow,
        intents: list[IntentRow] | None = None,
        approvals: list[ApprovalRow] | None = None,
        subject: str | None = None,
    ) -> ContextState:
        """The engine's view of a stored context: as resolved, plus its intents and approvals
        (``subject``: as :meth:`resolved_state` takes it)."""
        intents = self.store.intents(row.context_ref) if intents is None else intents
        base = self.resolved_state(row, subject)
        if approvals is None:
            approvals = self.store.approvals(row.context_ref)
        return with_history(base, intents, approvals)

    def known_intents(self, context_ref: str) -> list[IntentRow]:
        """The context's intents as this process last knew them (read once, then kept up to
        date from its own commits)."""
        return self.intents.of(self.store, context_ref)


def _subject_in(reads: frozenset[str]) -> bool:
    """Whether a disclosure reading ``reads`` of ``principal`` may read its subject."""
    return "subject" in reads or "*" in reads
